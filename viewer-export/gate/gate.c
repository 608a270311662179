/* viewer-export/gate/gate.c: memory gates (gate.h): the options `tidemark gate`
 * and `tidemark run` share, the evaluation of every gate on every device
 * of every input, and the exit code the results call for.
 *
 * Every figure comes from the analysis model (model.h): peaks, reserved
 * bytes and bytes live at the end are never re-derived here.  The text
 * report is gate_text.c's; JUnit XML and GitHub annotations are written
 * by junit.c.  No state, no locks.
 */
#include "gate.h"
#include "input.h"
#include "sites.h"
#include "format_size.h"
#include "ranks.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ------------------------------------------------------------ */

static const char *const kind_names[TDM_GATE_KIND_COUNT_] = {
    "max-peak", "max-reserved", "max-leak", "max-growth", "no-oom"};

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

/* Below this, a size without a unit is more likely a forgotten unit
 * than a byte count: said back with a warning. */
#define UNITLESS_WARN_BELOW (UINT64_C(1) << 20)

int tdm__gate_parse_size(const char *cmd, const char *opt, const char *arg, uint64_t *v)
{
    if (tdm__parse_size(arg, v) != TDM_OK || *v > (uint64_t)INT64_MAX) {
        fprintf(stderr, "tidemark %s: %s needs a size such as 12GiB, 512M or 1048576, "
                        "not '%s'\n", cmd, opt, arg);
        return -1;
    }
    /* "12": read as 12 B, as documented, but say so: 12GiB was likely
     * meant (or MiB, the unit nvidia-smi prints, for a number in the
     * thousands).  0 is 0 in every unit; "12B" says bytes outright. */
    const char *end = arg + strlen(arg);
    while (end > arg && isspace((unsigned char)end[-1]))
        end--;
    if (end > arg && isdigit((unsigned char)end[-1]) && *v && *v < UNITLESS_WARN_BELOW) {
        fprintf(stderr, "tidemark %s: %s %s has no unit: read as %" PRIu64 " B (did you mean "
                        "%" PRIu64 "%s?)\n", cmd, opt, arg, *v, *v, *v < 1024 ? "GiB" : "MiB");
    }
    return 0;
}

int tdm__gate_option(const char *cmd, int code, const char *arg, tdm_gate_options *o)
{
    unsigned long v;
    switch (code) {
    case TDM_GATE_OPT_MAX_PEAK:
        o->enabled |= 1u << TDM_GATE_MAX_PEAK;
        return tdm__gate_parse_size(cmd, "--max-peak", arg, &o->max_peak) ? -1 : 1;
    case TDM_GATE_OPT_MAX_RESERVED:
        o->enabled |= 1u << TDM_GATE_MAX_RESERVED;
        return tdm__gate_parse_size(cmd, "--max-reserved", arg, &o->max_reserved) ? -1 : 1;
    case TDM_GATE_OPT_MAX_LEAK:
        o->enabled |= 1u << TDM_GATE_MAX_LEAK;
        return tdm__gate_parse_size(cmd, "--max-leak", arg, &o->max_leak) ? -1 : 1;
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
    case TDM_GATE_OPT_ALLOW_EMPTY:
        o->allow_empty = 1;
        return 1;
    case TDM_GATE_OPT_ALLOW_OOM:
        o->allow_oom = 1;
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
    case TDM_GATE_NO_OOM:
        if (history) {
            int64_t k = tdm__model_first_oom(m, di);
            r->value = (int64_t)d->oom_events;
            r->at_seq = k;
            if (k >= 0) {
                r->oom_requested = in->snap->events[k].requested;
                r->oom_free = in->snap->events[k].addr;
            }
        } else if (d->stats) {
            r->value = (int64_t)d->stats->num_ooms;
            r->from_stats = 1;
            r->at_seq = end_seq;
            r->at_end = 1;
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

int tdm__gate_input_empty(const tdm_input *in)
{
    const tdm_model *m = in->model;
    if (!m || m->alloc_count || in->snap->segment_count)
        return 0;
    /* Known to be empty, not merely unread (a file cut before its events
     * and its final state says nothing: its gates are errors). */
    int known = m->state_known || in->snap->event_count > 0;
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_stats *st = m->devices[d].stats;
        if (st && (st->allocated_bytes.peak > 0 || st->reserved_bytes.peak > 0))
            return 0;
        known |= st != NULL;
    }
    return known;
}

int tdm__gate_check_devices(const char *cmd, const tdm_gate_options *o,
                            const tdm_input *inputs, size_t input_count)
{
    int rc = TDM_EXIT_OK;
    for (size_t f = 0; f < input_count; f++)
        rc = tdm__exit_worse(rc, tdm__input_check_device(cmd, &inputs[f], o->device));
    return rc;
}

tdm_status tdm__gate_evaluate(const tdm_gate_options *o, const tdm_input *inputs,
                              size_t input_count, const tdm_input *baseline,
                              tdm_gate_report *rep)
{
    size_t cap = 0;
    memset(rep, 0, sizeof *rep);
    /* An out-of-memory event fails a run whatever else is asked. */
    unsigned enabled = o->enabled;
    if (enabled && !o->allow_oom)
        enabled |= 1u << TDM_GATE_NO_OOM;
    for (size_t f = 0; f < input_count; f++) {
        const tdm_input *in = &inputs[f];
        for (int k = 0; k < TDM_GATE_KIND_COUNT_; k++) {
            if (!(enabled & (1u << k)))
                continue;
            tdm_gate_result r = {.file = f, .kind = (tdm_gate_kind)k,
                                 .device = o->device, .dev_index = -1};
            if (k == TDM_GATE_NO_OOM) {
                /* A result only where a device ran out of memory: a file
                 * that could not be read, or has no such device, is said
                 * by the other gates. */
                if (!in->model || tdm__gate_input_empty(in))
                    continue;
                for (size_t d = 0; d < in->model->device_count; d++) {
                    if (o->device >= 0 && in->model->devices[d].ordinal != o->device)
                        continue;
                    tdm_gate_result one = r;
                    one.dev_index = (int)d;
                    one.device = in->model->devices[d].ordinal;
                    judge(o, baseline, in, &one);
                    if (one.status == TDM_GATE_FAIL && push(rep, &cap, &one))
                        goto oom;
                }
                continue;
            }
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
                    r.status = TDM_GATE_ERROR;
                    r.note = "this file has no such device";
                } else if (tdm__gate_input_empty(in)) {
                    r.status = TDM_GATE_SKIP;
                    r.note = "no device memory used in this file";
                } else {
                    judge(o, baseline, in, &r);
                }
                if (push(rep, &cap, &r))
                    goto oom;
                continue;
            }
            if (in->model->device_count == 0 || tdm__gate_input_empty(in)) {
                r.status = TDM_GATE_SKIP;
                r.note = in->model->device_count ? "no device memory used in this file"
                                                 : "this file has no devices";
                if (push(rep, &cap, &r))
                    goto oom;
                continue;
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
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
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

int tdm__gate_nothing_measured(const tdm_gate_report *report)
{
    return report->passed + report->failed + report->errors == 0;
}

int tdm__gate_exit_code(const tdm_gate_options *o, const tdm_gate_report *report)
{
    if (report->failed)
        return TDM_EXIT_GATE_FAILED;
    if (report->errors)
        return TDM_EXIT_BAD_INPUT;
    if (tdm__gate_nothing_measured(report) && !o->allow_empty)
        return TDM_EXIT_NOTHING_MEASURED;
    return TDM_EXIT_OK;
}
