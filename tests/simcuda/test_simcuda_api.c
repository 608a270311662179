/* tests/simcuda/test_simcuda_api.c: the simulated CUDA platform through
 * its public ABI, as a program built against the CUDA 13 headers sees it
 * (preloaded: LD_PRELOAD names simcuda's libraries, as for any program).
 *
 * SIMCUDA_GPU picks the devices; the test knows what NVIDIA documents for
 * each preset it is run with and checks the platform answers that: names,
 * SM counts, compute capability, capacity.  Then memory (zeros where
 * nothing was written, capacity and out-of-memory, RSS of a big
 * allocation), copies, streams and events, per-thread last error and call
 * configuration, the virtual-memory calls through the entry points PyTorch
 * uses, a generated stub, contexts and several devices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

cudaError_t __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream);
/* A generated stub (not simulated): CUDA graphs. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);

struct expect { const char *spec; int ndev; const char *name; int sms, major, minor; size_t total; int l2; };
static const struct expect g_expect[] = {
    {"2xh100", 2, "NVIDIA H100 80GB HBM3", 132, 9, 0, 80 * GiB, 50 << 20},
    {"h200", 1, "NVIDIA H200", 132, 9, 0, 141 * GiB, 50 << 20},
    {"a100-40g", 1, "NVIDIA A100-SXM4-40GB", 108, 8, 0, 40 * GiB, 40 << 20},
    {"a100-80g", 1, "NVIDIA A100-SXM4-80GB", 108, 8, 0, 80 * GiB, 40 << 20},
    {"cuda:24GiB", 1, NULL, 132, 9, 0, 24 * GiB, 50 << 20},
};
static const struct expect *g_e;

static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void test_properties(void **state) {
  int n = -1;
  assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
  assert_int_equal(n, g_e->ndev);
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp p;
    assert_int_equal(cudaGetDeviceProperties(&p, d), cudaSuccess);
    if (g_e->name)
      assert_string_equal(p.name, g_e->name);
    assert_int_equal(p.multiProcessorCount, g_e->sms);
    assert_int_equal(p.major, g_e->major);
    assert_int_equal(p.minor, g_e->minor);
    assert_int_equal(p.totalGlobalMem, g_e->total);
    assert_int_equal(p.l2CacheSize, g_e->l2);
    assert_int_equal(p.warpSize, 32);
    assert_int_equal(p.maxThreadsPerBlock, 1024);
    /* The attribute API answers the same. */
    int v;
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, d), cudaSuccess);
    assert_int_equal(v, g_e->sms);
    CUdevice dev;
    assert_int_equal(cuDeviceGet(&dev, d), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), CUDA_SUCCESS);
    assert_int_equal(v, g_e->major);
  }
  assert_int_equal(cudaGetDeviceProperties(&(struct cudaDeviceProp){0}, n), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  int rt, drv;
  assert_int_equal(cudaRuntimeGetVersion(&rt), cudaSuccess);
  assert_int_equal(cudaDriverGetVersion(&drv), cudaSuccess);
  assert_int_equal(rt, 13000);
  assert_true(drv >= rt);
}

static void test_memory(void **state) {
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  size_t free0, total;
  assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
  assert_int_equal(total, g_e->total);
  char *d;
  assert_int_equal(cudaMalloc((void **)&d, 4 * MiB), cudaSuccess);
  size_t free1;
  assert_int_equal(cudaMemGetInfo(&free1, NULL), cudaSuccess);
  assert_int_equal(free0 - free1, 4 * MiB);
  /* Never written: reads zeros. */
  char host[4096];
  memset(host, 0x5a, sizeof host);
  assert_int_equal(cudaMemcpy(host, d + MiB, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < sizeof host; i++)
    assert_int_equal(host[i], 0);
  /* A copy in and out is a real copy. */
  memset(host, 7, sizeof host);
  assert_int_equal(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, 0), cudaSuccess);
  char back[4096] = {0};
  assert_int_equal(cudaMemcpy(back, d, sizeof back, cudaMemcpyDefault), cudaSuccess);
  assert_memory_equal(back, host, sizeof host);
  assert_int_equal(cudaMemset(d, 3, 16), cudaSuccess);
  assert_int_equal(cudaMemcpy(back, d, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_int_equal(back[15], 3);
  struct cudaPointerAttributes a;
  assert_int_equal(cudaPointerGetAttributes(&a, d + 100), cudaSuccess);
  assert_int_equal(a.type, cudaMemoryTypeDevice);
  assert_int_equal(a.device, 0);
  assert_int_equal(cudaPointerGetAttributes(&a, host), cudaSuccess);
  assert_int_equal(a.type, cudaMemoryTypeUnregistered);
  assert_int_equal(cudaFree(d), cudaSuccess);
  assert_int_equal(cudaMemGetInfo(&free1, NULL), cudaSuccess);
  assert_int_equal(free1, free0);
  assert_int_equal(cudaFree(d), cudaErrorInvalidValue);  /* twice */
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_capacity(void **state) {
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  size_t rss0 = rss_bytes();
  void *big, *more;
  size_t cap = g_e->total;
  /* Nearly all of the device: address space only, no RSS to speak of. */
  assert_int_equal(cudaMalloc(&big, cap - 64 * MiB), cudaSuccess);
  assert_true(rss_bytes() < rss0 + 16 * MiB);
  assert_int_equal(cudaMalloc(&more, 128 * MiB), cudaErrorMemoryAllocation);
  assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  assert_int_equal(cudaMalloc(&more, 64 * MiB), cudaSuccess);
  size_t f;
  assert_int_equal(cudaMemGetInfo(&f, NULL), cudaSuccess);
  assert_int_equal(f, 0);
  assert_int_equal(cudaFree(more), cudaSuccess);
  assert_int_equal(cudaFree(big), cudaSuccess);
  assert_int_equal(cudaMemGetInfo(&f, NULL), cudaSuccess);
  assert_int_equal(f, cap);
}

static void *error_in_thread(void *arg) {
  /* A fresh thread has no error of its own, whatever others did. */
  *(int *)arg = cudaPeekAtLastError() == cudaSuccess && cudaGetLastError() == cudaSuccess;
  /* And its call configuration stack is its own. */
  dim3 g, b;
  size_t sh;
  void *st;
  *(int *)arg &= __cudaPopCallConfiguration(&g, &b, &sh, &st) == cudaErrorMissingConfiguration;
  return NULL;
}

static void test_per_thread(void **state) {
  assert_int_equal(cudaSetDevice(99), cudaErrorInvalidDevice);  /* leaves an error */
  dim3 g1 = {1, 2, 3}, b1 = {32, 1, 1}, g2 = {7, 1, 1}, b2 = {64, 2, 1};
  assert_int_equal(__cudaPushCallConfiguration(g1, b1, 0, NULL), cudaSuccess);
  assert_int_equal(__cudaPushCallConfiguration(g2, b2, 128, NULL), cudaSuccess);
  int ok = 0;
  pthread_t t;
  pthread_create(&t, NULL, error_in_thread, &ok);
  pthread_join(t, NULL);
  assert_true(ok);
  assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
  dim3 g, b;
  size_t sh;
  void *st = (void *)1;
  assert_int_equal(__cudaPopCallConfiguration(&g, &b, &sh, &st), cudaSuccess);
  assert_int_equal(g.x, 7);
  assert_int_equal(b.y, 2);
  assert_int_equal(sh, 128);
  assert_int_equal(__cudaPopCallConfiguration(&g, &b, &sh, &st), cudaSuccess);
  assert_int_equal(g.z, 3);
  assert_int_equal(b.x, 32);
  assert_null(st);
}

static void test_streams_events(void **state) {
  cudaStream_t s;
  cudaEvent_t a, b, nt;
  assert_int_equal(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -3), cudaSuccess);
  int prio = 0;
  assert_int_equal(cudaStreamGetPriority(s, &prio), cudaSuccess);
  assert_int_equal(prio, -3);
  assert_int_equal(cudaEventCreate(&a), cudaSuccess);
  assert_int_equal(cudaEventCreate(&b), cudaSuccess);
  assert_int_equal(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming), cudaSuccess);
  assert_int_equal(cudaEventRecord(a, s), cudaSuccess);
  usleep(2000);
  assert_int_equal(cudaEventRecord(b, s), cudaSuccess);
  assert_int_equal(cudaEventRecord(nt, s), cudaSuccess);
  assert_int_equal(cudaEventQuery(b), cudaSuccess);
  assert_int_equal(cudaStreamQuery(s), cudaSuccess);
  assert_int_equal(cudaStreamWaitEvent(0, b, 0), cudaSuccess);
  float ms = -1;
  assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  assert_true(ms >= 1.0f);
  assert_int_equal(cudaEventElapsedTime(&ms, a, nt), cudaErrorInvalidResourceHandle);
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
  assert_int_equal(cudaStreamIsCapturing(s, &cs), cudaSuccess);
  assert_int_equal(cs, cudaStreamCaptureStatusNone);
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  assert_int_equal(mode, cudaStreamCaptureModeGlobal);
  assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  assert_int_equal(mode, cudaStreamCaptureModeRelaxed);
  assert_int_equal(cudaEventDestroy(a), cudaSuccess);
  assert_int_equal(cudaEventDestroy(b), cudaSuccess);
  assert_int_equal(cudaEventDestroy(nt), cudaSuccess);
  assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

static void test_vmm(void **state) {
  /* Through the runtime's entry-point lookup, as PyTorch gets them. */
  enum cudaDriverEntryPointQueryResult q;
  CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*unmap)(CUdeviceptr, size_t);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*addr_free)(CUdeviceptr, size_t);
  void *unknown = (void *)1;
#define GET(var, name)                                                                              \
  assert_int_equal(cudaGetDriverEntryPointByVersion(name, (void **)&var, 12000, cudaEnableDefault, &q), \
                   cudaSuccess);                                                                    \
  assert_int_equal(q, cudaDriverEntryPointSuccess);                                                 \
  assert_non_null(var)
  GET(reserve, "cuMemAddressReserve");
  GET(create, "cuMemCreate");
  GET(map, "cuMemMap");
  GET(access, "cuMemSetAccess");
  GET(unmap, "cuMemUnmap");
  GET(release, "cuMemRelease");
  GET(addr_free, "cuMemAddressFree");
#undef GET
  assert_int_equal(cudaGetDriverEntryPointByVersion("cuNoSuchCall", &unknown, 12000, cudaEnableDefault, &q),
                   cudaSuccess);
  assert_int_equal(q, cudaDriverEntryPointSymbolNotFound);
  assert_null(unknown);
  /* cuMemGetInfo resolves to the _v2 entry point cuda.h maps it to. */
  void *mgi = NULL;
  assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemGetInfo", &mgi, 12000, cudaEnableDefault, &q),
                   cudaSuccess);
  assert_ptr_equal(mgi, (void *)&cuMemGetInfo_v2);

  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  size_t free0;
  assert_int_equal(cudaMemGetInfo(&free0, NULL), cudaSuccess);
  /* PyTorch reserves 1.125 x the device's memory for each expandable segment. */
  size_t va = (g_e->total + g_e->total / 8) / (2 * MiB) * (2 * MiB);
  CUdeviceptr base;
  assert_int_equal(reserve(&base, va, 0, 0, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle h;
  assert_int_equal(create(&h, 20 * MiB, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  assert_int_equal(create(&h, 20 * MiB, &prop, 0), CUDA_SUCCESS);
  size_t f;
  assert_int_equal(cudaMemGetInfo(&f, NULL), cudaSuccess);
  assert_int_equal(free0 - f, 20 * MiB);
  assert_int_equal(map(base, 20 * MiB, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(access(base, 20 * MiB, &ad, 1), CUDA_SUCCESS);
  int val = 42, got = 0;
  assert_int_equal(cudaMemcpy((char *)base + 19 * MiB, &val, sizeof val, cudaMemcpyHostToDevice), cudaSuccess);
  assert_int_equal(cudaMemcpy(&got, (char *)base + 19 * MiB, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_int_equal(got, 42);
  struct cudaPointerAttributes pa;
  assert_int_equal(cudaPointerGetAttributes(&pa, (void *)(base + MiB)), cudaSuccess);
  assert_int_equal(pa.type, cudaMemoryTypeDevice);
  /* Released while mapped: freed at the unmap, as the driver does. */
  assert_int_equal(release(h), CUDA_SUCCESS);
  assert_int_equal(cudaMemGetInfo(&f, NULL), cudaSuccess);
  assert_int_equal(free0 - f, 20 * MiB);
  assert_int_equal(unmap(base, 20 * MiB), CUDA_SUCCESS);
  assert_int_equal(cudaMemGetInfo(&f, NULL), cudaSuccess);
  assert_int_equal(f, free0);
  assert_int_equal(addr_free(base, va), CUDA_SUCCESS);
}

static void test_stub(void **state) {
  /* Not simulated: the vendor's "not supported", never success. */
  assert_int_equal(cudaGraphLaunch(NULL, 0), cudaErrorNotSupported);
  const void *table = (void *)1;
  CUuuid id = {{0}};
  assert_int_equal(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  assert_null(table);
}

static void *ctx_in_thread(void *arg) {
  CUcontext c = (CUcontext)1;
  int *r = arg;
  r[0] = cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == NULL;
  cudaSetDevice(g_e->ndev - 1);
  r[1] = cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL;
  CUdevice d = -1;
  r[2] = cuCtxGetDevice(&d) == CUDA_SUCCESS && d == g_e->ndev - 1;
  unsigned flags;
  int active = 0;
  r[3] = cuDevicePrimaryCtxGetState(g_e->ndev - 1, &flags, &active) == CUDA_SUCCESS && active;
  return NULL;
}

static void test_contexts_devices(void **state) {
  int r[4] = {0};
  pthread_t t;
  pthread_create(&t, NULL, ctx_in_thread, r);
  pthread_join(t, NULL);
  assert_true(r[0]);
  assert_true(r[1]);
  assert_true(r[2]);
  assert_true(r[3]);
  if (g_e->ndev < 2)
    return;
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  void *p;
  assert_int_equal(cudaMalloc(&p, 2 * MiB), cudaSuccess);
  struct cudaPointerAttributes a;
  assert_int_equal(cudaPointerGetAttributes(&a, p), cudaSuccess);
  assert_int_equal(a.device, 1);
  size_t f0, f1;
  assert_int_equal(cudaMemGetInfo(&f1, NULL), cudaSuccess);
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  assert_int_equal(cudaMemGetInfo(&f0, NULL), cudaSuccess);
  assert_int_equal(f0 - f1, 2 * MiB);  /* each device counts its own */
  int can = 0;
  assert_int_equal(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  assert_true(can);
  assert_int_equal(cudaFree(p), cudaSuccess);
}

int main(void) {
  const char *spec = getenv("SIMCUDA_GPU");
  for (size_t i = 0; i < sizeof g_expect / sizeof g_expect[0]; i++)
    if (spec && !strcmp(spec, g_expect[i].spec))
      g_e = &g_expect[i];
  if (!g_e) {
    fprintf(stderr, "SIMCUDA_GPU=%s: not one this test knows\n", spec ? spec : "(unset)");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_properties), cmocka_unit_test(test_memory),
      cmocka_unit_test(test_capacity),   cmocka_unit_test(test_per_thread),
      cmocka_unit_test(test_streams_events), cmocka_unit_test(test_vmm),
      cmocka_unit_test(test_stub),       cmocka_unit_test(test_contexts_devices),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
