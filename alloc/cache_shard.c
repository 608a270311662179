/* alloc/cache_shard.c: a device's caching allocator as shards by stream.
 *
 * Owns the group of a device's shards (cache_internal.h): which shard
 * serves a stream, taking every shard's lock, the device's exact peaks
 * while it has more than one shard, and the shards' making and end.
 *
 * Streams: the first stream a device allocates for is served by shard 0;
 * each new stream after it gets a new shard while there are fewer than
 * TDM__SHARDS_MAX, then shares one (round robin).  A stream keeps its
 * shard for good, so its blocks (which never serve another stream) are
 * all in one shard.  A setting that needs one device-wide pool
 * (garbage_collection_threshold: PyTorch ages cached blocks by the calls
 * of the whole device) keeps every stream in shard 0.
 *
 * Peaks (escrow): with shards, a stat's current value is the sum of the
 * shards' and must never pass the device's peak unseen, yet no call may
 * write a line that the other shards' calls write too.  So each shard's
 * stat carries a ceiling (its `peak` field) and the shards' ceilings sum
 * to the device's peak.  A malloc that stays under its shard's ceilings
 * needs no other shard: the device's sum cannot have passed the peak.
 * One that would pass one takes every lock (a sweep): the peak becomes
 * the sum's true high-water mark, then the room below it is shared out
 * again, to the shard that ran short what the others do not keep
 * (tdm__cache_peaks_rebase).  The peak is so exactly PyTorch's, the
 * maximum of the device's sum over the calls in the order the locks gave
 * them.
 *
 * Lock order: shards by number.  A call holding one shard's lock that
 * needs them all gives it back first and takes them from shard 0.
 */
#include <string.h>

#include "cache_internal.h"

static unsigned stream_slot(uint64_t stream)
{
    return (unsigned)((stream * 0x9e3779b97f4a7c15ULL) >> 58); /* 64 slots */
}

/* The stream table's slot of `stream`, or the empty slot where it would
 * go; -1 when the table is full without it. */
static int slot_of(tdm__cache_group *grp, uint64_t stream)
{
    unsigned i = stream_slot(stream);
    for (unsigned k = 0; k < TDM__STREAM_SLOTS; k++, i = (i + 1) % TDM__STREAM_SLOTS)
        if (atomic_load_explicit(&grp->stream_shard[i], memory_order_acquire) == 0 ||
            atomic_load_explicit(&grp->stream_key[i], memory_order_relaxed) == stream)
            return (int)i;
    return -1;
}

tdm__cache_device *tdm__cache_shard_for(tdm__cache_group *grp, uint64_t stream)
{
    int i = slot_of(grp, stream);
    if (i < 0) { /* the table is full: later streams share shards by their hash */
        int n = tdm__cache_nshards(grp);
        return tdm__cache_shard(grp, (int)(stream_slot(stream) % (unsigned)n));
    }
    unsigned s = atomic_load_explicit(&grp->stream_shard[i], memory_order_acquire);
    return s == 0 ? NULL : tdm__cache_shard(grp, (int)s - 1);
}

int tdm__cache_lock_all(tdm__cache_group *grp)
{
    int n = 0;
    /* Shards only come while every lock is held, so once shard 0's is,
     * the count read after it is final. */
    for (;;) {
        int want = tdm__cache_nshards(grp);
        for (; n < want; n++)
            tdm__lock_take_sweep(&tdm__cache_shard(grp, n)->lock);
        if (tdm__cache_nshards(grp) == n)
            return n;
    }
}

int tdm__cache_try_lock_others(tdm__cache_group *grp, const tdm__cache_device *mine)
{
    int n = tdm__cache_nshards(grp);
    for (int i = 0; i < n; i++) {
        if (i == mine->shard || tdm__lock_try_as(&tdm__cache_shard(grp, i)->lock, TDM__LOCK_SWEEP))
            continue;
        while (--i >= 0)
            if (i != mine->shard)
                tdm__lock_give(&tdm__cache_shard(grp, i)->lock);
        return 0;
    }
    return 1;
}

void tdm__cache_unlock_all(tdm__cache_group *grp)
{
    for (int i = tdm__cache_nshards(grp) - 1; i >= 0; i--)
        tdm__lock_give(&tdm__cache_shard(grp, i)->lock);
}

/* A new shard like shard 0 (its lock taken); NULL without host memory. */
static tdm__cache_device *new_shard(tdm__cache_group *grp, int i)
{
    tdm__cache_device *d0 = tdm__cache_shard(grp, 0);
    tdm__cache_device *d = tdm__meta_map(sizeof *d);
    if (d == NULL)
        return NULL;
    tdm__cache_init_shard(d, d0->index, i, grp);
    memcpy(d->page, d0->page, sizeof d->page);
    tdm__lock_take(&d->lock);
    return d;
}

/* The device's stats were shard 0's alone: they become the peaks, and
 * its peaks its ceilings (they already sum to the peaks). */
static void begin_escrow(tdm__cache_group *grp)
{
    tdm__cache_device *d0 = tdm__cache_shard(grp, 0);
    for (int p = 0; p < 3; p++)
        for (int r = 0; r < TDM__ST_COUNT; r++)
            grp->peak[p][r] = d0->stats.st[p][r].peak;
}

tdm__cache_device *tdm__cache_shard_assign(tdm__cache_group *grp, uint64_t stream)
{
    tdm__cache_device *d = tdm__cache_shard_for(grp, stream);
    if (d != NULL)
        return d;
    int n = tdm__cache_nshards(grp), target;
    if (grp->nstreams == 0 || grp->max_shards == 1) {
        target = 0;
    } else if (n < grp->max_shards) {
        tdm__cache_device *s = new_shard(grp, n);
        if (s == NULL)
            return NULL;
        if (n == 1)
            begin_escrow(grp);
        atomic_store_explicit(&grp->shard[n], s, memory_order_release);
        atomic_store_explicit(&grp->nshards, n + 1, memory_order_release);
        atomic_store_explicit(&tdm__cache_shard(grp, 0)->solo, TDM__SOLO_SHARDS,
                              memory_order_release);
        target = n;
    } else {
        target = grp->nstreams % n;
    }
    int i = slot_of(grp, stream); /* an empty one, or none */
    if (i >= 0) {
        atomic_store_explicit(&grp->stream_key[i], stream, memory_order_relaxed);
        atomic_store_explicit(&grp->stream_shard[i], (uint8_t)(target + 1),
                              memory_order_release);
    }
    if (grp->nstreams++ == 0) {
        tdm__cache_device *d0 = tdm__cache_shard(grp, 0);
        atomic_store_explicit(&d0->solo_stream, stream, memory_order_relaxed);
        atomic_store_explicit(&d0->solo, TDM__SOLO_STREAM, memory_order_release);
    }
    return tdm__cache_shard_for(grp, stream);
}

/* Whether stat r of row p is one a rebase of `pool` (-1: every stat)
 * looks at: a cached block handed out in that pool moves only the
 * allocation's four stats of its pool's row and of the all-pools row. */
static int rebased(int pool, int p, int r)
{
    if (pool < 0)
        return 1;
    return (p == 0 || p == 2 - pool) &&
           (r == TDM__ST_ALLOCATED_BYTES || r == TDM__ST_ACTIVE_BYTES ||
            r == TDM__ST_REQUESTED_BYTES || r == TDM__ST_ALLOCATION);
}

void tdm__cache_peaks_rebase(tdm__cache_group *grp, const tdm__cache_device *mine, int when,
                             int pool)
{
    int n = tdm__cache_nshards(grp);
    if (n < 2)
        return; /* one shard: its peaks are the device's */
    if (when == TDM__REBASE_BEGIN)
        grp->rebase_pool = (int8_t)pool;
    pool = grp->rebase_pool;
    const tdm__stats_acc *ms = &tdm__cache_shard(grp, mine->shard)->stats;
    /* The stats rise together (bytes, counts, requests): when `mine`
     * outgrew its ceiling of one, it gets a share of every one. */
    int outgrew = 0;
    if (when == TDM__REBASE_END)
        for (int p = 0; p < 3; p++)
            for (int r = 0; r < TDM__ST_COUNT; r++)
                if (rebased(pool, p, r))
                    outgrew |= ms->st[p][r].current > grp->mine_had[p][r];
    int busy = 0; /* other shards that have not gone quiet */
    for (int i = 0; outgrew && i < n && i < TDM__SHARDS_MAX; i++) {
        if (i == mine->shard)
            grp->idle[i] = 0;
        else if (grp->idle[i] < TDM__IDLE_REBASES)
            busy += ++grp->idle[i] < TDM__IDLE_REBASES;
    }
    for (int p = 0; p < 3; p++) {
        for (int r = 0; r < TDM__ST_COUNT; r++) {
            if (!rebased(pool, p, r))
                continue;
            int64_t ceilings = 0, sum = 0;
            for (int i = 0; i < n; i++) {
                const tdm_stat *s = &tdm__cache_shard(grp, i)->stats.st[p][r];
                ceilings += s->peak;
                sum += s->current;
                int64_t *most = &grp->most[i][p][r];
                if (s->current > *most)
                    *most = s->current;
            }
            /* Since the last rebase only `mine` went up, the others' ceilings
             * being their values then (or above, shares they did not use):
             * a ceiling it pushed up (tdm__stat_up1) is its high-water mark,
             * and the sum with the others' is the device's. */
            int64_t *peak = &grp->peak[p][r];
            if (ceilings > *peak)
                *peak = ceilings;
            int64_t room = *peak - sum, room_then = room;
            tdm_stat *m = &tdm__cache_shard(grp, mine->shard)->stats.st[p][r];
            if (when == TDM__REBASE_BEGIN)
                grp->mine_had[p][r] = m->peak;
            /* `mine` outgrew its ceilings of before: the others keep part
             * of the shares they did not use (below) and it gets the rest;
             * else they get them back as they were, so a call under every
             * lock for another reason (a new segment) moves nothing. */
            for (int i = 0; i < n; i++) {
                if (i == mine->shard)
                    continue;
                tdm_stat *s = &tdm__cache_shard(grp, i)->stats.st[p][r];
                int64_t *kept = &grp->unused[i][p][r];
                /* While `mine` goes on alone, the others may not grow: their
                 * unused shares wait in `unused`. */
                if (when != TDM__REBASE_END) {
                    *kept += s->peak - s->current;
                    s->peak = s->current;
                } else {
                    int64_t want = *kept;
                    if (outgrew && grp->idle[i] >= TDM__IDLE_REBASES) {
                        want = *kept / 2; /* gone quiet: half, each time */
                    } else if (outgrew) {
                        /* What it needs to reach its highest so far (as far
                         * as rebases saw it), and no more than its part of
                         * half the room: shards that peak together keep
                         * their own peaks, shards that take turns share. */
                        int64_t need = grp->most[i][p][r] - s->current;
                        int64_t part = room_then / (2 * (busy > 0 ? busy : 1));
                        want = need < want ? need : want;
                        want = part < want ? part : want;
                        want = want > 0 ? want : 0;
                    }
                    int64_t give = want < room ? want : room;
                    s->peak = s->current + give;
                    room -= give;
                    *kept = 0;
                }
            }
            m->peak = m->current + room;
        }
    }
}

void tdm__cache_peaks_reset(tdm__cache_group *grp)
{
    int n = tdm__cache_nshards(grp);
    memset(grp->most, 0, sizeof grp->most);
    for (int i = 0; i < n; i++)
        tdm__stats_reset_peaks(&tdm__cache_shard(grp, i)->stats);
    for (int p = 0; p < 3; p++) {
        for (int r = 0; r < TDM__ST_COUNT; r++) {
            int64_t sum = 0;
            for (int i = 0; i < n; i++)
                sum += tdm__cache_shard(grp, i)->stats.st[p][r].current;
            grp->peak[p][r] = sum;
        }
    }
}

void tdm__cache_stats_of(tdm__cache_group *grp, tdm__stats_acc *out)
{
    int n = tdm__cache_nshards(grp);
    *out = tdm__cache_shard(grp, 0)->stats;
    for (int i = 1; i < n; i++) {
        const tdm__stats_acc *a = &tdm__cache_shard(grp, i)->stats;
        for (int p = 0; p < 3; p++) {
            for (int r = 0; r < TDM__ST_COUNT; r++) {
                out->st[p][r].current += a->st[p][r].current;
                out->st[p][r].freed += a->st[p][r].freed;
            }
        }
        out->num_alloc_retries += a->num_alloc_retries;
        out->num_ooms += a->num_ooms;
    }
    if (n > 1)
        for (int p = 0; p < 3; p++)
            for (int r = 0; r < TDM__ST_COUNT; r++)
                out->st[p][r].peak = grp->peak[p][r];
}

/* ---- a device's shards made and given back ---------------------------- */

/* Unmapped ranges of expandable segments: by stream, then address. */
static int cmp_unmapped(const tdm__tnode *a, const tdm__tnode *b)
{
    const cblock *x = TDM__CONTAINER_OF(a, cblock, node);
    const cblock *y = TDM__CONTAINER_OF(b, cblock, node);
    uint64_t xs = tdm__cblock_stream(x), ys = tdm__cblock_stream(y);
    if (xs != ys)
        return xs < ys ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void tdm__cache_lock_device(int device, int take)
{
    tdm__cache_group *grp = tdm__alloc_g.cache[device]->group;
    if (take > 0) {
        tdm__cache_lock_all(grp);
    } else if (take == 0) {
        tdm__cache_unlock_all(grp);
    } else {
        for (int i = 0; i < tdm__cache_nshards(grp); i++)
            tdm__lock_init(&tdm__cache_shard(grp, i)->lock);
    }
}

void tdm__cache_init_shard(tdm__cache_device *d, int index, int shard, tdm__cache_group *grp)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__lock_init(&d->lock);
    d->index = index;
    d->shard = (uint8_t)shard;
    d->group = grp;
    atomic_store_explicit(&d->solo, shard == 0 ? TDM__SOLO_NEW : TDM__SOLO_SHARDS,
                          memory_order_relaxed);
    atomic_store_explicit(&d->span_lo, UINT64_MAX, memory_order_relaxed);
    tdm__bins_init(&d->small.bins, g->cfg.reference_index);
    tdm__bins_init(&d->large.bins, g->cfg.reference_index);
    tdm__tree_init(&d->small.unmapped, cmp_unmapped);
    tdm__tree_init(&d->large.unmapped, cmp_unmapped);
    d->small.kind = TDM_POOL_SMALL;
    d->large.kind = TDM_POOL_LARGE;
    tdm__objpool_init(&d->block_pool, sizeof(cblock));
    tdm__objpool_init(&d->seg_pool, sizeof(cseg));
    tdm__objpool_init(&d->cold_pool, sizeof(cblock_cold));
}

static void destroy_shard(tdm__cache_device *d)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    int i = d->index;
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
    tdm__objpool_destroy(&d->cold_pool);
    tdm__meta_unmap(d, sizeof *d);
}

void tdm__cache_destroy(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (g->cache == NULL)
        return;
    for (int i = 0; i < g->device_count; i++) {
        tdm__cache_device *d0 = g->cache[i];
        if (d0 == NULL)
            continue;
        tdm__cache_group *grp = d0->group;
        for (int k = tdm__cache_nshards(grp) - 1; k >= 0; k--)
            destroy_shard(tdm__cache_shard(grp, k));
        tdm__meta_unmap(grp, sizeof *grp);
    }
    tdm__meta_unmap(g->cache, sizeof(tdm__cache_device *) * (size_t)g->device_count);
    g->cache = NULL;
}
