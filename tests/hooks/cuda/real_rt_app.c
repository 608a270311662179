/* tests/hooks/cuda/real_rt_app.c: a CUDA runtime program linked against the
 * REAL libcudart (built twice: libcudart.so.13, and libcudart_static.a as
 * nvcc links it by default).  There is no GPU here, so every call fails;
 * the tests check that the failure codes are the same with tidemark
 * preloaded, that nothing crashes, and, over the fake driver with
 * FAKE_CUDA_PROBE_TABLE=1, that the runtime's own table of driver
 * functions was given tidemark's wrappers (the fake calls through it from
 * cuInit; see fake_cuda.h).  Return codes on stdout.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE void app_query(void)
{
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    printf("cudaGetDeviceCount -> %d (%s) n=%d\n", (int)e, cudaGetErrorName(e), n);
}

static NOINLINE void app_allocate(void)
{
    void *d = NULL, *h = NULL, *a = NULL;
    printf("cudaMalloc -> %d\n", (int)cudaMalloc(&d, 1 << 20));
    printf("cudaMallocHost -> %d\n", (int)cudaMallocHost(&h, 4096));
    printf("cudaMallocAsync -> %d\n", (int)cudaMallocAsync(&a, 4096, 0));
    printf("cudaFree -> %d\n", (int)cudaFree(d));
    printf("cudaFreeHost -> %d\n", (int)cudaFreeHost(h));
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000,
                                                     cudaEnableDefault, &q);
    printf("cudaGetDriverEntryPointByVersion -> %d q=%d found=%d\n", (int)e, (int)q, fn != NULL);
}

int main(void)
{
    app_query();
    app_allocate();
    return 0;
}
