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

#endif
