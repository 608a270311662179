/* viewer-export/model/summary_ranks.c: `tidemark summary` of many snapshots,
 * one per rank of a job: a table with one row per rank and the spread of
 * the peaks across ranks (ranks.h).  Up to TDM_SUMMARY_RANKS_ALL_UP_TO
 * ranks every row is printed; a bigger job (1024 ranks would be 1024
 * rows) gets the rows of the highest and the lowest peaks, a line for the
 * ranks between, and the median and the ties of the max and min in the
 * spread, unless --all asks for every row.
 *
 * Each file is loaded (by the loader the command line hands it: .tdm or an importable
 * file),
 * reduced to a row of figures and freed before the next one is read, so
 * the memory used is that of one snapshot whatever the job's size.  The
 * first readable file is kept until a second one turns up: when it stays
 * the only one, its full single-file summary is printed instead of a
 * table of one row.
 *
 * Every figure comes from the analysis model (model.h), chosen as gate.c
 * chooses them: the peak is the history's when there is one, else the
 * allocator stats', else the bytes live at the dump.  A row describes one
 * device of its file: the one --device names, else the one with the
 * highest peak.  Times of the peaks are given from the earliest recording
 * start among the files: the recorder's clock is CLOCK_REALTIME, so ranks
 * on one host line up exactly and across hosts within their clock skew.
 * No state, no locks.
 */
#include "summary.h"
#include "format_size.h"
#include "sites.h"
#include "torch_segments.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define S_FMT TDM_FMT_LEN

enum { ROW_OK = 0, ROW_TRUNCATED = 1, ROW_UNREADABLE = 2 };

/* One file, reduced to what the table and the spread print. */
typedef struct rank_row {
    const char *path;      /* borrowed from the expanded paths */
    size_t order;          /* position among them (the sort's tie-break) */
    int state;             /* ROW_* */
    char host[64];
    int32_t rank;          /* -1: none in the header */
    int32_t world_size;    /* 0: unknown */
    uint64_t start_us;     /* recording start, µs since the epoch; 0 unknown */
    uint64_t origin_ns;    /* its times count from here (model.h) */
    int device;            /* ordinal of the row's device; -1: none */
    char device_name[48];
    size_t devices_used;   /* devices of the file that held memory */
    int64_t peak;          /* bytes allocated at the peak; -1 unknown */
    int peak_reserved;     /* PyTorch's segments seen from below: the peak
                              is of reserved bytes (torch_segments.h) */
    int peak_from_stats;   /* no history: the allocator's own peak */
    uint64_t peak_time_ns; /* 0: unknown */
    uint32_t peak_step;
    char peak_phase[32];
    int64_t live_end;      /* bytes; -1 unknown */
    uint64_t dropped;      /* events the ring overwrote */
    uint64_t site_bytes;   /* the top site live at the peak */
    char site[768];        /* its frames outside tidemark, '\n' between; "" none */
} rank_row;

/* The peak of device `di` of `in` in bytes, or -1 when the file cannot
 * tell (the same choice as gate.c's max-peak). */
static int64_t device_peak(const tdm_input *in, size_t di, int torch, int *from_stats)
{
    const tdm_model_device *d = &in->model->devices[di];
    *from_stats = 0;
    if (torch && d->reserved_known)
        return d->peak_reserved; /* segments, not tensors: as summary.c does */
    if (in->snap->event_count)
        return d->peak_allocated;
    if (d->stats) {
        *from_stats = 1;
        return d->stats->allocated_bytes.peak;
    }
    return in->model->state_known ? d->end_allocated : -1;
}

/* The top site live at the peak of device `di`: its bytes, and up to
 * `frames` frames from the first outside tidemark, one per line. */
static void row_site(rank_row *r, const tdm_input *in, size_t di, unsigned frames)
{
    const tdm_model *m = in->model;
    const tdm_snap *s = in->snap;
    int64_t at = s->event_count ? m->devices[di].peak_seq : tdm__model_end_seq(m);
    tdm_model_site *sites;
    size_t n;
    if (tdm__model_sites_at(m, di, at, &sites, &n) != TDM_OK)
        return; /* the row goes without its site rather than fail */
    if (n && sites[0].live_bytes) {
        uint32_t sid = sites[0].stack_id;
        r->site_bytes = sites[0].live_bytes;
        snprintf(r->site, sizeof r->site, "(no stack recorded)");
        /* Allocations whose alloc was not recorded: named by their free. */
        const char *lead = sites[0].stack_of_free ? "freed at " : "";
        if (sid && sid < s->stack_count && s->stacks[sid].depth) {
            const tdm_snap_stack *st = &s->stacks[sid];
            size_t used = 0;
            unsigned shown = 0;
            for (uint32_t f = tdm__site_first_frame(s, sid); f < st->depth && shown < frames;
                 f = tdm__site_next_frame(s, sid, f), shown++) {
                char line[256];
                tdm__site_format_stack_frame(line, sizeof line, s, sid, f);
                int w = snprintf(r->site + used, sizeof r->site - used, "%s%s",
                                 shown ? "\n" : lead, line);
                if (w < 0 || (size_t)w >= sizeof r->site - used) {
                    r->site[used] = '\0'; /* whole frames only */
                    break;
                }
                used += (size_t)w;
            }
        }
    }
    free(sites);
}

static void row_fill(rank_row *r, const tdm_input *in, int device, unsigned frames)
{
    const tdm_snap_header *h = &in->snap->header;
    const tdm_model *m = in->model;
    r->state = in->truncated ? ROW_TRUNCATED : ROW_OK;
    snprintf(r->host, sizeof r->host, "%s", h->host && h->host[0] ? h->host : "?");
    r->rank = h->rank;
    r->world_size = h->world_size;
    /* A file without a date (an imported log) gives no time origin. */
    r->start_us = tdm__summary_start_known(h->start_time_us) ? h->start_time_us : 0;
    r->origin_ns = tdm__model_time_origin_ns(m);
    r->dropped = in->snap->dropped_events;
    r->device = -1;
    r->peak = -1;
    r->live_end = -1;
    int best = -1, best_stats = 0;
    int64_t best_peak = -1;
    int torch = tdm__torch_segments_seen(in->snap);
    for (size_t i = 0; i < m->device_count; i++) {
        const tdm_model_device *d = &m->devices[i];
        if (device >= 0 && d->ordinal != device)
            continue;
        int from_stats;
        int64_t pk = device_peak(in, i, torch, &from_stats);
        if (pk > 0 || d->end_blocks)
            r->devices_used++;
        if (best < 0 || pk > best_peak) {
            best = (int)i;
            best_peak = pk;
            best_stats = from_stats;
        }
    }
    if (best < 0)
        return;
    const tdm_model_device *d = &m->devices[best];
    r->device = d->ordinal;
    snprintf(r->device_name, sizeof r->device_name, "%s",
             tdm__model_device_label(d));
    r->peak = best_peak;
    r->peak_from_stats = best_stats;
    r->peak_reserved = torch && d->reserved_known;
    if (in->snap->event_count) {
        r->peak_time_ns = d->peak_time_ns;
        r->peak_step = d->peak_step;
        char pbuf[32];
        if (d->peak_phase) /* the name may live in the table, not in pbuf */
            snprintf(r->peak_phase, sizeof r->peak_phase, "%s",
                     tdm__model_phase_name(m, d->peak_phase, pbuf, sizeof pbuf));
    }
    if (in->snap->event_count || m->state_known)
        r->live_end = d->end_allocated < 0 ? 0 : d->end_allocated;
    row_site(r, in, (size_t)best, frames);
}

static int by_rank(const void *pa, const void *pb)
{
    const rank_row *a = pa, *b = pb;
    int ua = a->state == ROW_UNREADABLE, ub = b->state == ROW_UNREADABLE;
    if (ua != ub)
        return ua - ub;
    int64_t ka = a->rank >= 0 ? a->rank : INT64_MAX, kb = b->rank >= 0 ? b->rank : INT64_MAX;
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* ---- printing ------------------------------------------------------------ */

static const char *size_text(char *buf, size_t len, int64_t v, int exact)
{
    if (v < 0)
        return "?";
    if (exact)
        snprintf(buf, len, "%" PRId64, v);
    else
        tdm__fmt_bytes(buf, len, (uint64_t)v);
    return buf;
}

/* "rank 3 on node07", or the file's name when it has no rank. */
static const char *who(char *buf, size_t len, const rank_row *r)
{
    if (r->rank >= 0)
        snprintf(buf, len, "rank %d on %s", (int)r->rank, r->host);
    else
        snprintf(buf, len, "%s (no rank)", r->path);
    return buf;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends "lo" or "lo-hi" (comma first unless at the start) to buf,
 * ending it with "..." once it is full. */
static void append_range(char *buf, size_t len, int32_t lo, int32_t hi)
{
    size_t used = strlen(buf);
    char part[32];
    snprintf(part, sizeof part, lo == hi ? "%s%d" : "%s%d-%d", used ? "," : "", (int)lo,
             (int)hi);
    if (used >= 3 && strcmp(buf + used - 3, "...") == 0)
        return;
    if (used + strlen(part) + 4 >= len) {
        if (used + 4 <= len)
            memcpy(buf + used, "...", 4);
        return;
    }
    memcpy(buf + used, part, strlen(part) + 1);
}

/* The lines above the table: how many ranks, hosts and files; which ranks
 * of the world have no file, which have several; the time origin. */
static void print_heading(FILE *out, const rank_row *rows, size_t n, size_t readable,
                          uint64_t origin_us)
{
    char a[S_FMT], list[256];
    size_t hosts = 0, ranked = 0, unranked = 0, named = 0, segments = 0;
    int32_t world = 0;
    int32_t *ranks = malloc((n ? n : 1) * sizeof *ranks);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    for (size_t i = 0; i < n; i++) {
        const rank_row *r = &rows[i];
        if (r->state == ROW_UNREADABLE)
            continue;
        if (names)
            names[named++] = r->host;
        segments += r->peak_reserved != 0;
        if (r->rank < 0) {
            unranked++;
            continue;
        }
        if (ranks)
            ranks[ranked] = r->rank;
        ranked++;
        if (r->world_size > world)
            world = r->world_size;
    }
    if (names) {
        qsort(names, named, sizeof *names, cmp_str);
        for (size_t i = 0; i < named; i++)
            hosts += i == 0 || strcmp(names[i], names[i - 1]) != 0;
    }
    free(names);
    if (ranked) /* (none: files of separate runs, "0 ranks" says nothing) */
        fprintf(out, "tidemark summary of %zu snapshot%s: %zu rank%s on %zu host%s\n", readable,
                readable == 1 ? "" : "s", ranked, ranked == 1 ? "" : "s", hosts,
                hosts == 1 ? "" : "s");
    else
        fprintf(out, "tidemark summary of %zu snapshot%s on %zu host%s\n", readable,
                readable == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
    if (ranks && ranked) {
        qsort(ranks, ranked, sizeof *ranks, cmp_i32);
        size_t distinct = 0, dups = 0;
        for (size_t i = 0; i < ranked; i++) {
            if (i && ranks[i] == ranks[i - 1]) {
                dups++;
                continue;
            }
            ranks[distinct++] = ranks[i];
        }
        fprintf(out, "  ranks      %s", tdm__ranks_format_list(list, sizeof list, ranks, distinct));
        if (world > 0)
            fprintf(out, " of world size %d", (int)world);
        fputc('\n', out);
        if (dups)
            fprintf(out, "  note       %zu file%s repeat%s a rank (several dumps, or several "
                         "jobs)\n", dups, dups == 1 ? "" : "s", dups == 1 ? "s" : "");
        /* The world's ranks with no file, as ranges of the gaps: expected
         * with ranks=..., a sign of a rank that died before its dump
         * otherwise. */
        list[0] = '\0';
        int32_t next = 0; /* the lowest rank not yet accounted for */
        for (size_t i = 0; world > 0 && i <= distinct && next < world; i++) {
            int32_t upto = i < distinct && ranks[i] < world ? ranks[i] : world;
            if (upto > next)
                append_range(list, sizeof list, next, upto - 1);
            if (upto == world)
                break; /* the tail is listed; ranks past the world add nothing */
            next = ranks[i] + 1; /* ranks[i] < world: no overflow */
        }
        if (list[0])
            fprintf(out, "  missing    no file for rank%s %s\n",
                    strpbrk(list, ",-.") ? "s" : "", list);
    }
    free(ranks);
    if (unranked)
        fprintf(out, "  unranked   %zu file%s with no rank in %s header%s (not from a "
                     "multi-rank job)\n", unranked, unranked == 1 ? "" : "s",
                unranked == 1 ? "its" : "their", unranked == 1 ? "" : "s");
    if (segments)
        fprintf(out, "  segments   %zu of the %zu files: %s; their peaks are of reserved "
                     "bytes\n", segments, readable, TDM_TORCH_SEGMENTS_NOTE);
    /* Each file's times from its own recording's start, as its summary,
     * categories and gate give them: the same peak, the same time. */
    if (origin_us)
        fprintf(out, "  times      from each file's recording start (the earliest %s)\n",
                tdm__fmt_utc(a, sizeof a, origin_us));
    else
        fprintf(out, "  times      from each file's first event (no recording start)\n");
}

/* One row of the table. */
static void print_row(FILE *out, const rank_row *r, int hw, uint64_t origin_us, int exact)
{
    char rk[16], dev[48], pk[S_FMT], at[S_FMT], step[16], live[S_FMT];
    snprintf(rk, sizeof rk, r->rank >= 0 ? "%d" : "-", (int)r->rank);
    if (r->device < 0)
        snprintf(dev, sizeof dev, "-");
    else if (r->devices_used > 1)
        snprintf(dev, sizeof dev, "%d+%zu", r->device, r->devices_used - 1);
    else
        snprintf(dev, sizeof dev, "%d", r->device);
    snprintf(at, sizeof at, "-");
    (void)origin_us;
    if (r->peak_time_ns && r->origin_ns && r->peak_time_ns >= r->origin_ns)
        tdm__fmt_offset(at, sizeof at, (int64_t)(r->peak_time_ns - r->origin_ns));
    else if (r->peak_from_stats)
        snprintf(at, sizeof at, "(no history)");
    snprintf(step, sizeof step, r->peak_step ? "%u" : "-", r->peak_step);
    fprintf(out, "  %5s  %-*.*s  %-4s %12s  %-12s %5s  %-12s %12s %8" PRIu64 "  %s%s\n", rk,
            hw, hw, r->host, dev, size_text(pk, sizeof pk, r->peak, exact), at, step,
            r->peak_phase[0] ? r->peak_phase : "-",
            size_text(live, sizeof live, r->live_end, exact), r->dropped, r->path,
            r->state == ROW_TRUNCATED ? " (truncated)" : "");
}

/* Highest peak first; equal peaks in rank order (the rows' order). */
static int by_peak_desc(const void *pa, const void *pb)
{
    const rank_row *a = *(const rank_row *const *)pa, *b = *(const rank_row *const *)pb;
    if (a->peak != b->peak)
        return a->peak > b->peak ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Lowest peak first; equal peaks in rank order. */
static int by_peak_asc(const void *pa, const void *pb)
{
    const rank_row *a = *(const rank_row *const *)pa, *b = *(const rank_row *const *)pb;
    if (a->peak != b->peak)
        return a->peak < b->peak ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* The readable rows of `rows` (the first `readable`, in rank order) by
 * peak, highest first, unknown peaks last; NULL when out of memory. */
static const rank_row **rows_by_peak(const rank_row *rows, size_t readable)
{
    const rank_row **v = malloc((readable ? readable : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < readable; i++)
        v[i] = &rows[i];
    qsort(v, readable, sizeof *v, by_peak_desc);
    return v;
}

/* The table: every readable row in rank order; or, with `by_peak` (the
 * readable rows sorted by peak), only the highest and the lowest. */
static void print_table(FILE *out, const rank_row *rows, size_t readable,
                        const rank_row *const *by_peak, uint64_t origin_us, int exact)
{
    const char *noun = "ranks";
    for (size_t i = 0; i < readable; i++)
        if (rows[i].rank < 0)
            noun = "files";
    int hw = 4;
    int multi_dev = 0;
    for (size_t i = 0; i < readable; i++) {
        int l = (int)strlen(rows[i].host);
        if (l > hw)
            hw = l > 24 ? 24 : l;
        multi_dev |= rows[i].devices_used > 1;
    }
    size_t hi = TDM_SUMMARY_RANKS_HIGHEST, lo = TDM_SUMMARY_RANKS_LOWEST;
    if (by_peak)
        fprintf(out, "\n  the %zu highest peaks and the %zu lowest of %zu %s; --all lists "
                     "them all\n", hi, lo, readable, noun);
    fprintf(out, "%s  %5s  %-*s  %-4s %12s  %-12s %5s  %-12s %12s %8s  %s\n",
            by_peak ? "" : "\n", "rank", hw, "host", "dev", "peak", "peak at", "step", "phase",
            "live at end", "dropped", "file");
    if (!by_peak) {
        for (size_t i = 0; i < readable; i++)
            print_row(out, &rows[i], hw, origin_us, exact);
    } else {
        /* The highest: the first of by_peak.  The lowest: those of the
         * lowest peaks, the first ranks among equals (the min of the
         * spread is one), shown highest first like the rest. */
        const rank_row *low[TDM_SUMMARY_RANKS_LOWEST];
        unsigned char *shown = calloc(readable, 1);
        const rank_row **asc = malloc(readable * sizeof *asc);
        if (shown && asc) {
            memcpy(asc, by_peak, readable * sizeof *asc);
            qsort(asc, readable, sizeof *asc, by_peak_asc);
            for (size_t i = 0; i < lo; i++)
                low[i] = asc[i];
            qsort(low, lo, sizeof *low, by_peak_desc);
        } else { /* out of memory: the tail of by_peak will do */
            for (size_t i = 0; i < lo; i++)
                low[i] = by_peak[readable - lo + i];
        }
        int64_t mid_lo = INT64_MAX, mid_hi = INT64_MIN;
        for (size_t i = 0; shown && i < hi; i++)
            shown[by_peak[i] - rows] = 1;
        for (size_t i = 0; shown && i < lo; i++)
            shown[low[i] - rows] = 1;
        for (size_t i = 0; shown && i < readable; i++)
            if (!shown[i]) {
                mid_lo = rows[i].peak < mid_lo ? rows[i].peak : mid_lo;
                mid_hi = rows[i].peak > mid_hi ? rows[i].peak : mid_hi;
            }
        for (size_t i = 0; i < hi; i++)
            print_row(out, by_peak[i], hw, origin_us, exact);
        char a[S_FMT], b[S_FMT];
        if (mid_lo <= mid_hi)
            fprintf(out, "  %5s  %zu more, peaks from %s to %s\n", "...", readable - hi - lo,
                    size_text(a, sizeof a, mid_lo, exact), size_text(b, sizeof b, mid_hi, exact));
        else
            fprintf(out, "  %5s  %zu more\n", "...", readable - hi - lo);
        for (size_t i = 0; i < lo; i++)
            print_row(out, low[i], hw, origin_us, exact);
        free(shown);
        free(asc);
    }
    if (multi_dev)
        fprintf(out, "  (dev N+k: the row is device N, the rank's highest peak; k more "
                     "devices held memory; --device picks one)\n");
}

/* "; 3 more ranks at this peak" when other rows share row r's peak. */
static void print_ties(FILE *out, const rank_row *rows, size_t n, const rank_row *r)
{
    size_t same = 0, unranked = 0;
    for (size_t i = 0; i < n; i++)
        if (&rows[i] != r && rows[i].state != ROW_UNREADABLE && rows[i].peak == r->peak) {
            same++;
            unranked += rows[i].rank < 0;
        }
    if (same)
        fprintf(out, "; %zu more %s%s at this peak", same, unranked ? "file" : "rank",
                same == 1 ? "" : "s");
}

/* The spread: max, min, mean, the top site of the max; with `by_peak`
 * (the rows sorted by peak, for a table that does not show them all),
 * also the median and the ranks that share the max and the min. */
static void print_spread(FILE *out, const rank_row *rows, size_t n,
                         const rank_row *const *by_peak, uint64_t origin_us, int exact)
{
    const rank_row *max = NULL, *min = NULL;
    size_t count = 0, unranked = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        const rank_row *r = &rows[i];
        if (r->state == ROW_UNREADABLE || r->peak < 0)
            continue;
        count++;
        unranked += r->rank < 0;
        sum += (double)r->peak;
        if (!max || r->peak > max->peak)
            max = r;
        if (!min || r->peak < min->peak)
            min = r;
    }
    if (!count)
        return;
    char a[S_FMT], b[S_FMT], w[160], t[S_FMT], pbuf[64];
    int64_t mean = (int64_t)(sum / (double)count + 0.5);
    fprintf(out, "\nspread of the peaks over %zu %s%s\n", count, unranked ? "file" : "rank",
            count == 1 ? "" : "s");
    fprintf(out, "  max        %s  %s", size_text(a, sizeof a, max->peak, exact),
            who(w, sizeof w, max));
    if (max->device >= 0)
        fprintf(out, ", device %d (%s)", max->device, max->device_name);
    (void)origin_us;
    if (max->peak_time_ns && max->origin_ns && max->peak_time_ns >= max->origin_ns)
        fprintf(out, ", at %s",
                tdm__fmt_offset(t, sizeof t, (int64_t)(max->peak_time_ns - max->origin_ns)));
    if (max->peak_step)
        fprintf(out, ", step %u", max->peak_step);
    if (max->peak_phase[0])
        fprintf(out, ", phase %s", max->peak_phase);
    if (by_peak) {
        print_ties(out, rows, n, max);
        /* The lower median: a rank's own peak.  The known peaks come
         * first in by_peak, highest first. */
        const rank_row *med = by_peak[count - 1 - (count - 1) / 2];
        fprintf(out, "\n  median     %s  %s", size_text(a, sizeof a, med->peak, exact),
                who(w, sizeof w, med));
    }
    fprintf(out, "\n  min        %s  %s", size_text(a, sizeof a, min->peak, exact),
            who(w, sizeof w, min));
    if (by_peak)
        print_ties(out, rows, n, min);
    fputc('\n', out);
    fprintf(out, "  mean       %s", size_text(a, sizeof a, mean, exact));
    if (min->peak > 0)
        fprintf(out, "; max is %.2fx min, %s more", (double)max->peak / (double)min->peak,
                size_text(b, sizeof b, max->peak - min->peak, exact));
    fputc('\n', out);
    if (max->site[0]) {
        snprintf(pbuf, sizeof pbuf, "%s", max->rank >= 0 ? "" : " of that file");
        fprintf(out, "  top site   %s (%s of the max%s) in ",
                size_text(a, sizeof a, (int64_t)max->site_bytes, exact),
                tdm__fmt_share(t, sizeof t, (double)max->site_bytes,
                               (double)(max->peak > 0 ? max->peak : 0)),
                pbuf);
        for (const char *p = max->site; *p;) {
            size_t len = strcspn(p, "\n");
            fprintf(out, "%s%.*s\n", p == max->site ? "" : "             ", (int)len, p);
            p += len + (p[len] == '\n');
        }
    }
}

/* ---- the command's multi-file path -------------------------------------- */

int tdm__summary_ranks(FILE *out, const tdm_rank_paths *paths, const tdm_summary_options *opts,
                       int exact, const tdm_input_loader *loader)
{
    rank_row *rows = calloc(paths->count ? paths->count : 1, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "tidemark summary: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    int rc = TDM_EXIT_OK;
    size_t readable = 0;
    tdm_input held; /* the first readable file, until a second one */
    memset(&held, 0, sizeof held);
    for (size_t i = 0; i < paths->count; i++) {
        tdm_input in;
        rows[i].path = paths->paths[i];
        rows[i].order = i;
        rows[i].rank = -1;
        rows[i].state = ROW_UNREADABLE;
        rc = tdm__exit_worse(rc, loader->load("summary", paths->paths[i], &in));
        if (!in.model)
            continue;
        /* A file without the --device asked for is said as every command
         * says it; its row stays (its "-" device shows which). */
        rc = tdm__exit_worse(rc, tdm__input_check_device("summary", &in, opts->device));
        row_fill(&rows[i], &in, opts->device, opts->frames ? opts->frames : 3);
        if (++readable == 1) {
            held = in;
            continue;
        }
        loader->free(&in);
        loader->free(&held);
    }

    if (readable == 1 && held.model) {
        tdm_summary_options one = *opts;
        one.truncated = held.truncated;
        one.truncated_at = held.truncated_at;
        tdm_status s = tdm__summary_print(out, held.path, held.snap, held.model, &one);
        if (s != TDM_OK) {
            fprintf(stderr, "tidemark summary: %s: %s\n", held.path, tdm_strerror(s));
            rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
        }
        loader->free(&held);
    } else if (readable > 1) {
        qsort(rows, paths->count, sizeof *rows, by_rank);
        uint64_t origin_us = 0;
        for (size_t i = 0; i < readable; i++)
            if (rows[i].start_us && (!origin_us || rows[i].start_us < origin_us))
                origin_us = rows[i].start_us;
        print_heading(out, rows, paths->count, readable, origin_us);
        /* Many ranks: the highest and the lowest peaks only, unless --all. */
        const rank_row **by_peak = NULL;
        if (readable > TDM_SUMMARY_RANKS_ALL_UP_TO && !opts->all &&
            !(by_peak = rows_by_peak(rows, readable))) {
            fprintf(stderr, "tidemark summary: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            free(rows);
            return TDM_EXIT_TOOL_ERROR;
        }
        print_table(out, rows, readable, by_peak, origin_us, exact);
        print_spread(out, rows, paths->count, by_peak, origin_us, exact);
        free(by_peak);
        if (readable < paths->count)
            fprintf(out, "\n(%zu file%s could not be read; see the messages above)\n",
                    paths->count - readable, paths->count - readable == 1 ? "" : "s");
    }
    free(rows);
    return rc;
}
