/* simcuda/blas/cublaslt.c: the simulated cuBLASLt (libsimcublasLt.so,
 * soname libcublasLt.so.13): handles (cuBLAS's, which PyTorch passes as
 * cuBLASLt's), matmul, layout and preference descriptors that keep nothing
 * but their validity, heuristics that offer one algorithm needing no
 * workspace, and a matmul that checks its handle and descriptors and
 * computes nothing (simblas.h).  Other entry points are stubs answering
 * CUBLAS_STATUS_NOT_SUPPORTED.  No lock: descriptors belong to their user.
 */
#define _GNU_SOURCE
#include "simblas.h"

#include <stdlib.h>
#include <string.h>

typedef struct tdm__simblas_handle *cublasLtHandle_t;
struct desc { uint32_t magic; };
#define DESC_MATMUL 0x4c544d4du
#define DESC_LAYOUT 0x4c544c59u
#define DESC_PREF 0x4c545052u
typedef struct desc *cublasLtMatmulDesc_t, *cublasLtMatrixLayout_t, *cublasLtMatmulPreference_t;

/* cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t as documented. */
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
_Static_assert(sizeof(cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t is 64 bytes");
_Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "cublasLtMatmulHeuristicResult_t layout");

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
size_t cublasLtGetVersion(void);
size_t cublasLtGetCudartVersion(void);
cublasStatus_t cublasLtGetProperty(int type, int *v);
const char *cublasLtGetStatusName(cublasStatus_t s);
const char *cublasLtGetStatusString(cublasStatus_t s);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int compute, int scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr, const void *buf, size_t n);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *d, int type, uint64_t rows, uint64_t cols,
                                          int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t d);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t d, int attr, const void *buf, size_t n);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *d);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t d);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t d, int attr, const void *buf,
                                                    size_t n);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results, int *returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b,
                              const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo, void *ws,
                              size_t ws_size, void *stream);

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  if (!h)
    return CUBLAS_STATUS_INVALID_VALUE;
  struct tdm__simblas_handle *x = calloc(1, sizeof *x);
  if (!x)
    return CUBLAS_STATUS_ALLOC_FAILED;
  x->magic = SIMBLAS_HANDLE_MAGIC;
  x->device = tdm__simcuda_current_device();
  *h = x;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  if (!tdm__simblas_check(h))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) { return SIMBLAS_VERSION; }
size_t cublasLtGetCudartVersion(void) { return 13000; }

cublasStatus_t cublasLtGetProperty(int type, int *v) {
  if (!v || type < 0 || type > 2)
    return CUBLAS_STATUS_INVALID_VALUE;
  *v = type == 0 ? SIMBLAS_MAJOR : type == 1 ? SIMBLAS_MINOR : SIMBLAS_PATCH;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char *cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  default: return "unknown error";
  }
}

static cublasStatus_t create(struct desc **d, uint32_t magic) {
  if (!d)
    return CUBLAS_STATUS_INVALID_VALUE;
  struct desc *x = malloc(sizeof *x);
  if (!x)
    return CUBLAS_STATUS_ALLOC_FAILED;
  x->magic = magic;
  *d = x;
  return CUBLAS_STATUS_SUCCESS;
}

static int ok(const struct desc *d, uint32_t magic) { return d && d->magic == magic; }

static cublasStatus_t destroy(struct desc *d, uint32_t magic) {
  if (!d)
    return CUBLAS_STATUS_SUCCESS;  /* destroying NULL is allowed */
  if (!ok(d, magic))
    return CUBLAS_STATUS_INVALID_VALUE;
  d->magic = 0;
  free(d);
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t set(struct desc *d, uint32_t magic, const void *buf, size_t n) {
  return ok(d, magic) && buf && n ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int compute, int scale) {
  return create(d, DESC_MATMUL);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return destroy(d, DESC_MATMUL); }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr, const void *buf, size_t n) {
  return set(d, DESC_MATMUL, buf, n);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *d, int type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (ld < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  return create(d, DESC_LAYOUT);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t d) { return destroy(d, DESC_LAYOUT); }
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t d, int attr, const void *buf, size_t n) {
  return set(d, DESC_LAYOUT, buf, n);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *d) { return create(d, DESC_PREF); }
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t d) { return destroy(d, DESC_PREF); }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t d, int attr, const void *buf,
                                                    size_t n) {
  return set(d, DESC_PREF, buf, n);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results, int *returned) {
  if (!tdm__simblas_check(h))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!ok(op, DESC_MATMUL) || !ok(a, DESC_LAYOUT) || !ok(b, DESC_LAYOUT) || !ok(c, DESC_LAYOUT) ||
      !ok(d, DESC_LAYOUT) || !ok(pref, DESC_PREF) || requested <= 0 || !results || !returned)
    return CUBLAS_STATUS_INVALID_VALUE;
  /* One algorithm, which needs no workspace and fills the device once. */
  memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = 1;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b,
                              const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo, void *ws,
                              size_t ws_size, void *stream) {
  if (!tdm__simblas_check(h))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!ok(op, DESC_MATMUL) || !ok(a, DESC_LAYOUT) || !ok(b, DESC_LAYOUT) || !ok(c, DESC_LAYOUT) ||
      !ok(d, DESC_LAYOUT) || !alpha || !beta || (ws_size && !ws))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!tdm__simcuda_stream_valid(stream))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
