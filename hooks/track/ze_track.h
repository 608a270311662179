/* hooks/track/ze_track.h: what a Level Zero memory call books, shared by
 * the exported-symbol interposers (ze_hooks.c, in libtidemark_preload.so)
 * and the shim driver (hooks/ze_shim/ze_shim.c, libtidemark_ze_shim.so).
 *
 * The two reach the vendor differently: the interposers call the loader's
 * exported functions, the shim calls the real driver's table slots.  Each
 * fills one tdm__ze_real with the un-hooked functions and calls the
 * tdm__ze_* functions below from its hooks.  Those are always_inline, so
 * a hook is one frame; `skip` tells the stack capture how many frames sit
 * between the booking and the program (TDM_HOOK_SKIP for the preload's
 * hooks; the shim adds one when the loader's or the preload's function
 * that called it left a frame).  The rare work (device lookup, cache
 * set-up) lives in ze_track.c.
 *
 * What is booked:
 *   zeMemAllocDevice        observe: alloc on the device; cache: served
 *                           from tidemark's caching allocator when the
 *                           context is the one the cache allocates in and
 *                           the request is plain (no pNext, memory
 *                           ordinal 0, alignment 0 or a power of two up
 *                           to 512); anything else goes to the driver,
 *                           which also judges invalid requests
 *   zeMemAllocShared        observe on its device (host, -1, when none)
 *   zeMemAllocHost          observe on the host (-1)
 *   zeMemFree, zeMemFreeExt the block back to the cache, or the free
 *                           booked BEFORE the vendor call; zeMemFreeExt
 *                           with a free policy (DEFER_FREE, BLOCKING_FREE)
 *                           of a cached block waits for the context's
 *                           command queues, or gives the block back once
 *                           they are idle (ze_track.c)
 *   zeCommandQueueCreate/Destroy, zeCommandListCreateImmediate/Destroy
 *                           cache mode: recorded for the free policies
 *   zePhysicalMemCreate     remembers the memory's device (vmm_track.h);
 *                           oom on failure
 *   zeVirtualMemMap/Unmap   segment_map / segment_unmap (a handle's further
 *                           mapping: imported)
 *   zePhysicalMemDestroy    forgets the handle; nothing booked
 * zeVirtualMemReserve/Free are not hooked: a reservation is address space
 * only, it holds no memory until something is mapped into it.
 * Errors go back unchanged; ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY also
 * books an `oom` event with the device's free bytes (Sysman's
 * zesMemoryGetState; 0 when the driver has no Sysman).
 *
 * Device ordinals: the position of a device in the concatenated
 * zeDeviceGet lists of all drivers (zeDriverGet order), found once; a
 * handle not in those lists (a sub-device) gets the next free ordinal.
 */
#ifndef TDM_HOOKS_TRACK_ZE_TRACK_H
#define TDM_HOOKS_TRACK_ZE_TRACK_H

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_api.h>
#include <level_zero/zes_ddi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "preload.h"
#include "provider.h"
#include "vmm_track.h"

#define TDM__ZE_INLINE static inline __attribute__((always_inline))

/* The un-hooked functions a consumer calls. */
typedef struct tdm__ze_real {
    ze_pfnDriverGet_t driver_get;
    ze_pfnDeviceGet_t device_get;
    ze_pfnDeviceGetProperties_t device_get_properties;
    ze_pfnDeviceGetMemoryProperties_t device_get_memory_properties;
    ze_pfnMemAllocDevice_t mem_alloc_device;
    ze_pfnMemAllocShared_t mem_alloc_shared;
    ze_pfnMemAllocHost_t mem_alloc_host;
    ze_pfnMemFree_t mem_free;
    ze_pfnMemFreeExt_t mem_free_ext;
    ze_pfnVirtualMemMap_t virtual_mem_map;
    ze_pfnVirtualMemUnmap_t virtual_mem_unmap;
    ze_pfnPhysicalMemCreate_t physical_mem_create;
    ze_pfnPhysicalMemDestroy_t physical_mem_destroy;
    /* optional: what the cache's expandable segments also need */
    ze_pfnVirtualMemReserve_t virtual_mem_reserve;
    ze_pfnVirtualMemFree_t virtual_mem_free;
    ze_pfnVirtualMemQueryPageSize_t virtual_mem_query_page_size;
    zes_pfnDeviceEnumMemoryModules_t sysman_enum_memory_modules; /* optional */
    zes_pfnMemoryGetState_t sysman_memory_get_state;             /* optional */
    /* what runs commands: the free policies wait for them (ze_track.c) */
    ze_pfnCommandQueueCreate_t command_queue_create;
    ze_pfnCommandQueueDestroy_t command_queue_destroy;
    ze_pfnCommandQueueSynchronize_t command_queue_synchronize;
    ze_pfnCommandListCreateImmediate_t command_list_create_immediate;
    ze_pfnCommandListDestroy_t command_list_destroy;
} tdm__ze_real;

/* ---- ze_track.c ---- */

/* The consumer's recursion guard and mode: the shim's own when built with
 * TDM_ZE_SHIM, else the preload's (preload.h, inline). */
#ifdef TDM_ZE_SHIM
int tdm__ze_enter(void);
void tdm__ze_leave(void);
tdm__hook_mode tdm__ze_mode(void);
#else
#define tdm__ze_enter() tdm__hook_enter()
#define tdm__ze_leave() tdm__hook_leave()
#define tdm__ze_mode() tdm__hook_mode_get()
#endif

/* The ordinal of device handle `dev` (described to the snapshot the first
 * time); -1 for NULL. */
int tdm__ze_device_slow(const tdm__ze_real *r, ze_device_handle_t dev);
/* Registered handles, read without a lock on the fast path. */
extern _Atomic(ze_device_handle_t) tdm__ze_devices[64];

/* Describes the host (device -1, for host and shared USM) once. */
void tdm__ze_host_seen(void);

/* Free bytes of device `ordinal` through Sysman, 0 when unknown. */
size_t tdm__ze_free_bytes(const tdm__ze_real *r, int ordinal);

/* Cache mode: whether allocations in `ctx` are served from the cache
 * (the first context seen becomes the cache's; set up once). */
int tdm__ze_cache_serves(const tdm__ze_real *r, ze_context_handle_t ctx);

/* zeMemFreeExt with a free policy (DEFER_FREE, BLOCKING_FREE) of a block
 * the cache served, kept as the specification says when every command
 * queue of the context is known (ze_track.c): BLOCKING_FREE waits for
 * them all, then the block is back in the cache; DEFER_FREE gives it back
 * once they are idle (at once, or at a later device allocation).  When
 * they are not all known (an immediate command list, or no queue seen),
 * the block is kept out of use for good, once said on stderr, and from
 * then on device allocations go to the driver, which keeps the policies.
 * Returns what the program gets: success, ZE_RESULT_ERROR_INVALID_ARGUMENT
 * for a pointer that is no live block, or
 * ZE_RESULT_ERROR_INVALID_ENUMERATION for a policy past the two flags, as
 * from the driver. */
extern _Atomic int tdm__ze_policies_seen; /* the fallback was taken: driver from now on */
ze_result_t tdm__ze_free_policy_cached(const tdm__ze_real *r, ze_context_handle_t c,
                                       const ze_memory_free_ext_desc_t *desc, void *ptr,
                                       unsigned skip);
/* Blocks freed with DEFER_FREE waiting for the queues to be idle; their
 * release, tried at the cache's next device allocation. */
extern _Atomic int tdm__ze_deferred_blocks;
void tdm__ze_deferred_release(const tdm__ze_real *r, unsigned skip);

/* Cache mode's record of what runs commands in a context: command queues
 * (waited for) and immediate command lists (Level Zero 1.4 gives no host
 * wait for them, so a context that has one keeps the fallback above). */
void tdm__ze_queue_seen(ze_context_handle_t c, void *handle, int immediate);
/* Forgets handle: 1 when it was known (0: a list that is not immediate),
 * with its context and kind. */
int tdm__ze_queue_forget(void *handle, ze_context_handle_t *c, int *immediate);

/* Physical memory handles (device, mappings): the tracker CUDA and HIP
 * use too (vmm_track.h), no fixed size. */
extern tdm__vmm_track tdm__ze_vmm;

/* ---- the bookings, one per hooked entry ---- */

TDM__ZE_INLINE int tdm__ze_device(const tdm__ze_real *r, ze_device_handle_t dev)
{
    if (dev == NULL)
        return -1;
    for (int i = 0; i < 64; i++) {
        ze_device_handle_t d = atomic_load_explicit(&tdm__ze_devices[i], memory_order_acquire);
        if (d == dev)
            return i;
        if (d == NULL)
            break;
    }
    return tdm__ze_device_slow(r, dev);
}

/* The allocation, or an `oom` event when the device ran out. */
TDM__ZE_INLINE void tdm__ze_book(const tdm__ze_real *r, ze_result_t res, int device, void **pptr,
                                 size_t size, unsigned skip)
{
    int booked = res == ZE_RESULT_SUCCESS && pptr != NULL;
    int oom = res == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    if (device < 0 && (booked || oom))
        tdm__ze_host_seen();
    if (booked)
        tdm__alloc_observe_alloc(device, *pptr, size, 0, skip);
    else if (oom)
        tdm__alloc_observe_oom(device, size, tdm__ze_free_bytes(r, device), 0, skip);
}

/* A tidemark status as Level Zero says it. */
TDM__ZE_INLINE ze_result_t tdm__ze_result_of(tdm_status st)
{
    switch (st) {
    case TDM_OK: return ZE_RESULT_SUCCESS;
    case TDM_OUT_OF_MEMORY: return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    case TDM_HOST_OUT_OF_MEMORY: return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    case TDM_INVALID_ARGUMENT: return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    case TDM_VENDOR_ERROR: return (ze_result_t)tdm__provider_last_vendor_error();
    default: return ZE_RESULT_ERROR_UNKNOWN;
    }
}

/* Hooks start with this: pass straight through when tidemark is off or
 * this thread is already inside it. */
#define TDM__ZE_PROLOGUE(call)                                                 \
    TDM_HOOK_PROLOGUE_OF(mode_, tdm__ze_mode(), tdm__ze_enter(), 1, call)

TDM__ZE_INLINE ze_result_t tdm__ze_alloc_device(const tdm__ze_real *r, unsigned skip,
                                                ze_context_handle_t c,
                                                const ze_device_mem_alloc_desc_t *dd, size_t size,
                                                size_t alignment, ze_device_handle_t dev,
                                                void **pptr)
{
    TDM__ZE_PROLOGUE(r->mem_alloc_device(c, dd, size, alignment, dev, pptr));
    int device = tdm__ze_device(r, dev);
    ze_result_t res = ZE_RESULT_ERROR_UNKNOWN;
    tdm_status st = TDM_NOT_AVAILABLE;
    if (mode_ == TDM__HOOK_CACHE && dd != NULL && dd->pNext == NULL && dd->ordinal == 0 &&
        (alignment & (alignment - 1)) == 0 && alignment <= 512 && pptr != NULL && size > 0 &&
        device >= 0 && !atomic_load_explicit(&tdm__ze_policies_seen, memory_order_relaxed) &&
        tdm__ze_cache_serves(r, c)) {
        if (atomic_load_explicit(&tdm__ze_deferred_blocks, memory_order_relaxed))
            tdm__ze_deferred_release(r, skip);
        st = tdm__alloc_malloc(pptr, size, device, 0, skip);
        res = tdm__ze_result_of(st);
    }
    /* Not served (not cache mode, or a device the cache does not have). */
    if (st == TDM_NOT_AVAILABLE || st == TDM_NO_SUCH_DEVICE) {
        res = r->mem_alloc_device(c, dd, size, alignment, dev, pptr);
        tdm__ze_book(r, res, device, pptr, size, skip);
    }
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_alloc_shared(const tdm__ze_real *r, unsigned skip,
                                                ze_context_handle_t c,
                                                const ze_device_mem_alloc_desc_t *dd,
                                                const ze_host_mem_alloc_desc_t *hd, size_t size,
                                                size_t alignment, ze_device_handle_t dev,
                                                void **pptr)
{
    TDM__ZE_PROLOGUE(r->mem_alloc_shared(c, dd, hd, size, alignment, dev, pptr));
    int device = tdm__ze_device(r, dev);
    ze_result_t res = r->mem_alloc_shared(c, dd, hd, size, alignment, dev, pptr);
    tdm__ze_book(r, res, device, pptr, size, skip);
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_alloc_host(const tdm__ze_real *r, unsigned skip,
                                              ze_context_handle_t c,
                                              const ze_host_mem_alloc_desc_t *hd, size_t size,
                                              size_t alignment, void **pptr)
{
    TDM__ZE_PROLOGUE(r->mem_alloc_host(c, hd, size, alignment, pptr));
    ze_result_t res = r->mem_alloc_host(c, hd, size, alignment, pptr);
    tdm__ze_book(r, res, -1, pptr, size, skip);
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_free(const tdm__ze_real *r, unsigned skip,
                                        ze_context_handle_t c, void *ptr)
{
    TDM__ZE_PROLOGUE(r->mem_free(c, ptr));
    ze_result_t res;
    int cached = ptr != NULL && mode_ == TDM__HOOK_CACHE && tdm__ze_cache_serves(r, c)
                     ? tdm__hook_cache_free(ptr, skip) : 0;
    if (cached > 0) {
        res = ZE_RESULT_SUCCESS;
    } else if (cached < 0) {
        res = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    } else {
        tdm__alloc_observe_free(ptr, 0, skip);
        res = r->mem_free(c, ptr);
    }
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_free_ext(const tdm__ze_real *r, unsigned skip,
                                            ze_context_handle_t c,
                                            const ze_memory_free_ext_desc_t *desc, void *ptr)
{
    TDM__ZE_PROLOGUE(r->mem_free_ext(c, desc, ptr));
    ze_result_t res;
    int ours = ptr != NULL && desc != NULL && mode_ == TDM__HOOK_CACHE &&
               tdm__ze_cache_serves(r, c);
    /* Policy 0 is zeMemFree's contract ("The application must ensure the
     * device is not currently referencing the memory before it is
     * freed"): the block may go back to the cache.  The others let the
     * program free memory the device may still use. */
    if (ours && desc->freePolicy != 0 && tdm__alloc_owns(ptr)) {
        res = tdm__ze_free_policy_cached(r, c, desc, ptr, skip);
        tdm__ze_leave();
        return res;
    }
    int cached = ours ? tdm__hook_cache_free(ptr, skip) : 0;
    if (cached > 0) {
        res = ZE_RESULT_SUCCESS;
    } else if (cached < 0) {
        res = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    } else {
        tdm__alloc_observe_free(ptr, 0, skip);
        res = r->mem_free_ext(c, desc, ptr);
    }
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_physical_create(const tdm__ze_real *r, unsigned skip,
                                                   ze_context_handle_t c, ze_device_handle_t dev,
                                                   ze_physical_mem_desc_t *desc,
                                                   ze_physical_mem_handle_t *ph)
{
    TDM__ZE_PROLOGUE(r->physical_mem_create(c, dev, desc, ph));
    int device = tdm__ze_device(r, dev);
    ze_result_t res = r->physical_mem_create(c, dev, desc, ph);
    if (res == ZE_RESULT_SUCCESS && ph != NULL)
        tdm__vmm_created(&tdm__ze_vmm, (uint64_t)(uintptr_t)*ph, device, TDM_VMM_OWN);
    else if (res == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY && desc != NULL)
        tdm__alloc_observe_oom(device, desc->size, tdm__ze_free_bytes(r, device), 0,
                               skip);
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_physical_destroy(const tdm__ze_real *r, unsigned skip,
                                                    ze_context_handle_t c,
                                                    ze_physical_mem_handle_t h)
{
    TDM__ZE_PROLOGUE(r->physical_mem_destroy(c, h));
    ze_result_t res = r->physical_mem_destroy(c, h);
    if (res == ZE_RESULT_SUCCESS)
        tdm__vmm_released(&tdm__ze_vmm, (uint64_t)(uintptr_t)h);
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_virtual_map(const tdm__ze_real *r, unsigned skip,
                                               ze_context_handle_t c, const void *ptr, size_t size,
                                               ze_physical_mem_handle_t h, size_t offset,
                                               ze_memory_access_attribute_t access)
{
    TDM__ZE_PROLOGUE(r->virtual_mem_map(c, ptr, size, h, offset, access));
    ze_result_t res = r->virtual_mem_map(c, ptr, size, h, offset, access);
    if (res == ZE_RESULT_SUCCESS) {
        /* The handle's first mapping is the device's memory; a further one
         * maps the same memory again: imported, not counted twice. */
        tdm__vmm_booking b =
            tdm__vmm_mapped(&tdm__ze_vmm, (uint64_t)(uintptr_t)h, (uint64_t)(uintptr_t)ptr);
        int device = b.device >= 0 ? b.device : 0;
        if (b.kind == TDM_VMM_OWN)
            tdm__alloc_observe_map(device, ptr, size, skip);
        else
            tdm__alloc_observe_import(device, ptr, size, b.device, b.kind, skip);
    }
    tdm__ze_leave();
    return res;
}

TDM__ZE_INLINE ze_result_t tdm__ze_virtual_unmap(const tdm__ze_real *r, unsigned skip,
                                                 ze_context_handle_t c, const void *ptr,
                                                 size_t size)
{
    TDM__ZE_PROLOGUE(r->virtual_mem_unmap(c, ptr, size));
    tdm__vmm_unmapped(&tdm__ze_vmm, (uint64_t)(uintptr_t)ptr);
    if (tdm__alloc_observe_unmap(ptr, size, skip) != TDM_OK)
        tdm__alloc_observe_unimport(ptr);
    ze_result_t res = r->virtual_mem_unmap(c, ptr, size);
    tdm__ze_leave();
    return res;
}

/* Cache mode only: the queues (and immediate lists) the free policies wait
 * for, recorded when made.  A queue is forgotten before the driver's
 * destroy (another thread may get the same handle at once) and
 * remembered again if the driver refuses: a queue that still exists is
 * always waited for. */
#define TDM__ZE_RUNNER(create, create_field, destroy, destroy_field, handle_t, immediate) \
    TDM__ZE_INLINE ze_result_t create(const tdm__ze_real *r, ze_context_handle_t c,        \
                                      ze_device_handle_t dev,                              \
                                      const ze_command_queue_desc_t *desc, handle_t *out)  \
    {                                                                                      \
        TDM__ZE_PROLOGUE(r->create_field(c, dev, desc, out));                              \
        ze_result_t res = r->create_field(c, dev, desc, out);                              \
        if (res == ZE_RESULT_SUCCESS && out != NULL && *out != NULL &&                     \
            mode_ == TDM__HOOK_CACHE)                                                      \
            tdm__ze_queue_seen(c, *out, immediate);                                        \
        tdm__ze_leave();                                                                   \
        return res;                                                                        \
    }                                                                                      \
    TDM__ZE_INLINE ze_result_t destroy(const tdm__ze_real *r, handle_t h)                  \
    {                                                                                      \
        TDM__ZE_PROLOGUE(r->destroy_field(h));                                             \
        ze_context_handle_t c = NULL;                                                      \
        int was_immediate = 0;                                                             \
        int known = mode_ == TDM__HOOK_CACHE && tdm__ze_queue_forget(h, &c, &was_immediate); \
        ze_result_t res = r->destroy_field(h);                                             \
        if (res != ZE_RESULT_SUCCESS && known)                                             \
            tdm__ze_queue_seen(c, h, was_immediate);                                       \
        tdm__ze_leave();                                                                   \
        return res;                                                                        \
    }
TDM__ZE_RUNNER(tdm__ze_queue_create, command_queue_create, tdm__ze_queue_destroy,
               command_queue_destroy, ze_command_queue_handle_t, 0)
TDM__ZE_RUNNER(tdm__ze_list_create_immediate, command_list_create_immediate,
               tdm__ze_list_destroy, command_list_destroy, ze_command_list_handle_t, 1)
#undef TDM__ZE_RUNNER

#endif
