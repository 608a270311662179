/* viewer-export/cli/cmd_export.c: `tidemark export --format NAME [-o OUT]
 * FILE-or-DIR...`: reads snapshots, builds their models, and hands them to
 * the exporter of the format's row in export_formats.c.
 *
 * Options common to every format are parsed here; a format's own options
 * come from its row, so adding a format never touches this file.  A
 * format option given with another --format is a usage error naming the
 * format it belongs to.  Option names must mean the same (same argument
 * or none) in every row that declares them.
 *
 * Several snapshots (files, or directories standing for their *.tdm files,
 * collected by ranks.c) are the ranks of a job.  perfetto merges them into
 * one trace (-o required); every other format writes one file per
 * snapshot, named by -o as a directory ("out/": out/NAME.EXT) or a
 * template (%r rank, %l local rank, %h host, %p pid, %n the snapshot's
 * name without .tdm, %% a percent sign), or, without -o, beside each
 * input.  Inputs are read one at a time and freed before the next, so a
 * job of many large rings needs the memory of one.  Two inputs that would
 * write the same file are a usage error for the second (nothing of the
 * first is overwritten).  An input that cannot be read is reported and the
 * others are still exported.
 *
 * Each output is written to a temporary file beside OUT and moved into
 * place only when the exporter succeeded, so OUT is never half-written;
 * an existing file is not replaced without --force (cli_output.c: the
 * snapshot is then not even read when its output's name does not depend
 * on it); `-o -` writes to stdout (one output only).  Exit codes as
 * docs/cli.md: 1 usage (also: an output exists without --force), 2 bad
 * input (a truncated snapshot is still exported, with exit 2), 4 tool
 * error (out of memory, cannot write OUT, a format this build lacks: one
 * line, before any input is read); the worst over all inputs.  No
 * state, no locks.
 */
#include "cli.h"
#include "load.h"
#include "export_formats.h"
#include "ranks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "export"

enum { FORMAT_OPTION = 0x400 }; /* + the index of a row of format_options() */

/* The options of every format's row, each name once (rows may share an
 * option; it means the same in each), as parse rows; the help lists them
 * under their formats (list_formats). */
static const tdm_cli_options *format_options(void)
{
    static tdm_cli_option rows[TDM_CLI_MAX_OPTIONS / 2 + 1];
    static const tdm_cli_options t = {rows, 0};
    size_t n = 0;
    for (size_t i = 0; i < tdm__export_format_count; i++) {
        const tdm_export_option *o = tdm__export_formats[i].options;
        for (size_t k = 0; o && o[k].name && n + 1 < sizeof rows / sizeof rows[0]; k++) {
            size_t seen = 0;
            while (seen < n && strcmp(rows[seen].name, o[k].name) != 0)
                seen++;
            if (seen == n) {
                rows[n] = (tdm_cli_option){.name = o[k].name, .code = FORMAT_OPTION + (int)n,
                                           .has_arg = o[k].arg ? required_argument : no_argument,
                                           .metavar = o[k].arg};
                n++;
            }
        }
    }
    rows[n] = (tdm_cli_option){0};
    return &t;
}

static const tdm_cli_option options[] = {
    {.name = "format", .short_name = 'f', .has_arg = required_argument, .metavar = "NAME",
     .help = "the format (required); one of the list below"},
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "OUT",
     .help = "where to write; '-' is standard output; default: FILE\n"
             "with .tdm replaced by the format's extension"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "only device N (the others are left out or empty); a\n"
             "snapshot without it is an error (exit 2)"},
    {.name = "force", .code = 'F',
     .help = "replace output files that exist (refused otherwise,\n"
             "exit 1)"},
    {.name = "quiet", .short_name = 'q', .help = "no warnings, no 'wrote' line"},
    TDM_CLI_HELP_ROW("this help"),
    {.built = format_options},
    {0},
};

/* The formats and their own options, from export_formats.c's table. */
static void list_formats(FILE *out)
{
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

const tdm_cli_spec tdm__cli_export_spec = {
    .usage = "usage: tidemark export --format NAME [-o OUT] [--device N] [--force] [--quiet]\n"
             "                       [FORMAT OPTIONS] FILE.tdm|DIR...\n"
             "\n"
             "Writes snapshots in another tool's format.  A directory stands for the\n"
             "*.tdm files in it (one per rank of a job).\n"
             "\n"
             "options:\n",
    .options = {options, 21},
    .after = "\n"
             "Several snapshots (the ranks of a job):\n"
             "  perfetto           one trace, each rank a process on one time axis;\n"
             "                     -o OUT.json is required\n"
             "  the other formats  one file per snapshot (pytorch: one pickle per rank,\n"
             "                     as memory_viz shows one process); -o is a directory\n"
             "                     (out/; missing folders are created) or a name with codes:\n"
             "                     %r rank, %l local rank, %h host, %p pid, %n the\n"
             "                     snapshot's name, %% a '%';\n"
             "                     without -o each goes beside its snapshot\n"
             "\n"
             "formats (name, default extension, what it is):\n",
    .more = list_formats,
};

typedef struct given_option {
    const char *name; /* without dashes */
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

static int exit_of(tdm_status s)
{
    return s == TDM_OK                 ? TDM_EXIT_OK
           : s == TDM_INVALID_ARGUMENT ? TDM_EXIT_USAGE
           : s == TDM_FORMAT_ERROR     ? TDM_EXIT_BAD_INPUT
                                       : TDM_EXIT_TOOL_ERROR;
}

/* ---- output names ------------------------------------------------------------ */

/* The length of `path`'s last component without a .tdm suffix, and where
 * it starts. */
static const char *stem(const char *path, size_t *len)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t n = strlen(b);
    if (n > 4 && strcmp(b + n - 4, ".tdm") == 0)
        n -= 4;
    *len = n;
    return b;
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

#define is_dir_target tdm__cli_is_dir_target

/* Nonzero when the template has a code (so it can name several files).
 * Sets *bad to the first code that is not one (0 when all are). */
static int template_codes(const char *t, char *bad)
{
    int codes = 0;
    *bad = 0;
    for (const char *p = t; *p; p++) {
        if (*p != '%')
            continue;
        char c = p[1];
        if (c && strchr("rlhpn", c)) {
            codes = 1;
            p++;
        } else if (c == '%') {
            p++;
        } else if (!*bad) {
            *bad = c ? c : '%';
        }
    }
    return codes;
}

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Nonzero when the file -o `o` names depends on the snapshot (its codes). */
static int needs_snapshot(const char *o)
{
    char bad;
    return o && strcmp(o, "-") != 0 && !is_dir_target(o) && template_codes(o, &bad);
}

/* The file one snapshot is exported to: -o as a template (checked by
 * template_codes), or a directory, or the default.  `snap` may be NULL
 * when !needs_snapshot(o).  NULL when out of memory. */
static char *output_for(const char *o, const char *input, const tdm_snap *snap, const char *ext)
{
    input = tdm__cli_input_name(input);
    size_t sl;
    const char *st = stem(input, &sl);
    sbuf b = {0};
    if (!o)
        return default_output(input, ext);
    if (strcmp(o, "-") == 0)
        return strdup(o);
    if (is_dir_target(o)) {
        size_t n = strlen(o);
        sb_put(&b, o, n);
        if (o[n - 1] != '/')
            sb_put(&b, "/", 1);
        sb_put(&b, st, sl);
        sb_put(&b, ext, strlen(ext));
    } else {
        for (const char *p = o; *p; p++) {
            const tdm_snap_header *h = snap ? &snap->header : NULL; /* set for codes */
            char num[32];
            if (*p != '%' || !p[1]) {
                sb_put(&b, p, 1);
                continue;
            }
            switch (*++p) {
            case 'r': /* as the dump template: 0 when no rank is known */
            case 'l':
                snprintf(num, sizeof num, "%d",
                         (int)(*p == 'r' ? (h->rank < 0 ? 0 : h->rank)
                                         : (h->local_rank < 0 ? 0 : h->local_rank)));
                sb_put(&b, num, strlen(num));
                break;
            case 'p':
                snprintf(num, sizeof num, "%lld", (long long)h->pid);
                sb_put(&b, num, strlen(num));
                break;
            case 'h':
                for (const char *c = h->host && h->host[0] ? h->host : "unknown"; *c; c++)
                    sb_put(&b, *c == '/' ? "_" : c, 1);
                break;
            case 'n':
                sb_put(&b, st, sl);
                break;
            default: /* "%%" */
                sb_put(&b, p, 1);
                break;
            }
        }
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s ? b.s : strdup("");
}

/* ---- writing one output --------------------------------------------------------- */

typedef struct job {
    tdm_status (*emit)(FILE *out, struct job *j);
    const tdm_export_context *ctx; /* one snapshot's export */
    /* several snapshots merged (perfetto) */
    const tdm_export_context *base; /* options shared by all */
    const tdm_rank_paths *paths;
    int inputs_rc;  /* worst exit code of reading them */
    size_t added;   /* snapshots in the trace */
    int reported;   /* emit already said why it failed */
} job;

static tdm_status emit_one(FILE *out, job *j)
{
    tdm_status s = j->ctx->format->write(out, j->ctx);
    /* An exporter prints why before it returns these (export_formats.h). */
    j->reported = s == TDM_INVALID_ARGUMENT || s == TDM_FORMAT_ERROR;
    return s;
}

/* How outputs may be written: --force, and whether -o named them. */
typedef struct out_rules {
    int force, named;
} out_rules;

/* Runs the job into `out_path` (or stdout) through a temporary file. */
static int write_output(const char *out_path, job *j, int quiet, const char *what,
                        out_rules rules)
{
    if (strcmp(out_path, "-") == 0) {
        errno = 0;
        tdm_status s = j->emit(stdout, j);
        int e = errno; /* the failed write's cause, e.g. no space left */
        if (s == TDM_OK)
            return TDM_EXIT_OK;
        if (!j->reported)
            fprintf(stderr, "tidemark " CMD ": writing to standard output failed: %s\n",
                    s == TDM_IO_ERROR && e ? strerror(e) : tdm_strerror(s));
        return exit_of(s);
    }
    int made = tdm__cli_output_check(CMD, out_path, rules.force, rules.named);
    if (made == TDM_EXIT_OK)
        made = tdm__cli_make_parents(CMD, out_path);
    if (made != TDM_EXIT_OK)
        return made;
    tdm__out_file o;
    FILE *f = tdm__cli_output_open(CMD, out_path, &o);
    if (!f)
        return TDM_EXIT_TOOL_ERROR;
    tdm_status s = j->emit(f, j);
    int saved = errno;
    int moved = tdm__cli_output_finish(&o, f, s == TDM_OK, rules.force);
    if (s == TDM_OK && moved != 0) {
        s = TDM_IO_ERROR;
        saved = moved;
    }
    int rc = TDM_EXIT_OK;
    if (s != TDM_OK) {
        rc = exit_of(s);
        if (moved == EEXIST) /* it appeared while we wrote */
            rc = tdm__cli_output_check(CMD, out_path, 0, rules.named);
        else if (j->reported)
            ;
        else if (s == TDM_IO_ERROR)
            fprintf(stderr, "tidemark " CMD ": cannot write %s: %s\n", out_path,
                    saved > 0 ? tdm__out_strerror(saved) : tdm_strerror(s));
        else
            fprintf(stderr, "tidemark " CMD ": %s: %s\n", out_path, tdm_strerror(s));
    } else if (!quiet) {
        fprintf(stderr, "tidemark " CMD ": wrote %s (%s)\n", out_path, what);
    }
    return rc;
}

/* Reads `path` and builds its model.  Returns a TDM_EXIT_* code; *snap and
 * *model are set (both) unless the file could not be used. */
static int load(const char *path, tdm_snap **snap, tdm_model **model)
{
    int truncated = 0;
    uint64_t truncated_at = 0;
    *model = NULL;
    int rc = tdm__input_read_snapshot(CMD, path, snap, &truncated, &truncated_at);
    if (!*snap)
        return rc;
    if (tdm__model_build(*snap, model) != TDM_OK) {
        fprintf(stderr, "tidemark " CMD ": %s: %s\n", path,
                tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        tdm__input_snap_free(*snap);
        *snap = NULL;
        return TDM_EXIT_TOOL_ERROR;
    }
    return rc;
}

/* ---- several snapshots, one trace ------------------------------------------------ */

/* A snapshot without the device --device names: said, skipped (exit 2). */
static int lacks_device(const char *path, tdm_model *model, int device, int *rc)
{
    tdm_input in = {.path = path, .operand = path, .model = model};
    int one = tdm__input_check_device(CMD, &in, device);
    *rc = tdm__exit_worse(*rc, one);
    return one != TDM_EXIT_OK;
}

static tdm_status emit_merged(FILE *out, job *j)
{
    tdm_perfetto_ranks *r;
    tdm_status s = tdm__export_perfetto_ranks_begin(out, &r);
    if (s != TDM_OK)
        return s;
    for (size_t i = 0; i < j->paths->count && s == TDM_OK; i++) {
        const char *path = j->paths->paths[i];
        tdm_snap *snap;
        tdm_model *model;
        int rc = load(path, &snap, &model);
        j->inputs_rc = tdm__exit_worse(j->inputs_rc, rc);
        if (!snap) {
            if (rc == TDM_EXIT_TOOL_ERROR) {
                s = TDM_HOST_OUT_OF_MEMORY;
                j->reported = 1;
            }
            continue;
        }
        if (lacks_device(path, model, j->base->device, &j->inputs_rc)) {
            tdm__model_free(model);
            tdm__input_snap_free(snap);
            continue;
        }
        tdm_export_context c = *j->base;
        c.input_path = path;
        c.snap = snap;
        c.model = model;
        s = tdm__export_perfetto_ranks_add(r, &c);
        j->reported = s != TDM_OK; /* add says why */
        j->added += s == TDM_OK;
        tdm__model_free(model);
        tdm__input_snap_free(snap);
    }
    tdm_status e = tdm__export_perfetto_ranks_end(r);
    if (s == TDM_OK && e == TDM_OK && j->added == 0) {
        fprintf(stderr, "tidemark " CMD ": no snapshot could be read; nothing written\n");
        j->reported = 1;
        return TDM_FORMAT_ERROR;
    }
    return s != TDM_OK ? s : e;
}

/* ---- one file per snapshot ---------------------------------------------------------- */

typedef struct written {
    char **out;   /* outputs written so far, malloc'd */
    char **from;  /* the input each came from (borrowed) */
    size_t count, cap;
} written;

static const char *written_from(const written *w, const char *out)
{
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->out[i], out) == 0)
            return w->from[i];
    return NULL;
}

static int written_add(written *w, char *out, char *from)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        char **a = realloc(w->out, cap * sizeof *a);
        if (!a)
            return -1;
        w->out = a;
        char **b = realloc(w->from, cap * sizeof *b);
        if (!b)
            return -1;
        w->from = b;
        w->cap = cap;
    }
    w->out[w->count] = out;
    w->from[w->count++] = from;
    return 0;
}

/* Nonzero (after saying why) when `out` may not be written for `path`:
 * this run wrote it already, or it exists and --force was not given. */
static int refused(const written *done, const char *out, const char *path, out_rules rules,
                   int *rc)
{
    const char *prev = written_from(done, out);
    if (prev) {
        fprintf(stderr, "tidemark " CMD ": %s: would overwrite %s, written from %s; "
                        "put %%n or %%p in -o to tell them apart\n", path, out, prev);
        *rc = tdm__exit_worse(*rc, TDM_EXIT_USAGE);
        return 1;
    }
    int one = strcmp(out, "-") == 0 ? TDM_EXIT_OK
                                    : tdm__cli_output_check(CMD, out, rules.force, rules.named);
    *rc = tdm__exit_worse(*rc, one);
    return one != TDM_EXIT_OK;
}

static int export_each(const tdm_export_context *base, const tdm_rank_paths *paths,
                       const char *out_opt, out_rules rules)
{
    written done = {0};
    int rc = TDM_EXIT_OK;
    const char *ext = base->format->extension;
    /* Unless -o has codes, a refused output spares reading its snapshot. */
    int early = !needs_snapshot(out_opt);
    for (size_t i = 0; i < paths->count; i++) {
        char *path = paths->paths[i], *out = NULL;
        tdm_snap *snap = NULL;
        tdm_model *model = NULL;
        if (early && !(out = output_for(out_opt, path, NULL, ext)))
            goto oom;
        if (early && refused(&done, out, path, rules, &rc))
            goto next;
        rc = tdm__exit_worse(rc, load(path, &snap, &model));
        if (!snap || lacks_device(path, model, base->device, &rc))
            goto next;
        if (!early && !(out = output_for(out_opt, path, snap, ext)))
            goto oom;
        if (!early && refused(&done, out, path, rules, &rc))
            goto next;
        {
            tdm_export_context c = *base;
            c.input_path = path;
            c.snap = snap;
            c.model = model;
            job j = {.emit = emit_one, .ctx = &c};
            rc = tdm__exit_worse(rc, write_output(out, &j, base->quiet, base->format->name, rules));
            if (strcmp(out, "-") != 0 && written_add(&done, out, path) == 0)
                out = NULL; /* kept in `done` */
            goto next;
        }
    oom:
        fprintf(stderr, "tidemark " CMD ": %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
    next:
        free(out);
        if (model)
            tdm__model_free(model);
        tdm__input_snap_free(snap);
    }
    for (size_t i = 0; i < done.count; i++)
        free(done.out[i]);
    free(done.out);
    free(done.from);
    return rc;
}

/* ---- the command ------------------------------------------------------------------ */

int tdm__cli_export(int argc, char **argv)
{
    const char *format_name = NULL, *out_path = NULL;
    int device = -1, quiet = 0, force = 0, c;
    given_option given[TDM_EXPORT_MAX_OPTIONS * 2];
    size_t ngiven = 0;
#define USAGE(...) return tdm__cli_usage(CMD, __VA_ARGS__)

    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, CMD, argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'f':
            format_name = optarg;
            break;
        case 'o':
            out_path = optarg;
            break;
        case 'd':
            if (parse_int(optarg, &device) != 0)
                USAGE("--device needs a device ordinal (0..32767), not '%s'", optarg);
            break;
        case 'F':
            force = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        default: /* a format's option: checked against --format once it is known */
            if (ngiven == sizeof given / sizeof given[0])
                USAGE("too many format options");
            given[ngiven++] = (given_option){tdm__cli_parse_row(&p, c)->name,
                                             optarg ? optarg : ""};
        }
    }
    if (c < 0)
        return p.exit;
    if (!format_name)
        USAGE("no --format given (try --format pytorch)");
    const tdm_export_format *fmt = tdm__export_format_find(format_name);
    if (!fmt) {
        fprintf(stderr, "tidemark " CMD ": unknown format '%s'; formats:", format_name);
        for (size_t i = 0; i < tdm__export_format_count; i++)
            fprintf(stderr, " %s", tdm__export_formats[i].name);
        fputs("\nTry 'tidemark help " CMD "'.\n", stderr);
        return TDM_EXIT_USAGE;
    }
    if (!fmt->write) { /* its library was not found when this tidemark was built */
        fprintf(stderr, "tidemark " CMD ": --format %s is not built into this tidemark "
                        "(built without %s): install that and rebuild\n", fmt->name,
                fmt->lacks ? fmt->lacks : "its library");
        return TDM_EXIT_TOOL_ERROR;
    }
    tdm_export_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.format = fmt;
    ctx.device = device;
    ctx.quiet = quiet;
    for (size_t g = 0; g < ngiven; g++) {
        size_t k = 0;
        while (fmt->options && fmt->options[k].name && k < TDM_EXPORT_MAX_OPTIONS &&
               strcmp(fmt->options[k].name, given[g].name) != 0)
            k++;
        if (!fmt->options || !fmt->options[k].name || k >= TDM_EXPORT_MAX_OPTIONS)
            USAGE("option '--%s' does not apply to --format %s", given[g].name, fmt->name);
        ctx.option_values[k] = given[g].value;
    }
    if (optind >= argc)
        USAGE("no snapshot file given");
#undef USAGE

    tdm_rank_paths paths;
    int rc = tdm__ranks_expand(CMD, argv + optind, (size_t)(argc - optind), &paths);
    if (rc == TDM_EXIT_TOOL_ERROR || paths.count == 0) {
        tdm__ranks_paths_free(&paths);
        return rc == TDM_EXIT_OK ? TDM_EXIT_BAD_INPUT : rc;
    }
    /* perfetto merges several snapshots into one file, named as given;
     * otherwise each snapshot gets a file, and -o may be a template. */
    int merged = paths.count > 1 && fmt->write == tdm__export_perfetto;
    out_rules rules = {.force = force, .named = out_path != NULL};
    char bad = 0;
    int wrc;
    if (!merged && out_path && strcmp(out_path, "-") != 0 &&
        (template_codes(out_path, &bad), bad)) {
        wrc = tdm__cli_usage(CMD, "-o %s: '%%%c' is not a code (%%r rank, %%l local rank, %%h host, "
                    "%%p pid, %%n the snapshot's name, %%%% a percent sign)", out_path, bad);
    } else if (merged) {
        if (tdm__export_option(&ctx, "merge"))
            wrc = tdm__cli_usage(CMD, "--merge adds one process's tracks to its profiler trace: "
                        "give one snapshot, not %zu", paths.count);
        else if (!out_path)
            wrc = tdm__cli_usage(CMD, "%zu snapshots make one trace: name it with -o OUT.json "
                        "(or -o - for standard output)", paths.count);
        else if (strcmp(out_path, "-") != 0 && is_dir_target(out_path))
            wrc = tdm__cli_usage(CMD, "-o %s is a directory; %zu snapshots make one trace: name its file",
                        out_path, paths.count);
        else {
            job j = {.emit = emit_merged, .base = &ctx, .paths = &paths};
            char what[64];
            snprintf(what, sizeof what, "%s, %zu snapshots", fmt->name, paths.count);
            wrc = write_output(out_path, &j, 1, what, rules);
            if (wrc == TDM_EXIT_OK && !quiet)
                fprintf(stderr, "tidemark " CMD ": wrote %s (%s: %zu of %zu snapshots, "
                                "one process each)\n", out_path, fmt->name, j.added,
                        paths.count);
            wrc = tdm__exit_worse(wrc, j.inputs_rc);
        }
    } else if (paths.count > 1 && out_path && strcmp(out_path, "-") == 0) {
        wrc = tdm__cli_usage(CMD, "-o - writes one file; %zu snapshots make %zu %s files (give -o a "
                    "directory or a name with %%r)", paths.count, paths.count, fmt->name);
    } else if (paths.count > 1 && out_path && !is_dir_target(out_path) &&
               !template_codes(out_path, &bad)) {
        wrc = tdm__cli_usage(CMD, "%zu snapshots make one %s file each: give -o a directory (out/) or a "
                    "name with codes (%%r rank, %%l local rank, %%h host, %%p pid, %%n the "
                    "snapshot's name), e.g. -o 'rank%%r%s'", paths.count, fmt->name,
                    fmt->extension);
    } else if (out_path && is_dir_target(out_path) &&
               (wrc = tdm__cli_make_parents(CMD, out_path)) != TDM_EXIT_OK) {
        /* said why */
    } else {
        wrc = export_each(&ctx, &paths, out_path, rules);
    }
    tdm__ranks_paths_free(&paths);
    return tdm__exit_worse(rc, wrc);
}
