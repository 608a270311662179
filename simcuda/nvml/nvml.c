/* simcuda/nvml/nvml.c: the simulated NVML (libsimnvml.so, soname
 * libnvidia-ml.so.1), which agrees with the simulated driver: the same
 * devices, names, UUIDs, PCI bus ids and memory in use.  PyTorch needs it
 * as it needs the driver: it counts devices through NVML, and on a host
 * where it finds no NVML its expandable segments call through a missing
 * NVML entry point.  Declared here from NVIDIA's NVML documentation (the
 * toolkit here ships no nvml.h).  What a simulated GPU has not got (power,
 * temperature, NVLink topology, fabric) answers NVML_ERROR_NOT_SUPPORTED;
 * utilization is 0 (no kernel runs).  No lock: the device table is
 * read-only.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef struct nvml_device { int ordinal; } *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
/* nvmlProcessInfo_v1_t: what the unversioned entry point fills. */
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status);

static struct nvml_device g_dev[SIMCUDA_MAX_DEVICES];

static const struct tdm__simcuda_device *dev_of(nvmlDevice_t d) {
  if (!d || d < g_dev || d >= g_dev + SIMCUDA_MAX_DEVICES)
    return NULL;
  return tdm__simcuda_device((int)(d - g_dev));
}

nvmlReturn_t nvmlInit_v2(void) {
  for (int i = 0; i < SIMCUDA_MAX_DEVICES; i++)
    g_dev[i].ordinal = i;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_NOT_FOUND: return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
  default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
  if (!v)
    return NVML_ERROR_INVALID_ARGUMENT;
  return cuDriverGetVersion(v) == CUDA_SUCCESS ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
  if (!n)
    return NVML_ERROR_INVALID_ARGUMENT;
  *n = (unsigned)tdm__simcuda_device_count();
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
  if (!d || !tdm__simcuda_device((int)i))
    return NVML_ERROR_INVALID_ARGUMENT;
  *d = &g_dev[i];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) {
  return nvmlDeviceGetHandleByIndex_v2(i, d);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d) {
  unsigned dom, b, slot, fn;
  if (!bus || !d || sscanf(bus, "%x:%x:%x.%x", &dom, &b, &slot, &fn) != 4)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < tdm__simcuda_device_count(); i++) {
    const struct tdm__simcuda_device *x = tdm__simcuda_device(i);
    if ((int)dom == x->attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] && (int)b == x->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] &&
        slot == 0) {
      *d = &g_dev[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

static void uuid_text(const struct tdm__simcuda_device *x, char *out, size_t len) {
  const unsigned char *u = x->uuid;
  snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
           u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len) {
  const struct tdm__simcuda_device *x = dev_of(d);
  char u[64];
  if (!x || !buf)
    return NVML_ERROR_INVALID_ARGUMENT;
  uuid_text(x, u, sizeof u);
  if (len <= strlen(u))
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, u, strlen(u) + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
  if (!uuid || !d)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < tdm__simcuda_device_count(); i++) {
    char u[64];
    uuid_text(tdm__simcuda_device(i), u, sizeof u);
    if (!strcmp(u, uuid)) {
      *d = &g_dev[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len) {
  const struct tdm__simcuda_device *x = dev_of(d);
  if (!x || !buf || !len)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (len <= strlen(x->p.name))
    return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(buf, x->p.name);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i) {
  const struct tdm__simcuda_device *x = dev_of(d);
  if (!x || !i)
    return NVML_ERROR_INVALID_ARGUMENT;
  *i = (unsigned)x->ordinal;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
  const struct tdm__simcuda_device *x = dev_of(d);
  size_t f, t;
  if (!x || !m)
    return NVML_ERROR_INVALID_ARGUMENT;
  tdm__simcuda_mem_info(x->ordinal, &f, &t);
  m->total = t;
  m->free = f;
  m->used = t - f;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  if (!dev_of(d) || !u)
    return NVML_ERROR_INVALID_ARGUMENT;
  u->gpu = u->memory = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
  const struct tdm__simcuda_device *x = dev_of(d);
  if (!x || !mhz)
    return NVML_ERROR_INVALID_ARGUMENT;
  /* NVML_CLOCK_GRAPHICS 0, SM 1, MEM 2, VIDEO 3 */
  if (type == 0 || type == 1)
    *mhz = (unsigned)x->p.clock_khz / 1000;
  else if (type == 2)
    *mhz = (unsigned)x->p.mem_clock_khz / 1000;
  else
    return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
  const struct tdm__simcuda_device *x = dev_of(d);
  size_t f, t;
  if (!x || !n)
    return NVML_ERROR_INVALID_ARGUMENT;
  tdm__simcuda_mem_info(x->ordinal, &f, &t);
  /* This process, when it holds memory on the device (other processes'
   * simulated devices are their own). */
  unsigned count = t > f ? 1 : 0;
  if (*n < count || (count && !p)) {
    *n = count;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *n = count;
  if (count) {
    p[0].pid = (unsigned)getpid();
    p[0].usedGpuMemory = t - f;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
  if (!dev_of(a) || !dev_of(b) || !status)
    return NVML_ERROR_INVALID_ARGUMENT;
  *status = 0;  /* NVML_P2P_STATUS_OK: devices of an SXM board */
  return NVML_SUCCESS;
}

/* nvmlGpuFabricInfoV_t (versions 1 and 2 share the leading fields). */
typedef struct {
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;  /* version 2 */
} nvmlGpuFabricInfoV_t;

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfoV_t *info);
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfoV_t *info) {
  if (!dev_of(d) || !info)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned version = info->version >> 24;
  if (version < 1 || version > 2)
    return NVML_ERROR_INVALID_ARGUMENT;  /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH in newer NVML */
  /* A GPU outside any NVLink fabric: the query works, the state says
   * "not supported" (NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0). */
  memset(info->clusterUuid, 0, sizeof info->clusterUuid);
  info->status = NVML_ERROR_NOT_SUPPORTED;
  info->cliqueId = 0;
  info->state = 0;
  if (version == 2)
    info->healthMask = 0;
  return NVML_SUCCESS;
}
