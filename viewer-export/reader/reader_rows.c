/* viewer-export/reader/reader_rows.c: the public rows of a loaded
 * snapshot (tidemark_reader.h), made once from the snapshot, its model and
 * the categories, and their accessors.  Rows are plain fixed-layout
 * structs so that a binding can copy a table in one go (the Python
 * reader views them as numpy arrays).  No state of its own; the rows are
 * read-only once made. */
#include "reader_internal.h"

#include "sites.h"

#include <stdlib.h>
#include <string.h>

/* calloc of n rows, never NULL for n == 0 (one row, unused). */
static void *rows_of(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

static uint64_t time_of(const tdm_snap *s, int64_t seq)
{
    return seq >= 0 && (uint64_t)seq < s->event_count ? s->events[seq].time_ns : 0;
}

static void make_events(tdm_snapshot *r)
{
    const tdm_snap *s = r->snap;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        r->events[i] = (tdm_snapshot_event){
            .time_ns = e->time_ns, .address = e->addr, .size = e->size,
            .requested = e->requested, .stream = e->stream, .stack_id = e->stack_id,
            .phase = e->phase, .step = e->step, .device = e->device, .action = e->action,
            .tag = e->category};
    }
}

static void make_state(tdm_snapshot *r)
{
    const tdm_snap *s = r->snap;
    for (size_t i = 0; i < s->segment_count; i++) {
        const tdm_snap_segment *g = &s->segments[i];
        uint64_t allocated = 0;
        for (uint32_t b = 0; b < g->block_count && g->first_block + b < s->block_count; b++) {
            const tdm_snap_block *k = &s->blocks[g->first_block + b];
            if (k->state != TDM_BLOCK_INACTIVE)
                allocated += k->requested_size;
            r->blocks[g->first_block + b].segment = (uint32_t)i;
        }
        r->segments[i] = (tdm_snapshot_segment){
            .address = g->address, .total_size = g->total_size, .allocated = allocated,
            .stream = g->stream, .device = g->device, .stack_id = g->stack_id,
            .block_count = g->block_count, .pool = g->pool, .is_expandable = g->is_expandable};
    }
    for (size_t i = 0; i < s->block_count; i++) {
        const tdm_snap_block *k = &s->blocks[i];
        tdm_snapshot_block *o = &r->blocks[i];
        o->address = k->address;
        o->size = k->size;
        o->requested_size = k->requested_size;
        o->alloc_time_ns = k->alloc_time_ns;
        o->stack_id = k->stack_id;
        o->state = k->state;
        o->category = k->category;
    }
}

static void make_frames(tdm_snapshot *r)
{
    const tdm_snap *s = r->snap;
    for (size_t i = 0; i < s->frame_count; i++) {
        const tdm_snap_frame *f = &s->frames[i];
        r->frames[i] = (tdm_snapshot_frame){
            .pc = f->pc, .function = f->function ? f->function : "",
            .file = f->file ? f->file : "", .module = f->module ? f->module : "",
            .line = f->line, .kind = f->kind,
            .tidemark = (uint8_t)(tdm__site_frame_is_tidemark(f) != 0)};
    }
    size_t k = 0;
    for (size_t id = 0; id < s->stack_count; id++)
        for (uint32_t p = 0; p < s->stacks[id].depth; p++)
            r->stack_frames[k++] = (tdm_snapshot_stack_frame){(uint32_t)id, p,
                                                              s->stacks[id].frames[p]};
}

static void make_devices(tdm_snapshot *r)
{
    const tdm_model *m = r->model;
    for (size_t i = 0; i < m->device_count; i++) {
        const tdm_model_device *d = &m->devices[i];
        r->devices[i] = (tdm_snapshot_device){
            .ordinal = d->ordinal, .vendor = d->vendor ? d->vendor : "?",
            .name = d->name ? d->name : "", .label = tdm__model_device_label(d),
            .capacity = d->capacity, .peak_allocated = d->peak_allocated,
            .peak_reserved = d->reserved_known ? d->peak_reserved : 0,
            .end_allocated = d->end_allocated, .end_reserved = d->end_reserved,
            .end_blocks = d->end_blocks, .alloc_events = d->alloc_events,
            .free_events = d->free_events, .oom_events = d->oom_events,
            .reserved_known = d->reserved_known};
    }
}

static void make_allocations(tdm_snapshot *r)
{
    const tdm_model *m = r->model;
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        int live = a->free_seq == TDM_MODEL_SEQ_NEVER;
        r->allocations[i] = (tdm_snapshot_allocation){
            .address = a->addr, .size = a->size, .alloc_time_ns = a->alloc_time_ns,
            .free_time_ns = live ? 0 : time_of(r->snap, a->free_seq),
            .alloc_seq = a->alloc_seq, .free_seq = live ? -1 : a->free_seq,
            .stack_id = a->stack_id,
            .device = a->device_index < m->device_count ? m->devices[a->device_index].ordinal
                                                        : -1,
            .category = r->cats[i], .category_source = r->cat_sources[i],
            .stack_of_free = (uint8_t)((a->flags & TDM_MODEL_STACK_OF_FREE) != 0)};
    }
}

tdm_status tdm__reader_make_rows(tdm_snapshot *r)
{
    const tdm_snap *s = r->snap;
    size_t depth = 0;
    for (size_t id = 0; id < s->stack_count; id++)
        depth += s->stacks[id].depth;
    r->stack_frame_count = depth;
    r->events = rows_of(s->event_count, sizeof *r->events);
    r->segments = rows_of(s->segment_count, sizeof *r->segments);
    r->blocks = rows_of(s->block_count, sizeof *r->blocks);
    r->frames = rows_of(s->frame_count, sizeof *r->frames);
    r->stack_frames = rows_of(depth, sizeof *r->stack_frames);
    r->devices = rows_of(r->model->device_count, sizeof *r->devices);
    r->allocations = rows_of(r->model->alloc_count, sizeof *r->allocations);
    if (!r->events || !r->segments || !r->blocks || !r->frames || !r->stack_frames ||
        !r->devices || !r->allocations)
        return TDM_HOST_OUT_OF_MEMORY;
    make_events(r);
    make_state(r);
    make_frames(r);
    make_devices(r);
    make_allocations(r);
    return TDM_OK;
}

#define ACCESSOR(type, name, rows, n)                                                    \
    const type *name(const tdm_snapshot *snap, size_t *count)                            \
    {                                                                                    \
        size_t have = snap ? (n) : 0;                                                    \
        if (count)                                                                       \
            *count = have;                                                               \
        return have ? snap->rows : NULL;                                                 \
    }

ACCESSOR(tdm_snapshot_event, tdm_snapshot_events, events, snap->snap->event_count)
ACCESSOR(tdm_snapshot_segment, tdm_snapshot_segments, segments, snap->snap->segment_count)
ACCESSOR(tdm_snapshot_block, tdm_snapshot_blocks, blocks, snap->snap->block_count)
ACCESSOR(tdm_snapshot_frame, tdm_snapshot_frames, frames, snap->snap->frame_count)
ACCESSOR(tdm_snapshot_stack_frame, tdm_snapshot_stack_frames, stack_frames,
         snap->stack_frame_count)
ACCESSOR(tdm_snapshot_device, tdm_snapshot_devices, devices, snap->model->device_count)
ACCESSOR(tdm_snapshot_allocation, tdm_snapshot_allocations, allocations,
         snap->model->alloc_count)
