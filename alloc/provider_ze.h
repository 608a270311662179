/* alloc/provider_ze.h: the Level Zero provider's table of vendor functions.
 *
 * tidemark builds without the Level Zero headers: these are our own
 * minimal types, ABI-equal to <level_zero/ze_api.h> 1.x (ze_result_t is
 * an int-sized enum, handles are pointers; the structs below copy the
 * header's layout up to the fields we read, and hooks/preload/ze_*.c
 * checks each offset against the real header at compile time).
 *
 * A hook fills the table with un-hooked functions (the loader's exported
 * ones, or a driver's table slots in the shim driver) and names the
 * context and the devices the program uses; with fns == NULL the provider
 * opens libze_loader.so.1 itself, takes the first driver and makes its own
 * context.  Device ordinals are the positions in `devices`.
 */
#ifndef TDM_ALLOC_PROVIDER_ZE_H
#define TDM_ALLOC_PROVIDER_ZE_H

#include <stddef.h>
#include <stdint.h>

#include "provider.h"

/* ze_result_t values the provider interprets. */
enum {
    TDM__ZE_SUCCESS = 0,
    TDM__ZE_ERROR_OUT_OF_HOST_MEMORY = 0x70000002,
    TDM__ZE_ERROR_OUT_OF_DEVICE_MEMORY = 0x70000003,
    TDM__ZE_ERROR_UNINITIALIZED = 0x78000001,
};

/* ze_structure_type_t / zes_structure_type_t values. */
enum {
    TDM__ZE_STYPE_DEVICE_PROPERTIES = 0x3,
    TDM__ZE_STYPE_DEVICE_MEMORY_PROPERTIES = 0x7,
    TDM__ZE_STYPE_CONTEXT_DESC = 0xd,
    TDM__ZE_STYPE_DEVICE_MEM_ALLOC_DESC = 0x15,
    TDM__ZES_STYPE_MEM_STATE = 0x1e,
    TDM__ZE_STYPE_PHYSICAL_MEM_DESC = 0x20,
};

/* ze_memory_access_attribute_t: what a mapping lets the device do. */
enum { TDM__ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE = 1 };

/* ze_physical_mem_desc_t */
typedef struct tdm__ze_physical_mem_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
    size_t size; /* bytes */
} tdm__ze_physical_mem_desc;

/* ze_device_mem_alloc_desc_t */
typedef struct tdm__ze_mem_alloc_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
    uint32_t ordinal;
} tdm__ze_mem_alloc_desc;

/* ze_context_desc_t */
typedef struct tdm__ze_context_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
} tdm__ze_context_desc;

/* ze_device_properties_t, whole (the driver writes all of it). */
typedef struct tdm__ze_device_props {
    uint32_t stype;
    void *pNext;
    uint32_t type, vendorId, deviceId, flags, subdeviceId, coreClockRate;
    uint64_t maxMemAllocSize;
    uint32_t maxHardwareContexts, maxCommandQueuePriority, numThreadsPerEU,
        physicalEUSimdWidth, numEUsPerSubslice, numSubslicesPerSlice, numSlices;
    uint64_t timerResolution;
    uint32_t timestampValidBits, kernelTimestampValidBits;
    uint8_t uuid[16];
    char name[256];
} tdm__ze_device_props;

/* ze_device_memory_properties_t */
typedef struct tdm__ze_memory_props {
    uint32_t stype;
    void *pNext;
    uint32_t flags, maxClockRate, maxBusWidth;
    uint64_t totalSize; /* bytes */
    char name[256];
} tdm__ze_memory_props;

/* zes_mem_state_t */
typedef struct tdm__zes_mem_state {
    uint32_t stype;
    const void *pNext;
    uint32_t health;
    uint64_t free; /* bytes */
    uint64_t size; /* bytes */
} tdm__zes_mem_state;

#define TDM__ZE_MAX_DEVICES 64

struct tdm_ze_fns {
    /* needed */
    int (*device_get_properties)(void *device, tdm__ze_device_props *props);
    int (*device_get_memory_properties)(void *device, uint32_t *count,
                                        tdm__ze_memory_props *props);
    int (*mem_alloc_device)(void *context, const tdm__ze_mem_alloc_desc *desc,
                            size_t size, size_t alignment, void *device, void **ptr);
    int (*mem_free)(void *context, void *ptr);
    /* optional: free bytes through Sysman (else capacity less what this
     * provider holds) */
    int (*sysman_enum_memory_modules)(void *device, uint32_t *count, void **modules);
    int (*sysman_memory_get_state)(void *module, tdm__zes_mem_state *state);
    /* optional, all seven or none: virtual memory, for expandable
     * segments (without it they fall back to normal ones) */
    int (*virtual_mem_reserve)(void *context, const void *start, size_t size,
                               void **ptr);                      /* zeVirtualMemReserve */
    int (*virtual_mem_free)(void *context, const void *ptr, size_t size); /* zeVirtualMemFree */
    int (*virtual_mem_query_page_size)(void *context, void *device, size_t size,
                                       size_t *pagesize); /* zeVirtualMemQueryPageSize */
    int (*physical_mem_create)(void *context, void *device, tdm__ze_physical_mem_desc *desc,
                               void **physical);                 /* zePhysicalMemCreate */
    int (*physical_mem_destroy)(void *context, void *physical); /* zePhysicalMemDestroy */
    int (*virtual_mem_map)(void *context, const void *ptr, size_t size, void *physical,
                           size_t offset, int access);           /* zeVirtualMemMap */
    int (*virtual_mem_unmap)(void *context, const void *ptr, size_t size); /* zeVirtualMemUnmap */
    /* where to allocate */
    void *context;
    uint32_t device_count;              /* >= 1 */
    void *devices[TDM__ZE_MAX_DEVICES]; /* [device_count] */
};

#endif
