/* tests/hooks/cuda/rt_app_ptsz.c: the part of rt_app built as code compiled
 * with --default-stream per-thread is: CUDA_API_PER_THREAD_DEFAULT_STREAM
 * makes the runtime header call the _ptsz entry points, where stream 0 is
 * the calling thread's own default stream. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda_runtime_api.h>

#include "rt_app.h"

__attribute__((noinline)) void *app_alloc_per_thread_stream(void)
{
    void *p = NULL;
    app_report("cudaMallocAsync_ptsz 8192", cudaMallocAsync(&p, 8192, 0));
    return p;
}

__attribute__((noinline)) void app_free_per_thread_stream(void *p)
{
    app_report("cudaFreeAsync_ptsz", cudaFreeAsync(p, 0));
}
