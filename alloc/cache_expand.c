/* alloc/cache_expand.c: expandable segments (expandable_segments=1), the
 * rules of PyTorch's ExpandableSegment.
 *
 * Per stream and pool, an address range of 9/8 of the device's memory is
 * reserved once (room to map pages past a hole); physical memory is made
 * and mapped in pages (20 MiB for the large pool, 2 MiB for the small
 * one, rounded up to the provider's granularity) when a request fits no
 * cached block, right after the stream's free tail where there is one, so
 * that the tail grows into one block instead of a new segment.  Freeing
 * unmaps nothing (the pages stay cached); empty_cache and the
 * out-of-memory retry unmap every whole free page, and a range left with
 * no page mapped goes back to the provider.  Events: segment_map and
 * segment_unmap with the range's address and bytes (no segment_alloc).
 *
 * Lock: the device lock, held by every caller (provider locks nest
 * inside).  Page handles live in a table per segment from tdm__meta_map.
 */
#include "cache_internal.h"
#include "recorder.h"

#define SEGMENT_SLACK_DIVISOR 8 /* the range: capacity + capacity / 8 */

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

int tdm__cache_expand_init(tdm__cache_device *d)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    size_t gran = 0;
    if (pv->vmm == NULL || pv->vmm->granularity(pv, d->index, &gran) != TDM_OK || gran == 0)
        return 0;
    d->page[0] = round_up(TDM__SMALL_BUFFER, gran);
    d->page[1] = round_up(TDM__LARGE_BUFFER, gran);
    return 1;
}

static size_t page_table_bytes(const cseg *s)
{
    return (size_t)(s->size / s->page) * sizeof(uint64_t);
}

/* A new segment of the stream's: its whole range one unmapped block. */
static cblock *new_segment(tdm__cache_device *d, int kind, const tdm__alloc_req *req,
                           tdm_status *st)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    uint64_t page = d->page[kind == TDM_POOL_LARGE];
    size_t total = 0;
    pv->mem_info(pv, d->index, NULL, &total);
    uint64_t bytes = round_up((uint64_t)total + (uint64_t)total / SEGMENT_SLACK_DIVISOR, page);
    cseg *s = tdm__objpool_get(&d->seg_pool);
    cblock *b = tdm__objpool_get(&d->block_pool);
    size_t table = (size_t)(bytes / page) * sizeof(uint64_t);
    uint64_t *handles = tdm__meta_map(table);
    void *base = NULL;
    *st = s && b && handles ? pv->vmm->reserve(pv, d->index, (size_t)bytes, &base)
                            : TDM_HOST_OUT_OF_MEMORY;
    if (*st != TDM_OK) {
        tdm__objpool_put(&d->seg_pool, s);
        tdm__objpool_put(&d->block_pool, b);
        tdm__meta_unmap(handles, table);
        return NULL;
    }
    s->expandable = 1;
    s->page = page;
    s->handles = handles;
    tdm__cache_seg_link(d, s, b, (uint64_t)(uintptr_t)base, bytes, kind, req);
    tdm__tree_insert(&tdm__cache_pool(d, kind)->unmapped, &b->node);
    return b;
}

/* Releases the physical pages of s's page slots [first, first+n) that
 * hold one (none of them mapped). */
static void release_handles(tdm__cache_device *d, cseg *s, uint64_t first, uint64_t n)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    for (uint64_t i = first; i < first + n; i++) {
        if (s->handles[i] != 0)
            pv->vmm->release(pv, d->index, s->handles[i], (size_t)s->page);
        s->handles[i] = 0;
    }
}

/* Unmaps and releases pages [first, first+n) of s. */
static void drop_pages(tdm__cache_device *d, cseg *s, uint64_t first, uint64_t n)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    for (uint64_t i = first; i < first + n; i++) {
        if (s->handles[i] == 0)
            continue;
        pv->vmm->unmap(pv, d->index, (void *)(uintptr_t)(s->addr + i * s->page),
                       (size_t)s->page);
        pv->vmm->release(pv, d->index, s->handles[i], (size_t)s->page);
        s->handles[i] = 0;
    }
}

/* Maps pages over the start of unmapped block u, enough for `want`
 * bytes; the mapped part joins its free mapped neighbours and goes into
 * the pool's tree.  Returns that block, or NULL with *st set (nothing
 * changed). */
static cblock *map_block(tdm__cache_device *d, cblock *u, uint64_t want, tdm_status *st)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    cseg *s = u->seg;
    cpool *p = tdm__cache_pool(d, s->pool);
    uint64_t bytes = round_up(want, s->page);
    if (bytes > u->size)
        bytes = u->size;
    cblock *rest = bytes < u->size ? tdm__objpool_get(&d->block_pool) : NULL;
    if (bytes < u->size && rest == NULL) {
        *st = TDM_HOST_OUT_OF_MEMORY;
        return NULL;
    }
    uint64_t first = (u->addr - s->addr) / s->page, n = bytes / s->page, made = 0;
    /* All the physical pages first: a full device (the usual failure)
     * then costs no mapping to undo. */
    for (*st = TDM_OK; made < n && *st == TDM_OK; made++)
        *st = pv->vmm->create(pv, d->index, (size_t)s->page, &s->handles[first + made]);
    if (*st != TDM_OK) {
        /* The last create failed: its slot is cleared without a release. */
        s->handles[first + made - 1] = 0;
        release_handles(d, s, first, made - 1);
        tdm__objpool_put(&d->block_pool, rest);
        return NULL;
    }
    uint64_t mapped = 0;
    for (; mapped < n && *st == TDM_OK; mapped += *st == TDM_OK) {
        uint64_t at = s->addr + (first + mapped) * s->page;
        *st = pv->vmm->map(pv, d->index, (void *)(uintptr_t)at, (size_t)s->page,
                           s->handles[first + mapped]);
    }
    if (*st == TDM_OK)
        *st = pv->vmm->set_access(pv, d->index, (void *)(uintptr_t)u->addr, (size_t)bytes);
    if (*st != TDM_OK) { /* the vendor failed: none of them */
        drop_pages(d, s, first, mapped);
        release_handles(d, s, first + mapped, n - mapped);
        tdm__objpool_put(&d->block_pool, rest);
        return NULL;
    }
    tdm__tree_remove(&p->unmapped, &u->node);
    if (rest != NULL) {
        tdm__cache_split_after(u, rest, bytes);
        tdm__tree_insert(&p->unmapped, &rest->node);
    }
    u->mapped = 1;
    s->mapped += bytes;
    tdm__stat_add(&d->stats, s->pool, TDM__ST_RESERVED_BYTES, (int64_t)bytes);
    tdm__rec_event(TDM_ACTION_SEGMENT_MAP, d->index, u->addr, bytes, bytes, s->stream,
                   tdm__cache_event_stack(s->stack_id));
    if (u->prev && u->prev->state == TDM_BLOCK_INACTIVE && u->prev->mapped)
        tdm__cache_merge_into(d, u, u->prev);
    if (u->next && u->next->state == TDM_BLOCK_INACTIVE && u->next->mapped)
        tdm__cache_merge_into(d, u, u->next);
    tdm__cache_block(d, u);
    return u;
}

static void release_range(tdm__cache_device *d, cseg *s);

/* Where `size` bytes fit in a segment of the stream: a run of inactive
 * blocks, mapped or not, starting at an unmapped block or the free block
 * just before one (PyTorch's find_expandable_block).  NULL if none. */
static cblock *find_room(cpool *p, uint64_t size, uint64_t stream)
{
    cseg key_seg = {.stream = stream};
    cblock key = {.seg = &key_seg, .addr = 0};
    for (tdm__tnode *n = tdm__tree_find_ge(&p->unmapped, &key.node); n != NULL;
         n = tdm__tree_next(&p->unmapped, n)) {
        cblock *c = TDM__CONTAINER_OF(n, cblock, node);
        if (tdm__cblock_stream(c) != stream)
            break;
        if (c->prev && c->prev->state == TDM_BLOCK_INACTIVE)
            c = c->prev;
        uint64_t room = 0;
        for (cblock *b = c; b && b->state == TDM_BLOCK_INACTIVE && room < size; b = b->next)
            room += b->size;
        if (room >= size)
            return c;
    }
    return NULL;
}

cblock *tdm__cache_expand_alloc(tdm__cache_device *d, int kind, uint64_t size,
                                const tdm__alloc_req *req, int is_retry, tdm_status *st)
{
    cpool *p = tdm__cache_pool(d, kind);
    if (is_retry)
        d->stats.num_alloc_retries++;
    cblock *c = find_room(p, size, req->stream), *fresh = NULL;
    if (c == NULL && (c = fresh = new_segment(d, kind, req, st)) == NULL)
        return NULL;
    if (!c->mapped && (c = map_block(d, c, size, st)) == NULL) {
        if (fresh != NULL) /* nothing mapped: no range kept either */
            release_range(d, fresh->seg);
        return NULL;
    }
    /* Now c is mapped and free, with unmapped ranges (and perhaps free
     * mapped blocks past them) enough for the rest after it. */
    while (c->size < size) {
        cblock *u = c->next;
        uint64_t need = size - c->size;
        if (u == NULL || u->mapped) { /* larger than a whole range */
            *st = TDM_OUT_OF_MEMORY;
            return NULL;
        }
        if ((c = map_block(d, u, need < u->size ? need : u->size, st)) == NULL)
            return NULL; /* pages mapped so far stay cached, as in PyTorch */
    }
    tdm__bins_remove(&p->bins, c);
    return c;
}

/* Gives back segment s, its one block unmapped. */
static void release_range(tdm__cache_device *d, cseg *s)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    cblock *b = s->first;
    tdm__tree_remove(&tdm__cache_pool(d, s->pool)->unmapped, &b->node);
    tdm__cache_seg_unlink(d, s);
    pv->vmm->free_range(pv, d->index, (void *)(uintptr_t)s->addr, (size_t)s->size);
    tdm__meta_unmap(s->handles, page_table_bytes(s));
    tdm__objpool_put(&d->block_pool, b);
    tdm__objpool_put(&d->seg_pool, s);
}

/* Cuts [at, at+size) off free mapped block b's `low` (else high) end as
 * a block of its own, in the pool's tree; 0 without host memory. */
static int cut_free(tdm__cache_device *d, cblock *b, uint64_t size, int low)
{
    cblock *r = tdm__objpool_get(&d->block_pool);
    if (r == NULL)
        return 0;
    if (low) {
        r->seg = b->seg;
        r->pool = b->pool;
        r->expandable = b->expandable;
        r->state = TDM_BLOCK_INACTIVE;
        r->mapped = 1;
        r->size = size;
        r->addr = b->addr;
        b->size -= size;
        b->addr += size;
        r->prev = b->prev;
        r->next = b;
        if (b->prev)
            b->prev->next = r;
        else
            b->seg->first = r;
        b->prev = r;
    } else {
        tdm__cache_split_after(b, r, b->size - size);
    }
    tdm__cache_block(d, r);
    return 1;
}

/* Unmaps the whole pages inside free mapped block b (in the pool's tree);
 * the parts before and after them stay free mapped blocks. */
static void unmap_block(tdm__cache_device *d, cblock *b)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    cseg *s = b->seg;
    cpool *p = tdm__cache_pool(d, s->pool);
    uint64_t lo = s->addr + round_up(b->addr - s->addr, s->page);
    uint64_t hi = s->addr + (b->addr + b->size - s->addr) / s->page * s->page;
    if (hi <= lo)
        return;
    /* Work queued before the block was freed may still touch the pages
     * (PyTorch synchronizes before unmapping too). */
    if (pv->streams != NULL)
        pv->streams->device_sync(pv->streams_ctx, d->index);
    tdm__bins_remove(&p->bins, b);
    int low = lo > b->addr;
    if ((low && !cut_free(d, b, lo - b->addr, 1)) ||
        (hi < b->addr + b->size && !cut_free(d, b, b->addr + b->size - hi, 0))) {
        /* No host memory for a record: the pages stay mapped. */
        if (low && b->addr == lo)
            tdm__cache_merge_into(d, b, b->prev);
        tdm__cache_block(d, b);
        return;
    }
    drop_pages(d, s, (lo - s->addr) / s->page, (hi - lo) / s->page);
    b->mapped = 0;
    s->mapped -= hi - lo;
    tdm__stat_add(&d->stats, s->pool, TDM__ST_RESERVED_BYTES, -(int64_t)(hi - lo));
    tdm__rec_event(TDM_ACTION_SEGMENT_UNMAP, d->index, lo, hi - lo, hi - lo, s->stream,
                   tdm__cache_event_stack(s->stack_id));
    if (b->prev && !b->prev->mapped)
        tdm__cache_merge_into(d, b, b->prev);
    if (b->next && !b->next->mapped)
        tdm__cache_merge_into(d, b, b->next);
    tdm__tree_insert(&p->unmapped, &b->node);
    if (s->mapped == 0)
        release_range(d, s);
}

void tdm__cache_expand_release(tdm__cache_device *d, cpool *p)
{
    cblock *b = tdm__bins_first(&p->bins);
    while (b != NULL) {
        /* Unmapping adds blocks to the bins, but only ones holding no
         * whole page, and removes none but this one. */
        cblock *next = tdm__bins_next(&p->bins, b);
        if (b->expandable)
            unmap_block(d, b);
        b = next;
    }
}

void tdm__cache_expand_destroy(tdm__cache_device *d, cseg *s)
{
    tdm_provider *pv = tdm__alloc_g.prov;
    drop_pages(d, s, 0, s->size / s->page);
    pv->vmm->free_range(pv, d->index, (void *)(uintptr_t)s->addr, (size_t)s->size);
    tdm__meta_unmap(s->handles, page_table_bytes(s));
    s->handles = NULL;
}

size_t tdm__cache_expand_runs(const cseg *s)
{
    size_t runs = 0;
    for (const cblock *b = s->first; b != NULL; b = b->next)
        runs += b->mapped && (b->prev == NULL || !b->prev->mapped);
    return runs;
}
