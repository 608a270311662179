// tests/gpu/cuda_check.h: what the GPU test programs (cuda_app.cu,
// cuda_streams.cu) do with a CUDA runtime call that fails: name the call,
// its place and the error, and exit 1, so that run.sh reports the row
// failed with the reason.
#ifndef TDM_TESTS_GPU_CUDA_CHECK_H
#define TDM_TESTS_GPU_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call,    \
                         cudaGetErrorName(e_));                                    \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

#endif
