/* tests/fakes/hip/fake_hip_internal.h: what the files of the fake
 * libamdhip64.so.5 share (fake_hip.c: devices, pools, allocation, the
 * allocation table, counters; fake_hip_vmm.c: virtual memory;
 * fake_hip_stream.c: streams, events, graph captures).  The
 * functions and variables below are not static, yet not exported: the
 * version script (fake_hip.map) keeps everything it does not name local. */
#ifndef TDM_FAKE_HIP_INTERNAL_H
#define TDM_FAKE_HIP_INTERNAL_H

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

#include "fake_hip.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
struct ihipMemPoolHandle_t {
    int device;
};
struct ihipMemGenericAllocationHandle {
    size_t size; /* bytes */
    int device;
    int maps;     /* live mappings of this handle */
    int released; /* hipMemRelease seen while still mapped */
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
    X(hipStreamIsCapturing) X(hipStreamBeginCapture) X(hipStreamEndCapture)

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

/* ---- streams (fake_hip_stream.c) ---- */

/* hipSuccess, or hipErrorStreamCaptureUnsupported (counted as a
 * violation, every capture invalidated) while a global or thread-local
 * capture forbids "potentially unsafe" calls. */
hipError_t fake_capture_check(void);
/* Completes the work queued on every stream (the device went idle). */
void fake_device_idle(void);

/* ---- the allocation table (fake_hip.c) ---- */

/* K_PHYS: the body of a hipMemCreate handle; counts as device memory. */
enum kind { K_DEVICE = 1, K_HOST = 2, K_PHYS = 3 };
/* Guards the table, the mappings and the byte counts. */
extern pthread_mutex_t mu;
/* Books / forgets an allocation of `kind`; untrack gives its size and
 * returns 0 if p is not one of that kind. */
hipError_t track(void *p, size_t size, int device, int kind);
int untrack(void *p, int kind, size_t *size);

/* Allocation entry points share this: injected error, device check. */
#define ALLOC_PROLOGUE(f)                                                      \
    int e = enter(f);                                                          \
    if (e)                                                                     \
        return fake_last((hipError_t)e);                                       \
    hipError_t r = check_device(cur_device);                                   \
    if (r != hipSuccess)                                                       \
        return fake_last(r)

#endif
