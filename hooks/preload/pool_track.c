/* hooks/preload/pool_track.c: the pool tracker's calls that ask the vendor
 * (pool_track.h).  Lock: none (atomics); a vendor's answer raced by the
 * program's own set-pool call loses to it. */
#include "pool_track.h"

void *tdm__pool_current(tdm__pool_track *t, int device)
{
    if (device < 0 || device >= TDM_POOL_DEVICES)
        return NULL;
    void *p = atomic_load_explicit(&t->current[device], memory_order_acquire);
    if (p)
        return p;
    void *pool = t->ops->device_pool(device);
    if (pool == NULL)
        return NULL;
    void *expected = NULL; /* the program's set-pool call meanwhile wins */
    atomic_compare_exchange_strong(&t->current[device], &expected, pool);
    return atomic_load_explicit(&t->current[device], memory_order_acquire);
}

void tdm__pool_set_current(tdm__pool_track *t, int device, void *pool)
{
    if (device < 0 || device >= TDM_POOL_DEVICES)
        return;
    void *def = t->ops->default_pool(device);
    int own = def == NULL || def != pool;
    atomic_store_explicit(&t->current[device], pool, memory_order_release);
    atomic_store_explicit(&t->program[device], own, memory_order_relaxed);
}

void tdm__pool_remember(tdm__pool_track *t, void *pool, int device)
{
    if (!atomic_load_explicit(&t->dump_asked, memory_order_relaxed) &&
        !atomic_exchange_explicit(&t->dump_asked, 1, memory_order_relaxed))
        tdm__alloc_observe_refresh_at_dump(t->ops->book_all);
    tdm__pool_table_put(&t->known, pool, device);
}
