/* alloc/provider_cuda.h: the CUDA provider's table of driver functions.
 *
 * tidemark builds without the CUDA headers: these are our own minimal
 * types, ABI-equal to <cuda.h> on 64-bit Linux (CUresult is an int-sized
 * enum, CUdevice an int, CUcontext a pointer, CUdeviceptr an unsigned long
 * long).  A hook that has the real headers fills the table with the
 * un-hooked driver functions it resolved (hooks/preload/cuda_*.c checks the
 * types against the headers); otherwise tdm__provider_cuda_create(NULL,
 * ...) opens libcuda.so.1 itself.  Every field is required but those
 * marked optional.
 */
#ifndef TDM_ALLOC_PROVIDER_CUDA_H
#define TDM_ALLOC_PROVIDER_CUDA_H

#include <stddef.h>

#include "provider.h"

/* CUresult values the provider interprets. */
enum {
    TDM__CU_SUCCESS = 0,
    TDM__CU_ERROR_OUT_OF_MEMORY = 2, /* CUDA_ERROR_OUT_OF_MEMORY */
    TDM__CU_ERROR_NO_DEVICE = 100,   /* CUDA_ERROR_NO_DEVICE */
};

typedef unsigned long long tdm__cu_deviceptr; /* CUdeviceptr */
typedef void *tdm__cu_context;                /* CUcontext */
typedef void *tdm__cu_event;                  /* CUevent */
typedef void *tdm__cu_stream;                 /* CUstream */
typedef unsigned long long tdm__cu_mem_handle; /* CUmemGenericAllocationHandle */

/* CUmemLocation, CUmemAllocationProp and CUmemAccessDesc, with the only
 * values the provider sets. */
enum {
    TDM__CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    TDM__CU_MEM_LOCATION_TYPE_DEVICE = 1,
    TDM__CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    TDM__CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
};
typedef struct tdm__cu_mem_location {
    int type;
    int id;
} tdm__cu_mem_location;
typedef struct tdm__cu_mem_prop {
    int type;
    int requested_handle_types;
    tdm__cu_mem_location location;
    void *win32_handle_meta_data;
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
} tdm__cu_mem_prop;
typedef struct tdm__cu_access_desc {
    tdm__cu_mem_location location;
    int flags;
} tdm__cu_access_desc;

struct tdm_cuda_fns {
    int (*init)(unsigned int flags);                          /* cuInit */
    int (*device_get_count)(int *count);                      /* cuDeviceGetCount */
    int (*device_get)(int *device, int ordinal);              /* cuDeviceGet */
    int (*device_get_name)(char *name, int len, int device);  /* cuDeviceGetName */
    int (*device_total_mem)(size_t *bytes, int device);       /* cuDeviceTotalMem_v2 */
    int (*primary_ctx_retain)(tdm__cu_context *ctx, int device); /* cuDevicePrimaryCtxRetain */
    int (*primary_ctx_release)(int device);                   /* cuDevicePrimaryCtxRelease_v2 */
    int (*ctx_get_current)(tdm__cu_context *ctx);             /* cuCtxGetCurrent */
    int (*ctx_push)(tdm__cu_context ctx);                     /* cuCtxPushCurrent_v2 */
    int (*ctx_pop)(tdm__cu_context *ctx);                     /* cuCtxPopCurrent_v2 */
    int (*mem_alloc)(tdm__cu_deviceptr *dptr, size_t size);   /* cuMemAlloc_v2 */
    int (*mem_free)(tdm__cu_deviceptr dptr);                  /* cuMemFree_v2 */
    int (*mem_get_info)(size_t *free_bytes, size_t *total);   /* cuMemGetInfo_v2 */
    /* Optional: without all six, a free on another stream is not ordered
     * after that stream's work (no stream markers). */
    int (*event_create)(tdm__cu_event *ev, unsigned int flags);   /* cuEventCreate */
    int (*event_record)(tdm__cu_event ev, tdm__cu_stream s);      /* cuEventRecord */
    int (*event_query)(tdm__cu_event ev);                         /* cuEventQuery */
    int (*event_synchronize)(tdm__cu_event ev);                   /* cuEventSynchronize */
    int (*event_destroy)(tdm__cu_event ev);                       /* cuEventDestroy_v2 */
    int (*ctx_synchronize)(void);                                 /* cuCtxSynchronize */
    /* Optional: whether a stream is being captured into a graph. */
    int (*stream_is_capturing)(tdm__cu_stream s, int *status);    /* cuStreamIsCapturing */
    /* Optional, given by hooks that see cudaStreamBeginCapture and
     * cudaStreamEndCapture: nonzero while a capture is underway anywhere
     * in the process. */
    int (*captures_underway)(void);
    /* Optional, all eight or none: virtual memory management, for
     * expandable segments (without it they fall back to normal ones). */
    int (*mem_address_reserve)(tdm__cu_deviceptr *ptr, size_t size, size_t align,
                               tdm__cu_deviceptr addr, unsigned long long flags);
    int (*mem_address_free)(tdm__cu_deviceptr ptr, size_t size);     /* cuMemAddressFree */
    int (*mem_create)(tdm__cu_mem_handle *handle, size_t size, const tdm__cu_mem_prop *prop,
                      unsigned long long flags);                     /* cuMemCreate */
    int (*mem_release)(tdm__cu_mem_handle handle);                   /* cuMemRelease */
    int (*mem_map)(tdm__cu_deviceptr ptr, size_t size, size_t offset, tdm__cu_mem_handle handle,
                   unsigned long long flags);                        /* cuMemMap */
    int (*mem_unmap)(tdm__cu_deviceptr ptr, size_t size);            /* cuMemUnmap */
    int (*mem_set_access)(tdm__cu_deviceptr ptr, size_t size, const tdm__cu_access_desc *desc,
                          size_t count);                             /* cuMemSetAccess */
    int (*mem_get_allocation_granularity)(size_t *granularity, const tdm__cu_mem_prop *prop,
                                          int option); /* cuMemGetAllocationGranularity */
};

/* The driver's names of the fields above, in field order (for resolving
 * them by name: the provider itself, and hooks). */
#define TDM__CUDA_FNS_NAMES                                                    \
    "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",            \
        "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain",                     \
        "cuDevicePrimaryCtxRelease_v2", "cuCtxGetCurrent",                     \
        "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuMemAlloc_v2",          \
        "cuMemFree_v2", "cuMemGetInfo_v2"
/* And of the optional ones, from event_create to stream_is_capturing. */
#define TDM__CUDA_FNS_OPTIONAL_NAMES                                           \
    "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",    \
        "cuEventDestroy_v2", "cuCtxSynchronize", "cuStreamIsCapturing"
/* And of the virtual memory ones, from mem_address_reserve on. */
#define TDM__CUDA_FNS_VMM_NAMES                                                \
    "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",  \
        "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAllocationGranularity"

#endif
