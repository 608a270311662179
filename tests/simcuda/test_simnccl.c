/* tests/simcuda/test_simnccl.c: the simulated NCCL (libsimnccl.so, soname
 * libnccl.so.2) through NCCL's ABI, as one rank of a job of three sees it
 * (preloaded with the rest of the platform, SIMCUDA_GPU=2xh100): the
 * version the wheel's NCCL reports, a communicator made locally from rank
 * and size whose buffers (one NCCL_BUFFSIZE per peer) are device memory
 * of the current device, each collective's one-rank copy, send/recv
 * leaving the receive buffer alone, ncclMemAlloc taking device memory,
 * splits, errors, and a stub of what is not simulated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)

/* NCCL's ABI, from its documentation (results, types as ints). */
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct nccl_comm *ncclComm_t;
enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };
enum { ncclInt8 = 0, ncclInt32 = 2, ncclFloat32 = 7, ncclSum = 0 };
int ncclGetVersion(int *v);
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank);
int ncclCommInitRankConfig(ncclComm_t *c, int nranks, ncclUniqueId id, int rank, void *config);
int ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, void *config);
int ncclCommDestroy(ncclComm_t c);
int ncclCommCount(ncclComm_t c, int *n);
int ncclCommUserRank(ncclComm_t c, int *r);
int ncclCommGetAsyncError(ncclComm_t c, int *err);
const char *ncclGetErrorString(int r);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclMemAlloc(void **p, size_t n);
int ncclMemFree(void *p);
int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *st);
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *st);
int ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, ncclComm_t c, void *st);
int ncclAllGather(const void *s, void *r, size_t n, int t, ncclComm_t c, void *st);
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *st);
int ncclAlltoAll(const void *s, void *r, size_t n, int t, ncclComm_t c, void *st);
int ncclGather(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *st);
int ncclSend(const void *s, size_t n, int t, int peer, ncclComm_t c, void *st);
int ncclRecv(void *r, size_t n, int t, int peer, ncclComm_t c, void *st);
int ncclWaitSignal(void); /* not simulated: a stub */

enum { RANK = 1, NRANKS = 3, N = 4 };

static size_t used(void) {
  size_t f = 0, t = 0;
  assert_int_equal(cudaMemGetInfo(&f, &t), cudaSuccess);
  return t - f;
}

/* Device buffers of n ints: in (values v0, v0+1, ...), out (all -1). */
static int *dev_ints(size_t n, int v0) {
  int *d = NULL, h[64];
  assert_true(n <= 64);
  for (size_t i = 0; i < n; i++)
    h[i] = v0 < 0 ? -1 : v0 + (int)i;
  assert_int_equal(cudaMalloc((void **)&d, n * sizeof(int)), cudaSuccess);
  assert_int_equal(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

static void expect_ints(const int *d, size_t n, const int *want) {
  int h[64];
  assert_int_equal(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(h, want, n * sizeof(int));
}

static ncclComm_t comm(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  assert_int_equal(ncclGetUniqueId(&id), ncclSuccess);
  assert_int_equal(ncclCommInitRankConfig(&c, NRANKS, id, RANK, NULL), ncclSuccess);
  return c;
}

static void test_version_comm(void **state) {
  (void)state;
  int v = 0, n = 0, r = -1, err = -1;
  assert_int_equal(ncclGetVersion(&v), ncclSuccess);
  assert_int_equal(v, 23007); /* nvidia-nccl-cu13 2.30.7, the wheel's */
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  size_t before = used();
  ncclComm_t c = comm();
  /* one 4 MiB NCCL_BUFFSIZE per peer, on device 1, until destroyed */
  assert_int_equal(used() - before, 2 * 4 * MiB);
  assert_int_equal(ncclCommCount(c, &n), ncclSuccess);
  assert_int_equal(ncclCommUserRank(c, &r), ncclSuccess);
  assert_int_equal(n, NRANKS);
  assert_int_equal(r, RANK);
  assert_int_equal(ncclCommGetAsyncError(c, &err), ncclSuccess);
  assert_int_equal(err, ncclSuccess);
  ncclComm_t s = NULL, none = c;
  assert_int_equal(ncclCommSplit(c, 0, RANK, &s, NULL), ncclSuccess);
  assert_int_equal(ncclCommCount(s, &n), ncclSuccess);
  assert_int_equal(n, NRANKS);
  assert_int_equal(ncclCommSplit(c, -1, RANK, &none, NULL), ncclSuccess); /* NCCL_SPLIT_NOCOLOR */
  assert_null(none);
  assert_int_equal(ncclCommDestroy(s), ncclSuccess);
  assert_int_equal(ncclCommDestroy(c), ncclSuccess);
  assert_int_equal(used(), before);
  /* NCCL_BUFFSIZE as NCCL reads it */
  setenv("NCCL_BUFFSIZE", "2097152", 1);
  c = comm();
  assert_int_equal(used() - before, 2 * 2 * MiB);
  assert_int_equal(ncclCommDestroy(c), ncclSuccess);
  unsetenv("NCCL_BUFFSIZE");
  /* a single rank holds no buffers; a bad rank is refused */
  ncclUniqueId id;
  assert_int_equal(ncclGetUniqueId(&id), ncclSuccess);
  assert_int_equal(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  assert_int_equal(used(), before);
  assert_int_equal(ncclCommDestroy(c), ncclSuccess);
  assert_int_equal(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
}

static void test_collectives(void **state) {
  (void)state;
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  ncclComm_t c = comm();
  int *in = dev_ints(NRANKS * N, 10), *out = dev_ints(NRANKS * N, -1);
  const int minus[NRANKS * N] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  int want[NRANKS * N];

  assert_int_equal(ncclGroupStart(), ncclSuccess);
  assert_int_equal(ncclAllReduce(in, out, N, ncclInt32, ncclSum, c, NULL), ncclSuccess);
  assert_int_equal(ncclGroupEnd(), ncclSuccess);
  assert_int_equal(ncclGroupEnd(), ncclInvalidUsage); /* no group open */
  int ar[N] = {10, 11, 12, 13};
  expect_ints(out, N, ar);

  /* all-gather: the rank's chunk in every slot */
  assert_int_equal(ncclAllGather(in, out, N, ncclInt32, c, NULL), ncclSuccess);
  for (int i = 0; i < NRANKS * N; i++)
    want[i] = 10 + i % N;
  expect_ints(out, NRANKS * N, want);

  /* reduce-scatter: the rank's slice */
  cudaMemcpy(out, minus, sizeof minus, cudaMemcpyHostToDevice);
  assert_int_equal(ncclReduceScatter(in, out, N, ncclInt32, ncclSum, c, NULL), ncclSuccess);
  int rs[N] = {10 + RANK * N, 11 + RANK * N, 12 + RANK * N, 13 + RANK * N};
  expect_ints(out, N, rs);

  /* all-to-all: the chunk this rank sends itself, in every slot, in place too */
  assert_int_equal(ncclAlltoAll(in, out, N, ncclInt32, c, NULL), ncclSuccess);
  for (int i = 0; i < NRANKS * N; i++)
    want[i] = 10 + RANK * N + i % N;
  expect_ints(out, NRANKS * N, want);
  int *inplace = dev_ints(NRANKS * N, 10);
  assert_int_equal(ncclAlltoAll(inplace, inplace, N, ncclInt32, c, NULL), ncclSuccess);
  expect_ints(inplace, NRANKS * N, want);

  /* broadcast, reduce, gather: only the root writes its output */
  cudaMemcpy(out, minus, sizeof minus, cudaMemcpyHostToDevice);
  assert_int_equal(ncclBroadcast(in, out, N, ncclInt32, 0, c, NULL), ncclSuccess);
  assert_int_equal(ncclReduce(in, out, N, ncclInt32, ncclSum, 0, c, NULL), ncclSuccess);
  assert_int_equal(ncclGather(in, out, N, ncclInt32, 0, c, NULL), ncclSuccess);
  expect_ints(out, NRANKS * N, minus);
  assert_int_equal(ncclBroadcast(in, out, N, ncclInt32, RANK, c, NULL), ncclSuccess);
  expect_ints(out, N, ar);
  assert_int_equal(ncclGather(in, out, N, ncclInt32, RANK, c, NULL), ncclSuccess);
  for (int i = 0; i < NRANKS * N; i++)
    want[i] = 10 + i % N;
  expect_ints(out, NRANKS * N, want);
  assert_int_equal(ncclBroadcast(in, out, N, ncclInt32, NRANKS, c, NULL), ncclInvalidArgument);

  /* send/recv: the receive buffer keeps what it holds */
  cudaMemcpy(out, minus, sizeof minus, cudaMemcpyHostToDevice);
  assert_int_equal(ncclSend(in, N, ncclInt32, 0, c, NULL), ncclSuccess);
  assert_int_equal(ncclRecv(out, N, ncclInt32, 2, c, NULL), ncclSuccess);
  expect_ints(out, N, minus);
  assert_int_equal(ncclRecv(out, N, ncclInt32, NRANKS, c, NULL), ncclInvalidArgument);

  /* sizes follow the type; an unknown type or communicator is refused */
  assert_int_equal(ncclAllReduce(in, out, 3, ncclInt8, ncclSum, c, NULL), ncclSuccess);
  assert_int_equal(ncclAllReduce(in, out, 1, 99, ncclSum, c, NULL), ncclInvalidArgument);
  assert_int_equal(ncclAllReduce(in, out, 1, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument);

  cudaFree(in);
  cudaFree(out);
  cudaFree(inplace);
  assert_int_equal(ncclCommDestroy(c), ncclSuccess);
}

static void test_mem_alloc(void **state) {
  (void)state;
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  size_t before = used();
  void *p = NULL;
  assert_int_equal(ncclMemAlloc(&p, 3 * MiB), ncclSuccess);
  assert_non_null(p);
  assert_int_equal(used() - before, 4 * MiB); /* the 2 MiB granularity */
  memset(p, 7, 3 * MiB);                     /* mapped, readable and writable */
  assert_int_equal(ncclMemFree(p), ncclSuccess);
  assert_int_equal(used(), before);
  assert_int_equal(ncclMemFree(p), ncclInvalidArgument);
  assert_int_equal(ncclMemAlloc(&p, 0), ncclInvalidArgument);
}

static void test_errors_stub(void **state) {
  (void)state;
  assert_string_equal(ncclGetErrorString(ncclSuccess), "no error");
  assert_non_null(strstr(ncclGetErrorString(ncclInvalidArgument), "invalid argument"));
  assert_int_equal(ncclWaitSignal(), ncclInvalidUsage);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_comm), cmocka_unit_test(test_collectives),
      cmocka_unit_test(test_mem_alloc), cmocka_unit_test(test_errors_stub),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
