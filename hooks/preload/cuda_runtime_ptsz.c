/* hooks/preload/cuda_runtime_ptsz.c: the _ptsz runtime hooks
 * (cudaMallocAsync_ptsz & co., what code built with
 * --default-stream per-thread calls).
 *
 * Compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (defined below), so
 * cuda_runtime_api.h renames each function to its _ptsz form and every
 * definition here is checked against the real _ptsz prototype.  The bodies
 * are cuda_runtime_body.h's, with stream 0 meaning the per-thread stream.
 * No state of its own.
 */
#define _GNU_SOURCE
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "cuda_runtime_body.h"

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    return tdm__rt_malloc_async(TDM__RT_cudaMallocAsync_ptsz, p, size, s, 1);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    return tdm__rt_free_async(TDM__RT_cudaFreeAsync_ptsz, p, s, 1);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t size,
                                                            cudaMemPool_t pool, cudaStream_t s)
{
    return tdm__rt_from_pool(TDM__RT_cudaMallocFromPoolAsync_ptsz, p, size, pool, s, 1);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(
    const char *symbol, void **fn, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry(TDM__RT_cudaGetDriverEntryPoint_ptsz, symbol, fn, flags, st, 1);
}

/* Headers before CUDA 12.5 lack cudaGetDriverEntryPointByVersion and its
 * renaming to _ptsz (cuda_runtime.c says why it is hooked anyway): both
 * as 12.5's header has them. */
#if CUDART_VERSION < 12050
#define cudaGetDriverEntryPointByVersion cudaGetDriverEntryPointByVersion_ptsz
extern cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st);
#endif

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry_ver(TDM__RT_cudaGetDriverEntryPointByVersion_ptsz, symbol, fn, version,
                             flags, st, 1);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t s,
                                                           enum cudaStreamCaptureMode mode)
{
    return tdm__rt_begin_capture(TDM__RT_cudaStreamBeginCapture_ptsz, s, mode);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    return tdm__rt_end_capture(TDM__RT_cudaStreamEndCapture_ptsz, s, graph);
}

#if TDM__RT_HAS_TO_GRAPH
TDM_RT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCaptureToGraph(
    cudaStream_t s, cudaGraph_t graph, const cudaGraphNode_t *deps,
    const cudaGraphEdgeData *edges, size_t n, enum cudaStreamCaptureMode mode)
{
    return tdm__rt_to_graph(TDM__RT_cudaStreamBeginCaptureToGraph_ptsz, s, graph, deps, edges,
                            n, mode);
}
#endif
