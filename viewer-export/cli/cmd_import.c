/* viewer-export/cli/cmd_import.c: `tidemark import FILE [-o OUT.tdm]`: reads
 * another tool's file with the importer of its row in import_formats.c
 * (chosen by --format, else recognized from the file's first bytes) and
 * writes the snapshot as a .tdm, so that summary, export and gate work on
 * it.
 *
 * OUT (default: FILE with .tdm for its extension; -o DIR/ puts that name
 * in DIR) is never replaced without --force (cli_output.c): the snapshot
 * is written to a temporary file beside it and moved into place.
 *
 * Exit codes as docs/cli.md: 1 usage (also: OUT exists without --force,
 * FILE already is a .tdm), 2 bad input (missing, unreadable, not a known
 * format, malformed: the message names the byte offset or line), 4 tool
 * error (out of memory, cannot write OUT).  No state, no locks.
 */
#include "cli.h"
#include "load.h"
#include "import_formats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "import"

static const tdm_cli_option options[] = {
    {.name = "format", .short_name = 'f', .has_arg = required_argument, .metavar = "NAME",
     .help = "the input's format; default: recognized from its content"},
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "OUT",
     .help = "the .tdm to write; default: FILE with its extension\n"
             "replaced by .tdm; a directory (DIR/) gets that name"},
    {.name = "force", .code = 'F',
     .help = "replace OUT if it exists (refused otherwise, exit 1)"},
    {.name = "quiet", .short_name = 'q', .help = "no 'wrote' line"},
    TDM_CLI_HELP_ROW("this help"),
    {0},
};

/* The formats, from import_formats.c's table. */
static void list_formats(FILE *out)
{
    for (size_t i = 0; i < tdm__import_format_count; i++)
        fprintf(out, "  %-11s %s%s\n", tdm__import_formats[i].name,
                tdm__import_formats[i].description,
                tdm__import_formats[i].sniff ? "" : " (needs --format)");
    fputs("\nSee docs/export.md (\"import\").\n", out);
}

const tdm_cli_spec tdm__cli_import_spec = {
    .usage = "usage: tidemark import [--format NAME] [-o OUT.tdm|DIR/] [--force] [--quiet] FILE\n"
             "\n"
             "Turns another tool's file into a .tdm snapshot.\n"
             "\n"
             "options:\n",
    .options = {options, 21},
    .after = "\n"
             "formats:\n",
    .more = list_formats,
};

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

/* Writes `snap` to `out` through a temporary file beside it, moved into
 * place only when complete and, without `force`, only while `out` does
 * not exist.  Returns a TDM_EXIT_* code after saying what went wrong. */
static int write_snapshot(const tdm_snap *snap, const char *out, int force)
{
    tdm_status s = tdm__snap_write_as(snap, out, force);
    if (s == TDM_OK)
        return TDM_EXIT_OK;
    int e = errno;
    if (s == TDM_IO_ERROR && e == EEXIST)
        return tdm__cli_output_check(CMD, out, 0, 1); /* it appeared meanwhile */
    fprintf(stderr, "tidemark " CMD ": cannot write %s: %s\n", out,
            s == TDM_IO_ERROR && e ? tdm__out_strerror(e) : tdm_strerror(s));
    return TDM_EXIT_TOOL_ERROR;
}

int tdm__cli_import(int argc, char **argv)
{
    const char *format_name = NULL, *out_opt = NULL, *input = NULL;
    int quiet = 0, force = 0, c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, CMD, argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'f':
            format_name = optarg;
            break;
        case 'o':
            out_opt = optarg;
            break;
        case 'F':
            force = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (argc - optind > 1)
        return tdm__cli_usage(CMD, "one file at a time (got '%s' and '%s')", argv[optind],
                              argv[optind + 1]);
    input = optind < argc ? argv[optind] : NULL;
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

    struct stat dir_st;
    if (strcmp(input, "-") != 0 && stat(input, &dir_st) == 0 && S_ISDIR(dir_st.st_mode)) {
        /* (The other commands read a directory's snapshots; import none.) */
        fprintf(stderr, "tidemark " CMD ": %s is a directory; import reads one file (a PyTorch "
                        "snapshot pickle, an RMM log, a trace CSV)\n", input);
        return TDM_EXIT_BAD_INPUT;
    }
    char *found = NULL; /* the one snapshot of a directory operand, or a stream's copy */
    const char *operand = input;
    int rc = tdm__input_resolve_as(CMD, input, &found, fmt != NULL);
    if (rc != TDM_EXIT_OK)
        return rc;
    if (found)
        input = found;
    /* Standard input or a pipe, held in a file of its own: messages and
     * the default output name go by what the user named. */
    int spooled = found && tdm__input_is_spooled(found);
    const char *shown = tdm__input_shown(input);
    char *def = NULL, *out_path = NULL;
    tdm_snap *snap = NULL;
    if (tdm__cli_has_tdm_signature(input)) {
        fprintf(stderr, "tidemark " CMD ": %s already is a tidemark snapshot; nothing to import\n",
                shown);
        rc = TDM_EXIT_USAGE;
        goto out;
    }
    def = default_output(!spooled ? input : tdm__cli_input_name(operand));
    /* A file already named .tdm (a pickle so named): its default output is
     * itself, which --force would replace with its own import. */
    struct stat in_st, def_st;
    if (!out_opt && def && stat(input, &in_st) == 0 && stat(def, &def_st) == 0 &&
        in_st.st_dev == def_st.st_dev && in_st.st_ino == def_st.st_ino) {
        rc = tdm__cli_usage(CMD, "%s is the file being imported; name the snapshot with -o",
                            shown);
        goto out;
    }
    /* Refused before the (possibly long) import, and again at the move. */
    if ((rc = tdm__cli_output_choose(CMD, out_opt, def, force, &out_path)) != TDM_EXIT_OK)
        goto out;
    if (!fmt) {
        unsigned char head[TDM_IMPORT_SNIFF_BYTES];
        size_t n = 0;
        FILE *f = fopen(input, "rb");
        if (!f) {
            fprintf(stderr, "tidemark " CMD ": %s: %s\n", shown, strerror(errno));
            rc = TDM_EXIT_BAD_INPUT;
            goto out;
        }
        n = fread(head, 1, sizeof head, f);
        fclose(f);
        fmt = tdm__import_format_detect(head, n);
        if (!fmt) {
            fprintf(stderr, "tidemark " CMD ": %s: not a format tidemark imports "
                            "(at byte 0: the content matches none of:", shown);
            for (size_t i = 0; i < tdm__import_format_count; i++)
                fprintf(stderr, " %s", tdm__import_formats[i].name);
            fputs("); name one with --format\n", stderr);
            rc = TDM_EXIT_BAD_INPUT;
            goto out;
        }
    }

    char err[320] = "";
    tdm_status s = fmt->read(input, &snap, err, sizeof err);
    if (s != TDM_OK || !snap) {
        fprintf(stderr, "tidemark " CMD ": %s: %s%s%s\n", shown,
                s == TDM_OK ? "import failed" : tdm_strerror(s), err[0] ? ": " : "", err);
        rc = s == TDM_OK ? TDM_EXIT_TOOL_ERROR : exit_for(s);
        if (snap)
            fmt->free(snap);
        snap = NULL;
        goto out;
    }
    if ((rc = tdm__cli_make_parents(CMD, out_path)) == TDM_EXIT_OK &&
        (rc = write_snapshot(snap, out_path, force)) == TDM_EXIT_OK && !quiet)
        fprintf(stderr, "tidemark " CMD ": wrote %s (%s, %zu events, %zu segments)\n",
                out_path, fmt->name, snap->event_count, snap->segment_count);
    fmt->free(snap);
out:
    free(out_path);
    free(def);
    free(found);
    return rc;
}
