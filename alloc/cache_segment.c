/* alloc/cache_segment.c: the caching allocator's segments come and go.
 *
 * Owns a shard's segment list (a new segment from the provider, linked and
 * counted) and the paths that give memory back: a whole segment, every
 * cached one (empty_cache, and malloc's last try before it reports out of
 * memory), oversize ones of a stream (PyTorch's
 * release_available_cached_blocks) and the garbage collection of old ones
 * (garbage_collection_threshold).  Each works on one shard, its lock held
 * (cache.c's callers take them); the rules are PyTorch's.
 */
#include "cache_internal.h"
#include "recorder.h"

/* ---- segments ---------------------------------------------------------- */

/* Widens shard d's span to cover [lo, hi) (its lock held). */
static void widen_span(tdm__cache_device *d, uint64_t lo, uint64_t hi)
{
    if (lo < atomic_load_explicit(&d->span_lo, memory_order_relaxed))
        atomic_store_explicit(&d->span_lo, lo, memory_order_relaxed);
    if (hi > atomic_load_explicit(&d->span_hi, memory_order_relaxed))
        atomic_store_explicit(&d->span_hi, hi, memory_order_relaxed);
}

void tdm__cache_seg_link(tdm__cache_device *d, cseg *s, cblock *b, uint64_t addr,
                         uint64_t bytes, int kind, const tdm__alloc_req *req)
{
    s->addr = addr;
    s->size = bytes;
    widen_span(d, addr, addr + bytes);
    /* Shard 0's span is the device's (tdm__cache_may_hold); a shard's
     * segments come under every lock, shard 0's included. */
    tdm__cache_device *d0 = tdm__cache_shard(d->group, 0);
    if (d0 != d)
        widen_span(d0, addr, addr + bytes);
    s->stream = req->stream;
    s->stack_id = req->stack_id;
    s->pool = (uint8_t)kind;
    s->first = b;
    s->next = d->segs;
    if (d->segs)
        d->segs->prev = s;
    d->segs = s;
    d->nsegs++;
    b->seg = s;
    b->pool = s->pool;
    b->expandable = s->expandable;
    b->addr = addr;
    b->size = bytes;
    b->state = TDM_BLOCK_INACTIVE;
    tdm__stat_add(&d->stats, kind, TDM__ST_SEGMENT, 1);
}

void tdm__cache_seg_unlink(tdm__cache_device *d, cseg *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        d->segs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    d->nsegs--;
    tdm__stat_add(&d->stats, s->pool, TDM__ST_SEGMENT, -1);
}

/* A new segment of `bytes` from the provider, as one inactive block that
 * is in no tree yet.  NULL with *st set when the provider refuses. */
cblock *tdm__cache_alloc_segment(tdm__cache_device *d, int kind, uint64_t bytes,
                                 const tdm__alloc_req *req, int is_retry, tdm_status *st)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (is_retry)
        d->stats.num_alloc_retries++;
    void *p = NULL;
    *st = g->prov->alloc(g->prov, d->index, bytes, req->stream, &p);
    if (*st != TDM_OK)
        return NULL;
    cseg *s = tdm__objpool_get(&d->seg_pool);
    cblock *b = tdm__objpool_get(&d->block_pool);
    if (s == NULL || b == NULL) {
        tdm__objpool_put(&d->seg_pool, s);
        tdm__objpool_put(&d->block_pool, b);
        g->prov->free(g->prov, d->index, p, bytes);
        *st = TDM_HOST_OUT_OF_MEMORY;
        return NULL;
    }
    tdm__cache_seg_link(d, s, b, (uint64_t)(uintptr_t)p, bytes, kind, req);
    b->mapped = 1;
    tdm__stat_add(&d->stats, kind, TDM__ST_RESERVED_BYTES, (int64_t)bytes);
    tdm__rec_event(TDM_ACTION_SEGMENT_ALLOC, d->index, s->addr, bytes, bytes,
                   s->stream, tdm__cache_event_stack(req->stack_id));
    return b;
}

/* Gives a cached whole-segment block's segment back to the provider. */
static void release_segment(tdm__cache_device *d, cblock *b)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    cseg *s = b->seg;
    tdm__bins_remove(&tdm__cache_pool(d, s->pool)->bins, b);
    tdm__cache_seg_unlink(d, s);
    tdm__rec_event(TDM_ACTION_SEGMENT_FREE, d->index, s->addr, s->size, s->size,
                   s->stream, tdm__cache_event_stack(s->stack_id));
    g->prov->free(g->prov, d->index, (void *)(uintptr_t)s->addr, s->size);
    tdm__stat_add(&d->stats, s->pool, TDM__ST_RESERVED_BYTES, -(int64_t)s->size);
    tdm__objpool_put(&d->block_pool, b);
    tdm__objpool_put(&d->seg_pool, s);
}

/* Expandable segments give memory back by unmapping pages instead. */
static int whole_segment(const cblock *b)
{
    return b->prev == NULL && b->next == NULL && !b->expandable;
}

/* Releases every cached whole segment of one pool. */
static void release_pool(tdm__cache_device *d, cpool *p)
{
    cblock *b = tdm__bins_first(&p->bins);
    while (b != NULL) {
        cblock *next = tdm__bins_next(&p->bins, b);
        if (whole_segment(b))
            release_segment(d, b);
        b = next;
    }
}

void tdm__cache_release_all(tdm__cache_device *d, tdm_stream stream)
{
    /* Freeing device memory, or waiting, is illegal during a graph
     * capture, and the graph may use cached blocks (PyTorch skips it too). */
    if (tdm__cache_capturing(d, stream))
        return;
    /* Frees that wait on other streams complete first (PyTorch's
     * synchronize_and_free_events); on the sim device that is a sync. */
    tdm__cache_complete_pending(d, 1, 0);
    release_pool(d, &d->large);
    release_pool(d, &d->small);
    tdm__cache_expand_release(d, &d->large);
    tdm__cache_expand_release(d, &d->small);
}

void tdm__cache_release_every_shard(tdm__cache_group *grp, tdm_stream stream)
{
    for (int i = 0; i < tdm__cache_nshards(grp); i++)
        tdm__cache_release_all(tdm__cache_shard(grp, i), stream);
}

/* PyTorch's release_available_cached_blocks: with max_split_size set,
 * free oversize cached segments of this stream, one big enough or the
 * largest first until enough bytes are back. */
int tdm__cache_release_oversize(tdm__cache_device *d, cpool *p, uint64_t size,
                            uint64_t stream)
{
    uint64_t ms = tdm__cache_max_split(), want = size < ms ? ms : size;
    if (ms == UINT64_MAX || tdm__cache_capturing(d, stream))
        return 0;
    cblock *b = tdm__bins_find_ge(&p->bins, stream, want);
    if (b != NULL) {
        if (!whole_segment(b))
            return 0;
        release_segment(d, b);
        return 1;
    }
    uint64_t released = 0;
    b = tdm__bins_find_lt(&p->bins, stream, want);
    while (b != NULL && released < want) {
        if (b->size < ms)
            break;
        cblock *prev = tdm__bins_prev_in_stream(&p->bins, b);
        if (whole_segment(b)) {
            released += b->size;
            release_segment(d, b);
        }
        b = prev;
    }
    return released >= want;
}

/* PyTorch's garbage_collect_cached_blocks: once reserved memory passes
 * threshold x the allowed memory, free cached whole segments of the large
 * pool that have waited longer than average, until under the threshold.
 * The allowed memory is the memory fraction's limit when one is set, as in
 * PyTorch; without one (PyTorch then collects nothing) the device's
 * capacity, so that the key also works for programs that set no fraction. */
void tdm__cache_garbage_collect(tdm__cache_device *d)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    size_t total = 0;
    g->prov->mem_info(g->prov, d->index, NULL, &total);
    uint64_t allowed = tdm__fraction_limit(g->prov, d->index);
    if (allowed == UINT64_MAX || allowed > total)
        allowed = total;
    uint64_t limit = (uint64_t)(g->cfg.garbage_collection_threshold * (double)allowed);
    uint64_t reserved = (uint64_t)d->stats.st[0][TDM__ST_RESERVED_BYTES].current;
    if (reserved <= limit)
        return;
    uint64_t target = reserved - limit, reclaimed = 0;
    cpool *p = &d->large;
    double total_age = 0.0;
    size_t freeable = 0;
    for (cblock *b = tdm__bins_first(&p->bins); b; b = tdm__bins_next(&p->bins, b)) {
        if (whole_segment(b)) {
            total_age += (double)(p->calls - b->gc_base);
            freeable++;
        }
    }
    int freed = 1;
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = total_age / (double)freeable;
        freed = 0;
        cblock *b = tdm__bins_first(&p->bins);
        while (b != NULL) { /* a whole pass, as PyTorch does */
            cblock *next = tdm__bins_next(&p->bins, b);
            double age = (double)(p->calls - b->gc_base);
            if (whole_segment(b) && age >= age_threshold) {
                freed = 1;
                reclaimed += b->size;
                total_age -= age;
                freeable--;
                release_segment(d, b);
            }
            b = next;
        }
    }
}

