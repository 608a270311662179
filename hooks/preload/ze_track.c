/* hooks/preload/ze_track.c: the rare paths of Level Zero booking
 * (ze_track.h): device ordinals and their descriptions, free bytes
 * through Sysman, the cache's provider, physical-memory handles; and the
 * recursion guard and mode of whichever library this is compiled into
 * (libtidemark_preload.so, or the shim driver with TDM_ZE_SHIM).
 *
 * Invariants: tdm__ze_devices[] only grows, each slot written once with a
 * handle no other slot holds; the ordinal of a handle never changes.  The
 * cache serves exactly one context, the first one seen, for the life of
 * the process.
 *
 * Locks: reg_lock around registering devices (the fast lookup reads the
 * slots with acquire loads and takes no lock); phys_lock around the
 * physical-memory table (virtual-memory calls are rare and heavy); the
 * cache set-up runs once under cache_lock.
 */
#define _GNU_SOURCE
#include "ze_track.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "provider_ze.h"

/* Our provider_ze.h copies of the header's structs must match it. */
#define SAME_OFFSET(ours, theirs, field)                                       \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field),           \
                   #ours "." #field " does not match " #theirs)
SAME_OFFSET(tdm__ze_device_props, ze_device_properties_t, maxMemAllocSize);
SAME_OFFSET(tdm__ze_device_props, ze_device_properties_t, timerResolution);
SAME_OFFSET(tdm__ze_device_props, ze_device_properties_t, uuid);
SAME_OFFSET(tdm__ze_device_props, ze_device_properties_t, name);
_Static_assert(sizeof(tdm__ze_device_props) == sizeof(ze_device_properties_t), "props size");
SAME_OFFSET(tdm__ze_memory_props, ze_device_memory_properties_t, totalSize);
_Static_assert(sizeof(tdm__ze_memory_props) == sizeof(ze_device_memory_properties_t), "mem size");
SAME_OFFSET(tdm__ze_mem_alloc_desc, ze_device_mem_alloc_desc_t, ordinal);
SAME_OFFSET(tdm__ze_context_desc, ze_context_desc_t, flags);
SAME_OFFSET(tdm__zes_mem_state, zes_mem_state_t, free);
SAME_OFFSET(tdm__zes_mem_state, zes_mem_state_t, size);
SAME_OFFSET(tdm__ze_physical_mem_desc, ze_physical_mem_desc_t, flags);
SAME_OFFSET(tdm__ze_physical_mem_desc, ze_physical_mem_desc_t, size);
_Static_assert(sizeof(tdm__ze_physical_mem_desc) == sizeof(ze_physical_mem_desc_t),
               "physical mem desc size");
_Static_assert(sizeof(ze_memory_access_attribute_t) == sizeof(int), "access attribute width");
#define SAME_VALUE(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours)
SAME_VALUE(TDM__ZE_STYPE_DEVICE_MEM_ALLOC_DESC, ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
SAME_VALUE(TDM__ZE_STYPE_DEVICE_PROPERTIES, ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES);
SAME_VALUE(TDM__ZE_STYPE_DEVICE_MEMORY_PROPERTIES, ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES);
SAME_VALUE(TDM__ZE_STYPE_CONTEXT_DESC, ZE_STRUCTURE_TYPE_CONTEXT_DESC);
SAME_VALUE(TDM__ZES_STYPE_MEM_STATE, ZES_STRUCTURE_TYPE_MEM_STATE);
SAME_VALUE(TDM__ZE_STYPE_PHYSICAL_MEM_DESC, ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC);
SAME_VALUE(TDM__ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
SAME_VALUE(TDM__ZE_ERROR_OUT_OF_DEVICE_MEMORY, ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
SAME_VALUE(TDM__ZE_ERROR_OUT_OF_HOST_MEMORY, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
SAME_VALUE(TDM__ZE_ERROR_UNINITIALIZED, ZE_RESULT_ERROR_UNINITIALIZED);

/* ---- guard and mode ------------------------------------------------------ */

#ifdef TDM_ZE_SHIM
/* The shim driver is its own library: its own guard, and the mode asked
 * of libtidemark.so once. */
static __thread int inside;
static _Atomic int shim_mode = -1;

int tdm__ze_enter(void)
{
    if (inside)
        return 0;
    inside = 1;
    return 1;
}

void tdm__ze_leave(void)
{
    inside = 0;
}

tdm__hook_mode tdm__ze_mode(void)
{
    int m = atomic_load_explicit(&shim_mode, memory_order_acquire);
    if (m < 0) {
        m = (int)tdm__autoinit_hook_mode();
        atomic_store_explicit(&shim_mode, m, memory_order_release);
    }
    return (tdm__hook_mode)m;
}
#endif

/* ---- devices -------------------------------------------------------------- */

_Atomic(ze_device_handle_t) tdm__ze_devices[64];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_count;      /* slots used (under reg_lock) */
static int reg_enumerated; /* the drivers' lists were read (under reg_lock) */

/* Names and sizes device `ordinal` for the snapshot. */
static void describe(const tdm__ze_real *r, int ordinal, ze_device_handle_t dev)
{
    ze_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    if (!r->device_get_properties || r->device_get_properties(dev, &props) != ZE_RESULT_SUCCESS)
        props.name[0] = '\0';
    uint64_t capacity = 0;
    ze_device_memory_properties_t mem[8];
    uint32_t n = 8;
    for (uint32_t i = 0; i < n; i++) {
        memset(&mem[i], 0, sizeof mem[i]);
        mem[i].stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    }
    if (r->device_get_memory_properties &&
        r->device_get_memory_properties(dev, &n, mem) == ZE_RESULT_SUCCESS)
        for (uint32_t i = 0; i < n && i < 8; i++)
            capacity += mem[i].totalSize;
    tdm__alloc_observe_device(ordinal, "ze", props.name, capacity);
}

static int find(ze_device_handle_t dev)
{
    for (int i = 0; i < reg_count; i++)
        if (atomic_load_explicit(&tdm__ze_devices[i], memory_order_relaxed) == dev)
            return i;
    return -1;
}

static void add(const tdm__ze_real *r, ze_device_handle_t dev)
{
    if (reg_count >= 64 || find(dev) >= 0)
        return;
    describe(r, reg_count, dev);
    atomic_store_explicit(&tdm__ze_devices[reg_count], dev, memory_order_release);
    reg_count++;
}

/* Every driver's devices, in order (under reg_lock). */
static void enumerate(const tdm__ze_real *r)
{
    reg_enumerated = 1;
    if (!r->driver_get || !r->device_get)
        return;
    ze_driver_handle_t drivers[8];
    uint32_t nd = 8;
    if (r->driver_get(&nd, drivers) != ZE_RESULT_SUCCESS)
        return;
    for (uint32_t i = 0; i < nd && i < 8; i++) {
        ze_device_handle_t devs[64];
        uint32_t n = 64;
        if (r->device_get(drivers[i], &n, devs) != ZE_RESULT_SUCCESS)
            continue;
        for (uint32_t j = 0; j < n && j < 64; j++)
            add(r, devs[j]);
    }
}

int tdm__ze_device_slow(const tdm__ze_real *r, ze_device_handle_t dev)
{
    if (dev == NULL)
        return -1;
    pthread_mutex_lock(&reg_lock);
    if (!reg_enumerated)
        enumerate(r);
    int i = find(dev);
    if (i < 0) {
        add(r, dev);
        i = find(dev);
    }
    pthread_mutex_unlock(&reg_lock);
    return i >= 0 ? i : 63; /* more than 64 devices: book on the last */
}

static _Atomic int host_described;

void tdm__ze_host_seen(void)
{
    if (!atomic_load_explicit(&host_described, memory_order_acquire)) {
        tdm__alloc_observe_device(-1, "ze", "host (USM)", 0);
        atomic_store_explicit(&host_described, 1, memory_order_release);
    }
}

size_t tdm__ze_free_bytes(const tdm__ze_real *r, int ordinal)
{
    if (ordinal < 0 || ordinal >= 64 || !r->sysman_enum_memory_modules ||
        !r->sysman_memory_get_state)
        return 0;
    ze_device_handle_t dev = atomic_load_explicit(&tdm__ze_devices[ordinal], memory_order_acquire);
    zes_mem_handle_t modules[8];
    uint32_t n = 8;
    /* Sysman accepts core device handles (zes_device_handle_t is the same
     * object in Level Zero 1.x). */
    if (dev == NULL ||
        r->sysman_enum_memory_modules((zes_device_handle_t)dev, &n, modules) != ZE_RESULT_SUCCESS)
        return 0;
    uint64_t fr = 0;
    for (uint32_t i = 0; i < n && i < 8; i++) {
        zes_mem_state_t st;
        memset(&st, 0, sizeof st);
        st.stype = ZES_STRUCTURE_TYPE_MEM_STATE;
        if (r->sysman_memory_get_state(modules[i], &st) != ZE_RESULT_SUCCESS)
            return 0;
        fr += st.free;
    }
    return (size_t)fr;
}

/* ---- cache mode -------------------------------------------------------------- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int cache_state; /* 0 not tried, 1 serving, 2 not serving */
static _Atomic(ze_context_handle_t) cache_ctx;

static void cache_setup(const tdm__ze_real *r, ze_context_handle_t ctx)
{
    pthread_mutex_lock(&reg_lock);
    if (!reg_enumerated)
        enumerate(r);
    struct tdm_ze_fns fns;
    memset(&fns, 0, sizeof fns);
    fns.device_count = (uint32_t)reg_count;
    for (int i = 0; i < reg_count; i++)
        fns.devices[i] = atomic_load_explicit(&tdm__ze_devices[i], memory_order_relaxed);
    pthread_mutex_unlock(&reg_lock);
    /* Our table's int-returning, void-pointer types are the ABI of the
     * ze_pfn* types (ze_result_t is an int-sized enum, handles pointers). */
    fns.device_get_properties =
        (int (*)(void *, tdm__ze_device_props *))(void *)r->device_get_properties;
    fns.device_get_memory_properties =
        (int (*)(void *, uint32_t *, tdm__ze_memory_props *))(void *)
            r->device_get_memory_properties;
    fns.mem_alloc_device =
        (int (*)(void *, const tdm__ze_mem_alloc_desc *, size_t, size_t, void *, void **))(void *)
            r->mem_alloc_device;
    fns.mem_free = (int (*)(void *, void *))(void *)r->mem_free;
    fns.sysman_enum_memory_modules =
        (int (*)(void *, uint32_t *, void **))(void *)r->sysman_enum_memory_modules;
    fns.sysman_memory_get_state =
        (int (*)(void *, tdm__zes_mem_state *))(void *)r->sysman_memory_get_state;
    /* Expandable segments: the un-hooked functions, so that the cache's
     * own mappings are not recorded as the program's. */
    fns.virtual_mem_reserve =
        (int (*)(void *, const void *, size_t, void **))(void *)r->virtual_mem_reserve;
    fns.virtual_mem_free = (int (*)(void *, const void *, size_t))(void *)r->virtual_mem_free;
    fns.virtual_mem_query_page_size =
        (int (*)(void *, void *, size_t, size_t *))(void *)r->virtual_mem_query_page_size;
    fns.physical_mem_create = (int (*)(void *, void *, tdm__ze_physical_mem_desc *, void **))(
        void *)r->physical_mem_create;
    fns.physical_mem_destroy = (int (*)(void *, void *))(void *)r->physical_mem_destroy;
    /* ze_memory_access_attribute_t is an int-sized enum. */
    fns.virtual_mem_map = (int (*)(void *, const void *, size_t, void *, size_t, int))(void *)
                              r->virtual_mem_map;
    fns.virtual_mem_unmap = (int (*)(void *, const void *, size_t))(void *)r->virtual_mem_unmap;
    fns.context = ctx;
    tdm_provider *p = NULL;
    int ok = fns.device_count > 0 && tdm__provider_ze_create(&fns, &p) == TDM_OK;
    if (ok && tdm__alloc_use_provider(p) != TDM_OK) {
        p->destroy(p); /* the allocator already serves another device kind */
        ok = 0;
    }
    atomic_store_explicit(&cache_ctx, ctx, memory_order_release);
    atomic_store_explicit(&cache_state, ok ? 1 : 2, memory_order_release);
}

int tdm__ze_cache_serves(const tdm__ze_real *r, ze_context_handle_t ctx)
{
    int s = atomic_load_explicit(&cache_state, memory_order_acquire);
    if (s == 0) {
        pthread_mutex_lock(&cache_lock);
        if (atomic_load_explicit(&cache_state, memory_order_relaxed) == 0)
            cache_setup(r, ctx);
        pthread_mutex_unlock(&cache_lock);
        s = atomic_load_explicit(&cache_state, memory_order_acquire);
    }
    return s == 1 && atomic_load_explicit(&cache_ctx, memory_order_relaxed) == ctx;
}

/* ---- free policies ---------------------------------------------------------------
 * ze_api.h (Level Zero 1.4): BLOCKING_FREE "blocks until all commands
 * using the memory are complete before freeing", DEFER_FREE "schedules the
 * memory to be freed but does not free immediately".  Either lets the
 * program free memory a command in flight still uses; the driver then
 * waits for those commands.  The cache does not see the command queues,
 * so it cannot: a block freed so is never handed out again (its bytes stay
 * booked as allocated), BLOCKING_FREE's wait is not given for it, and from
 * then on device allocations go to the driver (as in observe mode), so
 * that every later policy is the driver's to keep. */

_Atomic int tdm__ze_policies_seen;

ze_result_t tdm__ze_free_policy_cached(const ze_memory_free_ext_desc_t *desc, void *ptr)
{
    (void)ptr; /* kept out of use: not given back to the cache */
    if (desc->freePolicy > (ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE |
                            ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE))
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    if (atomic_exchange_explicit(&tdm__ze_policies_seen, 1, memory_order_relaxed) == 0)
        fprintf(stderr,
                "tidemark: mode=cache: zeMemFreeExt with a free policy (DEFER_FREE or "
                "BLOCKING_FREE) of a block the cache served; the device may still use it, so "
                "the block stays out of use (without BLOCKING_FREE's wait) and later Level "
                "Zero device allocations go to the driver\n");
    return ZE_RESULT_SUCCESS;
}

/* ---- physical memory handles ------------------------------------------------- */

#define PHYS_SLOTS 4096
static pthread_mutex_t phys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    ze_physical_mem_handle_t h; /* NULL: free */
    int ordinal;
} phys[PHYS_SLOTS];

void tdm__ze_phys_remember(ze_physical_mem_handle_t h, int ordinal)
{
    pthread_mutex_lock(&phys_lock);
    for (int i = 0; i < PHYS_SLOTS; i++)
        if (phys[i].h == NULL) {
            phys[i].h = h;
            phys[i].ordinal = ordinal;
            break;
        }
    pthread_mutex_unlock(&phys_lock);
}

int tdm__ze_phys_device(ze_physical_mem_handle_t h)
{
    int ordinal = -1;
    pthread_mutex_lock(&phys_lock);
    for (int i = 0; i < PHYS_SLOTS; i++)
        if (phys[i].h == h) {
            ordinal = phys[i].ordinal;
            break;
        }
    pthread_mutex_unlock(&phys_lock);
    return ordinal;
}

void tdm__ze_phys_forget(ze_physical_mem_handle_t h)
{
    pthread_mutex_lock(&phys_lock);
    for (int i = 0; i < PHYS_SLOTS; i++)
        if (phys[i].h == h) {
            phys[i].h = NULL;
            break;
        }
    pthread_mutex_unlock(&phys_lock);
}
