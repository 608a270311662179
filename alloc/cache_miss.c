/* alloc/cache_miss.c: a malloc that no cached block served.
 *
 * Owns what the caching allocator does then, under the shard's lock (or
 * every shard's, `all`): the garbage collection, new memory (a segment
 * from the provider, or pages mapped into an expandable segment), the
 * releases PyTorch tries before it gives up (oversize cached segments of
 * the stream, then every cached segment, then a retry), and the
 * out-of-memory event and report.  Out of line from cache.c's hit path,
 * whose frame stays small.
 */
#include "cache_internal.h"
#include "recorder.h"

tdm_status tdm__cache_oom(tdm__cache_device *d, const tdm__alloc_req *req, uint64_t rounded,
                          int all)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    size_t free_bytes = 0;
    g->prov->mem_info(g->prov, d->index, &free_bytes, NULL);
    d->stats.num_ooms++;
    tdm__rec_event(TDM_ACTION_OOM, d->index, free_bytes, rounded, req->size,
                   req->stream, tdm__cache_event_stack(req->stack_id));
    tdm__oom_sites *sites = tdm__oom_sites_begin();
    /* With shards, every lock is held here (tdm__cache_miss). */
    tdm__cache_group *grp = d->group;
    for (int i = 0; i < tdm__cache_nshards(grp); i++)
        for (cseg *s = tdm__cache_shard(grp, i)->segs; s != NULL; s = s->next)
            for (cblock *b = s->first; b != NULL; b = b->next)
                if (b->state != TDM_BLOCK_INACTIVE)
                    tdm__oom_site_add(sites, b->stack_id, b->size);
    tdm__cache_give_held(d, all);
    tdm__oom_report(d->index, g->device_names[d->index], req->size, rounded,
                    free_bytes, sites);
    return TDM_OUT_OF_MEMORY;
}

/* A block of at least `size` for a request that no cached block served:
 * pages mapped into an expandable segment (as many as the rounded size
 * needs, as PyTorch maps), or a new segment of seg_bytes. */
static cblock *new_memory(tdm__cache_device *d, int kind, uint64_t size, uint64_t seg_bytes,
                          const tdm__alloc_req *req, int is_retry, tdm_status *st)
{
    if (tdm__cache_expandable(d, kind))
        return tdm__cache_expand_alloc(d, kind, size, req, is_retry, st);
    return tdm__cache_alloc_segment(d, kind, seg_bytes, req, is_retry, st);
}

/* tdm__cache_release_all of the shard that `all` (every lock held) says:
 * d's alone, or every shard's, the device's peaks rebased after it. */
static void release_held(tdm__cache_device *d, tdm_stream stream, int all)
{
    if (!all) {
        tdm__cache_release_all(d, stream);
        return;
    }
    tdm__cache_group *grp = d->group;
    tdm__cache_release_every_shard(grp, stream);
    /* Only downs: the others' ceilings come down to their values, so what
     * d reaches next is measured against the sum as it is now. */
    tdm__cache_peaks_rebase(grp, d, TDM__REBASE_MID, -1);
}

cblock *tdm__cache_miss(tdm__cache_device *d, cpool *p, int kind, uint64_t size,
                        const tdm__alloc_req *req, tdm_status *st, int all)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    uint64_t seg_bytes = kind == TDM_POOL_SMALL ? TDM__SMALL_BUFFER
                         : size < TDM__MIN_LARGE_ALLOC ? TDM__LARGE_BUFFER
                         : (size + TDM__ROUND_LARGE - 1) & ~(TDM__ROUND_LARGE - 1);
    /* The stream's first blocks in this pool need its bins. */
    if (!tdm__bins_prepare(&p->bins, req->stream)) {
        tdm__cache_give_held(d, all);
        *st = TDM_HOST_OUT_OF_MEMORY;
        return NULL;
    }
    /* (With the threshold set the device has one shard.) */
    if (g->cfg.garbage_collection_threshold > 0.0 && !tdm__cache_capturing(d, req->stream))
        tdm__cache_garbage_collect(d);
    cblock *b = new_memory(d, kind, size, seg_bytes, req, 0, st);
    if (b == NULL && *st == TDM_OUT_OF_MEMORY &&
        tdm__cache_release_oversize(d, p, size, req->stream))
        b = new_memory(d, kind, size, seg_bytes, req, 0, st);
    if (b == NULL && *st == TDM_OUT_OF_MEMORY && !tdm__cache_capturing(d, req->stream)) {
        release_held(d, req->stream, all);
        b = new_memory(d, kind, size, seg_bytes, req, 1, st);
    }
    if (b == NULL && *st == TDM_OUT_OF_MEMORY) {
        *st = tdm__cache_oom(d, req, size, all);
        return NULL;
    }
    if (b == NULL)
        tdm__cache_give_held(d, all);
    return b;
}
