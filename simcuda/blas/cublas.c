/* simcuda/blas/cublas.c: the simulated cuBLAS (libsimcublas.so, soname
 * libcublas.so.13): handles with their stream, workspace and modes, and
 * the level-1/2/3 routines PyTorch calls, which check their arguments and
 * compute nothing (simblas.h).  A handle allocates no device memory of its
 * own: the workspace is what the caller sets (PyTorch's comes from its
 * caching allocator).  Every other entry point of the closure is a stub
 * answering CUBLAS_STATUS_NOT_SUPPORTED.  No lock: a handle belongs to its
 * thread, as cuBLAS requires.
 */
#define _GNU_SOURCE
#include "simblas.h"

#include <stdlib.h>
#include <string.h>

typedef struct tdm__simblas_handle *cublasHandle_t;

/* Prototypes, from the cuBLAS documentation. */
cublasStatus_t cublasCreate_v2(cublasHandle_t *h);
cublasStatus_t cublasDestroy_v2(cublasHandle_t h);
cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v);
cublasStatus_t cublasGetProperty(int type, int *v);
size_t cublasGetCudartVersion(void);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, void *stream);
cublasStatus_t cublasGetStream_v2(cublasHandle_t h, void **stream);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t size);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t h, int *mode);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, int mode);
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, int *mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, int mode);
cublasStatus_t cublasGetAtomicsMode(cublasHandle_t h, int *mode);
cublasStatus_t cublasSetSmCountTarget(cublasHandle_t h, int n);
cublasStatus_t cublasGetSmCountTarget(cublasHandle_t h, int *n);
cublasStatus_t cublasSetEmulationStrategy(cublasHandle_t h, int s);

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  if (!h)
    return CUBLAS_STATUS_INVALID_VALUE;
  int dev = tdm__simcuda_current_device();
  if (dev < 0)
    return CUBLAS_STATUS_NOT_INITIALIZED;  /* no current context */
  struct tdm__simblas_handle *x = calloc(1, sizeof *x);
  if (!x)
    return CUBLAS_STATUS_ALLOC_FAILED;
  x->magic = SIMBLAS_HANDLE_MAGIC;
  x->device = dev;
  *h = x;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  if (!tdm__simblas_check(h))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v) {
  if (!v)
    return CUBLAS_STATUS_INVALID_VALUE;
  *v = SIMBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(int type, int *v) {
  /* libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2. */
  if (!v || type < 0 || type > 2)
    return CUBLAS_STATUS_INVALID_VALUE;
  *v = type == 0 ? SIMBLAS_MAJOR : type == 1 ? SIMBLAS_MINOR : SIMBLAS_PATCH;
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasGetCudartVersion(void) { return 13000; }

static const char *const g_status[][2] = {
    {"CUBLAS_STATUS_SUCCESS", "the operation completed successfully"},
    {"CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {"CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {"CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {"CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {"CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {"CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {"CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {"CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {"CUBLAS_STATUS_LICENSE_ERROR", "error detected trying to check the license"},
};

static int status_index(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return 0;
  case CUBLAS_STATUS_NOT_INITIALIZED: return 1;
  case CUBLAS_STATUS_ALLOC_FAILED: return 2;
  case CUBLAS_STATUS_INVALID_VALUE: return 3;
  case CUBLAS_STATUS_ARCH_MISMATCH: return 4;
  case CUBLAS_STATUS_MAPPING_ERROR: return 5;
  case CUBLAS_STATUS_EXECUTION_FAILED: return 6;
  case CUBLAS_STATUS_INTERNAL_ERROR: return 7;
  case CUBLAS_STATUS_NOT_SUPPORTED: return 8;
  case CUBLAS_STATUS_LICENSE_ERROR: return 9;
  }
  return -1;
}

const char *cublasGetStatusName(cublasStatus_t s) {
  int i = status_index(s);
  return i < 0 ? "CUBLAS_STATUS_UNKNOWN" : g_status[i][0];
}

const char *cublasGetStatusString(cublasStatus_t s) {
  int i = status_index(s);
  return i < 0 ? "unknown error" : g_status[i][1];
}

#define HANDLE(h)                     \
  do {                                \
    if (!tdm__simblas_check(h))       \
      return CUBLAS_STATUS_NOT_INITIALIZED; \
  } while (0)

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, void *stream) {
  HANDLE(h);
  if (!tdm__simcuda_stream_valid(stream))
    return CUBLAS_STATUS_INVALID_VALUE;
  h->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, void **stream) {
  HANDLE(h);
  if (!stream)
    return CUBLAS_STATUS_INVALID_VALUE;
  *stream = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t size) {
  HANDLE(h);
  /* The documentation asks for 256-byte alignment. */
  if ((uintptr_t)ws % 256 || (size && !ws))
    return CUBLAS_STATUS_INVALID_VALUE;
  h->workspace = ws;
  h->workspace_size = size;
  return CUBLAS_STATUS_SUCCESS;
}

#define GETSET(Name, field)                                        \
  cublasStatus_t cublasSet##Name(cublasHandle_t h, int v) {        \
    HANDLE(h);                                                     \
    h->field = v;                                                  \
    return CUBLAS_STATUS_SUCCESS;                                  \
  }                                                                \
  cublasStatus_t cublasGet##Name(cublasHandle_t h, int *v) {       \
    HANDLE(h);                                                     \
    if (!v)                                                        \
      return CUBLAS_STATUS_INVALID_VALUE;                          \
    *v = h->field;                                                 \
    return CUBLAS_STATUS_SUCCESS;                                  \
  }
GETSET(MathMode, math_mode)
GETSET(PointerMode_v2, pointer_mode)
GETSET(AtomicsMode, atomics_mode)
GETSET(SmCountTarget, sm_count_target)
#undef GETSET

cublasStatus_t cublasSetEmulationStrategy(cublasHandle_t h, int s) {
  HANDLE(h);
  h->emulation = s;
  return CUBLAS_STATUS_SUCCESS;
}

/* ---- computations: arguments checked, nothing computed ------------------- */

static cublasStatus_t gemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, int64_t batch) {
  HANDLE(h);
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

/* C = alpha op(A) op(B) + beta C: (handle, transa, transb, m, n, k, ...). */
#define GEMM(name)                                                                          \
  cublasStatus_t name(cublasHandle_t h, int ta, int tb, int m, int n, int k);               \
  cublasStatus_t name(cublasHandle_t h, int ta, int tb, int m, int n, int k) { return gemm(h, m, n, k, 1); }
#define GEMM64(name)                                                                        \
  cublasStatus_t name(cublasHandle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k);   \
  cublasStatus_t name(cublasHandle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k) {  \
    return gemm(h, m, n, k, 1);                                                              \
  }
GEMM(cublasSgemm_v2)
GEMM(cublasDgemm_v2)
GEMM(cublasCgemm_v2)
GEMM(cublasZgemm_v2)
GEMM(cublasGemmEx)
GEMM(cublasSgemmEx)
GEMM(cublasSgemmBatched)
GEMM(cublasDgemmBatched)
GEMM(cublasCgemmBatched)
GEMM(cublasZgemmBatched)
GEMM(cublasSgemmStridedBatched)
GEMM(cublasDgemmStridedBatched)
GEMM(cublasCgemmStridedBatched)
GEMM(cublasZgemmStridedBatched)
GEMM(cublasGemmStridedBatchedEx)
GEMM64(cublasSgemm_v2_64)
GEMM64(cublasDgemm_v2_64)
GEMM64(cublasCgemm_v2_64)
GEMM64(cublasZgemm_v2_64)
GEMM64(cublasSgemmStridedBatched_64)
GEMM64(cublasDgemmStridedBatched_64)
GEMM64(cublasCgemmStridedBatched_64)
GEMM64(cublasZgemmStridedBatched_64)
#undef GEMM
#undef GEMM64

/* y = alpha op(A) x + beta y: (handle, trans, m, n, ...). */
#define GEMV(name, T)                                              \
  cublasStatus_t name(cublasHandle_t h, int t, T m, T n);           \
  cublasStatus_t name(cublasHandle_t h, int t, T m, T n) { return gemm(h, m, n, 1, 1); }
GEMV(cublasSgemv_v2, int)
GEMV(cublasDgemv_v2, int)
GEMV(cublasCgemv_v2, int)
GEMV(cublasZgemv_v2, int)
GEMV(cublasSgemv_v2_64, int64_t)
GEMV(cublasDgemv_v2_64, int64_t)
GEMV(cublasCgemv_v2_64, int64_t)
GEMV(cublasZgemv_v2_64, int64_t)
GEMV(cublasSgemvStridedBatched_64, int64_t)
GEMV(cublasDgemvStridedBatched_64, int64_t)
GEMV(cublasCgemvStridedBatched_64, int64_t)
GEMV(cublasZgemvStridedBatched_64, int64_t)
#undef GEMV

/* Level 1: (handle, n, ...). */
#define L1(name, T)                                    \
  cublasStatus_t name(cublasHandle_t h, T n);          \
  cublasStatus_t name(cublasHandle_t h, T n) { return gemm(h, n, 1, 1, 1); }
L1(cublasSdot_v2, int)
L1(cublasDdot_v2, int)
L1(cublasCdotu_v2, int)
L1(cublasCdotc_v2, int)
L1(cublasZdotu_v2, int)
L1(cublasZdotc_v2, int)
L1(cublasDotEx, int)
L1(cublasSaxpy_v2, int)
L1(cublasDaxpy_v2, int)
L1(cublasCaxpy_v2, int)
L1(cublasZaxpy_v2, int)
L1(cublasSscal_v2, int)
L1(cublasDscal_v2, int)
L1(cublasCscal_v2, int)
L1(cublasZscal_v2, int)
L1(cublasCsscal_v2, int)
L1(cublasZdscal_v2, int)
L1(cublasSscal_v2_64, int64_t)
L1(cublasDscal_v2_64, int64_t)
L1(cublasCscal_v2_64, int64_t)
L1(cublasZscal_v2_64, int64_t)
L1(cublasCsscal_v2_64, int64_t)
L1(cublasZdscal_v2_64, int64_t)
#undef L1
