/* hooks/preload/cuda_pool.c: the CUDA driver's stream-ordered memory pools
 * and the memory processes share, as the hooks see them.
 *
 * Pools.  cuMemAllocAsync takes memory from the device's current pool and
 * cuMemFreeAsync gives it back to the pool, which keeps it up to its
 * release threshold (PyTorch's backend:cudaMallocAsync sets UINT64_MAX:
 * everything) and releases the rest at the next synchronization.  The
 * pool's own counters (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT and
 * USED_MEM_CURRENT) say what it holds; the hooks read them after each
 * call that can change them (an async allocation, an async free, a
 * stream synchronize, cuMemPoolTrimTo, cuMemPoolDestroy) and book the
 * difference as the device's reserved memory (alloc/observe_pool.c).
 * Reading them is two host-side driver calls with no device work, made
 * only once a pool was seen in use: a program without stream-ordered
 * allocations pays one atomic load per synchronize.
 * cuDeviceSetMemPool, and CUDA 13's cuMemSetMemPool, are watched so that
 * cache mode leaves the program's own pool alone.
 *
 * Shared memory.  A mapping this process did not allocate (an IPC handle
 * opened, a physical allocation imported from a shareable handle) is
 * booked apart as imported (alloc/observe_import.c), with the exporting
 * device where the driver says it; never on the current device.
 *
 * Owns: CUDA's pool tracker (pool_track.h) and its operations.  Lock:
 * none (atomics).
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include "snap_model.h"

/* ---- the pool tracker's operations (pool_track.h) --------------------------- */

static int pool_query(void *pool, uint64_t *reserved, uint64_t *used)
{
    PFN_cuMemPoolGetAttribute_v11020 get =
        (PFN_cuMemPoolGetAttribute_v11020)tdm__cuda_helper("cuMemPoolGetAttribute");
    cuuint64_t r = 0, u = 0;
    if (get == NULL ||
        get((CUmemoryPool)pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
        get((CUmemoryPool)pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
        return 0;
    *reserved = r;
    *used = u;
    return 1;
}

static void *device_pool(int device)
{
    PFN_cuDeviceGetMemPool_v11020 get =
        (PFN_cuDeviceGetMemPool_v11020)tdm__cuda_helper("cuDeviceGetMemPool");
    CUmemoryPool pool = NULL;
    return get != NULL && get(&pool, device) == CUDA_SUCCESS ? (void *)pool : NULL;
}

static void *default_pool(int device)
{
    PFN_cuDeviceGetDefaultMemPool_v11020 def =
        (PFN_cuDeviceGetDefaultMemPool_v11020)tdm__cuda_helper("cuDeviceGetDefaultMemPool");
    CUmemoryPool pool = NULL;
    return def != NULL && def(&pool, device) == CUDA_SUCCESS ? (void *)pool : NULL;
}

/* At each dump (not an out-of-memory one): what every known pool holds
 * now, for releases the hooks did not see (cuCtxSynchronize, event
 * waits, a driver trimming on its own). */
static void book_all(void)
{
    tdm__pool_book_all(&tdm__cuda_pools);
}

static const tdm__pool_ops cuda_pool_ops = {
    .query = pool_query, .device_pool = device_pool, .default_pool = default_pool,
    .book_all = book_all};
tdm__pool_track tdm__cuda_pools = TDM__POOL_TRACK_INIT(&cuda_pool_ops);

int tdm__cuda_pointer_device(CUdeviceptr p, int otherwise)
{
    PFN_cuPointerGetAttribute_v4000 get =
        (PFN_cuPointerGetAttribute_v4000)tdm__cuda_helper("cuPointerGetAttribute");
    int ordinal = -1;
    if (get == NULL || get(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != CUDA_SUCCESS ||
        ordinal < 0)
        return otherwise;
    return ordinal;
}

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED
#define REAL(name, pfn) pfn real = (pfn)tdm__cuda_real(TDM__CV_##name)

/* ---- pools -------------------------------------------------------------------- */

CUresult tdm__cuda_w_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    REAL(cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(pool, keep) : NO_DRIVER);
    CUresult r = real(pool, keep);
    if (r == CUDA_SUCCESS)
        tdm__pool_trimmed(&tdm__cuda_pools, (void *)pool, tdm__cuda_current_device());
    tdm__hook_leave();
    return r;
}

CUresult tdm__cuda_w_cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(pool) : NO_DRIVER);
    CUresult r = real(pool);
    if (r == CUDA_SUCCESS)
        tdm__pool_destroyed(&tdm__cuda_pools, (void *)pool);
    tdm__hook_leave();
    return r;
}

CUresult tdm__cuda_w_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    REAL(cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(dev, pool) : NO_DRIVER);
    CUresult r = real(dev, pool);
    if (r == CUDA_SUCCESS)
        tdm__pool_set_current(&tdm__cuda_pools, dev, (void *)pool);
    tdm__hook_leave();
    return r;
}

#if CUDA_VERSION >= 13000
/* CUDA 13's cuMemSetMemPool sets the current pool of a location for an
 * allocation type: for a device's pinned memory, what cuDeviceSetMemPool
 * sets, watched the same way. */
CUresult tdm__cuda_w_cuMemSetMemPool(CUmemLocation *loc, CUmemAllocationType type,
                                     CUmemoryPool pool)
{
    REAL(cuMemSetMemPool, PFN_cuMemSetMemPool_v13000);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(loc, type, pool) : NO_DRIVER);
    CUresult r = real(loc, type, pool);
    if (r == CUDA_SUCCESS && loc && loc->type == CU_MEM_LOCATION_TYPE_DEVICE &&
        type == CU_MEM_ALLOCATION_TYPE_PINNED)
        tdm__pool_set_current(&tdm__cuda_pools, loc->id, (void *)pool);
    tdm__hook_leave();
    return r;
}
#endif

/* A synchronization lets the pools release what exceeds their threshold. */
#define STREAM_SYNC(name, pfn)                                                 \
    CUresult tdm__cuda_w_##name(CUstream s)                                    \
    {                                                                          \
        REAL(name, pfn);                                                       \
        if (!tdm__pool_any(&tdm__cuda_pools))                                  \
            return real ? real(s) : NO_DRIVER;                                 \
        TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(s) : NO_DRIVER);       \
        CUresult r = real(s);                                                  \
        tdm__pool_book_all(&tdm__cuda_pools);                                  \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
STREAM_SYNC(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)
STREAM_SYNC(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz)

/* ---- memory shared with other processes ------------------------------------------ */

/* Cache mode: an IPC handle names the driver allocation containing the
 * pointer, and the peer's cuIpcOpenMemHandle returns that allocation's
 * base.  An object that can make the export (it imports
 * cu/cudaIpcGetMemHandle), NCCL and what `ipc_libraries` names never get
 * cached blocks: the driver serves them (cuda_ipc.c).  Of the rest, a
 * block at its segment's base is exported as it is (the peer's pointer is
 * the block; an exporter that asked cuMemGetAddressRange for the base
 * first, as CUDA-aware MPI does, passes that).  Any other cached block's
 * export is the last resort, refused with CUDA_ERROR_NOT_SUPPORTED and
 * one line on stderr: the block was handed out before the export said it
 * would be shared, no handle can name it, and the peer must never map the
 * wrong memory.  That is left for a block that an object with a static
 * cudart nobody named allocated, or that another object than the one
 * exporting it allocated. */
CUresult tdm__cuda_w_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
    REAL(cuIpcGetMemHandle, PFN_cuIpcGetMemHandle_v4010);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(h, p) : NO_DRIVER);
    if (m == TDM__HOOK_CACHE && p != 0 && tdm__cuda_cache_ready() &&
        tdm__alloc_owns((void *)(uintptr_t)p)) {
        PFN_cuMemGetAddressRange_v3020 range =
            (PFN_cuMemGetAddressRange_v3020)tdm__cuda_helper("cuMemGetAddressRange_v2");
        CUdeviceptr base = 0;
        size_t size = 0;
        if (range == NULL || range(&base, &size, p) != CUDA_SUCCESS || base != p) {
            static atomic_flag said = ATOMIC_FLAG_INIT;
            if (!atomic_flag_test_and_set(&said))
                tdm__cuda_say("mode=cache: cuIpcGetMemHandle of a block inside one of the "
                              "cache's segments refused (CUDA_ERROR_NOT_SUPPORTED): the peer "
                              "would map the segment, not the block; name the program or "
                              "library that allocates the memory it shares in TIDEMARK_CONF's "
                              "ipc_libraries, or run it with mode=observe");
            tdm__hook_leave();
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    CUresult r = real(h, p);
    tdm__hook_leave();
    return r;
}

/* ---- memory other processes made ---------------------------------------------- */

CUresult tdm__cuda_w_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                          unsigned int flags)
{
    REAL(cuIpcOpenMemHandle_v2, PFN_cuIpcOpenMemHandle_v11000);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(pdptr, handle, flags) : NO_DRIVER);
    CUresult r = real(pdptr, handle, flags);
    if (r == CUDA_SUCCESS && pdptr && *pdptr) {
        PFN_cuMemGetAddressRange_v3020 range =
            (PFN_cuMemGetAddressRange_v3020)tdm__cuda_helper("cuMemGetAddressRange_v2");
        CUdeviceptr base = 0;
        size_t size = 0;
        if (range == NULL || range(&base, &size, *pdptr) != CUDA_SUCCESS)
            size = 0;
        int here = tdm__cuda_current_device();
        tdm__alloc_observe_import(here < 0 ? 0 : here, (void *)(uintptr_t)*pdptr, size,
                                  tdm__cuda_pointer_device(*pdptr, TDM_IMPORT_SOURCE_UNKNOWN),
                                  TDM_IMPORT_IPC, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

CUresult tdm__cuda_w_cuIpcCloseMemHandle(CUdeviceptr p)
{
    REAL(cuIpcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(p) : NO_DRIVER);
    tdm__alloc_observe_unimport((void *)(uintptr_t)p);
    CUresult r = real(p);
    tdm__hook_leave();
    return r;
}

/* The imported handle maps as imported memory (cuda_driver.c's cuMemMap),
 * from the device the driver says it lives on. */
CUresult tdm__cuda_w_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h,
                                                   void *os_handle,
                                                   CUmemAllocationHandleType type)
{
    REAL(cuMemImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020);
    TDM_HOOK_PROLOGUE(m_, real != NULL, real ? real(h, os_handle, type) : NO_DRIVER);
    CUresult r = real(h, os_handle, type);
    if (r == CUDA_SUCCESS && h) {
        PFN_cuMemGetAllocationPropertiesFromHandle_v10020 props =
            (PFN_cuMemGetAllocationPropertiesFromHandle_v10020)tdm__cuda_helper(
                "cuMemGetAllocationPropertiesFromHandle");
        CUmemAllocationProp prop = {0};
        int source = TDM_IMPORT_SOURCE_UNKNOWN;
        if (props && props(&prop, *h) == CUDA_SUCCESS)
            source = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop.location.id
                     : prop.location.type == CU_MEM_LOCATION_TYPE_INVALID
                         ? TDM_IMPORT_SOURCE_UNKNOWN : -1;
        tdm__vmm_created(&tdm__cuda_vmm, *h, source, TDM_IMPORT_SHAREABLE);
    }
    tdm__hook_leave();
    return r;
}

#define W_ALIAS(name, pfn)                                                     \
    extern __typeof__(tdm__cuda_w_##name) name                                 \
        __attribute__((alias("tdm__cuda_w_" #name), visibility("default")));
TDM__CUDA_POOL_WRAPPERS(W_ALIAS)
#undef W_ALIAS
