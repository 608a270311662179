/* hooks/preload/pool_track.h: the stream-ordered memory pools a vendor's
 * hooks have seen (CUDA's cuda_pool.c, HIP's hip_pool.c), one tracker per
 * vendor over the same code (pool_track.c).
 *
 * Pools.  An async allocation takes memory from the device's current pool
 * and an async free gives it back to the pool, which keeps it up to its
 * release threshold and releases the rest at the next synchronization.
 * The pool's own counters (reserved and used bytes) say what it holds; the
 * hooks read them after each call that can change them and book the
 * difference as the device's reserved memory (tdm__pool_book,
 * alloc/observe_pool.c).  The tracker keeps the pools seen in use (the
 * lock-free pool_table.h), each device's current pool (asked of the
 * vendor once, then kept up to date by the hook of its set-pool call) and
 * whether the program made a pool of its own current, which cache mode
 * then leaves to the vendor.  At each dump every known pool is booked
 * again (releases no hook saw: event waits, the vendor trimming).
 *
 * Per vendor: the operations (tdm__pool_ops) ask the vendor what the
 * tracker cannot know.  Lock: none (atomics).
 */
#ifndef TDM_HOOKS_PRELOAD_POOL_TRACK_H
#define TDM_HOOKS_PRELOAD_POOL_TRACK_H

#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "pool_table.h"
#include "preload.h"

#define TDM_POOL_HIDDEN __attribute__((visibility("hidden")))
#define TDM_POOL_DEVICES 64

typedef struct tdm__pool_ops {
    /* The pool's reserved and used bytes; 0 when the vendor cannot say. */
    int (*query)(void *pool, uint64_t *reserved, uint64_t *used);
    /* A device's current pool, and its default pool; NULL when unknown. */
    void *(*device_pool)(int device);
    void *(*default_pool)(int device);
    /* Books every known pool again (the vendor's tdm__pool_book_all on its
     * tracker), registered to run at each dump. */
    void (*book_all)(void);
} tdm__pool_ops;

typedef struct tdm__pool_track {
    const tdm__pool_ops *ops;
    tdm__pool_table known;
    _Atomic(void *) current[TDM_POOL_DEVICES];
    _Atomic int program[TDM_POOL_DEVICES];
    _Atomic int dump_asked;
} tdm__pool_track;

#define TDM__POOL_TRACK_INIT(ops_ptr) {.ops = (ops_ptr)}

/* The current pool of `device` (asked of the vendor once, then kept by
 * tdm__pool_set_current); NULL when unknown. */
TDM_POOL_HIDDEN void *tdm__pool_current(tdm__pool_track *t, int device);
/* The program made `pool` `device`'s current one (its set-pool call
 * succeeded): its own unless it is the device's default pool. */
TDM_POOL_HIDDEN void tdm__pool_set_current(tdm__pool_track *t, int device, void *pool);
/* Remembers a pool seen in use, so that frees and synchronizations ask it
 * again (and every dump). */
TDM_POOL_HIDDEN void tdm__pool_remember(tdm__pool_track *t, void *pool, int device);

/* Nonzero when the program made a pool of its own `device`'s current pool:
 * cache mode then leaves that device's async allocations to the vendor. */
static inline int tdm__pool_program(tdm__pool_track *t, int device)
{
    return device >= 0 && device < TDM_POOL_DEVICES &&
           atomic_load_explicit(&t->program[device], memory_order_relaxed);
}

/* Whether any pool was ever seen (one load): until then synchronizations
 * have nothing to book. */
static inline int tdm__pool_any(tdm__pool_track *t)
{
    return tdm__pool_table_any(&t->known);
}

/* The device a known pool belongs to; -1 when never seen or destroyed. */
static inline int tdm__pool_device_of(tdm__pool_track *t, void *pool)
{
    return tdm__pool_table_device_of(&t->known, pool);
}

/* The bookings: inlined, so that the hook calling them is the only
 * tidemark frame left out of the stack (TDM_HOOK_SKIP). */
#define TDM__POOL_INLINE static inline __attribute__((always_inline))

/* Books the reserve `pool` (of `device`) holds now. */
TDM__POOL_INLINE void tdm__pool_book(tdm__pool_track *t, void *pool, int device)
{
    uint64_t reserved, used;
    if (pool == NULL || device < 0 || !t->ops->query(pool, &reserved, &used))
        return;
    tdm__pool_remember(t, pool, device);
    tdm__alloc_observe_pool(device, (uint64_t)(uintptr_t)pool, reserved, used, TDM_HOOK_SKIP);
}

/* Books every known pool again (after a free or a synchronization, which
 * may change what any of them holds).  Nothing when no pool was seen. */
TDM__POOL_INLINE void tdm__pool_book_all(tdm__pool_track *t)
{
    void *pool;
    int device;
    for (int i = 0; tdm__pool_table_at(&t->known, i, &pool, &device); i++)
        tdm__pool_book(t, pool, device);
}

/* The program trimmed `pool`: booked on its device (`fallback` when the
 * pool was never seen in use). */
TDM__POOL_INLINE void tdm__pool_trimmed(tdm__pool_track *t, void *pool, int fallback)
{
    int device = tdm__pool_device_of(t, pool);
    tdm__pool_book(t, pool, device >= 0 ? device : fallback);
}

/* The program destroyed `pool`: what it held goes with it. */
TDM__POOL_INLINE void tdm__pool_destroyed(tdm__pool_track *t, void *pool)
{
    int device = tdm__pool_device_of(t, pool);
    if (device < 0)
        return;
    tdm__pool_table_forget(&t->known, pool);
    tdm__alloc_observe_pool(device, (uint64_t)(uintptr_t)pool, 0, 0, TDM_HOOK_SKIP);
}

#endif
