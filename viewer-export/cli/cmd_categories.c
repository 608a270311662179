/* viewer-export/cli/cmd_categories.c: `tidemark categories`, what kind of
 * memory a program held:
 *   tidemark categories FILE.tdm         bytes per category at the peak
 *                                        and over time, per device;
 *   tidemark categories --trace T.csv    `id,category` for every
 *                                        allocation of a traces CSV,
 *                                        inferred without its labels;
 *   ... --trace T.csv --score            agreement with the labels,
 *                                        weighted by bytes × lifetime;
 *   ... --explain ADDR|SITE FILE.tdm     what decided the category of the
 *                                        allocations at an address or of
 *                                        a site;
 *   ... --rules FILE                     the user's stack rules first;
 *   ... --list-rules [FILE.tdm]          the stack rules in force (for
 *                                        that snapshot: its recording's
 *                                        rules file too).
 * The categories come from categories.c (tags, then rules over stacks,
 * then phases and lifetimes); this file only samples, scores, explains
 * and prints.  Snapshot operands
 * may be directories (their *.tdm files, as ranks.h lists them), each
 * snapshot printed in turn; shares and times are written as every command
 * writes them (tdm__fmt_share, tdm__fmt_offset).  No state, no locks.
 */
#include "categories.h"
#include "byte_sums.h"
#include "cli.h"
#include "load.h"
#include "format_size.h"
#include "import_build.h"
#include "import_csv.h"
#include "ranks.h"

#include "sites.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NCAT TDM_CATEGORY_COUNT_

/* Display order: the static memory first, as timelines stack it. */
static const uint8_t cat_order[NCAT] = {
    TDM_CATEGORY_PARAMETER,  TDM_CATEGORY_OPTIMIZER_STATE,
    TDM_CATEGORY_GRADIENT,   TDM_CATEGORY_ACTIVATION,
    TDM_CATEGORY_INPUT,      TDM_CATEGORY_TEMPORARY,
    TDM_CATEGORY_UNKNOWN,
};

/* "PARAMETER": the traces' spelling. */
static const char *upper_name(uint8_t c, char *buf, size_t len)
{
    const char *n = tdm_category_name((tdm_category)c);
    size_t i = 0;
    for (; n[i] && i + 1 < len; i++)
        buf[i] = (char)toupper((unsigned char)n[i]);
    buf[i] = '\0';
    return buf;
}

static void print_device(FILE *out, const tdm_model *m, size_t dev,
                         int64_t (*rows)[NCAT], const int64_t *seqs,
                         size_t nrows)
{
    const tdm_model_device *d = &m->devices[dev];
    const tdm_snap *s = m->snap;
    char b1[TDM_FMT_LEN], b2[TDM_FMT_LEN], pbuf[32];
    uint64_t origin = tdm__model_time_origin_ns(m); /* as every command */

    fprintf(out, "device %d (%s)\n", d->ordinal, tdm__model_device_label(d));
    int64_t total = 0;
    for (int c = 0; c < NCAT; c++)
        total += rows[0][c];
    const char *ph = tdm__model_phase_name(m, d->peak_phase, pbuf, sizeof pbuf);
    fprintf(out, "  at the peak: %s, step %" PRIu32 "%s%s, %s from %s\n",
            tdm__fmt_bytes(b1, sizeof b1, (uint64_t)(total > 0 ? total : 0)),
            d->peak_step, ph[0] ? ", phase " : "", ph,
            tdm__fmt_offset(b2, sizeof b2,
                            (int64_t)(d->peak_time_ns - origin)),
            tdm__model_time_origin_name(m));
    for (int i = 0; i < NCAT; i++) {
        uint8_t c = cat_order[i];
        if (!rows[0][c])
            continue;
        fprintf(out, "    %-16s %12s %7s\n",
                tdm_category_name((tdm_category)c),
                tdm__fmt_bytes(b1, sizeof b1, (uint64_t)rows[0][c]),
                tdm__fmt_share(b2, sizeof b2, (double)rows[0][c], (double)total));
    }
    if (nrows <= 1)
        return;
    /* Units that keep the table's numbers readable for this device. */
    int64_t most = 0;
    for (size_t r = 1; r < nrows; r++) {
        int64_t sum = 0;
        for (int c = 0; c < NCAT; c++)
            sum += rows[r][c];
        if (sum > most)
            most = sum;
    }
    const char *unit = most >= (10ll << 30) ? "GiB" : most >= (1ll << 20) ? "MiB" : "KiB";
    double div = most >= (10ll << 30) ? 1073741824.0 : most >= (1ll << 20) ? 1048576.0 : 1024.0;
    /* Times as offsets from the origin, the column as wide as the
     * widest. */
    int tw = 4;
    for (size_t r = 1; r < nrows; r++) {
        uint64_t t = seqs[r] >= 0 ? s->events[seqs[r]].time_ns : m->window_start_ns;
        int w = (int)strlen(tdm__fmt_offset(b1, sizeof b1, (int64_t)(t - origin)));
        tw = w > tw ? w : tw;
    }
    fprintf(out, "  over time (%s):\n    %*s %5s %-10s", unit, tw, "time", "step",
            "phase");
    static const char *const short_names[NCAT] = {
        [TDM_CATEGORY_UNKNOWN] = "unknown",     [TDM_CATEGORY_PARAMETER] = "param",
        [TDM_CATEGORY_OPTIMIZER_STATE] = "optim", [TDM_CATEGORY_GRADIENT] = "grad",
        [TDM_CATEGORY_ACTIVATION] = "activ",    [TDM_CATEGORY_INPUT] = "input",
        [TDM_CATEGORY_TEMPORARY] = "temp"};
    for (int i = 0; i < NCAT; i++)
        fprintf(out, " %9s", short_names[cat_order[i]]);
    fprintf(out, " %9s\n", "total");
    /* A row that reads the same as the one above it (an event that moved
     * no category by a tenth of a unit, at the same shown time) is left
     * out: it says nothing. */
    char line[512], prev[512] = "";
    for (size_t r = 1; r < nrows; r++) {
        const tdm_event *ev = seqs[r] >= 0 ? &s->events[seqs[r]] : NULL;
        uint64_t t = ev ? ev->time_ns : m->window_start_ns;
        const char *pn = ev ? tdm__model_phase_name(m, ev->phase, pbuf, sizeof pbuf) : "";
        if (strlen(pn) > 10)
            pn = pn + strlen(pn) - 10;
        size_t len = (size_t)snprintf(line, sizeof line, "    %*s %5" PRIu32 " %-10s", tw,
                                      tdm__fmt_offset(b1, sizeof b1, (int64_t)(t - origin)),
                                      ev ? ev->step : 0, pn[0] ? pn : "-");
        int64_t sum = 0;
        for (int i = 0; i < NCAT && len < sizeof line; i++) {
            sum += rows[r][cat_order[i]];
            len += (size_t)snprintf(line + len, sizeof line - len, " %9.1f",
                                    (double)rows[r][cat_order[i]] / div);
        }
        if (len < sizeof line)
            snprintf(line + len, sizeof line - len, " %9.1f\n", (double)sum / div);
        if (strcmp(line, prev) == 0)
            continue;
        fputs(line, out);
        memcpy(prev, line, sizeof line);
    }
}

/* ---- --explain ------------------------------------------------------------ */

/* Nonzero when `query` names allocation `a`: an address inside it, or
 * (not a number) text found in one of its stack's frames as the commands
 * show them ("Adam.step", "adam.py:41", "train_step (train.c"). */
static int explain_selects(const tdm_snap *s, const tdm_model_alloc *a, const char *query,
                           int is_addr, uint64_t addr)
{
    if (is_addr)
        return addr >= a->addr && (addr < a->addr + a->size || addr == a->addr);
    if (!a->stack_id || a->stack_id >= s->stack_count)
        return 0;
    const tdm_snap_stack *sk = &s->stacks[a->stack_id];
    char frame[1024];
    for (uint32_t k = 0; k < sk->depth; k++) {
        if (sk->frames[k] >= s->frame_count)
            continue;
        tdm__site_format_frame(frame, sizeof frame, &s->frames[sk->frames[k]]);
        if (strstr(frame, query))
            return 1;
    }
    return 0;
}

typedef struct reason_group {
    char *text;
    uint64_t count, bytes;
} reason_group;

static int explain_snapshot(const char *path, const tdm_model *m, const char *query)
{
    char *end;
    errno = 0;
    uint64_t addr = strtoull(query, &end, 0);
    int is_addr = query[0] && !*end && errno == 0 && isdigit((unsigned char)query[0]);
    tdm_category_decision d;
    if (tdm__categories_decide(m, &d) != TDM_OK)
        return TDM_EXIT_TOOL_ERROR;
    const tdm_snap *s = m->snap;
    char why[2048], b1[TDM_FMT_LEN], b2[TDM_FMT_LEN], b3[TDM_FMT_LEN];
    reason_group *groups = NULL;
    size_t ngroups = 0, matched = 0;
    int rc = TDM_EXIT_OK;
    printf("%s\n", path);
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (!explain_selects(s, a, query, is_addr, addr))
            continue;
        matched++;
        tdm__categories_explain(m, &d, i, why, sizeof why);
        if (is_addr) {
            /* Each allocation of the address in turn, with when it lived. */
            const char *site = "";
            char frame[512] = "";
            uint32_t f = tdm__site_first_frame(s, a->stack_id);
            if (a->stack_id && a->stack_id < s->stack_count &&
                f < s->stacks[a->stack_id].depth &&
                s->stacks[a->stack_id].frames[f] < s->frame_count) {
                tdm__site_format_frame(frame, sizeof frame,
                                       &s->frames[s->stacks[a->stack_id].frames[f]]);
                site = frame;
            }
            uint64_t t0 = tdm__model_time_origin_ns(m);
            printf("  0x%" PRIx64 " %s, device %d, made %s, %s%s%s%s\n    %s\n", a->addr,
                   tdm__fmt_bytes(b1, sizeof b1, a->size), m->devices[a->device_index].ordinal,
                   a->alloc_seq >= 0
                       ? tdm__fmt_offset(b2, sizeof b2,
                                         (int64_t)(s->events[a->alloc_seq].time_ns - t0))
                       : "before the window",
                   a->free_seq == TDM_MODEL_SEQ_NEVER ? "never freed" : "freed ",
                   a->free_seq == TDM_MODEL_SEQ_NEVER
                       ? ""
                       : tdm__fmt_offset(b3, sizeof b3,
                                         (int64_t)(s->events[a->free_seq].time_ns - t0)),
                   site[0] ? ", at " : "", site, why);
            continue;
        }
        size_t g = 0;
        while (g < ngroups && strcmp(groups[g].text, why) != 0)
            g++;
        if (g == ngroups) {
            reason_group *grown = realloc(groups, (ngroups + 1) * sizeof *grown);
            char *text = strdup(why);
            if (!grown || !text) {
                free(text);
                if (grown)
                    groups = grown;
                rc = TDM_EXIT_TOOL_ERROR;
                goto out;
            }
            groups = grown;
            groups[ngroups++] = (reason_group){text, 0, 0};
        }
        groups[g].count++;
        groups[g].bytes += a->size;
    }
    if (!matched) {
        fprintf(stderr, "tidemark categories: %s has no allocation %s '%s'\n", path,
                is_addr ? "at" : "with a frame matching", query);
        rc = TDM_EXIT_BAD_INPUT;
    }
    for (size_t g = 0; g < ngroups; g++)
        printf("  %6" PRIu64 " allocs %12s  %s\n", groups[g].count,
               tdm__fmt_bytes(b1, sizeof b1, groups[g].bytes), groups[g].text);
out:
    for (size_t g = 0; g < ngroups; g++)
        free(groups[g].text);
    free(groups);
    tdm__categories_decision_free(&d);
    return rc;
}

/* The stack rules in force: --rules and the defaults, and with a
 * snapshot (`path`) also the rules its recording named. */
static int list_rules(const char *path)
{
    tdm_snap none, *snap = &none;
    int truncated = 0, rc = TDM_EXIT_OK;
    uint64_t cut = 0;
    memset(&none, 0, sizeof none);
    none.header.config = "";
    if (path) {
        snap = NULL;
        rc = tdm__input_read_snapshot("categories", path, &snap, &truncated, &cut);
        if (!snap)
            return rc;
    }
    tdm_category_rules rules;
    if (tdm__categories_rules_for(snap, &rules) != TDM_OK) {
        fprintf(stderr, "tidemark categories: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = TDM_EXIT_TOOL_ERROR;
    } else {
        printf("# the first rule matching a frame of an allocation's stack decides%s%s\n",
               path ? " in " : "", path ? path : "");
        for (size_t i = 0; i < rules.count; i++)
            printf("%-40s # %s\n", rules.rule[i].text, rules.rule[i].where);
        tdm__category_rules_free(&rules);
    }
    if (path)
        tdm__input_snap_free(snap);
    return rc;
}

static int int64_cmp(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

static int run_snapshot(const char *path, unsigned nsamples, int device, const char *explain)
{
    tdm_snap *snap = NULL;
    int truncated = 0;
    uint64_t cut = 0;
    int rc = tdm__input_read_snapshot("categories", path, &snap, &truncated, &cut);
    if (!snap)
        return rc;
    tdm_model *m = NULL;
    uint8_t *cats = NULL;
    int64_t *seqs = NULL;
    int64_t (*rows)[NCAT] = NULL;
    if (tdm__model_build(snap, &m) != TDM_OK)
        goto oom;
    tdm_input in = {.path = path, .operand = path, .snap = snap, .model = m};
    int lacks = tdm__input_check_device("categories", &in, device);
    if (lacks != TDM_EXIT_OK) {
        tdm__model_free(m);
        tdm__input_snap_free(snap);
        return tdm__exit_worse(rc, lacks);
    }
    if (explain) {
        int erc = explain_snapshot(path, m, explain);
        tdm__model_free(m);
        tdm__input_snap_free(snap);
        if (erc == TDM_EXIT_TOOL_ERROR)
            fprintf(stderr, "tidemark categories: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return tdm__exit_worse(rc, erc);
    }
    if (tdm__categories_infer(m, &cats) != TDM_OK)
        goto oom;
    printf("%s\n", path);
    /* A window that lost its oldest events (tidemark's ring, or PyTorch's
     * in a merged snapshot) lost what was allocated first: parameters. */
    if (snap->dropped_events)
        printf("  history incomplete: %" PRIu64 " events dropped before the window; what "
               "was allocated before it (parameters, optimizer state) may lack its "
               "category (the summary's note says more)\n",
               snap->dropped_events);
    int shown = 0;
    for (size_t dev = 0; dev < m->device_count; dev++) {
        const tdm_model_device *d = &m->devices[dev];
        if (device >= 0 && d->ordinal != device)
            continue;
        if (device < 0 && d->alloc_events == 0 && d->seeded_from_free == 0 &&
            d->seeded_from_state == 0)
            continue;
        shown++;
        /* Row 0 is the peak; then up to nsamples evenly spaced times, each
         * the state after the last event at or before it. */
        size_t n = 1 + nsamples;
        free(seqs);
        free(rows);
        seqs = malloc(n * sizeof *seqs);
        rows = malloc(n * sizeof *rows);
        if (!seqs || !rows)
            goto oom;
        seqs[0] = d->peak_seq;
        uint64_t t0 = m->window_start_ns, t1 = m->window_end_ns;
        for (unsigned i = 0; i < nsamples; i++) {
            uint64_t t = nsamples > 1 ? t0 + (uint64_t)((double)(t1 - t0) * i /
                                                        (nsamples - 1))
                                      : t1;
            seqs[1 + i] = tdm__model_seq_at_time(m, t);
        }
        qsort(seqs + 1, nsamples, sizeof *seqs, int64_cmp);
        /* Times that fall between the same two events (a burst of steps,
         * then a quiet end) show the same state: keep one row of each. */
        unsigned distinct = 0;
        for (unsigned i = 0; i < nsamples; i++)
            if (distinct == 0 || seqs[1 + i] != seqs[distinct])
                seqs[1 + distinct++] = seqs[1 + i];
        n = 1 + distinct;
        /* tdm__categories_bytes_at wants ascending positions: do the peak on its own. */
        if (tdm__categories_bytes_at(m, cats, dev, seqs, 1, rows) != TDM_OK ||
            tdm__categories_bytes_at(m, cats, dev, seqs + 1, distinct, rows + 1) != TDM_OK)
            goto oom;
        print_device(stdout, m, dev, rows, seqs, n);
    }
    if (!shown)
        printf("no device with allocations\n");
    free(seqs);
    free(rows);
    free(cats);
    tdm__model_free(m);
    tdm__input_snap_free(snap);
    return rc;
oom:
    fprintf(stderr, "tidemark categories: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
    free(seqs);
    free(rows);
    free(cats);
    tdm__model_free(m);
    tdm__input_snap_free(snap);
    return TDM_EXIT_TOOL_ERROR;
}

/* ---- traces CSV: inferred labels and their score ------------------------ */

static int addr_cmp(const void *key, const void *elem)
{
    uint64_t k = *(const uint64_t *)key, a = ((const tdm_trace_alloc *)elem)->addr;
    return k < a ? -1 : k > a;
}

static void print_score(const char *path, const tdm_trace_alloc *ta, size_t n,
                        const uint8_t *inferred, uint64_t end_ns,
                        double *overall)
{
    double w_all[NCAT] = {0}, w_ok[NCAT] = {0};
    size_t count[NCAT] = {0};
    double total = 0, ok = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t until = ta[i].free_ns == UINT64_MAX ? end_ns : ta[i].free_ns;
        double w = (double)ta[i].size *
                   (double)(until > ta[i].alloc_ns ? until - ta[i].alloc_ns : 0);
        uint8_t t = ta[i].truth;
        w_all[t] += w;
        count[t]++;
        total += w;
        if (inferred[i] == t) {
            w_ok[t] += w;
            ok += w;
        }
    }
    const char *base = strrchr(path, '/');
    printf("%s: %zu allocations, agreement weighted by bytes x lifetime\n",
           base ? base + 1 : path, n);
    printf("  %-16s %8s %8s %8s\n", "category", "allocs", "weight", "agree%");
    char nb[32], sb[32];
    for (int i = 0; i < NCAT; i++) {
        uint8_t c = cat_order[i];
        if (!count[c])
            continue;
        /* the weight is a share; agreement a score, to the --min-score's
         * two decimals */
        printf("  %-16s %8zu %8s %8.2f\n", upper_name(c, nb, sizeof nb), count[c],
               tdm__fmt_share(sb, sizeof sb, w_all[c], total),
               w_all[c] > 0 ? 100.0 * w_ok[c] / w_all[c] : 100.0);
    }
    *overall = total > 0 ? 100.0 * ok / total : 100.0;
    printf("  overall agreement: %.2f%%\n", *overall);
}

static int run_trace(const char *path, int score, double min_score)
{
    tdm_trace_alloc *ta = NULL;
    size_t nta = 0;
    tdm_trace_csv_options o = {.tag_with_category = 0, .allocs = &ta,
                               .alloc_count = &nta};
    tdm_snap *snap = NULL;
    char err[256];
    tdm_status st = tdm__import_trace_csv(path, &o, &snap, err, sizeof err);
    if (st != TDM_OK) {
        fprintf(stderr, "tidemark categories: %s: %s\n", path,
                err[0] ? err : tdm_strerror(st));
        return st == TDM_HOST_OUT_OF_MEMORY ? TDM_EXIT_TOOL_ERROR
                                            : TDM_EXIT_BAD_INPUT;
    }
    tdm_model *m = NULL;
    uint8_t *cats = NULL, *inferred = NULL;
    int rc = TDM_EXIT_OK;
    if (tdm__model_build(snap, &m) != TDM_OK ||
        tdm__categories_infer(m, &cats) != TDM_OK ||
        !(inferred = malloc(nta ? nta : 1))) {
        fprintf(stderr, "tidemark categories: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = TDM_EXIT_TOOL_ERROR;
        goto out;
    }
    /* The importer's addresses grow with file order and are never reused,
     * so an address names one row. */
    memset(inferred, TDM_CATEGORY_UNKNOWN, nta);
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_trace_alloc *t =
            bsearch(&m->allocs[i].addr, ta, nta, sizeof *ta, addr_cmp);
        if (t)
            inferred[t - ta] = cats[i];
    }
    if (score) {
        double overall;
        uint64_t end_ns = snap->event_count
                              ? snap->events[snap->event_count - 1].time_ns : 0;
        print_score(path, ta, nta, inferred, end_ns, &overall);
        if (min_score >= 0 && overall < min_score) {
            fprintf(stderr, "tidemark categories: %s: agreement %.2f%% is below %.2f%%\n",
                    path, overall, min_score);
            rc = TDM_EXIT_GATE_FAILED;
        }
    } else {
        char nb[32];
        printf("id,category\n");
        for (size_t i = 0; i < nta; i++)
            printf("%" PRIu64 ",%s\n", ta[i].id, upper_name(inferred[i], nb, sizeof nb));
    }
out:
    free(inferred);
    free(cats);
    free(ta);
    tdm__model_free(m);
    tdm__ibuild_snap_free(snap);
    return rc;
}

/* ---- command line -------------------------------------------------------- */

static const tdm_cli_option options[] = {
    {.name = "trace", .code = 't', .has_arg = required_argument, .metavar = "CSV",
     .help = "read an allocation trace (action,time_ns,id,size,\n"
             "category), ignore its category column, and print\n"
             "'id,category' for every allocation"},
    {.name = "score", .code = 's',
     .help = "instead, compare with the category column: agreement\n"
             "weighted by bytes x lifetime, per category and overall"},
    {.name = "min-score", .code = 'm', .has_arg = required_argument, .metavar = "PCT",
     .help = "with --score: exit 3 when the overall agreement is lower"},
    {.name = "rules", .code = 'r', .has_arg = required_argument, .metavar = "FILE",
     .help = "stack rules, one a line: CATEGORY function=REGEX file=REGEX\n"
             "(either or both; '#' comments); they go first"},
    {.name = "explain", .code = 'e', .has_arg = required_argument, .metavar = "ADDR|SITE",
     .help = "say what decided the category of the allocations\n"
             "at address ADDR (0x...), or of those with a frame\n"
             "containing SITE ('Adam.step', 'train.py:41')"},
    {.name = "list-rules", .code = 'l',
     .help = "print the stack rules in force (with SNAPSHOT: for it,\n"
             "its recording's category_rules too), in order, and exit"},
    {.name = "samples", .code = 'n', .has_arg = required_argument, .metavar = "N",
     .help = "evenly spaced times in the over-time table, each\n"
             "distinct state shown once (0 = only the peak)"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "only this device ordinal (a snapshot without it: exit 2)"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_categories_spec = {
    .usage = "usage: tidemark categories [--rules FILE] [--samples N] [--device N] FILE.tdm|DIR...\n"
             "       tidemark categories [--rules FILE] --explain ADDR|SITE FILE.tdm|DIR...\n"
             "       tidemark categories [--rules FILE] --list-rules [SNAPSHOT]\n"
             "       tidemark categories --trace TRACE.csv [--score [--min-score PCT]]\n"
             "\n"
             "Says what kind of memory each allocation is: parameter,\n"
             "optimizer_state, gradient, activation, input, temporary or unknown.\n"
             "An explicit tag (tdm_tag_push, tdm_tag_ptr) wins; then the first rule\n"
             "over the frames of its stack that matches (--rules FILE, the recording's\n"
             "category_rules=FILE, then tidemark's rules for PyTorch); otherwise the\n"
             "kind is inferred from the phase marks and lifetimes (docs/categories.md).\n"
             "\n"
             "With a snapshot: bytes per category at the peak, then a table of\n"
             "bytes per category at N evenly spaced times (default 12; a\n"
             "state shown once when several times fall on it).\n"
             "\n",
    .options = {options, 18},
    .after = "\n"
             "A directory stands for the *.tdm files in it, each shown in turn.\n",
};

int tdm__cli_categories(int argc, char **argv)
{
    const char *trace = NULL, *rules = NULL, *explain = NULL;
    int score = 0, device = -1, list = 0;
    double min_score = -1;
    unsigned long samples = 12;
    char *end;
    int c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "categories", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 't':
            trace = optarg;
            break;
        case 's':
            score = 1;
            break;
        case 'm':
            min_score = strtod(optarg, &end);
            if (*end || end == optarg || min_score < 0 || min_score > 100) {
                return tdm__cli_usage("categories", "--min-score wants a percentage, got '%s'",
                                      optarg);
            }
            break;
        case 'n':
            samples = strtoul(optarg, &end, 10);
            if (*end || end == optarg || optarg[0] == '-' || samples > 10000) {
                return tdm__cli_usage("categories", "--samples wants 0..10000, got '%s'", optarg);
            }
            break;
        case 'd':
            device = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg || device < 0 || device > 32767) {
                return tdm__cli_usage("categories", "--device wants an ordinal, got '%s'", optarg);
            }
            break;
        case 'r':
            rules = optarg;
            break;
        case 'e':
            if (!optarg[0]) {
                return tdm__cli_usage("categories", "--explain wants an address or a site");
            }
            explain = optarg;
            break;
        case 'l':
            list = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (rules) {
        char err[1024];
        if (tdm__categories_set_rules_file(rules, err, sizeof err) != 0) {
            fprintf(stderr, "tidemark categories: %s\n", err);
            return TDM_EXIT_BAD_INPUT;
        }
    }
    if (list) {
        if (argc - optind > 1)
            return tdm__cli_usage("categories", "--list-rules takes one snapshot at most, got "
                                  "'%s' too", argv[optind + 1]);
        return tdm__cli_flush("categories", list_rules(optind < argc ? argv[optind] : NULL));
    }
    if (trace) {
        if (optind != argc) {
            return tdm__cli_usage("categories", "--trace takes no snapshot too ('%s')",
                                  argv[optind]);
        }
        return run_trace(trace, score, min_score);
    }
    if (score || min_score >= 0)
        return tdm__cli_usage("categories", "%s needs --trace", score ? "--score" : "--min-score");
    if (optind >= argc) {
        fprintf(stderr, "tidemark categories: no snapshot given\n"
                        "Try 'tidemark help categories'.\n");
        return TDM_EXIT_USAGE;
    }
    /* A directory stands for its snapshots, read one at a time. */
    tdm_rank_paths paths;
    int rc = tdm__ranks_expand("categories", argv + optind, (size_t)(argc - optind), &paths);
    if (rc == TDM_EXIT_TOOL_ERROR)
        return rc;
    for (size_t i = 0; i < paths.count; i++)
        rc = tdm__exit_worse(rc, run_snapshot(paths.paths[i], (unsigned)samples, device,
                                              explain));
    tdm__ranks_paths_free(&paths);
    return tdm__cli_flush("categories", rc);
}
