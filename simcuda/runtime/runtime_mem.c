/* simcuda/runtime/runtime_mem.c: the runtime's memory calls.
 *
 * Device memory is the core's (core/memory.c); copies and sets of any kind
 * are memmove/memset done at once, whatever the stream, so a copy from
 * device memory nothing wrote reads zeros.  Page-locked host memory
 * (cudaHostAlloc, cudaMallocHost, cudaHostRegister) is ordinary host
 * memory kept in a small table, so cudaPointerGetAttributes can tell
 * pinned host memory from device memory and from unregistered memory.
 * Lock: the host table's mutex (host allocations are rare: PyTorch caches
 * them).
 */
#define _GNU_SOURCE
#include "simcudart.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

cudaError_t cudaMalloc(void **p, size_t size) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  if (!p)
    RET(cudaErrorInvalidValue);
  RET_CU(tdm__simcuda_mem_alloc(dev, size, p));
}

cudaError_t cudaFree(void *p) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  RET_CU(tdm__simcuda_mem_free(p));
}

/* Managed memory: device memory is host memory here, so it is device
 * memory that the host may touch as well (prefetches and advice are moot). */
cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags) {
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
    RET(cudaErrorInvalidValue);
  if (size == 0)
    RET(cudaErrorInvalidValue);
  return cudaMalloc(p, size);
}

cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
  if (!pitch)
    RET(cudaErrorInvalidValue);
  /* Rows aligned to the device's texture pitch alignment's 512-byte cousin,
   * as the driver pads them. */
  *pitch = (width + 511) / 512 * 512;
  return cudaMalloc(p, *pitch * height);
}

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s) {
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return cudaMalloc(p, size);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return cudaFree(p);
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  RET_CU(tdm__simcuda_mem_info(dev, free_b, total_b));
}

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    RET(cudaErrorInvalidMemcpyDirection);
  if (n && (!dst || !src))
    RET(cudaErrorInvalidValue);
  if (n)
    memmove(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  return copy(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return copy(dst, src, n, kind);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n, cudaStream_t s) {
  if (!tdm__simcuda_device(ddev) || !tdm__simcuda_device(sdev))
    RET(cudaErrorInvalidDevice);
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}

static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h,
                          enum cudaMemcpyKind kind) {
  if (w > dpitch || w > spitch)
    RET(cudaErrorInvalidPitchValue);
  for (size_t r = 0; r < h; r++) {
    cudaError_t e = copy((char *)dst + r * dpitch, (const char *)src + r * spitch, w, kind);
    if (e)
      return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h,
                         enum cudaMemcpyKind kind) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  return copy2d(dst, dpitch, src, spitch, w, h, kind);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w,
                              size_t h, enum cudaMemcpyKind kind, cudaStream_t s) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return copy2d(dst, dpitch, src, spitch, w, h, kind);
}

cudaError_t cudaMemset(void *p, int v, size_t n) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  if (n && !p)
    RET(cudaErrorInvalidValue);
  if (n)
    memset(p, v, n);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  if (!tdm__simcuda_stream_valid(s))
    RET(cudaErrorInvalidResourceHandle);
  return cudaMemset(p, v, n);
}

/* ---- page-locked host memory --------------------------------------------- */

struct host_range { void *p; size_t size; int owned; };
static pthread_mutex_t g_host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_range *g_host;
static size_t g_nhost, g_caphost;

static int host_add(void *p, size_t size, int owned) {
  pthread_mutex_lock(&g_host_mu);
  if (g_nhost == g_caphost) {
    size_t cap = g_caphost ? g_caphost * 2 : 64;
    struct host_range *n = realloc(g_host, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_host_mu);
      return -1;
    }
    g_host = n;
    g_caphost = cap;
  }
  g_host[g_nhost++] = (struct host_range){p, size, owned};
  pthread_mutex_unlock(&g_host_mu);
  return 0;
}

/* Remove the range that starts at p; 1 if it was owned, 0 if registered,
 * -1 if there is none. */
static int host_remove(void *p) {
  int r = -1;
  pthread_mutex_lock(&g_host_mu);
  for (size_t i = 0; i < g_nhost; i++)
    if (g_host[i].p == p) {
      r = g_host[i].owned;
      g_host[i] = g_host[--g_nhost];
      break;
    }
  pthread_mutex_unlock(&g_host_mu);
  return r;
}

static int host_find(const void *p) {
  int found = 0;
  pthread_mutex_lock(&g_host_mu);
  for (size_t i = 0; i < g_nhost && !found; i++)
    found = (uintptr_t)p - (uintptr_t)g_host[i].p < g_host[i].size;
  pthread_mutex_unlock(&g_host_mu);
  return found;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
  if (!p)
    RET(cudaErrorInvalidValue);
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  if (size == 0) {
    *p = NULL;
    return cudaSuccess;
  }
  void *m;
  if (posix_memalign(&m, 4096, size))
    RET(cudaErrorMemoryAllocation);
  if (host_add(m, size, 1)) {
    free(m);
    RET(cudaErrorMemoryAllocation);
  }
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t size) { return cudaHostAlloc(p, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void *p) {
  if (!p)
    return cudaSuccess;
  int owned = host_remove(p);
  if (owned != 1)
    RET(cudaErrorInvalidValue);
  free(p);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags) {
  if (!p || !size)
    RET(cudaErrorInvalidValue);
  if (host_find(p))
    RET(cudaErrorHostMemoryAlreadyRegistered);
  if (host_add(p, size, 0))
    RET(cudaErrorMemoryAllocation);
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) {
  if (host_remove(p) != 0)
    RET(cudaErrorHostMemoryNotRegistered);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags) {
  if (!dev || flags)
    RET(cudaErrorInvalidValue);
  if (!host_find(host))
    RET(cudaErrorInvalidValue);
  *dev = host;  /* mapped pinned memory: the same address (unified addressing) */
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  if (!a)
    RET(cudaErrorInvalidValue);
  memset(a, 0, sizeof *a);
  int dev = tdm__simcuda_mem_lookup(p, NULL, NULL);
  if (dev >= 0) {
    a->type = cudaMemoryTypeDevice;
    a->device = dev;
    a->devicePointer = (void *)p;
  } else if (host_find(p)) {
    a->type = cudaMemoryTypeHost;
    a->device = tdm__simcudart_device();
    a->devicePointer = (void *)p;
    a->hostPointer = (void *)p;
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
  }
  return cudaSuccess;
}

/* ---- device variables: a __device__ variable lives in its host shadow ---- */

cudaError_t cudaGetSymbolAddress(void **dev, const void *symbol) {
  if (!dev)
    RET(cudaErrorInvalidValue);
  void *p = tdm__simcudart_symbol(symbol, NULL);
  if (!p)
    RET(cudaErrorInvalidSymbol);
  *dev = p;
  return cudaSuccess;
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t n, size_t off,
                                 enum cudaMemcpyKind kind) {
  size_t size;
  char *p = tdm__simcudart_symbol(symbol, &size);
  if (!p)
    RET(cudaErrorInvalidSymbol);
  if (off > size || n > size - off)
    RET(cudaErrorInvalidValue);
  return copy(dst, p + off, n, kind);
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t n, size_t off,
                               enum cudaMemcpyKind kind) {
  size_t size;
  char *p = tdm__simcudart_symbol(symbol, &size);
  if (!p)
    RET(cudaErrorInvalidSymbol);
  if (off > size || n > size - off)
    RET(cudaErrorInvalidValue);
  return copy(p + off, src, n, kind);
}
