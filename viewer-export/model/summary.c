/* viewer-export/model/summary.c: the one-screen account of a snapshot
 * (summary.h), answer first: per device, the peak of allocated memory
 * (how much, of what capacity, when: time, step, phase) and the
 * allocation sites that held the most memory at that moment, with short
 * stacks; then the details: what was live at the end and the allocator's
 * own figures; who recorded the snapshot, how, and how much history the
 * ring kept.  The demo's summary fits in 40 lines; --verbose adds the
 * file's format, the full config, the allocator's pools and counts, more
 * frames per site and the sites live at the end.  The table of a job's
 * ranks is summary_ranks.c's; the command, cli/cmd_summary.c.
 *
 * Everything printed comes from the analysis model (model.h) and the
 * snapshot itself; this file only chooses and formats, with
 * format_size.h's writers (times as offsets, shares as tdm__fmt_share) and
 * sites.h's frames.  Output goes to the given FILE (stdout for the
 * command), diagnostics to stderr.  No state, no locks.
 */
#include "summary.h"
#include "format_size.h"
#include "sites.h"
#include "torch_segments.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define S_FMT TDM_FMT_LEN
#define FRAMES_DEFAULT 2  /* frames per site: the site and its caller */
#define FRAMES_VERBOSE 6
#define TEXT_WIDTH 100    /* config and metadata, unless verbose */
#define SITE_INDENT 34    /* column of a site's frames */

static const char *record_name(unsigned v)
{
    static const char *const n[] = {"off", "state", "all"};
    return v < 3 ? n[v] : "?";
}

static const char *context_name(unsigned v)
{
    static const char *const n[] = {"none", "state", "alloc", "all"};
    return v < 4 ? n[v] : "?";
}

static const char *stacks_name(unsigned v)
{
    static const char *const n[] = {"none", "native", "python", "all"};
    return v < 4 ? n[v] : "?";
}

static const char *str_or(const char *s, const char *fallback)
{
    return s && s[0] ? s : fallback;
}

/* Offset of an event time from the recording start, as "+1.234 s" (from
 * the first event when the start is not known). */
static const char *offset_of(char *buf, const tdm_snap *s, const tdm_model *m,
                             uint64_t time_ns)
{
    (void)s;
    uint64_t origin = tdm__model_time_origin_ns(m);
    return tdm__fmt_offset(buf, S_FMT, (int64_t)(time_ns - origin));
}

static unsigned frames_of(const tdm_summary_options *o)
{
    return o->frames ? o->frames : o->verbose ? FRAMES_VERBOSE : FRAMES_DEFAULT;
}

/* "label      text", the text cut to TEXT_WIDTH unless verbose. */
static void print_text_line(FILE *out, const char *label, const char *text, int verbose)
{
    size_t n = strlen(text);
    if (verbose || n <= TEXT_WIDTH)
        fprintf(out, "  %-10s %s\n", label, text);
    else
        fprintf(out, "  %-10s %.*s... (--verbose: all %zu characters)\n", label,
                TEXT_WIDTH - 3, text, n);
}

/* ---- sections ------------------------------------------------------------ */

/* Who recorded it, how, and how much history the ring kept. */
static void print_snapshot(FILE *out, const tdm_snap *s, const tdm_model *m,
                           const tdm_summary_options *o)
{
    const tdm_snap_header *h = &s->header;
    char a[S_FMT], b[S_FMT];

    fprintf(out, "\nsnapshot\n");
    if (o->verbose)
        fprintf(out, "  file       format %u, written by tidemark %s\n", h->format_version,
                str_or(h->tool_version, "?"));
    if (h->pid <= 0 && !(h->host && h->host[0]))
        fprintf(out, "  process    unknown");
    else
        fprintf(out, "  process    pid %" PRId64 " on %s", h->pid, str_or(h->host, "?"));
    if (h->rank >= 0) {
        fprintf(out, ", rank %d", h->rank);
        if (h->world_size > 0)
            fprintf(out, " of %d", h->world_size);
        if (h->local_rank >= 0)
            fprintf(out, " (local %d)", h->local_rank);
    }
    fprintf(out, "\n  command    %s\n", str_or(h->command, "(unknown)"));
    /* An imported log may give times of day, or offsets, but no date. */
    if (!tdm__summary_start_known(h->start_time_us))
        fprintf(out, "  started    unknown (the file gives no date)\n");
    else if (h->dump_time_us >= h->start_time_us)
        fprintf(out, "  started    %s; dumped %s later\n",
                tdm__fmt_utc(a, sizeof a, h->start_time_us),
                tdm__fmt_offset(b, sizeof b,
                                tdm__fmt_us_to_ns(h->dump_time_us - h->start_time_us)) + 1);
    else
        fprintf(out, "  started    %s\n", tdm__fmt_utc(a, sizeof a, h->start_time_us));
    fprintf(out, "  recording  record=%s context=%s stacks=%s max_entries=%" PRIu64
                 "; allocator %s\n",
            record_name(h->record_mode), context_name(h->context_mode),
            stacks_name(h->stacks_mode), h->max_entries, str_or(h->alloc_mode, "?"));
    if (h->config && h->config[0])
        print_text_line(out, "config", h->config, o->verbose);
    if (h->metadata && h->metadata[0])
        print_text_line(out, "metadata", h->metadata, o->verbose);
    /* What the recording could not see: whole, one line each. */
    for (const char *n = h->notes; n && *n;) {
        size_t len = strcspn(n, "\n");
        fprintf(out, "  %-10s %.*s\n", "note", (int)len, n);
        n += len + (n[len] == '\n');
    }
    if (o->verbose && m->device_count) {
        fprintf(out, "  devices   ");
        for (size_t i = 0; i < m->device_count; i++)
            fprintf(out, "%s %d %s %s", i ? ";" : "", m->devices[i].ordinal,
                    str_or(m->devices[i].vendor, "?"),
                    str_or(m->devices[i].name, "(not listed)"));
        fputc('\n', out);
    }
}

static void print_history(FILE *out, const tdm_snap *s, const tdm_model *m)
{
    char a[S_FMT], b[S_FMT];
    uint32_t steps = 0, first_step = UINT32_MAX;
    uint64_t seeded = 0, anomalies = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        if (s->events[i].step > steps)
            steps = s->events[i].step;
        if (s->events[i].step < first_step)
            first_step = s->events[i].step;
    }
    for (size_t i = 0; i < m->device_count; i++) {
        seeded += m->devices[i].seeded_from_free + m->devices[i].seeded_from_state;
        anomalies += m->devices[i].anomalies;
    }

    fprintf(out, "events       %zu recorded, %" PRIu64 " dropped (ring of %" PRIu64 ")\n",
            s->event_count, s->dropped_events, s->header.max_entries);
    if (s->event_count) {
        fprintf(out, "history      %s .. %s", offset_of(a, s, m, m->window_start_ns),
                offset_of(b, s, m, m->window_end_ns));
        /* A window that lost its oldest events starts mid-run. */
        if (first_step > 1)
            fprintf(out, "; steps %u..%u", first_step, steps);
        else
            fprintf(out, "; %u step%s", steps, steps == 1 ? "" : "s");
        fprintf(out, ", %zu phase name%s\n", s->phase_count ? s->phase_count - 1 : 0,
                s->phase_count == 2 ? "" : "s");
        fprintf(out, "times        from %s, as in every command\n",
                tdm__model_time_origin_name(m));
    } else if (!s->complete) {
        fprintf(out, "history      none read: the file is cut before its events\n");
    } else {
        fprintf(out, "history      none recorded (record=%s): peaks come from allocator stats\n",
                record_name(s->header.record_mode));
    }
    if (seeded)
        fprintf(out, "partial      %" PRIu64 " allocation%s older than the recorded history "
                     "counted from the start (see docs/cli.md)\n",
                seeded, seeded == 1 ? "" : "s");
    if (anomalies)
        fprintf(out, "warning      %" PRIu64 " inconsistenc%s between events and final state\n",
                anomalies, anomalies == 1 ? "y" : "ies");
}

/* A stats byte figure: "1.50 GiB", or with --bytes "1610612736 B". */
static const char *stat_bytes(char *buf, int64_t v, int exact)
{
    if (exact) {
        snprintf(buf, S_FMT, "%" PRId64 " B", v);
        return buf;
    }
    return tdm__fmt_sbytes(buf, S_FMT, v);
}

/* "now/peak" of a statistic, the unit said once when both share it:
 * "48.00/96.00 KiB", "2.00 MiB/1.00 GiB", with --bytes "49152/98304 B". */
static int stat_pair(char *buf, size_t len, const tdm_stat *v, int exact)
{
    char a[S_FMT], b[S_FMT];
    stat_bytes(a, v->current, exact);
    stat_bytes(b, v->peak, exact);
    const char *ua = strrchr(a, ' '), *ub = strrchr(b, ' ');
    if (ua && ub && strcmp(ua, ub) == 0)
        return snprintf(buf, len, "%.*s/%s", (int)(ua - a), a, b);
    return snprintf(buf, len, "%s/%s", a, b);
}

/* The stats row of (device, pool), or NULL.  The writer keeps one row per
 * pair; files before format 1.1 have only pool 0 rows. */
static const tdm_stats *pool_stats(const tdm_snap *s, int device, int pool)
{
    size_t row = tdm__snap_stats_index(s, device, pool);
    return row < s->stats_count ? &s->stats[row].stats : NULL;
}

/* Memory mapped into `device`'s address space that it did not allocate
 * (format 1.3): one line, never part of the figures above. */
static void print_imported(FILE *out, const tdm_snap *s, int device)
{
    uint64_t bytes = 0, n = 0;
    int source = TDM_IMPORT_SOURCE_UNKNOWN, mixed = 0;
    for (size_t i = 0; i < s->imported_count; i++) {
        const tdm_snap_imported *m = &s->imported[i];
        if (m->device != device)
            continue;
        bytes += m->size;
        n++;
        mixed |= n > 1 && m->source_device != source;
        source = m->source_device;
    }
    if (n == 0)
        return;
    char a[S_FMT];
    fprintf(out, "  imported       %s in %" PRIu64 " mapping%s of memory allocated elsewhere",
            tdm__fmt_bytes_exact(a, sizeof a, (int64_t)bytes), n, n == 1 ? "" : "s");
    if (!mixed && source >= -1)
        fprintf(out, source < 0 ? " (the host)" : " (device %d)", source);
    fprintf(out, ", not counted above\n");
}

/* The allocator's own figures: the device's (all pools) on two lines, a
 * third with the counts; then, verbose and when the file has them (cache
 * mode), one line per pool with the four byte figures as now/peak, in
 * columns. */
static void print_stats(FILE *out, const tdm_snap *s, int device, const tdm_stats *st,
                        int exact, int verbose)
{
    char a[S_FMT], b[S_FMT], c[S_FMT], d[S_FMT];
    fprintf(out, "  stats          allocated %s now, %s peak; reserved %s now, %s peak\n",
            stat_bytes(a, st->allocated_bytes.current, exact),
            stat_bytes(b, st->allocated_bytes.peak, exact),
            stat_bytes(c, st->reserved_bytes.current, exact),
            stat_bytes(d, st->reserved_bytes.peak, exact));
    fprintf(out, "                 active %s now, %s peak; requested %s now, %s peak\n",
            stat_bytes(a, st->active_bytes.current, exact),
            stat_bytes(b, st->active_bytes.peak, exact),
            stat_bytes(c, st->requested_bytes.current, exact),
            stat_bytes(d, st->requested_bytes.peak, exact));
    /* The counts, when verbose or when the allocator failed or retried. */
    if (verbose || st->num_ooms || st->num_alloc_retries)
        fprintf(out, "                 %" PRId64 " allocations (%" PRId64 " live), %" PRId64
                     " segments, %" PRIu64 " OOMs, %" PRIu64 " retries\n",
                st->allocation.allocated, st->allocation.current, st->segment.allocated,
                st->num_ooms, st->num_alloc_retries);
    if (!verbose)
        return;

    static const char *const pool_name[] = {"small", "large"};
    static const char *const col[] = {"allocated", "reserved", "active", "requested"};
    const tdm_stats *ps[2] = {pool_stats(s, device, TDM_STAT_POOL_SMALL),
                              pool_stats(s, device, TDM_STAT_POOL_LARGE)};
    if (!ps[0] && !ps[1])
        return;
    char cell[2][4][2 * S_FMT + 1];
    int width[4];
    for (int k = 0; k < 4; k++)
        width[k] = (int)strlen(col[k]);
    for (int p = 0; p < 2; p++) {
        if (!ps[p])
            continue;
        const tdm_stat *v[4] = {&ps[p]->allocated_bytes, &ps[p]->reserved_bytes,
                                &ps[p]->active_bytes, &ps[p]->requested_bytes};
        for (int k = 0; k < 4; k++) {
            int n = stat_pair(cell[p][k], sizeof cell[p][k], v[k], exact);
            if (n > width[k])
                width[k] = n;
        }
    }
    fprintf(out, "  pools now/peak");
    for (int k = 0; k < 4; k++)
        fprintf(out, "%s%-*s", k ? "  " : " ", k < 3 ? width[k] : 0, col[k]);
    fprintf(out, "\n");
    for (int p = 0; p < 2; p++) {
        if (!ps[p])
            continue;
        fprintf(out, "    %-12s", pool_name[p]);
        for (int k = 0; k < 4; k++)
            fprintf(out, "%s%-*s", k ? "  " : " ", k < 3 ? width[k] : 0, cell[p][k]);
        fprintf(out, "\n");
    }
}

/* The sites of device `di` holding the most bytes live at `at`, `total`
 * being what the shares are of ("peak" or "end" in the heading). */
static tdm_status print_sites(FILE *out, const tdm_snap *s, const tdm_model *m, size_t di,
                              int64_t at, uint64_t total, const char *when,
                              const tdm_summary_options *o, int torch)
{
    char a[S_FMT], sh[S_FMT];
    tdm_model_site *sites;
    size_t n;
    tdm_status st = tdm__model_sites_at(m, di, at, &sites, &n);
    if (st != TDM_OK)
        return st;
    size_t live = 0;
    while (live < n && sites[live].live_bytes)
        live++;
    if (o->top == 0 || live == 0) {
        if (o->top && m->alloc_count)
            fprintf(out, "\n  (nothing live at the %s)\n", when);
        free(sites);
        return TDM_OK;
    }
    fprintf(out, "\n  top %s sites by bytes live at the %s (%zu site%s)\n",
            torch ? "segment" : "allocation", when, live, live == 1 ? "" : "s");
    fprintf(out, "  %3s %12s %6s %6s  %s\n", "#", "live", "share", "count",
            "innermost frames");
    int of_free = 0;
    for (size_t i = 0; i < live && i < o->top; i++) {
        const tdm_model_site *site = &sites[i];
        fprintf(out, "  %3zu %12s %6s %6" PRIu64 "  ", i + 1,
                tdm__fmt_bytes(a, sizeof a, site->live_bytes),
                tdm__fmt_share(sh, sizeof sh, (double)site->live_bytes, (double)total),
                site->live_count);
        if (site->stack_of_free)
            fputs("freed at ", out);
        of_free |= site->stack_of_free;
        tdm__site_print_frames(out, s, site->stack_id, frames_of(o),
                               SITE_INDENT + (site->stack_of_free ? 9 : 0));
    }
    if (live > o->top)
        fprintf(out, "  ... %zu more site%s (--top N lists them)\n", live - o->top,
                live - o->top == 1 ? "" : "s");
    if (of_free)
        fprintf(out, "  (freed at: allocated before the recorded history; named by the stack "
                     "of its free)\n");
    free(sites);
    return TDM_OK;
}

tdm_summary_peak tdm__summary_peak_of(const tdm_snap *s, const tdm_model_device *d, int torch)
{
    tdm_summary_peak p = {.bytes = d->peak_allocated, .allocated = d->peak_allocated,
                          .seq = d->peak_seq, .time_ns = d->peak_time_ns,
                          .step = d->peak_step, .phase = d->peak_phase};
    if (!torch || !d->reserved_known || !d->sample_count)
        return p;
    /* The first sample at the highest value of PyTorch's reserved bytes
     * (the segments less those made outside its allocator: NCCL's
     * buffers); among equals, the one with the most allocated (a
     * segment's cudaMalloc is booked as segment_alloc, then alloc: the
     * peak is after both). */
    tdm_foreign_segments f;
    int walk = tdm__foreign_segments_init(&f, s, d->ordinal) == 0;
    const tdm_model_sample *best = &d->samples[0];
    int64_t best_torch = best->reserved, best_foreign = 0;
    for (size_t i = 1; i < d->sample_count; i++) {
        if (walk)
            tdm__foreign_segments_advance(&f, d->samples[i].seq);
        int64_t torch_bytes = d->samples[i].reserved - (walk ? f.bytes : 0);
        if (torch_bytes > best_torch ||
            (torch_bytes == best_torch && d->samples[i].allocated > best->allocated)) {
            best = &d->samples[i];
            best_torch = torch_bytes;
            best_foreign = walk ? f.bytes : 0;
        }
    }
    if (walk) {
        tdm__foreign_segments_advance(&f, (int64_t)s->event_count - 1);
        p.foreign_at_peak = best_foreign;
        p.foreign_peak = f.peak;
        p.foreign_count = f.count;
        p.foreign_nccl = f.count && f.all_nccl;
        tdm__foreign_segments_free(&f);
    }
    p.reserved = 1;
    p.bytes = best_torch;
    p.allocated = best->allocated;
    p.seq = best->seq;
    p.time_ns = best->time_ns;
    if (best->seq >= 0 && (size_t)best->seq < s->event_count) {
        p.step = s->events[best->seq].step;
        p.phase = s->events[best->seq].phase;
    } else {
        p.step = p.phase = 0;
    }
    return p;
}

/* The device ran out of memory: how often, and of the first time what
 * the runtime's line said: the bytes asked for, the bytes free, when
 * (time, step, phase) and where (the failed allocation's stack). */
static void print_oom(FILE *out, const tdm_snap *s, const tdm_model *m, size_t di,
                      const tdm_summary_options *o)
{
    const tdm_model_device *d = &m->devices[di];
    char a[S_FMT], b[S_FMT], t[S_FMT], pbuf[32];
    fprintf(out, "  OOMs           %" PRIu64 " out-of-memory event%s in the history", d->oom_events,
            d->oom_events == 1 ? "" : "s");
    int64_t k = tdm__model_first_oom(m, di);
    if (k < 0) {
        fputc('\n', out);
        return;
    }
    const tdm_event *e = &s->events[k];
    fprintf(out, "%s\n", d->oom_events == 1 ? "" : "; the first:");
    fprintf(out, "                 %s asked for (%" PRIu64 " B), %s free on the device\n",
            tdm__fmt_bytes(a, sizeof a, e->requested), e->requested,
            tdm__fmt_bytes(b, sizeof b, e->addr));
    fprintf(out, "                 at %s (event %" PRId64 ")", offset_of(t, s, m, e->time_ns), k);
    if (e->step)
        fprintf(out, ", step %u", e->step);
    else
        fprintf(out, ", before step 1");
    if (e->phase)
        fprintf(out, ", phase %s", tdm__model_phase_name(m, e->phase, pbuf, sizeof pbuf));
    fputc('\n', out);
    if (e->stack_id) {
        fprintf(out, "                 site ");
        tdm__site_print_frames(out, s, e->stack_id, frames_of(o), 22);
    }
}

/* The answer: the device's peak, how much of what capacity and when, and
 * the sites holding it; then what was live at the end and the allocator's
 * figures. */
static tdm_status print_device(FILE *out, const tdm_snap *s, const tdm_model *m,
                               size_t di, const tdm_summary_options *o, int torch)
{
    const tdm_model_device *d = &m->devices[di];
    char a[S_FMT], b[S_FMT], pbuf[32];

    fprintf(out, "\ndevice %d (%s), capacity %s\n", d->ordinal,
            tdm__model_device_label(d),
            d->capacity ? tdm__fmt_bytes_exact(a, sizeof a, d->capacity) : "unknown");
    tdm_summary_peak p = tdm__summary_peak_of(s, d, torch);
    if (s->event_count) {
        if (p.reserved)
            fprintf(out, "  peak reserved by PyTorch's caching allocator %s",
                    tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)p.bytes));
        else
            fprintf(out, "  peak allocated %s",
                    tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)p.bytes));
        if (d->capacity)
            fprintf(out, ", %s of capacity",
                    tdm__fmt_share(b, sizeof b, (double)p.bytes, (double)d->capacity));
        fprintf(out, "\n  peak at        ");
        if (p.seq < 0)
            fprintf(out, "the start of the history (%s)", offset_of(a, s, m, p.time_ns));
        else
            fprintf(out, "%s (event %" PRId64 ")", offset_of(a, s, m, p.time_ns), p.seq);
        if (p.step)
            fprintf(out, ", step %u", p.step);
        else
            fprintf(out, ", before step 1");
        if (p.phase)
            fprintf(out, ", phase %s", tdm__model_phase_name(m, p.phase, pbuf, sizeof pbuf));
        fprintf(out, "\n");
        if (p.reserved)
            fprintf(out, "  booked         %s as allocations at that moment: one per cudaMalloc "
                         "of a segment; mapped pages of expandable segments are reserved "
                         "only\n",
                    tdm__fmt_sbytes(a, sizeof a, p.allocated));
        if (p.reserved && p.foreign_count)
            fprintf(out, "  beside it      %s %s at that moment, outside PyTorch's caching "
                         "allocator (%zu mapping%s); highest %s\n",
                    p.foreign_nccl ? "NCCL's own buffers:" : "device memory of other code:",
                    tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)p.foreign_at_peak),
                    p.foreign_count, p.foreign_count == 1 ? "" : "s",
                    tdm__fmt_bytes_exact(b, sizeof b, (uint64_t)p.foreign_peak));
        else if (d->reserved_known)
            fprintf(out, "  reserved       %s at the peak; highest %s\n",
                    tdm__fmt_sbytes(a, sizeof a, d->reserved_at_peak),
                    tdm__fmt_sbytes(b, sizeof b, d->peak_reserved));
    } else if (d->stats) {
        fprintf(out, "  peak allocated %s (allocator stats; no history)\n",
                tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)d->stats->allocated_bytes.peak));
    }
    if (d->oom_events)
        print_oom(out, s, m, di, o);
    else if (!s->event_count && d->stats && d->stats->num_ooms)
        fprintf(out, "  OOMs           %" PRIu64 " out-of-memory return%s (allocator stats; "
                     "no history: sizes, time and site unknown)\n",
                d->stats->num_ooms, d->stats->num_ooms == 1 ? "" : "s");

    /* Sites live at the peak; with no history, those live at the end. */
    uint64_t end = (uint64_t)(d->end_allocated < 0 ? 0 : d->end_allocated);
    tdm_status st = s->event_count
                        ? print_sites(out, s, m, di, p.seq, (uint64_t)p.allocated, "peak", o,
                                      torch)
                        : print_sites(out, s, m, di, tdm__model_end_seq(m), end, "end", o,
                                      torch);
    if (st != TDM_OK)
        return st;

    fputc('\n', out);
    if (!m->state_known && !s->event_count)
        fprintf(out, "  live at end    unknown (no events and no final state in the file)\n");
    else
        fprintf(out, "  live at end    %s in %" PRIu64 " %s%s, %s\n",
                tdm__fmt_bytes_exact(a, sizeof a, end), d->end_blocks,
                torch ? "segment allocation" : "allocation", d->end_blocks == 1 ? "" : "s",
                d->end_source == TDM_MODEL_END_FROM_STATE ? "from the final allocator state"
                                                          : "replayed (no final state in file)");
    if (d->stats)
        print_stats(out, s, d->ordinal, d->stats, o->exact, o->verbose);
    print_imported(out, s, d->ordinal);
    if (o->verbose && s->event_count) /* no history: the sites above are the end's */
        return print_sites(out, s, m, di, tdm__model_end_seq(m), end, "end", o, torch);
    return TDM_OK;
}

tdm_status tdm__summary_print(FILE *out, const char *path, const tdm_snap *snap,
                              const tdm_model *model, const tdm_summary_options *opts)
{
    fprintf(out, "tidemark summary of %s\n", path);
    int torch = tdm__torch_segments_seen(snap);
    if (torch)
        fprintf(out, "  %s\n", TDM_TORCH_SEGMENTS_NOTE);
    if (opts->truncated)
        fprintf(out, "  TRUNCATED at byte %" PRIu64 ": showing what could be read\n",
                opts->truncated_at);
    int shown = 0;
    for (size_t i = 0; i < model->device_count; i++) {
        if (opts->device >= 0 && model->devices[i].ordinal != opts->device)
            continue;
        tdm_status s = print_device(out, snap, model, i, opts, torch);
        if (s != TDM_OK)
            return s;
        shown++;
    }
    if (!shown)
        fprintf(out, "\n(no device%s)\n", opts->device >= 0 ? " with that ordinal" : "s");
    print_snapshot(out, snap, model, opts);
    print_history(out, snap, model);
    return TDM_OK;
}
