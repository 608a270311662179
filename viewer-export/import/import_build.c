/* viewer-export/import/import_build.c: the in-memory snapshot builder of
 * import_build.h.
 *
 * Invariants: `live` maps (device, address) to the index of the alloc
 * event of every allocation added and not yet freed; the event array only
 * grows.  A finished snapshot is one `owned` block (the tdm_snap sits at
 * its head) whose arrays and strings are separate mallocs listed in it,
 * so one free function releases everything.  No locks: one thread builds.
 */
#include "import_build.h"

#include <stdlib.h>
#include <string.h>

#include "snap_build.h"

/* The block behind a built snapshot.  `snap` must stay first: the public
 * pointer is &owned->snap. */
typedef struct owned {
    tdm_snap snap;
    tdm__str_pool strings; /* every string the snapshot points to */
} owned;

typedef struct live_slot {
    uint64_t addr;
    int32_t dev;
    uint32_t ev; /* UINT32_MAX = empty */
} live_slot;

struct tdm_ibuild {
    owned *o;
    size_t cap_events, cap_phases, cap_devices;
    uint32_t phase; /* in force */
    uint32_t step;  /* in force */
    live_slot *live;
    size_t live_mask, live_used;
    int failed;
};

#define EMPTY UINT32_MAX

static size_t home_of(const tdm_ibuild *b, uint64_t addr, int32_t dev)
{
    uint64_t x = addr ^ ((uint64_t)(uint32_t)dev << 48);
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return (size_t)x & b->live_mask;
}

/* The slot holding (addr, dev), or the empty slot where it would go. */
static size_t slot_of(const tdm_ibuild *b, uint64_t addr, int32_t dev)
{
    size_t i = home_of(b, addr, dev);
    while (b->live[i].ev != EMPTY &&
           (b->live[i].addr != addr || b->live[i].dev != dev))
        i = (i + 1) & b->live_mask;
    return i;
}

static int live_grow(tdm_ibuild *b)
{
    size_t old_n = b->live ? b->live_mask + 1 : 0;
    size_t n = old_n ? old_n * 2 : 1024;
    live_slot *old = b->live;
    live_slot *s = malloc(n * sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        s[i].ev = EMPTY;
    b->live = s;
    b->live_mask = n - 1;
    for (size_t i = 0; i < old_n; i++)
        if (old[i].ev != EMPTY)
            b->live[slot_of(b, old[i].addr, old[i].dev)] = old[i];
    free(old);
    return 0;
}

/* Empties slot i.  Backward-shift deletion keeps probe chains whole
 * without tombstones. */
static void live_del(tdm_ibuild *b, size_t i)
{
    b->live[i].ev = EMPTY;
    b->live_used--;
    size_t j = i;
    for (;;) {
        j = (j + 1) & b->live_mask;
        if (b->live[j].ev == EMPTY)
            return;
        size_t home = home_of(b, b->live[j].addr, b->live[j].dev);
        /* Slot j may stay if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        b->live[i] = b->live[j];
        b->live[j].ev = EMPTY;
        i = j;
    }
}

tdm_status tdm__ibuild_new(const char *vendor, const char *name,
                           const char *metadata, tdm_ibuild **out)
{
    *out = NULL;
    tdm_ibuild *b = calloc(1, sizeof *b);
    owned *o = calloc(1, sizeof *o);
    if (!b || !o || live_grow(b) != 0) {
        free(b ? b->live : NULL);
        free(b);
        free(o);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    b->o = o;
    tdm_snap *s = &o->snap;
    s->header.format_version = TDM_FORMAT_VERSION;
    s->header.pid = 0;
    s->header.rank = -1;
    s->header.local_rank = -1;
    s->header.record_mode = TDM_RECORD_ALL;
    s->header.context_mode = TDM_CONTEXT_NONE;
    s->header.stacks_mode = TDM_STACKS_NONE;
    s->header.tool_version = tdm__str_pool_keep(&o->strings, TDM_VERSION_STRING);
    s->header.host = tdm__str_pool_keep(&o->strings, "");
    s->header.config = tdm__str_pool_keep(&o->strings, "");
    s->header.command = tdm__str_pool_keep(&o->strings, "");
    s->header.metadata = tdm__str_pool_keep(&o->strings, metadata);
    s->header.alloc_mode = tdm__str_pool_keep(&o->strings, "observe");
    /* Devices are made at finish; keep their vendor and name here. */
    s->devices = calloc(1, sizeof *s->devices);
    if (s->devices) {
        s->devices[0].vendor = tdm__str_pool_keep(&o->strings, vendor);
        s->devices[0].name = tdm__str_pool_keep(&o->strings, name);
    }
    s->phase_names = malloc(8 * sizeof *s->phase_names);
    b->cap_phases = 8;
    if (s->phase_names) {
        s->phase_names[0] = tdm__str_pool_keep(&o->strings, "");
        s->phase_count = 1;
    }
    s->stacks = calloc(1, sizeof *s->stacks); /* stacks[0]: empty */
    s->stack_count = 1;
    if (!s->header.tool_version || !s->header.host || !s->header.config ||
        !s->header.command || !s->header.metadata || !s->header.alloc_mode ||
        !s->devices || !s->devices[0].vendor || !s->devices[0].name ||
        !s->phase_names || !s->phase_names[0] || !s->stacks) {
        tdm__ibuild_abort(b);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    *out = b;
    return TDM_OK;
}

void tdm__ibuild_abort(tdm_ibuild *b)
{
    if (!b)
        return;
    tdm__ibuild_snap_free(&b->o->snap);
    free(b->live);
    free(b);
}

void tdm__ibuild_snap_free(tdm_snap *snap)
{
    if (!snap)
        return;
    owned *o = (owned *)snap;
    tdm__str_pool_free(&o->strings);
    tdm__snap_free_arrays(snap);
    free(o);
}

uint32_t tdm__ibuild_phase_id(tdm_ibuild *b, const char *name)
{
    tdm_snap *s = &b->o->snap;
    for (size_t i = 1; i < s->phase_count; i++)
        if (strcmp(s->phase_names[i], name) == 0)
            return (uint32_t)i;
    if (tdm__grow_array(&s->phase_names, &b->cap_phases, s->phase_count + 1,
                        sizeof *s->phase_names) != 0)
        return 0;
    const char *copy = tdm__str_pool_keep(&b->o->strings, name);
    if (!copy)
        return 0;
    s->phase_names[s->phase_count] = copy;
    return (uint32_t)s->phase_count++;
}

tdm_status tdm__ibuild_event(tdm_ibuild *b, const tdm_event *ev)
{
    tdm_snap *s = &b->o->snap;
    if (s->event_count >= EMPTY - 1)
        return TDM_HOST_OUT_OF_MEMORY; /* live map holds 32-bit indices */
    if (tdm__grow_array(&s->events, &b->cap_events, s->event_count + 1,
                        sizeof *s->events) != 0)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_event *e = &s->events[s->event_count];
    *e = *ev;
    if (!e->phase)
        e->phase = b->phase;
    if (!e->step)
        e->step = b->step;

    if (e->action == TDM_ACTION_ALLOC) {
        if ((b->live_used + 1) * 2 > b->live_mask + 1 && live_grow(b) != 0)
            return TDM_HOST_OUT_OF_MEMORY;
        size_t i = slot_of(b, e->addr, e->device);
        if (b->live[i].ev == EMPTY)
            b->live_used++;
        b->live[i] = (live_slot){e->addr, e->device, (uint32_t)s->event_count};
    } else if (e->action == TDM_ACTION_FREE_COMPLETED) {
        size_t i = slot_of(b, e->addr, e->device);
        if (b->live[i].ev != EMPTY)
            live_del(b, i);
    }
    s->event_count++;
    return TDM_OK;
}

static tdm_status add(tdm_ibuild *b, uint64_t t, tdm_action act, int device,
                      uint64_t addr, uint64_t size, uint64_t stream,
                      uint8_t category)
{
    tdm_event ev = {.time_ns = t, .addr = addr, .size = size,
                    .requested = size, .stream = stream,
                    .device = (int16_t)device, .action = (uint8_t)act,
                    .category = category};
    return tdm__ibuild_event(b, &ev);
}

tdm_status tdm__ibuild_alloc(tdm_ibuild *b, uint64_t time_ns, int device,
                             uint64_t addr, uint64_t size, uint64_t stream,
                             uint8_t category)
{
    tdm_status st = add(b, time_ns, TDM_ACTION_SEGMENT_ALLOC, device, addr,
                        size, stream, 0);
    return st ? st : add(b, time_ns, TDM_ACTION_ALLOC, device, addr, size,
                         stream, category);
}

tdm_status tdm__ibuild_free(tdm_ibuild *b, uint64_t time_ns, int device,
                            uint64_t addr, uint64_t size, uint64_t stream)
{
    tdm_status st = add(b, time_ns, TDM_ACTION_FREE_REQUESTED, device, addr,
                        size, stream, 0);
    if (!st)
        st = add(b, time_ns, TDM_ACTION_FREE_COMPLETED, device, addr, size,
                 stream, 0);
    return st ? st : add(b, time_ns, TDM_ACTION_SEGMENT_FREE, device, addr,
                         size, stream, 0);
}

tdm_status tdm__ibuild_phase(tdm_ibuild *b, uint64_t time_ns, const char *name)
{
    uint32_t id = tdm__ibuild_phase_id(b, name);
    if (!id)
        return TDM_HOST_OUT_OF_MEMORY;
    b->phase = id;
    tdm_event ev = {.time_ns = time_ns, .phase = id, .device = -1,
                    .action = TDM_ACTION_PHASE};
    return tdm__ibuild_event(b, &ev);
}

tdm_status tdm__ibuild_step(tdm_ibuild *b, uint64_t time_ns)
{
    b->step++;
    tdm_event ev = {.time_ns = time_ns, .step = b->step, .device = -1,
                    .action = TDM_ACTION_STEP};
    return tdm__ibuild_event(b, &ev);
}

/* ---- finish: devices, final state, stats -------------------------------- */

static int cmp_live(const void *pa, const void *pb)
{
    const live_slot *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* a + b, held at INT64_MAX or INT64_MIN: an imported log may hold any
 * 64-bit sizes, and sums past the range must not overflow. */
static int64_t add_held(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static void stat_add(tdm_stat *st, int64_t d)
{
    st->current = add_held(st->current, d);
    if (d > 0)
        st->allocated = add_held(st->allocated, d);
    else
        st->freed = add_held(st->freed, d == INT64_MIN ? INT64_MAX : -d);
    if (st->current > st->peak)
        st->peak = st->current;
}

static tdm_snap_device_stats *stats_of(tdm_snap *s, int device)
{
    size_t row = tdm__snap_stats_index(s, device, TDM_STAT_POOL_ALL);
    return row < s->stats_count ? &s->stats[row] : NULL;
}

tdm_status tdm__ibuild_finish(tdm_ibuild *b, tdm_snap **out)
{
    *out = NULL;
    tdm_snap *s = &b->o->snap;
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    live_slot *live = NULL;
    size_t nlive = 0;

    /* Devices: every ordinal an event names, ascending. */
    uint8_t seen[32768 / 8] = {0};
    size_t ndev = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        int d = s->events[i].device;
        if (d >= 0 && !(seen[d / 8] & (1u << (d % 8)))) {
            seen[d / 8] |= (uint8_t)(1u << (d % 8));
            ndev++;
        }
    }
    if (ndev == 0)
        seen[0] = 1, ndev = 1; /* an empty history still has its device */
    tdm_snap_device proto = s->devices[0];
    tdm_snap_device *devs = calloc(ndev, sizeof *devs);
    s->stats = calloc(ndev, sizeof *s->stats);
    if (!devs || !s->stats) {
        free(devs);
        goto out;
    }
    free(s->devices);
    s->devices = devs;
    for (int d = 0; d < 32768; d++)
        if (seen[d / 8] & (1u << (d % 8))) {
            devs[s->device_count] = proto;
            devs[s->device_count].index = d;
            s->stats[s->device_count].device = d;
            s->stats[s->device_count].pool = TDM_STAT_POOL_ALL; /* no pools to import */
            s->stats[s->device_count].stats.size = sizeof(tdm_stats);
            s->device_count++;
        }
    s->stats_count = s->device_count;

    /* Stats: replay the events (observe mode: allocated = reserved). */
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        tdm_snap_device_stats *ds = stats_of(s, e->device);
        if (!ds)
            continue;
        tdm_stats *t = &ds->stats;
        int64_t n = e->size > INT64_MAX ? INT64_MAX : (int64_t)e->size;
        switch (e->action) {
        case TDM_ACTION_ALLOC:
            stat_add(&t->allocated_bytes, n);
            stat_add(&t->active_bytes, n);
            stat_add(&t->requested_bytes, n);
            stat_add(&t->allocation, 1);
            break;
        case TDM_ACTION_FREE_COMPLETED:
            stat_add(&t->allocated_bytes, -n);
            stat_add(&t->active_bytes, -n);
            stat_add(&t->requested_bytes, -n);
            stat_add(&t->allocation, -1);
            break;
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_MAP:
            stat_add(&t->reserved_bytes, n);
            stat_add(&t->segment, 1);
            break;
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_UNMAP:
            stat_add(&t->reserved_bytes, -n);
            stat_add(&t->segment, -1);
            break;
        case TDM_ACTION_OOM:
            t->num_ooms++;
            break;
        default:
            break;
        }
    }

    /* Final state: one segment per live allocation, in address order. */
    live = malloc((b->live_used ? b->live_used : 1) * sizeof *live);
    if (!live)
        goto out;
    for (size_t i = 0; i <= b->live_mask; i++)
        if (b->live[i].ev != EMPTY)
            live[nlive++] = b->live[i];
    qsort(live, nlive, sizeof *live, cmp_live);
    s->segments = calloc(nlive ? nlive : 1, sizeof *s->segments);
    s->blocks = calloc(nlive ? nlive : 1, sizeof *s->blocks);
    if (!s->segments || !s->blocks)
        goto out;
    for (size_t i = 0; i < nlive; i++) {
        const tdm_event *e = &s->events[live[i].ev];
        s->segments[i] = (tdm_snap_segment){
            .device = e->device, .pool = TDM_POOL_NONE, .address = e->addr,
            .total_size = e->size, .stream = e->stream,
            .first_block = (uint32_t)i, .block_count = 1};
        s->blocks[i] = (tdm_snap_block){
            .address = e->addr, .size = e->size, .requested_size = e->size,
            .alloc_time_ns = e->time_ns, .state = TDM_BLOCK_ACTIVE_ALLOCATED,
            .category = e->category};
    }
    s->segment_count = s->block_count = nlive;
    s->header.max_entries = s->event_count;
    if (s->event_count) {
        s->header.start_time_us = s->events[0].time_ns / 1000;
        s->header.dump_time_us = s->events[s->event_count - 1].time_ns / 1000;
    }
    s->complete = 1;
    st = TDM_OK;
out:
    free(live);
    free(b->live);
    if (st == TDM_OK)
        *out = s;
    else
        tdm__ibuild_snap_free(s);
    free(b);
    return st;
}
