/* runtime/replay.c: tdm__replay (tidemark_private.h), the library side of `tidemark
 * replay`: parses the settings with TIDEMARK_CONF's own parser, then
 * drives the caching allocator over a counting wrapper of the sim
 * provider, so that device calls and the segment timeline are seen
 * without changing the allocator.  With expandable segments a device
 * call is a physical page made, a "segment" one mapping (the allocator
 * opens each mapping's range in one set_access call) and a free one
 * unmapping (the pages of one, unmapped one after another, adjoin).
 *
 * Lock: none of its own; the caller owns the allocator for the call
 * (the tool, single-threaded).  Recording stays off.
 */
#include "tidemark_private.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "provider.h"
#include "replay_save.h"
#include "tidemark.h"

typedef struct counting_provider {
    tdm_provider pub;
    tdm_provider *inner;
    tdm_replay_result *out;
    tdm_replay_segment_fn on_segment;
    void *ctx;
    uint64_t unmap_end, unmap_bytes; /* the unmapping being told */
} counting_provider;

/* Tells the unmapping of adjoining pages seen so far as one. */
static void flush_unmap(counting_provider *c)
{
    if (c->unmap_bytes == 0)
        return;
    c->out->device_frees++;
    if (c->on_segment)
        c->on_segment(c->ctx, 1, c->unmap_bytes);
    c->unmap_bytes = 0;
}

static tdm_status count_alloc(tdm_provider *p, int device, size_t size, tdm_stream stream,
                              void **out)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    c->out->device_calls++;
    tdm_status st = c->inner->alloc(c->inner, device, size, stream, out);
    if (st == TDM_OK) {
        c->out->segments++;
        if (c->on_segment)
            c->on_segment(c->ctx, 0, size);
    }
    return st;
}

static tdm_status count_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    c->out->device_frees++;
    if (c->on_segment)
        c->on_segment(c->ctx, 1, size);
    return c->inner->free(c->inner, device, ptr, size);
}

static tdm_status count_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                                 size_t *total_bytes)
{
    counting_provider *c = (counting_provider *)p;
    return c->inner->mem_info(c->inner, device, free_bytes, total_bytes);
}

static void count_name(tdm_provider *p, int device, char *buf, size_t len)
{
    counting_provider *c = (counting_provider *)p;
    c->inner->device_name(c->inner, device, buf, len);
}

static tdm_status count_granularity(tdm_provider *p, int device, size_t *bytes)
{
    counting_provider *c = (counting_provider *)p;
    return c->inner->vmm->granularity(c->inner, device, bytes);
}

static tdm_status count_reserve(tdm_provider *p, int device, size_t size, void **base)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    return c->inner->vmm->reserve(c->inner, device, size, base);
}

static tdm_status count_free_range(tdm_provider *p, int device, void *base, size_t size)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    return c->inner->vmm->free_range(c->inner, device, base, size);
}

static tdm_status count_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    c->out->device_calls++;
    return c->inner->vmm->create(c->inner, device, size, handle);
}

static tdm_status count_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    counting_provider *c = (counting_provider *)p;
    return c->inner->vmm->release(c->inner, device, handle, size);
}

static tdm_status count_map(tdm_provider *p, int device, void *addr, size_t size,
                            uint64_t handle)
{
    counting_provider *c = (counting_provider *)p;
    flush_unmap(c);
    return c->inner->vmm->map(c->inner, device, addr, size, handle);
}

static tdm_status count_set_access(tdm_provider *p, int device, void *addr, size_t size)
{
    counting_provider *c = (counting_provider *)p;
    tdm_status st = c->inner->vmm->set_access(c->inner, device, addr, size);
    if (st == TDM_OK) {
        c->out->segments++;
        if (c->on_segment)
            c->on_segment(c->ctx, 0, size);
    }
    return st;
}

static tdm_status count_unmap(tdm_provider *p, int device, void *addr, size_t size)
{
    counting_provider *c = (counting_provider *)p;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    if (c->unmap_bytes != 0 && a != c->unmap_end)
        flush_unmap(c);
    c->unmap_bytes += size;
    c->unmap_end = a + size;
    return c->inner->vmm->unmap(c->inner, device, addr, size);
}

static const tdm_vmm_ops count_vmm = {
    .granularity = count_granularity,
    .reserve = count_reserve,
    .free_range = count_free_range,
    .create = count_create,
    .release = count_release,
    .map = count_map,
    .set_access = count_set_access,
    .unmap = count_unmap,
};

static void count_destroy(tdm_provider *p)
{
    counting_provider *c = (counting_provider *)p;
    c->inner->destroy(c->inner);
    free(c);
}

/* A deferred free waits on a stream of its own, never one the recording
 * used (streams are small numbers or pointers: the top bit is free), so
 * that its completion completes it and nothing else. */
static tdm_stream wait_stream(uint64_t id)
{
    return (tdm_stream)(((uint64_t)1 << 63) | id);
}

typedef struct replay_waits {
    uint64_t *after_alloc; /* ids to complete after the next allocation */
    size_t after_n, after_cap;
} replay_waits;

static int after_alloc_add(replay_waits *w, uint64_t id)
{
    if (w->after_n == w->after_cap) {
        size_t cap = w->after_cap ? w->after_cap * 2 : 64;
        uint64_t *a = realloc(w->after_alloc, cap * sizeof *a);
        if (!a)
            return -1;
        w->after_alloc = a;
        w->after_cap = cap;
    }
    w->after_alloc[w->after_n++] = id;
    return 0;
}

/* Frees `ptr` (allocation `id`) so that it waits, as a block used on
 * another stream does; -1 (nothing done) without host memory for it. */
static int wait_on_own_stream(void *ptr, uint64_t id)
{
    if (tdm_record_stream(ptr, wait_stream(id)) != TDM_OK)
        return -1;
    return tdm__alloc_free(ptr, 0) == TDM_OK ? 0 : -1;
}

/* Completes the deferred free of `id`; nothing when the allocator already
 * did (its out-of-memory path completes every waiting free). */
static void complete_wait(uint64_t id)
{
    tdm_stream_synchronize(wait_stream(id));
}

static int replay(const char *conf, uint64_t capacity, const tdm_replay_op *ops, size_t n,
                  uint64_t ids, tdm_replay_segment_fn on_segment, void *ctx,
                  tdm_replay_result *out, char *why, size_t why_len,
                  const tdm_replay_save *save)
{
    memset(out, 0, sizeof *out);
    if (why && why_len)
        why[0] = '\0';
    tdm__config *parsed = malloc(sizeof *parsed); /* large: off the stack */
    if (!parsed)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_status st = tdm__config_parse(conf ? conf : "", parsed, why, why_len);
    if (st != TDM_OK) {
        free(parsed);
        return TDM_BAD_CONFIG;
    }
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_capacity = capacity;
    cfg.quiet_oom = 1;
    cfg.max_split_size = parsed->alloc.max_split_size;
    memcpy(cfg.roundup_power2_divisions, parsed->alloc.roundup_power2_divisions,
           sizeof cfg.roundup_power2_divisions);
    cfg.garbage_collection_threshold = parsed->alloc.garbage_collection_threshold;
    cfg.expandable_segments = parsed->alloc.expandable_segments;
    free(parsed);

    void **slots = calloc(ids ? ids : 1, sizeof *slots);
    counting_provider *c = calloc(1, sizeof *c);
    tdm_sim_config sc = {.device_count = 1, .capacity = capacity};
    if (!slots || !c || tdm__provider_sim_create(&sc, &c->inner) != TDM_OK) {
        free(slots);
        free(c);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    c->pub = *c->inner;
    c->pub.alloc = count_alloc;
    c->pub.free = count_free;
    c->pub.mem_info = count_mem_info;
    c->pub.device_name = count_name;
    c->pub.destroy = count_destroy;
    c->pub.vmm = &count_vmm;
    c->pub.impl = c;
    c->out = out;
    c->on_segment = on_segment;
    c->ctx = ctx;

    tdm__alloc_reset_for_tests();
    st = tdm__alloc_configure(&cfg);
    if (st == TDM_OK)
        st = tdm__alloc_use_provider(&c->pub);
    if (st != TDM_OK) {
        count_destroy(&c->pub);
        free(slots);
        return st;
    }
    tdm__replay_rec rec = {0};
    if (save && (st = tdm__replay_rec_begin(&rec, save, conf, n)) != TDM_OK) {
        count_destroy(&c->pub);
        free(slots);
        tdm__alloc_reset_for_tests();
        return st;
    }
    int64_t best_allocated = 0;
    replay_waits w = {0};
    for (size_t i = 0; i < n; i++) {
        const tdm_replay_op *o = &ops[i];
        if (save)
            tdm__replay_rec_op(&rec, i);
        if (o->id >= ids)
            continue;
        switch (o->kind) {
        case TDM_REPLAY_ALLOC:
            break;
        case TDM_REPLAY_FREE_DEFERRED:
            if (slots[o->id] && wait_on_own_stream(slots[o->id], o->id) == 0) {
                slots[o->id] = NULL;
                continue;
            }
            /* no host memory to wait with: freed at once */
            __attribute__((fallthrough));
        case TDM_REPLAY_FREE:
            if (slots[o->id])
                tdm__alloc_free(slots[o->id], 0);
            slots[o->id] = NULL;
            continue;
        case TDM_REPLAY_COMPLETE:
            complete_wait(o->id);
            continue;
        case TDM_REPLAY_COMPLETE_IN_ALLOC:
            if (after_alloc_add(&w, o->id) != 0)
                complete_wait(o->id);
            continue;
        default:
            continue;
        }
        if (slots[o->id]) /* an id allocated twice: the older one ends here */
            tdm__alloc_free(slots[o->id], 0);
        slots[o->id] = NULL;
        tdm_status ast = tdm__alloc_malloc(&slots[o->id], (size_t)o->size, 0,
                                           (tdm_stream)o->stream, 0);
        /* Frees the recording completed inside this allocation, which the
         * replay's did not need to wait for. */
        for (size_t k = 0; k < w.after_n; k++)
            complete_wait(w.after_alloc[k]);
        w.after_n = 0;
        if (ast != TDM_OK) {
            slots[o->id] = NULL;
            if (out->ooms++ == 0) {
                out->first_oom_op = i;
                out->first_oom_size = o->size;
            }
            continue;
        }
        /* After every allocation: the two figures alone (a full stats
         * read here took 40% of a sweep's time). */
        int64_t allocated, reserved;
        if (tdm__alloc_current_bytes(0, &allocated, &reserved) == TDM_OK &&
            allocated > best_allocated) {
            best_allocated = allocated;
            out->reserved_at_peak = (uint64_t)reserved;
        }
    }
    /* The file shows the state where the recording ended: what is live
     * and what still waits for another stream. */
    tdm_status saved = save ? tdm__replay_rec_end(&rec, 1) : TDM_OK;
    /* Frees still waiting complete before the end's frees. */
    tdm_device_synchronize(0);
    free(w.after_alloc);
    tdm_stats s = {.size = sizeof s};
    if (tdm_memory_stats(0, &s) != TDM_OK)
        s = (tdm_stats){.size = sizeof s}; /* device 0 exists: not reached */
    out->peak_reserved = (uint64_t)s.reserved_bytes.peak;
    out->peak_allocated = (uint64_t)s.allocated_bytes.peak;
    out->retries = s.num_alloc_retries;
    for (uint64_t i = 0; i < ids; i++)
        if (slots[i])
            tdm__alloc_free(slots[i], 0);
    free(slots);
    flush_unmap(c);
    /* What reset gives back is not part of the replay's timeline. */
    tdm_replay_result kept = *out;
    c->on_segment = NULL;
    tdm__alloc_reset_for_tests();
    *out = kept;
    return saved;
}

TDM_API int tdm__replay(const char *conf, uint64_t capacity, const tdm_replay_op *ops, size_t n,
                        uint64_t ids, tdm_replay_segment_fn on_segment, void *ctx,
                        tdm_replay_result *out, char *why, size_t why_len);

TDM_API int tdm__replay(const char *conf, uint64_t capacity, const tdm_replay_op *ops, size_t n,
                        uint64_t ids, tdm_replay_segment_fn on_segment, void *ctx,
                        tdm_replay_result *out, char *why, size_t why_len)
{
    return replay(conf, capacity, ops, n, ids, on_segment, ctx, out, why, why_len, NULL);
}

TDM_API int tdm__replay_save(const char *conf, uint64_t capacity, const tdm_replay_op *ops,
                             size_t n, uint64_t ids, tdm_replay_segment_fn on_segment,
                             void *ctx, tdm_replay_result *out, char *why, size_t why_len,
                             const tdm_replay_save *save);

TDM_API int tdm__replay_save(const char *conf, uint64_t capacity, const tdm_replay_op *ops,
                             size_t n, uint64_t ids, tdm_replay_segment_fn on_segment,
                             void *ctx, tdm_replay_result *out, char *why, size_t why_len,
                             const tdm_replay_save *save)
{
    return replay(conf, capacity, ops, n, ids, on_segment, ctx, out, why, why_len, save);
}
