/* alloc/alloc_fork.c: the allocator's fork handlers, registered at load
 * by alloc.c (what they take and why: below). */
#include "alloc_internal.h"

#include "recorder.h"
#include "stack.h"

/* A child forked while another thread held an allocator lock would find
 * it held forever.  Before fork() the handlers take the init locks, every
 * per-device lock (cache mode takes map shard locks inside them), the
 * provider wrapper's per-device locks (held around every provider call)
 * and the locks of observe mode's devices (map shard locks inside them
 * too); then, with no thread left inside those, they raise the fork gate
 * and sweep the locks that are only ever taken alone or inside those: the
 * pointer maps' shards (ptrmap.h).  So a handful of locks is held
 * across fork(), not hundreds; the child makes the swept ones anew, as a
 * thread that was waiting for one may have got it just before fork(). */

static void lock_all(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    pthread_mutex_lock(&g->init_lock);
    int ready = atomic_load_explicit(&g->ready, memory_order_relaxed);
    if (ready) {
        for (int i = 0; i < g->device_count; i++) {
            if (g->mode == TDM__MODE_CACHE)
                tdm__cache_lock_device(i, 1);
            else
                pthread_mutex_lock(tdm__pt_lock_of(i));
        }
        tdm__fraction_lock_all(g->prov);
    }
    /* After the device locks, as the dump's cut takes observe mode's. */
    tdm__obs_fork_lock();
    atomic_store(&tdm__fork_pending, 1);
    if (ready)
        tdm__ptrmap_fork_sweep(&g->map);
    tdm__obs_fork_sweep();
}

static void unlock_held(int child)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (atomic_load_explicit(&g->ready, memory_order_relaxed)) {
        tdm__fraction_unlock_all(g->prov);
        for (int i = g->device_count - 1; i >= 0; i--) {
            if (g->mode == TDM__MODE_CACHE)
                /* The child has none of the parent's sleepers. */
                tdm__cache_lock_device(i, child ? -1 : 0);
            else
                pthread_mutex_unlock(tdm__pt_lock_of(i));
        }
    }
}

static void unlock_all(void)
{
    atomic_store(&tdm__fork_pending, 0);
    tdm__obs_fork_unlock();
    unlock_held(0);
    pthread_mutex_unlock(&tdm__alloc_g.init_lock);
}

static void unlock_all_child(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    atomic_store(&tdm__fork_pending, 0);
    if (atomic_load_explicit(&g->ready, memory_order_relaxed))
        tdm__ptrmap_fork_child(&g->map);
    tdm__obs_fork_child();
    unlock_held(1);
    pthread_mutex_unlock(&g->init_lock);
}

static void register_atfork_once(void)
{
    /* First: the recorder's lock is taken under ours (attach_recorder). */
    tdm__rec_register_atfork();
    tdm__stack_register_atfork();
    pthread_atfork(lock_all, unlock_all, unlock_all_child);
}

void tdm__alloc_register_atfork(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork_once);
}
