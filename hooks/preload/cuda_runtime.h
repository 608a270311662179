/* hooks/preload/cuda_runtime.h: what the CUDA runtime API hooks share
 * (cuda_runtime.c, cuda_runtime_ptsz.c, through cuda_runtime_body.h):
 * the runtime functions they hook or call, and the runtime-side helpers
 * of cuda_runtime_real.c (real functions, device, version, errors).
 *
 * Declarations only; nothing here depends on which file includes it, so
 * cuda_runtime_ptsz.c may include it with CUDA_API_PER_THREAD_DEFAULT_STREAM
 * defined (no declaration below names a function the runtime's header
 * renames).
 */
#ifndef TDM_HOOKS_PRELOAD_CUDA_RUNTIME_H
#define TDM_HOOKS_PRELOAD_CUDA_RUNTIME_H

#include <cuda_runtime_api.h>

#include "cuda_hooks.h"

/* A hook's definition: exported (the preload's version script then keeps
 * exactly the names listed in cuda.syms). */
#define TDM_RT_EXPORT __attribute__((visibility("default")))

/* The runtime functions hooked or called, for their real pointers. */
#define TDM__RT_FUNCS(X)                                                       \
    X(cudaMalloc) X(cudaFree) X(cudaMallocAsync) X(cudaMallocAsync_ptsz)       \
    X(cudaFreeAsync) X(cudaFreeAsync_ptsz) X(cudaMallocFromPoolAsync)          \
    X(cudaMallocFromPoolAsync_ptsz) X(cudaMallocManaged) X(cudaMallocHost)     \
    X(cudaHostAlloc) X(cudaFreeHost) X(cudaMallocPitch)                        \
    X(cudaGetDriverEntryPoint) X(cudaGetDriverEntryPoint_ptsz)                 \
    X(cudaGetDriverEntryPointByVersion)                                        \
    X(cudaGetDriverEntryPointByVersion_ptsz) X(cudaGetDevice)                  \
    X(cudaMemGetInfo) X(cudaRuntimeGetVersion) X(cudaGetLastError)             \
    X(cudaPeekAtLastError) X(cudaStreamBeginCapture)                           \
    X(cudaStreamBeginCapture_ptsz) X(cudaStreamEndCapture)                     \
    X(cudaStreamEndCapture_ptsz) TDM__RT_TO_GRAPH(X)

/* cudaStreamBeginCaptureToGraph came with CUDA 12.3. */
#if CUDART_VERSION >= 12030
#define TDM__RT_HAS_TO_GRAPH 1
#define TDM__RT_TO_GRAPH(X)                                                    \
    X(cudaStreamBeginCaptureToGraph) X(cudaStreamBeginCaptureToGraph_ptsz)
#else
#define TDM__RT_HAS_TO_GRAPH 0
#define TDM__RT_TO_GRAPH(X)
#endif

enum {
#define TDM__RT_ENUM(name) TDM__RT_##name,
    TDM__RT_FUNCS(TDM__RT_ENUM)
#undef TDM__RT_ENUM
    TDM__RT_COUNT
};

/* No runtime behind our symbol (a program found ours by name with no
 * libcudart loaded): what a runtime without a driver answers. */
#define TDM_RT_ABSENT cudaErrorInsufficientDriver

/* ---- cuda_runtime_real.c ------------------------------------------------ */

/* Each call goes to the runtime its caller linked (a process may hold a
 * CUDA 12 and a CUDA 13 libcudart, one per library): the functions below
 * take the address the hook returns to, and the macros pass it from the
 * hook (the bodies are always_inline, so that is the program's call).
 *
 * The runtime's function TDM__RT_<name> for a call from `caller`: that of
 * the libcudart the caller's object depends on, else the next definition
 * after ours (libcudart in the global scope, or whatever loaded object has
 * it when the runtime was loaded privately); resolved once per runtime;
 * NULL when absent. */
TDM_CUDA_HIDDEN void *tdm__cuda_rt_real_for(int f, const void *caller);
/* That runtime's current device for the calling thread (0 when unknown),
 * and its free bytes for oom events. */
TDM_CUDA_HIDDEN int tdm__cuda_rt_device_for(const void *caller);
TDM_CUDA_HIDDEN size_t tdm__cuda_rt_free_bytes_for(const void *caller);
/* That runtime's version (cudaRuntimeGetVersion), for entry-point lookups. */
TDM_CUDA_HIDDEN int tdm__cuda_rt_version_for(const void *caller);
#define tdm__cuda_rt_real(f) tdm__cuda_rt_real_for((f), __builtin_return_address(0))
#define tdm__cuda_rt_device() tdm__cuda_rt_device_for(__builtin_return_address(0))
#define tdm__cuda_rt_free_bytes() tdm__cuda_rt_free_bytes_for(__builtin_return_address(0))
#define tdm__cuda_rt_version() tdm__cuda_rt_version_for(__builtin_return_address(0))
/* The runtime's error for a driver error from cache mode's provider. */
TDM_CUDA_HIDDEN cudaError_t tdm__cuda_rt_error(CUresult r);

/* The last error, as the runtime keeps it per thread until
 * cudaGetLastError reads and clears it (cudaPeekAtLastError only reads).
 * A call cache mode answers itself (out of memory, a bad free) never
 * reaches the runtime, so its error is kept here for the calling thread:
 * tdm__cuda_rt_served_error keeps a non-success r and returns r;
 * tdm__cuda_rt_served_last returns the one kept (cudaSuccess if none)
 * and, when `clear`, forgets it. */
TDM_CUDA_HIDDEN cudaError_t tdm__cuda_rt_served_error(cudaError_t r);
/* A cudaStreamBeginCapture* that returned r / a cudaStreamEndCapture that
 * returned r: keeps the count of tdm__cuda_captures_underway. */
TDM_CUDA_HIDDEN void tdm__cuda_rt_capture_begun(cudaError_t r);
TDM_CUDA_HIDDEN void tdm__cuda_rt_capture_ended(cudaError_t r);
TDM_CUDA_HIDDEN cudaError_t tdm__cuda_rt_served_last(int clear);

#endif
