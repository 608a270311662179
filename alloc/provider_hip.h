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

typedef void *tdm__hip_event;      /* hipEvent_t */
typedef void *tdm__hip_stream;     /* hipStream_t */
typedef void *tdm__hip_mem_handle; /* hipMemGenericAllocationHandle_t */

/* hipMemLocation, hipMemAllocationProp and hipMemAccessDesc in the layout
 * of the ROCm 5 headers (hooks/preload/hip_hooks.c checks it against the
 * header it is built with), with the only values the provider sets. */
enum {
    TDM__HIP_MEM_ALLOCATION_TYPE_PINNED = 1,
    TDM__HIP_MEM_LOCATION_TYPE_DEVICE = 1,
    TDM__HIP_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    TDM__HIP_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
};
typedef struct tdm__hip_mem_location {
    int type;
    int id;
} tdm__hip_mem_location;
typedef struct tdm__hip_mem_prop {
    unsigned char compression_type;
    tdm__hip_mem_location location;
    int requested_handle_type;
    int type;
    unsigned short usage;
    void *win32_handle_meta_data;
} tdm__hip_mem_prop;
typedef struct tdm__hip_access_desc {
    tdm__hip_mem_location location;
    int flags;
} tdm__hip_access_desc;

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
    /* Optional, all eight or none: virtual memory management, for
     * expandable segments (without it they fall back to normal ones). */
    int (*mem_address_reserve)(void **ptr, size_t size, size_t align, void *addr,
                               unsigned long long flags);          /* hipMemAddressReserve */
    int (*mem_address_free)(void *ptr, size_t size);               /* hipMemAddressFree */
    int (*mem_create)(tdm__hip_mem_handle *handle, size_t size, const tdm__hip_mem_prop *prop,
                      unsigned long long flags);                   /* hipMemCreate */
    int (*mem_release)(tdm__hip_mem_handle handle);                /* hipMemRelease */
    int (*mem_map)(void *ptr, size_t size, size_t offset, tdm__hip_mem_handle handle,
                   unsigned long long flags);                      /* hipMemMap */
    int (*mem_unmap)(void *ptr, size_t size);                      /* hipMemUnmap */
    int (*mem_set_access)(void *ptr, size_t size, const tdm__hip_access_desc *desc,
                          size_t count);                           /* hipMemSetAccess */
    int (*mem_get_allocation_granularity)(size_t *granularity, const tdm__hip_mem_prop *prop,
                                          int option); /* hipMemGetAllocationGranularity */
};

/* The library's names of the virtual memory functions, in field order
 * from mem_address_reserve on (for resolving them by name). */
#define TDM__HIP_FNS_VMM_NAMES                                                 \
    "hipMemAddressReserve", "hipMemAddressFree", "hipMemCreate", "hipMemRelease", \
        "hipMemMap", "hipMemUnmap", "hipMemSetAccess", "hipMemGetAllocationGranularity"

#endif
