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
 * Lock-free: slots are claimed by compare-and-swap and a reserve changes
 * by atomic exchange, so two threads racing each book the difference to
 * what the other left (balanced; the last answer stays).
 */
#include <string.h>

#include "alloc_internal.h"
#include "recorder.h"

#define POOL_SLOTS 64

static struct pool_slot {
    _Atomic uint64_t pool;    /* handle; 0 = free slot */
    _Atomic int device;
    _Atomic uint64_t reserve; /* bytes booked: reserved - used */
} pools[POOL_SLOTS];

/* The slot of `pool`, claimed when new; NULL when the table is full (the
 * pool's reserve then goes unbooked, as before tidemark knew of pools). */
static struct pool_slot *slot_of_pool(uint64_t pool)
{
    for (int i = 0; i < POOL_SLOTS; i++) {
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
    int was = atomic_exchange_explicit(&s->device, device, memory_order_relaxed);
    uint64_t before = atomic_exchange_explicit(&s->reserve, now, memory_order_acq_rel);
    if (before == now)
        return;
    tdm__obs_use_device(device);
    if (was != device && before != 0) {
        /* The same handle now names a pool of another device (destroyed,
         * made anew): its old reserve leaves the old device. */
        tdm__obs_account_reserve(was, -(int64_t)before, -1);
        before = 0;
    }
    int64_t delta = (int64_t)(now - before);
    tdm__obs_account_reserve(device, delta, (before == 0) - (now == 0));
    if (tdm__rec_on()) {
        uint32_t stack = tdm__rec_events_carry_stacks()
                             ? tdm__rec_alloc_stack(skip + 1) : 0;
        if (now > before)
            tdm__rec_event(TDM_ACTION_SEGMENT_MAP, device, pool + before, now - before,
                           now - before, 0, stack);
        else
            tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, device, pool + now, before - now,
                           before - now, 0, stack);
    }
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
}

void tdm__obs_pool_visit(const tdm__state_visitor *v, int device)
{
    if (!v->segment)
        return;
    for (int i = 0; i < POOL_SLOTS; i++) {
        uint64_t pool = atomic_load_explicit(&pools[i].pool, memory_order_acquire);
        uint64_t reserve = atomic_load_explicit(&pools[i].reserve, memory_order_acquire);
        if (pool == 0 || reserve == 0 ||
            atomic_load_explicit(&pools[i].device, memory_order_relaxed) != device)
            continue;
        tdm_snap_segment seg = {
            .device = device, .pool = TDM_POOL_NONE, .is_expandable = 1,
            .address = pool, .total_size = reserve,
        };
        tdm_snap_block blk = {.address = pool, .size = reserve,
                              .state = TDM_BLOCK_INACTIVE};
        v->segment(v->ctx, &seg, &blk, 1);
    }
}

void tdm__obs_pool_forget(void)
{
    for (int i = 0; i < POOL_SLOTS; i++) {
        atomic_store(&pools[i].pool, 0);
        atomic_store(&pools[i].reserve, 0);
        atomic_store(&pools[i].device, 0);
    }
}
