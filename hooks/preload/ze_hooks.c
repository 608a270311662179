/* hooks/preload/ze_hooks.c: the Level Zero interposers of
 * libtidemark_preload.so: the loader's exported zeMem*, zeVirtualMemMap/
 * Unmap and zePhysicalMem* entry points (ze.syms), booked by ze_track.h,
 * and the command queues and immediate lists cache mode's free policies
 * wait for.
 *
 * Owns: the real loader functions behind the hooks (RTLD_NEXT, resolved
 * once) and whether the shim driver is in the process.
 *
 * Exported symbols only see programs that call them.  A program (or the
 * static-loader shim) that takes the loader's DDI tables calls the driver
 * without passing here; the shim driver (libtidemark_ze_shim.so, named in
 * ZE_ENABLE_ALT_DRIVERS) sees those.  When the shim is loaded it books
 * every call itself, so these hooks step aside (pure pass-through) to
 * keep each allocation booked once: zeInit, which loads the drivers, is
 * hooked to find out (and a program that did not call it is checked at its
 * first hooked call).
 *
 * Lock: none.  The real pointers are written once under pthread_once;
 * the shim flag is an atomic.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "ze_track.h"

static tdm__ze_real real;
static ze_pfnInit_t real_init;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static _Atomic int real_ready;
/* Whether the shim driver is loaded (it then books instead of us):
 * 0 not known yet, 1 no, 2 yes. */
static _Atomic int shim_state;

/* Looks for the shim by its soname, whatever path ZE_ENABLE_ALT_DRIVERS
 * gave the loader. */
static int shim_check(void)
{
    void *h = dlopen("libtidemark_ze_shim.so", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    int state = h ? 2 : 1;
    atomic_store_explicit(&shim_state, state, memory_order_relaxed);
    return state;
}

/* Asked again at every zeInit (which loads the drivers); a program that
 * initialized the loader another way is asked at its first call. */
static inline __attribute__((always_inline)) int shim_booking(void)
{
    int state = atomic_load_explicit(&shim_state, memory_order_relaxed);
    return (state ? state : shim_check()) == 2;
}

static void resolve_all(void)
{
    real_init = (ze_pfnInit_t)tdm__hook_real("zeInit");
    real.driver_get = (ze_pfnDriverGet_t)tdm__hook_real("zeDriverGet");
    real.device_get = (ze_pfnDeviceGet_t)tdm__hook_real("zeDeviceGet");
    real.device_get_properties =
        (ze_pfnDeviceGetProperties_t)tdm__hook_real("zeDeviceGetProperties");
    real.device_get_memory_properties =
        (ze_pfnDeviceGetMemoryProperties_t)tdm__hook_real("zeDeviceGetMemoryProperties");
    real.mem_alloc_device = (ze_pfnMemAllocDevice_t)tdm__hook_real("zeMemAllocDevice");
    real.mem_alloc_shared = (ze_pfnMemAllocShared_t)tdm__hook_real("zeMemAllocShared");
    real.mem_alloc_host = (ze_pfnMemAllocHost_t)tdm__hook_real("zeMemAllocHost");
    real.mem_free = (ze_pfnMemFree_t)tdm__hook_real("zeMemFree");
    real.mem_free_ext = (ze_pfnMemFreeExt_t)tdm__hook_real("zeMemFreeExt");
    real.virtual_mem_map = (ze_pfnVirtualMemMap_t)tdm__hook_real("zeVirtualMemMap");
    real.virtual_mem_unmap = (ze_pfnVirtualMemUnmap_t)tdm__hook_real("zeVirtualMemUnmap");
    real.physical_mem_create = (ze_pfnPhysicalMemCreate_t)tdm__hook_real("zePhysicalMemCreate");
    real.physical_mem_destroy =
        (ze_pfnPhysicalMemDestroy_t)tdm__hook_real("zePhysicalMemDestroy");
    real.virtual_mem_reserve = (ze_pfnVirtualMemReserve_t)tdm__hook_real("zeVirtualMemReserve");
    real.virtual_mem_free = (ze_pfnVirtualMemFree_t)tdm__hook_real("zeVirtualMemFree");
    real.virtual_mem_query_page_size =
        (ze_pfnVirtualMemQueryPageSize_t)tdm__hook_real("zeVirtualMemQueryPageSize");
    real.sysman_enum_memory_modules =
        (zes_pfnDeviceEnumMemoryModules_t)tdm__hook_real("zesDeviceEnumMemoryModules");
    real.sysman_memory_get_state = (zes_pfnMemoryGetState_t)tdm__hook_real("zesMemoryGetState");
    real.command_queue_create = (ze_pfnCommandQueueCreate_t)tdm__hook_real("zeCommandQueueCreate");
    real.command_queue_destroy =
        (ze_pfnCommandQueueDestroy_t)tdm__hook_real("zeCommandQueueDestroy");
    real.command_queue_synchronize =
        (ze_pfnCommandQueueSynchronize_t)tdm__hook_real("zeCommandQueueSynchronize");
    real.command_list_create_immediate =
        (ze_pfnCommandListCreateImmediate_t)tdm__hook_real("zeCommandListCreateImmediate");
    real.command_list_destroy = (ze_pfnCommandListDestroy_t)tdm__hook_real("zeCommandListDestroy");
    atomic_store_explicit(&real_ready, 1, memory_order_release);
}

static inline __attribute__((always_inline)) void resolve(void)
{
    if (__builtin_expect(!atomic_load_explicit(&real_ready, memory_order_acquire), 0))
        pthread_once(&real_once, resolve_all);
}

/* The loader is always there when a program calls these (it exports
 * them); without it, answer as the loader does before zeInit. */
#define REAL_OR_UNINIT(fn, ...)                                                \
    (real.fn ? real.fn(__VA_ARGS__) : ZE_RESULT_ERROR_UNINITIALIZED)

/* Pass through when the real function is missing or the shim books. */
#define STEP_ASIDE(fn, ...)                                                    \
    resolve();                                                                 \
    if (real.fn == NULL || shim_booking())                                     \
        return REAL_OR_UNINIT(fn, __VA_ARGS__)

TDM_HOOK_API ze_result_t zeInit(ze_init_flags_t flags)
{
    resolve();
    if (real_init == NULL)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    ze_result_t r = real_init(flags);
    shim_check(); /* the loader has opened the drivers now */
    return r;
}

TDM_HOOK_API ze_result_t zeMemAllocDevice(ze_context_handle_t hContext,
                                          const ze_device_mem_alloc_desc_t *device_desc,
                                          size_t size, size_t alignment,
                                          ze_device_handle_t hDevice, void **pptr)
{
    STEP_ASIDE(mem_alloc_device, hContext, device_desc, size, alignment, hDevice, pptr);
    return tdm__ze_alloc_device(&real, TDM_HOOK_SKIP, hContext, device_desc, size, alignment,
                                hDevice, pptr);
}

TDM_HOOK_API ze_result_t zeMemAllocShared(ze_context_handle_t hContext,
                                          const ze_device_mem_alloc_desc_t *device_desc,
                                          const ze_host_mem_alloc_desc_t *host_desc,
                                          size_t size, size_t alignment,
                                          ze_device_handle_t hDevice, void **pptr)
{
    STEP_ASIDE(mem_alloc_shared, hContext, device_desc, host_desc, size, alignment, hDevice,
               pptr);
    return tdm__ze_alloc_shared(&real, TDM_HOOK_SKIP, hContext, device_desc, host_desc, size,
                                alignment, hDevice, pptr);
}

TDM_HOOK_API ze_result_t zeMemAllocHost(ze_context_handle_t hContext,
                                        const ze_host_mem_alloc_desc_t *host_desc, size_t size,
                                        size_t alignment, void **pptr)
{
    STEP_ASIDE(mem_alloc_host, hContext, host_desc, size, alignment, pptr);
    return tdm__ze_alloc_host(&real, TDM_HOOK_SKIP, hContext, host_desc, size, alignment, pptr);
}

TDM_HOOK_API ze_result_t zeMemFree(ze_context_handle_t hContext, void *ptr)
{
    STEP_ASIDE(mem_free, hContext, ptr);
    return tdm__ze_free(&real, TDM_HOOK_SKIP, hContext, ptr);
}

TDM_HOOK_API ze_result_t zeMemFreeExt(ze_context_handle_t hContext,
                                      const ze_memory_free_ext_desc_t *pMemFreeDesc, void *ptr)
{
    STEP_ASIDE(mem_free_ext, hContext, pMemFreeDesc, ptr);
    return tdm__ze_free_ext(&real, TDM_HOOK_SKIP, hContext, pMemFreeDesc, ptr);
}

TDM_HOOK_API ze_result_t zePhysicalMemCreate(ze_context_handle_t hContext,
                                             ze_device_handle_t hDevice,
                                             ze_physical_mem_desc_t *desc,
                                             ze_physical_mem_handle_t *phPhysicalMemory)
{
    STEP_ASIDE(physical_mem_create, hContext, hDevice, desc, phPhysicalMemory);
    return tdm__ze_physical_create(&real, TDM_HOOK_SKIP, hContext, hDevice, desc, phPhysicalMemory);
}

TDM_HOOK_API ze_result_t zePhysicalMemDestroy(ze_context_handle_t hContext,
                                              ze_physical_mem_handle_t hPhysicalMemory)
{
    STEP_ASIDE(physical_mem_destroy, hContext, hPhysicalMemory);
    return tdm__ze_physical_destroy(&real, TDM_HOOK_SKIP, hContext, hPhysicalMemory);
}

TDM_HOOK_API ze_result_t zeVirtualMemMap(ze_context_handle_t hContext, const void *ptr,
                                         size_t size, ze_physical_mem_handle_t hPhysicalMemory,
                                         size_t offset, ze_memory_access_attribute_t access)
{
    STEP_ASIDE(virtual_mem_map, hContext, ptr, size, hPhysicalMemory, offset, access);
    return tdm__ze_virtual_map(&real, TDM_HOOK_SKIP, hContext, ptr, size, hPhysicalMemory, offset,
                               access);
}

TDM_HOOK_API ze_result_t zeVirtualMemUnmap(ze_context_handle_t hContext, const void *ptr,
                                           size_t size)
{
    STEP_ASIDE(virtual_mem_unmap, hContext, ptr, size);
    return tdm__ze_virtual_unmap(&real, TDM_HOOK_SKIP, hContext, ptr, size);
}

/* What runs commands, for the free policies (ze_track.c): recorded in
 * cache mode only. */
TDM_HOOK_API ze_result_t zeCommandQueueCreate(ze_context_handle_t hContext,
                                              ze_device_handle_t hDevice,
                                              const ze_command_queue_desc_t *desc,
                                              ze_command_queue_handle_t *phCommandQueue)
{
    STEP_ASIDE(command_queue_create, hContext, hDevice, desc, phCommandQueue);
    return tdm__ze_queue_create(&real, hContext, hDevice, desc, phCommandQueue);
}

TDM_HOOK_API ze_result_t zeCommandQueueDestroy(ze_command_queue_handle_t hCommandQueue)
{
    STEP_ASIDE(command_queue_destroy, hCommandQueue);
    return tdm__ze_queue_destroy(&real, hCommandQueue);
}

TDM_HOOK_API ze_result_t zeCommandListCreateImmediate(ze_context_handle_t hContext,
                                                      ze_device_handle_t hDevice,
                                                      const ze_command_queue_desc_t *altdesc,
                                                      ze_command_list_handle_t *phCommandList)
{
    STEP_ASIDE(command_list_create_immediate, hContext, hDevice, altdesc, phCommandList);
    return tdm__ze_list_create_immediate(&real, hContext, hDevice, altdesc, phCommandList);
}

TDM_HOOK_API ze_result_t zeCommandListDestroy(ze_command_list_handle_t hCommandList)
{
    STEP_ASIDE(command_list_destroy, hCommandList);
    return tdm__ze_list_destroy(&real, hCommandList);
}
