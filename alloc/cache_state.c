/* alloc/cache_state.c: the caching allocator seen from outside: stats,
 * empty_cache, record_stream and stream sync, re-tagging, the segment a
 * block lies in, the state handed to a snapshot, and the invariant checker.
 *
 * Lock: each function takes the device lock for as long as it reads or
 * changes that device; the snapshot copy is made under every device's
 * lock at once (one cut) and the visitor is called after they are
 * released.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_internal.h"

static tdm__cache_group *group(int device)
{
    return tdm__alloc_g.cache[device]->group;
}

void tdm__cache_stats(int device, int pool, tdm_stats *out)
{
    tdm__cache_group *grp = group(device);
    tdm__stats_acc sum;
    tdm__cache_lock_all(grp);
    tdm__cache_stats_of(grp, &sum);
    tdm__cache_unlock_all(grp);
    tdm__stats_export(&sum, pool, out);
}

void tdm__cache_current_bytes(int device, int64_t *allocated, int64_t *reserved)
{
    tdm__cache_group *grp = group(device);
    int64_t a = 0, r = 0;
    tdm__cache_lock_all(grp);
    for (int i = 0, n = tdm__cache_nshards(grp); i < n; i++) {
        const tdm__stats_acc *st = &tdm__cache_shard(grp, i)->stats;
        a += st->st[0][TDM__ST_ALLOCATED_BYTES].current;
        r += st->st[0][TDM__ST_RESERVED_BYTES].current;
    }
    tdm__cache_unlock_all(grp);
    *allocated = a;
    *reserved = r;
}

void tdm__cache_reset_peaks(int device)
{
    tdm__cache_group *grp = group(device);
    tdm__cache_lock_all(grp);
    tdm__cache_peaks_reset(grp);
    tdm__cache_unlock_all(grp);
}

tdm_status tdm__cache_empty(int device)
{
    tdm__cache_group *grp = group(device);
    /* Only downs: every shard's ceilings stay above its values. */
    tdm__cache_lock_all(grp);
    tdm__cache_release_every_shard(grp, 0);
    tdm__cache_unlock_all(grp);
    return TDM_OK;
}

void tdm__cache_sync(int device, int all_streams, tdm_stream stream)
{
    tdm__cache_group *grp = group(device);
    for (int i = 0; i < tdm__cache_nshards(grp); i++) {
        tdm__cache_device *d = tdm__cache_shard(grp, i);
        tdm__lock_take(&d->lock);
        tdm__cache_complete_pending(d, all_streams, stream);
        tdm__lock_give(&d->lock);
    }
}

/* The shard whose map holds ptr, its lock taken; NULL if none. */
static tdm__cache_device *shard_holding(int device, uint64_t ptr, cblock **out)
{
    tdm__cache_group *grp = group(device);
    for (int i = 0; i < tdm__cache_nshards(grp); i++) {
        tdm__cache_device *d = tdm__cache_shard(grp, i);
        tdm__lock_take(&d->lock);
        cblock *b = tdm__cmap_get(&d->map, ptr);
        if (b != NULL) {
            *out = b;
            return d;
        }
        tdm__lock_give(&d->lock);
    }
    return NULL;
}

int tdm__cache_device_of(uint64_t ptr)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    for (int device = 0; device < g->device_count; device++) {
        if (!tdm__cache_may_hold(device, ptr))
            continue;
        cblock *b;
        tdm__cache_device *d = shard_holding(device, ptr, &b);
        if (d != NULL) {
            tdm__lock_give(&d->lock);
            return device;
        }
    }
    return -1;
}

tdm_status tdm__cache_tag(uint64_t ptr, int device, uint8_t category)
{
    /* The block may have been freed since the caller looked: look again. */
    cblock *b;
    tdm__cache_device *d = shard_holding(device, ptr, &b);
    if (d == NULL)
        return TDM_UNKNOWN_POINTER;
    atomic_store_explicit(&b->category, category, memory_order_relaxed);
    tdm__lock_give(&d->lock);
    return TDM_OK;
}

tdm_status tdm__cache_record_stream(uint64_t ptr, int device, tdm_stream stream)
{
    cblock *b;
    tdm__cache_device *d = shard_holding(device, ptr, &b);
    if (d == NULL)
        return TDM_UNKNOWN_POINTER;
    tdm_status st = TDM_OK;
    if (stream != tdm__cblock_stream(b) && !tdm__cache_add_use(d, b, stream))
        st = TDM_HOST_OUT_OF_MEMORY;
    tdm__lock_give(&d->lock);
    return st;
}

int tdm__cache_base_of(uint64_t ptr, int device, uint64_t *base, uint64_t *size)
{
    cblock *b;
    tdm__cache_device *d = shard_holding(device, ptr, &b);
    if (d == NULL)
        return 0;
    /* An expandable segment is a reserved range of separately created
     * pages: no allocation holds more than the block's own. */
    *base = b->expandable ? b->addr : b->seg->addr;
    *size = b->expandable ? b->size : b->seg->size;
    tdm__lock_give(&d->lock);
    return 1;
}

int tdm__cache_owns(uint64_t ptr, int device)
{
    tdm__cache_device *d0 = tdm__alloc_g.cache ? tdm__alloc_g.cache[device] : NULL;
    int owns = 0;
    if (!d0)
        return 0;
    for (int i = 0; i < tdm__cache_nshards(d0->group) && !owns; i++) {
        tdm__cache_device *d = tdm__cache_shard(d0->group, i);
        tdm__lock_take(&d->lock);
        for (const cseg *s = d->segs; s && !owns; s = s->next)
            owns = ptr - s->addr < s->size;
        tdm__lock_give(&d->lock);
    }
    return owns;
}

size_t tdm__cache_live_blocks(int device, uint64_t *out, size_t max)
{
    tdm__cache_device *d0 = tdm__alloc_g.cache ? tdm__alloc_g.cache[device] : NULL;
    size_t n = 0;
    if (!d0)
        return 0;
    for (int i = 0; i < tdm__cache_nshards(d0->group) && n < max; i++) {
        tdm__cache_device *d = tdm__cache_shard(d0->group, i);
        tdm__lock_take(&d->lock);
        for (const cseg *s = d->segs; s && n < max; s = s->next)
            for (const cblock *b = s->first; b && n < max; b = b->next)
                if (b->state == TDM_BLOCK_ACTIVE_ALLOCATED)
                    out[n++] = b->addr;
        tdm__lock_give(&d->lock);
    }
    return n;
}

/* ---- snapshot state ----------------------------------------------------
 * One cut over every device: all device locks are taken (in index order,
 * as the fork handlers take them), each device's segments, blocks and
 * stats are copied, the visitor's at_cut marks the instant, and the locks
 * go.  Every change of a device's state and the event recording it happen
 * under its lock, so the copy and the events up to the mark agree.  The
 * visitor is called after the locks are released. */

typedef struct seg_copy {
    tdm_snap_segment seg;
    size_t first;  /* index of its first block in the block copy */
    size_t count;  /* its blocks */
} seg_copy;

/* One device as copied at the cut. */
typedef struct dev_copy {
    seg_copy *segs;
    size_t nseg, seg_room;
    tdm_snap_block *blks;
    size_t blk_room;
    tdm_stats stats, small, large;
} dev_copy;

static int by_addr(const void *a, const void *b)
{
    const seg_copy *x = a, *y = b;
    return x->seg.address < y->seg.address ? -1 : x->seg.address > y->seg.address;
}

/* Copies device i (every shard's lock held). */
static void copy_device(int i, tdm__cache_group *grp, dev_copy *c)
{
    int n = tdm__cache_nshards(grp);
    c->seg_room = 0;
    c->blk_room = 0;
    for (int k = 0; k < n; k++) {
        tdm__cache_device *d = tdm__cache_shard(grp, k);
        for (cseg *s = d->segs; s != NULL; s = s->next)
            c->seg_room += s->expandable ? tdm__cache_expand_runs(s) : 1;
        c->blk_room += d->block_pool.live;
    }
    c->segs = c->seg_room ? tdm__meta_map(c->seg_room * sizeof *c->segs) : NULL;
    c->blks = c->blk_room ? tdm__meta_map(c->blk_room * sizeof *c->blks) : NULL;
    /* Every shard under its lock at once, so small + large = all. */
    c->stats = (tdm_stats){.size = sizeof c->stats};
    c->small = (tdm_stats){.size = sizeof c->small};
    c->large = (tdm_stats){.size = sizeof c->large};
    tdm__stats_acc sum;
    tdm__cache_stats_of(grp, &sum);
    tdm__stats_export(&sum, TDM_STAT_POOL_ALL, &c->stats);
    tdm__stats_export(&sum, TDM_STAT_POOL_SMALL, &c->small);
    tdm__stats_export(&sum, TDM_STAT_POOL_LARGE, &c->large);
    /* With no host memory for the copy, the device shows no segments
     * rather than a partial picture. */
    if ((c->seg_room && !c->segs) || (c->blk_room && !c->blks))
        return;
    size_t si = 0, bi = 0;
    /* An expandable segment shows as one segment per run of mapped
     * blocks, as PyTorch's snapshot shows it; unmapped ranges not at all.
     * Shards in turn: the visit sorts the segments by address. */
    for (int k = 0; k < n; k++) {
        for (cseg *s = tdm__cache_shard(grp, k)->segs; s != NULL; s = s->next) {
            for (cblock *b = s->first; b != NULL; b = b->next) {
                if (!b->mapped)
                    continue;
                if (b->prev == NULL || !b->prev->mapped) {
                    if (si > 0)
                        c->segs[si - 1].count = bi - c->segs[si - 1].first;
                    c->segs[si].seg = (tdm_snap_segment){
                        .device = i, .pool = s->pool, .is_expandable = s->expandable,
                        .address = b->addr, .total_size = 0,
                        .stream = s->stream, .stack_id = s->stack_id};
                    c->segs[si].first = bi;
                    si++;
                }
                c->segs[si - 1].seg.total_size += b->size;
                c->blks[bi++] = (tdm_snap_block){
                    .address = b->addr, .size = b->size,
                    .requested_size = b->requested,
                    .alloc_time_ns = b->alloc_time_ns,
                    .stack_id = b->stack_id, .state = b->state,
                    .category = atomic_load_explicit(&b->category,
                                                     memory_order_relaxed)};
            }
        }
    }
    if (si > 0)
        c->segs[si - 1].count = bi - c->segs[si - 1].first;
    c->nseg = si;
}

void tdm__cache_visit(const tdm__state_visitor *v, tdm__pool_stats_fn pool_stats)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    int n = g->device_count;
    dev_copy *copies = tdm__meta_map((size_t)n * sizeof *copies);
    if (!copies)
        return; /* out of host memory: the state shows nothing */
    memset(copies, 0, (size_t)n * sizeof *copies);
    for (int i = 0; i < n; i++)
        tdm__cache_lock_all(group(i));
    for (int i = 0; i < n; i++)
        copy_device(i, group(i), &copies[i]);
    if (v->at_cut)
        v->at_cut(v->ctx);
    for (int i = n - 1; i >= 0; i--)
        tdm__cache_unlock_all(group(i));
    for (int i = 0; i < n; i++) {
        dev_copy *c = &copies[i];
        if (v->device)
            v->device(v->ctx, &g->devices[i]);
        if (c->nseg > 1)
            qsort(c->segs, c->nseg, sizeof *c->segs, by_addr);
        for (size_t k = 0; k < c->nseg && v->segment; k++)
            v->segment(v->ctx, &c->segs[k].seg, c->blks + c->segs[k].first,
                       c->segs[k].count);
        if (v->stats)
            v->stats(v->ctx, i, &c->stats);
        if (pool_stats) {
            pool_stats(v->ctx, i, TDM_STAT_POOL_SMALL, &c->small);
            pool_stats(v->ctx, i, TDM_STAT_POOL_LARGE, &c->large);
        }
        if (c->segs)
            tdm__meta_unmap(c->segs, c->seg_room * sizeof *c->segs);
        if (c->blks)
            tdm__meta_unmap(c->blks, c->blk_room * sizeof *c->blks);
    }
    tdm__meta_unmap(copies, (size_t)n * sizeof *copies);
}

/* ---- invariant checker -------------------------------------------------- */

#define FAIL(...)                                                              \
    do {                                                                       \
        if (msg && msg_len)                                                    \
            snprintf(msg, msg_len, __VA_ARGS__);                               \
        st = TDM_INTERNAL;                                                     \
        goto out;                                                              \
    } while (0)

/* Shard d of `device` (its lock held); its reserved bytes added to
 * *reserved_sum. */
static tdm_status check_shard(int device, tdm__cache_device *d, int64_t *reserved_sum,
                              char *msg, size_t msg_len)
{
    tdm_status st = TDM_OK;
    int64_t sum[3][TDM__ST_COUNT];
    memset(sum, 0, sizeof sum);
    size_t inactive[2] = {0, 0}, unmapped[2] = {0, 0}, nsegs = 0, nblocks = 0, npending = 0,
           nallocated = 0, ncold = 0;
    for (cseg *s = d->segs; s != NULL; s = s->next) {
        int pk = s->pool == TDM_POOL_SMALL ? 1 : 2;
        nsegs++;
        if (tdm__cache_shard_for(d->group, s->stream) != d || s->addr < d->span_lo ||
            s->addr + s->size > d->span_hi)
            FAIL("segment %#llx of stream %llu is in shard %d, not its stream's, or "
                 "outside the shard's span",
                 (unsigned long long)s->addr, (unsigned long long)s->stream, d->shard);
        if (s->next && s->next->prev != s)
            FAIL("segment list broken at %#llx", (unsigned long long)s->addr);
        if (s->pool == TDM_POOL_SMALL && s->size != TDM__SMALL_BUFFER && !s->expandable)
            FAIL("small segment %#llx is %llu bytes", (unsigned long long)s->addr,
                 (unsigned long long)s->size);
        if (s->expandable && (s->page == 0 || s->size % s->page != 0 || s->mapped == 0))
            FAIL("expandable segment %#llx: %llu bytes in pages of %llu, %llu mapped",
                 (unsigned long long)s->addr, (unsigned long long)s->size,
                 (unsigned long long)s->page, (unsigned long long)s->mapped);
        /* Reserved memory is what is mapped: all of a normal segment. */
        uint64_t reserved = s->expandable ? s->mapped : s->size, mapped = 0;
        sum[0][TDM__ST_SEGMENT]++;
        sum[pk][TDM__ST_SEGMENT]++;
        sum[0][TDM__ST_RESERVED_BYTES] += (int64_t)reserved;
        sum[pk][TDM__ST_RESERVED_BYTES] += (int64_t)reserved;
        if (s->first == NULL || s->first->prev != NULL || s->first->addr != s->addr)
            FAIL("segment %#llx does not start with its first block",
                 (unsigned long long)s->addr);
        uint64_t end = s->addr;
        for (cblock *b = s->first; b != NULL; b = b->next) {
            nblocks++;
            if (b->seg != s || b->addr != end || b->size == 0 ||
                b->size % TDM__MIN_BLOCK != 0 ||
                b->pool != s->pool || b->expandable != s->expandable)
                FAIL("block %#llx does not tile segment %#llx",
                     (unsigned long long)b->addr, (unsigned long long)s->addr);
            if (b->next && b->next->prev != b)
                FAIL("block links broken at %#llx", (unsigned long long)b->addr);
            ncold += b->cold != NULL;
            /* A cold part comes with another stream's use and goes when
             * the block is cached again. */
            if (b->cold != NULL && b->state == TDM_BLOCK_INACTIVE)
                FAIL("cached block %#llx keeps its cold part", (unsigned long long)b->addr);
            if (b->nuses != 0 && b->cold == NULL)
                FAIL("block %#llx has %u uses and no cold part to hold them",
                     (unsigned long long)b->addr, b->nuses);
            end += b->size;
            if (!b->mapped) {
                uint64_t off = b->addr - s->addr;
                unmapped[pk - 1]++;
                if (!s->expandable || b->state != TDM_BLOCK_INACTIVE || off % s->page ||
                    b->size % s->page || (b->next && !b->next->mapped))
                    FAIL("unmapped block %#llx is not whole free pages apart",
                         (unsigned long long)b->addr);
                for (uint64_t pg = off / s->page; pg < (off + b->size) / s->page; pg++)
                    if (s->handles[pg] != 0)
                        FAIL("unmapped block %#llx has page %llu mapped",
                             (unsigned long long)b->addr, (unsigned long long)pg);
                cblock key = *b;
                if (tdm__tree_find_ge(&tdm__cache_pool(d, s->pool)->unmapped, &key.node) !=
                    &b->node)
                    FAIL("unmapped block %#llx missing from its pool",
                         (unsigned long long)b->addr);
                continue;
            }
            mapped += b->size;
            if (s->expandable) {
                uint64_t off = b->addr - s->addr;
                for (uint64_t pg = off / s->page; pg * s->page < off + b->size; pg++)
                    if (s->handles[pg] == 0)
                        FAIL("block %#llx lies on unmapped page %llu",
                             (unsigned long long)b->addr, (unsigned long long)pg);
            }
            if (b->state == TDM_BLOCK_INACTIVE) {
                inactive[pk - 1]++;
                if (b->next && b->next->state == TDM_BLOCK_INACTIVE && b->next->mapped)
                    FAIL("free neighbours %#llx and %#llx not merged",
                         (unsigned long long)b->addr, (unsigned long long)b->next->addr);
                if (b->requested != 0 || b->nuses != 0)
                    FAIL("inactive block %#llx keeps a request or uses",
                         (unsigned long long)b->addr);
                cbins *bins = &tdm__cache_pool(d, s->pool)->bins;
                if (!tdm__bins_holds(bins, b))
                    FAIL("inactive block %#llx missing from its pool",
                         (unsigned long long)b->addr);
                if (!bins->reference && (b->bin_link == NULL || *b->bin_link != &b->node))
                    FAIL("cached block %#llx does not know its slot in its bin",
                         (unsigned long long)b->addr);
                continue;
            }
            int64_t one[TDM__ST_COUNT] = {0};
            one[TDM__ST_ACTIVE_BYTES] = (int64_t)b->size;
            one[TDM__ST_REQUESTED_BYTES] = (int64_t)b->requested;
            if (b->state == TDM_BLOCK_ACTIVE_ALLOCATED) {
                one[TDM__ST_ALLOCATION] = 1;
                one[TDM__ST_ALLOCATED_BYTES] = (int64_t)b->size;
                nallocated++;
                if (tdm__cmap_get(&d->map, b->addr) != b ||
                    !tdm__cache_may_hold(device, b->addr))
                    FAIL("allocated block %#llx not in the pointer map",
                         (unsigned long long)b->addr);
                if (b->requested > b->size)
                    FAIL("block %#llx smaller than its request",
                         (unsigned long long)b->addr);
            } else if (b->state == TDM_BLOCK_ACTIVE_PENDING_FREE) {
                npending++;
                if (b->nuses == 0)
                    FAIL("pending block %#llx waits on no stream",
                         (unsigned long long)b->addr);
            } else {
                FAIL("block %#llx in unknown state %d", (unsigned long long)b->addr,
                     b->state);
            }
            for (int r = 0; r < TDM__ST_COUNT; r++) {
                sum[0][r] += one[r];
                sum[pk][r] += one[r];
            }
        }
        if (s->expandable && mapped != s->mapped)
            FAIL("expandable segment %#llx maps %llu bytes, its blocks %llu",
                 (unsigned long long)s->addr, (unsigned long long)s->mapped,
                 (unsigned long long)mapped);
        if (end != s->addr + s->size)
            FAIL("blocks of segment %#llx cover %llu of %llu bytes",
                 (unsigned long long)s->addr, (unsigned long long)(end - s->addr),
                 (unsigned long long)s->size);
    }
    if (nsegs != d->nsegs)
        FAIL("segment count %zu, list holds %zu", d->nsegs, nsegs);
    if (nblocks != d->block_pool.live)
        FAIL("%zu block records out, %zu in segments", d->block_pool.live, nblocks);
    if (ncold != d->cold_pool.live)
        FAIL("%zu cold parts out, %zu blocks with one", d->cold_pool.live, ncold);
    if (d->small.bins.count != inactive[0] || d->large.bins.count != inactive[1])
        FAIL("pool trees hold %zu+%zu blocks, segments %zu+%zu inactive",
             d->small.bins.count, d->large.bins.count, inactive[0], inactive[1]);
    for (int k = 0; k < 2; k++) {
        cbins *bins = k == 0 ? &d->small.bins : &d->large.bins;
        unsigned bin;
        if (!tdm__bins_shape_ok(bins, &bin))
            FAIL("%s pool's bin %u: its bitmap bits, length or list are wrong",
                 k == 0 ? "small" : "large", bin);
    }
    if (d->small.unmapped.count != unmapped[0] || d->large.unmapped.count != unmapped[1])
        FAIL("unmapped trees hold %zu+%zu blocks, segments %zu+%zu",
             d->small.unmapped.count, d->large.unmapped.count, unmapped[0], unmapped[1]);
    size_t listed = 0, waiting = 0;
    for (cblock *b = d->pending; b != NULL; b = b->cold->pend_next, listed++) {
        if (b->state != TDM_BLOCK_ACTIVE_PENDING_FREE || b->cold == NULL)
            FAIL("pending list holds block %#llx in state %d%s",
                 (unsigned long long)b->addr, b->state, b->cold ? "" : " without a cold part");
        waiting += b->wait != TDM__WAIT_SYNC;
    }
    if (listed != npending)
        FAIL("pending list holds %zu, segments %zu", listed, npending);
    if (d->map.count != nallocated)
        FAIL("pointer map holds %zu blocks, segments %zu allocated", d->map.count, nallocated);
    if (waiting != d->nwaiting)
        FAIL("%zu pending blocks wait on markers, counted %u", waiting, d->nwaiting);
    for (int p = 0; p < 3; p++)
        for (int r = 0; r < TDM__ST_COUNT; r++)
            if (d->stats.st[p][r].current != sum[p][r] ||
                d->stats.st[p][r].peak < d->stats.st[p][r].current)
                FAIL("stat %d of pool %d is %lld (peak or ceiling %lld), blocks sum to %lld",
                     r, p, (long long)d->stats.st[p][r].current,
                     (long long)d->stats.st[p][r].peak, (long long)sum[p][r]);
    *reserved_sum += sum[0][TDM__ST_RESERVED_BYTES];
out:
    return st;
}

static tdm_status check_cache(int device, char *msg, size_t msg_len)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__cache_group *grp = group(device);
    tdm_status st = TDM_OK;
    int64_t reserved = 0;
    uint32_t waiting = 0;
    int n = tdm__cache_lock_all(grp);
    for (int i = 0; i < n && st == TDM_OK; i++) {
        tdm__cache_device *d = tdm__cache_shard(grp, i);
        if (d->shard != i || d->index != device || d->group != grp)
            FAIL("shard %d of device %d is numbered %d of device %d", i, device, d->shard,
                 d->index);
        waiting += d->nwaiting;
        st = check_shard(device, d, &reserved, msg, msg_len);
    }
    if (st != TDM_OK)
        goto out;
    if (waiting != atomic_load_explicit(&grp->waiting, memory_order_relaxed))
        FAIL("shards' pending blocks waiting on markers: %u, the device counts %u", waiting,
             atomic_load_explicit(&grp->waiting, memory_order_relaxed));
    /* With shards, each stat's ceilings share out the device's peak. */
    for (int p = 0; p < 3 && n > 1; p++) {
        for (int r = 0; r < TDM__ST_COUNT; r++) {
            int64_t ceilings = 0, cur = 0;
            for (int i = 0; i < n; i++) {
                ceilings += tdm__cache_shard(grp, i)->stats.st[p][r].peak;
                cur += tdm__cache_shard(grp, i)->stats.st[p][r].current;
            }
            if (ceilings != grp->peak[p][r] || cur > grp->peak[p][r])
                FAIL("stat %d of pool %d: shards' ceilings sum to %lld, their values to "
                     "%lld, the device's peak is %lld",
                     r, p, (long long)ceilings, (long long)cur, (long long)grp->peak[p][r]);
        }
    }
    size_t free_bytes = 0, total = 0;
    g->prov->mem_info(g->prov, device, &free_bytes, &total);
    if ((int64_t)(total - free_bytes) != reserved)
        FAIL("provider has %zu bytes out, segments %lld", total - free_bytes,
             (long long)reserved);
out:
    tdm__cache_unlock_all(grp);
    return st;
}

typedef struct pt_sum {
    int device;
    int64_t bytes, requested, count;
} pt_sum;

static void pt_add(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    (void)key;
    pt_sum *s = ctx;
    if (rec->device == s->device) {
        s->bytes += (int64_t)rec->size;
        s->requested += (int64_t)rec->requested;
        s->count++;
    }
}

tdm_status tdm__alloc_check(int device, char *msg, size_t msg_len)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (device < 0 || device >= tdm__alloc_g.device_count)
        return TDM_NO_SUCH_DEVICE;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        return check_cache(device, msg, msg_len);
    /* Pass-through: stats against the map (quiescent callers only). */
    pt_sum s = {.device = device};
    tdm__ptrmap_each(&tdm__alloc_g.map, pt_add, &s);
    tdm_stats t = {.size = sizeof t};
    tdm__pt_stats(device, 0, &t);
    if (t.allocated_bytes.current != s.bytes || t.reserved_bytes.current != s.bytes ||
        t.requested_bytes.current != s.requested || t.allocation.current != s.count ||
        t.segment.current != s.count) {
        if (msg && msg_len)
            snprintf(msg, msg_len, "pass-through stats differ from the live map");
        return TDM_INTERNAL;
    }
    return TDM_OK;
}
