/* alloc/cache.c: mode=cache, PyTorch's caching allocator over a provider.
 *
 * Owns the malloc and free paths of the caching allocator: rounding, pool
 * choice, best fit per stream, split and merge, on one shard or with every
 * shard's lock; a malloc that no cached block serves goes on in
 * cache_miss.c.  The rules and constants are those of PyTorch's
 * CUDACachingAllocator (docs/allocator.md).
 *
 * Invariants (checked by tdm__alloc_check after every test operation):
 * blocks tile each segment; no two inactive neighbours; a pool's bins hold
 * exactly its inactive mapped blocks; stats equal the sums over blocks.
 * Lock: the device lock (lock.h), held for the whole of malloc and free
 * (the provider's own lock nests inside it).  No process-wide state is
 * written per call: with several devices a free finds its device by the
 * address spans of the devices' segments (tdm__cache_free_any).
 * Stacks are captured before it is taken.
 *
 * Layout: the branches of the hot path whose usual outcome holds on any
 * workload (a cached block's map slot found at the first probe, no other
 * stream using it, a peak not passed, a small request, no option changing
 * the rules) say so with __builtin_expect, so that the compiler lays the
 * usual path out straight.  A pair of calls took ~33 taken branches
 * (ResNet trace) and now ~9: at ~6 instructions a cycle the front end's
 * redirects, not the instructions, had become the cost
 * (docs/allocator-performance.md, change 29).
 */
#include <stdio.h>
#include <string.h>

#include "cache_internal.h"
#include "recorder.h"

/* The configuration's max_split_size as the rules use it, worked out once
 * by tdm__cache_create (before the allocator is published as ready):
 * every allocation asks for it. */
static uint64_t max_split_bytes = UINT64_MAX;
/* Whether no roundup_power2_divisions apply (the default): requests are
 * rounded inline (tdm__alloc_round_plain). */
static int plain_rounding;

/* Caches made since the process started: a thread's memo of the shard
 * that serves a stream is good for the cache it was taken from. */
static _Atomic unsigned cache_epoch;

static inline uint64_t max_split(void)
{
    return max_split_bytes;
}

uint32_t tdm__cache_event_stack(uint32_t sid)
{
    return tdm__rec_events_carry_stacks() ? sid : 0;
}

uint64_t tdm__cache_max_split(void)
{
    return max_split_bytes;
}

tdm_status tdm__cache_create(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    uint64_t m = g->cfg.max_split_size;
    /* PyTorch clamps max_split_size_mb to at least the 20 MiB segment. */
    max_split_bytes = m == 0 ? UINT64_MAX : m < TDM__LARGE_BUFFER ? TDM__LARGE_BUFFER : m;
    plain_rounding = 1;
    atomic_fetch_add_explicit(&cache_epoch, 1, memory_order_relaxed);
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        if (g->cfg.roundup_power2_divisions[i] > 1)
            plain_rounding = 0;
    g->cache = tdm__meta_map(sizeof(tdm__cache_device *) * (size_t)g->device_count);
    if (g->cache == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    for (int i = 0; i < g->device_count; i++) {
        tdm__cache_device *d = tdm__meta_map(sizeof *d);
        tdm__cache_group *grp = tdm__meta_map(sizeof *grp);
        if (d == NULL || grp == NULL) {
            if (d != NULL)
                tdm__meta_unmap(d, sizeof *d);
            if (grp != NULL)
                tdm__meta_unmap(grp, sizeof *grp);
            tdm__cache_destroy();
            return TDM_HOST_OUT_OF_MEMORY;
        }
        /* PyTorch's garbage collection ages blocks by the whole device's
         * calls: one shard keeps that clock. */
        grp->max_shards = g->cfg.garbage_collection_threshold > 0.0 ? 1 : TDM__SHARDS_MAX;
        tdm__cache_init_shard(d, i, 0, grp);
        atomic_store_explicit(&grp->shard[0], d, memory_order_relaxed);
        atomic_store_explicit(&grp->nshards, 1, memory_order_release);
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
                    tdm__vendor_name(g->prov->vendor), lacking);
    }
    return TDM_OK;
}

/* ---- malloc ------------------------------------------------------------- */

/* What an expandable segment's block can grow to: itself and the
 * unmapped range after it. */
static uint64_t expandable_size(const cblock *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* PyTorch's get_free_block without its side effects: the block best fit
 * gives (still in the bins), or NULL. */
static inline __attribute__((always_inline)) cblock *
find_free_block(cpool *p, uint64_t size, uint64_t stream)
{
    cblock *b = tdm__bins_find_ge(&p->bins, stream, size);
    if (b == NULL)
        return NULL;
    uint64_t ms = max_split();
    /* PyTorch's best fit among expandable blocks: a larger block that can
     * grow less is taken first, keeping the segment's growing end free. */
    while (__builtin_expect(b->expandable, 0)) {
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
    return b;
}

static inline __attribute__((always_inline)) cblock *
get_free_block(cpool *p, uint64_t size, uint64_t stream)
{
    p->calls++;
    cblock *b = find_free_block(p, size, stream);
    if (b != NULL)
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
    _Static_assert(sizeof(cblock) == 128, "a field was added to cblock: zero it here");
    cblock *r = tdm__objpool_get_dirty(&d->block_pool);
    if (r == NULL)
        return NULL;
    r->node.left = r->node.right = NULL;
    r->addr = r->size = 0;
    r->prev = r->next = NULL;
    r->state = r->mapped = r->pool = r->expandable = r->wait = 0;
    atomic_store_explicit(&r->category, 0, memory_order_relaxed);
    r->bin = 0;
    r->bins = NULL;
    r->bin_link = NULL;
    r->seg = NULL;
    r->requested = r->alloc_time_ns = r->gc_base = 0;
    r->stack_id = 0;
    r->nuses = 0;
    r->cold = NULL;
    return r;
}

/* Whether PyTorch splits b to serve `size` (should_split): expandable
 * segments split every pool at 512 bytes. */
static inline int splits(const cblock *b, uint64_t size)
{
    uint64_t rest = b->size - size;
    return __builtin_expect(b->pool == TDM_POOL_SMALL || b->expandable, 1) /* (as most are) */
               ? rest >= TDM__MIN_BLOCK
               : (size < max_split() && rest > TDM__SMALL_SIZE);
}

/* Hands out `b` (in no tree) for `req`, splitting the rest off into r
 * when there is one (splits(), and a record for it); `booked`: its stats
 * are booked already (book_under_ceilings). */
static inline __attribute__((always_inline)) void
hand_out_booked(tdm__cache_device *d, cblock *b, cblock *r, uint64_t size,
                const tdm__alloc_req *req, int booked)
{
    int kind = b->pool;
    if (r != NULL) {
        tdm__cache_split_after(b, r, size);
        tdm__cache_block(d, r);
    }
    b->state = TDM_BLOCK_ACTIVE_ALLOCATED;
    b->requested = req->size;
    b->stack_id = req->stack_id;
    /* One clock read, under the lock, for the block and its event. */
    uint64_t now = req->time_ns ? tdm__alloc_now_ns() : 0;
    b->alloc_time_ns = now;
    atomic_store_explicit(&b->category, req->category, memory_order_relaxed);
    if (!booked) {
        tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, kind);
        tdm__stat_up(rows, TDM__ST_ALLOCATION, 1);
        tdm__stat_up(rows, TDM__ST_ALLOCATED_BYTES, b->size);
        tdm__stat_up(rows, TDM__ST_ACTIVE_BYTES, b->size);
        tdm__stat_up(rows, TDM__ST_REQUESTED_BYTES, req->size);
    }
    if (now != 0) /* (not b's copy: the stores above may alias it) */
        tdm__rec_event_inline(now, req->category, TDM_ACTION_ALLOC, d->index,
                              b->addr, req->size, req->size, req->stream, /* (b's) */
                              tdm__cache_event_stack(req->stack_id));
}

/* Hands out `b` with its stats booked here. */
static inline __attribute__((always_inline)) void
hand_out(tdm__cache_device *d, cblock *b, cblock *r, uint64_t size, const tdm__alloc_req *req)
{
    hand_out_booked(d, b, r, size, req, 0);
}

/* hand_out, splitting as PyTorch would; without host memory for the
 * rest's record, the whole block is handed out. */
static inline __attribute__((always_inline)) void
use_block(tdm__cache_device *d, cblock *b, uint64_t size, const tdm__alloc_req *req)
{
    hand_out(d, b, splits(b, size) ? new_block(d) : NULL, size, req);
}

/* The last step of a malloc: b into the pointer map, the lock(s) given
 * back. */
static inline __attribute__((always_inline)) tdm_status
map_in(tdm__cache_device *d, cblock *b, const tdm__alloc_req *hit, void **out, int all)
{
    if (!tdm__cmap_put(&d->map, b)) {
        /* No host memory for the map: undo, as if never handed out. */
        tdm__cmap_take(&d->map, b->addr);
        tdm__rec_event(TDM_ACTION_FREE_REQUESTED, d->index, b->addr, hit->size, hit->size,
                       tdm__cblock_stream(b), 0);
        tdm__stat_add(&d->stats, b->pool, TDM__ST_ALLOCATION, -1);
        tdm__stat_add(&d->stats, b->pool, TDM__ST_ALLOCATED_BYTES, -(int64_t)b->size);
        tdm__cache_free_block(d, b, 0);
        tdm__cache_give_held(d, all);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    tdm__cache_give_held(d, all);
    *out = (void *)(uintptr_t)b->addr;
    return TDM_OK;
}

/* A malloc of `size` (rounded) in pool `kind` on shard d, its lock taken
 * (`all`: every shard's).  `in` is only read: the request lives in
 * `hit`, whose address goes nowhere (the calls off the hit path get
 * copies), so the quiet body's constants fold and nothing of it is
 * stored on the way. */
static inline __attribute__((always_inline)) tdm_status
malloc_held(tdm__cache_device *d, const tdm__alloc_req *in, uint64_t size, int kind,
            void **out, int all)
{
    const tdm__alloc_req hit = *in;
    /* Too large to even round (0: rounding overflowed), or to round up to
     * a whole large segment (tdm__cache_miss). */
    if (size - 1 > UINT64_MAX - TDM__ROUND_LARGE) {
        tdm__alloc_req req = hit;
        return tdm__cache_oom(d, &req, hit.size, all);
    }
    if (d->nwaiting > 0) /* frees waiting on other streams: done yet? */
        tdm__cache_poll(d, hit.stream);
    cpool *p = tdm__cache_pool(d, kind);
    cblock *b = get_free_block(p, size, hit.stream);
    if (b == NULL) {
        tdm__alloc_req req = hit;
        tdm_status st = TDM_OK;
        b = tdm__cache_miss(d, p, kind, size, &req, &st, all);
        if (b == NULL)
            return st;
    }
    use_block(d, b, size, &hit);
    return map_in(d, b, &hit, out, all);
}

/* The shard a thread last allocated on or freed from: its frees look
 * there first. */
static __thread uint8_t shard_hint;

static __thread struct {
    unsigned epoch;
    tdm__cache_group *grp;
    uint64_t stream;
    tdm__cache_device *shard;
} stream_memo;

/* The shard serving `stream` on the device of group grp, NULL while none
 * is given it: as the thread last found it (a stream keeps its shard). */
static inline tdm__cache_device *shard_for(tdm__cache_group *grp, uint64_t stream)
{
    unsigned epoch = atomic_load_explicit(&cache_epoch, memory_order_relaxed);
    if (stream_memo.grp == grp && stream_memo.stream == stream && stream_memo.epoch == epoch)
        return stream_memo.shard;
    tdm__cache_device *d = tdm__cache_shard_for(grp, stream);
    if (d != NULL) {
        stream_memo.epoch = epoch;
        stream_memo.grp = grp;
        stream_memo.stream = stream;
        stream_memo.shard = d;
    }
    return d;
}

/* One stat up by v: whether it passed its ceiling (a shard's stat `peak`
 * while the device has shards, cache_shard.c). */
static inline int up_past_ceiling(tdm_stat *s, uint64_t v)
{
    int64_t now = s->current + (int64_t)v;
    s->current = now;
    return now > s->peak;
}

/* Books on shard d the stats of a malloc that makes a block of `bytes`
 * allocated in pool `pool` for a request of `req` (hand_out's four, both
 * rows) if they all stay under their ceilings: whether they did; if not,
 * nothing is booked.  Booking and testing at once: a test first and the
 * booking after read every stat twice. */
static inline int book_under_ceilings(tdm__cache_device *d, int pool, uint64_t bytes,
                                      uint64_t req)
{
    tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, pool);
    tdm_stat *r[2] = {rows.all, rows.pool};
    int past = 0;
    for (int k = 0; k < 2; k++) {
        past |= up_past_ceiling(&r[k][TDM__ST_ALLOCATION], 1);
        past |= up_past_ceiling(&r[k][TDM__ST_ALLOCATED_BYTES], bytes);
        past |= up_past_ceiling(&r[k][TDM__ST_ACTIVE_BYTES], bytes);
        past |= up_past_ceiling(&r[k][TDM__ST_REQUESTED_BYTES], req);
    }
    if (__builtin_expect(past, 0)) {
        for (int k = 0; k < 2; k++) {
            r[k][TDM__ST_ALLOCATION].current -= 1;
            r[k][TDM__ST_ALLOCATED_BYTES].current -= (int64_t)bytes;
            r[k][TDM__ST_ACTIVE_BYTES].current -= (int64_t)bytes;
            r[k][TDM__ST_REQUESTED_BYTES].current -= (int64_t)req;
        }
    }
    return !past;
}

/* A sharded malloc on shard d alone (its lock held): a cached block that
 * keeps the shard under its ceilings, with nothing pending anywhere.
 * TDM_OK with the lock given back, or TDM_INTERNAL (nothing changed, the
 * lock still held) when the call needs every lock. */
static inline __attribute__((always_inline)) tdm_status
malloc_one_shard(tdm__cache_device *d, const tdm__alloc_req *hit, uint64_t size, int kind,
                 void **out)
{
    if (size - 1 > UINT64_MAX - TDM__ROUND_LARGE ||
        atomic_load_explicit(&d->group->waiting, memory_order_relaxed) != 0)
        return TDM_INTERNAL;
    cpool *p = tdm__cache_pool(d, kind);
    cblock *b = find_free_block(p, size, hit->stream);
    if (b == NULL)
        return TDM_INTERNAL;
    int split = splits(b, size);
    cblock *r = split ? new_block(d) : NULL;
    if (split && r == NULL)
        return TDM_INTERNAL;
    int all = 0;
    if (!book_under_ceilings(d, b->pool, split ? size : b->size, hit->size)) {
        /* The others' locks if they are free now: the call goes on under
         * every lock (cache_shard.c), without starting again. */
        all = tdm__cache_try_lock_others(d->group, d);
        if (!all) {
            if (r != NULL)
                tdm__objpool_put(&d->block_pool, r);
            return TDM_INTERNAL;
        }
        tdm__cache_peaks_rebase(d->group, d, TDM__REBASE_BEGIN, b->pool);
    }
    p->calls++;
    tdm__bins_remove(&p->bins, b);
    /* Under every lock the stats are booked as ever, their ceilings
     * pushed up, which the rebase at its end reads. */
    hand_out_booked(d, b, r, size, hit, !all);
    return map_in(d, b, hit, out, all);
}

/* A malloc under every shard's lock: a stream's first, one that needs
 * new memory or would pass a ceiling, or one while frees wait. */
static __attribute__((noinline)) tdm_status
malloc_all(tdm__cache_device *d0, const tdm__alloc_req *in, uint64_t size, int kind, void **out)
{
    tdm__cache_group *grp = d0->group;
    tdm__cache_lock_all(grp);
    tdm__cache_device *d = tdm__cache_shard_assign(grp, in->stream);
    if (d == NULL) {
        tdm__cache_unlock_all(grp);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    /* PyTorch's process_events: every stream's frees that are done. */
    if (atomic_load_explicit(&grp->waiting, memory_order_relaxed) != 0)
        for (int i = 0; i < tdm__cache_nshards(grp); i++)
            if (tdm__cache_shard(grp, i)->nwaiting > 0)
                tdm__cache_poll(tdm__cache_shard(grp, i), in->stream);
    tdm__cache_peaks_rebase(grp, d, TDM__REBASE_BEGIN, -1);
    shard_hint = d->shard;
    return malloc_held(d, in, size, kind, out, 1);
}

/* A malloc of a device that has shards, or of a stream that is not the
 * one its only shard has served. */
static __attribute__((noinline)) tdm_status
malloc_sharded(tdm__cache_device *d0, const tdm__alloc_req *in, uint64_t size, int kind,
               void **out)
{
    tdm__cache_device *d = shard_for(d0->group, in->stream);
    if (d != NULL) {
        tdm__lock_take(&d->lock);
        /* One shard for every stream (cache_shard.c); stays so while its
         * lock is held. */
        if (tdm__cache_nshards(d0->group) == 1)
            return malloc_held(d, in, size, kind, out, 0);
        tdm__lock_give(&d->lock); /* shards came meanwhile */
    }
    return malloc_all(d0, in, size, kind, out);
}

/* The body of both entries: inline in each, so that the quiet one
 * (nothing recorded) is compiled with the recording's branches folded
 * away. */
static inline __attribute__((always_inline)) tdm_status
cache_malloc(const tdm__alloc_req *in, void **out)
{
    const tdm__alloc_req hit = *in;
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__cache_device *d = g->cache[hit.device];
    uint64_t size = __builtin_expect(plain_rounding, 1) ? tdm__alloc_round_plain(hit.size)
                                   : tdm__alloc_round_size(hit.size);
    int kind = size != 0 && size <= TDM__SMALL_SIZE ? TDM_POOL_SMALL : TDM_POOL_LARGE;
    if (__builtin_expect(atomic_load_explicit(&d->solo, memory_order_relaxed) == TDM__SOLO_SHARDS,
                         0)) {
        tdm__cache_device *s = shard_for(d->group, hit.stream);
        if (s != NULL) {
            tdm__lock_take(&s->lock);
            tdm_status st = malloc_one_shard(s, &hit, size, kind, out);
            if (st != TDM_INTERNAL) {
                shard_hint = s->shard;
                return st;
            }
            tdm__lock_give(&s->lock);
        }
        tdm__alloc_req req = hit; /* (a copy: hit's address goes nowhere) */
        return malloc_all(d, &req, size, kind, out);
    }
    tdm__lock_take(&d->lock);
    /* The device's one shard, for the stream it serves: as ever.  (Both
     * change only under its lock.) */
    if (__builtin_expect(atomic_load_explicit(&d->solo, memory_order_relaxed) != TDM__SOLO_STREAM ||
                             atomic_load_explicit(&d->solo_stream, memory_order_relaxed) !=
                                 hit.stream,
                         0)) {
        tdm__lock_give(&d->lock);
        tdm__alloc_req req = hit;
        return malloc_sharded(d, &req, size, kind, out);
    }
    return malloc_held(d, &hit, size, kind, out, 0);
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
    b->alloc_time_ns = 0;
    atomic_store_explicit(&b->category, 0, memory_order_relaxed);
    if (__builtin_expect(b->cold != NULL, 0)) /* markers or streams to let go (rare) */
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
                   b->requested, tdm__cblock_stream(b), es);
    release_block(d, b);
}

/* A free of b, just taken from shard d's map (its lock held); `record`:
 * 0 in the quiet entry (nothing recorded when it was called), whose free
 * then has no event to look at. */
static inline __attribute__((always_inline)) void
free_held(tdm__cache_device *d, cblock *b, uint32_t free_stack, int on_stream, tdm_stream stream,
          int record)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    int kind = b->pool;
    uint32_t es = 0;
    if (__builtin_expect(tdm__rec_events_carry_stacks(), 0))
        es = free_stack ? free_stack : b->stack_id;
    tdm__stat_rows rows = tdm__stat_rows_of(&d->stats, kind);
    tdm__stat_down(rows, TDM__ST_ALLOCATION, 1);
    tdm__stat_down(rows, TDM__ST_ALLOCATED_BYTES, b->size);
    /* A free on another stream: work queued there may still use the
     * block, as with record_stream.  Without host memory to note the
     * stream, the device's work is waited for now instead. */
    if (on_stream && stream != tdm__cblock_stream(b) && !tdm__cache_add_use(d, b, stream) &&
        g->prov->streams != NULL && !tdm__cache_capturing(d, stream))
        g->prov->streams->device_sync(g->prov->streams_ctx, d->index);
    if (__builtin_expect(b->nuses > 0, 0)) {
        /* Other streams may still be using it: it waits for them. */
        tdm__rec_event(TDM_ACTION_FREE_REQUESTED, d->index, b->addr, b->requested,
                       b->requested, tdm__cblock_stream(b), es);
        b->cold->free_stack = es; /* (uses: it has its cold part) */
        tdm__cache_pend(d, b);
    } else {
        /* free_requested and free_completed at one instant: one ring
         * entry (event.h). */
        if (record)
            tdm__rec_event_here(TDM__ACTION_FREE_FREE, d->index, b->addr, b->requested,
                                b->requested, tdm__cblock_stream(b), es);
        release_block(d, b);
    }
}

/* Whether shard d's segments can hold ptr. */
static inline int shard_may_hold(const tdm__cache_device *d, uint64_t ptr)
{
    return ptr >= atomic_load_explicit(&d->span_lo, memory_order_relaxed) &&
           ptr < atomic_load_explicit(&d->span_hi, memory_order_relaxed);
}

/* A free of ptr if shard d holds it, under d's lock: whether it did.
 * Under the shard's lock its map is authoritative: a racing free of the
 * same pointer finds it gone here. */
static inline __attribute__((always_inline)) int
free_in(tdm__cache_device *d, uint64_t ptr, uint32_t free_stack, int on_stream,
        tdm_stream stream, int record)
{
    tdm__lock_take(&d->lock);
    cblock *b = tdm__cmap_take(&d->map, ptr);
    if (b != NULL)
        free_held(d, b, free_stack, on_stream, stream, record);
    tdm__lock_give(&d->lock);
    return b != NULL;
}

/* A free on a device with shards, in the shards other than `tried` (the
 * one already asked, or -1) whose span covers ptr.  A free only lowers
 * stats, so one shard's lock does. */
static __attribute__((noinline)) tdm_status
free_sharded(tdm__cache_device *d0, uint64_t ptr, uint32_t free_stack, int on_stream,
             tdm_stream stream, int tried)
{
    tdm__cache_group *grp = d0->group;
    int n = tdm__cache_nshards(grp);
    for (int i = 0; i < n; i++) {
        tdm__cache_device *d = tdm__cache_shard(grp, i);
        if (i == tried || !shard_may_hold(d, ptr) ||
            !free_in(d, ptr, free_stack, on_stream, stream, 1))
            continue;
        shard_hint = (uint8_t)i;
        return TDM_OK;
    }
    return TDM_UNKNOWN_POINTER;
}

/* `record`: as free_held's (the shards' path records as ever). */
static inline __attribute__((always_inline)) tdm_status
cache_free(uint64_t ptr, int device, uint32_t free_stack, int on_stream, tdm_stream stream,
           int record)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__cache_device *d = g->cache[device];
    if (__builtin_expect(atomic_load_explicit(&d->solo, memory_order_relaxed) == TDM__SOLO_SHARDS,
                         0)) {
        /* Shards: the one this thread used last first, most often the
         * one. */
        tdm__cache_device *h = tdm__cache_shard(d->group, shard_hint);
        if (h == NULL || !shard_may_hold(h, ptr))
            return free_sharded(d, ptr, free_stack, on_stream, stream, -1);
        if (free_in(h, ptr, free_stack, on_stream, stream, record))
            return TDM_OK;
        return free_sharded(d, ptr, free_stack, on_stream, stream, h->shard);
    }
    if (free_in(d, ptr, free_stack, on_stream, stream, record))
        return TDM_OK;
    /* Shards may have come since the look above (shard 0, d, was asked). */
    if (atomic_load_explicit(&d->solo, memory_order_relaxed) == TDM__SOLO_SHARDS)
        return free_sharded(d, ptr, free_stack, on_stream, stream, 0);
    return TDM_UNKNOWN_POINTER;
}

tdm_status tdm__cache_free(uint64_t ptr, int device, uint32_t free_stack, int on_stream,
                          tdm_stream stream)
{
    return cache_free(ptr, device, free_stack, on_stream, stream, 1);
}

tdm_status tdm__cache_free_quiet(uint64_t ptr)
{
    if (__builtin_expect(tdm__alloc_g.device_count == 1, 1)) /* as tdm__cache_free_any */
        return cache_free(ptr, 0, 0, 0, 0, 0);
    return tdm__cache_free_many(ptr, 0, 0, 0);
}

int tdm__cache_may_hold(int device, uint64_t ptr)
{
    return shard_may_hold(tdm__alloc_g.cache[device], ptr); /* shard 0: the device's span */
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
