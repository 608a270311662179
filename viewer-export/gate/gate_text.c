/* viewer-export/gate/gate_text.c: the gate report for people (gate.h):
 * the headline of a result, when its figure was reached, the detail block
 * of a failure and the whole report.
 *
 * Verdict first: when a gate failed, the report opens with the first
 * failure's detail block (its first line says which gate, the figure, the
 * limit and by how much; the next, the file, rank and device; then the
 * exact bytes, when, and the top sites once with their innermost frames),
 * then one line per other failure or error, then the total; the passing
 * results are counted there.  A failure's block stays within about 30
 * lines: 5 lines of figures, then the top sites (5 by default) with their
 * 3 innermost frames.  With no failure, one line per result and the total.
 * No state, no locks.
 */
#include "gate.h"
#include "input.h"
#include "sites.h"
#include "format_size.h"
#include "ranks.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_FMT TDM_FMT_LEN

static const char *figure_name(const tdm_gate_result *r)
{
    switch (r->kind) {
    case TDM_GATE_MAX_RESERVED: return r->from_stats ? "reserved peak (allocator stats)"
                                                     : "reserved peak";
    case TDM_GATE_MAX_LEAK: return "live at exit";
    default: return r->from_stats ? "peak (allocator stats)" : "peak";
    }
}

void tdm__gate_headline(char *buf, size_t len, const tdm_gate_result *r)
{
    char a[S_FMT], b[S_FMT], c[S_FMT];
    if (r->status == TDM_GATE_ERROR || r->status == TDM_GATE_SKIP) {
        snprintf(buf, len, "%s", r->note ? r->note : "not checked");
        return;
    }
    if (r->kind == TDM_GATE_NO_OOM) {
        if (r->status != TDM_GATE_FAIL)
            snprintf(buf, len, "no out-of-memory event");
        else if (r->from_stats)
            snprintf(buf, len, "out of memory: %" PRId64 " out-of-memory return%s (allocator "
                               "stats; no history)", r->value, r->value == 1 ? "" : "s");
        else
            snprintf(buf, len, "out of memory: %s asked for, %s free",
                     tdm__fmt_bytes(a, sizeof a, r->oom_requested),
                     tdm__fmt_bytes(b, sizeof b, r->oom_free));
        return;
    }
    tdm__fmt_sbytes(a, sizeof a, r->value);
    if (r->kind == TDM_GATE_MAX_GROWTH) {
        tdm__fmt_sbytes(b, sizeof b, r->limit);
        if (isinf(r->growth))
            snprintf(buf, len, "peak %s, baseline %s: new memory on this device", a, b);
        else
            snprintf(buf, len, "peak %s, baseline %s: %+.1f%% %s limit %+.1f%%", a, b,
                     r->growth, r->status == TDM_GATE_FAIL ? ">" : "<=", r->growth_limit);
        return;
    }
    tdm__fmt_sbytes(b, sizeof b, r->limit);
    if (r->status == TDM_GATE_FAIL) {
        double over = r->limit ? 100.0 * (double)(r->value - r->limit) / (double)r->limit : 0;
        tdm__fmt_sbytes(c, sizeof c, r->value - r->limit);
        if (r->limit)
            snprintf(buf, len, "%s %s > limit %s (%s, %.1f%% over)", figure_name(r), a, b, c,
                     over);
        else
            snprintf(buf, len, "%s %s > limit %s", figure_name(r), a, b);
    } else {
        snprintf(buf, len, "%s %s <= limit %s", figure_name(r), a, b);
    }
}

/* "+1.234 s from the recording's start (event 56), step 3, phase
 * backward" (model.h: one time origin), or when the figure has
 * no moment of its own, what it stands for. */
void tdm__gate_when(char *buf, size_t len, const tdm_input *in,
                    const tdm_gate_result *r)
{
    const tdm_snap *s = in->snap;
    const tdm_model *m = in->model;
    char t[S_FMT], pbuf[32];
    uint64_t origin = tdm__model_time_origin_ns(m);
    if (r->from_stats) {
        snprintf(buf, len, "unknown: no history in the file (record=state); "
                           "sites are those live at exit");
        return;
    }
    if (r->at_end) {
        if (s->header.dump_time_us && s->header.dump_time_us >= s->header.start_time_us &&
            s->header.start_time_us)
            snprintf(buf, len, "at exit, when the snapshot was taken (%s)",
                     tdm__fmt_offset(t, sizeof t,
                                     tdm__fmt_us_to_ns(s->header.dump_time_us -
                                                       s->header.start_time_us)));
        else
            snprintf(buf, len, "at exit, when the snapshot was taken");
        return;
    }
    if (r->at_seq < 0 || (size_t)r->at_seq >= s->event_count) {
        snprintf(buf, len, "the start of the recorded history");
        return;
    }
    const tdm_event *e = &s->events[r->at_seq];
    int n = snprintf(buf, len, "%s from %s (event %" PRId64 ")",
                     tdm__fmt_offset(t, sizeof t, (int64_t)(e->time_ns - origin)),
                     tdm__model_time_origin_name(m), r->at_seq);
    if (n < 0 || (size_t)n >= len)
        return;
    if (e->step)
        n += snprintf(buf + n, len - (size_t)n, ", step %u", e->step);
    else
        n += snprintf(buf + n, len - (size_t)n, ", before step 1");
    if (e->phase && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", phase %s",
                 tdm__model_phase_name(m, e->phase, pbuf, sizeof pbuf));
}

static const char *status_word(tdm_gate_status s)
{
    static const char *const w[] = {"PASS", "SKIP", "FAIL", "ERROR"};
    return (unsigned)s < 4 ? w[s] : "?";
}

static void device_label(char *buf, size_t len, const tdm_input *in,
                         const tdm_gate_result *r)
{
    if (r->dev_index >= 0 && in->model)
        snprintf(buf, len, "device %d (%s)", r->device,
                 tdm__model_device_label(&in->model->devices[r->dev_index]));
    else if (r->device >= 0)
        snprintf(buf, len, "device %d", r->device);
    else
        snprintf(buf, len, "every device");
}

tdm_status tdm__gate_print_failure(FILE *out, const tdm_gate_options *o,
                                   const tdm_input *in, const tdm_gate_result *r)
{
    char a[S_FMT], b[S_FMT], dev[96], when[192], rank[320], head[256];
    device_label(dev, sizeof dev, in, r);
    tdm__ranks_label(rank, sizeof rank, in->snap);
    tdm__gate_headline(head, sizeof head, r);
    fprintf(out, "%s FAILED: %s\n", tdm__gate_kind_name(r->kind), head);
    fprintf(out, "  on         %s%s%s%s, %s\n", in->path, rank[0] ? " (" : "", rank,
            rank[0] ? ")" : "", dev);
    if (r->kind == TDM_GATE_NO_OOM) {
        if (!r->from_stats)
            fprintf(out, "  request    %" PRIu64 " B asked for, %" PRIu64 " B free on the device\n",
                    r->oom_requested, r->oom_free);
        fprintf(out, "  OOMs       %" PRId64 " out-of-memory %s: every figure of this run stops "
                     "short of what it needed (--allow-oom passes it)\n",
                r->value, r->from_stats ? (r->value == 1 ? "return" : "returns")
                                        : (r->value == 1 ? "event" : "events"));
    } else if (r->kind == TDM_GATE_MAX_GROWTH) {
        fprintf(out, "  baseline   %s%s%s\n", tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)r->limit),
                r->limit ? " in " : " (nothing on this device) in ",
                o->baseline ? o->baseline : "the baseline");
        if (isinf(r->growth))
            fprintf(out, "  peak       %s: new memory; limit %+.1f%%\n",
                    tdm__fmt_bytes_exact(b, sizeof b, (uint64_t)r->value), r->growth_limit);
        else
            fprintf(out, "  peak       %s: %+.1f%%, limit %+.1f%%\n",
                    tdm__fmt_bytes_exact(b, sizeof b, (uint64_t)r->value), r->growth,
                    r->growth_limit);
    } else {
        fprintf(out, "  limit      %s\n", tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)r->limit));
        tdm__fmt_sbytes(b, sizeof b, r->value - r->limit);
        fprintf(out, "  %-10s %s, %s", r->kind == TDM_GATE_MAX_LEAK ? "live" : "peak",
                tdm__fmt_bytes_exact(a, sizeof a, (uint64_t)r->value), b);
        if (r->limit)
            fprintf(out, " (%.1f%%)", 100.0 * (double)(r->value - r->limit) / (double)r->limit);
        fprintf(out, " over%s\n", r->kind == TDM_GATE_MAX_RESERVED ? " (reserved bytes)" : "");
    }
    tdm__gate_when(when, sizeof when, in, r);
    fprintf(out, "  when       %s\n", when);
    if (r->kind == TDM_GATE_NO_OOM && !r->from_stats && r->at_seq >= 0 &&
        in->snap->events[r->at_seq].stack_id) {
        fprintf(out, "  site       ");
        tdm__site_print_frames(out, in->snap, in->snap->events[r->at_seq].stack_id,
                               o->frames ? o->frames : 1, 13);
    }
    if (r->kind == TDM_GATE_MAX_GROWTH && o->baseline)
        fprintf(out, "  what grew  tidemark diff %s %s\n", o->baseline, in->path);

    tdm_model_site *sites;
    size_t n, live = 0;
    uint64_t total = 0;
    tdm_status st = tdm__model_sites_at(in->model, (size_t)r->dev_index, r->at_seq, &sites, &n);
    if (st != TDM_OK)
        return st;
    while (live < n && sites[live].live_bytes)
        total += sites[live++].live_bytes;
    if (live && o->top) {
        fprintf(out, "  top allocation sites live %s (%zu site%s):\n",
                r->at_end                          ? "at exit"
                : r->kind == TDM_GATE_MAX_RESERVED ? "at the reserved peak"
                : r->kind == TDM_GATE_NO_OOM       ? "when it ran out"
                                                   : "at the peak",
                live, live == 1 ? "" : "s");
        for (size_t i = 0; i < live && i < o->top; i++) {
            char count[24];
            snprintf(count, sizeof count, "x%" PRIu64, sites[i].live_count);
            fprintf(out, "  %10s %5.1f%% %7s  ", tdm__fmt_bytes(a, sizeof a, sites[i].live_bytes),
                    100.0 * (double)sites[i].live_bytes / (double)total, count);
            tdm__site_print_frames(out, in->snap, sites[i].stack_id, o->frames ? o->frames : 1,
                                   29);
        }
        if (live > o->top)
            fprintf(out, "  ... %zu more site%s\n", live - o->top,
                    live - o->top == 1 ? "" : "s");
    } else if (!live) {
        fprintf(out, "  (no allocation live there)\n");
    }
    free(sites);
    return TDM_OK;
}

/* One line per result: "FAIL  max-peak     FILE, rank.., device 0 (sim0): ...". */
static void print_line(FILE *out, const tdm_input *inputs, const tdm_gate_result *r)
{
    char head[256], dev[96], rank[320];
    tdm__gate_headline(head, sizeof head, r);
    device_label(dev, sizeof dev, &inputs[r->file], r);
    /* A file of a multi-rank job is named by its rank and host too. */
    tdm__ranks_label(rank, sizeof rank, inputs[r->file].snap);
    fprintf(out, "%-5s %-12s %s, %s%s%s: %s\n", status_word(r->status),
            tdm__gate_kind_name(r->kind), inputs[r->file].path, rank, rank[0] ? ", " : "",
            dev, head);
}

tdm_status tdm__gate_print(FILE *out, const tdm_gate_options *o, const tdm_input *inputs,
                           const tdm_gate_report *rep)
{
    const tdm_gate_result *first = NULL;
    for (size_t i = 0; i < rep->count && !first; i++)
        if (rep->results[i].status == TDM_GATE_FAIL)
            first = &rep->results[i];
    if (first) {
        /* The verdict, then what else went wrong; passes are counted. */
        tdm_status st = tdm__gate_print_failure(out, o, &inputs[first->file], first);
        if (st != TDM_OK)
            return st;
        int others = 0;
        for (size_t i = 0; i < rep->count; i++) {
            const tdm_gate_result *r = &rep->results[i];
            if (r == first || (r->status != TDM_GATE_FAIL && r->status != TDM_GATE_ERROR))
                continue;
            if (!others++)
                fputc('\n', out);
            print_line(out, inputs, r);
        }
        fputc('\n', out);
    } else {
        for (size_t i = 0; i < rep->count; i++)
            print_line(out, inputs, &rep->results[i]);
    }
    fprintf(out, "gates: %zu passed, %zu failed", rep->passed, rep->failed);
    if (rep->errors)
        fprintf(out, ", %zu could not be checked", rep->errors);
    if (rep->skipped)
        fprintf(out, ", %zu skipped", rep->skipped);
    fputc('\n', out);
    return TDM_OK;
}
