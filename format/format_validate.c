/* format/format_validate.c: everything the reader checks of a snapshot,
 * checked by the writer (format_write.c) before any file is made (the
 * events chunk by chunk as they are written, before the file is renamed
 * into place), so the writer never produces a file the reader would
 * reject.  Pure functions
 * over the snapshot; no state, no locks.
 */
#include <stdint.h>
#include <string.h>

#include "format_internal.h"

/* ---- validation: everything the reader checks, checked before writing -- */

static int device_ok(int64_t d) { return d >= -1 && d <= INT16_MAX; }

tdm_status tdm__format_validate_tables(const tdm_snap *s)
{
    const tdm_snap_header *h = &s->header;
    if (h->record_mode > TDM_RECORD_ALL || h->context_mode > TDM_CONTEXT_ALL ||
        h->stacks_mode > TDM_STACKS_ALL || h->rank < -1 ||
        h->local_rank < -1 || h->world_size < 0)
        return TDM_INVALID_ARGUMENT;
    if ((s->device_count && !s->devices) || (s->phase_count && !s->phase_names) ||
        (s->frame_count && !s->frames) || (s->stack_count && !s->stacks) ||
        (s->event_count && !s->events) || (s->segment_count && !s->segments) ||
        (s->block_count && !s->blocks) || (s->stats_count && !s->stats))
        return TDM_INVALID_ARGUMENT;
    if (s->frame_count > UINT32_MAX || s->stack_count > UINT32_MAX ||
        s->phase_count > UINT32_MAX || s->block_count > UINT32_MAX ||
        s->segment_count > UINT32_MAX || s->device_count > INT16_MAX + 2u)
        return TDM_INVALID_ARGUMENT;
    /* Device ordinals are unique; -1 (the host) is bit 0. */
    uint8_t seen[(INT16_MAX + 2) / 8 + 1] = {0};
    for (size_t i = 0; i < s->device_count; i++) {
        int32_t d = s->devices[i].index;
        if (!device_ok(d) || (seen[(d + 1) / 8] >> ((d + 1) % 8) & 1))
            return TDM_INVALID_ARGUMENT;
        seen[(d + 1) / 8] |= (uint8_t)(1u << ((d + 1) % 8));
    }
    for (size_t i = 0; i < s->frame_count; i++)
        if (s->frames[i].kind > TDM_FRAME_KIND_MAX)
            return TDM_INVALID_ARGUMENT;
    if (s->phase_count && s->phase_names[0] && s->phase_names[0][0])
        return TDM_INVALID_ARGUMENT;
    if (s->stack_count && s->stacks[0].depth != 0)
        return TDM_INVALID_ARGUMENT;
    for (size_t i = 0; i < s->stack_count; i++) {
        const tdm_snap_stack *st = &s->stacks[i];
        if (st->depth && !st->frames)
            return TDM_INVALID_ARGUMENT;
        for (uint32_t k = 0; k < st->depth; k++)
            if (st->frames[k] >= s->frame_count)
                return TDM_INVALID_ARGUMENT;
    }
    return TDM_OK;
}

/* Stats rows: known pools, and one row per (device, pool) so that no
 * consumer has to choose between two "all" rows of a device. */
static tdm_status validate_stats(const tdm_snap *s)
{
    enum { NPOOL = TDM_STAT_POOL_LARGE + 1, NDEV = INT16_MAX + 2 };
    uint8_t seen[(NDEV * NPOOL) / 8 + 1] = {0};
    for (size_t i = 0; i < s->stats_count; i++) {
        const tdm_snap_device_stats *d = &s->stats[i];
        if (!device_ok(d->device) || d->pool > TDM_STAT_POOL_LARGE)
            return TDM_INVALID_ARGUMENT;
        size_t bit = (size_t)(d->device + 1) * NPOOL + d->pool;
        if (seen[bit / 8] >> (bit % 8) & 1)
            return TDM_INVALID_ARGUMENT;
        seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
    return TDM_OK;
}

tdm_status tdm__format_validate_events(const tdm_snap *s, size_t first, size_t n)
{
    size_t nstacks = s->stack_count ? s->stack_count : 1;
    size_t nphases = s->phase_count ? s->phase_count : 1;
    for (size_t i = first; i < first + n; i++) {
        const tdm_event *e = &s->events[i];
        if (e->action >= TDM_ACTION_COUNT_ || e->category >= TDM_CATEGORY_COUNT_ ||
            e->device < -1 || e->stack_id >= nstacks || e->phase >= nphases)
            return TDM_INVALID_ARGUMENT;
    }
    return TDM_OK;
}

tdm_status tdm__format_validate_state(const tdm_snap *s)
{
    size_t nstacks = s->stack_count ? s->stack_count : 1;
    uint64_t blocks_written = 0;
    for (size_t i = 0; i < s->segment_count; i++) {
        const tdm_snap_segment *g = &s->segments[i];
        if (!device_ok(g->device) || g->pool > TDM_POOL_NONE ||
            g->is_expandable > 1 || g->stack_id >= nstacks ||
            (uint64_t)g->first_block + g->block_count > s->block_count)
            return TDM_INVALID_ARGUMENT;
        blocks_written += g->block_count;
        /* Blocks tile the segment: consecutive, from its base, to its end. */
        uint64_t at = g->address;
        for (uint32_t k = 0; k < g->block_count; k++) {
            const tdm_snap_block *b = &s->blocks[g->first_block + k];
            if (b->address != at || b->size > UINT64_MAX - at ||
                b->state > TDM_BLOCK_ACTIVE_PENDING_FREE ||
                b->category >= TDM_CATEGORY_COUNT_ || b->stack_id >= nstacks)
                return TDM_INVALID_ARGUMENT;
            at += b->size;
        }
        if (at - g->address != g->total_size)
            return TDM_INVALID_ARGUMENT;
    }
    if (blocks_written > UINT32_MAX || (s->imported_count && !s->imported))
        return TDM_INVALID_ARGUMENT;
    for (size_t i = 0; i < s->imported_count; i++) {
        const tdm_snap_imported *m = &s->imported[i];
        if (!device_ok(m->device) || m->kind > TDM_IMPORT_KIND_MAX ||
            m->stack_id >= nstacks ||
            (m->source_device != TDM_IMPORT_SOURCE_UNKNOWN && !device_ok(m->source_device)))
            return TDM_INVALID_ARGUMENT;
    }
    if (s->annotation_count && !s->annotations)
        return TDM_INVALID_ARGUMENT;
    for (size_t i = 0; i < s->annotation_count; i++) {
        const tdm_snap_annotation *a = &s->annotations[i];
        if (a->kind > TDM_ANNOTATION_KIND_MAX || !device_ok(a->device) || !a->text ||
            a->before_event > s->event_count ||
            (i && a->before_event < s->annotations[i - 1].before_event))
            return TDM_INVALID_ARGUMENT;
    }
    return validate_stats(s);
}
