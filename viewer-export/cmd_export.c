/* viewer-export/cmd_export.c: `tidemark export --format NAME FILE.tdm
 * [-o OUT]`: reads a snapshot, builds its model, and hands both to the
 * exporter of the format's row in export_formats.c.
 *
 * Options common to every format are parsed here; a format's own options
 * come from its row, so adding a format never touches this file.  A
 * format option given with another --format is a usage error naming the
 * format it belongs to.  Option names must mean the same (same argument
 * or none) in every row that declares them.
 *
 * The output is written to a temporary file beside OUT and renamed into
 * place only when the exporter succeeded, so OUT is never half-written;
 * `-o -` writes to stdout.  Exit codes as docs/cli.md: 1 usage, 2 bad
 * input (a truncated snapshot is still exported, with exit 2), 4 tool
 * error (out of memory, cannot write OUT).  No state, no locks.
 */
#include "cli.h"
#include "export_formats.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "export"

__attribute__((format(printf, 1, 2)))
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tidemark " CMD ": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'tidemark help " CMD "'.\n", stderr);
    return TDM_EXIT_USAGE;
}

void tdm__cli_export_help(FILE *out)
{
    fputs("usage: tidemark export --format NAME [-o OUT] [--device N] [--quiet]\n"
          "                       [FORMAT OPTIONS] FILE.tdm\n"
          "\n"
          "Writes the snapshot FILE.tdm in another tool's format.\n"
          "\n"
          "options:\n"
          "  -f, --format NAME  the format (required); one of the list below\n"
          "  -o, --output OUT   where to write; '-' is standard output; default: FILE\n"
          "                     with .tdm replaced by the format's extension\n"
          "  --device N         only device N (the others are left out or empty)\n"
          "  -q, --quiet        no warnings, no 'wrote' line\n"
          "  -h, --help         this help\n"
          "\n"
          "formats (name, default extension, what it is):\n",
          out);
    for (size_t i = 0; i < tdm__export_format_count; i++) {
        const tdm_export_format *f = &tdm__export_formats[i];
        fprintf(out, "  %-11s %-12s %s\n", f->name, f->extension, f->description);
        for (size_t k = 0; f->options && f->options[k].name; k++) {
            char name[64];
            snprintf(name, sizeof name, "--%s%s%s", f->options[k].name,
                     f->options[k].arg ? " " : "", f->options[k].arg ? f->options[k].arg : "");
            fprintf(out, "      %-18s %s\n", name, f->options[k].help);
        }
    }
    fputs("\nSee docs/export.md for what each format contains.\n", out);
}

/* The row option called `name` in any format (for its arity), or NULL. */
static const tdm_export_option *any_format_option(const char *name)
{
    for (size_t i = 0; i < tdm__export_format_count; i++) {
        const tdm_export_option *o = tdm__export_formats[i].options;
        for (size_t k = 0; o && o[k].name; k++)
            if (strcmp(o[k].name, name) == 0)
                return &o[k];
    }
    return NULL;
}

typedef struct given_option {
    const char *name; /* without dashes, not NUL-terminated at '=' */
    size_t name_len;
    const char *value;
} given_option;

static int parse_int(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 32767)
        return -1;
    *out = (int)v;
    return 0;
}

/* OUT for `path` when -o is not given: FILE.tdm -> FILE.EXT. */
static char *default_output(const char *path, const char *ext)
{
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".tdm") == 0)
        n -= 4;
    char *out = malloc(n + strlen(ext) + 1);
    if (out) {
        memcpy(out, path, n);
        strcpy(out + n, ext);
    }
    return out;
}

/* Runs the exporter into `out_path` (or stdout) through a temporary file. */
static int write_output(const char *out_path, const tdm_export_context *ctx)
{
    if (strcmp(out_path, "-") == 0) {
        tdm_status s = ctx->format->write(stdout, ctx);
        if (s == TDM_OK)
            return TDM_EXIT_OK;
        fprintf(stderr, "tidemark " CMD ": writing to standard output failed: %s\n",
                tdm_strerror(s));
        return s == TDM_INVALID_ARGUMENT ? TDM_EXIT_USAGE
               : s == TDM_FORMAT_ERROR   ? TDM_EXIT_BAD_INPUT
                                         : TDM_EXIT_TOOL_ERROR;
    }
    size_t n = strlen(out_path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        return TDM_EXIT_TOOL_ERROR;
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", out_path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "tidemark " CMD ": cannot write %s: %s\n", out_path, strerror(errno));
        free(tmp);
        return TDM_EXIT_TOOL_ERROR;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return TDM_EXIT_TOOL_ERROR;
    }
    tdm_status s = ctx->format->write(f, ctx);
    int saved = errno;
    if (fclose(f) != 0 && s == TDM_OK) {
        s = TDM_IO_ERROR;
        saved = errno;
    }
    /* mkstemp makes the file 0600; an export is an ordinary file. */
    if (s == TDM_OK) {
        mode_t mask = umask(0);
        umask(mask);
        if (chmod(tmp, 0666 & ~mask) != 0 || rename(tmp, out_path) != 0) {
            s = TDM_IO_ERROR;
            saved = errno;
        }
    }
    int rc = TDM_EXIT_OK;
    if (s != TDM_OK) {
        unlink(tmp);
        if (s == TDM_IO_ERROR)
            fprintf(stderr, "tidemark " CMD ": cannot write %s: %s\n", out_path,
                    saved ? strerror(saved) : tdm_strerror(s));
        else
            fprintf(stderr, "tidemark " CMD ": %s: %s\n", out_path, tdm_strerror(s));
        rc = s == TDM_INVALID_ARGUMENT ? TDM_EXIT_USAGE
             : s == TDM_FORMAT_ERROR   ? TDM_EXIT_BAD_INPUT
                                       : TDM_EXIT_TOOL_ERROR;
    } else if (!ctx->quiet) {
        fprintf(stderr, "tidemark " CMD ": wrote %s (%s)\n", out_path, ctx->format->name);
    }
    free(tmp);
    return rc;
}

int tdm__cli_export(int argc, char **argv)
{
    const char *format_name = NULL, *out_path = NULL, *input = NULL;
    int device = -1, quiet = 0, only_files = 0;
    given_option given[TDM_EXPORT_MAX_OPTIONS * 2];
    size_t ngiven = 0;

    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
            if (input)
                return usage("one snapshot file at a time (got '%s' and '%s')", input, a);
            input = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_files = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tdm__cli_export_help(stdout);
            return TDM_EXIT_OK;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
            continue;
        }
        /* Options with a value: "-o X", "--output X", "--output=X". */
        const char *name = a[1] == '-' ? a + 2 : a + 1;
        const char *eq = a[1] == '-' ? strchr(name, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
#define IS(lit) (name_len == sizeof(lit) - 1 && strncmp(name, lit, name_len) == 0)
        int common_value = a[1] == '-' ? (IS("format") || IS("output") || IS("device"))
                                       : (IS("f") || IS("o"));
        const tdm_export_option *fo = NULL;
        if (!common_value) {
            if (a[1] != '-')
                return usage("unknown option '%s'", a);
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(name_len < 63 ? name_len : 63), name);
            fo = any_format_option(key);
            if (!fo)
                return usage("unknown option '%s'", a);
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value && (common_value || fo->arg)) {
            if (i + 1 >= argc)
                return usage("option '%s' needs a value", a);
            value = argv[++i];
        }
        if (fo && !fo->arg && eq)
            return usage("option '--%s' takes no value", fo->name);
        if (fo) {
            if (ngiven == sizeof given / sizeof given[0])
                return usage("too many format options");
            given[ngiven++] = (given_option){name, name_len, value ? value : ""};
        } else if (IS("format") || IS("f")) {
            format_name = value;
        } else if (IS("output") || IS("o")) {
            out_path = value;
        } else if (parse_int(value, &device) != 0) {
            return usage("--device needs a device ordinal (0..32767), not '%s'", value);
        }
#undef IS
    }
    if (!format_name)
        return usage("no --format given (try --format pytorch)");
    const tdm_export_format *fmt = tdm__export_format_find(format_name);
    if (!fmt) {
        fprintf(stderr, "tidemark " CMD ": unknown format '%s'; formats:", format_name);
        for (size_t i = 0; i < tdm__export_format_count; i++)
            fprintf(stderr, " %s", tdm__export_formats[i].name);
        fputs("\nTry 'tidemark help " CMD "'.\n", stderr);
        return TDM_EXIT_USAGE;
    }
    tdm_export_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.format = fmt;
    for (size_t g = 0; g < ngiven; g++) {
        size_t k = 0;
        while (fmt->options && fmt->options[k].name && k < TDM_EXPORT_MAX_OPTIONS &&
               !(strlen(fmt->options[k].name) == given[g].name_len &&
                 strncmp(fmt->options[k].name, given[g].name, given[g].name_len) == 0))
            k++;
        if (!fmt->options || !fmt->options[k].name || k >= TDM_EXPORT_MAX_OPTIONS)
            return usage("option '--%.*s' does not apply to --format %s",
                         (int)given[g].name_len, given[g].name, fmt->name);
        ctx.option_values[k] = given[g].value;
    }
    if (!input)
        return usage("no snapshot file given");

    tdm_snap *snap = NULL;
    int truncated = 0;
    uint64_t truncated_at = 0;
    int rc = tdm__cli_read_snapshot(CMD, input, &snap, &truncated, &truncated_at);
    if (!snap)
        return rc;
    tdm_model *model = NULL;
    if (tdm__model_build(snap, &model) != TDM_OK) {
        fprintf(stderr, "tidemark " CMD ": %s: %s\n", input,
                tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        tdm__snap_free(snap);
        return TDM_EXIT_TOOL_ERROR;
    }
    ctx.input_path = input;
    ctx.snap = snap;
    ctx.model = model;
    ctx.device = device;
    ctx.quiet = quiet;
    char *def = NULL;
    if (!out_path) {
        def = default_output(input, fmt->extension);
        out_path = def;
    }
    int wrc = out_path ? write_output(out_path, &ctx) : TDM_EXIT_TOOL_ERROR;
    free(def);
    tdm__model_free(model);
    tdm__snap_free(snap);
    return tdm__cli_worse(rc, wrc);
}
