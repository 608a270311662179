/* viewer-export/cli/cmd_import.c: `tidemark import FILE [-o OUT.tdm]`: reads
 * another tool's file with the importer of its row in import_formats.c
 * (chosen by --format, else recognized from the file's first bytes) and
 * writes the snapshot as a .tdm, so that summary, export and gate work on
 * it.
 *
 * Exit codes as docs/cli.md: 1 usage, 2 bad input (missing, unreadable,
 * not a known format, malformed: the message names the byte offset or
 * line), 4 tool error (out of memory, cannot write OUT).  OUT is written
 * atomically by tdm__snap_write.  No state, no locks.
 */
#include "cli.h"
#include "load.h"
#include "import_formats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CMD "import"

void tdm__cli_import_help(FILE *out)
{
    fputs("usage: tidemark import [--format NAME] [-o OUT.tdm] [--quiet] FILE\n"
          "\n"
          "Turns another tool's file into a .tdm snapshot.\n"
          "\n"
          "options:\n"
          "  -f, --format NAME  the input's format; default: recognized from its content\n"
          "  -o, --output OUT   the .tdm to write; default: FILE with its extension\n"
          "                     replaced by .tdm\n"
          "  -q, --quiet        no 'wrote' line\n"
          "  -h, --help         this help\n"
          "\n"
          "formats:\n",
          out);
    for (size_t i = 0; i < tdm__import_format_count; i++)
        fprintf(out, "  %-11s %s%s\n", tdm__import_formats[i].name,
                tdm__import_formats[i].description,
                tdm__import_formats[i].sniff ? "" : " (needs --format)");
    fputs("\nSee docs/export.md (\"import\").\n", out);
}

/* FILE.pickle -> FILE.tdm (the extension after the last dot of the base
 * name is replaced; a name without one gets .tdm appended). */
static char *default_output(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - path) : strlen(path);
    char *out = malloc(n + 5);
    if (out) {
        memcpy(out, path, n);
        strcpy(out + n, ".tdm");
    }
    return out;
}

static int exit_for(tdm_status s)
{
    return s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL ? TDM_EXIT_TOOL_ERROR
                                                            : TDM_EXIT_BAD_INPUT;
}

int tdm__cli_import(int argc, char **argv)
{
    const char *format_name = NULL, *out_path = NULL, *input = NULL;
    int quiet = 0, only_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
            if (input)
                return tdm__cli_usage(CMD, "one file at a time (got '%s' and '%s')", input, a);
            input = a;
        } else if (strcmp(a, "--") == 0) {
            only_files = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tdm__cli_import_help(stdout);
            return TDM_EXIT_OK;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strncmp(a, "--format=", 9) == 0) {
            format_name = a + 9;
        } else if (strncmp(a, "--output=", 9) == 0) {
            out_path = a + 9;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--format") == 0 ||
                   strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc)
                return tdm__cli_usage(CMD, "option '%s' needs a value", a);
            if (a[1] == 'f' || a[2] == 'f')
                format_name = argv[++i];
            else
                out_path = argv[++i];
        } else {
            return tdm__cli_usage(CMD, "unknown option '%s'", a);
        }
    }
    if (!input)
        return tdm__cli_usage(CMD, "no file given");
    const tdm_import_format *fmt = NULL;
    if (format_name && !(fmt = tdm__import_format_find(format_name))) {
        fprintf(stderr, "tidemark " CMD ": unknown format '%s'; formats:", format_name);
        for (size_t i = 0; i < tdm__import_format_count; i++)
            fprintf(stderr, " %s", tdm__import_formats[i].name);
        fputs("\nTry 'tidemark help " CMD "'.\n", stderr);
        return TDM_EXIT_USAGE;
    }

    int rc = tdm__input_check_file(CMD, input);
    if (rc != TDM_EXIT_OK)
        return rc;
    if (!fmt) {
        unsigned char head[TDM_IMPORT_SNIFF_BYTES];
        size_t n = 0;
        FILE *f = fopen(input, "rb");
        if (!f) {
            fprintf(stderr, "tidemark " CMD ": %s: %s\n", input, strerror(errno));
            return TDM_EXIT_BAD_INPUT;
        }
        n = fread(head, 1, sizeof head, f);
        fclose(f);
        fmt = tdm__import_format_detect(head, n);
        if (!fmt) {
            fprintf(stderr, "tidemark " CMD ": %s: not a format tidemark imports "
                            "(at byte 0: the content matches none of:", input);
            for (size_t i = 0; i < tdm__import_format_count; i++)
                fprintf(stderr, " %s", tdm__import_formats[i].name);
            fputs("); name one with --format\n", stderr);
            return TDM_EXIT_BAD_INPUT;
        }
    }

    tdm_snap *snap = NULL;
    char err[320] = "";
    tdm_status s = fmt->read(input, &snap, err, sizeof err);
    if (s != TDM_OK || !snap) {
        fprintf(stderr, "tidemark " CMD ": %s: %s%s%s\n", input,
                s == TDM_OK ? "import failed" : tdm_strerror(s), err[0] ? ": " : "", err);
        return s == TDM_OK ? TDM_EXIT_TOOL_ERROR : exit_for(s);
    }
    char *def = out_path ? NULL : default_output(input);
    if (!out_path)
        out_path = def;
    if (!out_path) {
        rc = TDM_EXIT_TOOL_ERROR;
    } else if ((rc = tdm__cli_make_parents(CMD, out_path)) != TDM_EXIT_OK) {
        /* said which folder */
    } else if ((s = tdm__snap_write(snap, out_path)) != TDM_OK) {
        fprintf(stderr, "tidemark " CMD ": cannot write %s: %s\n", out_path, tdm_strerror(s));
        rc = TDM_EXIT_TOOL_ERROR;
    } else if (!quiet) {
        fprintf(stderr, "tidemark " CMD ": wrote %s (%s, %zu events, %zu segments)\n",
                out_path, fmt->name, snap->event_count, snap->segment_count);
    }
    fmt->free(snap);
    free(def);
    return rc;
}
