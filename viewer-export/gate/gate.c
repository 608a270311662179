/* viewer-export/gate/gate.c: memory gates (gate.h): the options `tidemark gate`
 * and `tidemark run` share, the evaluation of every gate on every device
 * of every input, the text report and GitHub annotation lines; and the
 * input loader and site helpers that `tidemark diff` uses too.
 *
 * Every figure comes from the analysis model (model.h): peaks, reserved
 * bytes and bytes live at the end are never re-derived here.  JUnit XML
 * and GitHub annotations are written by junit.c.  A failure's
 * detail block stays within about 30 lines: 5 lines of figures, then the
 * top sites (5 by default) with their 3 innermost frames.  No state, no
 * locks.
 */
#include "gate.h"
#include "input.h"
#include "sites.h"
#include "format_size.h"
#include "ranks.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_FMT TDM_FMT_LEN
/* Failures shown in full; later ones keep their one status line.  One, so
 * that a failing run prints about 30 lines whatever else failed with it
 * (beyond the status lines, one per gate per device per file). */
#define DETAILED_FAILURES 1

static const char *str_or(const char *s, const char *fallback)
{
    return s && s[0] ? s : fallback;
}

/* ---- options ------------------------------------------------------------ */

static const char *const kind_names[TDM_GATE_KIND_COUNT_] = {
    "max-peak", "max-reserved", "max-leak", "max-growth"};

const char *tdm__gate_kind_name(tdm_gate_kind kind)
{
    return (unsigned)kind < TDM_GATE_KIND_COUNT_ ? kind_names[kind] : "?";
}

void tdm__gate_options_init(tdm_gate_options *o)
{
    memset(o, 0, sizeof *o);
    o->device = -1;
    o->top = 5;
    o->frames = 3;
}

static int parse_limit(const char *cmd, const char *opt, const char *arg, uint64_t *v)
{
    if (tdm__parse_size(arg, v) != TDM_OK || *v > (uint64_t)INT64_MAX) {
        fprintf(stderr, "tidemark %s: %s needs a size such as 12GiB, 512M or 1048576, "
                        "not '%s'\n", cmd, opt, arg);
        return -1;
    }
    return 0;
}

int tdm__gate_option(const char *cmd, int code, const char *arg, tdm_gate_options *o)
{
    unsigned long v;
    switch (code) {
    case TDM_GATE_OPT_MAX_PEAK:
        o->enabled |= 1u << TDM_GATE_MAX_PEAK;
        return parse_limit(cmd, "--max-peak", arg, &o->max_peak) ? -1 : 1;
    case TDM_GATE_OPT_MAX_RESERVED:
        o->enabled |= 1u << TDM_GATE_MAX_RESERVED;
        return parse_limit(cmd, "--max-reserved", arg, &o->max_reserved) ? -1 : 1;
    case TDM_GATE_OPT_MAX_LEAK:
        o->enabled |= 1u << TDM_GATE_MAX_LEAK;
        return parse_limit(cmd, "--max-leak", arg, &o->max_leak) ? -1 : 1;
    case TDM_GATE_OPT_MAX_GROWTH: {
        char *end;
        const char *p = arg;
        double pct = strtod(p, &end);
        if (end != p && *end == '%')
            end++;
        if (end == p || *end || !(pct >= 0) || !isfinite(pct) || (p[0] < '0' || p[0] > '9')) {
            fprintf(stderr, "tidemark %s: --max-growth needs a percentage >= 0 such as 10 "
                            "or 2.5%%, not '%s'\n", cmd, arg);
            return -1;
        }
        o->enabled |= 1u << TDM_GATE_MAX_GROWTH;
        o->max_growth = pct;
        return 1;
    }
    case TDM_GATE_OPT_BASELINE:
        if (!arg[0]) {
            fprintf(stderr, "tidemark %s: --baseline needs a file\n", cmd);
            return -1;
        }
        o->baseline = arg;
        return 1;
    case TDM_GATE_OPT_DEVICE:
        if (tdm__parse_count(cmd, "--device", arg, 32767, &v))
            return -1;
        o->device = (int)v;
        return 1;
    case TDM_GATE_OPT_TOP:
        if (tdm__parse_count(cmd, "--top", arg, 100, &v))
            return -1;
        o->top = (unsigned)v;
        return 1;
    case TDM_GATE_OPT_FRAMES:
        if (tdm__parse_count(cmd, "--frames", arg, 20, &v))
            return -1;
        o->frames = (unsigned)v;
        return 1;
    case TDM_GATE_OPT_JUNIT:
        if (!arg[0]) {
            fprintf(stderr, "tidemark %s: --junit needs a file\n", cmd);
            return -1;
        }
        o->junit = arg;
        return 1;
    case TDM_GATE_OPT_GITHUB:
        o->github = 1;
        return 1;
    default:
        return 0;
    }
}

int tdm__gate_options_check(const char *cmd, const tdm_gate_options *o)
{
    int growth = (o->enabled >> TDM_GATE_MAX_GROWTH) & 1;
    if (growth && !o->baseline) {
        fprintf(stderr, "tidemark %s: --max-growth needs --baseline FILE to grow from\n", cmd);
        return -1;
    }
    if (o->baseline && !growth) {
        fprintf(stderr, "tidemark %s: --baseline needs --max-growth PCT, the growth "
                        "allowed over it\n", cmd);
        return -1;
    }
    return 0;
}

void tdm__gate_options_help(FILE *out)
{
    fputs("gates (each checked on every device of every file; equal to a limit passes):\n"
          "  --max-peak SIZE        highest allocated bytes (e.g. 12GiB, 512M)\n"
          "  --max-reserved SIZE    highest reserved bytes (segments held from the device)\n"
          "  --max-leak SIZE        bytes still allocated when the snapshot was taken\n"
          "  --baseline FILE --max-growth PCT\n"
          "                         peak at most PCT percent above FILE's peak on the\n"
          "                         same device\n"
          "  --device N             check only the device with ordinal N\n"
          "reporting:\n"
          "  --top N                allocation sites shown per failure (default 5)\n"
          "  --frames N             frames shown per site (default 3)\n"
          "  --junit FILE           write a JUnit XML report (a testcase per gate per file)\n"
          "  --github               print GitHub Actions annotations (::error ...) for\n"
          "                         failures\n",
          out);
}

/* ---- evaluation --------------------------------------------------------- */

/* Where a device's reserved bytes were highest: the first such sample. */
static int64_t reserved_peak_seq(const tdm_model_device *d)
{
    for (size_t i = 0; i < d->sample_count; i++)
        if (d->samples[i].reserved == d->peak_reserved)
            return d->samples[i].seq;
    return d->peak_seq;
}

/* Measures the figure gate `kind` looks at on device `di` of `in`; on
 * failure to measure sets r->status = ERROR and r->note. */
static void measure(const tdm_input *in, size_t di, tdm_gate_kind kind,
                    tdm_gate_result *r)
{
    const tdm_model *m = in->model;
    const tdm_model_device *d = &m->devices[di];
    int history = in->snap->event_count > 0;
    int64_t end_seq = tdm__model_end_seq(m);
    switch (kind) {
    case TDM_GATE_MAX_PEAK:
    case TDM_GATE_MAX_GROWTH:
        if (history) {
            r->value = d->peak_allocated;
            r->at_seq = d->peak_seq;
        } else if (d->stats) {
            r->value = d->stats->allocated_bytes.peak;
            r->from_stats = 1;
            r->at_seq = end_seq;
            r->at_end = 1;
        } else if (m->state_known) {
            r->value = d->end_allocated;
            r->at_seq = end_seq;
            r->at_end = 1;
        } else {
            r->status = TDM_GATE_ERROR;
            r->note = "no history, allocator stats or final state to measure a peak from";
        }
        return;
    case TDM_GATE_MAX_RESERVED:
        if (history && d->reserved_known) {
            r->value = d->peak_reserved;
            r->at_seq = reserved_peak_seq(d);
        } else if (d->stats) {
            r->value = d->stats->reserved_bytes.peak;
            r->from_stats = 1;
            r->at_seq = end_seq;
            r->at_end = 1;
        } else {
            r->status = TDM_GATE_ERROR;
            r->note = "no segment history or allocator stats to measure reserved bytes from";
        }
        return;
    case TDM_GATE_MAX_LEAK:
        if (history || m->state_known) {
            r->value = d->end_allocated < 0 ? 0 : d->end_allocated;
            r->at_seq = end_seq;
            r->at_end = 1;
        } else {
            r->status = TDM_GATE_ERROR;
            r->note = "no history or final state to tell what was live at exit";
        }
        return;
    default:
        r->status = TDM_GATE_ERROR;
        r->note = "unknown gate";
        return;
    }
}

static void judge(const tdm_gate_options *o, const tdm_input *baseline,
                  const tdm_input *in, tdm_gate_result *r)
{
    measure(in, (size_t)r->dev_index, r->kind, r);
    if (r->status == TDM_GATE_ERROR)
        return;
    uint64_t limit = 0;
    switch (r->kind) {
    case TDM_GATE_MAX_PEAK: limit = o->max_peak; break;
    case TDM_GATE_MAX_RESERVED: limit = o->max_reserved; break;
    case TDM_GATE_MAX_LEAK: limit = o->max_leak; break;
    case TDM_GATE_MAX_GROWTH: {
        if (!baseline || !baseline->model) {
            r->status = TDM_GATE_ERROR;
            r->note = "the baseline could not be read";
            return;
        }
        int bi = tdm__model_device_index(baseline->model, r->device);
        int64_t base = 0;
        if (bi >= 0) {
            tdm_gate_result b = {.kind = TDM_GATE_MAX_PEAK, .dev_index = bi};
            measure(baseline, (size_t)bi, TDM_GATE_MAX_PEAK, &b);
            if (b.status == TDM_GATE_ERROR) {
                r->status = TDM_GATE_ERROR;
                r->note = "the baseline has no figure to compare with";
                return;
            }
            base = b.value;
        }
        r->limit = base;
        r->growth_limit = o->max_growth;
        if (base > 0)
            r->growth = 100.0 * (double)(r->value - base) / (double)base;
        else
            r->growth = r->value > 0 ? INFINITY : 0.0;
        r->status = r->growth > o->max_growth ? TDM_GATE_FAIL : TDM_GATE_PASS;
        return;
    }
    default: break;
    }
    r->limit = (int64_t)limit;
    r->status = r->value > r->limit ? TDM_GATE_FAIL : TDM_GATE_PASS;
}

static int push(tdm_gate_report *rep, size_t *cap, const tdm_gate_result *r)
{
    if (rep->count == *cap) {
        size_t n = *cap ? *cap * 2 : 16;
        tdm_gate_result *grown = realloc(rep->results, n * sizeof *grown);
        if (!grown)
            return -1;
        rep->results = grown;
        *cap = n;
    }
    rep->results[rep->count++] = *r;
    return 0;
}

tdm_status tdm__gate_evaluate(const tdm_gate_options *o, const tdm_input *inputs,
                              size_t input_count, const tdm_input *baseline,
                              tdm_gate_report *rep)
{
    size_t cap = 0;
    int device_seen = 0;
    memset(rep, 0, sizeof *rep);
    for (size_t f = 0; f < input_count; f++) {
        const tdm_input *in = &inputs[f];
        for (int k = 0; k < TDM_GATE_KIND_COUNT_; k++) {
            if (!(o->enabled & (1u << k)))
                continue;
            tdm_gate_result r = {.file = f, .kind = (tdm_gate_kind)k,
                                 .device = o->device, .dev_index = -1};
            if (!in->model) {
                r.status = TDM_GATE_ERROR;
                r.note = in->error ? in->error : "could not be read";
                if (push(rep, &cap, &r))
                    goto oom;
                continue;
            }
            if (o->device >= 0) {
                r.dev_index = tdm__model_device_index(in->model, o->device);
                if (r.dev_index < 0) {
                    r.status = TDM_GATE_SKIP;
                    r.note = "this file has no such device";
                } else {
                    device_seen = 1;
                    judge(o, baseline, in, &r);
                }
                if (push(rep, &cap, &r))
                    goto oom;
                continue;
            }
            if (in->model->device_count == 0) {
                r.status = TDM_GATE_SKIP;
                r.note = "this file has no devices";
                if (push(rep, &cap, &r))
                    goto oom;
            }
            for (size_t d = 0; d < in->model->device_count; d++) {
                tdm_gate_result one = r;
                one.dev_index = (int)d;
                one.device = in->model->devices[d].ordinal;
                judge(o, baseline, in, &one);
                if (push(rep, &cap, &one))
                    goto oom;
            }
        }
    }
    /* --device N that no file has is a mistake, not a pass. */
    for (size_t i = 0; i < rep->count; i++) {
        tdm_gate_result *r = &rep->results[i];
        if (o->device >= 0 && !device_seen && r->status == TDM_GATE_SKIP) {
            r->status = TDM_GATE_ERROR;
            r->note = "no file has this device";
        }
        switch (r->status) {
        case TDM_GATE_PASS: rep->passed++; break;
        case TDM_GATE_SKIP: rep->skipped++; break;
        case TDM_GATE_FAIL: rep->failed++; break;
        case TDM_GATE_ERROR: rep->errors++; break;
        }
    }
    return TDM_OK;
oom:
    tdm__gate_report_free(rep);
    return TDM_HOST_OUT_OF_MEMORY;
}

void tdm__gate_report_free(tdm_gate_report *report)
{
    free(report->results);
    memset(report, 0, sizeof *report);
}

int tdm__gate_exit_code(const tdm_gate_report *report)
{
    if (report->failed)
        return TDM_EXIT_GATE_FAILED;
    if (report->errors)
        return TDM_EXIT_BAD_INPUT;
    return TDM_EXIT_OK;
}

/* ---- text --------------------------------------------------------------- */

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

/* "+1.234 s (event 56), step 3, phase backward", or when the figure has
 * no moment of its own, what it stands for. */
void tdm__gate_when(char *buf, size_t len, const tdm_input *in,
                    const tdm_gate_result *r)
{
    const tdm_snap *s = in->snap;
    const tdm_model *m = in->model;
    char t[S_FMT], pbuf[32];
    uint64_t origin = s->header.start_time_us ? s->header.start_time_us * 1000u
                                              : m->window_start_ns;
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
                                     (int64_t)(s->header.dump_time_us -
                                               s->header.start_time_us) * 1000));
        else
            snprintf(buf, len, "at exit, when the snapshot was taken");
        return;
    }
    if (r->at_seq < 0 || (size_t)r->at_seq >= s->event_count) {
        snprintf(buf, len, "the start of the recorded history");
        return;
    }
    const tdm_event *e = &s->events[r->at_seq];
    int n = snprintf(buf, len, "%s (event %" PRId64 ")",
                     tdm__fmt_offset(t, sizeof t, (int64_t)(e->time_ns - origin)), r->at_seq);
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
                 str_or(in->model->devices[r->dev_index].name,
                        str_or(in->model->devices[r->dev_index].vendor, "?")));
    else if (r->device >= 0)
        snprintf(buf, len, "device %d", r->device);
    else
        snprintf(buf, len, "every device");
}

tdm_status tdm__gate_print_failure(FILE *out, const tdm_gate_options *o,
                                   const tdm_input *in, const tdm_gate_result *r)
{
    char a[S_FMT], b[S_FMT], dev[96], when[192], rank[320];
    device_label(dev, sizeof dev, in, r);
    tdm__ranks_label(rank, sizeof rank, in->snap);
    fprintf(out, "%s FAILED on %s%s%s%s, %s\n", tdm__gate_kind_name(r->kind), in->path,
            rank[0] ? " (" : "", rank, rank[0] ? ")" : "", dev);
    if (r->kind == TDM_GATE_MAX_GROWTH) {
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
                r->at_end ? "at exit" : r->kind == TDM_GATE_MAX_RESERVED
                                            ? "at the reserved peak" : "at the peak",
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

tdm_status tdm__gate_print(FILE *out, const tdm_gate_options *o, const tdm_input *inputs,
                           const tdm_gate_report *rep)
{
    char head[256], dev[96], rank[320];
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
        tdm__gate_headline(head, sizeof head, r);
        device_label(dev, sizeof dev, &inputs[r->file], r);
        /* A file of a multi-rank job is named by its rank and host too. */
        tdm__ranks_label(rank, sizeof rank, inputs[r->file].snap);
        fprintf(out, "%-5s %-12s %s, %s%s%s: %s\n", status_word(r->status),
                tdm__gate_kind_name(r->kind), inputs[r->file].path, rank,
                rank[0] ? ", " : "", dev, head);
    }
    size_t shown = 0;
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->status != TDM_GATE_FAIL)
            continue;
        if (shown++ == DETAILED_FAILURES) {
            fprintf(out, "\n(%zu more failure%s listed above)\n", rep->failed - DETAILED_FAILURES,
                    rep->failed - DETAILED_FAILURES == 1 ? "" : "s");
            break;
        }
        fputc('\n', out);
        tdm_status st = tdm__gate_print_failure(out, o, &inputs[r->file], r);
        if (st != TDM_OK)
            return st;
    }
    fprintf(out, "%sgates: %zu passed, %zu failed", shown ? "\n" : "", rep->passed, rep->failed);
    if (rep->errors)
        fprintf(out, ", %zu could not be checked", rep->errors);
    if (rep->skipped)
        fprintf(out, ", %zu skipped", rep->skipped);
    fputc('\n', out);
    return TDM_OK;
}
