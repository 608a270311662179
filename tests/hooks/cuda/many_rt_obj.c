/* tests/hooks/cuda/many_rt_obj.c: a small library that calls the CUDA
 * runtime it was linked against, as a PyTorch extension or an AOT-compiled
 * kernel library does after each launch.  Built twice (linked to the fake
 * libcudart.so.12 and to the fake libcudart.so.13) and copied under many
 * names by test_many_callers.sh, so that one process loads more calling
 * objects than any fixed table of them holds.
 *   obj_peek()    cudaPeekAtLastError from this object
 *   obj_get()     cudaGetLastError from this object
 *   obj_fail(k)   a call that fails in this object's runtime: k 0,
 *                 cudaSetDevice(1000) (cudaErrorInvalidDevice); k 1,
 *                 cudaMalloc(NULL, 1) (cudaErrorInvalidValue) */
#include <cuda_runtime_api.h>

#define API __attribute__((visibility("default"), noinline))

API int obj_peek(void);
API int obj_get(void);
API int obj_fail(int k);

API int obj_peek(void)
{
    return (int)cudaPeekAtLastError();
}

API int obj_get(void)
{
    return (int)cudaGetLastError();
}

API int obj_fail(int k)
{
    return k == 0 ? (int)cudaSetDevice(1000) : (int)cudaMalloc(NULL, 1);
}
