/* hooks/preload/cuda_runtime.c: the CUDA runtime API hooks (cudaMalloc &
 * co.) for the legacy default stream; their _ptsz twins are
 * cuda_runtime_ptsz.c's, the bodies both share cuda_runtime_body.h's.
 *
 * These exported symbols interpose a libcudart.so that the program loads
 * (unversioned definitions interpose its versioned ones).  A program with
 * cudart linked statically never calls them; its allocations are seen one
 * level down, at the driver (cuda_lookup.c).  With a shared cudart both
 * levels see the call; the recursion guard makes the outer one (this
 * file, whose stack starts at the program's call) the only one to book.
 * Pinned host memory is booked on device -1; managed memory and pitched
 * allocations on the current device; cache mode serves cudaMalloc and
 * cudaMallocAsync only (see cuda_runtime_body.h).
 *
 * Owns: nothing; the runtime's real functions and the last error cache
 * mode answered are cuda_runtime_real.c's.  Lock: none.
 */
#define _GNU_SOURCE
#include "cuda_runtime_body.h"

/* ---- the last error ----------------------------------------------------------------
 * The runtime keeps, per thread, the last error one of its calls returned,
 * until cudaGetLastError reads and clears it (cudaPeekAtLastError only
 * reads).  An error cache mode answered itself is reported in the same
 * way; when the runtime has one of its own, the runtime's wins, and both
 * are cleared. */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t (*real)(void) = (cudaError_t(*)(void))tdm__cuda_rt_real(TDM__RT_cudaGetLastError);
    cudaError_t r = real ? real() : TDM_RT_ABSENT;
    cudaError_t ours = tdm__cuda_rt_served_last(1);
    return r == cudaSuccess ? ours : r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    cudaError_t (*real)(void) =
        (cudaError_t(*)(void))tdm__cuda_rt_real(TDM__RT_cudaPeekAtLastError);
    cudaError_t r = real ? real() : TDM_RT_ABSENT;
    return r == cudaSuccess ? tdm__cuda_rt_served_last(0) : r;
}

/* ---- device memory ------------------------------------------------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMalloc(void **p, size_t size)
{
    cudaError_t (*real)(void **, size_t) =
        (cudaError_t(*)(void **, size_t))tdm__cuda_rt_real(TDM__RT_cudaMalloc);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size) : TDM_RT_ABSENT);
    cudaError_t r;
    if (!tdm__rt_cache_alloc(m, &r, p, size, NULL, 0, 0)) {
        r = real(p, size);
        tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFree(void *p)
{
    cudaError_t (*real)(void *) = (cudaError_t(*)(void *))tdm__cuda_rt_real(TDM__RT_cudaFree);
    /* cudaFree(NULL) is how programs make the context: the runtime's. */
    TDM_HOOK_PROLOGUE(m, p != NULL && real != NULL, real ? real(p) : TDM_RT_ABSENT);
    cudaError_t r = cudaSuccess;
    int cached = tdm__rt_cache_free(m, p, 0, 0);
    if (cached < 0) {
        r = tdm__cuda_rt_served_error(cudaErrorInvalidValue);
    } else if (cached == 0) {
        tdm__alloc_observe_free(p, 0, TDM_HOOK_SKIP);
        r = real(p);
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
    cudaError_t (*real)(void **, size_t, unsigned int) =
        (cudaError_t(*)(void **, size_t, unsigned int))tdm__cuda_rt_real(TDM__RT_cudaMallocManaged);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size, flags) : TDM_RT_ABSENT);
    cudaError_t r = real(p, size, flags);
    tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void **p, size_t *pitch, size_t width,
                                                    size_t height)
{
    cudaError_t (*real)(void **, size_t *, size_t, size_t) =
        (cudaError_t(*)(void **, size_t *, size_t, size_t))tdm__cuda_rt_real(
            TDM__RT_cudaMallocPitch);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, pitch, width, height) : TDM_RT_ABSENT);
    cudaError_t r = real(p, pitch, width, height);
    /* The runtime picks the pitch; the allocation is pitch x height. */
    size_t size = r == cudaSuccess && pitch ? *pitch * height : width * height;
    tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

/* ---- pinned host memory: device -1 ------------------------------------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t size)
{
    cudaError_t (*real)(void **, size_t) =
        (cudaError_t(*)(void **, size_t))tdm__cuda_rt_real(TDM__RT_cudaMallocHost);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size) : TDM_RT_ABSENT);
    cudaError_t r = real(p, size);
    tdm__rt_book(r, -1, r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    cudaError_t (*real)(void **, size_t, unsigned int) =
        (cudaError_t(*)(void **, size_t, unsigned int))tdm__cuda_rt_real(TDM__RT_cudaHostAlloc);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p, size, flags) : TDM_RT_ABSENT);
    cudaError_t r = real(p, size, flags);
    tdm__rt_book(r, -1, r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void *p)
{
    cudaError_t (*real)(void *) = (cudaError_t(*)(void *))tdm__cuda_rt_real(TDM__RT_cudaFreeHost);
    TDM_HOOK_PROLOGUE(m, real != NULL, real ? real(p) : TDM_RT_ABSENT);
    tdm__alloc_observe_free(p, 0, TDM_HOOK_SKIP);
    cudaError_t r = real(p);
    tdm__hook_leave();
    return r;
}

/* ---- stream-ordered memory, entry points (legacy default stream) ------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    return tdm__rt_malloc_async(TDM__RT_cudaMallocAsync, p, size, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    return tdm__rt_free_async(TDM__RT_cudaFreeAsync, p, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t size,
                                                            cudaMemPool_t pool, cudaStream_t s)
{
    return tdm__rt_from_pool(TDM__RT_cudaMallocFromPoolAsync, p, size, pool, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(
    const char *symbol, void **fn, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry(TDM__RT_cudaGetDriverEntryPoint, symbol, fn, flags, st, 0);
}

/* cudaGetDriverEntryPointByVersion came with CUDA 12.5: the headers of
 * 12.0-12.4 do not declare it.  It is hooked all the same, with 12.5's
 * prototype: a tidemark built with them may run under a newer runtime
 * (PyTorch brings its own, and asks it for cuMemCreate & co. by version). */
#if CUDART_VERSION < 12050
extern cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st);
#endif

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry_ver(TDM__RT_cudaGetDriverEntryPointByVersion, symbol, fn, version,
                             flags, st, 0);
}

/* ---- graph captures (legacy default stream) ---------------------------------------------- */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t s,
                                                           enum cudaStreamCaptureMode mode)
{
    return tdm__rt_begin_capture(TDM__RT_cudaStreamBeginCapture, s, mode);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    return tdm__rt_end_capture(TDM__RT_cudaStreamEndCapture, s, graph);
}

#if TDM__RT_HAS_TO_GRAPH
TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCaptureToGraph(
    cudaStream_t s, cudaGraph_t graph, const cudaGraphNode_t *deps,
    const cudaGraphEdgeData *edges, size_t n, enum cudaStreamCaptureMode mode)
{
    return tdm__rt_to_graph(TDM__RT_cudaStreamBeginCaptureToGraph, s, graph, deps, edges, n,
                            mode);
}
#endif
