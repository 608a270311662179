/* simcuda/runtime/simcudart.h: what the runtime's files share
 * (libsimcudart.so, soname libcudart.so.13, version node libcudart.so.13).
 *
 * Per thread: the current device (0 until set, as in CUDA), the last
 * error (set by every failing call, read and cleared by cudaGetLastError),
 * and the launch configuration stack <<<>>> pushes and the kernel stub pops.
 */
#ifndef SIMCUDART_H
#define SIMCUDART_H

#include <cuda_runtime_api.h>

#include "simcuda.h"

/* Record e as this thread's last error when it is one; return it. */
cudaError_t tdm__simcudart_ret(cudaError_t e);
/* The runtime's code for a driver result. */
cudaError_t tdm__simcudart_from_cu(CUresult r);
/* This thread's current device, its primary context made current and
 * active (the runtime's implicit initialization); -1 if there is no device. */
int tdm__simcudart_init(void);
/* This thread's current device, without initializing it. */
int tdm__simcudart_device(void);
/* The thread limit a kernel was registered with (-1 if none). */
int tdm__simcudart_thread_limit(const void *host_fun);

/* A registered __device__ variable's host shadow, where the simulated
 * device keeps it, and its size; NULL if symbol is not one. */
void *tdm__simcudart_symbol(const void *symbol, size_t *size);

#define RET(e) return tdm__simcudart_ret(e)
#define RET_CU(r) return tdm__simcudart_ret(tdm__simcudart_from_cu(r))

#endif
