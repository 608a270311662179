/* simcuda/driver/module.c: modules, functions and launches in the driver
 * API.  Kernels are accepted and not run: a module is any image (cubin,
 * fatbin or PTX, as NVRTC produces for PyTorch's jiterator), a function is
 * a name in it, and a launch checks its stream and configuration and
 * returns.  Function attributes and occupancy are those of the device's
 * compute capability with the resources an ordinary kernel takes (32
 * registers a thread, no static shared memory), so launch heuristics see
 * plausible answers.  No lock: modules and functions are owned by their
 * caller.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct module { uint32_t magic; };
struct function { uint32_t magic; int max_dyn_smem; char name[64]; };
#define MOD_MAGIC 0x4d4f444cu
#define FUN_MAGIC 0x46554e43u

static CUresult load(CUmodule *m, const void *image) {
  if (!m || !image)
    return CUDA_ERROR_INVALID_VALUE;
  if (tdm__simcuda_current_device() < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  struct module *x = calloc(1, sizeof *x);
  if (!x)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->magic = MOD_MAGIC;
  *m = (CUmodule)x;
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) { return load(m, image); }

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
  return load(m, image);
}

CUresult cuModuleUnload(CUmodule m) {
  struct module *x = (struct module *)m;
  if (!x || x->magic != MOD_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  x->magic = 0;
  free(x);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  struct module *x = (struct module *)m;
  if (!f || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!x || x->magic != MOD_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  struct function *fn = calloc(1, sizeof *fn);
  if (!fn)
    return CUDA_ERROR_OUT_OF_MEMORY;
  fn->magic = FUN_MAGIC;
  fn->max_dyn_smem = 48 << 10;
  snprintf(fn->name, sizeof fn->name, "%s", name);
  *f = (CUfunction)fn;
  return CUDA_SUCCESS;
}

static int launch_ok(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned smem, CUstream s) {
  int dev = tdm__simcuda_current_device();
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev < 0 ? 0 : dev);
  if (!d)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!tdm__simcuda_stream_valid(s))
    return CUDA_ERROR_INVALID_HANDLE;
  const int *a = d->attr;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] ||
      by > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] ||
      bz > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] ||
      (unsigned long long)bx * by * bz > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] ||
      gy > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] ||
      gz > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] ||
      smem > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN])
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
  const struct function *fn = (const struct function *)f;
  if (!fn || fn->magic != FUN_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  return (CUresult)launch_ok(gx, gy, gz, bx, by, bz, smem, s);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned smem, CUstream s, void **params) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

/* The attributes of an ordinary kernel on dev; the runtime shares them. */
int tdm__simcuda_func_attribute(int attr, int dev, int thread_limit) {
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev < 0 ? 0 : dev);
  int cc = d ? d->p.major * 10 + d->p.minor : 90;
  switch (attr) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    return thread_limit > 0 && thread_limit < 1024 ? thread_limit : 1024;
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
    return 32;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
    return cc;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    return 48 << 10;
  case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
    return 1;
  default:
    return 0;
  }
}

CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  const struct function *fn = (const struct function *)f;
  if (!v)
    return CUDA_ERROR_INVALID_VALUE;
  if (!fn || fn->magic != FUN_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  *v = a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
           ? fn->max_dyn_smem
           : tdm__simcuda_func_attribute(a, tdm__simcuda_current_device(), -1);
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  struct function *fn = (struct function *)f;
  if (!fn || fn->magic != FUN_MAGIC)
    return CUDA_ERROR_INVALID_HANDLE;
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    const struct tdm__simcuda_device *d = tdm__simcuda_device(tdm__simcuda_current_device());
    if (!d || v < 0 || v > d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN])
      return CUDA_ERROR_INVALID_VALUE;
    fn->max_dyn_smem = v;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) {
  const struct function *fn = (const struct function *)f;
  return fn && fn->magic == FUN_MAGIC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Blocks of `block` threads that fit on one SM of dev: the smallest of the
 * thread, block, register and shared-memory limits. */
int tdm__simcuda_occupancy(int dev, int block, size_t dyn_smem) {
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev < 0 ? 0 : dev);
  if (!d || block <= 0)
    return 0;
  const struct tdm__simcuda_preset *p = &d->p;
  int warps = (block + 31) / 32;
  int n = p->max_threads_per_sm / (warps * 32);
  if (n > p->max_blocks_per_sm)
    n = p->max_blocks_per_sm;
  int by_regs = p->regs_per_sm / (warps * 32 * 32);
  if (by_regs < n)
    n = by_regs;
  size_t per_block = dyn_smem + (size_t)d->attr[CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK];
  if (dyn_smem && (int)(p->smem_per_sm / per_block) < n)
    n = (int)(p->smem_per_sm / per_block);
  return n;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block, size_t dyn_smem) {
  if (!n)
    return CUDA_ERROR_INVALID_VALUE;
  *n = tdm__simcuda_occupancy(tdm__simcuda_current_device(), block, dyn_smem);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  int dev = tdm__simcuda_current_device();
  if (dev < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  return tdm__simcuda_stream_create(dev, flags, 0, (void **)s);
}

CUresult cuStreamDestroy(CUstream s) { return tdm__simcuda_stream_destroy(s); }

CUresult cuStreamSynchronize(CUstream s) {
  return tdm__simcuda_stream_valid(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The private tables NVIDIA's own runtime and libraries ask the driver for
 * are not part of the documented API and are not simulated: a caller that
 * asks is one of NVIDIA's libraries, which cannot run here. */
CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  static int once;
  if (table)
    *table = NULL;
  if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
    tdm__simcuda_log("cuGetExportTable: an NVIDIA library tried to use the simulated driver; "
                     "it cannot (CUDA_ERROR_NOT_SUPPORTED)");
  return CUDA_ERROR_NOT_SUPPORTED;
}
