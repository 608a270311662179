/* hooks/preload/cuda_hooks.h: what the CUDA interposers of
 * libtidemark_preload.so share (cuda_driver.c, cuda_lookup.c,
 * cuda_runtime.c, cuda_runtime_ptsz.c, cuda_runtime_real.c, cuda_common.c).
 *
 * The driver entry points tidemark wraps are "variants": one exact driver
 * function each (cuMemAlloc_v2, cuMemAllocAsync_ptsz, ...), known by the
 * base name and first version cuGetProcAddress uses for it.  Each variant
 * has one wrapper (exported under the variant's name, and handed out in
 * place of the driver's pointer by the cuGetProcAddress and dlsym hooks)
 * and one slot holding the driver's real function, filled once from
 * whichever route finds it first; every route leads to an implementation
 * of the same driver function, so any of them may serve.
 *
 * Hot path: a wrapper loads its real pointer (acquire), the hook mode
 * (relaxed) and the recursion guard; nothing else is shared.
 */
#ifndef TDM_HOOKS_PRELOAD_CUDA_HOOKS_H
#define TDM_HOOKS_PRELOAD_CUDA_HOOKS_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>

#include "alloc.h"
#include "preload.h"
#include "pool_track.h"
#include "vmm_track.h"

#define TDM_CUDA_HIDDEN __attribute__((visibility("hidden")))

/* Multicast objects (CUDA 12.1 on), with headers that have them. */
#if CUDA_VERSION >= 12010
#define TDM__CUDA_MULTICAST_VARIANTS(X)                                        \
    X(cuMulticastCreate, "cuMulticastCreate", 12010, 0, PFN_cuMulticastCreate_v12010)
#else
#define TDM__CUDA_MULTICAST_VARIANTS(X)
#endif

/* Graph captures begun through the driver (what a static cudart's
 * cudaStreamBeginCapture becomes): the first variant, without a mode, has
 * no public PFN type. */
typedef CUresult (*tdm__PFN_cuStreamBeginCapture_v10000)(CUstream hStream);
#if CUDA_VERSION >= 12030
#define TDM__CUDA_TO_GRAPH_VARIANTS(X)                                         \
    X(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030, 0, PFN_cuStreamBeginCaptureToGraph_v12030) \
    X(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", 12030, 1, PFN_cuStreamBeginCaptureToGraph_v12030_ptsz)
#else
#define TDM__CUDA_TO_GRAPH_VARIANTS(X)
#endif
#define TDM__CUDA_CAPTURE_VARIANTS(X)                                          \
    X(cuStreamBeginCapture, "cuStreamBeginCapture", 10000, 0, tdm__PFN_cuStreamBeginCapture_v10000) \
    X(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 10000, 1, tdm__PFN_cuStreamBeginCapture_v10000) \
    X(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 10010, 0, PFN_cuStreamBeginCapture_v10010) \
    X(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", 10010, 1, PFN_cuStreamBeginCapture_v10010_ptsz) \
    TDM__CUDA_TO_GRAPH_VARIANTS(X)                                             \
    X(cuStreamEndCapture, "cuStreamEndCapture", 10000, 0, PFN_cuStreamEndCapture_v10000) \
    X(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 10000, 1, PFN_cuStreamEndCapture_v10000_ptsz)

/* CUDA 13's cuMemSetMemPool (a device's current pool, by location). */
#if CUDA_VERSION >= 13000
#define TDM__CUDA_SET_POOL_VARIANTS(X)                                         \
    X(cuMemSetMemPool, "cuMemSetMemPool", 13000, 0, PFN_cuMemSetMemPool_v13000)
#define TDM__CUDA_SET_POOL_WRAPPERS(X) X(cuMemSetMemPool, PFN_cuMemSetMemPool_v13000)
#else
#define TDM__CUDA_SET_POOL_VARIANTS(X)
#define TDM__CUDA_SET_POOL_WRAPPERS(X)
#endif

/* X(variant name, base name, first version, is the _ptsz twin, PFN type) */
#define TDM__CUDA_VARIANTS(X)                                                  \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, PFN_cuMemAlloc_v3020)              \
    X(cuMemFree_v2, "cuMemFree", 3020, 0, PFN_cuMemFree_v3020)                 \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, PFN_cuMemAllocPitch_v3020) \
    X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, PFN_cuMemAllocManaged_v6000) \
    X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0, PFN_cuMemHostAlloc_v2020)     \
    X(cuMemFreeHost, "cuMemFreeHost", 2000, 0, PFN_cuMemFreeHost_v2000)        \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, PFN_cuMemAllocAsync_v11020) \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1, PFN_cuMemAllocAsync_v11020_ptsz) \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, PFN_cuMemFreeAsync_v11020)   \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1, PFN_cuMemFreeAsync_v11020_ptsz) \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, PFN_cuMemAllocFromPoolAsync_v11020) \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 1, PFN_cuMemAllocFromPoolAsync_v11020_ptsz) \
    X(cuMemCreate, "cuMemCreate", 10020, 0, PFN_cuMemCreate_v10020)            \
    X(cuMemRelease, "cuMemRelease", 10020, 0, PFN_cuMemRelease_v10020)         \
    X(cuMemMap, "cuMemMap", 10020, 0, PFN_cuMemMap_v10020)                     \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0, PFN_cuMemUnmap_v10020)               \
    X(cuMemAddressReserve, "cuMemAddressReserve", 10020, 0, PFN_cuMemAddressReserve_v10020) \
    X(cuMemAddressFree, "cuMemAddressFree", 10020, 0, PFN_cuMemAddressFree_v10020) \
    TDM__CUDA_MULTICAST_VARIANTS(X)                                            \
    X(cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0, PFN_cuMemPoolTrimTo_v11020) \
    X(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0, PFN_cuMemPoolDestroy_v11020) \
    X(cuDeviceSetMemPool, "cuDeviceSetMemPool", 11020, 0, PFN_cuDeviceSetMemPool_v11020) \
    TDM__CUDA_SET_POOL_VARIANTS(X)                                             \
    TDM__CUDA_CAPTURE_VARIANTS(X)                                              \
    X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, 0, PFN_cuDevicePrimaryCtxReset_v11000) \
    X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0, PFN_cuDevicePrimaryCtxReset_v11000) \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0, PFN_cuStreamSynchronize_v2000) \
    X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 1, PFN_cuStreamSynchronize_v7000_ptsz) \
    X(cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010, 0, PFN_cuIpcGetMemHandle_v4010) \
    X(cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", 11000, 0, PFN_cuIpcOpenMemHandle_v11000) \
    X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010, 0, PFN_cuIpcCloseMemHandle_v4010) \
    X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020, 0, PFN_cuMemImportFromShareableHandle_v10020) \
    X(cuGetProcAddress, "cuGetProcAddress", 11030, 0, PFN_cuGetProcAddress_v11030) \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, PFN_cuGetProcAddress_v12000)

enum {
#define TDM__CV_ENUM(name, base, ver, pt, pfn) TDM__CV_##name,
    TDM__CUDA_VARIANTS(TDM__CV_ENUM)
#undef TDM__CV_ENUM
    TDM__CV_COUNT
};

typedef struct tdm__cuda_variant {
    const char *name;  /* the driver's exported name */
    const char *base;  /* the name cuGetProcAddress is asked for */
    int version;       /* first version that yields this variant */
    int ptsz;          /* the per-thread-default-stream twin */
    void *wrapper;     /* ours */
} tdm__cuda_variant;

/* The table, in TDM__CV_* order (cuda_driver.c). */
TDM_CUDA_HIDDEN extern const tdm__cuda_variant tdm__cuda_variants[TDM__CV_COUNT];
/* The driver's functions, per variant; NULL until found. */
TDM_CUDA_HIDDEN extern _Atomic(void *) tdm__cuda_real_fn[TDM__CV_COUNT];

/* Fills the slots still empty from the driver library's exported symbols
 * (once per process); the slot of `v` afterwards (may be NULL). */
TDM_CUDA_HIDDEN void *tdm__cuda_resolve_slow(int v);

static inline void *tdm__cuda_real(int v)
{
    void *p = atomic_load_explicit(&tdm__cuda_real_fn[v], memory_order_acquire);
    return p ? p : tdm__cuda_resolve_slow(v);
}

/* Stores the driver's function for `v` if the slot is empty. */
TDM_CUDA_HIDDEN void tdm__cuda_set_real(int v, void *fn);

/* Nonzero when `p` points into libtidemark_preload.so. */
TDM_CUDA_HIDDEN int tdm__cuda_is_ours(const void *p);

/* After a successful driver lookup of `symbol` (cuGetProcAddress, or
 * cudaGetDriverEntryPoint* with the runtime's version and flags mapped to
 * CU_GET_PROC_ADDRESS_*): keeps the driver's pointer and replaces *pfn
 * with our wrapper of exactly that variant; leaves anything else alone. */
TDM_CUDA_HIDDEN void tdm__cuda_wrap(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags);

/* Our resolvers (cuda_lookup.c), exported as cuGetProcAddress(_v2). */
TDM_CUDA_HIDDEN CUresult tdm__cuda_w_cuGetProcAddress(const char *symbol, void **pfn,
                                                      int version, cuuint64_t flags);
TDM_CUDA_HIDDEN CUresult tdm__cuda_w_cuGetProcAddress_v2(const char *symbol, void **pfn,
                                                         int version, cuuint64_t flags,
                                                         CUdriverProcAddressQueryResult *st);

/* ---- helpers for the wrappers (cuda_common.c); none records anything -- */

/* A driver function tidemark calls but does not hook (cuCtxGetDevice,
 * cuMemGetInfo_v2, ...), from the loaded libcuda.so.1; NULL when absent. */
TDM_CUDA_HIDDEN void *tdm__cuda_helper(const char *name);
/* The device of the calling thread's current context (0 when unknown),
 * described to the allocator on first sight. */
TDM_CUDA_HIDDEN int tdm__cuda_current_device(void);
/* Where a call's memory comes from: for a stream-ordered call (`ordered`)
 * on a stream of its own, the stream's device ("cuMemAllocAsync allocates
 * from the current mempool of the provided stream's device"); else the
 * current context's.  -1 when unknown.  *primary (when not NULL): nonzero
 * when that context is the device's primary context, the one cache
 * mode's segments live in ("each context has its own distinct address
 * space": memory of another context is no use to the program's). */
TDM_CUDA_HIDDEN int tdm__cuda_place(CUstream s, int ordered, int *primary);
/* Nonzero when the context current on the thread is `dev`'s primary one,
 * or none is (the runtime then makes the primary one current). */
TDM_CUDA_HIDDEN int tdm__cuda_current_is_primary(int dev);
/* Describes `device` to the allocator once ("cuda", name, total bytes). */
TDM_CUDA_HIDDEN void tdm__cuda_describe(int device);
/* Free bytes of the current context's device, for oom events (0 if
 * unknown). */
TDM_CUDA_HIDDEN size_t tdm__cuda_free_bytes(void);
/* Nonzero when cache mode can serve device memory: the provider over the
 * real driver is installed (made on first call; 0 for good when it cannot
 * be, e.g. no device, so the program's own calls go through). */
TDM_CUDA_HIDDEN int tdm__cuda_cache_ready(void);
/* Nonzero when cache mode serves new allocations: ready, and not stood
 * aside (tdm__cuda_cache_stand_aside; it stands aside here when a
 * framework that caches itself was loaded since it started).  Frees still ask
 * tdm__cuda_cache_ready: a block the cache served goes back to it. */
TDM_CUDA_HIDDEN int tdm__cuda_cache_serves(void);
/* From now on CUDA allocations are the driver's (observed), because cache
 * mode could not keep the driver's semantics; `why` goes to stderr, once
 * for the process. */
TDM_CUDA_HIDDEN void tdm__cuda_cache_stand_aside(const char *why);
/* A block went back to the cache: once the cache stands aside, the
 * segments with no live block go back to the driver. */
TDM_CUDA_HIDDEN void tdm__cuda_cache_freed(void);
/* cuDevicePrimaryCtxReset destroyed `device`'s memory, the cache's
 * segments on it with it: their blocks are no allocations any more. */
TDM_CUDA_HIDDEN void tdm__cuda_note_reset(int device);
TDM_CUDA_HIDDEN extern _Atomic unsigned long long tdm__cuda_reset_devices;
/* Nonzero when `p` lies in a cache segment of a device since reset: its
 * free is the driver's error for memory that is gone. */
static inline int tdm__cuda_reset_block(const void *p)
{
    unsigned long long m = atomic_load_explicit(&tdm__cuda_reset_devices, memory_order_relaxed);
    if (m == 0)
        return 0;
    int d = tdm__alloc_owner_device(p);
    return d >= 0 && d < 64 && (m >> d & 1);
}
/* Nonzero when work on `stream` (as recorded: tdm__cuda_stream) is being
 * captured into a CUDA graph, or the
 * driver cannot say: a stream-ordered allocation then belongs to the graph
 * and must be the driver's, even in cache mode. */
TDM_CUDA_HIDDEN int tdm__cuda_capturing(tdm_stream stream);
/* Captures begun and not yet ended, through the runtime
 * (cudaStreamBeginCapture*) or the driver (cuStreamBeginCapture*, which a
 * static cudart calls): nonzero while one is underway
 * (cuda_runtime_real.c).  tdm__cuda_capture_count: +1 for a capture
 * begun, -1 for one ended (an invalidated one too). */
TDM_CUDA_HIDDEN int tdm__cuda_captures_underway(void);
TDM_CUDA_HIDDEN void tdm__cuda_capture_count(int delta);
/* After a stream-ordered allocation on `stream`: when a runtime capture
 * is underway and the stream is being captured, the allocation belongs to
 * a graph, and the snapshot says that graph memory is not covered.  Costs
 * one atomic load while no capture is underway. */
static inline void tdm__cuda_note_capture(tdm_stream stream)
{
    if (tdm__cuda_captures_underway() && tdm__cuda_capturing(stream))
        tdm__alloc_observe_graph_capture();
}
/* One line on stderr, "tidemark: " first: cache mode says where it could
 * not keep CUDA's semantics and what it does instead (cold paths only). */
TDM_CUDA_HIDDEN void tdm__cuda_say(const char *msg);

/* Memory exported over CUDA IPC (cuda_ipc.c).  Whether the loaded object
 * `info` describes can call the export (its dynamic symbol table imports
 * cudaIpcGetMemHandle or cuIpcGetMemHandle; safe inside a dl_iterate_phdr
 * callback); whether the object at `path` is named as one that exports
 * its own allocations (NCCL, and those TIDEMARK_CONF's ipc_libraries
 * names); whether the call site `caller` lies in an object that is either
 * (cuda_runtime_real.c: its table of call sites, one hash probe once the
 * site was seen), the first yes making the one stderr note that cache
 * mode leaves such an object's allocations to the driver
 * (tdm__cuda_ipc_note). */
struct dl_phdr_info;
TDM_CUDA_HIDDEN int tdm__cuda_ipc_imports_export(const struct dl_phdr_info *info);
TDM_CUDA_HIDDEN int tdm__cuda_ipc_library(const char *path);
TDM_CUDA_HIDDEN int tdm__cuda_caller_exports_ipc(const void *caller);
TDM_CUDA_HIDDEN void tdm__cuda_ipc_note(const void *caller);
/* The CUresult for a failed tdm__alloc_malloc / _free. */
TDM_CUDA_HIDDEN CUresult tdm__cuda_status_result(tdm_status st);

/* Per-thread default streams.  CU_STREAM_PER_THREAD (2), or 0 in a _ptsz
 * call, names the calling thread's own stream: "it gives each host thread
 * its own default stream".  One id for all of them would let the cache
 * hand a block freed on thread A's stream to thread B's at once, while
 * A's work may still use it.  So each thread's is recorded as its own
 * stream id, TDM__CUDA_PTDS_TAG in the low 32 bits (it still reads as 2
 * there) and the thread's number above (no stream handle, a pointer
 * aligned to 8, has those low bits).  tdm__cuda_vendor_stream turns an id
 * back into a handle for the driver. */
#define TDM__CUDA_PTDS_TAG ((uint64_t)(uintptr_t)CU_STREAM_PER_THREAD)
TDM_CUDA_HIDDEN uint64_t tdm__cuda_ptds_key_slow(void);
TDM_CUDA_HIDDEN extern __thread uint64_t tdm__cuda_ptds_key_t;
static inline int tdm__cuda_is_ptds_key(tdm_stream st)
{
    return (st & 0xffffffffu) == TDM__CUDA_PTDS_TAG && (st >> 32) != 0;
}
/* Stream ids as recorded (and as the cache keeps blocks apart): a
 * per-thread default stream is the calling thread's own id. */
static inline tdm_stream tdm__cuda_stream(CUstream s, int ptsz)
{
    if (s == CU_STREAM_PER_THREAD || (ptsz && s == NULL)) {
        uint64_t k = tdm__cuda_ptds_key_t;
        return k ? k : tdm__cuda_ptds_key_slow();
    }
    return (tdm_stream)(uintptr_t)s;
}
/* The handle the driver knows for a recorded id: CU_STREAM_PER_THREAD for
 * the calling thread's own per-thread stream; for another thread's (a
 * marker recorded later, from elsewhere) the legacy stream, which waits
 * for every blocking stream of the context, per-thread ones included. */
static inline CUstream tdm__cuda_vendor_stream(tdm_stream st)
{
    if (!tdm__cuda_is_ptds_key(st))
        return (CUstream)(uintptr_t)st;
    return st == tdm__cuda_ptds_key_t ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* Virtual memory: the physical allocation handles (device, origin:
 * TDM_CUDA_OWN when made here by cuMemCreate, else the tdm_import_kind
 * they map as) and their mappings; cuda_common.c. */
#define TDM_CUDA_OWN TDM_VMM_OWN
TDM_CUDA_HIDDEN extern tdm__vmm_track tdm__cuda_vmm;

/* ---- stream-ordered pools and shared memory (cuda_pool.c) -------------- */

/* The wrappers cuda_pool.c defines (the variant table names them). */
#define TDM__CUDA_POOL_WRAPPERS(X)                                             \
    X(cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020)                             \
    X(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020)                           \
    X(cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020)                       \
    TDM__CUDA_SET_POOL_WRAPPERS(X)                                             \
    X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                      \
    X(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz)            \
    X(cuIpcGetMemHandle, PFN_cuIpcGetMemHandle_v4010)                          \
    X(cuIpcOpenMemHandle_v2, PFN_cuIpcOpenMemHandle_v11000)                    \
    X(cuIpcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010)                      \
    X(cuMemImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020)
#define TDM__CUDA_POOL_DECL(name, pfn)                                         \
    TDM_CUDA_HIDDEN extern __typeof__(*(pfn)0) tdm__cuda_w_##name;
TDM__CUDA_POOL_WRAPPERS(TDM__CUDA_POOL_DECL)
#undef TDM__CUDA_POOL_DECL

/* The stream-ordered pools (pool_track.h; cuda_pool.c): frees and
 * synchronizations book them again, cuDeviceSetMemPool makes a program's
 * pool current, and cache mode leaves a device whose current pool is the
 * program's (tdm__pool_program) to the driver. */
TDM_CUDA_HIDDEN extern tdm__pool_track tdm__cuda_pools;
/* The device a device pointer lies on (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
 * `otherwise` when the driver cannot say. */
TDM_CUDA_HIDDEN int tdm__cuda_pointer_device(CUdeviceptr p, int otherwise);

#endif
