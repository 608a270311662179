/* simcuda/runtime/runtime.c: the runtime's devices, errors, versions,
 * properties and driver entry points.
 *
 * cudaDeviceProp is filled from the same preset table as the driver's
 * attributes (the two APIs' attribute enums coincide; asserted below), so
 * both views of a device agree.  The build is for CUDA 13's structures
 * only: the asserts refuse another toolkit's headers, whose cudaDeviceProp
 * has another layout than the one a CUDA 13 PyTorch wheel reads.
 */
#define _GNU_SOURCE
#include "simcudart.h"

#include <cuda_profiler_api.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CUDART_VERSION >= 13000 && CUDART_VERSION < 14000, "simcuda is CUDA 13's runtime");
/* CUDA 13.0's layouts (cudaDeviceProp lost clockRate & co. in 13.0). */
_Static_assert(sizeof(struct cudaDeviceProp) == 1008, "cudaDeviceProp is CUDA 13.0's");
_Static_assert(offsetof(struct cudaDeviceProp, totalGlobalMem) == 288, "cudaDeviceProp layout");
_Static_assert(offsetof(struct cudaDeviceProp, multiProcessorCount) == 384, "cudaDeviceProp layout");
_Static_assert(sizeof(struct cudaFuncAttributes) == 144, "cudaFuncAttributes is CUDA 13.0's");
_Static_assert(sizeof(struct cudaPointerAttributes) == 88, "cudaPointerAttributes is CUDA 13.0's");
#define SAME(rt, drv) _Static_assert((int)cudaDevAttr##rt == (int)CU_DEVICE_ATTRIBUTE_##drv, #rt)
SAME(MaxThreadsPerBlock, MAX_THREADS_PER_BLOCK);
SAME(MultiProcessorCount, MULTIPROCESSOR_COUNT);
SAME(ComputeCapabilityMajor, COMPUTE_CAPABILITY_MAJOR);
SAME(MaxSharedMemoryPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME(L2CacheSize, L2_CACHE_SIZE);
SAME(MaxBlocksPerMultiprocessor, MAX_BLOCKS_PER_MULTIPROCESSOR);
SAME(MemoryPoolsSupported, MEMORY_POOLS_SUPPORTED);
SAME(ClusterLaunch, CLUSTER_LAUNCH);
SAME(GPUDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED);
SAME(HostNumaId, HOST_NUMA_ID);
SAME(Max, MAX);
#undef SAME

static __thread int t_device;
static __thread int t_inited = -1;  /* the device whose context this thread made current */
static __thread cudaError_t t_last;

cudaError_t tdm__simcudart_ret(cudaError_t e) {
  if (e != cudaSuccess)
    t_last = e;
  return e;
}

cudaError_t tdm__simcudart_from_cu(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS: return cudaSuccess;
  case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
  case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
  case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
  case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
  case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
  case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
  case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
  case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
  case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
  case CUDA_ERROR_NOT_PERMITTED: return cudaErrorNotPermitted;
  default: return cudaErrorUnknown;
  }
}

int tdm__simcudart_device(void) { return t_device; }

int tdm__simcudart_init(void) {
  int dev = t_device;
  if (!tdm__simcuda_device(dev))
    return -1;
  if (t_inited != dev) {
    tdm__simcuda_ctx_init(dev);
    t_inited = dev;
  } else {
    /* The driver's current context may have been changed under us
     * (cuCtxSetCurrent); the runtime's device stays what it was. */
    CUcontext c;
    cuCtxGetCurrent(&c);
    if (!c)
      tdm__simcuda_ctx_init(dev);
  }
  return dev;
}

/* ---- errors -------------------------------------------------------------- */

static const struct { cudaError_t code; const char *name, *text; } g_errors[] = {
#define E(c, t) {c, #c, t}
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "driver shutting down"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorDeviceUninitialized, "invalid device context"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    E(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
    E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
    E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorUnsupportedLimit, "unsupported limit"),
    E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorUnknown, "unknown error"),
#undef E
};

const char *cudaGetErrorName(cudaError_t e) {
  for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
    if (g_errors[i].code == e)
      return g_errors[i].name;
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
    if (g_errors[i].code == e)
      return g_errors[i].text;
  return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

/* ---- versions and devices ----------------------------------------------- */

cudaError_t cudaDriverGetVersion(int *v) {
  if (!v)
    RET(cudaErrorInvalidValue);
  RET_CU(cuDriverGetVersion(v));
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  if (!v)
    RET(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
  if (!n)
    RET(cudaErrorInvalidValue);
  *n = tdm__simcuda_device_count();
  if (*n == 0)
    RET(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d) {
  if (!d)
    RET(cudaErrorInvalidValue);
  if (tdm__simcuda_device_count() == 0)
    RET(cudaErrorNoDevice);
  *d = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (!tdm__simcuda_device(d))
    RET(tdm__simcuda_device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
  t_device = d;
  /* Since CUDA 12, cudaSetDevice initializes the device's primary context. */
  tdm__simcudart_init();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (tdm__simcudart_init() < 0)
    RET(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  /* The primary context goes, and every allocation in it. */
  tdm__simcuda_mem_free_all(dev);
  return cudaSuccess;
}

cudaError_t cudaInitDevice(int d, unsigned int device_flags, unsigned int flags) {
  if (!tdm__simcuda_device(d))
    RET(cudaErrorInvalidDevice);
  return cudaSuccess;
}

static unsigned g_device_flags;

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  if (flags & ~(unsigned)(cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                          cudaDeviceSyncMemops))
    RET(cudaErrorInvalidValue);
  __atomic_store_n(&g_device_flags, flags, __ATOMIC_RELAXED);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags) {
  if (!flags)
    RET(cudaErrorInvalidValue);
  /* The context always maps host memory (unified addressing). */
  *flags = __atomic_load_n(&g_device_flags, __ATOMIC_RELAXED) | cudaDeviceMapHost;
  return cudaSuccess;
}

/* Limits, with the driver's defaults (the CUDA programming guide). */
static size_t g_limits[16] = {
    [cudaLimitStackSize] = 1024,
    [cudaLimitPrintfFifoSize] = 1 << 20,
    [cudaLimitMallocHeapSize] = 8 << 20,
    [cudaLimitDevRuntimeSyncDepth] = 2,
    [cudaLimitDevRuntimePendingLaunchCount] = 2048,
    [cudaLimitMaxL2FetchGranularity] = 64,
};

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t v) {
  if ((unsigned)limit >= sizeof g_limits / sizeof g_limits[0])
    RET(cudaErrorUnsupportedLimit);
  g_limits[limit] = v;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t *v, enum cudaLimit limit) {
  if (!v)
    RET(cudaErrorInvalidValue);
  if ((unsigned)limit >= sizeof g_limits / sizeof g_limits[0])
    RET(cudaErrorUnsupportedLimit);
  *v = g_limits[limit];
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
  if (!v)
    RET(cudaErrorInvalidValue);
  RET_CU(cuDeviceGetAttribute(v, (CUdevice_attribute)a, d));
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  const struct tdm__simcuda_device *dev = tdm__simcuda_device(d);
  if (!p)
    RET(cudaErrorInvalidValue);
  if (!dev)
    RET(cudaErrorInvalidDevice);
  const int *a = dev->attr;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", dev->p.name);
  memcpy(p->uuid.bytes, dev->uuid, sizeof p->uuid.bytes);
  p->totalGlobalMem = (size_t)dev->p.total_mem;
#define F(field, attr) p->field = a[CU_DEVICE_ATTRIBUTE_##attr]
  F(sharedMemPerBlock, MAX_SHARED_MEMORY_PER_BLOCK);
  F(regsPerBlock, MAX_REGISTERS_PER_BLOCK);
  F(warpSize, WARP_SIZE);
  F(memPitch, MAX_PITCH);
  F(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK);
  F(maxThreadsDim[0], MAX_BLOCK_DIM_X);
  F(maxThreadsDim[1], MAX_BLOCK_DIM_Y);
  F(maxThreadsDim[2], MAX_BLOCK_DIM_Z);
  F(maxGridSize[0], MAX_GRID_DIM_X);
  F(maxGridSize[1], MAX_GRID_DIM_Y);
  F(maxGridSize[2], MAX_GRID_DIM_Z);
  F(totalConstMem, TOTAL_CONSTANT_MEMORY);
  F(major, COMPUTE_CAPABILITY_MAJOR);
  F(minor, COMPUTE_CAPABILITY_MINOR);
  F(textureAlignment, TEXTURE_ALIGNMENT);
  F(texturePitchAlignment, TEXTURE_PITCH_ALIGNMENT);
  F(multiProcessorCount, MULTIPROCESSOR_COUNT);
  F(integrated, INTEGRATED);
  F(canMapHostMemory, CAN_MAP_HOST_MEMORY);
  F(maxTexture1D, MAXIMUM_TEXTURE1D_WIDTH);
  F(maxTexture2D[0], MAXIMUM_TEXTURE2D_WIDTH);
  F(maxTexture2D[1], MAXIMUM_TEXTURE2D_HEIGHT);
  F(maxTexture3D[0], MAXIMUM_TEXTURE3D_WIDTH);
  F(maxTexture3D[1], MAXIMUM_TEXTURE3D_HEIGHT);
  F(maxTexture3D[2], MAXIMUM_TEXTURE3D_DEPTH);
  F(surfaceAlignment, SURFACE_ALIGNMENT);
  F(concurrentKernels, CONCURRENT_KERNELS);
  F(ECCEnabled, ECC_ENABLED);
  F(pciBusID, PCI_BUS_ID);
  F(pciDeviceID, PCI_DEVICE_ID);
  F(pciDomainID, PCI_DOMAIN_ID);
  F(tccDriver, TCC_DRIVER);
  F(asyncEngineCount, ASYNC_ENGINE_COUNT);
  F(unifiedAddressing, UNIFIED_ADDRESSING);
  F(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH);
  F(l2CacheSize, L2_CACHE_SIZE);
  F(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE);
  F(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR);
  F(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED);
  F(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED);
  F(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED);
  F(sharedMemPerMultiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  F(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR);
  F(managedMemory, MANAGED_MEMORY);
  F(isMultiGpuBoard, MULTI_GPU_BOARD);
  F(multiGpuBoardGroupID, MULTI_GPU_BOARD_GROUP_ID);
  F(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED);
  F(pageableMemoryAccess, PAGEABLE_MEMORY_ACCESS);
  F(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS);
  F(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED);
  F(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
  F(cooperativeLaunch, COOPERATIVE_LAUNCH);
  F(sharedMemPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  F(pageableMemoryAccessUsesHostPageTables, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
  F(directManagedMemAccessFromHost, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
  F(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR);
  F(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE);
  F(reservedSharedMemPerBlock, RESERVED_SHARED_MEMORY_PER_BLOCK);
  F(hostRegisterSupported, HOST_REGISTER_SUPPORTED);
  F(sparseCudaArraySupported, SPARSE_CUDA_ARRAY_SUPPORTED);
  F(hostRegisterReadOnlySupported, READ_ONLY_HOST_REGISTER_SUPPORTED);
  F(timelineSemaphoreInteropSupported, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
  F(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED);
  F(gpuDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED);
  F(gpuDirectRDMAFlushWritesOptions, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
  F(gpuDirectRDMAWritesOrdering, GPU_DIRECT_RDMA_WRITES_ORDERING);
  F(memoryPoolSupportedHandleTypes, MEMPOOL_SUPPORTED_HANDLE_TYPES);
  F(deferredMappingCudaArraySupported, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
  F(ipcEventSupported, IPC_EVENT_SUPPORTED);
  F(clusterLaunch, CLUSTER_LAUNCH);
  F(unifiedFunctionPointers, UNIFIED_FUNCTION_POINTERS);
  F(deviceNumaConfig, NUMA_CONFIG);
  F(deviceNumaId, NUMA_ID);
  F(mpsEnabled, MPS_ENABLED);
  F(hostNumaId, HOST_NUMA_ID);
#undef F
  p->gpuPciDeviceID = (unsigned)dev->p.pci_device_id << 16 | 0x10de;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d) { RET_CU(cuDeviceGetPCIBusId(bus, len, d)); }

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
  /* Hopper and Ampere: priorities 0 (lowest) to -5 (highest). */
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer) {
  if (!can)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_device(d) || !tdm__simcuda_device(peer))
    RET(cudaErrorInvalidDevice);
  /* The devices of an SXM board reach each other over NVLink. */
  *can = d != peer;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  int dev = tdm__simcudart_init();
  if (dev < 0)
    RET(cudaErrorNoDevice);
  if (flags)
    RET(cudaErrorInvalidValue);
  if (!tdm__simcuda_device(peer) || peer == dev)
    RET(cudaErrorInvalidDevice);
  /* Peer access belongs to the context; one bit per (device, peer). */
  static unsigned enabled[SIMCUDA_MAX_DEVICES];
  unsigned bit = 1u << peer;
  if (__atomic_fetch_or(&enabled[dev], bit, __ATOMIC_RELAXED) & bit)
    RET(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status) {
  if (!symbol || !fn)
    RET(cudaErrorInvalidValue);
  *fn = tdm__simcuda_driver_symbol(symbol, (int)version);
  if (status)
    *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }
