/* hooks/preload/hip_pool.c: HIP's stream-ordered memory pools and the
 * memory processes share, as the hooks see them.
 *
 * Pools.  hipMallocAsync takes memory from the device's current pool and
 * hipFreeAsync gives it back to the pool, which keeps it up to its release
 * threshold (PyTorch's backend:cudaMallocAsync, hipified, sets UINT64_MAX:
 * everything) and releases the rest at the next synchronization.  The
 * pool's own counters (hipMemPoolAttrReservedMemCurrent and
 * UsedMemCurrent) say what it holds; the hooks read them after each call
 * that can change them (an async allocation, a free, hipStreamSynchronize,
 * hipDeviceSynchronize, hipMemPoolTrimTo, hipMemPoolDestroy) and book the
 * difference as the device's reserved memory (alloc/observe_pool.c).
 * Reading them is two host-side calls with no device work, made only once
 * a pool was seen in use: a program without stream-ordered allocations
 * pays one atomic load per synchronize.  hipDeviceSetMemPool is watched so
 * that cache mode leaves the program's own pool alone.
 *
 * Shared memory.  A mapping this process did not allocate (an IPC handle
 * opened, a physical allocation imported from a shareable handle) and a
 * further mapping of a physical allocation already counted are booked
 * apart as imported (alloc/observe_import.c), with the exporting device
 * where HIP says it; never on a device's own figures.  The handle tables
 * tracker says which is which at hipMemMap / hipMemUnmap (hip_hooks.c).
 *
 * Owns: HIP's pool tracker (pool_track.h) and its operations; HIP's
 * tracker of virtual-memory handles and mappings (vmm_track.h).  Locks:
 * none for pools (atomics); the tracker's own mutex (no HIP call is made
 * while it is held).
 */
#include "hip_hooks.h"

#include <string.h>

/* ---- the pool tracker's operations (pool_track.h) --------------------------- */

static int pool_query(void *pool, uint64_t *reserved, uint64_t *used)
{
    uint64_t r = 0, u = 0;
    if (tdm__hip_real.hipMemPoolGetAttribute == NULL ||
        tdm__hip_real.hipMemPoolGetAttribute((hipMemPool_t)pool, hipMemPoolAttrReservedMemCurrent,
                                             &r) != hipSuccess ||
        tdm__hip_real.hipMemPoolGetAttribute((hipMemPool_t)pool, hipMemPoolAttrUsedMemCurrent,
                                             &u) != hipSuccess)
        return 0;
    *reserved = r;
    *used = u;
    return 1;
}

static void *device_pool(int device)
{
    hipMemPool_t pool = NULL;
    return tdm__hip_real.hipDeviceGetMemPool != NULL &&
                   tdm__hip_real.hipDeviceGetMemPool(&pool, device) == hipSuccess
               ? (void *)pool : NULL;
}

static void *default_pool(int device)
{
    hipMemPool_t pool = NULL;
    return tdm__hip_real.hipDeviceGetDefaultMemPool != NULL &&
                   tdm__hip_real.hipDeviceGetDefaultMemPool(&pool, device) == hipSuccess
               ? (void *)pool : NULL;
}

/* At each dump (not an out-of-memory one): what every known pool holds
 * now, for releases the hooks did not see (event waits, HIP trimming on
 * its own). */
static void book_all(void)
{
    tdm__pool_book_all(&tdm__hip_pools);
}

static const tdm__pool_ops hip_pool_ops = {
    .query = pool_query, .device_pool = device_pool, .default_pool = default_pool,
    .book_all = book_all};
tdm__pool_track tdm__hip_pools = TDM__POOL_TRACK_INIT(&hip_pool_ops);

int tdm__hip_pointer_device(const void *p, int otherwise)
{
    int ordinal = -1;
    if (tdm__hip_real.hipPointerGetAttribute == NULL ||
        tdm__hip_real.hipPointerGetAttribute(&ordinal, HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                             (hipDeviceptr_t)p) != hipSuccess ||
        ordinal < 0)
        return otherwise;
    return ordinal;
}

/* ---- pools -------------------------------------------------------------------- */

TDM_HOOK_API hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold)
{
    HOOK_PROLOGUE(hipMemPoolTrimTo, mem_pool, min_bytes_to_hold);
    hipError_t r = CALL_REAL(hipMemPoolTrimTo, mem_pool, min_bytes_to_hold);
    if (r == hipSuccess)
        tdm__pool_trimmed(&tdm__hip_pools, (void *)mem_pool, tdm__hip_current_device());
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipMemPoolDestroy, mem_pool);
    hipError_t r = CALL_REAL(hipMemPoolDestroy, mem_pool);
    if (r == hipSuccess)
        tdm__pool_destroyed(&tdm__hip_pools, (void *)mem_pool);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipDeviceSetMemPool, device, mem_pool);
    hipError_t r = CALL_REAL(hipDeviceSetMemPool, device, mem_pool);
    if (r == hipSuccess)
        tdm__pool_set_current(&tdm__hip_pools, device, (void *)mem_pool);
    tdm__hook_leave();
    return r;
}

/* A synchronization lets the pools release what exceeds their threshold.
 * Until a pool was seen in use, nothing but one atomic load. */
#define POOLS_SEEN() (tdm__pool_any(&tdm__hip_pools))

TDM_HOOK_API hipError_t hipStreamSynchronize(hipStream_t stream)
{
    resolve();
    if (!POOLS_SEEN())
        return CALL_REAL(hipStreamSynchronize, stream);
    HOOK_PROLOGUE(hipStreamSynchronize, stream);
    hipError_t r = CALL_REAL(hipStreamSynchronize, stream);
    tdm__pool_book_all(&tdm__hip_pools);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipDeviceSynchronize(void)
{
    resolve();
    if (!POOLS_SEEN())
        return CALL_REAL(hipDeviceSynchronize);
    HOOK_PROLOGUE(hipDeviceSynchronize);
    hipError_t r = CALL_REAL(hipDeviceSynchronize);
    tdm__pool_book_all(&tdm__hip_pools);
    tdm__hook_leave();
    return r;
}

/* ---- memory other processes made ---------------------------------------------- */

TDM_HOOK_API hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle,
                                            unsigned int flags)
{
    HOOK_PROLOGUE(hipIpcOpenMemHandle, devPtr, handle, flags);
    hipError_t r = CALL_REAL(hipIpcOpenMemHandle, devPtr, handle, flags);
    if (r == hipSuccess && devPtr != NULL && *devPtr != NULL) {
        hipDeviceptr_t base = NULL;
        size_t size = 0;
        if (tdm__hip_real.hipMemGetAddressRange == NULL ||
            tdm__hip_real.hipMemGetAddressRange(&base, &size, *devPtr) != hipSuccess)
            size = 0;
        tdm__alloc_observe_import(tdm__hip_current_device(), *devPtr, size,
                                  tdm__hip_pointer_device(*devPtr, TDM_IMPORT_SOURCE_UNKNOWN),
                                  TDM_IMPORT_IPC, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipIpcCloseMemHandle(void *devPtr)
{
    HOOK_PROLOGUE(hipIpcCloseMemHandle, devPtr);
    tdm__alloc_observe_unimport(devPtr);
    hipError_t r = CALL_REAL(hipIpcCloseMemHandle, devPtr);
    tdm__hook_leave();
    return r;
}

/* The imported handle maps as imported memory (hip_hooks.c's hipMemMap),
 * from the device HIP says it lives on. */
TDM_HOOK_API hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                        void *osHandle,
                                                        hipMemAllocationHandleType shHandleType)
{
    HOOK_PROLOGUE(hipMemImportFromShareableHandle, handle, osHandle, shHandleType);
    hipError_t r = CALL_REAL(hipMemImportFromShareableHandle, handle, osHandle, shHandleType);
    if (r == hipSuccess && handle != NULL) {
        hipMemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        int source = TDM_IMPORT_SOURCE_UNKNOWN;
        if (tdm__hip_real.hipMemGetAllocationPropertiesFromHandle &&
            tdm__hip_real.hipMemGetAllocationPropertiesFromHandle(&prop, *handle) == hipSuccess)
            source = prop.location.type == hipMemLocationTypeDevice ? prop.location.id
                                                                    : TDM_IMPORT_SOURCE_UNKNOWN;
        tdm__vmm_created(&tdm__hip_vmm, (uint64_t)(uintptr_t)*handle, source,
                         TDM_IMPORT_SHAREABLE);
    }
    tdm__hook_leave();
    return r;
}

/* ---- virtual-memory handles and mappings ----------------------------------------
 * The tracker (vmm_track.c) with HIP's one operation: the place of a
 * handle made before tidemark was loaded, as HIP says, else the current
 * device. */

static int unseen_device(uint64_t h)
{
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    if (tdm__hip_real.hipMemGetAllocationPropertiesFromHandle &&
        tdm__hip_real.hipMemGetAllocationPropertiesFromHandle(
            &prop, (hipMemGenericAllocationHandle_t)(uintptr_t)h) == hipSuccess &&
        prop.location.type == hipMemLocationTypeDevice)
        return prop.location.id;
    return tdm__hip_current_device();
}

static const tdm__vmm_ops hip_vmm_ops = {.unseen_device = unseen_device};
tdm__vmm_track tdm__hip_vmm = TDM__VMM_TRACK_INIT(&hip_vmm_ops);
