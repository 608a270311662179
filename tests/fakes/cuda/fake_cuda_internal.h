/* tests/fakes/cuda/fake_cuda_internal.h: shared by the two translation
 * units of the fake driver (fake_cuda.c: the knobs and memory;
 * fake_cuda_ctx.c: devices, contexts, streams; fake_cuda_gpa.c:
 * cuGetProcAddress and the table probe).  Nothing here is
 * exported.
 *
 * Every implementation f_NAME is declared below with the type of the
 * toolkit's PFN_* typedef for it, so a definition with another prototype
 * does not compile; the library exports it under NAME by an alias in the
 * file that defines it.
 */
#ifndef TDM_TESTS_FAKE_CUDA_INTERNAL_H
#define TDM_TESTS_FAKE_CUDA_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "fake_pool.h"

#undef cuGetProcAddress

#define FAKE_HIDDEN __attribute__((visibility("hidden")))
#define FAKE_EXPORT __attribute__((visibility("default")))
#define MAX_DEV 8

/* The driver's functions, in lists by the file that defines them:
 * X(exported name, PFN type, cuGetProcAddress base name, first version of
 *   this variant, is the _ptsz twin, allocates).
 * Devices and contexts (fake_cuda_ctx.c). */
#define FAKE_DEVICES(X)                                                        \
    X(cuInit, PFN_cuInit_v2000, "cuInit", 2000, 0, 0)                          \
    X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", 2020, 0, 0) \
    X(cuDeviceGet, PFN_cuDeviceGet_v2000, "cuDeviceGet", 2000, 0, 0)           \
    X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount", 2000, 0, 0) \
    X(cuDeviceGetName, PFN_cuDeviceGetName_v2000, "cuDeviceGetName", 2000, 0, 0) \
    X(cuDeviceTotalMem_v2, PFN_cuDeviceTotalMem_v3020, "cuDeviceTotalMem", 3020, 0, 0) \
    X(cuDeviceGetDefaultMemPool, PFN_cuDeviceGetDefaultMemPool_v11020, "cuDeviceGetDefaultMemPool", 11020, 0, 0) \
    X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain", 7000, 0, 0) \
    X(cuDevicePrimaryCtxRelease_v2, PFN_cuDevicePrimaryCtxRelease_v11000, "cuDevicePrimaryCtxRelease", 11000, 0, 0) \
    X(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000, "cuCtxGetCurrent", 4000, 0, 0) \
    X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", 4000, 0, 0) \
    X(cuCtxPushCurrent_v2, PFN_cuCtxPushCurrent_v4000, "cuCtxPushCurrent", 4000, 0, 0) \
    X(cuCtxPopCurrent_v2, PFN_cuCtxPopCurrent_v4000, "cuCtxPopCurrent", 4000, 0, 0) \
    X(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000, "cuCtxGetDevice", 2000, 0, 0) \
    X(cuCtxCreate_v2, PFN_cuCtxCreate_v3020, "cuCtxCreate", 3020, 0, 0)       \
    X(cuCtxCreate_v4, PFN_cuCtxCreate_v12050, "cuCtxCreate", 12050, 0, 0)     \
    X(cuCtxDestroy_v2, PFN_cuCtxDestroy_v4000, "cuCtxDestroy", 4000, 0, 0)    \
    X(cuDevicePrimaryCtxReset_v2, PFN_cuDevicePrimaryCtxReset_v11000, "cuDevicePrimaryCtxReset", 11000, 0, 0)

/* Memory (fake_cuda.c). */
#define FAKE_MEMORY(X)                                                         \
    X(cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020, "cuMemGetInfo", 3020, 0, 0)     \
    X(cuMemAlloc_v2, PFN_cuMemAlloc_v3020, "cuMemAlloc", 3020, 0, 1)           \
    X(cuMemFree_v2, PFN_cuMemFree_v3020, "cuMemFree", 3020, 0, 0)              \
    X(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020, "cuMemAllocPitch", 3020, 0, 1) \
    X(cuMemAllocManaged, PFN_cuMemAllocManaged_v6000, "cuMemAllocManaged", 6000, 0, 1) \
    X(cuMemHostAlloc, PFN_cuMemHostAlloc_v2020, "cuMemHostAlloc", 2020, 0, 1)  \
    X(cuMemAllocHost_v2, PFN_cuMemAllocHost_v3020, "cuMemAllocHost", 3020, 0, 1) \
    X(cuMemFreeHost, PFN_cuMemFreeHost_v2000, "cuMemFreeHost", 2000, 0, 0)     \
    X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, "cuMemAllocAsync", 11020, 0, 1) \
    X(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz, "cuMemAllocAsync", 11020, 1, 1) \
    X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, "cuMemFreeAsync", 11020, 0, 0) \
    X(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz, "cuMemFreeAsync", 11020, 1, 0) \
    X(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020, "cuMemAllocFromPoolAsync", 11020, 0, 1) \
    X(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz, "cuMemAllocFromPoolAsync", 11020, 1, 1) \
    X(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020, "cuMemAddressReserve", 10020, 0, 0) \
    X(cuMemAddressFree, PFN_cuMemAddressFree_v10020, "cuMemAddressFree", 10020, 0, 0) \
    X(cuMemCreate, PFN_cuMemCreate_v10020, "cuMemCreate", 10020, 0, 1)         \
    X(cuMemRelease, PFN_cuMemRelease_v10020, "cuMemRelease", 10020, 0, 0)      \
    X(cuMemMap, PFN_cuMemMap_v10020, "cuMemMap", 10020, 0, 0)                  \
    X(cuMemUnmap, PFN_cuMemUnmap_v10020, "cuMemUnmap", 10020, 0, 0)            \
    X(cuMemSetAccess, PFN_cuMemSetAccess_v10020, "cuMemSetAccess", 10020, 0, 0) \
    X(cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020,  \
      "cuMemGetAllocationGranularity", 10020, 0, 0)

/* Streams, events, captures (fake_cuda_stream.c). */
#define FAKE_EVENTS(X)                                                         \
    X(cuStreamCreate, PFN_cuStreamCreate_v2000, "cuStreamCreate", 2000, 0, 0)  \
    X(cuStreamDestroy_v2, PFN_cuStreamDestroy_v4000, "cuStreamDestroy", 4000, 0, 0) \
    X(cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000, "cuStreamIsCapturing", 10000, 0, 0) \
    X(cuStreamGetCtx, PFN_cuStreamGetCtx_v9020, "cuStreamGetCtx", 9020, 0, 0)  \
    X(cuStreamGetDevice, PFN_cuStreamGetDevice_v12080, "cuStreamGetDevice", 12080, 0, 0) \
    X(cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010, "cuStreamBeginCapture", 10010, 0, 0) \
    X(cuStreamBeginCapture_v2_ptsz, PFN_cuStreamBeginCapture_v10010_ptsz, "cuStreamBeginCapture", 10010, 1, 0) \
    X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000, "cuStreamEndCapture", 10000, 0, 0) \
    X(cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz, "cuStreamEndCapture", 10000, 1, 0) \
    X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize", 2000, 0, 0) \
    X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", 2000, 0, 0) \
    X(cuEventCreate, PFN_cuEventCreate_v2000, "cuEventCreate", 2000, 0, 0)     \
    X(cuEventRecord, PFN_cuEventRecord_v2000, "cuEventRecord", 2000, 0, 0)     \
    X(cuEventQuery, PFN_cuEventQuery_v2000, "cuEventQuery", 2000, 0, 0)        \
    X(cuEventSynchronize, PFN_cuEventSynchronize_v2000, "cuEventSynchronize", 2000, 0, 0) \
    X(cuEventDestroy_v2, PFN_cuEventDestroy_v4000, "cuEventDestroy", 4000, 0, 0)

/* Error names, export tables (fake_cuda_ctx.c). */
#define FAKE_STREAMS(X)                                                        \
    X(cuGetErrorName, PFN_cuGetErrorName_v6000, "cuGetErrorName", 6000, 0, 0)  \
    X(cuGetErrorString, PFN_cuGetErrorString_v6000, "cuGetErrorString", 6000, 0, 0) \
    X(cuGetExportTable, PFN_cuGetExportTable_v3000, "cuGetExportTable", 3000, 0, 0)

/* Stream-ordered pools, IPC and shareable handles, pointer queries
 * (fake_cuda_pool.c). */
#define FAKE_POOLS(X)                                                          \
    X(cuDeviceGetMemPool, PFN_cuDeviceGetMemPool_v11020, "cuDeviceGetMemPool", 11020, 0, 0) \
    X(cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020, "cuDeviceSetMemPool", 11020, 0, 0) \
    FAKE_SET_MEM_POOL(X)                                                       \
    X(cuMemPoolCreate, PFN_cuMemPoolCreate_v11020, "cuMemPoolCreate", 11020, 0, 0) \
    X(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020, "cuMemPoolDestroy", 11020, 0, 0) \
    X(cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute_v11020, "cuMemPoolSetAttribute", 11020, 0, 0) \
    X(cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020, "cuMemPoolGetAttribute", 11020, 0, 0) \
    X(cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020, "cuMemPoolTrimTo", 11020, 0, 0) \
    X(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz, "cuStreamSynchronize", 7000, 1, 0) \
    X(cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000, "cuPointerGetAttribute", 4000, 0, 0) \
    X(cuMemGetAddressRange_v2, PFN_cuMemGetAddressRange_v3020, "cuMemGetAddressRange", 3020, 0, 0) \
    X(cuIpcGetMemHandle, PFN_cuIpcGetMemHandle_v4010, "cuIpcGetMemHandle", 4010, 0, 0) \
    X(cuIpcOpenMemHandle_v2, PFN_cuIpcOpenMemHandle_v11000, "cuIpcOpenMemHandle", 11000, 0, 0) \
    X(cuIpcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010, "cuIpcCloseMemHandle", 4010, 0, 0) \
    X(cuMemExportToShareableHandle, PFN_cuMemExportToShareableHandle_v10020, "cuMemExportToShareableHandle", 10020, 0, 0) \
    X(cuMemImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020, "cuMemImportFromShareableHandle", 10020, 0, 0) \
    X(cuMemGetAllocationPropertiesFromHandle, PFN_cuMemGetAllocationPropertiesFromHandle_v10020, "cuMemGetAllocationPropertiesFromHandle", 10020, 0, 0)

/* CUDA 13's cuMemSetMemPool (fake_cuda_pool.c), with headers that have it. */
#if CUDA_VERSION >= 13000
#define FAKE_SET_MEM_POOL(X)                                                   \
    X(cuMemSetMemPool, PFN_cuMemSetMemPool_v13000, "cuMemSetMemPool", 13000, 0, 0)
#else
#define FAKE_SET_MEM_POOL(X)
#endif

/* Multicast objects (fake_cuda_pool.c), with headers that have them. */
#if CUDA_VERSION >= 12010
#define FAKE_MULTICAST(X)                                                      \
    X(cuMulticastCreate, PFN_cuMulticastCreate_v12010, "cuMulticastCreate", 12010, 0, 0) \
    X(cuMulticastAddDevice, PFN_cuMulticastAddDevice_v12010, "cuMulticastAddDevice", 12010, 0, 0) \
    X(cuMulticastBindMem, PFN_cuMulticastBindMem_v12010, "cuMulticastBindMem", 12010, 0, 0) \
    X(cuMulticastUnbind, PFN_cuMulticastUnbind_v12010, "cuMulticastUnbind", 12010, 0, 0)
#else
#define FAKE_MULTICAST(X)
#endif

#define FAKE_CORE(X) FAKE_DEVICES(X) FAKE_MEMORY(X) FAKE_STREAMS(X) FAKE_EVENTS(X) \
    FAKE_POOLS(X) FAKE_MULTICAST(X)

/* The resolvers (fake_cuda_gpa.c). */
#define FAKE_RESOLVERS(X)                                                      \
    X(cuGetProcAddress, PFN_cuGetProcAddress_v11030, "cuGetProcAddress", 11030, 0, 0) \
    X(cuGetProcAddress_v2, PFN_cuGetProcAddress_v12000, "cuGetProcAddress", 12000, 0, 0)

#define FAKE_FUNCS(X) FAKE_CORE(X) FAKE_RESOLVERS(X)

enum {
#define FC_ENUM(name, pfn, base, ver, pt, al) FC_##name,
    FAKE_FUNCS(FC_ENUM)
#undef FC_ENUM
    FC_COUNT
};

#define FC_DECL(name, pfn, base, ver, pt, al) FAKE_HIDDEN extern __typeof__(*(pfn)0) f_##name;
FAKE_FUNCS(FC_DECL)
#undef FC_DECL

/* Exports NAME as an alias of f_NAME (in the file defining f_NAME). */
#define FC_ALIAS(name, pfn, base, ver, pt, al)                                 \
    extern __typeof__(f_##name) name __attribute__((alias("f_" #name), visibility("default")));

/* Calls per function, and the names of the functions. */
FAKE_HIDDEN extern atomic_long fake__calls[FC_COUNT];
FAKE_HIDDEN extern const char *const fake__names[FC_COUNT];

/* The knobs (fake_cuda.h), read once at the first call. */
typedef struct fake_config {
    int devices;
    unsigned long long capacity;  /* bytes per device */
    _Atomic unsigned long long oom_above; /* bytes, 0 = no limit */
    CUresult init_result;
    int fail_fn;                  /* FC_* or -1 */
    CUresult fail_code;
    int gpa_exported;
    int probe_table;
    const char *report;
    int capturing;                /* every stream reports an active capture */
    int no_vmm;                   /* devices without virtual memory management */
} fake_config;
FAKE_HIDDEN extern fake_config fake__cfg;

/* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and every capture invalidated)
 * when a global or thread-local capture forbids a potentially unsafe call
 * now, else CUDA_SUCCESS (fake_cuda_stream.c). */
FAKE_HIDDEN CUresult fake__capture_check(void);
/* cuStreamSynchronize's work, for both of its entry points
 * (fake_cuda_stream.c); the pools' part of it (fake_cuda_pool.c). */
FAKE_HIDDEN CUresult fake__stream_synchronize(CUstream s);
FAKE_HIDDEN void fake__pool_synchronize(void);

/* Counts a call of `fc`; the error injected for it, or CUDA_SUCCESS. */
FAKE_HIDDEN CUresult fake__enter(int fc);

#define ENTER(fc)                                                              \
    do {                                                                       \
        CUresult r_ = fake__enter(fc);                                         \
        if (r_ != CUDA_SUCCESS)                                                \
            return r_;                                                         \
    } while (0)

/* A stream-ordered pool (fake_cuda_pool.c); a pool handle points at one.
 * reserved = used + idle: memory freed into the pool stays reserved
 * (idle) until a synchronization releases what exceeds the threshold,
 * or cuMemPoolTrimTo.  Fields under the pool lock of fake_cuda_pool.c. */
typedef struct fake_pool {
    int device;
    int made;              /* by cuMemPoolCreate (vs a default pool) */
    fake_pool_bytes bytes; /* tests/fakes/core; threshold:
                              CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
} fake_pool;

/* Kinds of allocation in the registry of fake_cuda.c. */
enum { FAKE_K_DEVICE, FAKE_K_MANAGED, FAKE_K_HOST, FAKE_K_PHYS, FAKE_K_RESERVE,
       FAKE_K_POOLED, FAKE_K_IPC, FAKE_K_PHYS_IMPORT, FAKE_K_HOST_PHYS,
       FAKE_K_MULTICAST /* a multicast object: a handle that maps, holding no memory */ };
static inline int fake__is_phys(int kind)
{
    return kind == FAKE_K_PHYS || kind == FAKE_K_PHYS_IMPORT || kind == FAKE_K_HOST_PHYS ||
           kind == FAKE_K_MULTICAST;
}
/* What the registry knows of one allocation. */
typedef struct fake_alloc {
    size_t size;
    int device, kind;
    void *pool;  /* FAKE_K_POOLED: its fake_pool; FAKE_K_IPC: the exporter's base */
    void *ctx;   /* the context current at the allocation (NULL: host memory) */
} fake_alloc;
/* The registry (fake_cuda.c): make (with the pool it came from), free if
 * its kind is in the mask, look up by exact key; and the device's used
 * bytes moved by a pool (CUDA_ERROR_OUT_OF_MEMORY past the capacity). */
FAKE_HIDDEN CUresult fake__take(int kind, int device, size_t size, void *pool, uintptr_t *out);
FAKE_HIDDEN CUresult fake__give(uintptr_t key, unsigned kinds, fake_alloc *out);
FAKE_HIDDEN int fake__lookup(uintptr_t key, fake_alloc *out);
FAKE_HIDDEN CUresult fake__used_change(int device, long long bytes);
/* The registry itself (tests/fakes/core), for the pools' bytes. */
FAKE_HIDDEN extern fake_memory fake__memory;
/* Pool allocations (fake_cuda_pool.c). */
FAKE_HIDDEN CUresult fake__pool_alloc(fake_pool *pool, CUdeviceptr *dptr, size_t size);
FAKE_HIDDEN CUresult fake__pool_free(CUdeviceptr p);
/* CUDA_ERROR_NOT_INITIALIZED before cuInit, else CUDA_SUCCESS. */
FAKE_HIDDEN CUresult fake__need_init(void);
/* Whether this thread has a current context; the context itself (NULL
 * when none), which every device allocation records (fake_cuda_ctx.c). */
FAKE_HIDDEN int fake__has_context(void);
FAKE_HIDDEN void *fake__current_ctx(void);
/* The context and device of stream `s` (a default stream: the current
 * context's), or an error code (fake_cuda_stream.c). */
FAKE_HIDDEN CUresult fake__stream_place(CUstream s, int ptsz, void **ctx, int *dev);
/* Completes the work queued on every stream (fake_cuda_stream.c): what a
 * call that synchronizes the device implicitly does. */
FAKE_HIDDEN void fake__complete_all(void);
/* Frees every device allocation made in context `ctx` (a reset). */
FAKE_HIDDEN void fake__give_context(void *ctx);
/* The live allocation containing `addr` (its key in *base); 0 if none. */
FAKE_HIDDEN int fake__lookup_containing(uintptr_t addr, uintptr_t *base, fake_alloc *out);
/* The device of the current context, or an error code. */
FAKE_HIDDEN CUresult fake__current_device(int *dev);

/* Returns CUDA_ERROR_NOT_INITIALIZED from the caller before cuInit. */
#define NEED_INIT()                                                            \
    do {                                                                       \
        CUresult ri_ = fake__need_init();                                      \
        if (ri_ != CUDA_SUCCESS)                                               \
            return ri_;                                                        \
    } while (0)

/* FAKE_CUDA_PROBE_TABLE, from cuInit (fake_cuda_gpa.c). */
FAKE_HIDDEN void fake__probe_table(void);
/* Around the probe: the driver initialized and device 0's primary context
 * current on this thread; _end puts things back. */
FAKE_HIDDEN int fake__probe_begin(void);
FAKE_HIDDEN void fake__probe_end(int was_initialized);

#endif
