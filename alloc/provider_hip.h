/* alloc/provider_hip.h: the HIP provider's table of vendor functions.
 *
 * tidemark builds without the HIP headers: these are our own minimal
 * types, ABI-equal to the ones in <hip/hip_runtime_api.h> (hipError_t is
 * an int-sized enum, hipDevice_t an int).  A hook that has the real
 * headers fills the table with the un-hooked functions it resolved;
 * otherwise tdm__provider_hip_create(NULL, ...) opens libamdhip64 itself.
 * Every field is required but those marked optional.
 */
#ifndef TDM_ALLOC_PROVIDER_HIP_H
#define TDM_ALLOC_PROVIDER_HIP_H

#include <stddef.h>

#include "provider.h"

/* hipError_t values the provider interprets. */
enum {
    TDM__HIP_SUCCESS = 0,
    TDM__HIP_ERROR_OUT_OF_MEMORY = 2, /* hipErrorOutOfMemory */
    TDM__HIP_ERROR_NO_DEVICE = 100,   /* hipErrorNoDevice */
    TDM__HIP_ERROR_NOT_READY = 600,   /* hipErrorNotReady */
};

typedef void *tdm__hip_event;  /* hipEvent_t */
typedef void *tdm__hip_stream; /* hipStream_t */

struct tdm_hip_fns {
    int (*get_device_count)(int *count);                  /* hipGetDeviceCount */
    int (*get_device)(int *device);                       /* hipGetDevice */
    int (*set_device)(int device);                        /* hipSetDevice */
    int (*malloc)(void **ptr, size_t size);               /* hipMalloc */
    int (*free)(void *ptr);                               /* hipFree */
    int (*mem_get_info)(size_t *free_bytes, size_t *total_bytes); /* hipMemGetInfo */
    int (*device_get_name)(char *name, int len, int device); /* hipDeviceGetName */
    int (*device_total_mem)(size_t *bytes, int device);   /* hipDeviceTotalMem */
    /* Optional: without all six, a free on another stream is not ordered
     * after that stream's work (no stream markers). */
    int (*event_create)(tdm__hip_event *ev, unsigned flags); /* hipEventCreateWithFlags */
    int (*event_record)(tdm__hip_event ev, tdm__hip_stream s); /* hipEventRecord */
    int (*event_query)(tdm__hip_event ev);                /* hipEventQuery */
    int (*event_synchronize)(tdm__hip_event ev);          /* hipEventSynchronize */
    int (*event_destroy)(tdm__hip_event ev);              /* hipEventDestroy */
    int (*device_synchronize)(void);                      /* hipDeviceSynchronize */
    /* Optional: whether a stream is being captured into a graph
     * (hipStreamIsCapturing; `status` is a hipStreamCaptureStatus). */
    int (*stream_is_capturing)(tdm__hip_stream s, int *status);
    /* Optional, given by hooks that see hipStreamBeginCapture and
     * hipStreamEndCapture: nonzero while a capture is underway anywhere
     * in the process. */
    int (*captures_underway)(void);
    /* Optional: hipPeekAtLastError / hipGetLastError, so that an event
     * query's hipErrorNotReady (which HIP keeps as the thread's last
     * error) does not reach the program's hipGetLastError. */
    int (*peek_last_error)(void);
    int (*get_last_error)(void);
};

#endif
