/* hooks/track/ze_track.c: the rare paths of Level Zero booking
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
 * slots with acquire loads and takes no lock); the physical-memory
 * tracker's own (vmm_track.h); the cache set-up runs once under
 * cache_lock; queue_lock over the queues the free policies wait for.
 */
#define _GNU_SOURCE
#include "ze_track.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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
    tdm__alloc_observe_device(ordinal, TDM_VENDOR_ZE, props.name, capacity);
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
        tdm__alloc_observe_device(-1, TDM_VENDOR_ZE, "host (USM)", 0);
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
 * waits for those commands.  The cache cannot tell which commands use a
 * block, but commands run on the context's command queues, which cache
 * mode records as they are made (tdm__ze_queue_create): waiting for all of
 * them waits for those commands too.  BLOCKING_FREE synchronizes every
 * queue of the context (zeCommandQueueSynchronize, UINT64_MAX), then gives
 * the block back to the cache.  DEFER_FREE gives it back at once when every
 * queue is idle (a synchronize with timeout 0: "immediately returns the
 * status of the command queue"), else keeps it aside until they are, which
 * the cache's next device allocations ask; meanwhile its bytes stay booked
 * as allocated.  A queue idle now has completed everything queued before
 * the free, whatever was queued since.
 *
 * When the queues are not all known (an immediate command list, for which
 * the 1.4 API has no host wait; no queue seen at all, so the commands run
 * where tidemark did not look; a wait that failed), nothing can be waited
 * for: the block is never handed out again (its bytes stay booked as
 * allocated), one line on stderr says so, and from then on device
 * allocations go to the driver (as in observe mode), so that every later
 * policy is the driver's to keep.
 *
 * Lock: queue_lock over the queues and the blocks kept aside (malloc'ed,
 * grown by doubling: queue creation and policy frees are rare, never on
 * an allocation's fast path, which reads tdm__ze_deferred_blocks only).
 * No driver call is made with it held. */

_Atomic int tdm__ze_policies_seen;
_Atomic int tdm__ze_deferred_blocks;

typedef struct known_queue {
    ze_context_handle_t ctx;
    void *handle;
    int immediate;
} known_queue;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static known_queue *queues;   /* under queue_lock */
static size_t n_queues, queues_cap;
static void **deferred;       /* blocks freed with DEFER_FREE, under queue_lock */
static size_t n_deferred, deferred_cap;
static _Atomic int queues_lost; /* a queue could not be recorded */

/* Room for one more of `each` bytes in *v (queue_lock held); 0 when none. */
static int grow(void **v, size_t *cap, size_t n, size_t each)
{
    if (n < *cap)
        return 1;
    size_t want = *cap ? 2 * *cap : 16;
    void *g = realloc(*v, want * each);
    if (g == NULL)
        return 0;
    *v = g;
    *cap = want;
    return 1;
}

void tdm__ze_queue_seen(ze_context_handle_t c, void *handle, int immediate)
{
    pthread_mutex_lock(&queue_lock);
    if (grow((void **)&queues, &queues_cap, n_queues, sizeof *queues))
        queues[n_queues++] = (known_queue){c, handle, immediate};
    else
        atomic_store(&queues_lost, 1); /* never waited for: the fallback, for good */
    pthread_mutex_unlock(&queue_lock);
}

int tdm__ze_queue_forget(void *handle, ze_context_handle_t *c, int *immediate)
{
    int known = 0;
    pthread_mutex_lock(&queue_lock);
    for (size_t i = 0; i < n_queues; i++)
        if (queues[i].handle == handle) {
            *c = queues[i].ctx;
            *immediate = queues[i].immediate;
            queues[i] = queues[--n_queues];
            known = 1;
            break;
        }
    pthread_mutex_unlock(&queue_lock);
    return known;
}

/* The queues of context c, copied (the caller frees the copy); 0 when they
 * are not all known: an immediate list, no queue at all, no memory. */
static size_t queues_of(ze_context_handle_t c, void ***out)
{
    size_t n = 0;
    int waitable = !atomic_load(&queues_lost);
    pthread_mutex_lock(&queue_lock);
    void **copy = n_queues ? malloc(n_queues * sizeof *copy) : NULL;
    for (size_t i = 0; copy != NULL && i < n_queues; i++)
        if (queues[i].ctx == c) {
            waitable &= !queues[i].immediate;
            copy[n++] = queues[i].handle;
        }
    pthread_mutex_unlock(&queue_lock);
    if (!waitable || n == 0) {
        free(copy);
        return 0;
    }
    *out = copy;
    return n;
}

/* Synchronizes every queue of c with `timeout`: 1 when all are idle, 0 when
 * one is not (or a wait failed), -1 when they are not all known. */
static int queues_idle(const tdm__ze_real *r, ze_context_handle_t c, uint64_t timeout)
{
    void **q = NULL;
    size_t n = r->command_queue_synchronize ? queues_of(c, &q) : 0;
    if (n == 0)
        return -1;
    int idle = 1;
    for (size_t i = 0; i < n && idle; i++)
        idle = r->command_queue_synchronize((ze_command_queue_handle_t)q[i], timeout) ==
               ZE_RESULT_SUCCESS;
    free(q);
    return idle;
}

/* The blocks kept aside back to the cache (their queues are idle). */
static void release_deferred(unsigned skip)
{
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        void *p = n_deferred ? deferred[--n_deferred] : NULL;
        atomic_store(&tdm__ze_deferred_blocks, (int)(n_deferred != 0));
        pthread_mutex_unlock(&queue_lock);
        if (p == NULL)
            return;
        tdm__alloc_free(p, skip);
    }
}

void tdm__ze_deferred_release(const tdm__ze_real *r, unsigned skip)
{
    ze_context_handle_t c = atomic_load_explicit(&cache_ctx, memory_order_relaxed);
    if (queues_idle(r, c, 0) == 1)
        release_deferred(skip + 1);
}

/* The block stays out of use for good; later allocations are the driver's. */
static ze_result_t keep_out_of_use(void)
{
    if (atomic_exchange_explicit(&tdm__ze_policies_seen, 1, memory_order_relaxed) == 0)
        fprintf(stderr,
                "tidemark: mode=cache: zeMemFreeExt with a free policy (DEFER_FREE or "
                "BLOCKING_FREE) of a block the cache served, with commands on queues tidemark "
                "does not know (an immediate command list, or a queue made before it looked); "
                "the block stays out of use (without BLOCKING_FREE's wait) and later Level "
                "Zero device allocations go to the driver\n");
    return ZE_RESULT_SUCCESS;
}

ze_result_t tdm__ze_free_policy_cached(const tdm__ze_real *r, ze_context_handle_t c,
                                       const ze_memory_free_ext_desc_t *desc, void *ptr,
                                       unsigned skip)
{
    if (desc->freePolicy > (ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE |
                            ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE))
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    void *base;
    size_t size;
    if (tdm__alloc_base_of(ptr, &base, &size) != TDM_OK)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* freed twice, or inside a block */
    int blocking = (desc->freePolicy & ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE) != 0;
    int idle = queues_idle(r, c, blocking ? UINT64_MAX : 0);
    if (idle < 0 || (blocking && idle == 0))
        return keep_out_of_use();
    if (idle) {
        tdm__alloc_free(ptr, skip + 1);
        release_deferred(skip + 1); /* idle now: those are done too */
        return ZE_RESULT_SUCCESS;
    }
    pthread_mutex_lock(&queue_lock);
    int kept = grow((void **)&deferred, &deferred_cap, n_deferred, sizeof *deferred);
    if (kept) {
        deferred[n_deferred++] = ptr;
        atomic_store(&tdm__ze_deferred_blocks, 1);
    }
    pthread_mutex_unlock(&queue_lock);
    return kept ? ZE_RESULT_SUCCESS : keep_out_of_use();
}

/* ---- physical memory handles ------------------------------------------------
 * The tracker shared with CUDA and HIP (vmm_track.h), with Level Zero's one
 * operation: the device of a handle made before tidemark looked, which
 * Level Zero cannot say of a handle: the first device. */

static int unseen_device(uint64_t handle)
{
    (void)handle;
    return 0;
}

static const tdm__vmm_ops ze_vmm_ops = {.unseen_device = unseen_device};
tdm__vmm_track tdm__ze_vmm = TDM__VMM_TRACK_INIT(&ze_vmm_ops);
