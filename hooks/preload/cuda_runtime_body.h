/* hooks/preload/cuda_runtime_body.h: the bodies of the CUDA runtime API
 * hooks, shared by cuda_runtime.c and cuda_runtime_ptsz.c (the latter
 * compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM so its hooks carry the
 * exact _ptsz prototypes); those two files include it, nothing else does.
 * The bodies call only what cuda_runtime.h and cuda_hooks.h declare.
 *
 * Every body is always_inline: the hook the program called is the only
 * tidemark frame above the bookkeeping, so TDM_HOOK_SKIP leaves exactly it
 * out of stacks.  What the hooks do, by mode, is cuda_driver.c's rule:
 * off or nested -> the runtime only; observe -> the runtime, then book;
 * cache -> cudaMalloc / cudaMallocAsync served from tidemark's caching
 * allocator (over the driver), their frees given back to it (not a
 * cudaMallocAsync on a stream being captured into a graph).  The
 * runtime's result goes back unchanged.
 */
#ifndef TDM_HOOKS_PRELOAD_CUDA_RUNTIME_BODY_H
#define TDM_HOOKS_PRELOAD_CUDA_RUNTIME_BODY_H

#include "alloc.h"
#include "cuda_runtime.h"

#define TDM_RT_INLINE static inline __attribute__((always_inline))

/* The device a runtime call's memory comes from: the stream's for a
 * stream-ordered call on a stream of its own, else the runtime's current
 * device (cudaGetDevice).  *primary (when not NULL) cleared when the
 * context current on the thread is not that device's primary one (none
 * current yet: the runtime makes its primary one current). */
#define tdm__cuda_rt_place(s, ordered, primary)                                \
    tdm__rt_place((CUstream)(s), (ordered), (primary), tdm__cuda_rt_device())
TDM_RT_INLINE int tdm__rt_place(CUstream s, int ordered, int *primary, int rt_device)
{
    int own_stream = ordered && s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
    if (own_stream) {
        int prim = 1;
        int dev = tdm__cuda_place(s, 1, &prim);
        if (dev >= 0) {
            if (primary)
                *primary = prim;
            return dev;
        }
    }
    if (primary)
        *primary = tdm__cuda_current_is_primary(rt_device);
    return rt_device;
}

/* Books what an allocating runtime call did. */
TDM_RT_INLINE void tdm__rt_book(cudaError_t r, int device, const void *ptr, size_t size,
                                tdm_stream stream)
{
    if (r == cudaSuccess && ptr) {
        tdm__cuda_describe(device);
        tdm__alloc_observe_alloc(device, ptr, size, stream, TDM_HOOK_SKIP);
    } else if (r == cudaErrorMemoryAllocation) {
        tdm__cuda_describe(device);
        tdm__alloc_observe_oom(device, size, device >= 0 ? tdm__cuda_rt_free_bytes() : 0,
                               stream, TDM_HOOK_SKIP);
    }
}

/* Cache mode: serves a device allocation (1), or leaves it to the runtime
 * (0: other mode, size 0, no provider, a call from a library that exports
 * its allocations over IPC: cuda_ipc.c). */
TDM_RT_INLINE int tdm__rt_cache_alloc(tdm__hook_mode m, cudaError_t *r, void **p, size_t size,
                                      cudaStream_t s, tdm_stream stream, int ordered)
{
    if (m != TDM__HOOK_CACHE || size == 0 || p == NULL || !tdm__cuda_cache_serves())
        return 0;
    if (tdm__cuda_caller_exports_ipc(__builtin_return_address(0)))
        return 0; /* its IPC handles must name its buffers (said once) */
    if (ordered && tdm__cuda_capturing(stream)) {
        tdm__alloc_observe_graph_capture(); /* the graph's: the driver serves it */
        return 0;
    }
    /* The runtime serves cudaMalloc in the context current on the thread
     * (its device's primary one, made current at its first call); a
     * stream-ordered call on the stream's device (tdm__cuda_place).  A
     * context of the program's own is the runtime's to serve. */
    int primary = 1;
    int dev = tdm__cuda_rt_place(s, ordered, &primary);
    if (!primary || (ordered && tdm__pool_program(&tdm__cuda_pools, dev)))
        return 0;
    tdm_status st = tdm__alloc_malloc(p, size, dev, stream, TDM_HOOK_SKIP);
    *r = st == TDM_OK ? cudaSuccess
                      : tdm__cuda_rt_served_error(tdm__cuda_rt_error(tdm__cuda_status_result(st)));
    return 1;
}

/* Cache mode: 1 / 0 / -1 as tdm__hook_cache_free (freed / not the cache's
 * / a bad pointer into the cache's memory); 0 in other modes.  `ordered`:
 * cudaFreeAsync on `stream`, reused only after that stream's work so far;
 * else cudaFree, which first waits for the device as CUDA's does. */
TDM_RT_INLINE int tdm__rt_cache_free(tdm__hook_mode m, void *p, int ordered, tdm_stream stream)
{
    if (m != TDM__HOOK_CACHE || p == NULL || !tdm__cuda_cache_ready())
        return 0;
    if (tdm__cuda_reset_block(p))
        return -1;
    tdm_status st = ordered ? tdm__alloc_free_on_stream(p, stream, TDM_HOOK_SKIP)
                            : tdm__alloc_free_synchronized(p, TDM_HOOK_SKIP);
    if (st == TDM_OK) {
        tdm__cuda_cache_freed();
        return 1;
    }
    return tdm__alloc_owns(p) ? -1 : 0;
}

/* Stream ids as recorded (cuda_hooks.h): cudaStreamPerThread, or stream 0
 * of a _ptsz call, is the calling thread's own per-thread stream. */
TDM_RT_INLINE tdm_stream tdm__rt_stream(cudaStream_t s, int ptsz)
{
    return tdm__cuda_stream((CUstream)s, ptsz);
}

typedef cudaError_t (*tdm__rt_malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*tdm__rt_free_async_fn)(void *, cudaStream_t);
typedef cudaError_t (*tdm__rt_pool_fn)(void **, size_t, cudaMemPool_t, cudaStream_t);
typedef cudaError_t (*tdm__rt_entry_fn)(const char *, void **, unsigned long long,
                                        enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*tdm__rt_entry_ver_fn)(const char *, void **, unsigned int,
                                            unsigned long long,
                                            enum cudaDriverEntryPointQueryResult *);

TDM_RT_INLINE cudaError_t tdm__rt_malloc_async(int f, void **p, size_t size, cudaStream_t s,
                                               int ptsz)
{
    tdm__rt_malloc_async_fn real = (tdm__rt_malloc_async_fn)tdm__cuda_rt_real(f);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size, s) : TDM_RT_ABSENT);
    cudaError_t r;
    tdm_stream st = tdm__rt_stream(s, ptsz);
    if (!tdm__rt_cache_alloc(m, &r, p, size, s, st, 1)) {
        r = real(p, size, s);
        int dev = tdm__cuda_rt_place(s, 1, NULL);
        tdm__rt_book(r, dev, r == cudaSuccess && p ? *p : NULL, size, st);
        if (r == cudaSuccess) { /* pool reserve: cuda_pool.c */
            tdm__pool_book(&tdm__cuda_pools, tdm__pool_current(&tdm__cuda_pools, dev), dev);
            tdm__cuda_note_capture(st);
        }
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_INLINE cudaError_t tdm__rt_free_async(int f, void *p, cudaStream_t s, int ptsz)
{
    tdm__rt_free_async_fn real = (tdm__rt_free_async_fn)tdm__cuda_rt_real(f);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, s) : TDM_RT_ABSENT);
    cudaError_t r = cudaSuccess;
    int cached = tdm__rt_cache_free(m, p, 1, tdm__rt_stream(s, ptsz));
    if (cached < 0) {
        r = tdm__cuda_rt_served_error(cudaErrorInvalidValue);
    } else if (cached == 0) {
        tdm__alloc_observe_free(p, tdm__rt_stream(s, ptsz), TDM_HOOK_SKIP);
        r = real(p, s);
        tdm__pool_book_all(&tdm__cuda_pools);
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_INLINE cudaError_t tdm__rt_from_pool(int f, void **p, size_t size, cudaMemPool_t pool,
                                            cudaStream_t s, int ptsz)
{
    tdm__rt_pool_fn real = (tdm__rt_pool_fn)tdm__cuda_rt_real(f);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size, pool, s) : TDM_RT_ABSENT);
    cudaError_t r = real(p, size, pool, s);
    int dev = r == cudaSuccess && p ? tdm__cuda_pointer_device((CUdeviceptr)(uintptr_t)*p,
                                                               tdm__cuda_rt_device())
                                    : tdm__cuda_rt_device();
    tdm__rt_book(r, dev, r == cudaSuccess && p ? *p : NULL, size, tdm__rt_stream(s, ptsz));
    if (r == cudaSuccess) {
        tdm__pool_book(&tdm__cuda_pools, (void *)pool, dev);
        tdm__cuda_note_capture(tdm__rt_stream(s, ptsz));
    }
    tdm__hook_leave();
    return r;
}

/* Graph captures: counted, never changed (tdm__cuda_captures_underway).
 * The runtime begins and ends them through the driver, whose wrappers
 * count too (for a static cudart): the runtime's call runs inside
 * tidemark's guard, so that one capture counts once. */
typedef cudaError_t (*tdm__rt_begin_capture_fn)(cudaStream_t, enum cudaStreamCaptureMode);
typedef cudaError_t (*tdm__rt_end_capture_fn)(cudaStream_t, cudaGraph_t *);

TDM_RT_INLINE cudaError_t tdm__rt_begin_capture(int f, cudaStream_t s,
                                                enum cudaStreamCaptureMode mode)
{
    tdm__rt_begin_capture_fn real = (tdm__rt_begin_capture_fn)tdm__cuda_rt_real(f);
    int entered = tdm__hook_enter();
    cudaError_t r = real ? real(s, mode) : TDM_RT_ABSENT;
    if (entered) {
        tdm__cuda_rt_capture_begun(r);
        tdm__hook_leave();
    }
    return r;
}

TDM_RT_INLINE cudaError_t tdm__rt_end_capture(int f, cudaStream_t s, cudaGraph_t *graph)
{
    tdm__rt_end_capture_fn real = (tdm__rt_end_capture_fn)tdm__cuda_rt_real(f);
    int entered = tdm__hook_enter();
    cudaError_t r = real ? real(s, graph) : TDM_RT_ABSENT;
    if (entered) {
        tdm__cuda_rt_capture_ended(r);
        tdm__hook_leave();
    }
    return r;
}

#if TDM__RT_HAS_TO_GRAPH
typedef cudaError_t (*tdm__rt_to_graph_fn)(cudaStream_t, cudaGraph_t,
                                           const cudaGraphNode_t *,
                                           const cudaGraphEdgeData *, size_t,
                                           enum cudaStreamCaptureMode);

TDM_RT_INLINE cudaError_t tdm__rt_to_graph(int f, cudaStream_t s, cudaGraph_t graph,
                                           const cudaGraphNode_t *deps,
                                           const cudaGraphEdgeData *edges, size_t n,
                                           enum cudaStreamCaptureMode mode)
{
    tdm__rt_to_graph_fn real = (tdm__rt_to_graph_fn)tdm__cuda_rt_real(f);
    int entered = tdm__hook_enter();
    cudaError_t r = real ? real(s, graph, deps, edges, n, mode) : TDM_RT_ABSENT;
    if (entered) {
        tdm__cuda_rt_capture_begun(r);
        tdm__hook_leave();
    }
    return r;
}
#endif

/* After cudaGetDriverEntryPoint*: the same wrapping as cuGetProcAddress.
 * cudaEnableDefault means "as the caller was compiled", which is what the
 * _ptsz entry point says.  The status argument is not read: CUDA 11's
 * cudaGetDriverEntryPoint has none, so a program built for it leaves
 * garbage there; a symbol not found leaves *fn NULL. */
TDM_RT_INLINE void tdm__rt_wrap_entry(cudaError_t r, const char *symbol, void **fn,
                                      int version, unsigned long long flags, int ptsz)
{
    if (r != cudaSuccess || fn == NULL || *fn == NULL)
        return;
    cuuint64_t cu = flags == cudaEnableDefault
                        ? (ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                : CU_GET_PROC_ADDRESS_LEGACY_STREAM)
                        : (cuuint64_t)flags;
    tdm__cuda_wrap(symbol, fn, version, cu);
}

TDM_RT_INLINE cudaError_t tdm__rt_entry(int f, const char *symbol, void **fn,
                                        unsigned long long flags,
                                        enum cudaDriverEntryPointQueryResult *st, int ptsz)
{
    tdm__rt_entry_fn real = (tdm__rt_entry_fn)tdm__cuda_rt_real(f);
    if (real == NULL)
        return TDM_RT_ABSENT;
    cudaError_t r = real(symbol, fn, flags, st);
    tdm__rt_wrap_entry(r, symbol, fn, tdm__cuda_rt_version(), flags, ptsz);
    return r;
}

TDM_RT_INLINE cudaError_t tdm__rt_entry_ver(int f, const char *symbol, void **fn,
                                            unsigned int version, unsigned long long flags,
                                            enum cudaDriverEntryPointQueryResult *st, int ptsz)
{
    tdm__rt_entry_ver_fn real = (tdm__rt_entry_ver_fn)tdm__cuda_rt_real(f);
    if (real == NULL)
        return TDM_RT_ABSENT;
    cudaError_t r = real(symbol, fn, version, flags, st);
    tdm__rt_wrap_entry(r, symbol, fn, (int)version, flags, ptsz);
    return r;
}

#endif
