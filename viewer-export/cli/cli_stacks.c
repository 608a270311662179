/* viewer-export/cli/cli_stacks.c: the options that say how stacks are
 * shown (--raw-names, --hide, --focus, --keep-wrappers, --native-frames),
 * the same for every command that shows stacks (the command table's
 * shows_stacks): their rows join the command's own in its parse
 * (cli_options.c), which hands them here; once the options are read they
 * go to model/stack_display.h, which applies them to every snapshot read.
 * State: the options being read and the kept patterns, for the life of
 * the process. */
#include "cli.h"
#include "cli_options.h"
#include "stack_display.h"

#include <stdlib.h>
#include <string.h>

enum {
    STACK_RAW_NAMES = 0x500,
    STACK_HIDE,
    STACK_FOCUS,
    STACK_KEEP_WRAPPERS,
    STACK_NATIVE_FRAMES,
};

static const tdm_cli_option stack_rows[] = {
    {.text = "stack options (every command that shows stacks):"},
    {.name = "raw-names", .code = STACK_RAW_NAMES,
     .help = "function names as recorded (C++ names mangled, clone\n"
             "suffixes such as .isra.0 kept); by default demangled and\n"
             "without clone suffixes"},
    {.name = "hide", .code = STACK_HIDE, .has_arg = required_argument, .metavar = "REGEX",
     .value_is = "a regular expression",
     .help = "drop frames whose function matches from the top of\n"
             "stacks, like the allocation wrappers tidemark drops\n"
             "itself (repeatable; TIDEMARK_CONF's hide=REGEX too)"},
    {.name = "focus", .code = STACK_FOCUS, .has_arg = required_argument, .metavar = "REGEX",
     .value_is = "a regular expression",
     .help = "list only the sites whose stack has a frame matching\n"
             "(repeatable); totals and timelines stay the whole\n"
             "program's"},
    {.name = "keep-wrappers", .code = STACK_KEEP_WRAPPERS,
     .help = "keep the frames of allocation wrappers (cudaMalloc, the\n"
             "program's own wrapper...) at the top of stacks"},
    {.name = "native-frames", .code = STACK_NATIVE_FRAMES,
     .help = "stacks with Python frames (stacks=all): shown and\n"
             "grouped with their native frames merged in (the C++\n"
             "below the Python call, the interpreter's between);\n"
             "by default by their Python frames, innermost user\n"
             "frame first"},
    {0},
};
const tdm_cli_options tdm__cli_stack_options = {stack_rows, 18};

/* The options of the parse under way (tdm__cli_stack_begin), and the
 * patterns they name, kept: stack_display.h holds on to them. */
static tdm_stack_display_options given;
static const char **hide, **focus;

int tdm__cli_stack_begin(const char *cmd, int argc)
{
    free(hide);
    free(focus);
    memset(&given, 0, sizeof given);
    hide = calloc((size_t)argc + 1, sizeof *hide);
    focus = calloc((size_t)argc + 1, sizeof *focus);
    if (!hide || !focus) {
        fprintf(stderr, "tidemark %s: out of memory\n", cmd);
        return TDM_EXIT_TOOL_ERROR;
    }
    given.hide = hide;
    given.focus = focus;
    return TDM_EXIT_OK;
}

int tdm__cli_stack_take(int code, const char *value)
{
    switch (code) {
    case STACK_RAW_NAMES:
        given.raw_names = 1;
        return 1;
    case STACK_KEEP_WRAPPERS:
        given.keep_wrappers = 1;
        return 1;
    case STACK_NATIVE_FRAMES:
        given.native_frames = 1;
        return 1;
    case STACK_HIDE: /* (as many as argc holds words, the room begin made) */
        hide[given.hide_count++] = value;
        return 1;
    case STACK_FOCUS:
        focus[given.focus_count++] = value;
        return 1;
    default:
        return 0;
    }
}

int tdm__cli_stack_apply(const char *cmd)
{
    char err[256];
    if (tdm__stack_display_configure(&given, err, sizeof err) != 0)
        return tdm__cli_usage(cmd, "%s", err);
    return TDM_EXIT_OK;
}
