/* alloc/observe_pool.c: observe mode's view of stream-ordered memory pools
 * (cudaMallocAsync, cuMemAllocFromPoolAsync, hipMallocAsync): the memory a
 * pool keeps after its allocations were freed.
 *
 * A pool's allocations are booked one by one as every observed
 * allocation is.  What the pool holds beyond them (its reserved bytes
 * minus its used bytes, as the vendor's pool counters give them to the
 * hooks) is still the device's, reserved and not allocated: PyTorch's
 * backend:cudaMallocAsync sets the release threshold to UINT64_MAX, so
 * a pool gives nothing back until it is trimmed.  That reserve is booked
 * here, as an expandable segment at the pool's handle: each change is a
 * segment_map (growth, at handle + old reserve) or segment_unmap (at
 * handle + new reserve), and the device's reserved bytes move with it.
 * The handle is a host address, which under unified addressing no device
 * allocation shares.
 *
 * Owns: a table of the pools seen (handle, device, reserve booked).
 * Invariant: the sum of the reserves booked here is the part of each
 * device's reserved bytes that no allocation or mapping record holds.
 * Lock: a slot is claimed by compare-and-swap; its device and reserve
 * change, with the device's stats and the events, under that device's
 * observe lock (observe.c), and under both devices' locks, taken in index
 * order, when the handle moves to another device; so the dump's cut,
 * which holds every device lock, copies the table at one instant.
 */
#include <string.h>

#include "alloc_internal.h"
#include "recorder.h"


static struct pool_slot {
    _Atomic uint64_t pool;    /* handle; 0 = free slot */
    _Atomic int owner;        /* device + 2 once booked on one; 0 = none yet */
    _Atomic uint64_t reserve; /* bytes booked: reserved - used */
} pools[TDM__OBS_POOL_SLOTS];

/* The slot of `pool`, claimed when new; NULL when the table is full (the
 * pool's reserve then goes unbooked, as before tidemark knew of pools). */
static struct pool_slot *slot_of_pool(uint64_t pool)
{
    for (int i = 0; i < TDM__OBS_POOL_SLOTS; i++) {
        uint64_t have = atomic_load_explicit(&pools[i].pool, memory_order_acquire);
        if (have == pool)
            return &pools[i];
        if (have == 0) {
            uint64_t expected = 0;
            if (atomic_compare_exchange_strong(&pools[i].pool, &expected, pool) ||
                expected == pool)
                return &pools[i];
        }
    }
    return NULL;
}

/* Books the slot's reserve of `device` (its owner, whose lock is held) as
 * `now`: the stats and a segment_map of the growth or segment_unmap of
 * the shrink. */
static void book_reserve(struct pool_slot *s, int device, uint64_t pool, uint64_t now,
                         uint32_t stack)
{
    uint64_t before = atomic_load_explicit(&s->reserve, memory_order_relaxed);
    if (before == now)
        return;
    atomic_store_explicit(&s->reserve, now, memory_order_relaxed);
    tdm__obs_count_reserve_locked(device, (int64_t)(now - before),
                                  (before == 0) - (now == 0));
    if (!tdm__rec_on())
        return;
    if (now > before)
        tdm__rec_event(TDM_ACTION_SEGMENT_MAP, device, pool + before, now - before,
                       now - before, 0, stack);
    else
        tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, device, pool + now, before - now,
                       before - now, 0, stack);
}

/* One try at booking `now` for `device`; 0 when the slot's owner changed
 * before its lock was had (try again). */
static int try_book(struct pool_slot *s, int device, uint64_t pool, uint64_t now,
                    uint32_t stack)
{
    int owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (owner == 0) {
        /* Never booked: claimed for `device` under its lock. */
        tdm__obs_lock(device);
        int ok = atomic_compare_exchange_strong(&s->owner, &owner, device + 2);
        if (ok)
            book_reserve(s, device, pool, now, stack);
        tdm__obs_unlock(device);
        return ok;
    }
    int was = owner - 2;
    int lo = was < device ? was : device, hi = was < device ? device : was;
    tdm__obs_lock(lo);
    if (hi != lo)
        tdm__obs_lock(hi);
    int ok = atomic_load_explicit(&s->owner, memory_order_relaxed) == owner;
    if (ok && was != device) {
        /* The same handle now names a pool of another device (destroyed,
         * made anew): its old reserve leaves the old device. */
        book_reserve(s, was, pool, 0, stack);
        atomic_store_explicit(&s->owner, device + 2, memory_order_release);
    }
    if (ok)
        book_reserve(s, device, pool, now, stack);
    if (hi != lo)
        tdm__obs_unlock(hi);
    tdm__obs_unlock(lo);
    return ok;
}

__attribute__((noinline)) void
tdm__alloc_observe_pool(int device, uint64_t pool, uint64_t reserved, uint64_t used,
                        unsigned skip)
{
    if (pool == 0 || device < -1 || device > TDM__OBS_MAX_DEVICE)
        return;
    struct pool_slot *s = slot_of_pool(pool);
    if (s == NULL)
        return;
    uint64_t now = reserved > used ? reserved - used : 0;
    /* Unchanged (the common answer): no lock, no stack. */
    if (atomic_load_explicit(&s->owner, memory_order_acquire) == device + 2 &&
        atomic_load_explicit(&s->reserve, memory_order_relaxed) == now)
        return;
    if (now == 0 && atomic_load_explicit(&s->owner, memory_order_acquire) == 0)
        return;
    tdm__obs_use_device(device); /* before its lock is taken */
    uint32_t stack = tdm__rec_on() && tdm__rec_events_carry_stacks()
                         ? tdm__rec_alloc_stack(skip + 1) : 0;
    for (int tries = 0; tries < 8 && !try_book(s, device, pool, now, stack); tries++)
        ;
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
}

size_t tdm__obs_pool_copy(tdm__obs_reserve *out)
{
    size_t n = 0;
    for (int i = 0; i < TDM__OBS_POOL_SLOTS; i++) {
        uint64_t pool = atomic_load_explicit(&pools[i].pool, memory_order_acquire);
        uint64_t reserve = atomic_load_explicit(&pools[i].reserve, memory_order_relaxed);
        int owner = atomic_load_explicit(&pools[i].owner, memory_order_relaxed);
        if (pool != 0 && reserve != 0 && owner != 0)
            out[n++] = (tdm__obs_reserve){.pool = pool, .reserve = reserve,
                                          .device = owner - 2};
    }
    return n;
}

void tdm__obs_pool_visit(const tdm__state_visitor *v, int device,
                         const tdm__obs_reserve *copy, size_t n)
{
    if (!v->segment)
        return;
    for (size_t i = 0; i < n; i++) {
        if (copy[i].device != device)
            continue;
        tdm_snap_segment seg = {
            .device = device, .pool = TDM_POOL_NONE, .is_expandable = 1,
            .address = copy[i].pool, .total_size = copy[i].reserve,
        };
        tdm_snap_block blk = {.address = copy[i].pool, .size = copy[i].reserve,
                              .state = TDM_BLOCK_INACTIVE};
        v->segment(v->ctx, &seg, &blk, 1);
    }
}

void tdm__obs_pool_forget(void)
{
    for (int i = 0; i < TDM__OBS_POOL_SLOTS; i++) {
        atomic_store(&pools[i].pool, 0);
        atomic_store(&pools[i].reserve, 0);
        atomic_store(&pools[i].owner, 0);
    }
}
