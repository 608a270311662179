/* simcuda/driver/memory.c: the driver API's memory calls over the core's
 * simulated device memory (core/memory.c): allocation, copies and sets
 * (plain memcpy/memset, done at once whatever the stream), pointer
 * queries, and the virtual-memory calls PyTorch's expandable segments use.
 * Handle types: POSIX file descriptors are accepted as a request and
 * refused on export (no other process can import simulated memory); FABRIC
 * is refused at creation with CUDA_ERROR_NOT_SUPPORTED, as on a system
 * without IMEX, and PyTorch then falls back to POSIX file descriptors.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <string.h>

#define PTR(d) ((void *)(uintptr_t)(d))

static int cur_dev(void) { return tdm__simcuda_current_device(); }

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytes) {
  int dev = cur_dev();
  if (dev < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!dptr)
    return CUDA_ERROR_INVALID_VALUE;
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;  /* the driver refuses size 0 */
  void *p;
  CUresult r = tdm__simcuda_mem_alloc(dev, bytes, &p);
  if (r == CUDA_SUCCESS)
    *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult cuMemFree(CUdeviceptr d) { return tdm__simcuda_mem_free(PTR(d)); }

CUresult cuMemGetInfo(size_t *free_b, size_t *total_b) {
  int dev = cur_dev();
  if (dev < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  return tdm__simcuda_mem_info(dev, free_b, total_b);
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr d) {
  void *b;
  size_t s;
  if (tdm__simcuda_mem_lookup(PTR(d), &b, &s) < 0)
    return CUDA_ERROR_NOT_FOUND;
  if (base)
    *base = (CUdeviceptr)(uintptr_t)b;
  if (size)
    *size = s;
  return CUDA_SUCCESS;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  if (n)
    memmove(PTR(dst), PTR(src), n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  if (n)
    memcpy(PTR(dst), src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  if (n)
    memcpy(dst, PTR(src), n);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  if (!tdm__simcuda_stream_valid(s))
    return CUDA_ERROR_INVALID_HANDLE;
  uint32_t *p = PTR(d);
  for (size_t i = 0; i < n; i++)
    p[i] = v;
  return CUDA_SUCCESS;
}

CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned int flags) {
  if (!tdm__simcuda_stream_valid(s))
    return CUDA_ERROR_INVALID_HANDLE;
  *(volatile uint32_t *)PTR(addr) = v;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr ptr) {
  void *base;
  size_t size;
  int dev = tdm__simcuda_mem_lookup(PTR(ptr), &base, &size);
  if (!data)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0)
    return CUDA_ERROR_INVALID_VALUE;  /* not device memory the driver knows */
  switch (a) {
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    *(CUcontext *)data = tdm__simcuda_primary_ctx(dev);
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    *(CUdeviceptr *)data = ptr;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    *(void **)data = NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *(int *)data = dev;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    *(size_t *)data = size;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *(int *)data = 1;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    *(int *)data = 0;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

/* ---- virtual memory management ------------------------------------------ */

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  if (!g || !prop)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !tdm__simcuda_device(prop->location.id))
    return CUDA_ERROR_INVALID_DEVICE;
  *g = SIMCUDA_GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
  void *p;
  if (!ptr)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = tdm__simcuda_va_reserve(size, align, PTR(addr), &p);
  if (r == CUDA_SUCCESS)
    *ptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) { return tdm__simcuda_va_free(PTR(ptr), size); }

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  if (!handle || !prop || flags)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;
  uint64_t h;
  CUresult r = tdm__simcuda_phys_create(prop->location.id, size, &h);
  if (r == CUDA_SUCCESS)
    *handle = h;
  return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return tdm__simcuda_phys_release(h); }

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags) {
  if (flags)
    return CUDA_ERROR_INVALID_VALUE;
  return tdm__simcuda_phys_map(PTR(ptr), size, offset, h);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) { return tdm__simcuda_phys_unmap(PTR(ptr), size); }

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  if (!desc || !count)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !tdm__simcuda_device(desc[i].location.id))
      return CUDA_ERROR_INVALID_DEVICE;
  /* Mapped ranges are read-write from cuMemMap on (the host is every
   * device here); the range must be mapped. */
  void *b;
  size_t s;
  if (tdm__simcuda_mem_lookup(PTR(ptr), &b, &s) < 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h) {
  int dev;
  size_t size;
  if (!prop)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = tdm__simcuda_phys_props(h, &dev, &size);
  if (r)
    return r;
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = dev;
  prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return CUDA_SUCCESS;
}
