/* viewer-export/cli/cli_stacks.c: the options that say how stacks are
 * shown (--raw-names, --hide, --focus, --keep-wrappers, --native-frames),
 * the same for every command that shows stacks; taken out of the arguments
 * before the command parses its own, and handed to model/stack_display.h, which
 * applies them to every snapshot read.  State: the kept patterns, for the
 * life of the process. */
#include "cli.h"
#include "stack_display.h"

#include <stdlib.h>
#include <string.h>

void tdm__cli_stack_options_help(FILE *out)
{
    fputs("stack options (every command that shows stacks):\n"
          "  --raw-names     function names as recorded (C++ names mangled, clone\n"
          "                  suffixes such as .isra.0 kept); by default demangled and\n"
          "                  without clone suffixes\n"
          "  --hide REGEX    drop frames whose function matches from the top of\n"
          "                  stacks, like the allocation wrappers tidemark drops\n"
          "                  itself (repeatable; TIDEMARK_CONF's hide=REGEX too)\n"
          "  --focus REGEX   list only the sites whose stack has a frame matching\n"
          "                  (repeatable); totals and timelines stay the whole\n"
          "                  program's\n"
          "  --keep-wrappers keep the frames of allocation wrappers (cudaMalloc, the\n"
          "                  program's own wrapper...) at the top of stacks\n"
          "  --native-frames stacks with Python frames (stacks=all): shown and\n"
          "                  grouped with their native frames merged in (the C++\n"
          "                  below the Python call, the interpreter's between);\n"
          "                  by default by their Python frames, innermost user\n"
          "                  frame first\n",
          out);
}

/* The value of option `name` at argv[*i] ("--hide=R" or "--hide R"), or
 * NULL when argv[*i] is not it; *missing when the value is. */
static const char *value_of(const char *name, char **argv, int argc, int *i, int *missing)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int tdm__cli_stack_options(const char *cmd, int *argc, char **argv)
{
    static const char **hide, **focus;
    size_t nh = 0, nf = 0;
    tdm_stack_display_options o = {0};
    free(hide);
    free(focus);
    hide = calloc((size_t)*argc + 1, sizeof *hide);
    focus = calloc((size_t)*argc + 1, sizeof *focus);
    if (!hide || !focus) {
        fprintf(stderr, "tidemark %s: out of memory\n", cmd);
        return TDM_EXIT_TOOL_ERROR;
    }
    int out = 1, i = 1;
    for (; i < *argc && strcmp(argv[i], "--") != 0; i++) {
        int missing = 0;
        const char *v;
        if (strcmp(argv[i], "--raw-names") == 0) {
            o.raw_names = 1;
        } else if (strcmp(argv[i], "--keep-wrappers") == 0) {
            o.keep_wrappers = 1;
        } else if (strcmp(argv[i], "--native-frames") == 0) {
            o.native_frames = 1;
        } else if ((v = value_of("--hide", argv, *argc, &i, &missing))) {
            hide[nh++] = v;
        } else if ((v = value_of("--focus", argv, *argc, &i, &missing))) {
            focus[nf++] = v;
        } else if (missing) {
            return tdm__cli_usage(cmd, "option '%s' needs a regular expression", argv[i]);
        } else {
            argv[out++] = argv[i];
        }
    }
    while (i < *argc)
        argv[out++] = argv[i++];
    argv[out] = NULL;
    *argc = out;
    o.hide = hide;
    o.hide_count = nh;
    o.focus = focus;
    o.focus_count = nf;
    char err[256];
    if (tdm__stack_display_configure(&o, err, sizeof err) != 0)
        return tdm__cli_usage(cmd, "%s", err);
    return TDM_EXIT_OK;
}
