/* alloc/alloc.c: the allocator layer's front door.
 *
 * Owns the global state (tdm__alloc_g): configuration, the provider, the
 * pointer map and per-device snapshot info; the public entry points
 * tdm_malloc, tdm_free, tdm_device_count, tdm_mem_get_info,
 * tdm_memory_stats(_pool), tdm_reset_peak_stats, tdm_empty_cache and the
 * stream calls; the tag listener given to the recorder (the state source
 * is state_source.c's), which covers observe mode's bookings (observe.c)
 * too; the choice of provider (sim, a vendor by kind, or one a hook
 * gives); the registration at load of the fork handlers (alloc_fork.c)
 * that keep every allocator lock free across fork().
 *
 * Invariants: every live allocation is in exactly one map: its device's
 * block map in cache mode (cache_map.c), the pointer map otherwise;
 * the mode and device count never change between init and reset.
 * Locks: init_lock guards configuration and initialization only; the hot
 * path reads `ready` (acquire) and then the immutable global, and takes
 * the mode's per-device lock (pass-through mode with several devices, a
 * pointer-map shard lock too).
 */
#include "alloc_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "meta.h"
#include "recorder.h"
#include "stack.h"

tdm__alloc_global tdm__alloc_g = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
};

void tdm__alloc_config_defaults(tdm__alloc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device_kind = TDM_VENDOR_SIM;
    cfg->device_count = 1;
    cfg->device_capacity = (uint64_t)16 << 30;
    strcpy(cfg->mode, "cache");
}

/* The vendor providers live in their own files; a build or a test binary
 * without one of them still links, and that kind reports not available. */
#define TDM_VENDOR_PROVIDER(id, create, fns)                                   \
    extern tdm_status create(const fns *table, tdm_provider **out)            \
        __attribute__((weak));
#include "vendor_providers.def"

/* Every vendor has a provider: its row in vendor_providers.def, or for
 * the sim device the built-in one.  A vendor added to vendors.def alone
 * stops the build here, naming it. */
enum {
    tdm__vendor_has_provider_SIM = 1,
#define TDM_VENDOR_PROVIDER(id, create, fns) tdm__vendor_has_provider_##id = 1,
#include "vendor_providers.def"
};
#define TDM_VENDOR(id, ...)                                                    \
    _Static_assert(tdm__vendor_has_provider_##id,                              \
                   "vendor " #id ": no row in alloc/vendor_providers.def");
#include "vendors.def"

static int kind_known(tdm_vendor kind)
{
    return kind >= 0 && kind < TDM_VENDOR_COUNT;
}

/* A vendor's provider over its real library (dlopen'ed by the provider),
 * when it is there and has at least one device. */
static tdm_status vendor_provider(tdm_vendor kind, tdm_provider **out)
{
    tdm_status st = TDM_NOT_AVAILABLE;
    *out = NULL;
    switch (kind) {
#define TDM_VENDOR_PROVIDER(id, create, fns)                                   \
    case TDM_VENDOR_##id:                                                      \
        if (create)                                                            \
            st = create(NULL, out);                                            \
        break;
#include "vendor_providers.def"
    default: /* the sim device, made from the configuration */
        break;
    }
    if (st == TDM_OK && (*out)->device_count < 1) {
        (*out)->destroy(*out);
        *out = NULL;
        st = TDM_NOT_AVAILABLE;
    }
    return st;
}

static int mode_of(const char *name)
{
    if (strcmp(name, "cache") == 0)
        return TDM__MODE_CACHE;
    if (strcmp(name, "passthrough") == 0)
        return TDM__MODE_PASSTHROUGH;
    return -1;
}

/* The sim devices a configuration asks for. */
static tdm_sim_config sim_config_of(const tdm__alloc_config *cfg)
{
    return (tdm_sim_config){.device_count = cfg->device_count,
                            .capacity = cfg->device_capacity,
                            .host_accessible = cfg->host_accessible};
}

tdm_status tdm__alloc_config_check(const tdm__alloc_config *cfg)
{
    if (cfg == NULL)
        return TDM_INVALID_ARGUMENT;
    if (!kind_known(cfg->device_kind))
        return TDM_NOT_AVAILABLE;
    if (cfg->device_count < 1 || cfg->device_count > 64 ||
        cfg->device_capacity == 0 || mode_of(cfg->mode) < 0 ||
        !(cfg->garbage_collection_threshold >= 0.0 &&
          cfg->garbage_collection_threshold < 1.0))
        return TDM_BAD_CONFIG;
    if (cfg->device_kind == TDM_VENDOR_SIM) {
        /* The provider comes at the first allocation: a device the machine
         * cannot reserve is refused now, while the caller can still say so
         * and leave recording off. */
        tdm_sim_config sc = sim_config_of(cfg);
        return tdm__provider_sim_check(&sc);
    }
    return TDM_OK;
}

tdm_status tdm__alloc_configure(const tdm__alloc_config *cfg)
{
    tdm_status st = tdm__alloc_config_check(cfg);
    if (st != TDM_OK)
        return st;
    pthread_mutex_lock(&tdm__alloc_g.init_lock);
    st = TDM_BAD_CONFIG;
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_relaxed)) {
        tdm__alloc_g.cfg = *cfg;
        tdm__alloc_g.configured = 1;
        st = TDM_OK;
    }
    pthread_mutex_unlock(&tdm__alloc_g.init_lock);
    return st;
}

/* The provider the configuration asks for, or the one a hook gave. */
static tdm_status make_provider(tdm__alloc_global *g, tdm_provider **out)
{
    if (g->given) {
        *out = g->given;
        g->given = NULL;
        return TDM_OK;
    }
    if (g->cfg.device_kind != TDM_VENDOR_SIM)
        return vendor_provider(g->cfg.device_kind, out);
    tdm_sim_config sc = sim_config_of(&g->cfg);
    return tdm__provider_sim_create(&sc, out);
}

tdm_status tdm__alloc_init_slow(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    pthread_mutex_lock(&g->init_lock);
    if (atomic_load_explicit(&g->ready, memory_order_relaxed)) {
        pthread_mutex_unlock(&g->init_lock);
        return TDM_OK;
    }
    if (!g->configured)
        tdm__alloc_config_defaults(&g->cfg);
    tdm_provider *inner = NULL;
    tdm_status st = make_provider(g, &inner);
    if (st != TDM_OK)
        goto out;
    st = tdm__fraction_wrap(inner, &g->prov);
    if (st != TDM_OK) {
        inner->destroy(inner);
        goto out;
    }
    g->device_count = g->prov->device_count;
    g->mode = mode_of(g->cfg.mode);
    g->devices = tdm__meta_map(sizeof(tdm_snap_device) * (size_t)g->device_count);
    g->device_names = tdm__meta_map(64 * (size_t)g->device_count);
    if (g->devices == NULL || g->device_names == NULL) {
        st = TDM_HOST_OUT_OF_MEMORY;
        goto fail;
    }
    for (int i = 0; i < g->device_count; i++) {
        size_t total = 0;
        g->prov->device_name(g->prov, i, g->device_names[i], 64);
        g->prov->mem_info(g->prov, i, NULL, &total);
        g->devices[i] = (tdm_snap_device){.index = i, .vendor = tdm__vendor_name(g->prov->vendor),
                                          .name = g->device_names[i],
                                          .capacity = total};
    }
    tdm__ptrmap_init(&g->map);
    st = g->mode == TDM__MODE_CACHE ? tdm__cache_create() : tdm__pt_create();
    if (st != TDM_OK)
        goto fail;
    atomic_store_explicit(&g->ready, 1, memory_order_release);
    tdm__alloc_attach_recorder(0);
    goto out;
fail:
    if (g->devices)
        tdm__meta_unmap(g->devices, sizeof(tdm_snap_device) * (size_t)g->device_count);
    if (g->device_names)
        tdm__meta_unmap(g->device_names, 64 * (size_t)g->device_count);
    g->devices = NULL;
    g->device_names = NULL;
    g->prov->destroy(g->prov);
    g->prov = NULL;
out:
    pthread_mutex_unlock(&g->init_lock);
    return st;
}

tdm_status tdm__alloc_init(void)
{
    return tdm__alloc_ready();
}

const char *tdm__alloc_mode_name(void)
{
    if (tdm__alloc_ready() != TDM_OK)
        return "none";
    return tdm__alloc_g.mode == TDM__MODE_CACHE ? "cache" : "passthrough";
}

tdm_status tdm__alloc_use_provider(struct tdm_provider *provider)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (provider == NULL || provider->device_count < 1)
        return TDM_INVALID_ARGUMENT;
    tdm_status st = TDM_BAD_CONFIG;
    pthread_mutex_lock(&g->init_lock);
    if (!atomic_load_explicit(&g->ready, memory_order_relaxed)) {
        if (g->given)
            g->given->destroy(g->given);
        g->given = provider;
        st = TDM_OK;
    }
    pthread_mutex_unlock(&g->init_lock);
    return st;
}

tdm_status tdm__alloc_prefer_vendor(tdm_vendor kind)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    if (atomic_load_explicit(&g->ready, memory_order_acquire))
        return TDM_OK;
    pthread_mutex_lock(&g->init_lock);
    int want = !g->given && (!g->configured ||
                             g->cfg.device_kind == TDM_VENDOR_SIM);
    pthread_mutex_unlock(&g->init_lock);
    if (!want)
        return TDM_OK;
    tdm_provider *p = NULL;
    if (vendor_provider(kind, &p) != TDM_OK)
        return TDM_OK; /* no such vendor here: the sim device serves */
    if (tdm__alloc_use_provider(p) != TDM_OK)
        p->destroy(p); /* another thread started the allocator meanwhile */
    return TDM_OK;
}

tdm_status tdm__alloc_set_memory_fraction(double fraction, int device)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    return tdm__fraction_set(tdm__alloc_g.prov, device, fraction);
}

void tdm__alloc_reset_for_tests(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    tdm__obs_reset_for_tests();
    pthread_mutex_lock(&g->init_lock);
    if (g->given) {
        g->given->destroy(g->given);
        g->given = NULL;
    }
    if (atomic_load_explicit(&g->ready, memory_order_relaxed)) {
        if (g->mode == TDM__MODE_CACHE)
            tdm__cache_destroy();
        else
            tdm__pt_destroy();
        tdm__ptrmap_clear(&g->map);
        g->prov->destroy(g->prov);
        g->prov = NULL;
        tdm__meta_unmap(g->devices, sizeof(tdm_snap_device) * (size_t)g->device_count);
        tdm__meta_unmap(g->device_names, 64 * (size_t)g->device_count);
        g->devices = NULL;
        g->device_names = NULL;
        g->device_count = 0;
        atomic_store_explicit(&g->ready, 0, memory_order_release);
    }
    g->configured = 0;
    pthread_mutex_unlock(&g->init_lock);
}

/* ---- rounding (PyTorch's round_size) ---------------------------------- */

static unsigned log2_floor(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x);
}

size_t tdm__alloc_round_size(size_t size)
{
    const size_t min_block = 512;
    if (size < min_block)
        return min_block;
    size_t divisions = 0;
    if (size >= ((size_t)1 << 20)) {
        unsigned idx = log2_floor(size) - 20;
        if (idx >= TDM_ROUNDUP_INTERVALS)
            idx = TDM_ROUNDUP_INTERVALS - 1;
        divisions = tdm__alloc_g.cfg.roundup_power2_divisions[idx];
    } else {
        divisions = tdm__alloc_g.cfg.roundup_power2_divisions[0];
    }
    if (divisions > 1 && size > min_block * divisions) {
        if ((size & (size - 1)) == 0)
            return size;
        size_t floor2 = (size_t)1 << log2_floor(size);
        size_t step = floor2 >> log2_floor(divisions);
        if (step == 0)
            return floor2 << 1;
        size_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return tdm__alloc_round_plain(size);
}

/* ---- public entry points ------------------------------------------------ */

/* (One unsigned test: the quiet entry tests it with the mode at once.) */
static inline int valid_device(int device)
{
    return (unsigned)device < (unsigned)tdm__alloc_g.device_count;
}

/* The bodies of the entry points' loud paths (below), given the stack
 * their entry captured. */
static inline __attribute__((always_inline)) tdm_status
alloc_malloc(void **ptr, size_t size, int device, tdm_stream stream, uint32_t stack_id)
{
    if (ptr == NULL)
        return TDM_INVALID_ARGUMENT;
    *ptr = NULL;
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (!valid_device(device))
        return TDM_NO_SUCH_DEVICE;
    tdm__alloc_req req = {.size = size, .device = device, .stream = stream};
    /* (The loud path is, in cache mode, the recording one.) */
    if (__builtin_expect(tdm__rec_on(), 1)) {
        req.stack_id = stack_id;
        req.category = tdm__rec_current_category();
        req.time_ns = 1; /* stamped under the device lock (the modes) */
    }
    if (__builtin_expect(tdm__alloc_g.mode == TDM__MODE_CACHE, 1))
        return tdm__cache_malloc(&req, ptr);
    return tdm__pt_malloc(&req, ptr);
}

static inline __attribute__((always_inline)) tdm_status
alloc_free(void *ptr, uint32_t free_stack, int on_stream, tdm_stream stream)
{
    if (ptr == NULL)
        return TDM_OK;
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    /* Both modes remove the pointer under its device's lock
     * (tdm__cache_free, tdm__pt_free), so a block or record, its map
     * entry, the stats and the events change together.  The cache asks
     * the devices whose segments cover the pointer; pass-through mode
     * finds the device in the process-wide map first (one device: no need
     * to look the pointer up twice). */
    int cache = tdm__alloc_g.mode == TDM__MODE_CACHE;
    int device = 0;
    if (__builtin_expect(!cache, 0) && tdm__alloc_g.device_count > 1) {
        tdm__ptr_rec rec;
        tdm_status st = tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
        if (st != TDM_OK)
            return st;
        device = rec.device;
    }
    if (__builtin_expect(cache, 1))
        return tdm__cache_free_any(key, free_stack, on_stream, stream);
    return tdm__pt_free(key, device, free_stack);
}

/* The quiet path: cache mode with nothing recorded.  No stack is
 * captured, so the entry's frame need not stay below the mode's: the
 * entries jump to the cache (a tail call) instead of calling it, and the
 * cache's quiet body has the recording's branches folded away.  ResNet
 * trace: 676 -> 613 instructions a pair. */
static inline int quiet_cache(void)
{
    /* What `ready` publishes is read after it; the rest is tested at once
     * (&, not &&), so that the quiet path is one branch the entry falls
     * through, not a chain the compiler lays out around the loud one. */
    if (__builtin_expect(!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire), 0))
        return 0;
    return (tdm__alloc_g.mode == TDM__MODE_CACHE) & !tdm__rec_on();
}

static inline int quiet_malloc(void **ptr, int device)
{
    return ptr != NULL && quiet_cache() & valid_device(device);
}

static inline int quiet_free(void *ptr)
{
    return ptr != NULL && quiet_cache();
}

/* The loud bodies (every other case) out of line, so that the entries
 * need no frame of their own on the quiet path.  The stack is captured
 * before them, in the entry's own frame (`skip` counts it), so that the
 * unwinder does not walk one frame more. */
static __attribute__((noinline)) tdm_status
malloc_loud(void **ptr, size_t size, int device, tdm_stream stream, uint32_t stack_id)
{
    return alloc_malloc(ptr, size, device, stream, stack_id);
}

static __attribute__((noinline)) tdm_status free_loud(void *ptr, uint32_t free_stack)
{
    return alloc_free(ptr, free_stack, 0, 0);
}

/* The stacks of a call that is not quiet: captured even when the call
 * turns out invalid (a stack then kept for nothing, rarely). */
#define TDM__ALLOC_STACK(skip) (ptr != NULL && tdm__rec_on() ? tdm__rec_alloc_stack(skip) : 0)
#define TDM__FREE_STACK(skip) (ptr != NULL && tdm__rec_on() ? tdm__rec_free_stack(skip) : 0)

/* `skip`: the frames above the capture, the entry's own included. */
#define TDM__MALLOC_ENTRY(skip)                                              \
    do {                                                                    \
        if (quiet_malloc(ptr, device))                                      \
            return tdm__cache_malloc_quiet(ptr, size, device, stream);      \
        uint32_t sid_ = TDM__ALLOC_STACK(skip);                             \
        return malloc_loud(ptr, size, device, stream, sid_);                \
    } while (0)

#define TDM__FREE_ENTRY(skip)                                               \
    do {                                                                    \
        if (quiet_free(ptr))                                                \
            return tdm__cache_free_quiet((uint64_t)(uintptr_t)ptr);         \
        uint32_t fs_ = TDM__FREE_STACK(skip);                               \
        return free_loud(ptr, fs_);                                         \
    } while (0)

__attribute__((noinline)) tdm_status
tdm__alloc_malloc(void **ptr, size_t size, int device, tdm_stream stream,
                  unsigned skip)
{
    TDM__MALLOC_ENTRY(skip + 1);
}

__attribute__((noinline)) tdm_status tdm__alloc_free(void *ptr, unsigned skip)
{
    TDM__FREE_ENTRY(skip + 1);
}

__attribute__((noinline)) tdm_status tdm__alloc_free_as(void *ptr, unsigned skip, int on_stream,
                                                        tdm_stream stream)
{
    return alloc_free(ptr, TDM__FREE_STACK(skip + 1), on_stream, stream);
}

TDM_API int tdm__alloc_owns(const void *ptr)
{
    if (ptr == NULL || !atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire) ||
        tdm__alloc_g.mode != TDM__MODE_CACHE)
        return 0;
    for (int d = 0; d < tdm__alloc_g.device_count; d++)
        if (tdm__cache_owns((uint64_t)(uintptr_t)ptr, d))
            return 1;
    return 0;
}

TDM_API int tdm__alloc_owner_device(const void *ptr)
{
    if (ptr == NULL || !atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire) ||
        tdm__alloc_g.mode != TDM__MODE_CACHE)
        return -1;
    for (int d = 0; d < tdm__alloc_g.device_count; d++)
        if (tdm__cache_owns((uint64_t)(uintptr_t)ptr, d))
            return d;
    return -1;
}

TDM_API size_t tdm__alloc_live_blocks(int device, uint64_t *out, size_t max)
{
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire) ||
        tdm__alloc_g.mode != TDM__MODE_CACHE || !valid_device(device))
        return 0;
    return tdm__cache_live_blocks(device, out, max);
}

TDM_API __attribute__((noinline)) tdm_status
tdm_malloc(void **ptr, size_t size, int device, tdm_stream stream)
{
    TDM__MALLOC_ENTRY(1u);
}

TDM_API __attribute__((noinline)) tdm_status tdm_free(void *ptr)
{
    TDM__FREE_ENTRY(1u);
}

TDM_API tdm_status tdm_device_count(int *count)
{
    if (count == NULL)
        return TDM_INVALID_ARGUMENT;
    *count = 0;
    tdm_status st = tdm__alloc_ready();
    if (st == TDM_OK)
        *count = tdm__alloc_g.device_count;
    return st;
}

TDM_API tdm_status tdm_mem_get_info(int device, size_t *free_bytes,
                                    size_t *total_bytes)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (!valid_device(device))
        return TDM_NO_SUCH_DEVICE;
    return tdm__alloc_g.prov->mem_info(tdm__alloc_g.prov, device, free_bytes,
                                       total_bytes);
}

/* A kept stat as callers see it: the sum of increments is what is there
 * now plus what went (tdm__stats_acc keeps no `allocated`). */
static tdm_stat stat_out(const tdm_stat *kept)
{
    tdm_stat s = *kept;
    s.allocated = s.current + s.freed;
    return s;
}

void tdm__stats_export(const tdm__stats_acc *a, int pool, tdm_stats *out)
{
    tdm_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.allocated_bytes = stat_out(&a->st[pool][TDM__ST_ALLOCATED_BYTES]);
    s.reserved_bytes = stat_out(&a->st[pool][TDM__ST_RESERVED_BYTES]);
    s.active_bytes = stat_out(&a->st[pool][TDM__ST_ACTIVE_BYTES]);
    s.requested_bytes = stat_out(&a->st[pool][TDM__ST_REQUESTED_BYTES]);
    s.allocation = stat_out(&a->st[pool][TDM__ST_ALLOCATION]);
    s.segment = stat_out(&a->st[pool][TDM__ST_SEGMENT]);
    s.num_alloc_retries = a->num_alloc_retries;
    s.num_ooms = a->num_ooms;
    /* An older caller's struct is shorter: copy only what it has room for. */
    size_t n = out->size < sizeof s ? out->size : sizeof s;
    memcpy((char *)out + sizeof out->size, (char *)&s + sizeof s.size,
           n - sizeof out->size);
}

void tdm__stats_reset_peaks(tdm__stats_acc *a)
{
    for (int p = 0; p < 3; p++)
        for (int r = 0; r < TDM__ST_COUNT; r++)
            a->st[p][r].peak = a->st[p][r].current;
}

static void stat_sum(tdm_stat *a, const tdm_stat *b)
{
    a->current += b->current;
    a->peak += b->peak; /* an upper bound: the two peaks may not coincide */
    a->allocated += b->allocated;
    a->freed += b->freed;
}

void tdm__stats_sum(tdm_stats *a, const tdm_stats *b)
{
    stat_sum(&a->allocated_bytes, &b->allocated_bytes);
    stat_sum(&a->reserved_bytes, &b->reserved_bytes);
    stat_sum(&a->active_bytes, &b->active_bytes);
    stat_sum(&a->requested_bytes, &b->requested_bytes);
    stat_sum(&a->allocation, &b->allocation);
    stat_sum(&a->segment, &b->segment);
    a->num_alloc_retries += b->num_alloc_retries;
    a->num_ooms += b->num_ooms;
}

/* The allocator's stats of `device` plus observe mode's (full size). */
static void device_stats(int device, int pool, int in_alloc, int in_obs,
                         tdm_stats *out)
{
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    if (in_alloc) {
        if (tdm__alloc_g.mode == TDM__MODE_CACHE)
            tdm__cache_stats(device, pool, out);
        else
            tdm__pt_stats(device, pool, out);
    }
    if (in_obs) {
        tdm_stats o = {.size = sizeof o};
        tdm__obs_stats(device, pool, &o);
        tdm__stats_sum(out, &o);
    }
}

TDM_API tdm_status tdm_memory_stats_pool(int device, tdm_stat_pool pool,
                                         tdm_stats *stats)
{
    if (stats == NULL || stats->size < sizeof(size_t) ||
        (unsigned)pool > TDM_STAT_POOL_LARGE)
        return TDM_INVALID_ARGUMENT;
    /* A device only observe mode knows (a vendor's, seen by the hooks)
     * does not start the allocator. */
    int in_obs = tdm__obs_has_device(device);
    int in_alloc = 0;
    if (!in_obs || atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire)) {
        tdm_status st = tdm__alloc_ready();
        if (st != TDM_OK && !in_obs)
            return st;
        in_alloc = st == TDM_OK && valid_device(device);
    }
    if (!in_alloc && !in_obs)
        return TDM_NO_SUCH_DEVICE;
    tdm_stats all;
    device_stats(device, (int)pool, in_alloc, in_obs, &all);
    size_t n = stats->size < sizeof all ? stats->size : sizeof all;
    memcpy((char *)stats + sizeof stats->size, (char *)&all + sizeof all.size,
           n - sizeof stats->size);
    return TDM_OK;
}

TDM_API tdm_status tdm_memory_stats(int device, tdm_stats *stats)
{
    return tdm_memory_stats_pool(device, TDM_STAT_POOL_ALL, stats);
}

tdm_status tdm__alloc_current_bytes(int device, int64_t *allocated, int64_t *reserved)
{
    if (atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire) &&
        tdm__alloc_g.mode == TDM__MODE_CACHE && valid_device(device) &&
        !tdm__obs_has_device(device)) {
        tdm__cache_current_bytes(device, allocated, reserved);
        return TDM_OK;
    }
    tdm_stats s = {.size = sizeof s};
    tdm_status st = tdm_memory_stats(device, &s);
    if (st == TDM_OK) {
        *allocated = s.allocated_bytes.current;
        *reserved = s.reserved_bytes.current;
    }
    return st;
}

TDM_API tdm_status tdm_reset_peak_stats(int device)
{
    int in_obs = tdm__obs_has_device(device);
    if (in_obs)
        tdm__obs_reset_peaks(device);
    if (in_obs && !atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_OK;
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return in_obs ? TDM_OK : st;
    if (!valid_device(device))
        return in_obs ? TDM_OK : TDM_NO_SUCH_DEVICE;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        tdm__cache_reset_peaks(device);
    else
        tdm__pt_reset_peaks(device);
    return TDM_OK;
}

TDM_API tdm_status tdm_empty_cache(int device)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (device != -1 && !valid_device(device))
        return TDM_NO_SUCH_DEVICE;
    if (tdm__alloc_g.mode != TDM__MODE_CACHE)
        return TDM_OK;
    for (int d = 0; d < tdm__alloc_g.device_count; d++)
        if (device == -1 || device == d)
            tdm__cache_empty(d);
    return TDM_OK;
}

TDM_API tdm_status tdm_record_stream(void *ptr, tdm_stream stream)
{
    if (ptr == NULL)
        return TDM_INVALID_ARGUMENT;
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    if (tdm__alloc_g.mode != TDM__MODE_CACHE) {
        /* pass-through memory is freed at once: nothing to wait on */
        tdm__ptr_rec rec;
        return tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
    }
    int device = tdm__cache_device_of(key);
    return device < 0 ? TDM_UNKNOWN_POINTER : tdm__cache_record_stream(key, device, stream);
}

TDM_API tdm_status tdm__alloc_base_of(const void *ptr, void **base, size_t *size)
{
    if (ptr == NULL || !atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    uint64_t key = (uint64_t)(uintptr_t)ptr, at = key, bytes = 0;
    if (tdm__alloc_g.mode != TDM__MODE_CACHE) {
        tdm__ptr_rec rec;
        tdm_status st = tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
        if (st != TDM_OK)
            return st;
        bytes = rec.size;
    } else {
        int device = tdm__cache_device_of(key);
        if (device < 0 || !tdm__cache_base_of(key, device, &at, &bytes))
            return TDM_UNKNOWN_POINTER;
    }
    *base = (void *)(uintptr_t)at;
    *size = (size_t)bytes;
    return TDM_OK;
}

TDM_API tdm_status tdm_stream_synchronize(tdm_stream stream)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        for (int d = 0; d < tdm__alloc_g.device_count; d++)
            tdm__cache_sync(d, 0, stream);
    return TDM_OK;
}

TDM_API tdm_status tdm_device_synchronize(int device)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (device != -1 && !valid_device(device))
        return TDM_NO_SUCH_DEVICE;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        for (int d = 0; d < tdm__alloc_g.device_count; d++)
            if (device == -1 || device == d)
                tdm__cache_sync(d, 1, 0);
    return TDM_OK;
}

/* ---- recorder hooks ------------------------------------------------------ */

static tdm_status alloc_tag(uint64_t key, uint8_t category)
{
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE) {
        int device = tdm__cache_device_of(key);
        return device < 0 ? TDM_UNKNOWN_POINTER : tdm__cache_tag(key, device, category);
    }
    return tdm__ptrmap_set_category(&tdm__alloc_g.map, key, category);
}

static tdm_status tag_listener(const void *ptr, uint8_t category)
{
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    tdm_status st = alloc_tag(key, category);
    return st == TDM_UNKNOWN_POINTER ? tdm__obs_tag(key, category) : st;
}

void tdm__alloc_attach_recorder(int observe)
{
    tdm__rec_set_state_source(tdm__alloc_state_source);
    tdm__rec_set_tag_listener(tag_listener);
    if (!observe)
        tdm__rec_set_alloc_mode(tdm__alloc_g.mode == TDM__MODE_CACHE
                                    ? "cache" : "passthrough");
    else if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        tdm__rec_set_alloc_mode("observe");
}

/* ---- fork ------------------------------------------------------------------
 * The handlers are alloc_fork.c's. */

/* At load, before the program can start a thread or fork: registered at
 * the first allocation instead, a fork() at the same moment as that first
 * allocation in another thread would not wait for its locks. */
__attribute__((constructor)) static void register_atfork_at_load(void)
{
    tdm__alloc_register_atfork();
}
