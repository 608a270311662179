/* alloc/cache_stream.c: frees that must wait for other streams' work.
 *
 * A block belongs to the stream it was allocated on; reusing it on that
 * stream is safe at once, since the device runs that stream's work in
 * order.  A block some other stream may still use — named by
 * tdm_record_stream, or freed on another stream (cudaFreeAsync(p, s2),
 * hipFreeAsync) — is pending until that stream's work queued before the
 * free has completed.  With a provider that has stream markers (CUDA,
 * HIP events) a marker is recorded on each such stream at the free;
 * malloc polls them while any are out (never blocking), and the
 * out-of-memory path waits for them before it gives memory back — as
 * PyTorch's record_stream / process_events / synchronize_and_free_events.
 * Without markers (the sim device) the block waits for
 * tdm_stream_synchronize of each stream or tdm_device_synchronize.
 *
 * During a graph capture markers are neither recorded nor queried (the
 * vendor forbids querying an event recorded during capture): a free then
 * is deferred, its markers recorded at the first poll with no capture
 * underway, as PyTorch defers them.
 *
 * Also the entry points for hooks: tdm__alloc_free_on_stream and
 * tdm__alloc_free_synchronized.
 *
 * Lock: everything on a device runs under its lock (markers are recorded
 * and queried under it, as PyTorch does: neither call blocks), except the
 * device-wide wait of tdm__alloc_free_synchronized, made with no lock.
 */
#include <string.h>

#include "cache_internal.h"

static const tdm_stream_ops *ops(void)
{
    return tdm__alloc_g.prov->streams;
}

static void *ops_ctx(void)
{
    return tdm__alloc_g.prov->streams_ctx;
}

int tdm__cache_capturing(const tdm__cache_device *d, tdm_stream stream)
{
    const tdm_stream_ops *o = ops();
    return o != NULL && o->capturing(ops_ctx(), d->index, stream);
}

int tdm__cache_add_use(tdm__cache_device *d, cblock *b, uint64_t stream)
{
    cblock_cold *c = b->cold;
    if (c == NULL) {
        c = tdm__objpool_get(&d->cold_pool);
        if (c == NULL)
            return 0;
        c->uses = c->uses_inline;
        c->uses_cap = 4;
        b->cold = c;
    }
    for (uint32_t i = 0; i < b->nuses; i++)
        if (c->uses[i] == stream)
            return 1;
    if (b->nuses == c->uses_cap) {
        uint32_t ncap = c->uses_cap * 2;
        uint64_t *n = tdm__meta_map(ncap * sizeof *n);
        if (n == NULL)
            return 0;
        memcpy(n, c->uses, b->nuses * sizeof *n);
        if (c->uses != c->uses_inline)
            tdm__meta_unmap(c->uses, c->uses_cap * sizeof *n);
        c->uses = n;
        c->uses_cap = ncap;
    }
    c->uses[b->nuses++] = stream;
    return 1;
}

/* A marker back to the device's spares, or destroyed when they are full. */
static void put_marker(tdm__cache_device *d, void *m)
{
    if (d->nspare < sizeof d->spare / sizeof d->spare[0])
        d->spare[d->nspare++] = m;
    else
        ops()->marker_destroy(ops_ctx(), d->index, m);
}

void tdm__cache_drop_uses(tdm__cache_device *d, cblock *b)
{
    cblock_cold *c = b->cold;
    if (c == NULL) /* no other stream ever used it */
        return;
    if (b->wait == TDM__WAIT_MARKERS)
        for (uint32_t i = 0; i < b->nuses; i++)
            put_marker(d, (void *)(uintptr_t)c->uses[i]);
    if (c->uses != c->uses_inline)
        tdm__meta_unmap(c->uses, c->uses_cap * sizeof(uint64_t));
    tdm__objpool_put(&d->cold_pool, c);
    b->cold = NULL;
    b->nuses = 0;
}

/* Replaces b's streams by markers recorded on them; 0 (b unchanged) when
 * one cannot be recorded: b stays deferred and is tried again later. */
static int record_markers(tdm__cache_device *d, cblock *b)
{
    const tdm_stream_ops *o = ops();
    void *made[64];
    uint32_t n = 0;
    for (; n < b->nuses; n++) {
        void *m = d->nspare > 0 ? d->spare[--d->nspare] : NULL;
        if (n == sizeof made / sizeof made[0] ||
            o->marker_record(ops_ctx(), d->index, b->cold->uses[n], &m) != TDM_OK) {
            if (m != NULL)
                put_marker(d, m);
            while (n > 0)
                put_marker(d, made[--n]);
            return 0;
        }
        made[n] = m;
    }
    for (uint32_t i = 0; i < n; i++)
        b->cold->uses[i] = (uint64_t)(uintptr_t)made[i];
    b->wait = TDM__WAIT_MARKERS;
    return 1;
}

void tdm__cache_pend(tdm__cache_device *d, cblock *b)
{
    b->state = TDM_BLOCK_ACTIVE_PENDING_FREE;
    b->wait = TDM__WAIT_SYNC;
    if (ops() != NULL) {
        b->wait = TDM__WAIT_DEFERRED;
        d->nwaiting++;
        atomic_fetch_add_explicit(&d->group->waiting, 1, memory_order_relaxed);
        /* The free's own stream is b's: a capture there, or anywhere,
         * forbids recording now. */
        if (!tdm__cache_capturing(d, tdm__cblock_stream(b)))
            record_markers(d, b);
    }
    b->cold->pend_prev = NULL;
    b->cold->pend_next = d->pending;
    if (d->pending)
        d->pending->cold->pend_prev = b;
    d->pending = b;
}

/* Drops b's markers that are done; 1 when none is left. */
static int markers_done(tdm__cache_device *d, cblock *b)
{
    const tdm_stream_ops *o = ops();
    uint64_t *uses = b->cold->uses;
    for (uint32_t i = 0; i < b->nuses;) {
        void *m = (void *)(uintptr_t)uses[i];
        if (o->marker_done(ops_ctx(), d->index, m)) {
            put_marker(d, m);
            uses[i] = uses[--b->nuses];
        } else {
            i++;
        }
    }
    return b->nuses == 0;
}

void tdm__cache_unpend(tdm__cache_device *d, cblock *b)
{
    cblock_cold *c = b->cold;
    if (c->pend_prev)
        c->pend_prev->cold->pend_next = c->pend_next;
    else
        d->pending = c->pend_next;
    if (c->pend_next)
        c->pend_next->cold->pend_prev = c->pend_prev;
    c->pend_prev = c->pend_next = NULL;
    if (b->wait != TDM__WAIT_SYNC) {
        d->nwaiting--;
        atomic_fetch_sub_explicit(&d->group->waiting, 1, memory_order_relaxed);
    }
    b->wait = TDM__WAIT_SYNC;
}

void tdm__cache_poll(tdm__cache_device *d, tdm_stream stream)
{
    if (tdm__cache_capturing(d, stream))
        return;
    cblock *b = d->pending;
    while (b != NULL) {
        cblock *next = b->cold->pend_next;
        if (b->wait == TDM__WAIT_DEFERRED)
            record_markers(d, b);
        if (b->wait == TDM__WAIT_MARKERS && markers_done(d, b)) {
            tdm__cache_unpend(d, b);
            tdm__cache_free_block(d, b, b->cold->free_stack);
        }
        b = next;
    }
}

int tdm__cache_wait_markers(tdm__cache_device *d, cblock *b)
{
    if (tdm__cache_capturing(d, tdm__cblock_stream(b)))
        return 0;
    if (b->wait == TDM__WAIT_DEFERRED && !record_markers(d, b)) {
        /* No marker to wait on: the whole device's work is. */
        ops()->device_sync(ops_ctx(), d->index);
        b->nuses = 0;
        return 1;
    }
    for (uint32_t i = 0; i < b->nuses; i++)
        ops()->marker_wait(ops_ctx(), d->index, (void *)(uintptr_t)b->cold->uses[i]);
    for (uint32_t i = 0; i < b->nuses; i++)
        put_marker(d, (void *)(uintptr_t)b->cold->uses[i]);
    b->nuses = 0;
    return 1;
}

void tdm__cache_complete_pending(tdm__cache_device *d, int all, uint64_t stream)
{
    cblock *b = d->pending;
    while (b != NULL) {
        cblock *next = b->cold->pend_next;
        if (b->wait != TDM__WAIT_SYNC) {
            /* Markers: a stream sync of the sim API says nothing of them;
             * a device-wide completion waits for them (unless capturing). */
            if (!all || !tdm__cache_wait_markers(d, b)) {
                b = next;
                continue;
            }
        } else if (!all) {
            uint64_t *uses = b->cold->uses;
            for (uint32_t i = 0; i < b->nuses; i++) {
                if (uses[i] == stream) {
                    uses[i] = uses[--b->nuses];
                    break;
                }
            }
        }
        if (all || b->nuses == 0) {
            tdm__cache_unpend(d, b);
            tdm__cache_free_block(d, b, b->cold->free_stack);
        }
        b = next;
    }
}

/* ---- entry points for hooks ------------------------------------------------ */

__attribute__((noinline)) tdm_status tdm__alloc_free_on_stream(void *ptr, tdm_stream stream,
                                                               unsigned skip)
{
    tdm_status st = tdm__alloc_free_as(ptr, skip + 1, 1, stream);
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
    return st;
}

__attribute__((noinline)) tdm_status tdm__alloc_free_synchronized(void *ptr, unsigned skip)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    int device = -1;
    if (ptr != NULL && atomic_load_explicit(&g->ready, memory_order_acquire) &&
        g->mode == TDM__MODE_CACHE && g->prov->streams != NULL &&
        (device = tdm__cache_device_of((uint64_t)(uintptr_t)ptr)) >= 0 &&
        !tdm__cache_capturing(g->cache[device], 0))
        g->prov->streams->device_sync(g->prov->streams_ctx, device);
    tdm_status st = tdm__alloc_free_as(ptr, skip + 1, 0, 0);
    __asm__ volatile("" ::: "memory");
    return st;
}
