/* simcuda/driver/device.c: the driver API's devices, versions and contexts
 * (libsimcuda.so, soname libcuda.so.1).
 *
 * Each device has one primary context, created active the first time it is
 * retained or the runtime first works on the device (tdm__simcuda_ctx_init),
 * as the runtime's implicit initialization does.  The current context is
 * per thread.  Attributes come from the device's preset table (preset.c);
 * an attribute the table does not know answers 0, and is logged once.
 * No lock: the device table is read-only, the contexts are made once
 * (pthread_once), their state is atomics.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct ctx { uint32_t magic; int device; };
#define CTX_MAGIC 0x43545854u

static struct ctx g_primary[SIMCUDA_MAX_DEVICES];
static int g_active[SIMCUDA_MAX_DEVICES];
static int g_retain[SIMCUDA_MAX_DEVICES];
static __thread CUcontext t_current;
/* A small per-thread context stack for cuCtxPushCurrent/PopCurrent. */
static __thread CUcontext t_stack[8];
static __thread int t_depth;

static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;

static void make_contexts(void) {
  for (int i = 0; i < SIMCUDA_MAX_DEVICES; i++)
    g_primary[i] = (struct ctx){CTX_MAGIC, i};
}

CUcontext tdm__simcuda_primary_ctx(int dev) {
  if (!tdm__simcuda_device(dev))
    return NULL;
  pthread_once(&g_ctx_once, make_contexts);
  return (CUcontext)&g_primary[dev];
}

void tdm__simcuda_ctx_init(int dev) {
  CUcontext c = tdm__simcuda_primary_ctx(dev);
  if (!c)
    return;
  __atomic_store_n(&g_active[dev], 1, __ATOMIC_RELAXED);
  t_current = c;
}

int tdm__simcuda_ctx_device(CUcontext c) {
  const struct ctx *x = (const struct ctx *)c;
  pthread_once(&g_ctx_once, make_contexts);
  for (int i = 0; i < SIMCUDA_MAX_DEVICES; i++)
    if (x == &g_primary[i] && x->magic == CTX_MAGIC)
      return i;
  return -1;
}

static int valid_dev(CUdevice d) { return tdm__simcuda_device(d) != NULL; }

CUresult cuInit(unsigned int flags) {
  if (flags)
    return CUDA_ERROR_INVALID_VALUE;
  return tdm__simcuda_device_count() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *v) {
  if (!v)
    return CUDA_ERROR_INVALID_VALUE;
  *v = CUDA_VERSION;  /* a driver of the toolkit's CUDA version (13.0) */
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
  if (!n)
    return CUDA_ERROR_INVALID_VALUE;
  *n = tdm__simcuda_device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (!d)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!dev)
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "%s", dev->p.name);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d) {
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)dev->p.total_mem;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice d) {
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!uuid)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev)
    return CUDA_ERROR_INVALID_DEVICE;
  memcpy(uuid->bytes, dev->uuid, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!v || (int)a < 0 || a >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev)
    return CUDA_ERROR_INVALID_DEVICE;
  *v = dev->attr[a];
  if (!*v) {
    static unsigned char seen[CU_DEVICE_ATTRIBUTE_MAX];
    if (!__atomic_exchange_n(&seen[a], 1, __ATOMIC_RELAXED))
      tdm__simcuda_log("device attribute %d answers 0", (int)a);
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d) {
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!bus || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev)
    return CUDA_ERROR_INVALID_DEVICE;
  snprintf(bus, (size_t)len, "%08X:%02X:00.0", dev->attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
           dev->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
  if (!valid_dev(d))
    return CUDA_ERROR_INVALID_DEVICE;
  if (!flags || !active)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  *active = __atomic_load_n(&g_active[d], __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(d))
    return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&g_retain[d], 1, __ATOMIC_RELAXED);
  __atomic_store_n(&g_active[d], 1, __ATOMIC_RELAXED);
  *c = tdm__simcuda_primary_ctx(d);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
  if (!valid_dev(d))
    return CUDA_ERROR_INVALID_DEVICE;
  /* The runtime holds the primary context for the process's life, so it
   * stays active here too. */
  if (__atomic_load_n(&g_retain[d], __ATOMIC_RELAXED) > 0)
    __atomic_sub_fetch(&g_retain[d], 1, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  *c = t_current;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext c) {
  if (c && tdm__simcuda_ctx_device(c) < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  t_current = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c) {
  if (!c || tdm__simcuda_ctx_device(c) < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (t_depth == (int)(sizeof t_stack / sizeof t_stack[0]))
    return CUDA_ERROR_OUT_OF_MEMORY;
  t_stack[t_depth++] = t_current;
  t_current = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *c) {
  if (!t_current)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (c)
    *c = t_current;
  t_current = t_depth > 0 ? t_stack[--t_depth] : NULL;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *d) {
  if (!d)
    return CUDA_ERROR_INVALID_VALUE;
  if (!t_current)
    return CUDA_ERROR_INVALID_CONTEXT;
  *d = tdm__simcuda_ctx_device(t_current);
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) { return t_current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

/* The device the driver's memory calls work on: the current context's. */
int tdm__simcuda_current_device(void) { return t_current ? tdm__simcuda_ctx_device(t_current) : -1; }
