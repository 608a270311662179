/* tests/fakes/cuda/fake_cudart_internal.h: shared between the two
 * translation units of the fake runtime (fake_cudart.c, and
 * fake_cudart_ptsz.c which is compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM
 * so that the header gives its functions the exact _ptsz prototypes).
 * Hidden: nothing here is exported. */
#ifndef TDM_TESTS_FAKE_CUDART_INTERNAL_H
#define TDM_TESTS_FAKE_CUDART_INTERNAL_H

#include <cuda_runtime_api.h>

#define RT_HIDDEN __attribute__((visibility("hidden")))

/* Every runtime entry point, for the call counters. */
#define RT_FUNCS(X)                                                            \
    X(cudaGetDeviceCount) X(cudaGetDevice) X(cudaSetDevice) X(cudaMalloc)      \
    X(cudaFree) X(cudaMallocAsync) X(cudaMallocAsync_ptsz) X(cudaFreeAsync)    \
    X(cudaFreeAsync_ptsz) X(cudaMallocFromPoolAsync)                           \
    X(cudaMallocFromPoolAsync_ptsz) X(cudaMallocManaged) X(cudaMallocHost)     \
    X(cudaHostAlloc) X(cudaFreeHost) X(cudaMallocPitch)                        \
    X(cudaGetDriverEntryPoint) X(cudaGetDriverEntryPoint_ptsz)                 \
    X(cudaGetDriverEntryPointByVersion)                                        \
    X(cudaGetDriverEntryPointByVersion_ptsz) X(cudaRuntimeGetVersion)          \
    X(cudaDriverGetVersion) X(cudaGetLastError) X(cudaPeekAtLastError)         \
    X(cudaStreamCreate)                                                        \
    X(cudaStreamDestroy) X(cudaDeviceGetDefaultMemPool) X(cudaMemGetInfo)      \
    X(cudaDeviceSynchronize) X(cudaStreamBeginCapture) X(cudaStreamEndCapture) \
    X(cudaStreamIsCapturing) X(cudaIpcGetMemHandle) X(cudaIpcOpenMemHandle)     \
    X(cudaIpcCloseMemHandle)

enum {
#define RT_ENUM(name) RT_##name,
    RT_FUNCS(RT_ENUM)
#undef RT_ENUM
    RT_COUNT
};

/* Counts a call of entry point `fn`. */
RT_HIDDEN void fake_rt_count(int fn);
/* Initializes the runtime (driver loaded, cuInit, primary context of the
 * current device current on this thread); the error to return, or 0. */
RT_HIDDEN cudaError_t fake_rt_ready(void);
/* Stores and returns `e` as this thread's last error. */
RT_HIDDEN cudaError_t fake_rt_result(cudaError_t e);

/* The shared bodies; `ptsz` picks the driver's per-thread variant. */
RT_HIDDEN cudaError_t fake_rt_malloc_async(void **p, size_t n, cudaStream_t s, int ptsz);
RT_HIDDEN cudaError_t fake_rt_free_async(void *p, cudaStream_t s, int ptsz);
RT_HIDDEN cudaError_t fake_rt_malloc_from_pool(void **p, size_t n, cudaMemPool_t pool,
                                               cudaStream_t s, int ptsz);
RT_HIDDEN cudaError_t fake_rt_entry_point(const char *symbol, void **fn, int version,
                                          unsigned long long flags,
                                          enum cudaDriverEntryPointQueryResult *st,
                                          int ptsz);

#endif
