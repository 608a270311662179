/* viewer-export/reader/reader_query.c: the answers a program asks a
 * loaded snapshot for (tidemark_reader.h), each from the code the
 * command that gives it uses: the peak from the summary's choice
 * (tdm__summary_peak_of), the sites from tdm__model_sites_at and the
 * summary's way of writing frames, the bytes per category from
 * tdm__categories_bytes_at.  So a notebook's numbers are `tidemark
 * summary`'s and `tidemark categories`'.  Lock: tdm__reader_lock where
 * the model is queried. */
#include "reader_internal.h"

#include "sites.h"
#include "summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tdm_snapshot_action_name(unsigned action)
{
    return action < TDM_ACTION_COUNT_ ? tdm__action_name(action) : "?";
}

const char *tdm_snapshot_phase_name(const tdm_snapshot *snap, uint32_t phase, char *buf,
                                    size_t len)
{
    if (!snap || !buf || !len)
        return "";
    return tdm__model_phase_name(snap->model, phase, buf, len);
}

tdm_status tdm_snapshot_get_peak(const tdm_snapshot *snap, size_t device,
                                 tdm_snapshot_peak *peak)
{
    if (!snap || !peak || device >= snap->model->device_count)
        return TDM_INVALID_ARGUMENT;
    const tdm_model_device *d = &snap->model->devices[device];
    const tdm_snap *s = snap->snap;
    memset(peak, 0, sizeof *peak);
    peak->device = d->ordinal;
    if (!s->event_count) {
        /* No history: the allocator's figure, and the end's sites. */
        peak->bytes = d->stats ? d->stats->allocated_bytes.peak : 0;
        peak->allocated = d->end_allocated;
        peak->reserved = d->end_reserved;
        peak->seq = tdm__model_end_seq(snap->model);
        return TDM_OK;
    }
    tdm_summary_peak p = tdm__summary_peak_of(s, d, snap->torch);
    peak->of_reserved = p.reserved;
    peak->bytes = p.bytes;
    peak->allocated = p.allocated;
    peak->seq = p.seq;
    peak->time_ns = p.time_ns;
    peak->step = p.step;
    peak->phase = p.phase;
    peak->history = 1;
    if (d->reserved_known) {
        const tdm_model_sample *at = tdm__model_sample_at(d, p.seq);
        peak->reserved = at ? at->reserved : 0;
    }
    return TDM_OK;
}

/* The value a peak is of: reserved bytes for PyTorch's segments seen from
 * below (ties to the most allocated, as the summary breaks them), else
 * allocated bytes. */
static int sample_above(const tdm_model_sample *a, const tdm_model_sample *best, int reserved)
{
    if (!reserved)
        return a->allocated > best->allocated;
    return a->reserved > best->reserved ||
           (a->reserved == best->reserved && a->allocated > best->allocated);
}

tdm_status tdm_snapshot_get_peak_since(const tdm_snapshot *snap, size_t device, int64_t since,
                                       tdm_snapshot_peak *peak)
{
    if (!snap || !peak || device >= snap->model->device_count || since < -1 ||
        (since >= 0 && (uint64_t)since >= snap->snap->event_count))
        return TDM_INVALID_ARGUMENT;
    if (since == -1)
        return tdm_snapshot_get_peak(snap, device, peak);
    const tdm_model_device *d = &snap->model->devices[device];
    const tdm_snap *s = snap->snap;
    int reserved = snap->torch && d->reserved_known;
    const tdm_model_sample *best = tdm__model_sample_at(d, since);
    if (!best)
        return TDM_INVALID_ARGUMENT;
    tdm_model_sample start = *best;
    start.seq = since; /* the stretch opens here, whatever changed last */
    start.time_ns = s->events[since].time_ns;
    best = &start;
    for (size_t i = (size_t)(tdm__model_sample_at(d, since) - d->samples) + 1;
         i < d->sample_count; i++)
        if (sample_above(&d->samples[i], best, reserved))
            best = &d->samples[i];
    memset(peak, 0, sizeof *peak);
    peak->device = d->ordinal;
    peak->of_reserved = reserved;
    peak->bytes = reserved ? best->reserved : best->allocated;
    peak->allocated = best->allocated;
    peak->reserved = d->reserved_known ? best->reserved : 0;
    peak->seq = best->seq;
    peak->time_ns = best->time_ns;
    peak->step = s->events[best->seq].step;
    peak->phase = s->events[best->seq].phase;
    peak->history = 1;
    return TDM_OK;
}

tdm_status tdm_snapshot_sites_at(const tdm_snapshot *snap, size_t device, int64_t seq,
                                 tdm_snapshot_site **sites, size_t *count)
{
    if (!snap || !sites || !count || device >= snap->model->device_count || seq < -1)
        return TDM_INVALID_ARGUMENT;
    *sites = NULL;
    *count = 0;
    tdm_model_site *got = NULL;
    size_t n = 0;
    pthread_mutex_lock(&tdm__reader_lock);
    tdm_status st = tdm__model_sites_at(snap->model, device, seq, &got, &n);
    pthread_mutex_unlock(&tdm__reader_lock);
    if (st != TDM_OK)
        return st;
    tdm_snapshot_site *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) {
        free(got);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (tdm_snapshot_site){got[i].stack_id, got[i].stack_of_free, got[i].live_bytes,
                                     got[i].live_count, got[i].total_bytes,
                                     got[i].total_count};
    free(got);
    *sites = out;
    *count = n;
    return TDM_OK;
}

void tdm_snapshot_sites_free(tdm_snapshot_site *sites)
{
    free(sites);
}

size_t tdm_snapshot_site_text(const tdm_snapshot *snap, uint32_t stack_id, unsigned frames,
                              char *buf, size_t len)
{
    char none[1];
    if (!buf || !len) {
        buf = none;
        len = sizeof none;
    }
    buf[0] = '\0';
    if (!snap)
        return 0;
    const tdm_snap *s = snap->snap;
    if (stack_id == 0 || stack_id >= s->stack_count || s->stacks[stack_id].depth == 0)
        return (size_t)snprintf(buf, len, "(no stack recorded)");
    const tdm_snap_stack *st = &s->stacks[stack_id];
    size_t need = 0;
    unsigned shown = 0;
    for (uint32_t i = tdm__site_first_frame(s, stack_id); i < st->depth && shown < frames;
         i = tdm__site_next_frame(s, stack_id, i), shown++) {
        char line[256];
        tdm__site_format_stack_frame(line, sizeof line, s, stack_id, i);
        int w = snprintf(buf + (need < len ? need : len - 1), need < len ? len - need : 1,
                         "%s%s", shown ? "\n" : "", line);
        need += w > 0 ? (size_t)w : 0;
    }
    return need;
}

tdm_status tdm_snapshot_category_bytes(const tdm_snapshot *snap, size_t device,
                                       const int64_t *seqs, size_t n, int64_t *out)
{
    if (!snap || device >= snap->model->device_count || (n && (!seqs || !out)))
        return TDM_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (seqs[i] < -1 || (i && seqs[i] < seqs[i - 1]))
            return TDM_INVALID_ARGUMENT;
    if (!n)
        return TDM_OK;
    return tdm__categories_bytes_at(snap->model, snap->cats, device, seqs, n,
                                    (int64_t (*)[TDM_CATEGORY_COUNT_])out);
}
