/* tests/fakes/hip/fake_hip_internal.h: what the files of the fake
 * libamdhip64.so.5 share (fake_hip.c: devices, pools, allocation, the
 * allocation table, counters; fake_hip_vmm.c: virtual memory;
 * fake_hip_stream.c: streams, events, graph captures; fake_hip_pool.c:
 * stream-ordered pools, IPC and shareable handles, pointer queries).  The
 * functions and variables below are not static, yet not exported: the
 * version script (fake_hip.map) keeps everything it does not name local. */
#ifndef TDM_FAKE_HIP_INTERNAL_H
#define TDM_FAKE_HIP_INTERNAL_H

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define _GNU_SOURCE
/* What ROCm 6 added is declared here, not by the (5.2) headers: a newer
 * header's own declarations are renamed out of the way. */
#define hipExtHostAlloc fake_hip_header_hipExtHostAlloc
#define hipStreamGetDevice fake_hip_header_hipStreamGetDevice
#define hipStreamBeginCaptureToGraph fake_hip_header_hipStreamBeginCaptureToGraph
#include <hip/hip_runtime_api.h>
#undef hipExtHostAlloc
#undef hipStreamGetDevice
#undef hipStreamBeginCaptureToGraph
#ifndef FAKE_HIP_MAJOR
#define FAKE_HIP_MAJOR 5
#endif
hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags);
hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device);
/* dependencyData: const hipGraphEdgeData * (ROCm 6.1), never read here. */
hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph,
                                        const hipGraphNode_t *dependencies,
                                        const void *dependencyData, size_t numDependencies,
                                        hipStreamCaptureMode mode);

#include "fake_hip.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_pool.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8

/* The opaque handle types of the header, given a body here. */
struct ihipStream_t {
    int device;
    unsigned long long queued, done; /* work items (fake_hip_stream.c) */
    int capturing;                   /* a capture is underway on it */
    int invalidated;                 /* ... and a forbidden call broke it */
    hipStreamCaptureMode mode;
};
/* reserved = used + idle: memory freed into the pool stays reserved
 * (idle) until a synchronization releases what exceeds the threshold, or
 * hipMemPoolTrimTo.  Counters under pool_mu (fake_hip_pool.c). */
struct ihipMemPoolHandle_t {
    int device;
    int made;              /* by hipMemPoolCreate (vs a default pool) */
    fake_pool_bytes bytes; /* tests/fakes/core; threshold:
                              hipMemPoolAttrReleaseThreshold */
};
struct ihipMemGenericAllocationHandle {
    size_t size; /* bytes */
    int device;
    int maps;     /* live mappings of this handle */
    int released; /* hipMemRelease seen while still mapped */
    int imported; /* made by hipMemImportFromShareableHandle: not counted */
};

/* ---- call counters and injected failures (fake_hip.c) ---- */

#define FAKE_FUNCS(X)                                                          \
    X(hipGetDeviceCount) X(hipGetDevice) X(hipSetDevice) X(hipDeviceGetName)   \
    X(hipDeviceTotalMem) X(hipMemGetInfo) X(hipMalloc) X(hipFree)              \
    X(hipMallocAsync) X(hipFreeAsync) X(hipMallocFromPoolAsync)                \
    X(hipExtMallocWithFlags) X(hipMallocManaged) X(hipHostMalloc)              \
    X(hipHostFree) X(hipMallocHost) X(hipFreeHost) X(hipMemCreate)             \
    X(hipMemRelease) X(hipMemMap) X(hipMemUnmap) X(hipMemAddressReserve)       \
    X(hipMemAddressFree) X(hipMemGetAllocationPropertiesFromHandle)            \
    X(hipStreamCreate) X(hipStreamDestroy) X(hipStreamSynchronize)             \
    X(hipDeviceSynchronize) X(hipMemPoolCreate) X(hipMemPoolDestroy)           \
    X(hipDeviceGetDefaultMemPool) X(hipInit) X(hipGetLastError)                \
    X(hipPeekAtLastError) X(hipEventCreateWithFlags) X(hipEventRecord)         \
    X(hipEventQuery) X(hipEventSynchronize) X(hipEventDestroy)                 \
    X(hipStreamIsCapturing) X(hipStreamBeginCapture) X(hipStreamEndCapture)    \
    X(hipDeviceGetMemPool) X(hipDeviceSetMemPool) X(hipMemPoolGetAttribute)    \
    X(hipMemPoolSetAttribute) X(hipMemPoolTrimTo) X(hipIpcGetMemHandle)        \
    X(hipIpcOpenMemHandle) X(hipIpcCloseMemHandle) X(hipMemGetAddressRange)    \
    X(hipPointerGetAttribute) X(hipMemExportToShareableHandle)                 \
    X(hipMemImportFromShareableHandle) X(hipMemSetAccess)                      \
    X(hipMemGetAllocationGranularity) X(hipHostAlloc) X(hipExtHostAlloc)      \
    X(hipGetStreamDeviceId) X(hipStreamGetDevice)                              \
    X(hipStreamBeginCaptureToGraph)

enum {
#define FAKE_ENUM(n) F_##n,
    FAKE_FUNCS(FAKE_ENUM)
#undef FAKE_ENUM
    F_COUNT
};

/* Counts a call of entry point f; returns the injected error, or 0. */
int enter(int f);
/* Records e as this thread's last error (unless hipSuccess); returns e. */
hipError_t fake_last(hipError_t e);
/* hipSuccess, or the error HIP gives for `device`. */
hipError_t check_device(int device);
/* This thread's current device (hipSetDevice). */
extern __thread int cur_device;
/* FAKE_HIP_NO_VMM=1: devices without virtual memory management. */
extern int fake_no_vmm;

/* ---- streams (fake_hip_stream.c) ---- */

/* hipSuccess, or hipErrorStreamCaptureUnsupported (counted as a
 * violation, every capture invalidated) while a global or thread-local
 * capture forbids "potentially unsafe" calls. */
hipError_t fake_capture_check(void);
/* Completes the work queued on every stream (the device went idle). */
void fake_device_idle(void);
/* The device of stream handle `h` (0 and hipStreamPerThread: the calling
 * thread's current device's). */
int fake_stream_device(hipStream_t h);

/* ---- pools (fake_hip_pool.c) ---- */

/* A synchronization: every pool gives back what it holds idle beyond its
 * release threshold. */
void fake_pools_synchronize(void);
/* hipFree / hipFreeAsync of a pool's allocation: back to its pool (1), or
 * 0 when p is no pool allocation. */
int fake_pool_give(void *p);

/* ---- the allocation table (fake_hip.c) ---- */

/* K_PHYS: the body of a hipMemCreate handle; counts as device memory.
 * K_POOLED: a pool's allocation (the pool's reserve counts, not it);
 * K_IPC: an opened IPC handle's mapping; K_PHYS_IMPORT: an imported
 * handle (another allocation's memory: neither counts again). */
enum kind { K_DEVICE = 1, K_HOST = 2, K_PHYS = 3, K_POOLED = 4, K_IPC = 5, K_PHYS_IMPORT = 6 };
/* Guards the reservations and mappings (fake_hip_vmm.c). */
extern pthread_mutex_t mu;
/* The fakes' shared bookkeeping (tests/fakes/core), the HIP way.
 * Books / forgets an allocation of `kind`; untrack gives its size and
 * returns 0 if p is not one of that kind.  The _in forms keep the pool an
 * allocation came from. */
hipError_t track(void *p, size_t size, int device, int kind);
int untrack(void *p, int kind, size_t *size);
hipError_t track_in(void *p, size_t size, int device, int kind, void *pool);
int untrack_in(void *p, int kind, size_t *size, void **pool);
/* What the table knows of the allocation at exactly p; 0 when none. */
int lookup(const void *p, int *kind, size_t *size, int *device);
/* Moves `device`'s used bytes (a pool grew or gave back); growth past the
 * capacity is hipErrorOutOfMemory and changes nothing. */
hipError_t used_change(int device, long long bytes);
/* The registry itself (tests/fakes/core), for the pools' bytes. */
extern fake_memory fake_hip_memory;
/* Freed blocks kept for reuse by size (fake_hip.c). */
void *block_get(size_t bytes);
void block_put(void *p, size_t bytes);
size_t rounded(size_t size);

/* Allocation entry points share this: injected error, device check. */
#define ALLOC_PROLOGUE(f)                                                      \
    int e = enter(f);                                                          \
    if (e)                                                                     \
        return fake_last((hipError_t)e);                                       \
    hipError_t r = check_device(cur_device);                                   \
    if (r != hipSuccess)                                                       \
        return fake_last(r)

#endif
