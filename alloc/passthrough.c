/* alloc/passthrough.c: mode=passthrough, every allocation its own segment.
 *
 * Owns the per-device stats of this mode.  A tdm_malloc rounds the request
 * to 512 bytes (size 0 becomes one 512-byte block), takes exactly that from
 * the provider and records segment_alloc + alloc; tdm_free records
 * free_requested + free_completed + segment_free and gives it back.  The
 * allocation's whole state is its record in the pointer map.
 *
 * Invariants: reserved == allocated == active bytes == sum of live record
 * sizes; requested == sum of live requested sizes; allocation == segment
 * == number of live records.  Events of a free are recorded before the
 * memory goes back to the provider, so no other thread's alloc of the same
 * address can be recorded ahead of them.
 * Lock: one mutex per device around its stats (the provider has its own
 * per-device lock; the map has its shard locks).  None is global.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "meta.h"
#include "recorder.h"

struct tdm__pt_device {
    pthread_mutex_t lock;
    tdm__stats_acc stats;
} __attribute__((aligned(64)));

tdm_status tdm__pt_create(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    g->pt = tdm__meta_map(sizeof(tdm__pt_device) * (size_t)g->device_count);
    if (g->pt == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    for (int i = 0; i < g->device_count; i++)
        pthread_mutex_init(&g->pt[i].lock, NULL);
    return TDM_OK;
}

static void give_back(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    (void)ctx;
    tdm_provider *p = tdm__alloc_g.prov;
    p->free(p, rec->device, (void *)(uintptr_t)key, rec->size);
}

void tdm__pt_destroy(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__ptrmap_each(&g->map, give_back, NULL);
    for (int i = 0; i < g->device_count; i++)
        pthread_mutex_destroy(&g->pt[i].lock);
    tdm__meta_unmap(g->pt, sizeof(tdm__pt_device) * (size_t)g->device_count);
    g->pt = NULL;
}

static void pt_account(int device, const tdm__ptr_rec *rec, int sign)
{
    tdm__pt_device *d = &tdm__alloc_g.pt[device];
    int64_t bytes = sign * (int64_t)rec->size;
    pthread_mutex_lock(&d->lock);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_SEGMENT, sign);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_RESERVED_BYTES, bytes);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_ALLOCATION, sign);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_ALLOCATED_BYTES, bytes);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_ACTIVE_BYTES, bytes);
    tdm__stat_add(&d->stats, TDM_POOL_NONE, TDM__ST_REQUESTED_BYTES,
                  sign * (int64_t)rec->requested);
    pthread_mutex_unlock(&d->lock);
}

typedef struct pt_sites {
    tdm__oom_site sites[256];
    size_t n;   /* sites used */
    int device; /* the device that ran out */
} pt_sites;

static void add_site(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    (void)key;
    pt_sites *acc = ctx;
    if (rec->device == acc->device)
        tdm__oom_site_add(acc->sites, &acc->n, 256, rec->stack_id, rec->size);
}

/* The rare path of tdm__pt_malloc. */
static __attribute__((noinline)) tdm_status pt_oom(const tdm__alloc_req *req,
                                                   size_t rounded)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    size_t free_bytes = 0;
    g->prov->mem_info(g->prov, req->device, &free_bytes, NULL);
    tdm__pt_device *d = &g->pt[req->device];
    pthread_mutex_lock(&d->lock);
    d->stats.num_ooms++;
    pthread_mutex_unlock(&d->lock);
    tdm__rec_event(TDM_ACTION_OOM, req->device, free_bytes, rounded, req->size,
                   req->stream, tdm__rec_events_carry_stacks() ? req->stack_id : 0);
    /* The largest live sites, from the map (one shard lock at a time). */
    static __thread pt_sites acc; /* 4 KiB: kept off the caller's stack */
    acc.n = 0;
    acc.device = req->device;
    tdm__ptrmap_each(&g->map, add_site, &acc);
    tdm__oom_report(req->device, g->device_names[req->device], req->size,
                    rounded, free_bytes, acc.sites, acc.n);
    return TDM_OUT_OF_MEMORY;
}

tdm_status tdm__pt_malloc(const tdm__alloc_req *req, void **out)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    /* Plain 512-byte rounding whatever the cache's roundup_power2_divisions
     * say: the provider gets what was asked for. */
    if (req->size > SIZE_MAX - 511)
        return pt_oom(req, req->size);
    size_t rounded = req->size < 512 ? 512 : ((req->size + 511) & ~(size_t)511);
    void *p = NULL;
    tdm_status st = g->prov->alloc(g->prov, req->device, rounded, req->stream, &p);
    if (st == TDM_OUT_OF_MEMORY)
        return pt_oom(req, rounded);
    if (st != TDM_OK)
        return st;
    tdm__ptr_rec rec = {
        .size = rounded,
        .requested = req->size,
        .stream = req->stream,
        .alloc_time_ns = req->time_ns,
        .block = NULL,
        .stack_id = req->stack_id,
        .device = (int16_t)req->device,
        .category = req->category,
    };
    uint64_t addr = (uint64_t)(uintptr_t)p;
    st = tdm__ptrmap_insert(&g->map, addr, &rec);
    if (st != TDM_OK) {
        g->prov->free(g->prov, req->device, p, rounded);
        return st == TDM_INVALID_ARGUMENT ? TDM_INTERNAL : st;
    }
    pt_account(req->device, &rec, 1);
    if (tdm__rec_on()) {
        uint32_t es = tdm__rec_events_carry_stacks() ? req->stack_id : 0;
        /* segment_alloc + alloc in one ring entry (event.h) */
        tdm__rec_event(TDM__ACTION_SEGMENT_ALLOC_ALLOC, req->device, addr,
                       rounded, req->size, req->stream, es);
    }
    *out = p;
    return TDM_OK;
}

tdm_status tdm__pt_free(uint64_t ptr, const tdm__ptr_rec *rec,
                        uint32_t free_stack)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (tdm__rec_on()) {
        uint32_t es = 0;
        if (tdm__rec_events_carry_stacks())
            es = free_stack ? free_stack : rec->stack_id;
        /* free_requested + free_completed + segment_free in one entry */
        tdm__rec_event(TDM__ACTION_FREE_SEGMENT_FREE, rec->device, ptr,
                       rec->size, rec->requested, rec->stream, es);
    }
    pt_account(rec->device, rec, -1);
    return g->prov->free(g->prov, rec->device, (void *)(uintptr_t)ptr, rec->size);
}

void tdm__pt_stats(int device, int pool, tdm_stats *out)
{
    tdm__pt_device *d = &tdm__alloc_g.pt[device];
    pthread_mutex_lock(&d->lock);
    tdm__stats_export(&d->stats, pool, out);
    pthread_mutex_unlock(&d->lock);
}

pthread_mutex_t *tdm__pt_lock_of(int device)
{
    return &tdm__alloc_g.pt[device].lock;
}

void tdm__pt_reset_peaks(int device)
{
    tdm__pt_device *d = &tdm__alloc_g.pt[device];
    pthread_mutex_lock(&d->lock);
    tdm__stats_reset_peaks(&d->stats);
    pthread_mutex_unlock(&d->lock);
}

/* ---- state for the dump --------------------------------------------------- */

typedef struct pt_live {
    uint64_t addr;
    tdm__ptr_rec rec;
} pt_live;

typedef struct pt_collect {
    pt_live *items;  /* from tdm__meta_map */
    size_t n, cap;   /* entries used / room */
    int failed;      /* host memory ran out while collecting */
} pt_collect;

static void collect(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    pt_collect *c = ctx;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 1024;
        pt_live *n = tdm__meta_map(ncap * sizeof *n);
        if (n == NULL) {
            c->failed = 1;
            return;
        }
        if (c->items) {
            memcpy(n, c->items, c->n * sizeof *n);
            tdm__meta_unmap(c->items, c->cap * sizeof *n);
        }
        c->items = n;
        c->cap = ncap;
    }
    c->items[c->n].addr = key;
    c->items[c->n].rec = *rec;
    c->n++;
}

static int by_device_addr(const void *a, const void *b)
{
    const pt_live *x = a, *y = b;
    if (x->rec.device != y->rec.device)
        return x->rec.device < y->rec.device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void tdm__pt_visit(const tdm__state_visitor *v)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    pt_collect c = {0};
    /* Copy first, then call the visitor with no allocator lock held. */
    tdm__ptrmap_each(&g->map, collect, &c);
    if (c.n > 1)
        qsort(c.items, c.n, sizeof *c.items, by_device_addr);
    size_t i = 0;
    for (int d = 0; d < g->device_count; d++) {
        if (v->device)
            v->device(v->ctx, &g->devices[d]);
        for (; i < c.n && c.items[i].rec.device == d; i++) {
            const tdm__ptr_rec *r = &c.items[i].rec;
            tdm_snap_segment seg = {
                .device = d, .pool = TDM_POOL_NONE, .is_expandable = 0,
                .address = c.items[i].addr, .total_size = r->size,
                .stream = r->stream, .stack_id = r->stack_id,
            };
            tdm_snap_block blk = {
                .address = c.items[i].addr, .size = r->size,
                .requested_size = r->requested, .alloc_time_ns = r->alloc_time_ns,
                .stack_id = r->stack_id, .state = TDM_BLOCK_ACTIVE_ALLOCATED,
                .category = r->category,
            };
            if (v->segment)
                v->segment(v->ctx, &seg, &blk, 1);
        }
        if (v->stats) {
            tdm_stats s = {.size = sizeof s};
            tdm__pt_stats(d, 0, &s);
            v->stats(v->ctx, d, &s);
        }
    }
    if (c.items)
        tdm__meta_unmap(c.items, c.cap * sizeof *c.items);
}
