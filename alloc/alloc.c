/* alloc/alloc.c: the allocator layer's front door.
 *
 * Owns the global state (tdm__alloc_g): configuration, the provider, the
 * pointer map and per-device snapshot info; the public entry points
 * tdm_malloc, tdm_free, tdm_device_count, tdm_mem_get_info,
 * tdm_memory_stats(_pool), tdm_reset_peak_stats, tdm_empty_cache and the
 * stream calls; the state source and tag listener given to the recorder.
 *
 * Invariants: every live allocation is in the pointer map exactly once;
 * the mode and device count never change between init and reset.
 * Locks: init_lock guards configuration and initialization only; the hot
 * path reads `ready` (acquire) and then the immutable global, and takes
 * only a pointer-map shard lock and the mode's per-device lock.
 */
#include "alloc_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "meta.h"
#include "recorder.h"
#include "clock.h"

tdm__alloc_global tdm__alloc_g = {
    .init_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The recorder's clock, so block times and event times agree. */
uint64_t tdm__alloc_now_ns(void) { return tdm__clock_ns(); }

void tdm__alloc_config_defaults(tdm__alloc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->device_kind, "sim");
    cfg->device_count = 1;
    cfg->device_capacity = (uint64_t)16 << 30;
    strcpy(cfg->mode, "cache");
}

static int mode_of(const char *name)
{
    if (strcmp(name, "cache") == 0)
        return TDM__MODE_CACHE;
    if (strcmp(name, "passthrough") == 0)
        return TDM__MODE_PASSTHROUGH;
    return -1;
}

tdm_status tdm__alloc_configure(const tdm__alloc_config *cfg)
{
    if (cfg == NULL)
        return TDM_INVALID_ARGUMENT;
    if (strcmp(cfg->device_kind, "sim") != 0)
        return TDM_NOT_AVAILABLE;
    if (cfg->device_count < 1 || cfg->device_count > 64 ||
        cfg->device_capacity == 0 || mode_of(cfg->mode) < 0 ||
        !(cfg->garbage_collection_threshold >= 0.0 &&
          cfg->garbage_collection_threshold < 1.0))
        return TDM_BAD_CONFIG;
    pthread_mutex_lock(&tdm__alloc_g.init_lock);
    tdm_status st = TDM_BAD_CONFIG;
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_relaxed)) {
        tdm__alloc_g.cfg = *cfg;
        tdm__alloc_g.configured = 1;
        st = TDM_OK;
    }
    pthread_mutex_unlock(&tdm__alloc_g.init_lock);
    return st;
}

static tdm_status tag_listener(const void *ptr, uint8_t category);
static void state_source(const tdm__state_visitor *v);

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
    tdm_sim_config sc = {
        .device_count = g->cfg.device_count,
        .capacity = g->cfg.device_capacity,
        .host_accessible = g->cfg.host_accessible,
    };
    tdm_status st = tdm__provider_sim_create(&sc, &g->prov);
    if (st != TDM_OK)
        goto out;
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
        g->devices[i] = (tdm_snap_device){.index = i, .vendor = g->prov->vendor,
                                          .name = g->device_names[i],
                                          .capacity = total};
    }
    tdm__ptrmap_init(&g->map);
    st = g->mode == TDM__MODE_CACHE ? tdm__cache_create() : tdm__pt_create();
    if (st != TDM_OK)
        goto fail;
    tdm__rec_set_state_source(state_source);
    tdm__rec_set_tag_listener(tag_listener);
    tdm__rec_set_alloc_mode(g->mode == TDM__MODE_CACHE ? "cache" : "passthrough");
    atomic_store_explicit(&g->ready, 1, memory_order_release);
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

void tdm__alloc_reset_for_tests(void)
{
    tdm__alloc_global *g = &tdm__alloc_g;
    pthread_mutex_lock(&g->init_lock);
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
    if (size > SIZE_MAX - min_block)
        return 0; /* cannot be rounded: the caller reports out of memory */
    return (size + min_block - 1) & ~(min_block - 1);
}

/* ---- public entry points ------------------------------------------------ */

static int valid_device(int device)
{
    return device >= 0 && device < tdm__alloc_g.device_count;
}

__attribute__((noinline)) tdm_status
tdm__alloc_malloc(void **ptr, size_t size, int device, tdm_stream stream,
                  unsigned skip)
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
    if (tdm__rec_on()) {
        /* Unwind before any allocator lock is taken. */
        req.stack_id = tdm__rec_alloc_stack(skip + 1);
        req.category = tdm__rec_current_category();
        req.time_ns = tdm__alloc_now_ns();
    }
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        st = tdm__cache_malloc(&req, ptr);
    else
        st = tdm__pt_malloc(&req, ptr);
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
    return st;
}

__attribute__((noinline)) tdm_status tdm__alloc_free(void *ptr, unsigned skip)
{
    if (ptr == NULL)
        return TDM_OK;
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    tdm__ptr_rec rec;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    /* Cache mode removes the pointer itself, under the device lock, so a
     * block and its map entry always change together. */
    tdm_status st;
    uint32_t free_stack = 0;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE) {
        /* One device: no need to look the pointer up twice. */
        int device = 0;
        if (tdm__alloc_g.device_count > 1) {
            st = tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
            if (st != TDM_OK)
                return st;
            device = rec.device;
        }
        if (tdm__rec_on())
            free_stack = tdm__rec_free_stack(skip + 1);
        st = tdm__cache_free(key, device, free_stack);
    } else {
        st = tdm__ptrmap_remove(&tdm__alloc_g.map, key, &rec);
        if (st != TDM_OK)
            return st;
        if (tdm__rec_on())
            free_stack = tdm__rec_free_stack(skip + 1);
        st = tdm__pt_free(key, &rec, free_stack);
    }
    __asm__ volatile("" ::: "memory");
    return st;
}

TDM_API __attribute__((noinline)) tdm_status
tdm_malloc(void **ptr, size_t size, int device, tdm_stream stream)
{
    tdm_status st = tdm__alloc_malloc(ptr, size, device, stream, 1);
    __asm__ volatile("" ::: "memory");
    return st;
}

TDM_API __attribute__((noinline)) tdm_status tdm_free(void *ptr)
{
    tdm_status st = tdm__alloc_free(ptr, 1);
    __asm__ volatile("" ::: "memory");
    return st;
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

void tdm__stats_export(const tdm__stats_acc *a, int pool, tdm_stats *out)
{
    tdm_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.allocated_bytes = a->st[pool][TDM__ST_ALLOCATED_BYTES];
    s.reserved_bytes = a->st[pool][TDM__ST_RESERVED_BYTES];
    s.active_bytes = a->st[pool][TDM__ST_ACTIVE_BYTES];
    s.requested_bytes = a->st[pool][TDM__ST_REQUESTED_BYTES];
    s.allocation = a->st[pool][TDM__ST_ALLOCATION];
    s.segment = a->st[pool][TDM__ST_SEGMENT];
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

TDM_API tdm_status tdm_memory_stats_pool(int device, tdm_stat_pool pool,
                                         tdm_stats *stats)
{
    if (stats == NULL || stats->size < sizeof(size_t) ||
        (unsigned)pool > TDM_STAT_POOL_LARGE)
        return TDM_INVALID_ARGUMENT;
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (!valid_device(device))
        return TDM_NO_SUCH_DEVICE;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        tdm__cache_stats(device, (int)pool, stats);
    else
        tdm__pt_stats(device, (int)pool, stats);
    return TDM_OK;
}

TDM_API tdm_status tdm_memory_stats(int device, tdm_stats *stats)
{
    return tdm_memory_stats_pool(device, TDM_STAT_POOL_ALL, stats);
}

TDM_API tdm_status tdm_reset_peak_stats(int device)
{
    tdm_status st = tdm__alloc_ready();
    if (st != TDM_OK)
        return st;
    if (!valid_device(device))
        return TDM_NO_SUCH_DEVICE;
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
    tdm__ptr_rec rec;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    tdm_status st = tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
    if (st != TDM_OK || tdm__alloc_g.mode != TDM__MODE_CACHE)
        return st; /* pass-through memory is freed at once: nothing to wait on */
    return tdm__cache_record_stream(key, &rec, stream);
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

static tdm_status tag_listener(const void *ptr, uint8_t category)
{
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE) {
        tdm__ptr_rec rec;
        tdm_status st = tdm__ptrmap_get(&tdm__alloc_g.map, key, &rec);
        return st != TDM_OK ? st : tdm__cache_tag(&rec, category);
    }
    return tdm__ptrmap_set_category(&tdm__alloc_g.map, key, category);
}

static void state_source(const tdm__state_visitor *v)
{
    if (!atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire))
        return;
    if (tdm__alloc_g.mode == TDM__MODE_CACHE)
        tdm__cache_visit(v);
    else
        tdm__pt_visit(v);
}

void tdm__alloc_visit_for_tests(const tdm__state_visitor *v)
{
    state_source(v);
}
