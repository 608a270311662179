/* tests/fakes/ze/fake_ze_internal.h: what the files of the fake Level Zero
 * driver share (fake_ze_driver.c: devices, allocations, the allocation
 * table, counters; fake_ze_vmm.c: virtual and physical memory;
 * fake_ze_ddi_handles.c: the DDI handles extension).  Nothing here is
 * exported: the build hides what EXPORT does not name. */
#ifndef TDM_FAKE_ZE_INTERNAL_H
#define TDM_FAKE_ZE_INTERNAL_H

#include <level_zero/ze_api.h>
#include <stddef.h>

#include "fake_ze_ddi.h"

/* The head each handle of the fake starts with: its own dispatch tables
 * (fake_ze_ddi.h). */
fake_ze_handle_head fake_ze_head(void);

/* ---- call counters and injected failures (fake_ze_driver.c) ---- */

#define FAKE_FUNCS(X)                                                          \
    X(zeInit) X(zeDriverGet) X(zeDeviceGet) X(zeDeviceGetProperties)          \
    X(zeDeviceGetMemoryProperties) X(zeContextCreate) X(zeContextDestroy)      \
    X(zeMemAllocDevice) X(zeMemAllocHost) X(zeMemAllocShared) X(zeMemFree)     \
    X(zeMemFreeExt) X(zeMemGetAllocProperties) X(zeVirtualMemReserve)         \
    X(zeVirtualMemFree) X(zeVirtualMemQueryPageSize) X(zeVirtualMemMap)        \
    X(zeVirtualMemUnmap) X(zePhysicalMemCreate) X(zePhysicalMemDestroy)        \
    X(zesDeviceEnumMemoryModules) X(zesMemoryGetState)                        \
    X(zeCommandQueueCreate) X(zeCommandQueueDestroy)                          \
    X(zeCommandQueueSynchronize) X(zeCommandListCreateImmediate)              \
    X(zeCommandListDestroy)

enum {
#define FAKE_ENUM(n) F_##n,
    FAKE_FUNCS(FAKE_ENUM)
#undef FAKE_ENUM
    F_COUNT
};
/* Counts a call of entry f; returns the injected error, or success. */
ze_result_t fake_ze_enter(int f);
#define ENTER(f)                                                               \
    do {                                                                       \
        ze_result_t e_ = fake_ze_enter(f);                                     \
        if (e_ != ZE_RESULT_SUCCESS)                                           \
            return e_;                                                         \
    } while (0)

/* The index of device handle d; -1 for a handle of no device. */
int fake_ze_device_index(ze_device_handle_t d);
/* FAKE_ZE_NO_VMM=1: devices without virtual memory support. */
extern int fake_ze_no_vmm;

/* ---- the allocation table (fake_ze_driver.c) ---- */

/* K_PHYS: the body of a physical memory object; counts as device memory. */
enum kind { K_DEVICE = 1, K_HOST, K_SHARED, K_PHYS };
/* Books physical memory object h of `size` bytes on `device`;
 * ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY past the capacity. */
ze_result_t fake_ze_track_phys(void *h, size_t size, int device);
/* Forgets it; 0 when h is no physical memory object. */
int fake_ze_untrack_phys(void *h);

/* ---- virtual and physical memory (fake_ze_vmm.c), for the DDI getters ---- */

ze_result_t ZE_APICALL fake_ze_virtual_mem_reserve(ze_context_handle_t c, const void *pStart,
                                                   size_t size, void **pptr);
ze_result_t ZE_APICALL fake_ze_virtual_mem_free(ze_context_handle_t c, const void *ptr,
                                                size_t size);
ze_result_t ZE_APICALL fake_ze_virtual_mem_query_page_size(ze_context_handle_t c,
                                                           ze_device_handle_t dev, size_t size,
                                                           size_t *pagesize);
ze_result_t ZE_APICALL fake_ze_virtual_mem_map(ze_context_handle_t c, const void *ptr,
                                               size_t size, ze_physical_mem_handle_t phys,
                                               size_t offset, ze_memory_access_attribute_t access);
ze_result_t ZE_APICALL fake_ze_virtual_mem_unmap(ze_context_handle_t c, const void *ptr,
                                                 size_t size);
ze_result_t ZE_APICALL fake_ze_physical_mem_create(ze_context_handle_t c, ze_device_handle_t dev,
                                                   ze_physical_mem_desc_t *desc,
                                                   ze_physical_mem_handle_t *phPhysicalMemory);
ze_result_t ZE_APICALL fake_ze_physical_mem_destroy(ze_context_handle_t c,
                                                    ze_physical_mem_handle_t h);

/* The Driver table's version and property queries, with the DDI handles
 * extension. */
ze_result_t ZE_APICALL fake_ze_driver_get_api_version(ze_driver_handle_t h,
                                                      ze_api_version_t *version);
ze_result_t ZE_APICALL fake_ze_driver_get_properties(ze_driver_handle_t h,
                                                     ze_driver_properties_t *props);
ze_result_t ZE_APICALL fake_ze_driver_get_extension_properties(
    ze_driver_handle_t h, uint32_t *pCount, ze_driver_extension_properties_t *props);

#endif
