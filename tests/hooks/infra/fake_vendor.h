/* tests/hooks/infra/fake_vendor.h: the API of a made-up GPU vendor runtime,
 * libtdmfake_vendor.so, that the preload infrastructure is tested on
 * without any real vendor: allocations in "device memory" (host memory
 * here) with a capacity, streams, virtual-memory reserve/map/unmap, and
 * two versions of one symbol (fv_malloc@FAKEV_1.0, fv_malloc@@FAKEV_2.0),
 * as real vendor libraries have.
 *
 * Error codes come back as the real ones do, so tests can check that hooks
 * pass them through unchanged.  Counters say how often the vendor was
 * really called and how much is live, so tests can check cache mode. */
#ifndef TDM_TESTS_FAKE_VENDOR_H
#define TDM_TESTS_FAKE_VENDOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fv_result {
    FV_SUCCESS = 0,
    FV_ERROR_INVALID = 1,       /* bad pointer, size or range */
    FV_ERROR_OUT_OF_MEMORY = 2, /* past the capacity (env FAKEV_CAPACITY) */
} fv_result;

typedef struct fv_stream_st *fv_stream; /* an opaque handle, as cudaStream_t */

/* Device 0, default stream.  Version FAKEV_2.0 (the default); the older
 * FAKEV_1.0 variant also works and counts fv_counters()->v1_calls. */
fv_result fv_malloc(void **ptr, size_t size);
fv_result fv_malloc_async(void **ptr, size_t size, fv_stream stream);
/* n * size zeroed bytes; calls fv_malloc_async through the dynamic linker,
 * so a hook on both sees a nested call. */
fv_result fv_calloc(void **ptr, size_t n, size_t size);
fv_result fv_free(void *ptr);
fv_result fv_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* Virtual memory: a reserved range, and mappings inside it. */
fv_result fv_reserve(void **va, size_t size);
fv_result fv_release(void *va, size_t size);
fv_result fv_map(void *va, size_t size);
fv_result fv_unmap(void *va, size_t size);

/* Called inside fv_malloc / fv_malloc_async before it returns (NULL: none);
 * a C++ test throws from it through the hooked call. */
void fv_set_alloc_callback(void (*cb)(size_t size));

typedef struct fv_counters {
    long alloc_calls; /* successful allocations the runtime really made */
    long free_calls;  /* successful frees */
    long live;        /* allocations not freed */
    long v1_calls;    /* calls of fv_malloc@FAKEV_1.0 */
    long mapped;      /* bytes mapped */
} fv_counters;
/* A snapshot of the counters. */
fv_counters fv_get_counters(void);

#ifdef __cplusplus
}
#endif
#endif
