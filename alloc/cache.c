/* alloc/cache.c: mode=cache, PyTorch's caching allocator over a provider.
 *
 * Owns the malloc and free paths of the caching allocator: rounding, pool
 * choice, best fit per stream, split, merge, new segments, and the
 * out-of-memory path (garbage collection, releasing oversize then all
 * cached segments, retry, oom event and report).  The rules and constants
 * are those of PyTorch's CUDACachingAllocator (docs/allocator.md).
 *
 * Invariants (checked by tdm__alloc_check after every test operation):
 * blocks tile each segment; no two inactive neighbours; a pool's bins hold
 * exactly its inactive mapped blocks; stats equal the sums over blocks.
 * Lock: the device lock (lock.h), held for the whole of malloc and free
 * (the provider's own lock nests inside it).  No process-wide state is
 * written per call: with several devices a free finds its device by the
 * address spans of the devices' segments (tdm__cache_free_any).
 * Stacks are captured before it is taken.
 */
#include <stdio.h>
#include <string.h>

#include "cache_internal.h"
#include "recorder.h"

/* Unmapped ranges of expandable segments: by stream, then address. */
static int cmp_unmapped(const tdm__tnode *a, const tdm__tnode *b)
{
    const cblock *x = TDM__CONTAINER_OF(a, cblock, node);
    const cblock *y = TDM__CONTAINER_OF(b, cblock, node);
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The configuration's max_split_size as the rules use it, worked out once
 * by tdm__cache_create (before the allocator is published as ready):
 * every allocation asks for it. */
static uint64_t max_split_bytes = UINT64_MAX;
/* Whether no roundup_power2_divisions apply (the default): requests are
 * rounded inline (tdm__alloc_round_plain). */
static int plain_rounding;

static inline uint64_t max_split(void)
{
    return max_split_bytes;
}

uint32_t tdm__cache_event_stack(uint32_t sid)
{
    return tdm__rec_events_carry_stacks() ? sid : 0;
}

void tdm__cache_lock_device(int device, int take)
{
    tdm__lock *l = &tdm__alloc_g.cache[device]->lock;
    if (take > 0)
        tdm__lock_take(l);
    else if (take == 0)
        tdm__lock_give(l);
    else
        tdm__lock_init(l);
}

tdm_status tdm__cache_create(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    uint64_t m = g->cfg.max_split_size;
    /* PyTorch clamps max_split_size_mb to at least the 20 MiB segment. */
    max_split_bytes = m == 0 ? UINT64_MAX : m < TDM__LARGE_BUFFER ? TDM__LARGE_BUFFER : m;
    plain_rounding = 1;
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        if (g->cfg.roundup_power2_divisions[i] > 1)
            plain_rounding = 0;
    g->cache = tdm__meta_map(sizeof(tdm__cache_device *) * (size_t)g->device_count);
    if (g->cache == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    for (int i = 0; i < g->device_count; i++) {
        tdm__cache_device *d = tdm__meta_map(sizeof *d);
        if (d == NULL) {
            tdm__cache_destroy();
            return TDM_HOST_OUT_OF_MEMORY;
        }
        tdm__lock_init(&d->lock);
        d->index = i;
        atomic_store_explicit(&d->span_lo, UINT64_MAX, memory_order_relaxed);
        tdm__bins_init(&d->small.bins, g->cfg.reference_index);
        tdm__bins_init(&d->large.bins, g->cfg.reference_index);
        tdm__tree_init(&d->small.unmapped, cmp_unmapped);
        tdm__tree_init(&d->large.unmapped, cmp_unmapped);
        d->small.kind = TDM_POOL_SMALL;
        d->large.kind = TDM_POOL_LARGE;
        tdm__objpool_init(&d->block_pool, sizeof(cblock));
        tdm__objpool_init(&d->seg_pool, sizeof(cseg));
        g->cache[i] = d;
    }
    if (g->cfg.expandable_segments) {
        int lacking = -1;
        for (int i = 0; i < g->device_count; i++)
            if (!tdm__cache_expand_init(g->cache[i]) && lacking < 0)
                lacking = i;
        /* Once, at start: the program runs on, with normal segments. */
        if (lacking >= 0)
            fprintf(stderr,
                    "tidemark: expandable_segments=1: %s device %d has no virtual memory "
                    "management; it uses normal segments\n",
                    g->prov->vendor, lacking);
    }
    return TDM_OK;
}

void tdm__cache_destroy(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (g->cache == NULL)
        return;
    for (int i = 0; i < g->device_count; i++) {
        tdm__cache_device *d = g->cache[i];
        if (d == NULL)
            continue;
        /* Every segment back to the provider, whatever its blocks. */
        for (cseg *s = d->segs, *next; s != NULL; s = next) {
            next = s->next;
            for (cblock *b = s->first; b != NULL; b = b->next)
                tdm__cache_drop_uses(d, b);
            if (s->expandable)
                tdm__cache_expand_destroy(d, s);
            else
                g->prov->free(g->prov, i, (void *)(uintptr_t)s->addr, s->size);
        }
        for (uint32_t k = 0; k < d->nspare; k++)
            g->prov->streams->marker_destroy(g->prov->streams_ctx, i, d->spare[k]);
        tdm__bins_destroy(&d->small.bins);
        tdm__bins_destroy(&d->large.bins);
        tdm__cmap_destroy(&d->map);
        tdm__objpool_destroy(&d->block_pool);
        tdm__objpool_destroy(&d->seg_pool);
        tdm__meta_unmap(d, sizeof *d);
    }
    tdm__meta_unmap(g->cache, sizeof(tdm__cache_device *) * (size_t)g->device_count);
    g->cache = NULL;
}

/* ---- segments ---------------------------------------------------------- */

void tdm__cache_seg_link(tdm__cache_device *d, cseg *s, cblock *b, uint64_t addr,
                         uint64_t bytes, int kind, const tdm__alloc_req *req)
{
    s->addr = addr;
    s->size = bytes;
    if (addr < atomic_load_explicit(&d->span_lo, memory_order_relaxed))
        atomic_store_explicit(&d->span_lo, addr, memory_order_relaxed);
    if (addr + bytes > atomic_load_explicit(&d->span_hi, memory_order_relaxed))
        atomic_store_explicit(&d->span_hi, addr + bytes, memory_order_relaxed);
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
    b->stream = req->stream;
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
static cblock *alloc_segment(tdm__cache_device *d, int kind, uint64_t bytes,
                             const tdm__alloc_req *req, int is_retry,
                             tdm_status *st)
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

/* PyTorch's release_available_cached_blocks: with max_split_size set,
 * free oversize cached segments of this stream, one big enough or the
 * largest first until enough bytes are back. */
static int release_oversize(tdm__cache_device *d, cpool *p, uint64_t size,
                            uint64_t stream)
{
    uint64_t ms = max_split(), want = size < ms ? ms : size;
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
static void garbage_collect(tdm__cache_device *d)
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

/* ---- malloc ------------------------------------------------------------- */

/* What an expandable segment's block can grow to: itself and the
 * unmapped range after it. */
static uint64_t expandable_size(const cblock *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

static inline __attribute__((always_inline)) cblock *
get_free_block(cpool *p, uint64_t size, uint64_t stream)
{
    p->calls++;
    cblock *b = tdm__bins_find_ge(&p->bins, stream, size);
    if (b == NULL)
        return NULL;
    uint64_t ms = max_split();
    /* PyTorch's best fit among expandable blocks: a larger block that can
     * grow less is taken first, keeping the segment's growing end free. */
    while (b->expandable) {
        cblock *c = tdm__bins_next_in_stream(&p->bins, b);
        if (c == NULL || expandable_size(c) >= expandable_size(b))
            break;
        b = c;
    }
    /* No oversize block for a small request, and no much-too-large block
     * for an oversize one (PyTorch's rules with max_split_size; nothing is
     * oversize without it). */
    if (__builtin_expect(ms != UINT64_MAX, 0) &&
        (size < ms ? b->size >= ms : b->size >= size + TDM__LARGE_BUFFER))
        return NULL;
    tdm__bins_remove(&p->bins, b);
    return b;
}

/* Caches b (inactive, mapped, in no tree) in pool p, its own. */
static inline void cache_in(cpool *p, cblock *b)
{
    b->gc_base = p->calls;
    tdm__bins_insert(&p->bins, b);
}

void tdm__cache_block(tdm__cache_device *d, cblock *b)
{
    cache_in(tdm__cache_pool(d, b->pool), b);
}

void tdm__cache_split_after(cblock *b, cblock *r, uint64_t size)
{
    r->seg = b->seg;
    r->pool = b->pool;
    r->expandable = b->expandable;
    r->addr = b->addr + size;
    r->size = b->size - size;
    r->stream = b->stream;
    r->bins = b->bins;
    r->state = TDM_BLOCK_INACTIVE;
    r->mapped = b->mapped;
    r->prev = b;
    r->next = b->next;
    if (b->next)
        b->next->prev = r;
    b->next = r;
    b->size = size;
}

/* A block record with every field zero, as tdm__objpool_get gives, but
 * written field by field: the compiler's memset of the whole record (a
 * `rep stos`) cost more than the rest of a split.  The treap priority
 * stays: it hashes the record's own address (cache_bins.h). */
static inline cblock *new_block(tdm__cache_device *d)
{
    _Static_assert(sizeof(cblock) == 192, "a field was added to cblock: zero it here");
    cblock *r = tdm__objpool_get_dirty(&d->block_pool);
    if (r == NULL)
        return NULL;
    r->node.left = r->node.right = NULL;
    r->addr = r->size = 0;
    r->prev = r->next = NULL;
    r->state = r->mapped = r->pool = r->expandable = r->wait = 0;
    atomic_store_explicit(&r->category, 0, memory_order_relaxed);
    r->bin = 0;
    r->stream = 0;
    r->bins = NULL;
    r->bin_link = NULL;
    r->seg = NULL;
    r->requested = r->alloc_time_ns = r->gc_base = 0;
    r->stack_id = r->free_stack = 0;
    r->pend_prev = r->pend_next = NULL;
    r->uses = NULL;
    memset(r->uses_inline, 0, sizeof r->uses_inline);
    r->nuses = r->uses_cap = 0;
    return r;
}

/* Hands out `b` (in no tree) for `req`, splitting off the rest when
 * PyTorch would. */
static inline __attribute__((always_inline)) void
use_block(tdm__cache_device *d, cblock *b, uint64_t size, const tdm__alloc_req *req)
{
    int kind = b->pool;
    uint64_t rest = b->size - size;
    /* Expandable segments split every pool at 512 bytes, as PyTorch's
     * should_split does with them on. */
    int split = kind == TDM_POOL_SMALL || b->expandable
                    ? rest >= TDM__MIN_BLOCK
                    : (size < max_split() && rest > TDM__SMALL_SIZE);
    if (split) {
        cblock *r = new_block(d);
        /* Without host memory for a record, hand out the whole block. */
        if (r != NULL) {
            tdm__cache_split_after(b, r, size);
            tdm__cache_block(d, r);
        }
    }
    b->state = TDM_BLOCK_ACTIVE_ALLOCATED;
    b->requested = req->size;
    b->stack_id = req->stack_id;
    /* One clock read, under the lock, for the block and its event. */
    uint64_t now = req->time_ns ? tdm__alloc_now_ns() : 0;
    b->alloc_time_ns = now;
    atomic_store_explicit(&b->category, req->category, memory_order_relaxed);
    tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, kind);
    tdm__stat_up(rows, TDM__ST_ALLOCATION, 1);
    tdm__stat_up(rows, TDM__ST_ALLOCATED_BYTES, b->size);
    tdm__stat_up(rows, TDM__ST_ACTIVE_BYTES, b->size);
    tdm__stat_up(rows, TDM__ST_REQUESTED_BYTES, req->size);
    if (now != 0) /* (not b's copy: the stores above may alias it) */
        tdm__rec_event_inline(now, req->category, TDM_ACTION_ALLOC, d->index,
                              b->addr, req->size, req->size, b->stream,
                              tdm__cache_event_stack(req->stack_id));
}

static __attribute__((noinline)) tdm_status
cache_oom(tdm__cache_device *d, const tdm__alloc_req *req, uint64_t rounded)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    size_t free_bytes = 0;
    g->prov->mem_info(g->prov, d->index, &free_bytes, NULL);
    d->stats.num_ooms++;
    tdm__rec_event(TDM_ACTION_OOM, d->index, free_bytes, rounded, req->size,
                   req->stream, tdm__cache_event_stack(req->stack_id));
    tdm__oom_sites *sites = tdm__oom_sites_begin();
    for (cseg *s = d->segs; s != NULL; s = s->next)
        for (cblock *b = s->first; b != NULL; b = b->next)
            if (b->state != TDM_BLOCK_INACTIVE)
                tdm__oom_site_add(sites, b->stack_id, b->size);
    tdm__lock_give(&d->lock);
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
    return alloc_segment(d, kind, seg_bytes, req, is_retry, st);
}

/* No cached block served the request: pages mapped or a new segment,
 * after garbage collection, and with the releases PyTorch tries before it
 * reports out of memory.  Out of line: the hit path's frame stays small.
 * NULL with *st set and the lock given back when nothing came. */
static __attribute__((noinline)) cblock *
cache_miss(tdm__cache_device *d, cpool *p, int kind, uint64_t size, const tdm__alloc_req *req,
           tdm_status *st)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    uint64_t seg_bytes = kind == TDM_POOL_SMALL ? TDM__SMALL_BUFFER
                         : size < TDM__MIN_LARGE_ALLOC ? TDM__LARGE_BUFFER
                         : (size + TDM__ROUND_LARGE - 1) & ~(TDM__ROUND_LARGE - 1);
    /* The stream's first blocks in this pool need its bins. */
    if (!tdm__bins_prepare(&p->bins, req->stream)) {
        tdm__lock_give(&d->lock);
        *st = TDM_HOST_OUT_OF_MEMORY;
        return NULL;
    }
    if (g->cfg.garbage_collection_threshold > 0.0 && !tdm__cache_capturing(d, req->stream))
        garbage_collect(d);
    cblock *b = new_memory(d, kind, size, seg_bytes, req, 0, st);
    if (b == NULL && *st == TDM_OUT_OF_MEMORY && release_oversize(d, p, size, req->stream))
        b = new_memory(d, kind, size, seg_bytes, req, 0, st);
    if (b == NULL && *st == TDM_OUT_OF_MEMORY && !tdm__cache_capturing(d, req->stream)) {
        tdm__cache_release_all(d, req->stream);
        b = new_memory(d, kind, size, seg_bytes, req, 1, st);
    }
    if (b == NULL && *st == TDM_OUT_OF_MEMORY) {
        *st = cache_oom(d, req, size);
        return NULL;
    }
    if (b == NULL)
        tdm__lock_give(&d->lock);
    return b;
}

/* The body of both entries: inline in each, so that the quiet one
 * (nothing recorded) is compiled with the recording's branches folded
 * away.  `in` is only read: the request lives in `hit`, whose address
 * goes nowhere (the calls off the hit path get copies), so the quiet
 * body's constants fold and nothing of it is stored on the way. */
static inline __attribute__((always_inline)) tdm_status
cache_malloc(const tdm__alloc_req *in, void **out)
{
    const tdm__alloc_req hit = *in;
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__cache_device *d = g->cache[hit.device];
    uint64_t size = plain_rounding ? tdm__alloc_round_plain(hit.size)
                                   : tdm__alloc_round_size(hit.size);
    int kind = size != 0 && size <= TDM__SMALL_SIZE ? TDM_POOL_SMALL : TDM_POOL_LARGE;
    tdm__lock_take(&d->lock);
    /* Too large to even round (0: rounding overflowed), or to round up to
     * a whole large segment (cache_miss). */
    if (size - 1 > UINT64_MAX - TDM__ROUND_LARGE) {
        tdm__alloc_req req = hit;
        return cache_oom(d, &req, hit.size);
    }
    if (d->nwaiting > 0) /* frees waiting on other streams: done yet? */
        tdm__cache_poll(d, hit.stream);
    cpool *p = tdm__cache_pool(d, kind);
    cblock *b = get_free_block(p, size, hit.stream);
    if (b == NULL) {
        tdm__alloc_req req = hit;
        tdm_status st = TDM_OK;
        b = cache_miss(d, p, kind, size, &req, &st);
        if (b == NULL)
            return st;
    }
    use_block(d, b, size, &hit);
    if (!tdm__cmap_put(&d->map, b)) {
        /* No host memory for the map: undo, as if never handed out. */
        tdm__cmap_take(&d->map, b->addr);
        tdm__rec_event(TDM_ACTION_FREE_REQUESTED, d->index, b->addr, hit.size, hit.size,
                       b->stream, 0);
        tdm__stat_add(&d->stats, b->pool, TDM__ST_ALLOCATION, -1);
        tdm__stat_add(&d->stats, b->pool, TDM__ST_ALLOCATED_BYTES, -(int64_t)b->size);
        tdm__cache_free_block(d, b, 0);
        tdm__lock_give(&d->lock);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    tdm__lock_give(&d->lock);
    *out = (void *)(uintptr_t)b->addr;
    return TDM_OK;
}

tdm_status tdm__cache_malloc(const tdm__alloc_req *req, void **out)
{
    return cache_malloc(req, out);
}

tdm_status tdm__cache_malloc_quiet(void **out, size_t size, int device, tdm_stream stream)
{
    tdm__alloc_req req = {.size = size, .device = device, .stream = stream};
    tdm_status st = cache_malloc(&req, out);
    if (__builtin_expect(st != TDM_OK, 0))
        *out = NULL;
    return st;
}

/* ---- free ---------------------------------------------------------------- */

/* n is unlinked and recycled; it leaves the tree of its kind.  Inline in
 * release_block (a free merges in two pairs of five on real traces). */
static inline __attribute__((always_inline)) void merge_into(tdm__cache_device *d, cpool *p,
                                                             cblock *b, cblock *n)
{
    if (n->mapped)
        tdm__bins_remove(&p->bins, n);
    else
        tdm__tree_remove(&p->unmapped, &n->node);
    if (n == b->prev) {
        b->addr = n->addr;
        b->prev = n->prev;
        if (n->prev)
            n->prev->next = b;
        else
            b->seg->first = b;
    } else {
        b->next = n->next;
        if (n->next)
            n->next->prev = b;
    }
    b->size += n->size;
    tdm__objpool_put(&d->block_pool, n);
}

void tdm__cache_merge_into(tdm__cache_device *d, cblock *b, cblock *n)
{
    merge_into(d, tdm__cache_pool(d, n->pool), b, n);
}

/* Back into the pool: stats, fields, merge, bins; no event.  Inline
 * (each free runs it; a pending block's later release is the other
 * caller): the call's saved registers cost ~20 instructions a pair. */
static inline __attribute__((always_inline)) void release_block(tdm__cache_device *d, cblock *b)
{
    int kind = b->pool;
    /* Its neighbours are in its segment, so in its pool too. */
    cpool *p = tdm__cache_pool(d, kind);
    tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, kind);
    tdm__stat_down(rows, TDM__ST_ACTIVE_BYTES, b->size);
    tdm__stat_down(rows, TDM__ST_REQUESTED_BYTES, b->requested);
    b->state = TDM_BLOCK_INACTIVE;
    b->requested = 0;
    b->stack_id = 0;
    b->free_stack = 0;
    b->alloc_time_ns = 0;
    atomic_store_explicit(&b->category, 0, memory_order_relaxed);
    if (b->uses != NULL) /* markers or streams to let go (rare) */
        tdm__cache_drop_uses(d, b);
    /* Never with an unmapped range: that has no memory behind it. */
    if (b->prev && b->prev->state == TDM_BLOCK_INACTIVE && b->prev->mapped)
        merge_into(d, p, b, b->prev);
    if (b->next && b->next->state == TDM_BLOCK_INACTIVE && b->next->mapped)
        merge_into(d, p, b, b->next);
    cache_in(p, b);
}

void tdm__cache_free_block(tdm__cache_device *d, cblock *b, uint32_t es)
{
    tdm__rec_event(TDM_ACTION_FREE_COMPLETED, d->index, b->addr, b->requested,
                   b->requested, b->stream, es);
    release_block(d, b);
}

int tdm__cache_owns(uint64_t ptr, int device)
{
    tdm__cache_device *d = tdm__alloc_g.cache ? tdm__alloc_g.cache[device] : NULL;
    int owns = 0;
    if (!d)
        return 0;
    tdm__lock_take(&d->lock);
    for (const cseg *s = d->segs; s && !owns; s = s->next)
        owns = ptr - s->addr < s->size;
    tdm__lock_give(&d->lock);
    return owns;
}

static inline __attribute__((always_inline)) tdm_status
cache_free(uint64_t ptr, int device, uint32_t free_stack, int on_stream, tdm_stream stream)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__cache_device *d = g->cache[device];
    tdm__lock_take(&d->lock);
    /* Under the device lock its map is authoritative: a racing free of
     * the same pointer finds it gone here. */
    cblock *b = tdm__cmap_take(&d->map, ptr);
    if (b == NULL) {
        tdm__lock_give(&d->lock);
        return TDM_UNKNOWN_POINTER;
    }
    int kind = b->pool;
    uint32_t es = 0;
    if (tdm__rec_events_carry_stacks())
        es = free_stack ? free_stack : b->stack_id;
    tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, kind);
    tdm__stat_down(rows, TDM__ST_ALLOCATION, 1);
    tdm__stat_down(rows, TDM__ST_ALLOCATED_BYTES, b->size);
    /* A free on another stream: work queued there may still use the
     * block, as with record_stream.  Without host memory to note the
     * stream, the device's work is waited for now instead. */
    if (on_stream && stream != b->stream && !tdm__cache_add_use(b, stream) &&
        g->prov->streams != NULL && !tdm__cache_capturing(d, stream))
        g->prov->streams->device_sync(g->prov->streams_ctx, d->index);
    if (b->nuses > 0) {
        /* Other streams may still be using it: it waits for them. */
        tdm__rec_event(TDM_ACTION_FREE_REQUESTED, d->index, b->addr, b->requested,
                       b->requested, b->stream, es);
        b->free_stack = es;
        tdm__cache_pend(d, b);
    } else {
        /* free_requested and free_completed at one instant: one ring
         * entry (event.h). */
        tdm__rec_event_here(TDM__ACTION_FREE_FREE, d->index, b->addr, b->requested,
                            b->requested, b->stream, es);
        release_block(d, b);
    }
    tdm__lock_give(&d->lock);
    return TDM_OK;
}

tdm_status tdm__cache_free(uint64_t ptr, int device, uint32_t free_stack, int on_stream,
                          tdm_stream stream)
{
    return cache_free(ptr, device, free_stack, on_stream, stream);
}

tdm_status tdm__cache_free_quiet(uint64_t ptr)
{
    if (tdm__alloc_g.device_count == 1) /* as tdm__cache_free_any */
        return cache_free(ptr, 0, 0, 0, 0);
    return tdm__cache_free_many(ptr, 0, 0, 0);
}

int tdm__cache_may_hold(int device, uint64_t ptr)
{
    const tdm__cache_device *d = tdm__alloc_g.cache[device];
    return ptr >= atomic_load_explicit(&d->span_lo, memory_order_relaxed) &&
           ptr < atomic_load_explicit(&d->span_hi, memory_order_relaxed);
}

tdm_status tdm__cache_free_many(uint64_t ptr, uint32_t free_stack, int on_stream,
                                tdm_stream stream)
{
    int n = tdm__alloc_g.device_count;
    for (int device = 0; device < n; device++) {
        if (!tdm__cache_may_hold(device, ptr))
            continue;
        tdm_status st = tdm__cache_free(ptr, device, free_stack, on_stream, stream);
        if (st != TDM_UNKNOWN_POINTER)
            return st;
    }
    return TDM_UNKNOWN_POINTER;
}

void tdm__cache_complete_pending(tdm__cache_device *d, int all, uint64_t stream)
{
    cblock *b = d->pending;
    while (b != NULL) {
        cblock *next = b->pend_next;
        if (b->wait != TDM__WAIT_SYNC) {
            /* Markers: a stream sync of the sim API says nothing of them;
             * a device-wide completion waits for them (unless capturing). */
            if (!all || !tdm__cache_wait_markers(d, b)) {
                b = next;
                continue;
            }
        } else if (!all) {
            for (uint32_t i = 0; i < b->nuses; i++) {
                if (b->uses[i] == stream) {
                    b->uses[i] = b->uses[--b->nuses];
                    break;
                }
            }
        }
        if (all || b->nuses == 0) {
            tdm__cache_unpend(d, b);
            tdm__cache_free_block(d, b, b->free_stack);
        }
        b = next;
    }
}
