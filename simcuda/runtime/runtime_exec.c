/* simcuda/runtime/runtime_exec.c: kernels, streams, events and capture in
 * the runtime.
 *
 * Kernel registration (the __cudaRegister* calls every CUDA object's
 * constructor makes, thousands at `import torch`) goes into a hash table
 * from host stub to thread limit, and from __device__ variable to size (a
 * variable lives in its host shadow, so cudaMemcpyToSymbol and
 * cudaGetSymbolAddress work on memory that exists).  A launch checks its
 * configuration against the device and returns without running anything.
 * The <<<>>> configuration is a per-thread stack (a kernel launched while
 * another's arguments are evaluated pushes twice).  Streams and events are
 * the core's (core/stream.c): work is complete when enqueued.  No stream
 * is ever capturing; the capture mode is per thread, as CUDA keeps it.
 * Lock: the registration table's mutex (registration is at load time; a
 * lookup is only for attribute queries).
 */
#define _GNU_SOURCE
#include "simcudart.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The registration ABI (crt/host_runtime.h declares it for C++ only). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);
cudaError_t __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shmem,
                               cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t stream);

/* ---- registration table --------------------------------------------------- */

struct reg { const void *key; size_t size; int thread_limit; int is_var; };
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg *g_reg;
static size_t g_reg_n, g_reg_cap;  /* cap is a power of two */

static size_t hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static void reg_put_locked(struct reg r) {
  if ((g_reg_n + 1) * 2 > g_reg_cap) {
    size_t cap = g_reg_cap ? g_reg_cap * 2 : 4096;
    struct reg *n = calloc(cap, sizeof *n);
    if (!n)
      return;  /* an unregistered kernel still launches; it has default attributes */
    for (size_t i = 0; i < g_reg_cap; i++)
      if (g_reg[i].key) {
        size_t j = hash(g_reg[i].key) & (cap - 1);
        while (n[j].key)
          j = (j + 1) & (cap - 1);
        n[j] = g_reg[i];
      }
    free(g_reg);
    g_reg = n;
    g_reg_cap = cap;
  }
  size_t j = hash(r.key) & (g_reg_cap - 1);
  while (g_reg[j].key && g_reg[j].key != r.key)
    j = (j + 1) & (g_reg_cap - 1);
  if (!g_reg[j].key)
    g_reg_n++;
  g_reg[j] = r;
}

static int reg_get(const void *key, struct reg *out) {
  int found = 0;
  pthread_mutex_lock(&g_reg_mu);
  if (g_reg_cap) {
    size_t j = hash(key) & (g_reg_cap - 1);
    while (g_reg[j].key) {
      if (g_reg[j].key == key) {
        *out = g_reg[j];
        found = 1;
        break;
      }
      j = (j + 1) & (g_reg_cap - 1);
    }
  }
  pthread_mutex_unlock(&g_reg_mu);
  return found;
}

void **__cudaRegisterFatBinary(void *fatCubin) {
  void **h = malloc(sizeof *h);
  if (h)
    *h = fatCubin;
  return h;
}

void __cudaRegisterFatBinaryEnd(void **handle) {}

void __cudaUnregisterFatBinary(void **handle) { free(handle); }

char __cudaInitModule(void **handle) { return 1; }

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
  if (!hostFun)
    return;
  pthread_mutex_lock(&g_reg_mu);
  reg_put_locked((struct reg){hostFun, 0, thread_limit, 0});
  pthread_mutex_unlock(&g_reg_mu);
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global) {
  if (!hostVar)
    return;
  pthread_mutex_lock(&g_reg_mu);
  reg_put_locked((struct reg){hostVar, size, -1, 1});
  pthread_mutex_unlock(&g_reg_mu);
}

void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global) {
  /* A __managed__ variable's pointer is set to memory that exists: here
   * the host shadow behind it already. */
  if (hostVarPtrAddress && *hostVarPtrAddress)
    __cudaRegisterVar(handle, *hostVarPtrAddress, deviceAddress, deviceName, ext, size, constant, global);
}

void *tdm__simcudart_symbol(const void *symbol, size_t *size) {
  struct reg r;
  if (!symbol || !reg_get(symbol, &r) || !r.is_var)
    return NULL;
  if (size)
    *size = r.size;
  return (void *)symbol;
}

int tdm__simcudart_thread_limit(const void *host_fun) {
  struct reg r;
  return host_fun && reg_get(host_fun, &r) && !r.is_var ? r.thread_limit : -1;
}

/* ---- launch --------------------------------------------------------------- */

struct call_config { dim3 grid, block; size_t shmem; void *stream; };
static __thread struct call_config t_cfg[16];
static __thread int t_ncfg;

cudaError_t __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream) {
  if (t_ncfg == (int)(sizeof t_cfg / sizeof t_cfg[0]))
    RET(cudaErrorInvalidConfiguration);
  t_cfg[t_ncfg++] = (struct call_config){grid, block, shmem, stream};
  return cudaSuccess;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
  if (t_ncfg == 0)
    RET(cudaErrorMissingConfiguration);
  struct call_config c = t_cfg[--t_ncfg];
  *grid = c.grid;
  *block = c.block;
  *shmem = c.shmem;
  *(void **)stream = c.stream;
  return cudaSuccess;
}

static cudaError_t launch(const void *func, dim3 g, dim3 b, size_t shmem, cudaStream_t s) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  if (!func)
    RET(cudaErrorInvalidDeviceFunction);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  const int *a = tdm__simcuda_device(dev)->attr;
  unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
  if (!g.x || !g.y || !g.z || !threads || b.x > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] ||
      b.y > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] ||
      b.z > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] ||
      g.y > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] ||
      g.z > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z])
    RET(cudaErrorInvalidConfiguration);
  int limit = tdm__simcudart_thread_limit(func);
  if (threads > (unsigned long long)(limit > 0 ? limit : a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK]) ||
      shmem > (size_t)a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN])
    RET(cudaErrorInvalidConfiguration);
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun) {
  if (!kernel || !hostFun)
    RET(cudaErrorInvalidValue);
  *kernel = (cudaKernel_t)hostFun;  /* a kernel handle is its host stub */
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s) {
  return launch(k, g, b, shmem, s);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shmem,
                                    cudaStream_t s) {
  return launch(k, g, b, shmem, s);
}

cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s) {
  return launch(f, g, b, shmem, s);
}

cudaError_t cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **args, size_t shmem,
                                        cudaStream_t s) {
  return launch(f, g, b, shmem, s);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **args) {
  if (!c)
    RET(cudaErrorInvalidValue);
  return launch(f, c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user) {
  if (!fn)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  fn(user);  /* everything before it on the stream is done */
  return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *user, unsigned int flags) {
  if (!cb || flags)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  cb(s, cudaSuccess, user);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *f) {
  if (!a)
    RET(cudaErrorInvalidValue);
  if (!f)
    RET(cudaErrorInvalidDeviceFunction);
  int dev = tdm__simcudart_device();
  int limit = tdm__simcudart_thread_limit(f);
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev, limit);
  a->numRegs = tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_NUM_REGS, dev, limit);
  a->ptxVersion = tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_PTX_VERSION, dev, limit);
  a->binaryVersion = tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION, dev, limit);
  a->cacheModeCA = tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, dev, limit);
  a->maxDynamicSharedSizeBytes =
      tdm__simcuda_func_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dev, limit);
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *f, enum cudaFuncAttribute attr, int v) {
  if (!f)
    RET(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    const struct tdm__simcuda_device *d = tdm__simcuda_device(tdm__simcudart_device());
    if (!d || v < 0 || v > d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN])
      RET(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t k, enum cudaFuncAttribute attr, int v, int dev) {
  if (!tdm__simcuda_device(dev))
    RET(cudaErrorInvalidDevice);
  return cudaFuncSetAttribute(k, attr, v);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int block,
                                                                   size_t smem, unsigned int flags) {
  if (!n || block <= 0)
    RET(cudaErrorInvalidValue);
  *n = tdm__simcuda_occupancy(tdm__simcudart_device(), block, smem);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int block, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, block, smem, 0);
}

/* Libraries (cudaLibraryLoadData): like the driver's modules, any image. */
struct library { uint32_t magic; };
#define LIB_MAGIC 0x4c494252u

cudaError_t cudaLibraryLoadData(cudaLibrary_t *lib, const void *code, enum cudaJitOption *o, void **ov,
                                unsigned int no, enum cudaLibraryOption *lo, void **lov, unsigned int nlo) {
  if (!lib || !code)
    RET(cudaErrorInvalidValue);
  struct library *l = malloc(sizeof *l);
  if (!l)
    RET(cudaErrorMemoryAllocation);
  l->magic = LIB_MAGIC;
  *lib = (cudaLibrary_t)l;
  return cudaSuccess;
}

cudaError_t cudaLibraryUnload(cudaLibrary_t lib) {
  struct library *l = (struct library *)lib;
  if (!l || l->magic != LIB_MAGIC)
    RET(cudaErrorInvalidResourceHandle);
  l->magic = 0;
  free(l);
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t lib, const char *name) {
  const struct library *l = (const struct library *)lib;
  if (!k || !name)
    RET(cudaErrorInvalidValue);
  if (!l || l->magic != LIB_MAGIC)
    RET(cudaErrorInvalidResourceHandle);
  /* A handle that launches (not registered: default attributes). */
  *k = (cudaKernel_t)name;
  return cudaSuccess;
}

/* ---- streams -------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  if (!s || flags & ~(unsigned)cudaStreamNonBlocking)
    RET(cudaErrorInvalidValue);
  /* Priorities are clamped into the device's range, as CUDA does. */
  if (priority > 0)
    priority = 0;
  if (priority < -5)
    priority = -5;
  RET_CU(tdm__simcuda_stream_create(dev, flags, priority, (void **)s));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithPriority(s, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) { RET_CU(tdm__simcuda_stream_destroy(s)); }

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  if (!tdm__simcuda_stream_valid(s) || !tdm__simcuda_event_valid(e))
    RET(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority) {
  if (!priority)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  const struct tdm__simcuda_stream *x = (const void *)s;
  *priority = s && s != cudaStreamLegacy && s != cudaStreamPerThread ? x->priority : 0;
  return cudaSuccess;
}

static __thread enum cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  if (!mode)
    RET(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = t_capture_mode;
  t_capture_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
  if (!st)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  *st = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps) {
  if (!st)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  *st = cudaStreamCaptureStatusNone;
  if (id)
    *id = 0;
  if (graph)
    *graph = NULL;
  if (deps)
    *deps = NULL;
  if (edges)
    *edges = NULL;
  if (ndeps)
    *ndeps = 0;
  return cudaSuccess;
}

/* ---- events --------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  if (!e || flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
    RET(cudaErrorInvalidValue);
  RET_CU(tdm__simcuda_event_create(dev, flags, (void **)e));
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e) { RET_CU(tdm__simcuda_event_destroy(e)); }

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { RET_CU(tdm__simcuda_event_record(e, s)); }

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  RET_CU(tdm__simcuda_event_record(e, s));
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!tdm__simcuda_event_valid(e))
    RET(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  RET_CU(tdm__simcuda_event_elapsed(ms, a, b));
}
