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
 * Locks: one lock (lock.h) per device around its stats, its description, the
 * insertion and removal of its records in the maps, and the events that
 * book them, so that a dump copies the three at one instant (the maps'
 * shard locks are taken inside it); none is global, and the hot path of
 * many threads meets only on the same device or shard.  init_lock guards
 * the one-time setup and the set of devices seen: a device's lock is only
 * taken once it is seen, so the fork handlers and the dump's cut hold
 * init_lock and then the locks of the devices seen, in index order, and
 * no other (two device locks are only ever nested in that order).  Host
 * memory for the records comes from mmap (meta.h), never from the
 * program's malloc.
 */
#include <stdio.h> /* snprintf only, for device names */
#include <string.h>

#include "alloc_internal.h"
#include "meta.h"
#include "recorder.h"

/* Devices -1 (the host, for pinned memory) to 63 have a slot each. */
#define OBS_SLOTS (TDM__OBS_MAX_DEVICE + 2)

/* The booking steps of a hooked call, inlined into the hooks' entry
 * points below: a call level costs an observed call ~10 instructions of
 * its ~24 ns (bench/hook_overhead). */
#define HOT_INLINE inline __attribute__((always_inline))

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
    tdm__lock lock;           /* counts, description, its records' changes */
    obs_counts counts;
    _Atomic int seen;         /* described, or something was booked on it;
                               * set under init_lock */
    tdm_vendor vendor;        /* TDM_VENDOR_UNKNOWN if never said */
    char name[64];            /* as the vendor names the device */
    uint64_t capacity;        /* bytes; 0 when unknown */
} __attribute__((aligned(64))) obs_device;

static struct {
    pthread_mutex_t init_lock; /* setup, and the devices seen */
    _Atomic int ready;        /* maps and device locks exist */
    _Atomic int seen_count;   /* devices seen */
    _Atomic int first_seen;   /* the first of them (the only one, often) */
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
            tdm__lock_init(&obs.dev[i].lock);
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

static inline obs_device *dev_of(int device)
{
    return &obs.dev[device + 1];
}

/* Marks a device as seen, init_lock held; the first time, gives it a
 * placeholder description (a hook that knows more calls
 * tdm__alloc_observe_device).  first_seen is stored before the count
 * that makes readers trust it. */
static void see_locked(obs_device *d, int device)
{
    if (atomic_load_explicit(&d->seen, memory_order_relaxed))
        return;
    tdm__lock_take(&d->lock);
    d->vendor = TDM_VENDOR_UNKNOWN;
    default_name(d, device);
    tdm__lock_give(&d->lock);
    int count = atomic_load_explicit(&obs.seen_count, memory_order_relaxed);
    if (count == 0)
        atomic_store_explicit(&obs.first_seen, device, memory_order_relaxed);
    atomic_store_explicit(&obs.seen_count, count + 1, memory_order_release);
    atomic_store_explicit(&d->seen, 1, memory_order_release);
}

/* Marks a device as seen before its lock is first taken.  Called with no
 * device lock held. */
static void mark_seen(obs_device *d, int device)
{
    if (atomic_load_explicit(&d->seen, memory_order_acquire))
        return;
    pthread_mutex_lock(&obs.init_lock);
    see_locked(d, device);
    pthread_mutex_unlock(&obs.init_lock);
}

void tdm__alloc_observe_device(int device, tdm_vendor vendor,
                               const char *name, uint64_t capacity)
{
    int s = slot_of(device);
    if (s < 0)
        return;
    obs_init();
    obs_device *d = &obs.dev[s];
    pthread_mutex_lock(&obs.init_lock);
    see_locked(d, device);
    tdm__lock_take(&d->lock);
    d->vendor = tdm__vendor_info(vendor) ? vendor : TDM_VENDOR_UNKNOWN;
    if (name && *name)
        snprintf(d->name, sizeof d->name, "%s", name);
    else
        default_name(d, device);
    d->capacity = capacity;
    tdm__lock_give(&d->lock);
    pthread_mutex_unlock(&obs.init_lock);
}

void tdm__obs_use_device(int device)
{
    obs_init();
    mark_seen(dev_of(device), device);
}

void tdm__obs_lock(int device)
{
    tdm__lock_take(&dev_of(device)->lock);
}

void tdm__obs_unlock(int device)
{
    tdm__lock_give(&dev_of(device)->lock);
}

int tdm__obs_lock_any(void)
{
    if (atomic_load_explicit(&obs.seen_count, memory_order_acquire) == 0)
        return -2;
    int device = atomic_load_explicit(&obs.first_seen, memory_order_relaxed);
    tdm__obs_lock(device);
    return device;
}

void tdm__obs_count_reserve_locked(int device, int64_t bytes, int segments)
{
    obs_device *d = dev_of(device);
    tdm__stat_one(&d->counts.reserved, bytes);
    if (segments)
        tdm__stat_one(&d->counts.segments, segments);
}

/* Books `sign` (+1 / -1) of one allocation or mapping in the stats of d,
 * its lock held. */
static void count_locked(obs_device *d, uint64_t size, int is_map, int sign)
{
    int64_t bytes = sign * (int64_t)size;
    tdm__stat_one(&d->counts.reserved, bytes);
    tdm__stat_one(&d->counts.segments, sign);
    if (!is_map) {
        tdm__stat_one(&d->counts.alloc_bytes, bytes);
        tdm__stat_one(&d->counts.allocs, sign);
    }
}

static uint32_t event_stack(uint32_t sid)
{
    return tdm__rec_events_carry_stacks() ? sid : 0;
}

/* The end of one allocation or mapping (a free, an unmap, or a stale
 * record found under an address handed out again): its events and its
 * stats, its device's lock held, the record already out of its map. */
static void book_end_locked(obs_device *d, uint64_t addr, const tdm__ptr_rec *rec,
                            int is_map, tdm_stream stream, uint32_t stack)
{
    if (is_map) {
        if (tdm__rec_on())
            tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, rec->device, addr, rec->size,
                           rec->size, rec->stream,
                           event_stack(stack ? stack : rec->stack_id));
    } else {
        tdm__rec_segment_free(addr, rec, stream ? stream : rec->stream, stack);
    }
    count_locked(d, rec->size, is_map, -1);
}

/* The device this thread last booked on, + 2 (0: none yet): the first
 * guess of a free's device when several are seen (the hooks describe
 * every device and the host at start), which spares a lookup. */
static __thread int last_device_plus2;

/* Takes the lock of the device whose record sits at `key` in m and
 * removes the record under it (a device's records come and go under its
 * lock only); returns that device, still locked, or NULL when there is no
 * record.  The device is guessed (the only one seen, or this thread's
 * last), else looked up; a record of another device sends it to that
 * device's lock. */
static HOT_INLINE obs_device *lock_removing(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *rec)
{
    int device, last = last_device_plus2 - 2;
    if (atomic_load_explicit(&obs.seen_count, memory_order_acquire) == 1)
        device = atomic_load_explicit(&obs.first_seen, memory_order_relaxed);
    else if (last >= -1 && atomic_load_explicit(&dev_of(last)->seen, memory_order_acquire))
        device = last;
    else if (tdm__ptrmap_get(m, key, rec) == TDM_OK)
        device = rec->device;
    else
        return NULL;
    for (int tries = 0; tries < 4; tries++) {
        obs_device *d = dev_of(device);
        tdm__lock_take(&d->lock);
        tdm_status st = tdm__ptrmap_remove_on(m, key, device, rec);
        if (st == TDM_OK)
            return d;
        tdm__lock_give(&d->lock);
        if (st != TDM_INVALID_ARGUMENT)
            return NULL;
        device = rec->device;
    }
    return NULL;
}

/* Inserts rec at key and books it, the lock of rec's device held.  A
 * record already there is one whose end the hooks never saw (freed
 * through a path tidemark does not hook): one of the same device is
 * closed first, so the books stay balanced; one of another device stays,
 * and *other gets that device (TDM_INVALID_ARGUMENT), for the caller to
 * close under its lock.  TDM_HOST_OUT_OF_MEMORY: nothing booked (the
 * allocation's free will be unknown); the program is not disturbed. */
static HOT_INLINE tdm_status insert_locked(tdm__ptrmap *m, uint64_t key,
                                           const tdm__ptr_rec *rec, int is_map, int *other)
{
    obs_device *d = dev_of(rec->device);
    *other = -2;
    for (int tries = 0; tries < 4; tries++) {
        tdm_status st = tdm__ptrmap_insert(m, key, rec);
        if (st != TDM_INVALID_ARGUMENT) {
            if (st == TDM_OK)
                count_locked(d, rec->size, is_map, 1);
            return st;
        }
        tdm__ptr_rec stale;
        st = tdm__ptrmap_remove_on(m, key, rec->device, &stale);
        if (st == TDM_OK) {
            book_end_locked(d, key, &stale, is_map, 0, 0);
        } else if (st == TDM_INVALID_ARGUMENT) {
            *other = stale.device;
            return st;
        }
    }
    return TDM_INVALID_ARGUMENT;
}

/* A new allocation or mapping: inserted, booked and its events recorded
 * under its device's lock, at one instant for the dump. */
static HOT_INLINE void insert_new(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *rec, int is_map)
{
    obs_device *d = dev_of(rec->device);
    /* Only read with several devices seen (lock_removing). */
    if (atomic_load_explicit(&obs.seen_count, memory_order_relaxed) != 1)
        last_device_plus2 = rec->device + 2;
    for (int tries = 0; tries < 4; tries++) {
        int other;
        tdm__lock_take(&d->lock);
        /* Stamped under the lock: with the time of the call's start, a
         * free on the same device booked meanwhile would come later in
         * time than this allocation, and the replayed history would
         * overstate the peak. */
        if (rec->alloc_time_ns)
            rec->alloc_time_ns = tdm__alloc_now_ns();
        tdm_status st = insert_locked(m, key, rec, is_map, &other);
        if (st == TDM_OK && tdm__rec_on()) {
            if (is_map)
                tdm__rec_event(TDM_ACTION_SEGMENT_MAP, rec->device, key, rec->size,
                               rec->size, 0, event_stack(rec->stack_id));
            else
                tdm__rec_segment_alloc(key, rec);
        }
        tdm__lock_give(&d->lock);
        if (st != TDM_INVALID_ARGUMENT || other == -2)
            return;
        /* Another device's stale record: closed under its own lock (never
         * two device locks at once here), then the insert again. */
        obs_device *od = dev_of(other);
        tdm__ptr_rec stale;
        tdm__lock_take(&od->lock);
        if (tdm__ptrmap_remove_on(m, key, other, &stale) == TDM_OK)
            book_end_locked(od, key, &stale, is_map, 0, 0);
        tdm__lock_give(&od->lock);
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
    mark_seen(dev_of(device), device);
    *rec = (tdm__ptr_rec){
        .size = size,
        .requested = size,
        .stream = stream,
        .device = (int16_t)device,
        .category = tdm__rec_current_category(),
    };
    if (tdm__rec_on()) {
        rec->stack_id = tdm__rec_alloc_stack(skip + 1);
        rec->alloc_time_ns = 1; /* stamped under the lock (insert_new) */
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
    insert_new(&obs.allocs, (uint64_t)(uintptr_t)ptr, &rec, 0);
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
}

__attribute__((noinline)) tdm_status
tdm__alloc_observe_free(const void *ptr, tdm_stream stream, unsigned skip)
{
    if (ptr == NULL)
        return TDM_OK;
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    /* The stack before the lock: unwinding is the slow part of a free. */
    uint32_t free_stack = tdm__rec_on() ? tdm__rec_free_stack(skip + 1) : 0;
    tdm__ptr_rec rec;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    obs_device *d = lock_removing(&obs.allocs, addr, &rec);
    if (d == NULL)
        return TDM_UNKNOWN_POINTER;
    book_end_locked(d, addr, &rec, 0, stream, free_stack);
    tdm__lock_give(&d->lock);
    __asm__ volatile("" ::: "memory");
    return TDM_OK;
}

/* The vendor destroyed every allocation of `device` (CUDA's
 * cuDevicePrimaryCtxReset): each one still booked is booked as freed.
 * Keys are gathered a chunk at a time (the map's walk must not call back
 * into it), then freed as the program's frees are. */
typedef struct {
    int device;
    size_t n;
    uint64_t keys[128];
} reset_pass;

static void gather_device(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    reset_pass *p = ctx;
    if (rec->device == p->device && p->n < sizeof p->keys / sizeof p->keys[0])
        p->keys[p->n++] = key;
}

__attribute__((noinline)) void tdm__alloc_observe_reset_device(int device, unsigned skip)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return;
    reset_pass p = {.device = device};
    do {
        p.n = 0;
        tdm__ptrmap_each(&obs.allocs, gather_device, &p);
        for (size_t i = 0; i < p.n; i++)
            tdm__alloc_observe_free((void *)(uintptr_t)p.keys[i], 0, skip + 1);
    } while (p.n == sizeof p.keys / sizeof p.keys[0]);
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
    tdm__lock_take(&d->lock);
    d->counts.num_ooms++;
    char name[64];
    memcpy(name, d->name, sizeof name);
    tdm__rec_event(TDM_ACTION_OOM, device, free_bytes, size, size, stream,
                   event_stack(stack));
    tdm__lock_give(&d->lock);
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
    insert_new(&obs.maps, (uint64_t)(uintptr_t)va, &rec, 1);
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
        obs_device *d = lock_removing(&obs.maps, at, &rec);
        if (d == NULL)
            break;
        found = 1;
        if (rec.size > end - at) {
            /* Partial unmap: the whole mapping goes and its tail comes
             * back under its own base (net: reserved -= size, the segment
             * count stays).  A tail that cannot be booked (no host memory,
             * another device's record at its base) goes with the rest. */
            tdm__ptr_rec tail = rec;
            tail.size = rec.size - (end - at);
            tail.requested = tail.size;
            count_locked(d, rec.size, 1, -1);
            int other;
            uint64_t gone = insert_locked(&obs.maps, end, &tail, 1, &other) == TDM_OK
                                ? end - at : rec.size;
            if (tdm__rec_on())
                tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, rec.device, at, gone, gone, 0,
                               event_stack(stack ? stack : rec.stack_id));
            tdm__lock_give(&d->lock);
            break;
        }
        book_end_locked(d, at, &rec, 1, 0, stack);
        tdm__lock_give(&d->lock);
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

/* The stats of d's counts (lock held). */
static void counts_export(const obs_counts *c, int pool, tdm_stats *out)
{
    tdm__stats_acc a;
    memset(&a, 0, sizeof a);
    a.st[0][TDM__ST_ALLOCATED_BYTES] = c->alloc_bytes;
    a.st[0][TDM__ST_ACTIVE_BYTES] = c->alloc_bytes;
    a.st[0][TDM__ST_REQUESTED_BYTES] = c->alloc_bytes;
    a.st[0][TDM__ST_RESERVED_BYTES] = c->reserved;
    a.st[0][TDM__ST_ALLOCATION] = c->allocs;
    a.st[0][TDM__ST_SEGMENT] = c->segments;
    a.num_ooms = c->num_ooms;
    tdm__stats_export(&a, pool, out);
}

void tdm__obs_stats(int device, int pool, tdm_stats *out)
{
    obs_device *d = dev_of(device);
    obs_counts c;
    tdm__lock_take(&d->lock);
    c = d->counts;
    tdm__lock_give(&d->lock);
    counts_export(&c, pool, out);
}

void tdm__obs_reset_peaks(int device)
{
    obs_device *d = dev_of(device);
    tdm__lock_take(&d->lock);
    d->counts.alloc_bytes.peak = d->counts.alloc_bytes.current;
    d->counts.allocs.peak = d->counts.allocs.current;
    d->counts.reserved.peak = d->counts.reserved.current;
    d->counts.segments.peak = d->counts.segments.current;
    tdm__lock_give(&d->lock);
}

tdm_status tdm__obs_tag(uint64_t addr, uint8_t category)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    return tdm__ptrmap_set_category(&obs.allocs, addr, category);
}

/* ---- the dump's cut ----------------------------------------------------------
 * init_lock and every seen device's lock are held (in index order, as the
 * fork handlers take them) while the records, pools, imports and stats are
 * copied and the caller's at_cut marks the ring; the visitor is called
 * from the copy afterwards, with no lock held. */

typedef struct obs_cut_device {
    int device;
    tdm_vendor vendor;
    char name[64];
    uint64_t capacity;
    tdm_stats stats;
} obs_cut_device;

struct tdm__obs_cut {
    int ndev;
    obs_cut_device dev[OBS_SLOTS];
    tdm__live_list live;    /* allocations and mappings */
    tdm__live_list imports;
    size_t npools;
    tdm__obs_reserve pools[TDM__OBS_POOL_SLOTS];
};

static void lock_seen(void)
{
    for (int s = 0; s < OBS_SLOTS; s++)
        if (atomic_load_explicit(&obs.dev[s].seen, memory_order_relaxed))
            tdm__lock_take(&obs.dev[s].lock);
}

/* child: in a forked child, made anew instead (it has none of the
 * parent's sleepers). */
static void unlock_seen(int child)
{
    for (int s = OBS_SLOTS - 1; s >= 0; s--) {
        if (!atomic_load_explicit(&obs.dev[s].seen, memory_order_relaxed))
            continue;
        if (child)
            tdm__lock_init(&obs.dev[s].lock);
        else
            tdm__lock_give(&obs.dev[s].lock);
    }
}

/* The copy, every lock held. */
static void copy_state(tdm__obs_cut *c)
{
    for (int s = 0; s < OBS_SLOTS; s++) {
        obs_device *d = &obs.dev[s];
        if (!atomic_load_explicit(&d->seen, memory_order_relaxed))
            continue;
        obs_cut_device *cd = &c->dev[c->ndev++];
        cd->device = s - 1;
        cd->vendor = d->vendor;
        memcpy(cd->name, d->name, sizeof cd->name);
        cd->capacity = d->capacity;
        cd->stats.size = sizeof cd->stats;
        counts_export(&d->counts, 0, &cd->stats);
    }
    tdm__live_collect(&c->live, &obs.allocs, 0);
    tdm__live_collect(&c->live, &obs.maps, 1);
    tdm__obs_import_collect(&c->imports);
    c->npools = tdm__obs_pool_copy(c->pools);
}

tdm__obs_cut *tdm__obs_cut_take(void (*at_cut)(void *ctx), void *ctx)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_acquire)) {
        if (at_cut)
            at_cut(ctx);
        return NULL;
    }
    /* Out of host memory, observe mode shows nothing; the ring is still
     * cut. */
    tdm__obs_cut *c = tdm__meta_map(sizeof *c);
    pthread_mutex_lock(&obs.init_lock);
    lock_seen();
    if (c)
        copy_state(c);
    if (at_cut)
        at_cut(ctx);
    unlock_seen(0);
    pthread_mutex_unlock(&obs.init_lock);
    return c;
}

int tdm__obs_cut_stats(const tdm__obs_cut *c, int device, tdm_stats *out)
{
    for (int i = 0; c && i < c->ndev; i++) {
        if (c->dev[i].device == device) {
            *out = c->dev[i].stats;
            return 1;
        }
    }
    return 0;
}

void tdm__obs_cut_visit(tdm__obs_cut *c, const tdm__state_visitor *v,
                        const uint64_t *emitted)
{
    if (c == NULL)
        return;
    tdm__live_sort(&c->live);
    size_t i = 0;
    for (int k = 0; k < c->ndev; k++) {
        const obs_cut_device *cd = &c->dev[k];
        int device = cd->device, s = device + 1;
        int known = (emitted[s / 64] >> (s % 64)) & 1;
        if (!known && v->device) {
            tdm_snap_device desc = {.index = device, .vendor = tdm__vendor_name(cd->vendor),
                                    .name = cd->name, .capacity = cd->capacity};
            v->device(v->ctx, &desc);
        }
        while (i < c->live.n && c->live.items[i].rec.device < device)
            i++;
        for (; i < c->live.n && c->live.items[i].rec.device == device; i++)
            tdm__live_visit(v, &c->live.items[i]);
        tdm__obs_pool_visit(v, device, c->pools, c->npools);
        /* A device the allocator also has gets one stats record, the sum,
         * from alloc.c. */
        if (!known && v->stats)
            v->stats(v->ctx, device, &cd->stats);
    }
    tdm__obs_import_visit(v, &c->imports);
}

void tdm__obs_cut_free(tdm__obs_cut *c)
{
    if (c == NULL)
        return;
    tdm__live_free(&c->live);
    tdm__live_free(&c->imports);
    tdm__meta_unmap(c, sizeof *c);
}

/* ---- fork and tests ------------------------------------------------------------ */

/* Fork, in the order of alloc.c's handlers (after the allocator's device
 * locks, as the dump's cut takes them): init_lock and every seen device's
 * lock are held across fork(), so no thread is inside a device lock when
 * the fork gate is raised; the maps' shard locks are swept (ptrmap.h). */
void tdm__obs_fork_lock(void)
{
    pthread_mutex_lock(&obs.init_lock);
    if (atomic_load_explicit(&obs.ready, memory_order_relaxed))
        lock_seen();
}

void tdm__obs_fork_sweep(void)
{
    if (!atomic_load_explicit(&obs.ready, memory_order_relaxed))
        return;
    tdm__ptrmap_fork_sweep(&obs.allocs);
    tdm__ptrmap_fork_sweep(&obs.maps);
    tdm__obs_import_fork(0);
}

void tdm__obs_fork_unlock(void)
{
    if (atomic_load_explicit(&obs.ready, memory_order_relaxed))
        unlock_seen(0);
    pthread_mutex_unlock(&obs.init_lock);
}

/* The child: the swept locks made anew (a thread that was waiting for one
 * may have got it just before fork(): ptrmap.h), then the held ones let
 * go. */
void tdm__obs_fork_child(void)
{
    if (atomic_load_explicit(&obs.ready, memory_order_relaxed)) {
        tdm__ptrmap_fork_child(&obs.allocs);
        tdm__ptrmap_fork_child(&obs.maps);
        tdm__obs_import_fork(1);
        unlock_seen(1);
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
            tdm__lock_take(&obs.dev[i].lock);
            memset(&obs.dev[i].counts, 0, sizeof obs.dev[i].counts);
            atomic_store(&obs.dev[i].seen, 0);
            obs.dev[i].capacity = 0;
            tdm__lock_give(&obs.dev[i].lock);
        }
        atomic_store(&obs.seen_count, 0);
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
