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
#include "vendor.h"

typedef struct tdm_provider tdm_provider;

/* What a provider over a device with asynchronous streams (CUDA, HIP)
 * offers the caching allocator so that a block freed on a stream is
 * handed out again only after that stream's queued work (docs/allocator.md,
 * "Streams").  Every op takes the provider's `streams_ctx`; the device is
 * an ordinal of the provider.  A marker is the vendor's event. */
typedef struct tdm_stream_ops {
    /* Records a marker on `stream` after the work queued there so far;
     * makes one when *marker is NULL (else reuses it).  Never blocks. */
    tdm_status (*marker_record)(void *ctx, int device, tdm_stream stream,
                                void **marker);
    /* 1 once the work before the marker has completed (or the vendor
     * cannot tell any more), 0 while it is queued.  Never blocks. */
    int (*marker_done)(void *ctx, int device, void *marker);
    /* Blocks until the marker is done. */
    void (*marker_wait)(void *ctx, int device, void *marker);
    void (*marker_destroy)(void *ctx, int device, void *marker);
    /* Nonzero while work is being captured into a graph, on `stream` or
     * anywhere in the process as far as the provider knows: then device
     * memory must not be freed and markers not recorded, queried or
     * waited on (the vendor forbids it, or the graph would use memory
     * given away). */
    int (*capturing)(void *ctx, int device, tdm_stream stream);
    /* Blocks until all work queued on the device has completed. */
    void (*device_sync)(void *ctx, int device);
} tdm_stream_ops;

/* Virtual memory management, for expandable segments (docs/allocator.md,
 * "Expandable segments"): an address range is reserved once, then
 * physical memory is created in pages and mapped into it, and unmapped
 * again, as the cache grows and shrinks.  Every op takes the provider
 * itself (as alloc does); sizes and addresses are multiples of the
 * granularity.  A provider without them leaves `vmm` NULL. */
typedef struct tdm_vmm_ops {
    /* The granularity of mappings on `device` (the vendor's minimum);
     * TDM_NOT_AVAILABLE when the device has no virtual memory management. */
    tdm_status (*granularity)(tdm_provider *p, int device, size_t *bytes);
    /* Reserves `size` bytes of the device's address space, nothing
     * behind them yet. */
    tdm_status (*reserve)(tdm_provider *p, int device, size_t size, void **base);
    tdm_status (*free_range)(tdm_provider *p, int device, void *base, size_t size);
    /* Physical memory of `size` bytes: TDM_OUT_OF_MEMORY when the device
     * has not that much left (mapped bytes count as used). */
    tdm_status (*create)(tdm_provider *p, int device, size_t size, uint64_t *handle);
    tdm_status (*release)(tdm_provider *p, int device, uint64_t handle, size_t size);
    /* Maps the whole of `handle` at addr, inside a reserved range. */
    tdm_status (*map)(tdm_provider *p, int device, void *addr, size_t size,
                      uint64_t handle);
    /* Lets the device read and write [addr, addr+size). */
    tdm_status (*set_access)(tdm_provider *p, int device, void *addr, size_t size);
    tdm_status (*unmap)(tdm_provider *p, int device, void *addr, size_t size);
} tdm_vmm_ops;

struct tdm_provider {
    tdm_vendor vendor;
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
    /* NULL where streams run in call order (sim): a free then waits for
     * tdm_stream_synchronize / tdm_device_synchronize instead. */
    const tdm_stream_ops *streams;
    void *streams_ctx;
    /* NULL where the vendor (or its library here) has no virtual memory
     * management: expandable segments then fall back to normal ones. */
    const tdm_vmm_ops *vmm;
};

typedef struct tdm_sim_config {
    int device_count;         /* >= 1 */
    uint64_t capacity;        /* bytes per device */
    int host_accessible;      /* nonzero: memory is readable and writable */
} tdm_sim_config;

/* The sim device: each device owns a reserved address range of its
 * capacity (PROT_NONE unless host_accessible), hands out 512-byte aligned
 * ranges from it and fails with TDM_OUT_OF_MEMORY past its capacity.  Its
 * virtual memory ops reserve ranges of their own (outside that one), with
 * a 2 MiB granularity; created physical pages count against the capacity
 * like handed-out ranges. */
tdm_status tdm__provider_sim_create(const tdm_sim_config *cfg,
                                    tdm_provider **out);
/* Whether tdm__provider_sim_create could set `cfg`'s devices up: its
 * address ranges are reserved for a moment and given back (the provider
 * itself is made at the first allocation, too late to say no).
 * TDM_BAD_CONFIG for a capacity that wraps when rounded to pages,
 * TDM_HOST_OUT_OF_MEMORY for ranges the process cannot reserve. */
tdm_status tdm__provider_sim_check(const tdm_sim_config *cfg);

/* ---- vendor providers (alloc/provider_cuda.c, provider_hip.c, provider_ze.c)
 * Each calls the vendor's real functions through a table resolved once:
 * by dlopen/dlsym of the vendor library when `fns` is NULL, or from the
 * table the caller gives (hooks pass the un-hooked functions they resolved
 * themselves).  No vendor header is needed to build them; a vendor that is
 * absent gives TDM_NOT_AVAILABLE, and vendor errors map to tdm_status
 * (TDM_OUT_OF_MEMORY for the vendor's out-of-memory codes,
 * TDM_VENDOR_ERROR otherwise) with the vendor code kept in
 * tdm__provider_last_vendor_error() for the hook to hand back unchanged. */
/* One per row of vendor_providers.def: the table type (its definition in
 * provider_<name>.h) and the constructor.  TDM_API: exported from
 * libtidemark.so for libtidemark_preload.so. */
#define TDM_VENDOR_PROVIDER(id, create, fns)                                   \
    typedef struct fns fns;                                                    \
    TDM_API tdm_status create(const fns *table, tdm_provider **out);
#include "vendor_providers.def"
/* The vendor's own code of this thread's last failed provider call. */
TDM_API int tdm__provider_last_vendor_error(void);
/* Vendor providers note that code here (alloc/provider_vendor.c). */
void tdm__provider_set_vendor_error(int code);
/* Function `name` of the vendor library `lib` (a dlopen handle), looked up
 * with libc's own dlsym: with libtidemark_preload.so loaded, the dlsym the
 * program sees hands out the preload's wrappers of hooked entry points,
 * and a provider calling those would book its own segments a second time
 * as the program's allocations.  NULL when `lib` lacks it. */
void *tdm__provider_sym(void *lib, const char *name);

#endif
