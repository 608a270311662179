/* tests/hooks/cuda/fake_ipc_lib.c: a library that allocates device memory
 * to export it over CUDA IPC, as NCCL's legacy P2P transport does
 * (ncclCudaCalloc: cudaMalloc, a memset, then cudaIpcGetMemHandle of that
 * buffer, which the peer opens with no offset).  Built twice: as
 * libnccl.so, the name cache mode knows, and as libtdm_ipc_named.so, a
 * library only TIDEMARK_CONF's ipc_libraries names.  sem_app ipc loads
 * both (hooks/preload/cuda_ipc.c). */
#include <cuda.h>
#include <stddef.h>

__attribute__((visibility("default"))) int fake_ipc_lib_alloc(CUdeviceptr *p, size_t n);

/* The call made after cuMemAlloc keeps it a call from this library (a
 * tail call would return to the program), as NCCL's memset does. */
int fake_ipc_lib_alloc(CUdeviceptr *p, size_t n)
{
    CUresult r = cuMemAlloc(p, n);
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    return (int)r;
}
