/* alloc/provider.h: where device memory comes from.
 *
 * A provider is a small table of functions over one kind of device: the
 * built-in sim device, or a vendor runtime resolved at run time.  The
 * allocator above never calls a vendor function directly.
 *
 * Providers are thread-safe; each keeps its own lock where it needs one.
 */
#ifndef TDM_ALLOC_PROVIDER_H
#define TDM_ALLOC_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

typedef struct tdm_provider tdm_provider;

struct tdm_provider {
    const char *vendor; /* "sim", "cuda", "hip", "ze" */
    int device_count;
    /* *out = NULL and TDM_OUT_OF_MEMORY when the device is full. */
    tdm_status (*alloc)(tdm_provider *p, int device, size_t size,
                        tdm_stream stream, void **out);
    tdm_status (*free)(tdm_provider *p, int device, void *ptr, size_t size);
    tdm_status (*mem_info)(tdm_provider *p, int device, size_t *free_bytes,
                           size_t *total_bytes);
    /* Writes a NUL-terminated device name into buf[0..len). */
    void (*device_name)(tdm_provider *p, int device, char *buf, size_t len);
    void (*destroy)(tdm_provider *p);
    void *impl;
};

typedef struct tdm_sim_config {
    int device_count;         /* >= 1 */
    uint64_t capacity;        /* bytes per device */
    int host_accessible;      /* nonzero: memory is readable and writable */
} tdm_sim_config;

/* The sim device: each device owns a reserved address range of its
 * capacity (PROT_NONE unless host_accessible), hands out 512-byte aligned
 * ranges from it and fails with TDM_OUT_OF_MEMORY past its capacity. */
tdm_status tdm__provider_sim_create(const tdm_sim_config *cfg,
                                    tdm_provider **out);

/* ---- vendor providers (alloc/provider_cuda.c, provider_hip.c, provider_ze.c)
 * Each calls the vendor's real functions through a table resolved once:
 * by dlopen/dlsym of the vendor library when `fns` is NULL, or from the
 * table the caller gives (hooks pass the un-hooked functions they resolved
 * themselves).  No vendor header is needed to build them; a vendor that is
 * absent gives TDM_NOT_AVAILABLE, and vendor errors map to tdm_status
 * (TDM_OUT_OF_MEMORY for the vendor's out-of-memory codes,
 * TDM_VENDOR_ERROR otherwise) with the vendor code kept in
 * tdm__provider_last_vendor_error() for the hook to hand back unchanged. */
typedef struct tdm_cuda_fns tdm_cuda_fns; /* provider_cuda.h */
typedef struct tdm_hip_fns tdm_hip_fns;   /* provider_hip.h */
typedef struct tdm_ze_fns tdm_ze_fns;     /* provider_ze.h */
/* TDM_API: exported from libtidemark.so for libtidemark_preload.so. */
TDM_API tdm_status tdm__provider_cuda_create(const tdm_cuda_fns *fns,
                                             tdm_provider **out);
TDM_API tdm_status tdm__provider_hip_create(const tdm_hip_fns *fns,
                                            tdm_provider **out);
TDM_API tdm_status tdm__provider_ze_create(const tdm_ze_fns *fns,
                                           tdm_provider **out);
/* The vendor's own code of this thread's last failed provider call. */
TDM_API int tdm__provider_last_vendor_error(void);
/* Vendor providers note that code here (alloc/provider_vendor.c). */
void tdm__provider_set_vendor_error(int code);

#endif
