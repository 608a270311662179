/* hooks/preload/pool_table.h: the stream-ordered pools a vendor's hooks
 * have seen in use (cuda_pool.c, hip_pool.c), so that frees,
 * synchronizations and dumps can read each again.  A small lock-free
 * table of TDM_POOL_TABLE_MAX slots: a slot goes once from empty to a pool
 * handle and keeps it; its device is -1 while the pool is destroyed (a
 * handle the vendor has freed may not be safe to pass back to it) and is
 * set again when the same handle is seen in use.  Past the last slot,
 * pools are not remembered.  Header-only; no locks.
 */
#ifndef TDM_HOOKS_PRELOAD_POOL_TABLE_H
#define TDM_HOOKS_PRELOAD_POOL_TABLE_H

#include <stdatomic.h>
#include <stddef.h>

#define TDM_POOL_TABLE_MAX 32

typedef struct tdm__pool_table {
    _Atomic(void *) pool[TDM_POOL_TABLE_MAX];
    _Atomic int device[TDM_POOL_TABLE_MAX];
} tdm__pool_table;

/* Remembers `pool` of `device` (alive again if it was destroyed). */
static inline void tdm__pool_table_put(tdm__pool_table *t, void *pool, int device)
{
    for (int i = 0; i < TDM_POOL_TABLE_MAX; i++) {
        void *have = atomic_load_explicit(&t->pool[i], memory_order_acquire);
        if (have == pool) { /* the same handle again: alive */
            atomic_store_explicit(&t->device[i], device, memory_order_relaxed);
            return;
        }
        if (have == NULL) {
            atomic_store_explicit(&t->device[i], device, memory_order_relaxed);
            void *expected = NULL;
            if (atomic_compare_exchange_strong(&t->pool[i], &expected, pool) ||
                expected == pool)
                return;
        }
    }
}

/* Slot i's pool and device (-1: destroyed); 0 past the last pool. */
static inline int tdm__pool_table_at(tdm__pool_table *t, int i, void **pool, int *device)
{
    if (i < 0 || i >= TDM_POOL_TABLE_MAX)
        return 0;
    void *p = atomic_load_explicit(&t->pool[i], memory_order_acquire);
    if (p == NULL)
        return 0;
    *pool = p;
    *device = atomic_load_explicit(&t->device[i], memory_order_relaxed);
    return 1;
}

/* The device a known pool belongs to; -1 for one never seen in use or
 * destroyed. */
static inline int tdm__pool_table_device_of(tdm__pool_table *t, void *pool)
{
    for (int i = 0; i < TDM_POOL_TABLE_MAX; i++)
        if (atomic_load_explicit(&t->pool[i], memory_order_acquire) == pool)
            return atomic_load_explicit(&t->device[i], memory_order_relaxed);
    return -1;
}

/* A destroyed pool: never asked again until seen in use again. */
static inline void tdm__pool_table_forget(tdm__pool_table *t, void *pool)
{
    for (int i = 0; i < TDM_POOL_TABLE_MAX; i++)
        if (atomic_load_explicit(&t->pool[i], memory_order_acquire) == pool)
            atomic_store_explicit(&t->device[i], -1, memory_order_relaxed);
}

/* Whether any pool was ever seen (one load). */
static inline int tdm__pool_table_any(tdm__pool_table *t)
{
    return atomic_load_explicit(&t->pool[0], memory_order_relaxed) != NULL;
}

#endif
