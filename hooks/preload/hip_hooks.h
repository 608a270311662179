/* hooks/preload/hip_hooks.h: what the HIP interposers of
 * libtidemark_preload.so share (hip_hooks.c: allocations, frees, virtual
 * memory, captures; hip_pool.c: stream-ordered pools and memory other
 * processes made).
 *
 * The real libamdhip64 functions are resolved once, all together, by
 * their versioned names, from the global scope or from the loaded
 * libamdhip64 object wherever it is (hip_hooks.c); a hook reaches them
 * through tdm__hip_real after resolve(), and only once they are found.  Bookkeeping helpers are always_inline so
 * that every hook is exactly one frame above the program's call, which is
 * what TDM_HOOK_SKIP tells the stack capture.
 */
#ifndef TDM_HOOKS_PRELOAD_HIP_HOOKS_H
#define TDM_HOOKS_PRELOAD_HIP_HOOKS_H

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* What ROCm 6 added is declared below, not taken from the headers (the
 * build may have ROCm 5's): a newer header's declarations are renamed out
 * of the way, so that ours never conflict with them. */
#define hipExtHostAlloc tdm__hip_header_hipExtHostAlloc
#define hipStreamGetDevice tdm__hip_header_hipStreamGetDevice
#define hipStreamBeginCaptureToGraph tdm__hip_header_hipStreamBeginCaptureToGraph
#include <hip/hip_runtime_api.h>
#undef hipExtHostAlloc
#undef hipStreamGetDevice
#undef hipStreamBeginCaptureToGraph

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "preload.h"
#include "snap_model.h"
#include "pool_track.h"
#include "vmm_track.h"

/* hipMallocHost / hipFreeHost are deprecated in the header but still
 * exported and used; programs that call them are hooked like the rest. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* ROCm 6: pinned host memory (hipHostAlloc's successor), the device of a
 * stream, and a capture into a graph the program made (dependencyData is
 * a const hipGraphEdgeData *, passed through untouched). */
hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags);
hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device);
hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph,
                                        const hipGraphNode_t *dependencies,
                                        const void *dependencyData, size_t numDependencies,
                                        hipStreamCaptureMode mode);

#define INLINE static inline __attribute__((always_inline))
#define TDM_HIP_HIDDEN __attribute__((visibility("hidden")))

/* ---- the real functions: X(name, symbol version) ------------------------- */

#define HIP_REAL_FUNCS(X)                                                      \
    X(hipMalloc, "hip_4.2") X(hipFree, "hip_4.2")                              \
    X(hipMallocAsync, "hip_5.1") X(hipFreeAsync, "hip_5.1")                    \
    X(hipMallocFromPoolAsync, "hip_5.1")                                       \
    X(hipExtMallocWithFlags, "hip_4.2") X(hipMallocManaged, "hip_4.2")         \
    X(hipHostMalloc, "hip_4.2") X(hipHostFree, "hip_4.2")                      \
    X(hipMallocHost, "hip_4.2") X(hipFreeHost, "hip_4.2")                      \
    X(hipMemCreate, "hip_5.1") X(hipMemRelease, "hip_5.1")                     \
    X(hipMemMap, "hip_5.1") X(hipMemUnmap, "hip_5.1")                          \
    X(hipMemGetAllocationPropertiesFromHandle, "hip_5.1")                      \
    X(hipMemAddressReserve, "hip_5.1") X(hipMemAddressFree, "hip_5.1")         \
    X(hipMemSetAccess, "hip_5.1") X(hipMemGetAllocationGranularity, "hip_5.1") \
    X(hipGetDevice, "hip_4.2") X(hipSetDevice, "hip_4.2")                      \
    X(hipGetDeviceCount, "hip_4.2") X(hipMemGetInfo, "hip_4.2")                \
    X(hipDeviceGetName, "hip_4.2") X(hipDeviceTotalMem, "hip_4.2")             \
    X(hipGetLastError, "hip_4.2") X(hipPeekAtLastError, "hip_4.2")

/* What cache mode orders stream frees with (events, the device's
 * synchronization) and the graph captures it must stay out of. */
#define HIP_STREAM_REAL_FUNCS(X)                                               \
    X(hipEventCreateWithFlags, "hip_4.2") X(hipEventRecord, "hip_4.2")         \
    X(hipEventQuery, "hip_4.2") X(hipEventSynchronize, "hip_4.2")              \
    X(hipEventDestroy, "hip_4.2") X(hipDeviceSynchronize, "hip_4.2")           \
    X(hipStreamIsCapturing, "hip_4.3") X(hipStreamBeginCapture, "hip_4.3")     \
    X(hipStreamEndCapture, "hip_4.3")

/* Pools and shared memory (hip_pool.c): the calls it hooks and the
 * queries it makes. */
#define HIP_SHARED_REAL_FUNCS(X)                                               \
    X(hipStreamSynchronize, "hip_4.2") X(hipMemPoolTrimTo, "hip_5.1")          \
    X(hipMemPoolDestroy, "hip_5.1") X(hipDeviceSetMemPool, "hip_5.1")          \
    X(hipDeviceGetMemPool, "hip_5.1") X(hipDeviceGetDefaultMemPool, "hip_5.1") \
    X(hipMemPoolGetAttribute, "hip_5.1") X(hipPointerGetAttribute, "hip_5.0")  \
    X(hipMemGetAddressRange, "hip_4.2") X(hipIpcOpenMemHandle, "hip_4.2")      \
    X(hipIpcCloseMemHandle, "hip_4.2") X(hipMemImportFromShareableHandle, "hip_5.1")

/* What not every libamdhip64 has: ROCm 5.2 lacks hipStreamGetDevice
 * (hipGetStreamDeviceId answers instead), ROCm 5 the ROCm 6 calls.  NULL:
 * looked up by name (hipExtHostAlloc's version node is not known). */
#define HIP_OPTIONAL_REAL_FUNCS(X)                                             \
    X(hipHostAlloc, "hip_4.2") X(hipExtHostAlloc, NULL)                        \
    X(hipStreamGetDevice, "hip_4.2") X(hipGetStreamDeviceId, "hip_4.2")        \
    X(hipStreamBeginCaptureToGraph, "hip_6.1")

struct tdm__hip_real_fns {
#define REAL_FIELD(name, ver) __typeof__(name) *name;
    HIP_REAL_FUNCS(REAL_FIELD)
    HIP_STREAM_REAL_FUNCS(REAL_FIELD)
    HIP_SHARED_REAL_FUNCS(REAL_FIELD)
    HIP_OPTIONAL_REAL_FUNCS(REAL_FIELD)
#undef REAL_FIELD
};
/* Written once, under a lock, before tdm__hip_real_ready is set: when a
 * libamdhip64 is found (hip_hooks.c).  Read only once it is set. */
TDM_HIP_HIDDEN extern struct tdm__hip_real_fns tdm__hip_real;
TDM_HIP_HIDDEN extern _Atomic int tdm__hip_real_ready;
TDM_HIP_HIDDEN void tdm__hip_resolve_slow(void);

INLINE void resolve(void)
{
    if (__builtin_expect(!atomic_load_explicit(&tdm__hip_real_ready, memory_order_acquire), 0))
        tdm__hip_resolve_slow();
}

/* The call a hook makes when it has nothing to book, or when the real
 * function is missing (no libamdhip64 in the process: say so the HIP way). */
#define CALL_REAL(name, ...)                                                   \
    (atomic_load_explicit(&tdm__hip_real_ready, memory_order_acquire) &&       \
             tdm__hip_real.name                                                \
         ? tdm__hip_real.name(__VA_ARGS__)                                     \
         : hipErrorNotInitialized)

/* Hooks start with this: resolve, then pass straight through when
 * tidemark is off or this thread is already inside it. */
#define HOOK_PROLOGUE(name, ...)                                               \
    resolve();                                                                 \
    TDM_HOOK_PROLOGUE(mode, atomic_load_explicit(&tdm__hip_real_ready, memory_order_acquire), \
                      CALL_REAL(name, __VA_ARGS__))

/* The thread's current device (0 when HIP cannot say), described to the
 * snapshot on first use (hip_hooks.c). */
TDM_HIP_HIDDEN int tdm__hip_current_device(void);
/* Describes `device` to the snapshot once (hip_hooks.c). */
TDM_HIP_HIDDEN void tdm__hip_describe_once(int device);

/* ---- stream-ordered pools (hip_pool.c) ------------------------------------- */

/* Reads the pool's reserved and used bytes; 0 when HIP cannot. */
TDM_HIP_HIDDEN int tdm__hip_pool_query(hipMemPool_t pool, uint64_t *reserved, uint64_t *used);
/* The stream-ordered pools (pool_track.h; hip_pool.c): frees and
 * synchronizations book them again, hipDeviceSetMemPool makes a program's
 * pool current, and cache mode leaves a device whose current pool is the
 * program's (tdm__pool_program) to HIP. */
TDM_HIP_HIDDEN extern tdm__pool_track tdm__hip_pools;
/* The device a pointer lies on (HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
 * `otherwise` when HIP cannot say. */
TDM_HIP_HIDDEN int tdm__hip_pointer_device(const void *p, int otherwise);

/* ---- virtual-memory handles (hip_pool.c) ----------------------------------- */

/* The physical allocation handles (device, origin: TDM_HIP_OWN when made
 * here by hipMemCreate, else the tdm_import_kind they map as) and their
 * mappings. */
#define TDM_HIP_OWN TDM_VMM_OWN
TDM_HIP_HIDDEN extern tdm__vmm_track tdm__hip_vmm;

#endif
