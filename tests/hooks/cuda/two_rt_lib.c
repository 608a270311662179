/* tests/hooks/cuda/two_rt_lib.c: a library that uses the CUDA runtime it
 * was linked against, built twice (TWO_RT_NAME=cu12 linked to the fake
 * libcudart.so.12, cu13 to the fake libcudart.so.13), as a process may load
 * one library built for CUDA 12 and another for CUDA 13.
 * two_rt_<name>_work(n): n cudaMalloc + cudaFree pairs of 1 KiB + i bytes;
 * returns the first error, or cudaSuccess. */
#include <cuda_runtime_api.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define WORK CAT(CAT(two_rt_, TWO_RT_NAME), _work)

__attribute__((visibility("default"))) int WORK(int n);

__attribute__((noinline, visibility("default"))) int WORK(int n)
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        cudaError_t r = cudaMalloc(&p, 1024 + (size_t)i);
        if (r != cudaSuccess)
            return (int)r;
        r = cudaFree(p);
        if (r != cudaSuccess)
            return (int)r;
    }
    return (int)cudaSuccess;
}
