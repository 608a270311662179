/* alloc/alloc_internal.h: what the files of alloc/ share with each other.
 *
 * alloc.c owns the global state (configuration, provider, pointer map,
 * per-device state) and the public entry points; passthrough.c and the
 * cache_*.c files implement the two modes over it; observe.c books the
 * program's own vendor allocations; oom.c reports OOMs; live.c copies a
 * pointer map's records out for the dump.
 *
 * Lifecycle: the global is written once under init_lock before `ready` is
 * set (release); readers that saw `ready` (acquire) read it without a
 * lock.  tdm__alloc_reset_for_tests() is the only writer after that.
 */
#ifndef TDM_ALLOC_INTERNAL_H
#define TDM_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "clock.h"
#include "provider.h"
#include "ptrmap.h"
#include "recorder.h"
#include "snap_model.h"
#include "visibility.h"

/* Stat rows, and the pools a stat is kept for (PyTorch's StatType). */
enum { TDM__ST_ALLOCATED_BYTES, TDM__ST_RESERVED_BYTES, TDM__ST_ACTIVE_BYTES,
       TDM__ST_REQUESTED_BYTES, TDM__ST_ALLOCATION, TDM__ST_SEGMENT,
       TDM__ST_COUNT };

typedef struct tdm__stats_acc {
    /* [TDM_STAT_POOL_*][TDM__ST_*].  `allocated` (the sum of increments)
     * is not kept here: it is current + freed, and tdm__stats_export
     * says so, which spares every booking a store. */
    tdm_stat st[3][TDM__ST_COUNT];
    uint64_t num_alloc_retries;
    uint64_t num_ooms;
} tdm__stats_acc;

/* `v` up on one stat (its peak follows) or down (counted as freed). */
static inline void tdm__stat_up1(tdm_stat *s, uint64_t v)
{
    int64_t now = s->current + (int64_t)v;
    s->current = now;
    if (__builtin_expect(now > s->peak, 0)) /* (the common case falls through) */
        s->peak = now;
}

static inline void tdm__stat_down1(tdm_stat *s, uint64_t v)
{
    s->current -= (int64_t)v;
    s->freed += (int64_t)v;
}

static inline void tdm__stat_one(tdm_stat *s, int64_t delta)
{
    if (delta >= 0)
        tdm__stat_up1(s, (uint64_t)delta);
    else
        tdm__stat_down1(s, 0 - (uint64_t)delta);
}

/* Adds `delta` (bytes or a count) to one stat of pool `pool_kind`
 * (tdm_pool_kind) and of the all-pools row. */
static inline void tdm__stat_add(tdm__stats_acc *a, int pool_kind, int row,
                                 int64_t delta)
{
    tdm__stat_one(&a->st[0][row], delta);
    if (pool_kind == TDM_POOL_SMALL)
        tdm__stat_one(&a->st[1][row], delta);
    else if (pool_kind == TDM_POOL_LARGE)
        tdm__stat_one(&a->st[2][row], delta);
}

/* The cache's hot path: `v` up or down on one stat of a block's pool
 * (TDM_POOL_SMALL or TDM_POOL_LARGE, nothing else) and on the all-pools
 * row.  The direction is known where they are called, so unlike
 * tdm__stat_add there is no branch on the sign or on the pool; the rows
 * are found once per call (`all`, `pool`: tdm__stat_rows). */
typedef struct tdm__stat_rows {
    tdm_stat *all, *pool;
} tdm__stat_rows;

static inline tdm__stat_rows tdm__stat_rows_of(tdm__stats_acc *a, int block_pool)
{
    return (tdm__stat_rows){a->st[0], a->st[2 - block_pool]};
}

static inline void tdm__stat_up(tdm__stat_rows r, int row, uint64_t v)
{
    tdm__stat_up1(&r.all[row], v);
    tdm__stat_up1(&r.pool[row], v);
}

static inline void tdm__stat_down(tdm__stat_rows r, int row, uint64_t v)
{
    tdm__stat_down1(&r.all[row], v);
    tdm__stat_down1(&r.pool[row], v);
}

/* One allocation that is its own segment (pass-through and observe
 * modes), booked `sign` (+1 / -1) times: a segment of `size` reserved
 * bytes and, when `allocation`, an allocation of all of them of which
 * `requested` were asked for (else the segment is a mapping: reserved,
 * not allocated).  The caller holds the stats' lock. */
static inline void tdm__stats_book(tdm__stats_acc *a, int sign, uint64_t size,
                                   uint64_t requested, int allocation)
{
    int64_t bytes = sign * (int64_t)size;
    tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_SEGMENT, sign);
    tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_RESERVED_BYTES, bytes);
    if (allocation) {
        tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_ALLOCATION, sign);
        tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_ALLOCATED_BYTES, bytes);
        tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_ACTIVE_BYTES, bytes);
        tdm__stat_add(a, TDM_POOL_NONE, TDM__ST_REQUESTED_BYTES,
                      sign * (int64_t)requested);
    }
}

void tdm__stats_export(const tdm__stats_acc *a, int pool, tdm_stats *out);
void tdm__stats_reset_peaks(tdm__stats_acc *a);

enum { TDM__MODE_PASSTHROUGH = 0, TDM__MODE_CACHE = 1 };

typedef struct tdm__pt_device tdm__pt_device;
typedef struct tdm__cache_device tdm__cache_device;

typedef struct tdm__alloc_global {
    pthread_mutex_t init_lock;
    _Atomic int ready;            /* 1 once devices exist */
    int configured;               /* cfg was set by tdm__alloc_configure */
    tdm__alloc_config cfg;
    int mode;                     /* TDM__MODE_* */
    tdm_provider *prov;           /* the fraction wrapper over the device's
                                     provider (fraction.c) */
    tdm_provider *given;          /* from tdm__alloc_use_provider, until init */
    int device_count;
    tdm_snap_device *devices;     /* [device_count]; names below */
    char (*device_names)[64];     /* [device_count] */
    tdm__ptrmap map;
    tdm__pt_device *pt;           /* [device_count] in passthrough mode */
    tdm__cache_device **cache;    /* [device_count] in cache mode */
} tdm__alloc_global;

extern tdm__alloc_global tdm__alloc_g TDM__HIDDEN;

/* Every free's body (alloc.c): `skip` counts the frames above this one;
 * `on_stream` makes it a free ordered on `stream` (cache mode waits for
 * that stream's work before handing the block out again; pass-through
 * mode frees at once). */
tdm_status tdm__alloc_free_as(void *ptr, unsigned skip, int on_stream, tdm_stream stream);

/* Initializes on first use with the configuration in force. */
tdm_status tdm__alloc_init_slow(void);
static inline tdm_status tdm__alloc_ready(void)
{
    if (atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_OK;
    return tdm__alloc_init_slow();
}

/* CLOCK_REALTIME in ns, the recorder's time base (inline: read under a
 * lock at every recorded allocation). */
static inline uint64_t tdm__alloc_now_ns(void)
{
    return tdm__clock_ns();
}

/* What an allocation call carries into a mode. */
typedef struct tdm__alloc_req {
    size_t size;        /* bytes asked for */
    int device;
    tdm_stream stream;
    uint32_t stack_id;  /* 0 unless recording */
    uint8_t category;
    uint64_t time_ns;   /* 0 unless recording; then 1 until the mode stamps
                           it under its device lock, so that the events'
                           times follow the order the lock gave them */
} tdm__alloc_req;

/* ---- pass-through mode (passthrough.c) ---- */
tdm_status tdm__pt_create(void);
void tdm__pt_destroy(void);
tdm_status tdm__pt_malloc(const tdm__alloc_req *req, void **out);
/* Removes ptr from the map itself, under `device`'s lock;
 * TDM_UNKNOWN_POINTER when it is not there. */
tdm_status tdm__pt_free(uint64_t ptr, int device, uint32_t free_stack);
void tdm__pt_stats(int device, int pool, tdm_stats *out);
void tdm__pt_reset_peaks(int device);
/* Zeroes `device`'s stats (a forked child: forget.c). */
void tdm__pt_forget(int device);
void tdm__pt_visit(const tdm__state_visitor *visitor);
/* The stats lock of `device` (fork handlers). */
pthread_mutex_t *tdm__pt_lock_of(int device);

/* ---- cache mode (cache_*.c) ---- */
tdm_status tdm__cache_create(void);
void tdm__cache_destroy(void);
tdm_status tdm__cache_malloc(const tdm__alloc_req *req, void **out);
/* tdm__cache_malloc of a request that records nothing (no stack, no
 * category, no event), for the entries' quiet path (alloc.c); *out is
 * NULL when it fails. */
tdm_status tdm__cache_malloc_quiet(void **out, size_t size, int device, tdm_stream stream);
/* Looks ptr up itself, under the device lock.  `on_stream`: a free
 * ordered on `stream` (cache_stream.c). */
tdm_status tdm__cache_free(uint64_t ptr, int device, uint32_t free_stack, int on_stream,
                           tdm_stream stream);
/* Whether ptr lies in the addresses `device`'s segments have ever covered
 * (a lock-free first guess: the device's block map decides). */
int tdm__cache_may_hold(int device, uint64_t ptr);
/* tdm__cache_free_any(ptr, 0, 0, 0): a plain free that records nothing,
 * for the entries' quiet path (alloc.c). */
tdm_status tdm__cache_free_quiet(uint64_t ptr);
/* tdm__cache_free on the device that holds ptr: each device whose
 * segments' addresses cover ptr is asked in turn (one, unless the vendor
 * interleaves devices' address ranges), so no process-wide map is kept or
 * locked per call.  TDM_UNKNOWN_POINTER when none has it. */
tdm_status tdm__cache_free_many(uint64_t ptr, uint32_t free_stack, int on_stream,
                                tdm_stream stream);
/* (Inline: with one device, the common case, it is one more call on
 * every free otherwise.) */
static inline tdm_status tdm__cache_free_any(uint64_t ptr, uint32_t free_stack,
                                             int on_stream, tdm_stream stream)
{
    if (__builtin_expect(tdm__alloc_g.device_count == 1, 1)) /* no span test: ~0.7 ns a pair */
        return tdm__cache_free(ptr, 0, free_stack, on_stream, stream);
    return tdm__cache_free_many(ptr, free_stack, on_stream, stream);
}
/* Whether ptr lies in one of `device`'s segments (walks them: error paths
 * only). */
int tdm__cache_owns(uint64_t ptr, int device);
/* Up to max addresses of `device`'s allocated blocks (error paths only). */
size_t tdm__cache_live_blocks(int device, uint64_t *out, size_t max);
void tdm__cache_stats(int device, int pool, tdm_stats *out);
void tdm__cache_reset_peaks(int device);
/* The bytes allocated and reserved now, summed over the shards: what
 * tdm__cache_stats gives as the two `current`s, without the rest. */
void tdm__cache_current_bytes(int device, int64_t *allocated, int64_t *reserved);
/* pool_stats (may be NULL) gets each device's small and large pool stats,
 * with visitor->ctx, right after visitor->stats. */
void tdm__cache_visit(const tdm__state_visitor *visitor, tdm__pool_stats_fn pool_stats);
/* The device of live allocation ptr, -1 if none (looked up again under
 * the device lock by the two below). */
int tdm__cache_device_of(uint64_t ptr);
tdm_status tdm__cache_tag(uint64_t ptr, int device, uint8_t category);
tdm_status tdm__cache_empty(int device);
tdm_status tdm__cache_record_stream(uint64_t ptr, int device, tdm_stream stream);
/* Live block ptr's segment on `device` (the block itself in an expandable
 * one): 1 with base and size set, 0 when ptr is no live block there. */
int tdm__cache_base_of(uint64_t ptr, int device, uint64_t *base, uint64_t *size);
void tdm__cache_sync(int device, int all_streams, tdm_stream stream);
/* Takes (take > 0) or gives back (0) the device lock of `device`, or
 * (-1) makes it anew, free, in a forked child (fork handlers). */
void tdm__cache_lock_device(int device, int take);

/* ---- one allocation, one segment: its ring entries ----
 * Pass-through and observe modes record an allocation and its segment in
 * one compound ring entry (event.h), and the same for the free.  The
 * event's body is inline here: in these modes the booking is all a hooked
 * call does. */

/* segment_alloc + alloc of rec at addr. */
static inline void tdm__rec_segment_alloc(uint64_t addr, const tdm__ptr_rec *rec)
{
    if (__builtin_expect(tdm__rec_on(), 1))
        tdm__rec_event_inline(rec->alloc_time_ns, rec->category,
                              TDM__ACTION_SEGMENT_ALLOC_ALLOC, rec->device, addr,
                              rec->size, rec->requested, rec->stream,
                              tdm__rec_events_carry_stacks() ? rec->stack_id : 0);
}

/* free_requested + free_completed + segment_free of rec at addr, on
 * `stream`, with the free's stack (else the allocation's), in the
 * category of the freeing thread's tag. */
static inline void tdm__rec_segment_free(uint64_t addr, const tdm__ptr_rec *rec,
                                         uint64_t stream, uint32_t free_stack)
{
    if (__builtin_expect(tdm__rec_on(), 1)) {
        uint32_t es = 0;
        if (tdm__rec_events_carry_stacks())
            es = free_stack ? free_stack : rec->stack_id;
        tdm__rec_event_here(TDM__ACTION_FREE_SEGMENT_FREE, rec->device, addr, rec->size,
                            rec->requested, stream, es);
    }
}

/* ---- live records for the dump (live.c) ---- */
typedef struct tdm__live {
    uint64_t addr;
    tdm__ptr_rec rec;
    int is_map;       /* observe mode's mapping: an expandable segment */
} tdm__live;

typedef struct tdm__live_list {
    tdm__live *items; /* from tdm__meta_map */
    size_t n, cap;    /* entries used / room */
} tdm__live_list;

/* Appends a copy of every record of m (one shard lock at a time).  Out of
 * host memory, the list keeps what fitted: the dump lists that. */
void tdm__live_collect(tdm__live_list *l, tdm__ptrmap *m, int is_map);
/* Sorts the list by device, then address. */
void tdm__live_sort(tdm__live_list *l);
/* Gives the visitor l as one segment of one block, on l->rec.device. */
void tdm__live_visit(const tdm__state_visitor *v, const tdm__live *l);
void tdm__live_free(tdm__live_list *l);

/* ---- out of memory (oom.c) ---- */
/* One site and its live bytes, for the OOM line. */
typedef struct tdm__oom_site {
    uint32_t stack_id;
    uint64_t bytes;
} tdm__oom_site;

#define TDM__OOM_SITES 256
typedef struct tdm__oom_sites {
    tdm__oom_site site[TDM__OOM_SITES];
    size_t n; /* sites used */
} tdm__oom_sites;

/* This thread's list of sites (4 KiB, kept off the caller's stack),
 * emptied; valid until the thread's next call. */
tdm__oom_sites *tdm__oom_sites_begin(void);
/* Adds `bytes` to stack_id's total (past TDM__OOM_SITES distinct sites
 * the rest go uncounted). */
void tdm__oom_site_add(tdm__oom_sites *s, uint32_t stack_id, uint64_t bytes);
/* Adds every record of `device` in m (one shard lock at a time). */
void tdm__oom_sites_from_map(tdm__oom_sites *s, tdm__ptrmap *m, int device);
/* Prints the one-line OOM report about `device` (named `device_name`),
 * with the largest of the `live` sites (which it reorders), and calls the
 * configured on_oom hook.  Called with no allocator lock held. */
void tdm__oom_report(int device, const char *device_name, size_t request,
                     size_t rounded, size_t free_bytes, tdm__oom_sites *live);

/* ---- the recorder's view of alloc/ (alloc.c) ---- */
/* Gives the recorder the state source and tag listener that cover both
 * the allocator and observe mode; `observe` also names the snapshot's
 * alloc mode "observe" unless the allocator already named its own.
 * Called by whichever of the two initializes first (and by both). */
void tdm__alloc_attach_recorder(int observe);
/* The recorder's state source (state_source.c): the allocator's state and
 * observe mode's, copied at one cut. */
void tdm__alloc_state_source(const tdm__state_visitor *v, tdm__pool_stats_fn pool_stats);
/* *a += *b, both full-size structs. */
void tdm__stats_sum(tdm_stats *a, const tdm_stats *b);

/* ---- observe mode (observe.c) ---- */
/* Highest device ordinal observe mode books (-1 is the host). */
#define TDM__OBS_MAX_DEVICE 62
/* Whether observe mode has booked or been told about `device`. */
int tdm__obs_has_device(int device);
/* Its stats, for a device tdm__obs_has_device said yes to. */
void tdm__obs_stats(int device, int pool, tdm_stats *out);
void tdm__obs_reset_peaks(int device);
/* tdm_tag_ptr on an observed allocation; TDM_UNKNOWN_POINTER if none. */
tdm_status tdm__obs_tag(uint64_t addr, uint8_t category);
/* The dump's cut of observe mode: with init_lock and every seen device's
 * lock held, its records, pools' reserves, imports and stats are copied
 * and at_cut (may be NULL) is called, so that the ring is marked at the
 * same instant; called under the allocator's device locks when it has
 * state.  NULL when observe mode has not started, or out of host memory
 * (at_cut is called all the same). */
typedef struct tdm__obs_cut tdm__obs_cut;
tdm__obs_cut *tdm__obs_cut_take(void (*at_cut)(void *ctx), void *ctx);
/* The copied stats of `device`; 0 when observe mode did not have it. */
int tdm__obs_cut_stats(const tdm__obs_cut *c, int device, tdm_stats *out);
/* Visits the copy's devices and segments.  emitted[2] is a bit set over
 * device + 1 of the devices the allocator already described (with stats
 * that include observe mode's): those get segments only. */
void tdm__obs_cut_visit(tdm__obs_cut *c, const tdm__state_visitor *v,
                        const uint64_t *emitted);
void tdm__obs_cut_free(tdm__obs_cut *c);
/* Fork (alloc.c's handlers, after the allocator's device locks): hold the
 * init lock and the seen devices' locks; sweep the gated locks once the
 * fork gate is raised; release what was held. */
void tdm__obs_fork_lock(void);
void tdm__obs_fork_sweep(void);
void tdm__obs_fork_unlock(void);
/* The same in the child, where the gated locks are made anew. */
void tdm__obs_fork_child(void);
void tdm__obs_reset_for_tests(void);
/* A forked child: every record and count dropped (forget.c). */
void tdm__obs_forget(void);

/* Readies observe mode and marks `device` (which has a slot) as seen:
 * only then may its lock be taken. */
void tdm__obs_use_device(int device);
/* A seen device's lock: its stats, records and their events change under
 * it.  Two are only ever held together in index order. */
void tdm__obs_lock(int device);
void tdm__obs_unlock(int device);
/* Locks the first device seen and returns it; -2 (nothing locked) when
 * none is. */
int tdm__obs_lock_any(void);
/* Adds `bytes` of reserved memory and `segments` segments to `device`'s
 * stats, outside any allocation record (a stream-ordered pool's reserve);
 * its lock held. */
void tdm__obs_count_reserve_locked(int device, int64_t bytes, int segments);

/* ---- stream-ordered pools' reserve (observe_pool.c) ---- */
#define TDM__OBS_POOL_SLOTS 64
typedef struct tdm__obs_reserve {
    uint64_t pool, reserve;
    int device;
} tdm__obs_reserve;
/* Copies every pool holding a reserve to out[TDM__OBS_POOL_SLOTS] (the
 * cut: every device lock held); returns how many. */
size_t tdm__obs_pool_copy(tdm__obs_reserve *out);
/* Gives the visitor one segment per pool of `device` in the copy. */
void tdm__obs_pool_visit(const tdm__state_visitor *v, int device,
                         const tdm__obs_reserve *copy, size_t n);
/* Drops every pool's reserve without booking (a forked child, tests). */
void tdm__obs_pool_forget(void);

/* ---- memory the process maps but did not allocate (observe_import.c) ---- */
/* Appends every live imported mapping to l (the cut: every device lock
 * held), and gives the visitor those of l. */
void tdm__obs_import_collect(tdm__live_list *l);
void tdm__obs_import_visit(const tdm__state_visitor *v, tdm__live_list *l);
void tdm__obs_import_forget(void);
/* Fork: 0 sweeps the map's gated locks (parent, gate raised), 1 makes them
 * anew (child). */
void tdm__obs_import_fork(int child);

/* ---- the provider wrapper: memory fraction, fork lock (fraction.c) ---- */
/* Wraps `inner` in a provider that refuses, as out of memory, an
 * allocation that would take a device's bytes from this provider past
 * its limit (torch.cuda.set_per_process_memory_fraction).  No limit until
 * one is set.  The wrapper owns `inner`. */
tdm_status tdm__fraction_wrap(tdm_provider *inner, tdm_provider **out);
/* Sets the limit of `device` to fraction x its total bytes (1.0 = none). */
tdm_status tdm__fraction_set(tdm_provider *wrapper, int device,
                             double fraction);
/* Takes / releases the per-device locks held around provider calls. */
/* The byte limit of `device`, UINT64_MAX while no fraction is set. */
uint64_t tdm__fraction_limit(tdm_provider *wrapper, int device);
void tdm__fraction_lock_all(tdm_provider *wrapper);
void tdm__fraction_unlock_all(tdm_provider *wrapper);

#endif
