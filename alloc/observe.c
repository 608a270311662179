/* alloc/observe.c: observe mode, the program's own vendor allocations.
 *
 * The vendor served the memory (a hook saw cudaMalloc, hipMalloc,
 * zeMemAllocDevice, cuMemMap, ...); tidemark only books it.  Owns: the
 * record of every live vendor allocation (`allocs`, address -> record)
 * and of every live virtual-memory mapping (`maps`, base -> record), the
 * per-device stats and descriptions of observed devices, and their part
 * of the snapshot state.
 *
 * Booking, as pass-through mode does it (docs/hooks.md):
 *   allocation  segment_alloc + alloc; one segment (pool none) holding one
 *               active block; reserved = allocated = active += size;
 *   free        free_requested + free_completed + segment_free; unknown
 *               pointers give TDM_UNKNOWN_POINTER and record nothing;
 *   failure     an oom event (addr = the device's free bytes), num_ooms;
 *   map/unmap   segment_map / segment_unmap; an expandable segment with one
 *               inactive block: reserved moves, allocated does not.
 *
 * Invariants: per device, reserved == allocated == active == sum of live
 * allocation sizes + (reserved only) sum of live mapping sizes; requested
 * == allocated; the allocation count == live allocations; the segment
 * count == live allocations + live mappings.  Sizes are what the vendor
 * was asked for (no rounding).
 *
 * Locks: the two pointer maps' shard locks and one mutex per device around
 * its stats and description; none is global and none is held while
 * another is taken (so each goes through the fork gate of ptrmap.h), and
 * the hot path of many threads meets only on the same shard or device.
 * init_lock guards the one-time setup.  Host memory
 * for the records comes from mmap (meta.h), never from the program's
 * malloc.
 */
#include <stdio.h> /* snprintf only, for device names */
#include <string.h>

#include "alloc_internal.h"
#include "recorder.h"

/* Devices -1 (the host, for pinned memory) to 63 have a slot each. */
#define OBS_SLOTS (TDM__OBS_MAX_DEVICE + 2)

/* A device's stats, as observe mode keeps them: the allocated, active and
 * requested rows are all `alloc_bytes` (an observed allocation is wholly
 * allocated, active and asked for), so the hot path updates four stats
 * rather than six rows (tdm__stats_acc is built when asked). */
typedef struct obs_counts {
    tdm_stat alloc_bytes; /* live allocations, bytes */
    tdm_stat allocs;      /* live allocations */
    tdm_stat reserved;    /* allocations + mappings, bytes */
    tdm_stat segments;    /* allocations + mappings */
    uint64_t num_ooms;
} obs_counts;

typedef struct obs_device {
    pthread_mutex_t lock;     /* counts and description */
    obs_counts counts;
    _Atomic int seen;         /* described, or something was booked on it */
    char vendor[16];          /* "cuda", "hip", "ze"; "unknown" if never said */
    char name[64];            /* as the vendor names the device */
    uint64_t capacity;        /* bytes; 0 when unknown */
} __attribute__((aligned(64))) obs_device;

static struct {
    pthread_mutex_t init_lock;
    _Atomic int ready;        /* maps and device locks exist */
    tdm__ptrmap allocs;       /* vendor allocation address -> record */
    tdm__ptrmap maps;         /* mapped range base -> record (block = NULL) */
    obs_device dev[OBS_SLOTS];/* [device + 1] */
} obs = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
};

static int slot_of(int device)
{
    return device >= -1 && device <= TDM__OBS_MAX_DEVICE ? device + 1 : -1;
}

static __attribute__((noinline)) void obs_init_slow(void)
{
    pthread_mutex_lock(&obs.init_lock);
    if (!atomic_load_explicit(&obs.ready, memory_order_relaxed)) {
        tdm__ptrmap_init(&obs.allocs);
        tdm__ptrmap_init(&obs.maps);
        for (int i = 0; i < OBS_SLOTS; i++) {
            memset(&obs.dev[i], 0, sizeof obs.dev[i]);
            pthread_mutex_init(&obs.dev[i].lock, NULL);
        }
        tdm__alloc_attach_recorder(1);
        atomic_store_explicit(&obs.ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&obs.init_lock);
}

static inline void obs_init(void)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        obs_init_slow();
}

/* The name of a device no hook has named. */
static void default_name(obs_device *d, int device)
{
    if (device < 0)
        strcpy(d->name, "host");
    else
        snprintf(d->name, sizeof d->name, "device %d", device);
}

/* Marks a device as seen; the first time, gives it a placeholder
 * description (a hook that knows more calls tdm__alloc_observe_device). */
static void mark_seen(obs_device *d, int device)
{
    if (atomic_load_explicit(&d->seen, memory_order_acquire))
        return;
    tdm__gate_lock(&d->lock);
    if (!atomic_load_explicit(&d->seen, memory_order_relaxed)) {
        strcpy(d->vendor, "unknown");
        default_name(d, device);
        atomic_store_explicit(&d->seen, 1, memory_order_release);
    }
    pthread_mutex_unlock(&d->lock);
}

void tdm__alloc_observe_device(int device, const char *vendor,
                               const char *name, uint64_t capacity)
{
    int s = slot_of(device);
    if (s < 0)
        return;
    obs_init();
    obs_device *d = &obs.dev[s];
    tdm__gate_lock(&d->lock);
    snprintf(d->vendor, sizeof d->vendor, "%s", vendor ? vendor : "unknown");
    if (name && *name)
        snprintf(d->name, sizeof d->name, "%s", name);
    else
        default_name(d, device);
    d->capacity = capacity;
    atomic_store_explicit(&d->seen, 1, memory_order_release);
    pthread_mutex_unlock(&d->lock);
}

void tdm__obs_use_device(int device)
{
    obs_init();
    mark_seen(&obs.dev[device + 1], device);
}

void tdm__obs_account_reserve(int device, int64_t bytes, int segments)
{
    obs_device *d = &obs.dev[device + 1];
    tdm__gate_lock(&d->lock);
    tdm__stat_one(&d->counts.reserved, bytes);
    if (segments)
        tdm__stat_one(&d->counts.segments, segments);
    pthread_mutex_unlock(&d->lock);
}

/* Books `sign` (+1 / -1) of one allocation or mapping in the stats. */
static void account(int device, uint64_t size, int is_map, int sign)
{
    obs_device *d = &obs.dev[device + 1];
    int64_t bytes = sign * (int64_t)size;
    tdm__gate_lock(&d->lock);
    tdm__stat_one(&d->counts.reserved, bytes);
    tdm__stat_one(&d->counts.segments, sign);
    if (!is_map) {
        tdm__stat_one(&d->counts.alloc_bytes, bytes);
        tdm__stat_one(&d->counts.allocs, sign);
    }
    pthread_mutex_unlock(&d->lock);
}

static uint32_t event_stack(uint32_t sid)
{
    return tdm__rec_events_carry_stacks() ? sid : 0;
}

/* The events of one allocation going away (free, or a stale record found
 * under an address the vendor hands out again). */
static void book_free(uint64_t addr, const tdm__ptr_rec *rec, tdm_stream stream,
                      uint32_t free_stack)
{
    tdm__rec_segment_free(addr, rec, stream ? stream : rec->stream, free_stack);
    account(rec->device, rec->size, 0, -1);
}

static void book_unmap(uint64_t addr, const tdm__ptr_rec *rec, uint32_t stack)
{
    if (tdm__rec_on())
        tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, rec->device, addr, rec->size,
                       rec->size, rec->stream,
                       event_stack(stack ? stack : rec->stack_id));
    account(rec->device, rec->size, 1, -1);
}

/* Inserts rec at key; an entry already there is a record whose end the
 * hooks never saw (freed through a path tidemark does not hook): it is
 * closed first, so the books stay balanced. */
static void insert_replacing(tdm__ptrmap *m, uint64_t key,
                             const tdm__ptr_rec *rec, int is_map)
{
    for (int tries = 0; tries < 4; tries++) {
        tdm_status st = tdm__ptrmap_insert(m, key, rec);
        if (st != TDM_INVALID_ARGUMENT) {
            if (st == TDM_OK)
                account(rec->device, rec->size, is_map, 1);
            /* TDM_HOST_OUT_OF_MEMORY: the allocation stays unbooked (its
             * free will be unknown); the program is not disturbed. */
            return;
        }
        tdm__ptr_rec stale;
        if (tdm__ptrmap_remove(m, key, &stale) == TDM_OK) {
            if (is_map)
                book_unmap(key, &stale, 0);
            else
                book_free(key, &stale, 0, 0);
        }
    }
}

/* The record of a new allocation or mapping on `device` (which has a
 * slot), with its stack and time when recording.  Always inlined into the
 * hooks' noinline entry points below, so that `skip + 1` still counts
 * exactly their own frame. */
static inline __attribute__((always_inline)) void
new_rec(tdm__ptr_rec *rec, int device, size_t size, tdm_stream stream,
        unsigned skip)
{
    obs_init();
    mark_seen(&obs.dev[device + 1], device);
    *rec = (tdm__ptr_rec){
        .size = size,
        .requested = size,
        .stream = stream,
        .device = (int16_t)device,
        .category = tdm__rec_current_category(),
    };
    if (tdm__rec_on()) {
        rec->stack_id = tdm__rec_alloc_stack(skip + 1);
        rec->alloc_time_ns = tdm__alloc_now_ns();
    }
}

__attribute__((noinline)) void
tdm__alloc_observe_alloc(int device, const void *ptr, size_t size,
                         tdm_stream stream, unsigned skip)
{
    if (ptr == NULL || slot_of(device) < 0)
        return;
    tdm__ptr_rec rec;
    new_rec(&rec, device, size, stream, skip);
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    insert_replacing(&obs.allocs, addr, &rec, 0);
    tdm__rec_segment_alloc(addr, &rec);
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
}

__attribute__((noinline)) tdm_status
tdm__alloc_observe_free(const void *ptr, tdm_stream stream, unsigned skip)
{
    if (ptr == NULL)
        return TDM_OK;
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    tdm__ptr_rec rec;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    tdm_status st = tdm__ptrmap_remove(&obs.allocs, addr, &rec);
    if (st != TDM_OK)
        return st;
    uint32_t free_stack = tdm__rec_on() ? tdm__rec_free_stack(skip + 1) : 0;
    book_free(addr, &rec, stream, free_stack);
    __asm__ volatile("" ::: "memory");
    return TDM_OK;
}

__attribute__((noinline)) void
tdm__alloc_observe_oom(int device, size_t size, size_t free_bytes,
                       tdm_stream stream, unsigned skip)
{
    int s = slot_of(device);
    if (s < 0)
        return;
    obs_init();
    obs_device *d = &obs.dev[s];
    mark_seen(d, device);
    uint32_t stack = tdm__rec_on() ? tdm__rec_alloc_stack(skip + 1) : 0;
    tdm__gate_lock(&d->lock);
    d->counts.num_ooms++;
    char name[64];
    memcpy(name, d->name, sizeof name);
    pthread_mutex_unlock(&d->lock);
    tdm__rec_event(TDM_ACTION_OOM, device, free_bytes, size, size, stream,
                   event_stack(stack));
    /* The largest live sites of this device, for the one-line report. */
    tdm__oom_sites *sites = tdm__oom_sites_begin();
    tdm__oom_sites_from_map(sites, &obs.allocs, device);
    tdm__oom_report(device, name, size, size, free_bytes, sites);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void
tdm__alloc_observe_map(int device, const void *va, size_t size, unsigned skip)
{
    if (va == NULL || slot_of(device) < 0)
        return;
    tdm__ptr_rec rec;
    new_rec(&rec, device, size, 0, skip);
    uint64_t addr = (uint64_t)(uintptr_t)va;
    insert_replacing(&obs.maps, addr, &rec, 1);
    if (tdm__rec_on())
        tdm__rec_event(TDM_ACTION_SEGMENT_MAP, device, addr, size, size, 0,
                       event_stack(rec.stack_id));
    __asm__ volatile("" ::: "memory");
}

/* Unmaps [va, va + size): every mapping that starts inside it, in order
 * from va (a range may have been mapped in several pieces).  A mapping
 * only partly covered keeps its tail booked as a mapping of its own. */
__attribute__((noinline)) tdm_status
tdm__alloc_observe_unmap(const void *va, size_t size, unsigned skip)
{
    if (va == NULL)
        return TDM_UNKNOWN_POINTER;
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    uint64_t at = (uint64_t)(uintptr_t)va;
    uint64_t end = size > UINT64_MAX - at ? UINT64_MAX : at + size;
    uint32_t stack = tdm__rec_on() ? tdm__rec_free_stack(skip + 1) : 0;
    int found = 0;
    while (at < end) {
        tdm__ptr_rec rec;
        if (tdm__ptrmap_remove(&obs.maps, at, &rec) != TDM_OK)
            break;
        found = 1;
        if (rec.size > end - at) {
            /* Partial unmap: the whole mapping goes and its tail comes
             * back under its own base (net: reserved -= size, the segment
             * count stays). */
            tdm__ptr_rec tail = rec;
            tail.size = rec.size - (end - at);
            tail.requested = tail.size;
            account(rec.device, rec.size, 1, -1);
            insert_replacing(&obs.maps, end, &tail, 1);
            if (tdm__rec_on())
                tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, rec.device, at,
                               end - at, end - at, 0,
                               event_stack(stack ? stack : rec.stack_id));
            break;
        }
        book_unmap(at, &rec, stack);
        if (rec.size == 0)
            break;
        at += rec.size;
    }
    __asm__ volatile("" ::: "memory");
    return found ? TDM_OK : TDM_UNKNOWN_POINTER;
}

/* ---- what alloc.c asks of observe mode ------------------------------------ */

int tdm__obs_has_device(int device)
{
    int s = slot_of(device);
    return s >= 0 && atomic_load_explicit(&obs.ready, memory_order_acquire) &&
           atomic_load_explicit(&obs.dev[s].seen, memory_order_acquire);
}

void tdm__obs_stats(int device, int pool, tdm_stats *out)
{
    obs_device *d = &obs.dev[device + 1];
    tdm__stats_acc a;
    memset(&a, 0, sizeof a);
    tdm__gate_lock(&d->lock);
    a.st[0][TDM__ST_ALLOCATED_BYTES] = d->counts.alloc_bytes;
    a.st[0][TDM__ST_ACTIVE_BYTES] = d->counts.alloc_bytes;
    a.st[0][TDM__ST_REQUESTED_BYTES] = d->counts.alloc_bytes;
    a.st[0][TDM__ST_RESERVED_BYTES] = d->counts.reserved;
    a.st[0][TDM__ST_ALLOCATION] = d->counts.allocs;
    a.st[0][TDM__ST_SEGMENT] = d->counts.segments;
    a.num_ooms = d->counts.num_ooms;
    pthread_mutex_unlock(&d->lock);
    tdm__stats_export(&a, pool, out);
}

void tdm__obs_reset_peaks(int device)
{
    obs_device *d = &obs.dev[device + 1];
    tdm__gate_lock(&d->lock);
    d->counts.alloc_bytes.peak = d->counts.alloc_bytes.current;
    d->counts.allocs.peak = d->counts.allocs.current;
    d->counts.reserved.peak = d->counts.reserved.current;
    d->counts.segments.peak = d->counts.segments.current;
    pthread_mutex_unlock(&d->lock);
}

tdm_status tdm__obs_tag(uint64_t addr, uint8_t category)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    return tdm__ptrmap_set_category(&obs.allocs, addr, category);
}

/* ---- state for the dump ----------------------------------------------------- */

void tdm__obs_visit(const tdm__state_visitor *v, const uint64_t *emitted)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return;
    tdm__live_list live = {0};
    /* Copy first, then call the visitor with no lock held. */
    tdm__live_collect(&live, &obs.allocs, 0);
    tdm__live_collect(&live, &obs.maps, 1);
    tdm__live_sort(&live);
    size_t i = 0;
    for (int s = 0; s < OBS_SLOTS; s++) {
        obs_device *d = &obs.dev[s];
        int device = s - 1;
        if (!atomic_load_explicit(&d->seen, memory_order_acquire))
            continue;
        int known = (emitted[s / 64] >> (s % 64)) & 1;
        if (!known && v->device) {
            char vendor[16], name[64];
            tdm_snap_device desc = {.index = device, .vendor = vendor,
                                    .name = name};
            tdm__gate_lock(&d->lock);
            memcpy(vendor, d->vendor, sizeof vendor);
            memcpy(name, d->name, sizeof name);
            desc.capacity = d->capacity;
            pthread_mutex_unlock(&d->lock);
            v->device(v->ctx, &desc);
        }
        while (i < live.n && live.items[i].rec.device < device)
            i++;
        for (; i < live.n && live.items[i].rec.device == device; i++)
            tdm__live_visit(v, &live.items[i]);
        tdm__obs_pool_visit(v, device);
        /* A device the allocator also has gets one stats record, the sum,
         * from alloc.c. */
        if (!known && v->stats) {
            tdm_stats st = {.size = sizeof st};
            tdm__obs_stats(device, 0, &st);
            v->stats(v->ctx, device, &st);
        }
    }
    tdm__live_free(&live);
    tdm__obs_import_visit(v);
}

/* ---- fork and tests ------------------------------------------------------------ */

/* Fork, in the order of alloc.c's handlers: the init lock is held across
 * fork(); every other lock of observe mode is taken with no other one held,
 * so it goes through the fork gate and is only swept (ptrmap.h). */
void tdm__obs_fork_lock(void)
{
    pthread_mutex_lock(&obs.init_lock);
}

void tdm__obs_fork_sweep(void)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_relaxed))
        return;
    tdm__ptrmap_fork_sweep(&obs.allocs);
    tdm__ptrmap_fork_sweep(&obs.maps);
    tdm__obs_import_fork(0);
    for (int i = 0; i < OBS_SLOTS; i++) {
        pthread_mutex_lock(&obs.dev[i].lock);
        pthread_mutex_unlock(&obs.dev[i].lock);
    }
}

void tdm__obs_fork_unlock(void)
{
    pthread_mutex_unlock(&obs.init_lock);
}

/* The child: the gated locks made anew (a thread that was waiting for one
 * may have got it just before fork(): ptrmap.h), then the init lock. */
void tdm__obs_fork_child(void)
{
    if (atomic_load_explicit(&obs.ready, memory_order_relaxed)) {
        tdm__ptrmap_fork_child(&obs.allocs);
        tdm__ptrmap_fork_child(&obs.maps);
        tdm__obs_import_fork(1);
        for (int i = 0; i < OBS_SLOTS; i++)
            pthread_mutex_init(&obs.dev[i].lock, NULL);
    }
    pthread_mutex_unlock(&obs.init_lock);
}

/* The child alone runs this (its fork handler): no lock is needed. */
void tdm__obs_forget(void)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return;
    tdm__ptrmap_clear(&obs.allocs);
    tdm__ptrmap_clear(&obs.maps);
    tdm__obs_pool_forget();
    tdm__obs_import_forget();
    for (int i = 0; i < OBS_SLOTS; i++)
        memset(&obs.dev[i].counts, 0, sizeof obs.dev[i].counts);
}

void tdm__obs_reset_for_tests(void)
{
    pthread_mutex_lock(&obs.init_lock);
    if (atomic_load_explicit(&obs.ready, memory_order_relaxed)) {
        tdm__ptrmap_clear(&obs.allocs);
        tdm__ptrmap_clear(&obs.maps);
        tdm__obs_pool_forget();
        tdm__obs_import_forget();
        for (int i = 0; i < OBS_SLOTS; i++) {
            pthread_mutex_lock(&obs.dev[i].lock);
            memset(&obs.dev[i].counts, 0, sizeof obs.dev[i].counts);
            atomic_store(&obs.dev[i].seen, 0);
            obs.dev[i].capacity = 0;
            pthread_mutex_unlock(&obs.dev[i].lock);
        }
    }
    pthread_mutex_unlock(&obs.init_lock);
}

void tdm__alloc_observe_graph_capture(void)
{
    tdm__rec_note(TDM__NOTE_GRAPH_MEMORY);
}

void tdm__alloc_observe_refresh_at_dump(void (*fn)(void))
{
    tdm__rec_add_refresh(fn);
}
