/* viewer-export/cli/cmd_diff.c: `tidemark diff A B`, what changed between two
 * recordings of a program: per device, the peak (value, when), reserved and
 * live-at-exit bytes; the bytes of each category (categories.h) live at the
 * peak and each category's own highest value; and the allocation sites
 * whose live bytes at the peak changed most, with their stacks.
 *
 * Sites are matched across the files by their symbolized frames
 * (tdm__site_key: function, file, line), never by stack id or address,
 * which differ between any two runs.  A site found in one file only is
 * then paired with one found in the other only when their function chains
 * (tdm__site_chain) agree and neither has another candidate: first equal
 * chains (lines moved), then one chain within the other (a build that
 * inlined or tail-called a frame away), so that two builds of the same
 * code (-O0 and -O2) match site for site.  Devices are matched by ordinal.  A
 * device or site present in one file only counts as 0 in the other;
 * --device N of a device neither file has is an error (input.h's line for
 * each).  A or B may be a directory holding one snapshot (load.h).
 * Changes are written as shares of A's figure (tdm__fmt_share, signed).
 * No state, no locks.
 */
#include "categories.h"
#include "byte_sums.h"
#include "cli.h"
#include "load.h"
#include "format_size.h"
#include "gate.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_FMT TDM_FMT_LEN
#define NCAT TDM_CATEGORY_COUNT_

typedef struct side {
    tdm_input in;
    uint8_t *cats; /* category of each model->allocs[i] */
} side;

/* The figures of one device of one side (zeros when absent). */
typedef struct dev_figs {
    int present;
    int64_t peak, reserved_peak, live_end; /* bytes */
    int64_t peak_seq;                      /* where sites are taken */
    int64_t at_peak[NCAT], highest[NCAT];  /* bytes per category */
} dev_figs;

typedef struct site_row {
    char *key;        /* tdm__site_key */
    char *chain;      /* tdm__site_chain */
    int side;         /* 0 = A, 1 = B */
    uint32_t stack_id;
    uint64_t bytes;
    uint64_t count;
} site_row;

typedef struct site_delta {
    const char *key;   /* NULL once paired into another */
    const char *chain;
    uint64_t bytes[2], count[2];
    uint32_t stack[2]; /* 0 when absent on that side */
} site_delta;

static int row_cmp(const void *pa, const void *pb)
{
    const site_row *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    return c ? c : a->side - b->side;
}

static int64_t abs64(int64_t v) { return v >= 0 ? v : v == INT64_MIN ? INT64_MAX : -v; }

static int delta_cmp(const void *pa, const void *pb)
{
    const site_delta *a = pa, *b = pb;
    int64_t da = abs64(tdm__bytes_sub(tdm__bytes_signed(a->bytes[1]), tdm__bytes_signed(a->bytes[0])));
    int64_t db = abs64(tdm__bytes_sub(tdm__bytes_signed(b->bytes[1]), tdm__bytes_signed(b->bytes[0])));
    if (da != db)
        return da > db ? -1 : 1;
    return strcmp(a->key, b->key);
}

typedef struct cat_step {
    int64_t seq, bytes;
    uint8_t cat;
} cat_step;

static int step_cmp(const void *pa, const void *pb)
{
    const cat_step *a = pa, *b = pb;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Each category's highest live bytes on device index `di`: one sweep. */
static tdm_status category_highs(const side *s, size_t di, int64_t *highest)
{
    const tdm_model *m = s->in.model;
    size_t n = 0;
    cat_step *steps = malloc((2 * m->alloc_count + 1) * sizeof *steps);
    if (!steps)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (a->device_index != di)
            continue;
        uint8_t c = s->cats[i] < NCAT ? s->cats[i] : TDM_CATEGORY_UNKNOWN;
        steps[n++] = (cat_step){a->alloc_seq, tdm__bytes_signed(a->size), c};
        if (a->free_seq != TDM_MODEL_SEQ_NEVER)
            steps[n++] = (cat_step){a->free_seq, -tdm__bytes_signed(a->size), c};
    }
    qsort(steps, n, sizeof *steps, step_cmp);
    tdm__bytes_wide now[NCAT] = {0};
    for (size_t i = 0; i < n;) {
        int64_t seq = steps[i].seq;
        for (; i < n && steps[i].seq == seq; i++)
            now[steps[i].cat] += steps[i].bytes;
        for (int c = 0; c < NCAT; c++)
            if (now[c] > highest[c])
                highest[c] = tdm__bytes_clamp(now[c]);
    }
    free(steps);
    return TDM_OK;
}

static tdm_status figures(const side *s, int ordinal, dev_figs *f)
{
    memset(f, 0, sizeof *f);
    const tdm_model *m = s->in.model;
    int di = tdm__model_device_index(m, ordinal);
    if (di < 0)
        return TDM_OK;
    const tdm_model_device *d = &m->devices[di];
    f->present = 1;
    if (s->in.snap->event_count) {
        f->peak = d->peak_allocated;
        f->peak_seq = d->peak_seq;
    } else {
        f->peak = d->stats ? d->stats->allocated_bytes.peak : d->end_allocated;
        f->peak_seq = tdm__model_end_seq(m);
    }
    f->reserved_peak = d->reserved_known && s->in.snap->event_count ? d->peak_reserved
                       : d->stats                                   ? d->stats->reserved_bytes.peak
                                                                    : d->end_reserved;
    f->live_end = d->end_allocated < 0 ? 0 : d->end_allocated;
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (a->device_index == (uint32_t)di && tdm__model_alloc_live_at(a, f->peak_seq))
            {
            int64_t *at = &f->at_peak[s->cats[i] < NCAT ? s->cats[i] : TDM_CATEGORY_UNKNOWN];
            *at = tdm__bytes_add(*at, tdm__bytes_signed(a->size));
        }
    }
    return category_highs(s, (size_t)di, f->highest);
}

/* " (+12.3%)", " (-<0.1%)": the change from a to b as a share of a, as
 * every command writes shares; " (new)" from nothing; "" for none. */
static const char *pct(char *buf, size_t len, int64_t a, int64_t b)
{
    char share[32];
    if (a == b)
        buf[0] = '\0';
    else if (a == 0)
        snprintf(buf, len, " (new)");
    else
        snprintf(buf, len, " (%c%s)", b > a ? '+' : '-',
                 tdm__fmt_share(share, sizeof share, fabs((double)b - (double)a),
                                fabs((double)a)));
    return buf;
}

/* "+1.00 MiB", "-512 B", "0 B": a change, its sign always shown. */
static const char *signed_bytes(char *buf, size_t len, int64_t v)
{
    if (v <= 0)
        return tdm__fmt_sbytes(buf, len, v);
    buf[0] = '+';
    tdm__fmt_bytes(buf + 1, len - 1, (uint64_t)v);
    return buf;
}

static void fig_line(FILE *out, const char *what, int64_t a, int64_t b)
{
    char x[S_FMT], y[S_FMT], z[S_FMT], p[32];
    fprintf(out, "  %-16s %12s %12s %13s%s\n", what, tdm__fmt_sbytes(x, sizeof x, a),
            tdm__fmt_sbytes(y, sizeof y, b),
            a == b ? "=" : signed_bytes(z, sizeof z, b - a), pct(p, sizeof p, a, b));
}

static void when_of(char *buf, size_t len, const side *s, int ordinal)
{
    const tdm_model *m = s->in.model;
    int di = tdm__model_device_index(m, ordinal);
    char pb[32];
    if (di < 0)
        snprintf(buf, len, "(no such device)");
    else if (!s->in.snap->event_count)
        snprintf(buf, len, "(no history)");
    else if (m->devices[di].peak_step && m->devices[di].peak_phase)
        snprintf(buf, len, "step %u, %s", m->devices[di].peak_step,
                 tdm__model_phase_name(m, m->devices[di].peak_phase, pb, sizeof pb));
    else if (m->devices[di].peak_phase)
        snprintf(buf, len, "%s",
                 tdm__model_phase_name(m, m->devices[di].peak_phase, pb, sizeof pb));
    else if (m->devices[di].peak_step)
        snprintf(buf, len, "step %u", m->devices[di].peak_step);
    else
        snprintf(buf, len, "before step 1");
}

/* Appends the sites live at position `seq` of device `ordinal` of side k. */
static tdm_status add_sites(const side *s, int k, int ordinal, int64_t seq, site_row **rows,
                            size_t *n, size_t *cap)
{
    int di = tdm__model_device_index(s->in.model, ordinal);
    if (di < 0)
        return TDM_OK;
    tdm_model_site *sites;
    size_t count;
    tdm_status st = tdm__model_sites_at(s->in.model, (size_t)di, seq, &sites, &count);
    if (st != TDM_OK)
        return st;
    for (size_t i = 0; i < count && sites[i].live_bytes; i++) {
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            site_row *grown = realloc(*rows, nc * sizeof *grown);
            if (!grown)
                goto oom;
            *rows = grown;
            *cap = nc;
        }
        char *key = tdm__site_key(s->in.snap, sites[i].stack_id);
        char *chain = key ? tdm__site_chain(s->in.snap, sites[i].stack_id) : NULL;
        if (!chain) {
            free(key);
            goto oom;
        }
        (*rows)[(*n)++] = (site_row){key, chain, k, sites[i].stack_id, sites[i].live_bytes,
                                     sites[i].live_count};
    }
    free(sites);
    return TDM_OK;
oom:
    free(sites);
    return TDM_HOST_OUT_OF_MEMORY;
}

/* The one site of the other side only that site d[i] (of one side only)
 * may be, or SIZE_MAX when none or several. */
static size_t only_candidate(const site_delta *d, size_t nd, size_t i, int loose)
{
    int here = d[i].stack[0] ? 0 : 1;
    size_t found = SIZE_MAX;
    for (size_t j = 0; j < nd; j++) {
        if (!d[j].key || d[j].stack[here] || !d[j].stack[1 - here] ||
            !tdm__site_chains_match(d[i].chain, d[j].chain, loose))
            continue;
        if (found != SIZE_MAX)
            return SIZE_MAX;
        found = j;
    }
    return found;
}

/* Pairs the sites of A only with those of B only whose chains agree, one
 * to one (see the top of this file); returns the sites left. */
static size_t pair_moved_sites(site_delta *d, size_t nd)
{
    if (nd > 4096) /* quadratic: a diff of that many changed sites is read
                      by its largest rows anyway */
        return nd;
    for (int loose = 0; loose <= 1; loose++) {
        for (size_t i = 0; i < nd; i++) {
            if (!d[i].key || !d[i].stack[0] || d[i].stack[1])
                continue; /* from each site of A only */
            size_t j = only_candidate(d, nd, i, loose);
            if (j == SIZE_MAX || only_candidate(d, nd, j, loose) != i)
                continue;
            d[j].bytes[0] += d[i].bytes[0];
            d[j].count[0] += d[i].count[0];
            d[j].stack[0] = d[i].stack[0];
            d[i].key = NULL;
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < nd; i++)
        if (d[i].key)
            d[kept++] = d[i];
    return kept;
}

static tdm_status print_sites(FILE *out, const side *sd, int ordinal, const dev_figs *f,
                              unsigned top, unsigned frames)
{
    site_row *rows = NULL;
    size_t n = 0, cap = 0, nd = 0;
    site_delta *d = NULL;
    tdm_status st = add_sites(&sd[0], 0, ordinal, f[0].peak_seq, &rows, &n, &cap);
    if (st == TDM_OK)
        st = add_sites(&sd[1], 1, ordinal, f[1].peak_seq, &rows, &n, &cap);
    if (st == TDM_OK && n && !(d = calloc(n, sizeof *d)))
        st = TDM_HOST_OUT_OF_MEMORY;
    if (st != TDM_OK)
        goto done;
    /* Sort by key, then merge: equal keys are one site (several stack ids
     * can name the same frames, e.g. two return addresses on one line). */
    if (n)
        qsort(rows, n, sizeof *rows, row_cmp);
    for (size_t i = 0; i < n; i++) {
        if (!nd || strcmp(d[nd - 1].key, rows[i].key) != 0) {
            d[nd].chain = rows[i].chain;
            d[nd++].key = rows[i].key;
        }
        site_delta *x = &d[nd - 1];
        x->bytes[rows[i].side] += rows[i].bytes;
        x->count[rows[i].side] += rows[i].count;
        if (!x->stack[rows[i].side])
            x->stack[rows[i].side] = rows[i].stack_id;
    }
    nd = pair_moved_sites(d, nd);
    if (nd)
        qsort(d, nd, sizeof *d, delta_cmp);
    size_t changed = 0;
    while (changed < nd && d[changed].bytes[0] != d[changed].bytes[1])
        changed++;
    if (!changed) {
        fprintf(out, "\n  no allocation site changed its live bytes at the peak (%zu site%s)\n",
                nd, nd == 1 ? "" : "s");
        goto done;
    }
    fprintf(out, "\n  allocation sites whose live bytes at the peak changed most "
                 "(%zu of %zu changed)\n", changed, nd);
    fprintf(out, "  %12s %12s %12s  %s\n", "change", "A", "B", "innermost frames");
    for (size_t i = 0; i < changed && i < top; i++) {
        char x[S_FMT], y[S_FMT], z[S_FMT];
        int b = d[i].stack[1] ? 1 : 0; /* frames as B has them, else A's */
        fprintf(out, "  %12s %12s %12s  ",
                signed_bytes(z, sizeof z, tdm__bytes_sub(tdm__bytes_signed(d[i].bytes[1]), tdm__bytes_signed(d[i].bytes[0]))),
                tdm__fmt_bytes(x, sizeof x, d[i].bytes[0]),
                tdm__fmt_bytes(y, sizeof y, d[i].bytes[1]));
        tdm__site_print_frames(out, sd[b].in.snap, d[i].stack[b], frames ? frames : 1, 42);
    }
    if (changed > top)
        fprintf(out, "  ... %zu more changed site%s\n", changed - top,
                changed - top == 1 ? "" : "s");
done:
    for (size_t i = 0; i < n; i++) {
        free(rows[i].key);
        free(rows[i].chain);
    }
    free(rows);
    free(d);
    return st;
}

static tdm_status print_device(FILE *out, const side *sd, int ordinal, const char *name,
                               unsigned top, unsigned frames)
{
    dev_figs f[2];
    tdm_status st = figures(&sd[0], ordinal, &f[0]);
    if (st == TDM_OK)
        st = figures(&sd[1], ordinal, &f[1]);
    if (st != TDM_OK)
        return st;
    fprintf(out, "\ndevice %d (%s)%s\n", ordinal, name,
            !f[0].present ? ": only in B" : !f[1].present ? ": only in A" : "");
    fprintf(out, "  %-16s %12s %12s %13s\n", "", "A", "B", "change");
    fig_line(out, "peak allocated", f[0].peak, f[1].peak);
    char wa[96], wb[96];
    when_of(wa, sizeof wa, &sd[0], ordinal);
    when_of(wb, sizeof wb, &sd[1], ordinal);
    fprintf(out, "  %-16s A: %s; B: %s\n", "peak at", wa, wb);
    fig_line(out, "reserved peak", f[0].reserved_peak, f[1].reserved_peak);
    fig_line(out, "live at exit", f[0].live_end, f[1].live_end);

    static const uint8_t order[NCAT] = {
        TDM_CATEGORY_PARAMETER, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_GRADIENT,
        TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_INPUT, TDM_CATEGORY_TEMPORARY,
        TDM_CATEGORY_UNKNOWN};
    fprintf(out, "\n  %-16s %12s %12s %13s%-12s %s\n", "at the peak", "A", "B", "change", "",
            "own highest, A -> B");
    for (int i = 0; i < NCAT; i++) {
        int c = order[i];
        if (!f[0].at_peak[c] && !f[1].at_peak[c] && !f[0].highest[c] && !f[1].highest[c])
            continue;
        char x[S_FMT], y[S_FMT], z[S_FMT], hx[S_FMT], hy[S_FMT], p[32];
        fprintf(out, "  %-16s %12s %12s %13s%-12s %s -> %s\n", tdm_category_name((tdm_category)c),
                tdm__fmt_sbytes(x, sizeof x, f[0].at_peak[c]),
                tdm__fmt_sbytes(y, sizeof y, f[1].at_peak[c]),
                f[0].at_peak[c] == f[1].at_peak[c]
                    ? "="
                    : signed_bytes(z, sizeof z, f[1].at_peak[c] - f[0].at_peak[c]),
                pct(p, sizeof p, f[0].at_peak[c], f[1].at_peak[c]),
                tdm__fmt_sbytes(hx, sizeof hx, f[0].highest[c]),
                tdm__fmt_sbytes(hy, sizeof hy, f[1].highest[c]));
    }
    return print_sites(out, sd, ordinal, f, top, frames);
}

static void print_file_line(FILE *out, const char *label, const side *s)
{
    const tdm_snap_header *h = &s->in.snap->header;
    fprintf(out, "  %s  %s: %s, pid %" PRId64 "%s\n", label, s->in.path,
            h->command && h->command[0] ? h->command : "(unknown command)", h->pid,
            s->in.truncated ? ", TRUNCATED" : "");
}

static const tdm_cli_option options[] = {
    {.name = "top", .code = 't', .has_arg = required_argument, .metavar = "N",
     .help = "sites listed per device (default 10)"},
    {.name = "frames", .code = 'f', .has_arg = required_argument, .metavar = "N",
     .help = "frames shown per site (default 3)"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "only the device with ordinal N (exit 2 when neither file\n"
             "has it)"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_diff_spec = {
    .usage = "usage: tidemark diff [OPTIONS] A B\n"
             "\n"
             "Compares two recordings (A, the reference, and B): per device, the peak of\n"
             "allocated memory, when it happened, reserved and live-at-exit bytes; the\n"
             "bytes per category live at the peak and each category's own highest value;\n"
             "and the allocation sites whose live bytes at the peak changed most, with\n"
             "their stacks.  Sites are matched by their symbolized frames (function, file,\n"
             "line), so two runs of the same program line up whatever their addresses.\n"
             "A or B may be a directory holding one snapshot (as `tidemark run -o DIR`\n"
             "leaves it).\n"
             "\n"
             "options:\n",
    .options = {options, 16},
    .after = "\n"
             "Exit codes: 0 ok, 1 usage error, 2 a file missing, unreadable, corrupt or\n"
             "truncated (a truncated file is still compared), 4 internal error.\n",
};

static tdm_status diff(FILE *out, side *sd, int only, unsigned top, unsigned frames)
{
    for (int k = 0; k < 2; k++) {
        tdm_status st = tdm__categories_infer(sd[k].in.model, &sd[k].cats);
        if (st != TDM_OK)
            return st;
    }
    fprintf(out, "tidemark diff\n");
    print_file_line(out, "A", &sd[0]);
    print_file_line(out, "B", &sd[1]);
    int shown = 0;
    for (int k = 0; k < 2; k++) {
        const tdm_model *m = sd[k].in.model;
        for (size_t i = 0; i < m->device_count; i++) {
            const tdm_model_device *d = &m->devices[i];
            if ((only >= 0 && d->ordinal != only) ||
                (k == 1 && tdm__model_device_index(sd[0].in.model, d->ordinal) >= 0))
                continue;
            tdm_status st = print_device(out, sd, d->ordinal,
                                         tdm__model_device_label(d), top,
                                         frames);
            if (st != TDM_OK)
                return st;
            shown++;
        }
    }
    if (!shown)
        fprintf(out, "\n(no devices)\n");
    return TDM_OK;
}

int tdm__cli_diff(int argc, char **argv)
{
    unsigned long top = 10, frames = 3, v;
    int device = -1, c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "diff", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 't':
            if (tdm__parse_count("diff", "--top", optarg, 100000, &top))
                goto usage;
            break;
        case 'f':
            if (tdm__parse_count("diff", "--frames", optarg, 1000, &frames))
                goto usage;
            break;
        case 'd':
            if (tdm__parse_count("diff", "--device", optarg, 32767, &v))
                goto usage;
            device = (int)v;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (argc - optind != 2) {
        fprintf(stderr, "tidemark diff: needs two files, A and B; got %d\n", argc - optind);
        goto usage;
    }

    side sd[2];
    memset(sd, 0, sizeof sd);
    int rc = TDM_EXIT_OK;
    for (int k = 0; k < 2; k++)
        rc = tdm__exit_worse(rc, tdm__input_load("diff", argv[optind + k], &sd[k].in));
    if (sd[0].in.model && sd[1].in.model && device >= 0 &&
        tdm__model_device_index(sd[0].in.model, device) < 0 &&
        tdm__model_device_index(sd[1].in.model, device) < 0) {
        for (int k = 0; k < 2; k++)
            rc = tdm__exit_worse(rc, tdm__input_check_device("diff", &sd[k].in, device));
    } else if (sd[0].in.model && sd[1].in.model) {
        tdm_status st = diff(stdout, sd, device, (unsigned)top, (unsigned)frames);
        if (st != TDM_OK) {
            fprintf(stderr, "tidemark diff: %s\n", tdm_strerror(st));
            rc = TDM_EXIT_TOOL_ERROR;
        }
    }
    for (int k = 0; k < 2; k++) {
        free(sd[k].cats);
        tdm__input_free(&sd[k].in);
    }
    return tdm__cli_flush("diff", rc);
usage:
    fprintf(stderr, "Try 'tidemark help diff'.\n");
    return TDM_EXIT_USAGE;
}
