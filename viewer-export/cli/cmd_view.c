/* viewer-export/cli/cmd_view.c: `tidemark view A.tdm [B.tdm] -o view.html`
 * and `tidemark view [--ranks] FILE-or-DIR...`, the offline memory viewer:
 * one HTML file holding the page's code (viewer-export/view/html/, embedded at
 * build time) and each snapshot's compact data (view_data.c), so it opens
 * from disk on a machine with no network and fetches nothing.
 *
 * Layouts: one snapshot (a file, or a run folder holding one); two side
 * by side (compare two runs: two files, or two run folders of one
 * snapshot each, as `tidemark diff` takes them, each labelled by its
 * folder's name); or the ranks of a job (more than two snapshots, a
 * folder holding several, or --ranks), stacked on one time axis in rank order (ranks.h), one of them
 * in detail below.  In the ranks layout a file that cannot be read is
 * left out (exit 2) and the page shows the others; the two other layouts
 * need every file.
 *
 * The page is written to a temporary file beside the output and moved into
 * place, so a reader never sees half a page; an existing file is replaced
 * only with --force (cli_output.c), checked before anything is read.
 * A truncated snapshot is
 * shown up to its cut, with a warning, and the command exits 2, as
 * `tidemark summary` does.  No state, no locks.
 */
#include "categories.h"
#include "cli.h"
#include "load.h"
#include "format_size.h"
#include "gate.h"
#include "ranks.h"
#include "view_data.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the page ----------------------------------------------------------- */

static int put(FILE *out, const void *p, size_t n)
{
    return n && fwrite(p, 1, n, out) != n ? -1 : 0;
}

/* Nonzero when `needle` occurs in the first n bytes of `hay` (any case). */
static int contains(const unsigned char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp((const char *)hay + i, needle, k) == 0)
            return 1;
    return 0;
}

static tdm_status write_data(FILE *out, const tdm_view_input *in, size_t n, int device,
                             tdm_view_layout layout, uint64_t *bytes)
{
    char head[192];
    int len = snprintf(head, sizeof head,
                       "{\"generator\":\"tidemark %s\",\"device\":%d,\"layout\":\"%s\","
                       "\"snapshots\":[",
                       TDM_VERSION_STRING, device, layout == TDM_VIEW_RANKS ? "ranks" : "panels");
    if (put(out, head, (size_t)len))
        return TDM_IO_ERROR;
    *bytes = (uint64_t)len;
    for (size_t i = 0; i < n; i++) {
        uint64_t one;
        if (i && put(out, ",", 1))
            return TDM_IO_ERROR;
        tdm_status s = tdm__view_data_write(out, &in[i], &one);
        if (s != TDM_OK)
            return s;
        *bytes += one + (i > 0);
    }
    *bytes += 2;
    return put(out, "]}", 2) ? TDM_IO_ERROR : TDM_OK;
}

tdm_status tdm__view_page_write(FILE *out, const tdm_view_input *in, size_t n,
                                int device, uint64_t *data_bytes)
{
    return tdm__view_page_write_as(out, in, n, device, n > 2 ? TDM_VIEW_RANKS : TDM_VIEW_PANELS,
                                   data_bytes);
}

tdm_status tdm__view_page_write_as(FILE *out, const tdm_view_input *in, size_t n,
                                   int device, tdm_view_layout layout,
                                   uint64_t *data_bytes)
{
    const unsigned char *t = tdm__view_asset_html;
    size_t tlen = tdm__view_asset_html_len;
    *data_bytes = 0;
    /* The code goes inside <script>/<style> elements verbatim: it must not
     * close them early. */
    if (contains(tdm__view_asset_js, tdm__view_asset_js_len, "</script") ||
        contains(tdm__view_asset_css, tdm__view_asset_css_len, "</style"))
        return TDM_INTERNAL;
    /* Copy the template, replacing each @TDM_NAME@ marker. */
    size_t i = 0, from = 0;
    while (i < tlen) {
        static const char mark[] = "@TDM_";
        if (t[i] != '@' || i + sizeof mark - 1 > tlen ||
            memcmp(t + i, mark, sizeof mark - 1) != 0) {
            i++;
            continue;
        }
        size_t end = i + sizeof mark - 1;
        while (end < tlen && t[end] != '@' && end - i < 32)
            end++;
        if (end >= tlen || t[end] != '@') {
            i++;
            continue;
        }
        if (put(out, t + from, i - from))
            return TDM_IO_ERROR;
        const char *name = (const char *)t + i + sizeof mark - 1;
        size_t nlen = end - (i + sizeof mark - 1);
        tdm_status s = TDM_OK;
        if (nlen == 3 && memcmp(name, "CSS", 3) == 0)
            s = put(out, tdm__view_asset_css, tdm__view_asset_css_len) ? TDM_IO_ERROR : TDM_OK;
        else if (nlen == 2 && memcmp(name, "JS", 2) == 0)
            s = put(out, tdm__view_asset_js, tdm__view_asset_js_len) ? TDM_IO_ERROR : TDM_OK;
        else if (nlen == 4 && memcmp(name, "DATA", 4) == 0)
            s = write_data(out, in, n, device, layout, data_bytes);
        else if (nlen == 7 && memcmp(name, "VERSION", 7) == 0)
            s = put(out, TDM_VERSION_STRING, strlen(TDM_VERSION_STRING)) ? TDM_IO_ERROR
                                                                        : TDM_OK;
        else
            s = TDM_INTERNAL; /* a marker the template should not have */
        if (s != TDM_OK)
            return s;
        i = from = end + 1;
    }
    return put(out, t + from, tlen - from) ? TDM_IO_ERROR : TDM_OK;
}

/* ---- the command --------------------------------------------------------- */

enum { OPT_RANKS = 256, OPT_FORCE };

static const tdm_cli_option options[] = {
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "FILE",
     .help = "the page to write (default: A's name, or DIR's,\n"
             "with .html); a directory (DIR/) gets that name"},
    {.name = "force", .code = OPT_FORCE,
     .help = "replace the page if it exists (refused otherwise,\n"
             "exit 1)"},
    {.name = "ranks", .code = OPT_RANKS,
     .help = "lay the snapshots out as ranks even when there are\n"
             "one or two"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "the device ordinal shown first (default: the\n"
             "first with allocations); a snapshot without it is\n"
             "an error (exit 2; ranks: when none has it)"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_view_spec = {
    .usage = "usage: tidemark view [OPTIONS] A.tdm [B.tdm] [-o OUT.html|DIR/]\n"
             "       tidemark view [OPTIONS] [--ranks] FILE.tdm|DIR... [-o OUT.html|DIR/]\n"
             "\n"
             "Writes one self-contained HTML page to open in a browser, offline:\n"
             "live memory by category over time (stacked) with allocated and\n"
             "reserved lines, step and phase bands, the peak and OOMs marked; zoom\n"
             "and pan; the allocations live at a clicked time, largest first, with\n"
             "their stacks and a flame graph; the segment and block map at that\n"
             "time; a summary header and the top allocation sites.  With two\n"
             "snapshots, they are shown side by side; a folder holding one\n"
             "snapshot (tidemark run -o DIR) stands for it, so two run folders are\n"
             "compared too.  With more than two, a folder holding several (its\n"
             "*.tdm files, one per rank of a job) or --ranks, every\n"
             "rank gets a lane, in rank order, all on one time axis (their clocks'\n"
             "absolute times), and the rank clicked is shown in detail below.\n"
             "See docs/viewer.md.\n"
             "\n"
             "options:\n",
    .options = {options, 21},
    .after = "\n"
             "Exit codes: 0 ok, 1 usage error or the page exists (without --force),\n"
             "2 missing, unreadable, corrupt or truncated input (a truncated file is\n"
             "shown up to its cut; with ranks, a file that cannot be read is left\n"
             "out), 4 internal error or the page could not be written.\n",
};

/* "run.tdm" -> "run.html" (in the same folder); a directory "out/" ->
 * "out.html" beside it.  NULL for a directory with no usable name (".",
 * "/") or when out of memory. */
static char *default_output(const char *in, int is_dir)
{
    size_t n = strlen(in);
    if (is_dir) {
        while (n > 1 && in[n - 1] == '/')
            n--;
        const char *last = in + n;
        while (last > in && last[-1] != '/')
            last--;
        size_t ln = n - (size_t)(last - in);
        if (ln == 0 || (ln == 1 && last[0] == '.') || (ln == 2 && memcmp(last, "..", 2) == 0))
            return NULL;
    } else if (n > 4 && strcmp(in + n - 4, ".tdm") == 0) {
        n -= 4;
    }
    char *out = malloc(n + 6);
    if (out) {
        memcpy(out, in, n);
        memcpy(out + n, ".html", 6);
    }
    return out;
}

/* Writes the page to a temporary file beside `path`, then moves it there
 * (over an existing regular file only when `force`). */
static int write_page(const char *path, int force, int named, const tdm_view_input *in,
                      size_t n, int device, tdm_view_layout layout, uint64_t *data_bytes,
                      uint64_t *page_bytes)
{
    int made = tdm__cli_make_parents("view", path);
    if (made != TDM_EXIT_OK)
        return made;
    tdm__out_file o;
    FILE *f = tdm__cli_output_open("view", path, &o);
    if (!f)
        return TDM_EXIT_TOOL_ERROR;
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    tdm_status s = tdm__view_page_write_as(f, in, n, device, layout, data_bytes);
    long size = ftell(f);
    int saved = errno;
    int moved = tdm__cli_output_finish(&o, f, s == TDM_OK, force);
    if (s == TDM_OK && moved == 0) {
        *page_bytes = size > 0 ? (uint64_t)size : 0;
        return TDM_EXIT_OK;
    }
    if (moved == EEXIST) /* it appeared while the page was written */
        return tdm__cli_output_check("view", path, 0, named);
    if (s != TDM_OK && s != TDM_IO_ERROR)
        fprintf(stderr, "tidemark view: %s\n", tdm_strerror(s));
    else
        fprintf(stderr, "tidemark view: cannot write %s: %s\n", path,
                tdm__out_strerror(s == TDM_OK ? moved : saved));
    return TDM_EXIT_TOOL_ERROR;
}

static int is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A folder's name as the page labels its snapshot: "runs/runA/" ->
 * "runA".  Malloc'd; NULL when out of memory. */
static char *folder_label(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    const char *last = dir + n;
    while (last > dir && last[-1] != '/')
        last--;
    return strndup(last, n - (size_t)(last - dir));
}

/* What the page calls a snapshot: its label, else its file's name. */
static const char *label_of(const tdm_view_input *in)
{
    if (in->label)
        return in->label;
    const char *slash = strrchr(in->path, '/');
    return slash ? slash + 1 : in->path;
}

int tdm__cli_view(int argc, char **argv)
{
    const char *out_opt = NULL;
    int device = -1, c, ranks = 0, force = 0;
    char *end;

    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "view", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'o':
            out_opt = optarg;
            break;
        case 'd': {
            long v = strtol(optarg, &end, 10);
            if (!optarg[0] || *end || v < 0 || v > 32767) {
                fprintf(stderr, "tidemark view: --device needs a number up to 32767, not '%s'\n",
                        optarg);
                goto usage;
            }
            device = (int)v;
            break;
        }
        case OPT_RANKS:
            ranks = 1;
            break;
        case OPT_FORCE:
            force = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    int noperands = argc - optind;
    if (noperands < 1) {
        fprintf(stderr, "tidemark view: no snapshot file given\n");
        goto usage;
    }
    /* The page: -o (a file, or a directory for the default name) or the
     * default name beside the first operand. */
    const char *first = argv[optind];
    char *def = default_output(tdm__cli_input_name(first), is_directory(first));
    char *output = NULL;
    if (!def && out_opt && !tdm__cli_is_dir_target(out_opt))
        output = strdup(out_opt);
    else if (def)
        output = out_opt ? tdm__cli_output_path(out_opt, def) : strdup(def);
    free(def);
    if (!output) {
        if (is_directory(first)) {
            fprintf(stderr, "tidemark view: name the page with -o FILE.html (%s has no name "
                            "to give it)\n", first);
            goto usage;
        }
        fprintf(stderr, "tidemark view: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    int rc = tdm__cli_output_check("view", output, force, out_opt != NULL);
    if (rc != TDM_EXIT_OK) {
        free(output);
        return rc;
    }

    /* Each operand expanded on its own, to know which one a file came
     * from (a folder's name labels its snapshots). */
    tdm_rank_paths paths = {0};
    const char **origin = NULL;
    rc = TDM_EXIT_OK;
    for (int k = optind; k < argc && rc != TDM_EXIT_TOOL_ERROR; k++) {
        tdm_rank_paths one;
        int erc = tdm__ranks_expand("view", argv + k, 1, &one);
        rc = tdm__exit_worse(rc, erc);
        if (erc == TDM_EXIT_TOOL_ERROR)
            break;
        char **grown = realloc(paths.paths, (paths.count + one.count + 1) * sizeof *grown);
        const char **ogrown = realloc(origin, (paths.count + one.count + 1) * sizeof *ogrown);
        if (grown)
            paths.paths = grown;
        if (ogrown)
            origin = ogrown;
        if (!grown || !ogrown) {
            tdm__ranks_paths_free(&one);
            fprintf(stderr, "tidemark view: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            rc = TDM_EXIT_TOOL_ERROR;
            break;
        }
        for (size_t j = 0; j < one.count; j++) {
            origin[paths.count] = argv[k];
            paths.paths[paths.count++] = one.paths[j];
        }
        free(one.paths);
    }
    size_t n = paths.count;
    if (rc == TDM_EXIT_TOOL_ERROR || n == 0) {
        tdm__ranks_paths_free(&paths);
        free(origin);
        free(output);
        return rc == TDM_EXIT_OK ? TDM_EXIT_BAD_INPUT : rc;
    }
    /* One snapshot is shown alone, even when a run folder stood for it;
     * two operands that gave one snapshot each (two files, or two run
     * folders as `tidemark diff` takes them) are compared side by side;
     * anything else is the ranks of a job. */
    int each_one = rc == TDM_EXIT_OK && n == (size_t)noperands;
    tdm_view_layout layout =
        !ranks && (n == 1 || (n == 2 && each_one)) ? TDM_VIEW_PANELS : TDM_VIEW_RANKS;
    tdm_input *gin = calloc(n, sizeof *gin);
    tdm_view_input *in = calloc(n, sizeof *in);
    uint8_t **cats = calloc(n, sizeof *cats);
    char **labels = calloc(n, sizeof *labels);
    size_t used = 0;
    if (!gin || !in || !cats || !labels) {
        fprintf(stderr, "tidemark view: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = TDM_EXIT_TOOL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        tdm_input *g = &gin[used];
        g->path = paths.paths[i];
        g->operand = origin[i]; /* the file, or the folder it was found in */
        int one = tdm__input_read_snapshot("view", g->path, &g->snap, &g->truncated,
                                         &g->truncated_at);
        rc = tdm__exit_worse(rc, one);
        if (g->snap && tdm__model_build(g->snap, &g->model) != TDM_OK) {
            fprintf(stderr, "tidemark view: %s: %s\n", g->path,
                    tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
            goto out;
        }
        if (g->snap)
            used++;
        else if (layout != TDM_VIEW_RANKS || one == TDM_EXIT_TOOL_ERROR)
            goto out; /* a comparison needs both files */
    }
    if (!used)
        goto out;
    /* --device: side by side, each snapshot must have it; the ranks' lanes
     * show their first device with allocations when theirs lacks it, so
     * there only a device no snapshot has is an error. */
    size_t having = 0;
    for (size_t i = 0; i < used; i++)
        having += device < 0 || tdm__model_device_index(gin[i].model, device) >= 0;
    if (having < used && (layout == TDM_VIEW_PANELS || having == 0)) {
        for (size_t i = 0; i < used; i++)
            rc = tdm__exit_worse(rc, tdm__input_check_device("view", &gin[i], device));
        goto out;
    }
    if (layout == TDM_VIEW_RANKS && tdm__ranks_sort_inputs(gin, used) != TDM_OK) {
        fprintf(stderr, "tidemark view: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
        goto out;
    }
    for (size_t i = 0; i < used; i++) {
        if (tdm__categories_infer(gin[i].model, &cats[i]) != TDM_OK) {
            fprintf(stderr, "tidemark view: %s: %s\n", gin[i].path,
                    tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
            goto out;
        }
        /* A run folder compared is called by its name: its files are
         * named alike (tidemark-HOST-PID.tdm) and tell the two apart no
         * better than "tidemark"; so are the lanes of several folders'
         * ranks ("runA rank 0", "runB rank 0"). */
        int by_folder = is_directory(gin[i].operand) &&
                        (layout == TDM_VIEW_PANELS ? each_one : noperands > 1);
        if (by_folder && !(labels[i] = folder_label(gin[i].operand))) {
            fprintf(stderr, "tidemark view: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
            goto out;
        }
        in[i] = (tdm_view_input){.path = gin[i].path, .label = labels[i], .snap = gin[i].snap,
                                 .model = gin[i].model, .cats = cats[i],
                                 .truncated = gin[i].truncated,
                                 .truncated_at = gin[i].truncated_at};
    }
    uint64_t data_bytes = 0, page_bytes = 0, events = 0;
    int w = write_page(output, force, out_opt != NULL, in, used, device, layout, &data_bytes,
                       &page_bytes);
    rc = tdm__exit_worse(rc, w);
    if (w == TDM_EXIT_OK) {
        char a[TDM_FMT_LEN], b[TDM_FMT_LEN];
        for (size_t i = 0; i < used; i++)
            events += gin[i].snap->event_count;
        /* On stderr, as every command's diagnostics and "wrote" lines. */
        fprintf(stderr, "tidemark view: wrote %s (%s; data %s", output,
                tdm__fmt_bytes(a, sizeof a, page_bytes), tdm__fmt_bytes(b, sizeof b, data_bytes));
        if (events)
            fprintf(stderr, ", %.1f bytes per event", (double)data_bytes / (double)events);
        if (layout == TDM_VIEW_RANKS)
            fprintf(stderr, "; %zu rank%s on one time axis", used, used == 1 ? "" : "s");
        else if (used == 2)
            fprintf(stderr, "; %s vs %s side by side", label_of(&in[0]), label_of(&in[1]));
        fputs(")\n", stderr);
    }
out:
    for (size_t i = 0; gin && i < n; i++) {
        if (cats)
            free(cats[i]);
        tdm__input_free(&gin[i]);
    }
    for (size_t i = 0; labels && i < n; i++)
        free(labels[i]);
    free(labels);
    free(cats);
    free(in);
    free(gin);
    tdm__ranks_paths_free(&paths);
    free(origin);
    free(output);
    if (fflush(stdout) != 0 || ferror(stdout))
        rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
    return rc;
usage:
    fprintf(stderr, "Try 'tidemark help view'.\n");
    return TDM_EXIT_USAGE;
}
