/* hooks/preload/cuda_driver.c: the wrappers of the CUDA driver's memory
 * entry points.
 *
 * Each wrapper has the exact prototype of its driver variant (checked
 * against cudaTypedefs.h's PFN_* type) and is reached three ways: as the
 * exported symbol of that name (programs linked with -lcuda), and as the
 * pointer the cuGetProcAddress / dlsym hooks hand out in place of the
 * driver's (cudart, shared or static, and PyTorch).  See cuda_lookup.c.
 *
 * What a wrapper does, by TIDEMARK_CONF `mode`:
 *   off, or this thread already inside tidemark: calls the driver, nothing
 *     else (so a cudaMalloc hook calling into cudart, which calls
 *     cuMemAlloc through its table, books one allocation, not two);
 *   observe: calls the driver, then books what it did: device memory on
 *     the context's device, pinned host memory on device -1, virtual
 *     memory as segment_map / segment_unmap; CUDA_ERROR_OUT_OF_MEMORY is
 *     an oom event with the device's free bytes.  Frees and unmaps are
 *     booked before the driver call (the address may be reused at once);
 *   cache: cuMemAlloc_v2 and cuMemAllocAsync(_ptsz) made with a device's
 *     primary context current are served from tidemark's caching
 *     allocator over the real driver (cuda provider; stream-ordered ones
 *     on the stream's device), and their frees give blocks back to it
 *     (cuMemFree_v2 waiting for the device, as cudaFree does); every
 *     other call is observed, and so is a stream-ordered allocation on a
 *     stream being captured into a CUDA graph (the graph must own it).
 *     Captures begun here are counted; a primary context reset makes
 *     cache mode stand aside (cuDevicePrimaryCtxReset below).
 * The driver's result goes back unchanged, whatever tidemark did.
 *
 * Stacks: bookkeeping is called from the wrapper's own frame (helpers
 * that book are always_inline), so TDM_HOOK_SKIP leaves exactly the
 * wrapper out.  Lock: none here (see cuda_common.c, the allocator).
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include "alloc.h"
#include "snap_model.h"

#define INLINE static inline __attribute__((always_inline))

INLINE CUresult book_alloc(CUresult r, int device, const void *ptr, size_t size,
                           tdm_stream stream)
{
    if (r == CUDA_SUCCESS) {
        tdm__cuda_describe(device);
        tdm__alloc_observe_alloc(device, ptr, size, stream, TDM_HOOK_SKIP);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        tdm__cuda_describe(device);
        tdm__alloc_observe_oom(device, size, device >= 0 ? tdm__cuda_free_bytes() : 0,
                               stream, TDM_HOOK_SKIP);
    }
    return r;
}

static int ctx_device(void)
{
    int d = tdm__cuda_current_device();
    return d < 0 ? 0 : d;
}

/* Cache mode: serves a device allocation; 0 when the call must go to the
 * driver instead (other mode, no provider, no context, size 0: the
 * driver's own answer is the right one; a context other than the
 * device's primary one, whose address space the cache's segments are not
 * in; a stream-ordered allocation the program's own pool serves; a call
 * from a library that exports its allocations over IPC, cuda_ipc.c). */
INLINE int cache_alloc(tdm__hook_mode m, CUresult *r, CUdeviceptr *dptr, size_t size,
                       CUstream s, tdm_stream stream, int ordered)
{
    if (m != TDM__HOOK_CACHE || size == 0 || dptr == NULL || !tdm__cuda_cache_serves())
        return 0;
    if (tdm__cuda_caller_exports_ipc(__builtin_return_address(0)))
        return 0; /* its IPC handles must name its buffers (said once) */
    if (ordered && tdm__cuda_capturing(stream)) {
        tdm__alloc_observe_graph_capture(); /* the graph's: the driver serves it */
        return 0;
    }
    int primary = 0;
    int dev = tdm__cuda_place(s, ordered, &primary);
    if (dev < 0 || !primary || (ordered && tdm__pool_program(&tdm__cuda_pools, dev)))
        return 0;
    void *p = NULL;
    tdm_status st = tdm__alloc_malloc(&p, size, dev, stream, TDM_HOOK_SKIP);
    if (st == TDM_OK)
        *dptr = (CUdeviceptr)(uintptr_t)p;
    *r = st == TDM_OK ? CUDA_SUCCESS : tdm__cuda_status_result(st);
    return 1;
}

/* Cache mode: 1 / 0 / -1 (freed / not the cache's / a bad pointer into
 * the cache's memory), as tdm__hook_cache_free; 0 in other modes.
 * `ordered`: cuMemFreeAsync on `stream`, the block reused only after that
 * stream's work so far.  Else cuMemFree, which "may perform implicit
 * synchronization" (for memory not stream-ordered) and is what a
 * statically linked cudart's cudaFree becomes: cudaFree's callers count
 * on the wait, so the cache waits for the device as the runtime hook does. */
INLINE int cache_free(tdm__hook_mode m, CUdeviceptr p, int ordered, tdm_stream stream)
{
    if (m != TDM__HOOK_CACHE || p == 0 || !tdm__cuda_cache_ready())
        return 0;
    void *ptr = (void *)(uintptr_t)p;
    if (tdm__cuda_reset_block(ptr))
        return -1;
    tdm_status st = ordered ? tdm__alloc_free_on_stream(ptr, stream, TDM_HOOK_SKIP)
                            : tdm__alloc_free_synchronized(ptr, TDM_HOOK_SKIP);
    if (st == TDM_OK) {
        tdm__cuda_cache_freed();
        return 1;
    }
    return tdm__alloc_owns(ptr) ? -1 : 0;
}

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED /* no libcuda.so.1 in the process */

/* ---- device memory ------------------------------------------------------ */

static CUresult w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    PFN_cuMemAlloc_v3020 real = (PFN_cuMemAlloc_v3020)tdm__cuda_real(TDM__CV_cuMemAlloc_v2);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dptr, size) : NO_DRIVER);
    CUresult r;
    if (!cache_alloc(m, &r, dptr, size, NULL, 0, 0)) {
        r = real(dptr, size);
        book_alloc(r, ctx_device(), r == CUDA_SUCCESS ? (void *)(uintptr_t)*dptr : NULL,
                   size, 0);
    }
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemFree_v2(CUdeviceptr p)
{
    PFN_cuMemFree_v3020 real = (PFN_cuMemFree_v3020)tdm__cuda_real(TDM__CV_cuMemFree_v2);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p) : NO_DRIVER);
    CUresult r = CUDA_SUCCESS;
    int cached = cache_free(m, p, 0, 0);
    if (cached < 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (cached == 0) {
        tdm__alloc_observe_free((void *)(uintptr_t)p, 0, TDM_HOOK_SKIP);
        r = real(p);
    }
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                     size_t height, unsigned int elem)
{
    PFN_cuMemAllocPitch_v3020 real =
        (PFN_cuMemAllocPitch_v3020)tdm__cuda_real(TDM__CV_cuMemAllocPitch_v2);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dptr, pitch, width, height, elem) : NO_DRIVER);
    CUresult r = real(dptr, pitch, width, height, elem);
    /* The driver picks the pitch; the allocation is pitch x height. */
    size_t size = r == CUDA_SUCCESS ? *pitch * height : width * height;
    book_alloc(r, ctx_device(), r == CUDA_SUCCESS ? (void *)(uintptr_t)*dptr : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    PFN_cuMemAllocManaged_v6000 real =
        (PFN_cuMemAllocManaged_v6000)tdm__cuda_real(TDM__CV_cuMemAllocManaged);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dptr, size, flags) : NO_DRIVER);
    CUresult r = real(dptr, size, flags);
    book_alloc(r, ctx_device(), r == CUDA_SUCCESS ? (void *)(uintptr_t)*dptr : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

/* ---- pinned host memory: device -1 ---------------------------------------- */

static CUresult w_cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    PFN_cuMemHostAlloc_v2020 real = (PFN_cuMemHostAlloc_v2020)tdm__cuda_real(TDM__CV_cuMemHostAlloc);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(pp, size, flags) : NO_DRIVER);
    CUresult r = real(pp, size, flags);
    book_alloc(r, -1, r == CUDA_SUCCESS ? *pp : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemFreeHost(void *p)
{
    PFN_cuMemFreeHost_v2000 real = (PFN_cuMemFreeHost_v2000)tdm__cuda_real(TDM__CV_cuMemFreeHost);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p) : NO_DRIVER);
    tdm__alloc_observe_free(p, 0, TDM_HOOK_SKIP);
    CUresult r = real(p);
    tdm__hook_leave();
    return r;
}

/* ---- stream-ordered memory ------------------------------------------------ */

/* The four async allocators differ only in their variant and in what
 * stream 0 means; each is its own function so a stack shows which. */
#define ASYNC_ALLOC(name, pfn, ptsz)                                           \
    static CUresult w_##name(CUdeviceptr *dptr, size_t size, CUstream s)      \
    {                                                                          \
        pfn real = (pfn)tdm__cuda_real(TDM__CV_##name);                        \
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dptr, size, s) : NO_DRIVER); \
        tdm_stream st = tdm__cuda_stream(s, ptsz);                             \
        CUresult r;                                                            \
        if (!cache_alloc(m, &r, dptr, size, s, st, 1)) {                       \
            r = real(dptr, size, s);                                           \
            int dev = tdm__cuda_place(s, 1, NULL);                             \
            dev = dev < 0 ? 0 : dev;                                           \
            book_alloc(r, dev, r == CUDA_SUCCESS ? (void *)(uintptr_t)*dptr : NULL, \
                       size, st);                                              \
            if (r == CUDA_SUCCESS) {                                           \
                tdm__pool_book(&tdm__cuda_pools, tdm__pool_current(&tdm__cuda_pools, dev), \
                               dev);                                           \
                tdm__cuda_note_capture(st);                                    \
            }                                                                  \
        }                                                                      \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
ASYNC_ALLOC(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, 0)
ASYNC_ALLOC(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz, 1)

#define ASYNC_FREE(name, pfn, ptsz)                                            \
    static CUresult w_##name(CUdeviceptr p, CUstream s)                        \
    {                                                                          \
        pfn real = (pfn)tdm__cuda_real(TDM__CV_##name);                        \
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, s) : NO_DRIVER);     \
        CUresult r = CUDA_SUCCESS;                                             \
        int cached = cache_free(m, p, 1, tdm__cuda_stream(s, ptsz));           \
        if (cached < 0) {                                                      \
            r = CUDA_ERROR_INVALID_VALUE;                                      \
        } else if (cached == 0) {                                              \
            tdm__alloc_observe_free((void *)(uintptr_t)p, tdm__cuda_stream(s, ptsz), \
                                    TDM_HOOK_SKIP);                            \
            r = real(p, s);                                                    \
            tdm__pool_book_all(&tdm__cuda_pools); /* the block went back */   \
        }                                                                      \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
ASYNC_FREE(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, 0)
ASYNC_FREE(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz, 1)

/* A pool chosen by the program (IPC-exportable, other device, ...): always
 * the driver's, observed on the device the memory lies on. */
#define POOL_ALLOC(name, pfn, ptsz)                                            \
    static CUresult w_##name(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,\
                             CUstream s)                                       \
    {                                                                          \
        pfn real = (pfn)tdm__cuda_real(TDM__CV_##name);                        \
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dptr, size, pool, s) : NO_DRIVER); \
        CUresult r = real(dptr, size, pool, s);                                \
        int dev = r == CUDA_SUCCESS ? tdm__cuda_pointer_device(*dptr, ctx_device()) \
                                    : ctx_device();                            \
        book_alloc(r, dev, r == CUDA_SUCCESS ? (void *)(uintptr_t)*dptr : NULL, \
                   size, tdm__cuda_stream(s, ptsz));                           \
        if (r == CUDA_SUCCESS) {                                               \
            tdm__pool_book(&tdm__cuda_pools, (void *)pool, dev);               \
            tdm__cuda_note_capture(tdm__cuda_stream(s, ptsz));                 \
        }                                                                      \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
POOL_ALLOC(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020, 0)
POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz, 1)

/* ---- primary context reset -------------------------------------------------
 * "Destroy all allocations and reset all state on the primary context"
 * (cudaDeviceReset calls it too).  The cache's segments on the device go
 * with the program's memory: before the reset every block the program
 * still holds there is booked as freed (the reset destroys it) and the
 * cache gives its segments back to the driver while they exist;
 * afterwards a free of a block it had served is the driver's error for
 * memory that is gone, and cache mode stands aside (a segment it could
 * not give back is dead; none is ever handed out again).  Observed
 * allocations of the device are booked as freed. */
INLINE void cache_before_reset(int dev)
{
    uint64_t live[128];
    size_t n;
    do {
        n = tdm__alloc_live_blocks(dev, live, sizeof live / sizeof live[0]);
        for (size_t i = 0; i < n; i++)
            tdm__alloc_free((void *)(uintptr_t)live[i], TDM_HOOK_SKIP);
    } while (n == sizeof live / sizeof live[0]);
    tdm_device_synchronize(dev); /* frees waiting on other streams */
    tdm_empty_cache(dev);
}

#define PRIMARY_RESET(name)                                                    \
    static CUresult w_##name(CUdevice dev)                                     \
    {                                                                          \
        PFN_cuDevicePrimaryCtxReset_v11000 real =                              \
            (PFN_cuDevicePrimaryCtxReset_v11000)tdm__cuda_real(TDM__CV_##name);\
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(dev) : NO_DRIVER);      \
        int cached = m == TDM__HOOK_CACHE && tdm__cuda_cache_ready();          \
        if (cached)                                                            \
            cache_before_reset(dev);                                           \
        CUresult r = real(dev);                                                \
        if (r == CUDA_SUCCESS) {                                               \
            tdm__alloc_observe_reset_device(dev, TDM_HOOK_SKIP);               \
            if (cached) {                                                      \
                tdm__cuda_note_reset(dev);                                     \
                tdm__cuda_cache_stand_aside("cuDevicePrimaryCtxReset (or "     \
                                            "cudaDeviceReset) destroyed the "  \
                                            "cache's segments");               \
            }                                                                  \
        }                                                                      \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
PRIMARY_RESET(cuDevicePrimaryCtxReset)
PRIMARY_RESET(cuDevicePrimaryCtxReset_v2)

/* ---- graph captures ---------------------------------------------------------
 * Counted (tdm__cuda_captures_underway), never changed: while one is
 * underway cache mode frees no segment and queries no marker, and a
 * stream-ordered allocation on a capturing stream is the graph's.  A
 * static cudart's captures arrive only here. */
#define CAPTURE_BEGIN(name, pfn, params, args)                                 \
    static CUresult w_##name params                                            \
    {                                                                          \
        pfn real = (pfn)tdm__cuda_real(TDM__CV_##name);                        \
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real args : NO_DRIVER);      \
        CUresult r = real args;                                                \
        if (r == CUDA_SUCCESS)                                                 \
            tdm__cuda_capture_count(1);                                        \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
CAPTURE_BEGIN(cuStreamBeginCapture, tdm__PFN_cuStreamBeginCapture_v10000, (CUstream s), (s))
CAPTURE_BEGIN(cuStreamBeginCapture_ptsz, tdm__PFN_cuStreamBeginCapture_v10000, (CUstream s), (s))
CAPTURE_BEGIN(cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010,
              (CUstream s, CUstreamCaptureMode mode), (s, mode))
CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz, PFN_cuStreamBeginCapture_v10010_ptsz,
              (CUstream s, CUstreamCaptureMode mode), (s, mode))
#if CUDA_VERSION >= 12030
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph, PFN_cuStreamBeginCaptureToGraph_v12030,
              (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
               size_t n, CUstreamCaptureMode mode),
              (s, g, deps, edges, n, mode))
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph_ptsz, PFN_cuStreamBeginCaptureToGraph_v12030_ptsz,
              (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
               size_t n, CUstreamCaptureMode mode),
              (s, g, deps, edges, n, mode))
#endif

/* An invalidated capture ends too; other errors end nothing. */
#define CAPTURE_END(name, pfn)                                                 \
    static CUresult w_##name(CUstream s, CUgraph *graph)                       \
    {                                                                          \
        pfn real = (pfn)tdm__cuda_real(TDM__CV_##name);                        \
        TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(s, graph) : NO_DRIVER); \
        CUresult r = real(s, graph);                                           \
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)   \
            tdm__cuda_capture_count(-1);                                       \
        tdm__hook_leave();                                                     \
        return r;                                                              \
    }
CAPTURE_END(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)
CAPTURE_END(cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz)

/* ---- virtual memory ---------------------------------------------------------
 * Physical memory is used once it is mapped: cuMemMap books segment_map on
 * the place the handle was created for (a device, or the host: -1, for a
 * host or host-NUMA location), cuMemUnmap segment_unmap.  A handle counts
 * once: a further mapping of it (another address, e.g. a peer device's
 * range) is booked apart as a peer mapping, and so is every mapping of a
 * handle imported from another process (cuda_pool.c), never on a device.
 * cuMemCreate only remembers the handle's place (an oom when the driver
 * has no memory left); reservations hold no memory and are passed through. */

static CUresult w_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    PFN_cuMemCreate_v10020 real = (PFN_cuMemCreate_v10020)tdm__cuda_real(TDM__CV_cuMemCreate);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(h, size, prop, flags) : NO_DRIVER);
    CUresult r = real(h, size, prop, flags);
    int dev = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    if (r == CUDA_SUCCESS) {
        tdm__vmm_created(&tdm__cuda_vmm, *h, dev, TDM_CUDA_OWN);
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY && dev >= 0) {
        tdm__cuda_describe(dev);
        tdm__alloc_observe_oom(dev, size, tdm__cuda_free_bytes(), 0, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemRelease(CUmemGenericAllocationHandle h)
{
    PFN_cuMemRelease_v10020 real = (PFN_cuMemRelease_v10020)tdm__cuda_real(TDM__CV_cuMemRelease);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(h) : NO_DRIVER);
    CUresult r = real(h);
    if (r == CUDA_SUCCESS)
        tdm__vmm_released(&tdm__cuda_vmm, h);
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle h, unsigned long long flags)
{
    PFN_cuMemMap_v10020 real = (PFN_cuMemMap_v10020)tdm__cuda_real(TDM__CV_cuMemMap);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(ptr, size, offset, h, flags) : NO_DRIVER);
    CUresult r = real(ptr, size, offset, h, flags);
    if (r == CUDA_SUCCESS) {
        tdm__vmm_booking b = tdm__vmm_mapped(&tdm__cuda_vmm, h, ptr);
        if (b.kind == TDM_CUDA_OWN) {
            tdm__cuda_describe(b.device);
            tdm__alloc_observe_map(b.device, (void *)(uintptr_t)ptr, size, TDM_HOOK_SKIP);
        } else {
            tdm__alloc_observe_import(ctx_device(), (void *)(uintptr_t)ptr, size, b.device,
                                      b.kind, TDM_HOOK_SKIP);
        }
    }
    tdm__hook_leave();
    return r;
}

static CUresult w_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    PFN_cuMemUnmap_v10020 real = (PFN_cuMemUnmap_v10020)tdm__cuda_real(TDM__CV_cuMemUnmap);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(ptr, size) : NO_DRIVER);
    tdm__vmm_unmapped(&tdm__cuda_vmm, ptr);
    if (tdm__alloc_observe_unmap((void *)(uintptr_t)ptr, size, TDM_HOOK_SKIP) != TDM_OK)
        tdm__alloc_observe_unimport((void *)(uintptr_t)ptr);
    CUresult r = real(ptr, size);
    tdm__hook_leave();
    return r;
}

#if CUDA_VERSION >= 12010
/* A multicast object holds no memory of its own: what is bound to it
 * (cuMulticastBindMem) is counted where that physical allocation is
 * mapped.  So a mapping of the object is listed as imported, kind
 * multicast, from no one device, never booked on the current one. */
static CUresult w_cuMulticastCreate(CUmemGenericAllocationHandle *mc,
                                    const CUmulticastObjectProp *prop)
{
    PFN_cuMulticastCreate_v12010 real =
        (PFN_cuMulticastCreate_v12010)tdm__cuda_real(TDM__CV_cuMulticastCreate);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(mc, prop) : NO_DRIVER);
    CUresult r = real(mc, prop);
    if (r == CUDA_SUCCESS && mc)
        tdm__vmm_created(&tdm__cuda_vmm, *mc, TDM_IMPORT_SOURCE_UNKNOWN, TDM_IMPORT_MULTICAST);
    tdm__hook_leave();
    return r;
}
#endif

static CUresult w_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                      CUdeviceptr addr, unsigned long long flags)
{
    PFN_cuMemAddressReserve_v10020 real =
        (PFN_cuMemAddressReserve_v10020)tdm__cuda_real(TDM__CV_cuMemAddressReserve);
    return real ? real(ptr, size, align, addr, flags) : NO_DRIVER;
}

static CUresult w_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    PFN_cuMemAddressFree_v10020 real =
        (PFN_cuMemAddressFree_v10020)tdm__cuda_real(TDM__CV_cuMemAddressFree);
    return real ? real(ptr, size) : NO_DRIVER;
}

/* ---- the variant table, and the exported names -------------------------------
 * The resolvers' wrappers (cuGetProcAddress, cuGetProcAddress_v2) live in
 * cuda_lookup.c; every other variant's wrapper is here. */
#define w_cuGetProcAddress tdm__cuda_w_cuGetProcAddress
#define w_cuGetProcAddress_v2 tdm__cuda_w_cuGetProcAddress_v2
/* ... and those of pools and shared memory, cuda_pool.c. */
#define w_cuMemPoolTrimTo tdm__cuda_w_cuMemPoolTrimTo
#define w_cuMemPoolDestroy tdm__cuda_w_cuMemPoolDestroy
#define w_cuDeviceSetMemPool tdm__cuda_w_cuDeviceSetMemPool
#define w_cuMemSetMemPool tdm__cuda_w_cuMemSetMemPool
#define w_cuStreamSynchronize tdm__cuda_w_cuStreamSynchronize
#define w_cuStreamSynchronize_ptsz tdm__cuda_w_cuStreamSynchronize_ptsz
#define w_cuIpcGetMemHandle tdm__cuda_w_cuIpcGetMemHandle
#define w_cuIpcOpenMemHandle_v2 tdm__cuda_w_cuIpcOpenMemHandle_v2
#define w_cuIpcCloseMemHandle tdm__cuda_w_cuIpcCloseMemHandle
#define w_cuMemImportFromShareableHandle tdm__cuda_w_cuMemImportFromShareableHandle

#define W_CHECK(name, base, ver, pt, pfn)                                      \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&w_##name), pfn),   \
                   #name " wrapper does not have the driver's prototype");
TDM__CUDA_VARIANTS(W_CHECK)
#undef W_CHECK

const tdm__cuda_variant tdm__cuda_variants[TDM__CV_COUNT] = {
#define W_ROW(name, base, ver, pt, pfn) {#name, base, ver, pt, (void *)w_##name},
    TDM__CUDA_VARIANTS(W_ROW)
#undef W_ROW
};

/* Exported aliases (the resolvers are exported from cuda_lookup.c).  The
 * first variants of two functions share their names with cuda.h's macros
 * for the newest ones. */
#undef cuStreamBeginCapture
#undef cuDevicePrimaryCtxReset
#define W_ALIAS(name)                                                          \
    extern __typeof__(w_##name) name                                           \
        __attribute__((alias("w_" #name), visibility("default")));
W_ALIAS(cuMemAlloc_v2)
W_ALIAS(cuMemFree_v2)
W_ALIAS(cuMemAllocPitch_v2)
W_ALIAS(cuMemAllocManaged)
W_ALIAS(cuMemHostAlloc)
W_ALIAS(cuMemFreeHost)
W_ALIAS(cuMemAllocAsync)
W_ALIAS(cuMemAllocAsync_ptsz)
W_ALIAS(cuMemFreeAsync)
W_ALIAS(cuMemFreeAsync_ptsz)
W_ALIAS(cuMemAllocFromPoolAsync)
W_ALIAS(cuMemAllocFromPoolAsync_ptsz)
W_ALIAS(cuMemCreate)
W_ALIAS(cuMemRelease)
W_ALIAS(cuMemMap)
W_ALIAS(cuMemUnmap)
W_ALIAS(cuMemAddressReserve)
W_ALIAS(cuMemAddressFree)
W_ALIAS(cuStreamBeginCapture)
W_ALIAS(cuStreamBeginCapture_ptsz)
W_ALIAS(cuStreamBeginCapture_v2)
W_ALIAS(cuStreamBeginCapture_v2_ptsz)
W_ALIAS(cuStreamEndCapture)
W_ALIAS(cuStreamEndCapture_ptsz)
W_ALIAS(cuDevicePrimaryCtxReset)
W_ALIAS(cuDevicePrimaryCtxReset_v2)
#if CUDA_VERSION >= 12030
W_ALIAS(cuStreamBeginCaptureToGraph)
W_ALIAS(cuStreamBeginCaptureToGraph_ptsz)
#endif
#if CUDA_VERSION >= 12010
W_ALIAS(cuMulticastCreate)
#endif
#undef W_ALIAS
