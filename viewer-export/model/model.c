/* viewer-export/model/model.c: builds the analysis model (model.h) from a
 * snapshot in one pass over its events plus one over its final state.
 *
 * Invariants: every allocation the model knows is either open (in the
 * address map, free_seq == TDM_MODEL_SEQ_NEVER) or closed (free_seq set);
 * the address map holds exactly the open allocations seen in the events
 * and not yet matched against the final state.  During the replay the
 * timeline is kept relative to the (not yet known) baseline; the baseline
 * is added once all seeds are known, so the replay never needs a second
 * pass over the events.  Cost: O(events + blocks) expected, memory
 * O(allocations + samples).
 *
 * No locks: the model is built by one thread and then only read.
 */
#include "model.h"
#include "snap_build.h" /* tdm__grow_array */
#include "stack_display.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- open-address map: (device, address) -> index ---------------------- */

#define AMAP_EMPTY UINT32_MAX

typedef struct amap_slot {
    uint64_t key;  /* address (or stack id for the site map) */
    int32_t dev;   /* device ordinal (or, for the site map, "a free's stack") */
    uint32_t val;  /* AMAP_EMPTY when the slot is free */
} amap_slot;

typedef struct amap {
    amap_slot *slots;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t used;
} amap;

/* Byte counts, added modulo 2**64: a hostile file may hold sizes near
 * 2**64, whose sums must not overflow (undefined in signed arithmetic);
 * its figures are then meaningless but defined.  Real sizes never come
 * near. */
static int64_t wadd(int64_t a, uint64_t b)
{
    return (int64_t)((uint64_t)a + b);
}

static int64_t wsub(int64_t a, uint64_t b)
{
    return (int64_t)((uint64_t)a - b);
}

static uint64_t amap_hash(uint64_t key, int32_t dev)
{
    /* splitmix64's finalizer: addresses share their low and high bits, so
     * they need a full mix before masking. */
    uint64_t x = key ^ ((uint64_t)(uint32_t)dev * 0x9E3779B97F4A7C15ull);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

static int amap_init(amap *m, size_t capacity)
{
    size_t cap = 16;
    while (cap < capacity * 2)
        cap <<= 1;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->slots[i].val = AMAP_EMPTY;
    m->mask = cap - 1;
    m->used = 0;
    return 0;
}

static void amap_destroy(amap *m)
{
    free(m->slots);
    m->slots = NULL;
}

/* The slot holding (key, dev), or the empty slot where it would go. */
static size_t amap_find(const amap *m, uint64_t key, int32_t dev)
{
    size_t i = amap_hash(key, dev) & m->mask;
    while (m->slots[i].val != AMAP_EMPTY &&
           (m->slots[i].key != key || m->slots[i].dev != dev))
        i = (i + 1) & m->mask;
    return i;
}

static uint32_t amap_get(const amap *m, uint64_t key, int32_t dev)
{
    return m->slots[amap_find(m, key, dev)].val;
}

static int amap_grow(amap *m)
{
    amap old = *m;
    if (amap_init(m, (old.mask + 1)) != 0) { /* doubles: init sizes 2x */
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++) {
        if (old.slots[i].val == AMAP_EMPTY)
            continue;
        m->slots[amap_find(m, old.slots[i].key, old.slots[i].dev)] = old.slots[i];
        m->used++;
    }
    free(old.slots);
    return 0;
}

/* Inserts or overwrites. */
static int amap_put(amap *m, uint64_t key, int32_t dev, uint32_t val)
{
    if ((m->used + 1) * 2 > m->mask + 1 && amap_grow(m) != 0)
        return -1;
    size_t i = amap_find(m, key, dev);
    if (m->slots[i].val == AMAP_EMPTY)
        m->used++;
    m->slots[i].key = key;
    m->slots[i].dev = dev;
    m->slots[i].val = val;
    return 0;
}

/* Removes (key, dev) if present.  Backward-shift deletion keeps probe
 * chains intact without tombstones, so a long replay with millions of
 * alloc/free pairs never degrades the map. */
static void amap_del(amap *m, uint64_t key, int32_t dev)
{
    size_t i = amap_find(m, key, dev);
    if (m->slots[i].val == AMAP_EMPTY)
        return;
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->slots[j].val == AMAP_EMPTY)
            break;
        size_t home = amap_hash(m->slots[j].key, m->slots[j].dev) & m->mask;
        /* Slot j may stay if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i].val = AMAP_EMPTY;
    m->used--;
}

/* ---- build state ------------------------------------------------------- */

typedef struct dev_work {
    size_t sample_cap;
    int64_t alloc_rel;     /* allocated bytes relative to the baseline */
    int64_t reserved_rel;  /* reserved bytes relative to the baseline */
    int64_t reserved_min;  /* lowest reserved_rel seen (<= 0) */
    int64_t seeded_bytes;  /* sum of seeded allocations: the baseline */
    int64_t final_reserved;
    int saw_segment_event;
} dev_work;

typedef struct builder {
    const tdm_snap *snap;
    tdm_model *m;
    dev_work *work;
    size_t dev_cap;  /* room in m->devices */
    size_t work_cap; /* room in work: grown beside m->devices */
    size_t alloc_cap;
    amap open; /* (device, addr) -> index of the open allocation */
    int last_ordinal;
    int last_index;
} builder;

static int add_sample(builder *b, size_t d, int64_t seq, uint64_t time_ns)
{
    tdm_model_device *dev = &b->m->devices[d];
    dev_work *w = &b->work[d];
    if (tdm__grow_array(&dev->samples, &w->sample_cap, dev->sample_count + 1,
                        sizeof *dev->samples) != 0)
        return -1;
    tdm_model_sample *s = &dev->samples[dev->sample_count++];
    s->seq = seq;
    s->time_ns = time_ns;
    s->allocated = w->alloc_rel;
    s->reserved = w->reserved_rel;
    return 0;
}

static int add_device(builder *b, int32_t ordinal, const char *vendor,
                      const char *name, uint64_t capacity)
{
    tdm_model *m = b->m;
    if (tdm__grow_array(&m->devices, &b->dev_cap, m->device_count + 1, sizeof *m->devices) != 0 ||
        tdm__grow_array(&b->work, &b->work_cap, m->device_count + 1, sizeof *b->work) != 0)
        return -1;
    size_t i = m->device_count++;
    memset(&m->devices[i], 0, sizeof m->devices[i]);
    memset(&b->work[i], 0, sizeof b->work[i]);
    m->devices[i].ordinal = ordinal;
    m->devices[i].vendor = vendor ? vendor : "?";
    m->devices[i].name = name ? name : "";
    m->devices[i].capacity = capacity;
    m->devices[i].peak_seq = -1;
    return add_sample(b, i, -1, m->window_start_ns);
}

/* The device index of `ordinal`, adding an unlisted device on first use;
 * -1 on allocation failure. */
static int device_of(builder *b, int ordinal)
{
    if (ordinal == b->last_ordinal && b->last_index >= 0)
        return b->last_index;
    int i = tdm__model_device_index(b->m, ordinal);
    if (i < 0) {
        if (add_device(b, ordinal, NULL, NULL, 0) != 0)
            return -1;
        i = (int)b->m->device_count - 1;
    }
    b->last_ordinal = ordinal;
    b->last_index = i;
    return i;
}

static int64_t new_alloc(builder *b)
{
    tdm_model *m = b->m;
    if (m->alloc_count >= AMAP_EMPTY - 1)
        return -1;
    if (tdm__grow_array(&m->allocs, &b->alloc_cap, m->alloc_count + 1, sizeof *m->allocs) != 0)
        return -1;
    tdm_model_alloc *a = &m->allocs[m->alloc_count];
    memset(a, 0, sizeof *a);
    a->free_seq = TDM_MODEL_SEQ_NEVER;
    a->free_req_seq = TDM_MODEL_SEQ_NEVER;
    return (int64_t)m->alloc_count++;
}

/* ---- pass 1: the events ------------------------------------------------ */

static int replay_event(builder *b, size_t i)
{
    const tdm_event *ev = &b->snap->events[i];
    int changed = 0;
    int d;

    switch (ev->action) {
    case TDM_ACTION_ALLOC:
    case TDM_ACTION_FREE_REQUESTED:
    case TDM_ACTION_FREE_COMPLETED:
    case TDM_ACTION_SEGMENT_ALLOC:
    case TDM_ACTION_SEGMENT_FREE:
    case TDM_ACTION_SEGMENT_MAP:
    case TDM_ACTION_SEGMENT_UNMAP:
    case TDM_ACTION_OOM:
    case TDM_ACTION_TAG:
        break;
    default:
        return 0; /* phase, step, snapshot marks: no memory change */
    }
    if ((d = device_of(b, ev->device)) < 0)
        return -1;
    tdm_model_device *dev = &b->m->devices[d];
    dev_work *w = &b->work[d];
    uint32_t open = amap_get(&b->open, ev->addr, ev->device);
    tdm_model_alloc *a;
    int64_t k;

    switch (ev->action) {
    case TDM_ACTION_ALLOC:
        dev->alloc_events++;
        if (open != AMAP_EMPTY) {
            /* The address is handed out again before we saw it freed:
             * trust the newer event and close the old allocation here. */
            a = &b->m->allocs[open];
            a->free_seq = (int64_t)i;
            a->flags |= TDM_MODEL_REPLACED;
            w->alloc_rel = wsub(w->alloc_rel, a->size);
            dev->anomalies++;
        }
        if ((k = new_alloc(b)) < 0)
            return -1;
        a = &b->m->allocs[k];
        a->addr = ev->addr;
        a->size = ev->size;
        a->alloc_time_ns = ev->time_ns;
        a->alloc_seq = (int64_t)i;
        a->stack_id = ev->stack_id;
        a->device_index = (uint32_t)d;
        a->category = ev->category;
        if (amap_put(&b->open, ev->addr, ev->device, (uint32_t)k) != 0)
            return -1;
        w->alloc_rel = wadd(w->alloc_rel, ev->size);
        changed = 1;
        break;
    case TDM_ACTION_FREE_REQUESTED:
        /* Still allocated until free_completed. */
        if (open != AMAP_EMPTY) {
            a = &b->m->allocs[open];
            a->flags |= TDM_MODEL_FREE_REQUESTED;
            if (a->free_req_seq == TDM_MODEL_SEQ_NEVER)
                a->free_req_seq = (int64_t)i;
        }
        break;
    case TDM_ACTION_FREE_COMPLETED:
        dev->free_events++;
        if (open != AMAP_EMPTY) {
            a = &b->m->allocs[open];
            a->free_seq = (int64_t)i;
            w->alloc_rel = wsub(w->alloc_rel, a->size);
            amap_del(&b->open, ev->addr, ev->device);
        } else {
            /* Its alloc is older than the window: seed it at the start. */
            if ((k = new_alloc(b)) < 0)
                return -1;
            a = &b->m->allocs[k];
            a->addr = ev->addr;
            a->size = ev->size;
            a->alloc_seq = -1;
            a->free_seq = (int64_t)i;
            /* With context=all a free event carries the free's own stack,
             * not the allocation's, which the file then holds nowhere: the
             * seed is named by its free, and flagged so (model.h). */
            a->stack_id = ev->stack_id;
            a->device_index = (uint32_t)d;
            a->category = ev->category;
            a->flags = TDM_MODEL_SEEDED_FROM_FREE | TDM_MODEL_FREE_REQUESTED;
            if (ev->stack_id && b->snap->header.context_mode == TDM_CONTEXT_ALL)
                a->flags |= TDM_MODEL_STACK_OF_FREE;
            w->seeded_bytes = wadd(w->seeded_bytes, ev->size);
            dev->seeded_from_free++;
            w->alloc_rel = wsub(w->alloc_rel, ev->size);
        }
        changed = 1;
        break;
    case TDM_ACTION_SEGMENT_ALLOC:
    case TDM_ACTION_SEGMENT_MAP:
        w->saw_segment_event = 1;
        w->reserved_rel = wadd(w->reserved_rel, ev->size);
        changed = 1;
        break;
    case TDM_ACTION_SEGMENT_FREE:
    case TDM_ACTION_SEGMENT_UNMAP:
        w->saw_segment_event = 1;
        w->reserved_rel = wsub(w->reserved_rel, ev->size);
        if (w->reserved_rel < w->reserved_min)
            w->reserved_min = w->reserved_rel;
        changed = 1;
        break;
    case TDM_ACTION_OOM:
        dev->oom_events++;
        break;
    case TDM_ACTION_TAG:
        if (open != AMAP_EMPTY)
            b->m->allocs[open].category = ev->category;
        break;
    default:
        break;
    }
    if (changed && add_sample(b, (size_t)d, (int64_t)i, ev->time_ns) != 0)
        return -1;
    return 0;
}

/* ---- pass 2: the final allocator state --------------------------------- */

static int reconcile_state(builder *b)
{
    const tdm_snap *s = b->snap;
    for (size_t si = 0; si < s->segment_count; si++) {
        const tdm_snap_segment *seg = &s->segments[si];
        int d = device_of(b, seg->device);
        if (d < 0)
            return -1;
        tdm_model_device *dev = &b->m->devices[d];
        dev_work *w = &b->work[d];
        w->final_reserved = wadd(w->final_reserved, seg->total_size);
        /* A reader hands us what the file said: never index past it. */
        size_t first = seg->first_block;
        size_t end = first + seg->block_count;
        if (first > s->block_count)
            first = s->block_count;
        if (end > s->block_count || end < first)
            end = s->block_count;
        for (size_t bi = first; bi < end; bi++) {
            const tdm_snap_block *blk = &s->blocks[bi];
            if (blk->state != TDM_BLOCK_ACTIVE_ALLOCATED &&
                blk->state != TDM_BLOCK_ACTIVE_PENDING_FREE)
                continue;
            uint64_t req = blk->requested_size ? blk->requested_size : blk->size;
            dev->end_blocks++;
            dev->end_allocated = wadd(dev->end_allocated, req);
            dev->end_rounded += blk->size;
            uint32_t open = amap_get(&b->open, blk->address, seg->device);
            tdm_model_alloc *a;
            if (open != AMAP_EMPTY) {
                a = &b->m->allocs[open];
                a->flags |= TDM_MODEL_LIVE_AT_END;
                /* With context=state the events carry no stacks but the
                 * blocks do; fill in what the events lacked. */
                if (!a->stack_id)
                    a->stack_id = blk->stack_id;
                if (!a->category)
                    a->category = blk->category;
                amap_del(&b->open, blk->address, seg->device);
            } else {
                int64_t k = new_alloc(b);
                if (k < 0)
                    return -1;
                a = &b->m->allocs[k];
                a->addr = blk->address;
                a->size = req;
                a->alloc_time_ns = blk->alloc_time_ns;
                a->alloc_seq = -1;
                a->stack_id = blk->stack_id;
                a->device_index = (uint32_t)d;
                a->category = blk->category;
                a->flags = TDM_MODEL_SEEDED_FROM_STATE | TDM_MODEL_LIVE_AT_END;
                w->seeded_bytes = wadd(w->seeded_bytes, req);
                dev->seeded_from_state++;
            }
            if (blk->state == TDM_BLOCK_ACTIVE_PENDING_FREE) {
                a->flags |= TDM_MODEL_FREE_REQUESTED;
                if (a->free_req_seq == TDM_MODEL_SEQ_NEVER)
                    a->free_req_seq = a->alloc_seq;
            }
        }
    }
    /* Whatever is still open was allocated in the window, never freed, yet
     * is not in the final state: the history and the state disagree. */
    for (size_t i = 0; i <= b->open.mask; i++) {
        uint32_t v = b->open.slots[i].val;
        if (v != AMAP_EMPTY)
            b->m->devices[b->m->allocs[v].device_index].anomalies++;
    }
    return 0;
}

/* ---- pass 3: baselines, peaks, end values ------------------------------ */

static void finish_device(builder *b, size_t d)
{
    const tdm_snap *s = b->snap;
    tdm_model_device *dev = &b->m->devices[d];
    dev_work *w = &b->work[d];
    tdm_model_sample *last = &dev->samples[dev->sample_count - 1];

    int64_t alloc_base = w->seeded_bytes;
    int64_t reserved_base = wsub(0, (uint64_t)w->reserved_min);
    if (b->m->state_known) {
        /* End where the final segments say, unless that would need a
         * negative start: then the history and the state disagree. */
        int64_t want = wsub(w->final_reserved, (uint64_t)last->reserved);
        if (want >= reserved_base)
            reserved_base = want;
        else
            dev->anomalies++;
    }
    dev->reserved_known = w->saw_segment_event || b->m->state_known;

    size_t peak = 0;
    int64_t peak_reserved = INT64_MIN;
    for (size_t i = 0; i < dev->sample_count; i++) {
        tdm_model_sample *p = &dev->samples[i];
        p->allocated = wadd(p->allocated, (uint64_t)alloc_base);
        p->reserved = wadd(p->reserved, (uint64_t)reserved_base);
        if (p->allocated > dev->samples[peak].allocated)
            peak = i;
        if (p->reserved > peak_reserved)
            peak_reserved = p->reserved;
    }
    dev->peak_sample = peak;
    dev->peak_allocated = dev->samples[peak].allocated;
    dev->peak_seq = dev->samples[peak].seq;
    dev->reserved_at_peak = dev->samples[peak].reserved;
    dev->peak_reserved = peak_reserved;
    /* The peak's step and phase: those in force at its event (or, for a
     * peak at the window start, at the first event). */
    if (s->event_count) {
        const tdm_event *ev = &s->events[dev->peak_seq < 0 ? 0 : dev->peak_seq];
        dev->peak_time_ns = ev->time_ns;
        dev->peak_step = ev->step;
        dev->peak_phase = ev->phase;
    }

    if (b->m->state_known) {
        dev->end_source = TDM_MODEL_END_FROM_STATE;
        dev->end_reserved = w->final_reserved;
    } else {
        dev->end_source = TDM_MODEL_END_FROM_REPLAY;
        dev->end_allocated = last->allocated;
        dev->end_reserved = last->reserved;
        dev->end_blocks = 0;
        for (size_t i = 0; i < b->m->alloc_count; i++)
            if (b->m->allocs[i].device_index == d &&
                b->m->allocs[i].free_seq == TDM_MODEL_SEQ_NEVER)
                dev->end_blocks++;
    }
    /* The device's all-pool row; small/large pool rows (cache mode) are
     * shares of it, not the device's figures. */
    size_t row = tdm__snap_stats_index(s, dev->ordinal, TDM_STAT_POOL_ALL);
    if (row < s->stats_count)
        dev->stats = &s->stats[row].stats;
}

void tdm__model_free(tdm_model *model)
{
    if (!model)
        return;
    for (size_t i = 0; i < model->device_count; i++)
        free(model->devices[i].samples);
    free(model->devices);
    free(model->allocs);
    free(model);
}

tdm_status tdm__model_build(const tdm_snap *snap, tdm_model **out)
{
    *out = NULL;
    if (!snap)
        return TDM_INVALID_ARGUMENT;
    builder b = {.snap = snap, .last_ordinal = -1, .last_index = -1};
    tdm_model *m = calloc(1, sizeof *m);
    if (!m)
        return TDM_HOST_OUT_OF_MEMORY;
    b.m = m;
    m->snap = snap;
    /* The state record comes after the events and before the stats; any
     * of them, or the end record, shows it was read. */
    m->state_known = snap->complete || snap->segment_count > 0 ||
                     snap->stats_count > 0;
    if (snap->event_count) {
        m->window_start_ns = snap->events[0].time_ns;
        m->window_end_ns = snap->events[snap->event_count - 1].time_ns;
    }
    if (amap_init(&b.open, 1024) != 0)
        goto oom;
    for (size_t i = 0; i < snap->device_count; i++)
        if (add_device(&b, snap->devices[i].index, snap->devices[i].vendor,
                       snap->devices[i].name, snap->devices[i].capacity) != 0)
            goto oom;
    for (size_t i = 0; i < snap->event_count; i++)
        if (replay_event(&b, i) != 0)
            goto oom;
    if (m->state_known && reconcile_state(&b) != 0)
        goto oom;
    for (size_t d = 0; d < m->device_count; d++)
        finish_device(&b, d);
    amap_destroy(&b.open);
    free(b.work);
    *out = m;
    return TDM_OK;
oom:
    amap_destroy(&b.open);
    free(b.work);
    tdm__model_free(m);
    return TDM_HOST_OUT_OF_MEMORY;
}

/* ---- queries ----------------------------------------------------------- */

int tdm__model_device_index(const tdm_model *model, int ordinal)
{
    for (size_t i = 0; i < model->device_count; i++)
        if (model->devices[i].ordinal == ordinal)
            return (int)i;
    return -1;
}

const char *tdm__model_device_label(const tdm_model_device *dev)
{
    if (dev->name && dev->name[0])
        return dev->name;
    if (dev->vendor && dev->vendor[0] && strcmp(dev->vendor, "?") != 0)
        return dev->vendor;
    return "unnamed";
}

static int origin_is_start(const tdm_model *model)
{
    uint64_t start_us = model->snap->header.start_time_us;
    return tdm__model_start_known(start_us) &&
           (!model->snap->event_count || start_us * 1000u <= model->window_start_ns);
}

uint64_t tdm__model_time_origin_ns(const tdm_model *model)
{
    return origin_is_start(model) ? model->snap->header.start_time_us * 1000u
                                  : model->window_start_ns;
}

const char *tdm__model_time_origin_name(const tdm_model *model)
{
    return origin_is_start(model) ? "the recording's start" : "the first event";
}

int64_t tdm__model_end_seq(const tdm_model *model)
{
    return (int64_t)model->snap->event_count - 1;
}

int64_t tdm__model_first_oom(const tdm_model *model, size_t di)
{
    if (di >= model->device_count || !model->devices[di].oom_events)
        return -1;
    int ordinal = model->devices[di].ordinal;
    for (size_t i = 0; i < model->snap->event_count; i++) {
        const tdm_event *e = &model->snap->events[i];
        if (e->action == TDM_ACTION_OOM && e->device == ordinal)
            return (int64_t)i;
    }
    return -1;
}

int64_t tdm__model_seq_at_time(const tdm_model *model, uint64_t time_ns)
{
    const tdm_event *ev = model->snap->events;
    size_t lo = 0, hi = model->snap->event_count; /* first with time > t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ev[mid].time_ns <= time_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int64_t)lo - 1;
}

const tdm_model_sample *tdm__model_sample_at(const tdm_model_device *dev,
                                             int64_t seq)
{
    size_t lo = 0, hi = dev->sample_count; /* first sample with seq > seq */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (dev->samples[mid].seq <= seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &dev->samples[lo ? lo - 1 : 0];
}

tdm_status tdm__model_live_at(const tdm_model *model, size_t dev, int64_t seq,
                              size_t **idx, size_t *count)
{
    size_t n = 0, cap = 64;
    size_t *out = malloc(cap * sizeof *out);
    *idx = NULL;
    *count = 0;
    if (!out)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < model->alloc_count; i++) {
        const tdm_model_alloc *a = &model->allocs[i];
        if (a->device_index != dev || !tdm__model_alloc_live_at(a, seq))
            continue;
        if (tdm__grow_array(&out, &cap, n + 1, sizeof *out) != 0) {
            free(out);
            return TDM_HOST_OUT_OF_MEMORY;
        }
        out[n++] = i;
    }
    *idx = out;
    *count = n;
    return TDM_OK;
}

static int site_cmp(const void *pa, const void *pb)
{
    const tdm_model_site *a = pa, *b = pb;
    if (a->live_bytes != b->live_bytes)
        return a->live_bytes > b->live_bytes ? -1 : 1;
    if (a->live_count != b->live_count)
        return a->live_count > b->live_count ? -1 : 1;
    if (a->total_bytes != b->total_bytes)
        return a->total_bytes > b->total_bytes ? -1 : 1;
    if (a->stack_id != b->stack_id)
        return a->stack_id < b->stack_id ? -1 : 1;
    return a->stack_of_free - b->stack_of_free;
}

tdm_status tdm__model_sites_at(const tdm_model *model, size_t dev, int64_t seq,
                               tdm_model_site **sites, size_t *count)
{
    amap by_stack;
    size_t n = 0, cap = 64;
    tdm_model_site *out = malloc(cap * sizeof *out);
    *sites = NULL;
    *count = 0;
    if (!out || amap_init(&by_stack, 256) != 0) {
        free(out);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < model->alloc_count; i++) {
        const tdm_model_alloc *a = &model->allocs[i];
        if (a->device_index != dev || !tdm__stack_display_focused(model->snap, a->stack_id))
            continue;
        /* A free's stack is a site apart from the same stack allocating. */
        int of_free = (a->flags & TDM_MODEL_STACK_OF_FREE) != 0;
        uint32_t site = tdm__stack_display_site(model->snap, a->stack_id);
        uint32_t k = amap_get(&by_stack, site, of_free);
        if (k == AMAP_EMPTY) {
            if (tdm__grow_array(&out, &cap, n + 1, sizeof *out) != 0)
                goto oom;
            k = (uint32_t)n++;
            memset(&out[k], 0, sizeof out[k]);
            out[k].stack_id = site;
            out[k].stack_of_free = of_free;
            if (amap_put(&by_stack, site, of_free, k) != 0)
                goto oom;
        }
        out[k].total_bytes += a->size;
        out[k].total_count++;
        if (tdm__model_alloc_live_at(a, seq)) {
            out[k].live_bytes += a->size;
            out[k].live_count++;
        }
    }
    amap_destroy(&by_stack);
    qsort(out, n, sizeof *out, site_cmp);
    *sites = out;
    *count = n;
    return TDM_OK;
oom:
    amap_destroy(&by_stack);
    free(out);
    return TDM_HOST_OUT_OF_MEMORY;
}

const char *tdm__model_phase_name(const tdm_model *model, uint32_t phase,
                                  char *buf, size_t len)
{
    if (phase == 0)
        return "";
    if (phase < model->snap->phase_count && model->snap->phase_names[phase])
        return model->snap->phase_names[phase];
    snprintf(buf, len, "#%u", phase);
    return buf;
}
