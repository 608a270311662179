/* alloc/provider_hip.h: the HIP provider's table of vendor functions.
 *
 * tidemark builds without the HIP headers: these are our own minimal
 * types, ABI-equal to the ones in <hip/hip_runtime_api.h> (hipError_t is
 * an int-sized enum, hipDevice_t an int).  A hook that has the real
 * headers fills the table with the un-hooked functions it resolved;
 * otherwise tdm__provider_hip_create(NULL, ...) opens libamdhip64 itself.
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
};

struct tdm_hip_fns {
    int (*get_device_count)(int *count);                  /* hipGetDeviceCount */
    int (*get_device)(int *device);                       /* hipGetDevice */
    int (*set_device)(int device);                        /* hipSetDevice */
    int (*malloc)(void **ptr, size_t size);               /* hipMalloc */
    int (*free)(void *ptr);                               /* hipFree */
    int (*mem_get_info)(size_t *free_bytes, size_t *total_bytes); /* hipMemGetInfo */
    int (*device_get_name)(char *name, int len, int device); /* hipDeviceGetName */
    int (*device_total_mem)(size_t *bytes, int device);   /* hipDeviceTotalMem */
};

#endif
