/* simcuda/blas/simblas.h: the cuBLAS and cuBLASLt ABI the simulated
 * libraries implement, declared here from NVIDIA's cuBLAS documentation
 * (the toolkit here ships no cuBLAS headers), and the handle both share:
 * PyTorch passes its cuBLAS handle to cuBLASLt as a cublasLtHandle_t.
 *
 * A GEMM, GEMV or dot product checks its handle and sizes and does no
 * arithmetic (kernels are not run): its output keeps what the memory held.
 * Several entry points are declared with the leading parameters they read
 * only; under the x86-64 System V convention a caller's further arguments
 * are then simply not read.
 */
#ifndef SIMBLAS_H
#define SIMBLAS_H

#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
} cublasStatus_t;

/* cuBLAS 13.1.1, the version the CUDA 13 wheel pins (nvidia-cublas). */
#define SIMBLAS_VERSION 130101
#define SIMBLAS_MAJOR 13
#define SIMBLAS_MINOR 1
#define SIMBLAS_PATCH 1

struct tdm__simblas_handle {
  uint32_t magic;
  int device;
  void *stream;
  void *workspace;
  size_t workspace_size;
  int math_mode, pointer_mode, atomics_mode, sm_count_target, emulation;
};
#define SIMBLAS_HANDLE_MAGIC 0x424c4153u

static inline struct tdm__simblas_handle *tdm__simblas_check(void *h) {
  struct tdm__simblas_handle *x = (struct tdm__simblas_handle *)h;
  return x && x->magic == SIMBLAS_HANDLE_MAGIC ? x : NULL;
}

#endif
