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
 * Lock: one mutex per device around its stats, its records' insertion and
 * removal in the map and their events, so that a dump copies the three at
 * one instant (the provider has its own per-device lock, taken outside
 * it; the map's shard locks are taken inside it).  None is global.
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
    tdm__rec_event(TDM_ACTION_OOM, req->device, free_bytes, rounded, req->size,
                   req->stream, tdm__rec_events_carry_stacks() ? req->stack_id : 0);
    pthread_mutex_unlock(&d->lock);
    /* The largest live sites, from the map (one shard lock at a time). */
    tdm__oom_sites *sites = tdm__oom_sites_begin();
    tdm__oom_sites_from_map(sites, &g->map, req->device);
    tdm__oom_report(req->device, g->device_names[req->device], req->size,
                    rounded, free_bytes, sites);
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
        .stack_id = req->stack_id,
        .device = (int16_t)req->device,
        .category = req->category,
    };
    uint64_t addr = (uint64_t)(uintptr_t)p;
    tdm__pt_device *d = &g->pt[req->device];
    pthread_mutex_lock(&d->lock);
    /* The time of the allocation is when the provider has handed the
     * address out: taken at the call's start, another thread's free of
     * the same address (recorded just before its memory went back) could
     * come later in time than this alloc, and the history would show the
     * address live twice. */
    if (rec.alloc_time_ns)
        rec.alloc_time_ns = tdm__alloc_now_ns();
    st = tdm__ptrmap_insert(&g->map, addr, &rec);
    if (st == TDM_OK) {
        tdm__stats_book(&d->stats, 1, rec.size, rec.requested, 1);
        tdm__rec_segment_alloc(addr, &rec);
    }
    pthread_mutex_unlock(&d->lock);
    if (st != TDM_OK) {
        g->prov->free(g->prov, req->device, p, rounded);
        return st == TDM_INVALID_ARGUMENT ? TDM_INTERNAL : st;
    }
    *out = p;
    return TDM_OK;
}

tdm_status tdm__pt_free(uint64_t ptr, int device, uint32_t free_stack)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__pt_device *d = &g->pt[device];
    tdm__ptr_rec rec;
    pthread_mutex_lock(&d->lock);
    /* Under the device lock the map is authoritative for this device: a
     * racing free of the same pointer finds it gone here. */
    if (tdm__ptrmap_remove(&g->map, ptr, &rec) != TDM_OK) {
        pthread_mutex_unlock(&d->lock);
        return TDM_UNKNOWN_POINTER;
    }
    if (rec.device != device) { /* cannot happen: the caller looked it up */
        tdm__ptrmap_insert(&g->map, ptr, &rec);
        pthread_mutex_unlock(&d->lock);
        return TDM_INTERNAL;
    }
    tdm__rec_segment_free(ptr, &rec, rec.stream, free_stack);
    tdm__stats_book(&d->stats, -1, rec.size, rec.requested, 1);
    pthread_mutex_unlock(&d->lock);
    return g->prov->free(g->prov, device, (void *)(uintptr_t)ptr, rec.size);
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

void tdm__pt_forget(int device)
{
    memset(&tdm__alloc_g.pt[device].stats, 0, sizeof tdm__alloc_g.pt[device].stats);
}

/* ---- state for the dump --------------------------------------------------- */

void tdm__pt_visit(const tdm__state_visitor *v)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__live_list live = {0};
    int n = g->device_count;
    tdm_stats *stats = tdm__meta_map((size_t)n * sizeof *stats);
    if (!stats)
        return; /* out of host memory: the state shows nothing */
    /* One cut: with every device lock held (in index order, as the fork
     * handlers take them) no record, stat or event changes, so the copy
     * of the map, the stats and the ring's mark agree.  The map's shard
     * locks are taken inside, as the hot path takes them. */
    for (int d = 0; d < n; d++)
        pthread_mutex_lock(&g->pt[d].lock);
    tdm__live_collect(&live, &g->map, 0);
    for (int d = 0; d < n; d++) {
        stats[d] = (tdm_stats){.size = sizeof stats[d]};
        tdm__stats_export(&g->pt[d].stats, 0, &stats[d]);
    }
    if (v->at_cut)
        v->at_cut(v->ctx);
    for (int d = n - 1; d >= 0; d--)
        pthread_mutex_unlock(&g->pt[d].lock);
    /* Then the visitor, with no allocator lock held. */
    tdm__live_sort(&live);
    size_t i = 0;
    for (int d = 0; d < n; d++) {
        if (v->device)
            v->device(v->ctx, &g->devices[d]);
        for (; i < live.n && live.items[i].rec.device == d; i++)
            tdm__live_visit(v, &live.items[i]);
        if (v->stats)
            v->stats(v->ctx, d, &stats[d]);
    }
    tdm__live_free(&live);
    tdm__meta_unmap(stats, (size_t)n * sizeof *stats);
}
