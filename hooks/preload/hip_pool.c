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
 * Owns: the known pools (a small lock-free table), each device's current
 * pool and whether the program set it; HIP's tracker of virtual-memory
 * handles and mappings (vmm_track.h).  Locks: none for pools (atomics);
 * the tracker's own mutex (no HIP call is made while it is held).
 */
#include "hip_hooks.h"
#include "pool_table.h"

#include <string.h>

#define MAX_DEVICES 64

static tdm__pool_table known;
static _Atomic(void *) current_pool[MAX_DEVICES];
static _Atomic int program_pool[MAX_DEVICES];

int tdm__hip_pool_query(hipMemPool_t pool, uint64_t *reserved, uint64_t *used)
{
    uint64_t r = 0, u = 0;
    if (tdm__hip_real.hipMemPoolGetAttribute == NULL ||
        tdm__hip_real.hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &r) !=
            hipSuccess ||
        tdm__hip_real.hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &u) !=
            hipSuccess)
        return 0;
    *reserved = r;
    *used = u;
    return 1;
}

hipMemPool_t tdm__hip_pool_current(int device)
{
    if (device < 0 || device >= MAX_DEVICES)
        return NULL;
    void *p = atomic_load_explicit(&current_pool[device], memory_order_acquire);
    if (p)
        return p;
    hipMemPool_t pool = NULL;
    if (tdm__hip_real.hipDeviceGetMemPool == NULL ||
        tdm__hip_real.hipDeviceGetMemPool(&pool, device) != hipSuccess)
        return NULL;
    void *expected = NULL; /* a hipDeviceSetMemPool meanwhile wins */
    atomic_compare_exchange_strong(&current_pool[device], &expected, (void *)pool);
    return atomic_load_explicit(&current_pool[device], memory_order_acquire);
}

/* At each dump (not an out-of-memory one): what every known pool holds
 * now, for releases the hooks did not see (event waits, HIP trimming on
 * its own). */
static void book_at_dump(void)
{
    tdm__hip_pool_book_all();
}

void tdm__hip_pool_remember(hipMemPool_t pool, int device)
{
    static _Atomic int asked;
    if (!atomic_load_explicit(&asked, memory_order_relaxed) &&
        !atomic_exchange_explicit(&asked, 1, memory_order_relaxed))
        tdm__alloc_observe_refresh_at_dump(book_at_dump);
    tdm__pool_table_put(&known, (void *)pool, device);
}

int tdm__hip_pool_known(int i, hipMemPool_t *pool, int *device)
{
    void *p;
    if (!tdm__pool_table_at(&known, i, &p, device))
        return 0;
    *pool = p;
    return 1;
}

int tdm__hip_program_pool(int device)
{
    return device >= 0 && device < MAX_DEVICES &&
           atomic_load_explicit(&program_pool[device], memory_order_relaxed);
}

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
    if (r == hipSuccess) {
        int device = tdm__pool_table_device_of(&known, (void *)mem_pool);
        tdm__hip_pool_book(mem_pool, device >= 0 ? device : tdm__hip_current_device());
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipMemPoolDestroy, mem_pool);
    hipError_t r = CALL_REAL(hipMemPoolDestroy, mem_pool);
    int device = tdm__pool_table_device_of(&known, (void *)mem_pool);
    if (r == hipSuccess && device >= 0) { /* what it held goes with it */
        tdm__pool_table_forget(&known, (void *)mem_pool);
        tdm__alloc_observe_pool(device, (uint64_t)(uintptr_t)mem_pool, 0, 0, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipDeviceSetMemPool, device, mem_pool);
    hipError_t r = CALL_REAL(hipDeviceSetMemPool, device, mem_pool);
    if (r == hipSuccess && device >= 0 && device < MAX_DEVICES) {
        hipMemPool_t def = NULL;
        int own = tdm__hip_real.hipDeviceGetDefaultMemPool == NULL ||
                  tdm__hip_real.hipDeviceGetDefaultMemPool(&def, device) != hipSuccess ||
                  def != mem_pool;
        atomic_store_explicit(&current_pool[device], (void *)mem_pool, memory_order_release);
        atomic_store_explicit(&program_pool[device], own, memory_order_relaxed);
    }
    tdm__hook_leave();
    return r;
}

/* A synchronization lets the pools release what exceeds their threshold.
 * Until a pool was seen in use, nothing but one atomic load. */
#define POOLS_SEEN() (tdm__pool_table_any(&known))

TDM_HOOK_API hipError_t hipStreamSynchronize(hipStream_t stream)
{
    resolve();
    if (!POOLS_SEEN())
        return CALL_REAL(hipStreamSynchronize, stream);
    HOOK_PROLOGUE(hipStreamSynchronize, stream);
    hipError_t r = CALL_REAL(hipStreamSynchronize, stream);
    tdm__hip_pool_book_all();
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
    tdm__hip_pool_book_all();
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
