/* alloc/forget.c: a forked child forgets what its parent allocated.
 *
 * With fork=follow a child records into a snapshot of its own, and that
 * snapshot must describe only what the child allocated: the copy of the
 * parent's records that fork() gave it (live blocks, segments, stats) is
 * the parent's, not the child's.  So the child, alone in its process
 * (runtime/autoinit.c calls this from its fork handler, after alloc.c's
 * handlers made every lock anew), drops them:
 *   pass-through  the pointer map emptied, each device's stats zeroed;
 *   cache         the same, and every segment forgotten, not freed: the
 *                 device memory is the parent's.  The provider still counts
 *                 it as taken, so the child is never handed those addresses
 *                 again (on the sim device the child's copy-on-write pages
 *                 of them stay mapped, unused);
 *   observe       its maps emptied and its counts zeroed (device
 *                 descriptions stay: the devices are the same).
 * A free in the child of a parent's pointer is then unknown: tdm_free
 * returns TDM_UNKNOWN_POINTER and records nothing; an observing hook
 * passes the vendor's free on unchanged and books nothing (docs/hooks.md).
 */
#include <string.h>

#include "cache_internal.h"

static void cache_forget(tdm__cache_device *d)
{
    for (cseg *s = d->segs; s != NULL; s = s->next) {
        for (cblock *b = s->first; b != NULL; b = b->next)
            if (b->cold != NULL && b->cold->uses != b->cold->uses_inline)
                tdm__meta_unmap(b->cold->uses, b->cold->uses_cap * sizeof(uint64_t));
        if (s->expandable) /* the copy of its page table */
            tdm__meta_unmap(s->handles, (size_t)(s->size / s->page) * sizeof(uint64_t));
    }
    /* The records are the child's copy-on-write copies of the parent's
     * bookkeeping; the pools give their chunks back and start empty. */
    tdm__objpool_destroy(&d->block_pool);
    tdm__objpool_destroy(&d->seg_pool);
    tdm__objpool_destroy(&d->cold_pool);
    tdm__objpool_init(&d->block_pool, sizeof(cblock));
    tdm__objpool_init(&d->seg_pool, sizeof(cseg));
    tdm__objpool_init(&d->cold_pool, sizeof(cblock_cold));
    tdm__bins_destroy(&d->small.bins); /* the child's copies of the bins */
    tdm__bins_destroy(&d->large.bins);
    tdm__cmap_destroy(&d->map);
    tdm__tree_init(&d->small.unmapped, d->small.unmapped.cmp);
    tdm__tree_init(&d->large.unmapped, d->large.unmapped.cmp);
    d->small.calls = 0;
    d->large.calls = 0;
    d->segs = NULL;
    d->nsegs = 0;
    d->pending = NULL;
    d->nwaiting = 0; /* the parent's markers (events) mean nothing here */
    d->nspare = 0;
    memset(&d->stats, 0, sizeof d->stats);
}

static void cache_forget_device(tdm__cache_group *grp)
{
    for (int i = 0; i < tdm__cache_nshards(grp); i++)
        cache_forget(tdm__cache_shard(grp, i));
    /* The shards and the streams they serve stay; the peaks go with the
     * stats. */
    memset(grp->peak, 0, sizeof grp->peak);
    memset(grp->unused, 0, sizeof grp->unused);
    memset(grp->most, 0, sizeof grp->most);
    atomic_store_explicit(&grp->waiting, 0, memory_order_relaxed);
}

void tdm__alloc_forget_inherited(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (atomic_load_explicit(&g->ready, memory_order_acquire)) {
        tdm__ptrmap_clear(&g->map);
        for (int i = 0; i < g->device_count; i++) {
            if (g->mode == TDM__MODE_CACHE)
                cache_forget_device(g->cache[i]->group);
            else
                tdm__pt_forget(i);
        }
    }
    tdm__obs_forget();
}
