/* tests/hooks/cuda/fake_ipc_lib.c: a library that allocates device memory
 * for export over CUDA IPC, as NCCL's legacy P2P transport does
 * (ncclCudaCalloc: cudaMalloc, a memset, then cudaIpcGetMemHandle of that
 * buffer, which the peer opens with no offset).  Built five times: as
 * libnccl.so, the name cache mode knows (the driver's cuMemAlloc, as
 * NCCL's static cudart makes it), as libnccl_rt.so (the shared runtime's
 * cudaMalloc), as libtdm_ipc_named.so, a library only TIDEMARK_CONF's
 * ipc_libraries names, and as libtdm_ipc_exporter.so, which makes the
 * export itself (FAKE_IPC_EXPORTS: it imports cuIpcGetMemHandle), named
 * nowhere; sem_app ipc loads these four.  The fifth, libtdm_alloc_rt.so,
 * over the runtime, named nowhere, is ipc_rt_app lib's.  All but the
 * exporter import no export: the program exports their buffers
 * (hooks/preload/cuda_ipc.c). */
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#ifdef FAKE_IPC_RUNTIME
#include <cuda_runtime_api.h>
#endif

__attribute__((visibility("default"))) int fake_ipc_lib_alloc(CUdeviceptr *p, size_t n);
#ifdef FAKE_IPC_EXPORTS
__attribute__((visibility("default"))) int fake_ipc_lib_export(CUipcMemHandle *h, CUdeviceptr p);

/* The library's own export of a buffer, as NCCL's p2pSendSetup makes it. */
int fake_ipc_lib_export(CUipcMemHandle *h, CUdeviceptr p)
{
    return (int)cuIpcGetMemHandle(h, p);
}
#endif

/* The call made after cuMemAlloc keeps it a call from this library (a
 * tail call would return to the program), as NCCL's memset does. */
int fake_ipc_lib_alloc(CUdeviceptr *p, size_t n)
{
#ifdef FAKE_IPC_RUNTIME /* NCCL built with the shared cudart: its cudaMalloc */
    void *q = NULL;
    int r = cudaMalloc(&q, n) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)q;
#else /* NCCL's own static cudart: cudaMalloc reaches the driver from here */
    CUresult r = cuMemAlloc(p, n);
#endif
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    return (int)r;
}
