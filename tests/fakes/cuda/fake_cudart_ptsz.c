/* tests/fakes/cuda/fake_cudart_ptsz.c: the _ptsz entry points of the fake
 * runtime.  Compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (defined
 * below), so that cuda_runtime_api.h renames cudaMallocAsync & co. to
 * their _ptsz forms and every definition below is checked against the
 * real _ptsz prototype.  No state of its own. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "fake_cudart_internal.h"

cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    fake_rt_count(RT_cudaMallocAsync_ptsz);
    return fake_rt_malloc_async(p, n, s, 1);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    fake_rt_count(RT_cudaFreeAsync_ptsz);
    return fake_rt_free_async(p, s, 1);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool,
                                              cudaStream_t s)
{
    fake_rt_count(RT_cudaMallocFromPoolAsync_ptsz);
    return fake_rt_malloc_from_pool(p, n, pool, s, 1);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                              unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *st)
{
    fake_rt_count(RT_cudaGetDriverEntryPoint_ptsz);
    return fake_rt_entry_point(symbol, fn, CUDART_VERSION, flags, st, 1);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                       unsigned int version,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *st)
{
    fake_rt_count(RT_cudaGetDriverEntryPointByVersion_ptsz);
    return fake_rt_entry_point(symbol, fn, (int)version, flags, st, 1);
}
