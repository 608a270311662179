/* tests/fakes/cuda/fake_cuda_pool.c: the fake driver's stream-ordered
 * memory pools, IPC handles, shareable handles and pointer queries.
 *
 * Pools behave as CUDA documents them: an allocation takes memory the
 * pool holds idle first and grows the pool (the device's used bytes) for
 * the rest; a free gives the memory back to the pool, which keeps it; a
 * stream or context synchronization releases what the pool holds beyond
 * its release threshold (0 by default: everything idle; PyTorch sets
 * UINT64_MAX); cuMemPoolTrimTo releases idle memory down to a size.  The
 * attributes report reserved / used bytes and their high-water marks.
 * Every device's default pool is fake_cuda_ctx.c's; the current pool
 * starts as the default one.
 *
 * IPC: cuIpcGetMemHandle "Gets an interprocess memory handle for an
 * existing device memory allocation": the allocation containing the
 * pointer, so the handle holds that allocation's base (and the offset of
 * the pointer in it, which the driver does not give the peer);
 * cuIpcOpenMemHandle "Maps memory exported from another process" — that
 * whole allocation: a new range (not the device's memory: it does not
 * count against capacity) of its size, which stands for its base
 * (fake_cuda_ipc_source), with the exporter's device ordinal.  The fake lets a process open its own handle
 * (CUDA refuses that), so one test program can play both sides.
 * Shareable handles: the "file descriptor" is the handle value; an import
 * makes a new handle for the same memory (not counted again).
 * Multicast objects: a handle of their size that maps like a physical
 * allocation's but holds no memory of its own; memory is bound to it from
 * physical allocations, each counted where it was made.
 *
 * Lock: pool_lock around every pool's counters; the registry has its own.
 */
#define _GNU_SOURCE
#include "fake_cuda_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CUmemoryPool current[MAX_DEV];

static int device_ok(CUdevice d)
{
    int n = 0;
    return f_cuDeviceGetCount(&n) == CUDA_SUCCESS && d >= 0 && d < n;
}

CUresult f_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    ENTER(FC_cuDeviceGetMemPool);
    NEED_INIT();
    if (pool == NULL || !device_ok(dev))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    CUmemoryPool p = current[dev];
    pthread_mutex_unlock(&pool_lock);
    if (p == NULL)
        return f_cuDeviceGetDefaultMemPool(pool, dev);
    *pool = p;
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    ENTER(FC_cuDeviceSetMemPool);
    NEED_INIT();
    if (pool == NULL || !device_ok(dev) || ((fake_pool *)pool)->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    current[dev] = pool;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

#if CUDA_VERSION >= 13000
/* CUDA 13: the current pool of a location, for an allocation type; a
 * device's pinned memory is what cuDeviceSetMemPool sets. */
CUresult f_cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    ENTER(FC_cuMemSetMemPool);
    NEED_INIT();
    if (location == NULL || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED; /* host pools: not modelled */
    CUdevice dev = location->id;
    if (pool == NULL || !device_ok(dev) || ((fake_pool *)pool)->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    current[dev] = pool;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}
#endif

CUresult f_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    ENTER(FC_cuMemPoolCreate);
    NEED_INIT();
    if (pool == NULL || props == NULL || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !device_ok(props->location.id))
        return CUDA_ERROR_INVALID_VALUE;
    fake_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->device = props->location.id;
    p->made = 1;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult f_cuMemPoolDestroy(CUmemoryPool pool)
{
    ENTER(FC_cuMemPoolDestroy);
    fake_pool *p = (fake_pool *)pool;
    if (p == NULL || !p->made)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    for (int d = 0; d < MAX_DEV; d++)
        if (current[d] == pool)
            current[d] = NULL; /* back to the default pool */
    fake_pool_bytes_keep(&fake__memory, &p->bytes, p->device, 0); /* what is idle */
    int busy = p->bytes.used != 0;
    pthread_mutex_unlock(&pool_lock);
    if (!busy) /* a pool with live allocations lives on until they go */
        free(p);
    return CUDA_SUCCESS;
}

CUresult f_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    ENTER(FC_cuMemPoolSetAttribute);
    fake_pool *p = (fake_pool *)pool;
    if (p == NULL || value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->bytes.threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: p->bytes.reserved_high = p->bytes.reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: p->bytes.used_high = p->bytes.used; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

CUresult f_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    ENTER(FC_cuMemPoolGetAttribute);
    fake_pool *p = (fake_pool *)pool;
    if (p == NULL || value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&pool_lock);
    cuuint64_t *out = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = p->bytes.threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p->bytes.reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p->bytes.reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p->bytes.used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p->bytes.used_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

CUresult f_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    ENTER(FC_cuMemPoolTrimTo);
    fake_pool *p = (fake_pool *)pool;
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    fake_pool_bytes_keep(&fake__memory, &p->bytes, p->device, keep);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

CUresult fake__pool_alloc(fake_pool *p, CUdeviceptr *dptr, size_t size)
{
    uintptr_t addr = 0;
    *dptr = 0;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long limit = atomic_load(&fake__cfg.oom_above);
    if (limit != 0 && size > limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&pool_lock);
    int grown = fake_pool_bytes_take(&fake__memory, &p->bytes, p->device, size);
    pthread_mutex_unlock(&pool_lock);
    if (grown != FAKE_MEM_OK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r;
    r = fake__take(FAKE_K_POOLED, p->device, size, p, &addr);
    if (r != CUDA_SUCCESS) { /* no address: undo */
        pthread_mutex_lock(&pool_lock);
        fake_pool_bytes_back(&p->bytes, size);
        pthread_mutex_unlock(&pool_lock);
    }
    *dptr = (CUdeviceptr)addr;
    return r;
}

CUresult fake__pool_free(CUdeviceptr ptr)
{
    fake_alloc a;
    CUresult r = fake__give((uintptr_t)ptr, 1u << FAKE_K_POOLED, &a);
    if (r != CUDA_SUCCESS)
        return r;
    fake_pool *p = a.pool;
    pthread_mutex_lock(&pool_lock);
    fake_pool_bytes_back(&p->bytes, a.size); /* the pool keeps it until a synchronization */
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

/* Every pool the fake knows: the defaults and the current ones (pools the
 * program made and never set as current are released by trim only). */
void fake__pool_synchronize(void)
{
    pthread_mutex_lock(&pool_lock);
    for (int d = 0; d < MAX_DEV; d++) {
        fake_pool *p = (fake_pool *)current[d];
        if (p)
            fake_pool_bytes_keep(&fake__memory, &p->bytes, p->device, p->bytes.threshold);
    }
    pthread_mutex_unlock(&pool_lock);
    int n = 0;
    f_cuDeviceGetCount(&n);
    for (int d = 0; d < n; d++) {
        CUmemoryPool def;
        if (f_cuDeviceGetDefaultMemPool(&def, d) != CUDA_SUCCESS)
            continue;
        fake_pool *p = (fake_pool *)def;
        pthread_mutex_lock(&pool_lock);
        fake_pool_bytes_keep(&fake__memory, &p->bytes, p->device, p->bytes.threshold);
        pthread_mutex_unlock(&pool_lock);
    }
}

CUresult f_cuStreamSynchronize_ptsz(CUstream s)
{
    ENTER(FC_cuStreamSynchronize_ptsz);
    return fake__stream_synchronize(s == NULL ? CU_STREAM_PER_THREAD : s); /* 0: this thread's */
}

/* ---- pointers, IPC, shareable handles ------------------------------------------ */

CUresult f_cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    ENTER(FC_cuPointerGetAttribute);
    NEED_INIT();
    fake_alloc a;
    uintptr_t b;
    if (data == NULL || attr != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
        !fake__lookup_containing((uintptr_t)ptr, &b, &a) || a.device < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *(int *)data = a.device;
    return CUDA_SUCCESS;
}

CUresult f_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    ENTER(FC_cuMemGetAddressRange_v2);
    NEED_INIT();
    fake_alloc a;
    uintptr_t b;
    if (!fake__lookup_containing((uintptr_t)ptr, &b, &a))
        return CUDA_ERROR_NOT_FOUND;
    if (base)
        *base = (CUdeviceptr)b;
    if (size)
        *size = a.size;
    return CUDA_SUCCESS;
}

CUresult f_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr ptr)
{
    ENTER(FC_cuIpcGetMemHandle);
    NEED_INIT();
    fake_alloc a;
    uintptr_t base;
    if (h == NULL || !fake__lookup_containing((uintptr_t)ptr, &base, &a) ||
        (a.kind != FAKE_K_DEVICE && a.kind != FAKE_K_POOLED))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t offset = (uint64_t)ptr - base;
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &base, sizeof base);
    memcpy(h->reserved + sizeof base, &offset, sizeof offset);
    return CUDA_SUCCESS;
}

CUresult f_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle h, unsigned int flags)
{
    ENTER(FC_cuIpcOpenMemHandle_v2);
    NEED_INIT();
    (void)flags;
    CUdeviceptr src;
    memcpy(&src, h.reserved, sizeof src);
    fake_alloc a;
    if (pdptr == NULL || !fake__lookup((uintptr_t)src, &a))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t addr;
    CUresult r = fake__take(FAKE_K_IPC, a.device, a.size, (void *)(uintptr_t)src, &addr);
    *pdptr = r == CUDA_SUCCESS ? (CUdeviceptr)addr : 0;
    return r;
}

/* The exporter's address an opened IPC range stands for (its base in the
 * exporting process); 0 when `opened` is not such a range. */
FAKE_EXPORT unsigned long long fake_cuda_ipc_source(unsigned long long opened)
{
    fake_alloc a;
    if (!fake__lookup((uintptr_t)opened, &a) || a.kind != FAKE_K_IPC)
        return 0;
    return (unsigned long long)(uintptr_t)a.pool;
}

CUresult f_cuIpcCloseMemHandle(CUdeviceptr ptr)
{
    ENTER(FC_cuIpcCloseMemHandle);
    return fake__give((uintptr_t)ptr, 1u << FAKE_K_IPC, NULL);
}

CUresult f_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                        CUmemAllocationHandleType type, unsigned long long flags)
{
    ENTER(FC_cuMemExportToShareableHandle);
    fake_alloc a;
    if (out == NULL || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !fake__lookup((uintptr_t)h, &a) || !fake__is_phys(a.kind))
        return CUDA_ERROR_INVALID_VALUE;
    *(int *)out = (int)h; /* handles are small numbers in the fake */
    return CUDA_SUCCESS;
}

CUresult f_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle,
                                          CUmemAllocationHandleType type)
{
    ENTER(FC_cuMemImportFromShareableHandle);
    NEED_INIT();
    fake_alloc a;
    uintptr_t key = (uintptr_t)os_handle;
    if (h == NULL || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !fake__lookup(key, &a) || !fake__is_phys(a.kind))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t out;
    CUresult r = fake__take(FAKE_K_PHYS_IMPORT, a.device, a.size, NULL, &out);
    *h = r == CUDA_SUCCESS ? (CUmemGenericAllocationHandle)out : 0;
    return r;
}

CUresult f_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                  CUmemGenericAllocationHandle h)
{
    ENTER(FC_cuMemGetAllocationPropertiesFromHandle);
    fake_alloc a;
    if (prop == NULL || !fake__lookup((uintptr_t)h, &a) || !fake__is_phys(a.kind))
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = a.device < 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA
                                       : CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = a.device < 0 ? 0 : a.device;
    return CUDA_SUCCESS;
}

/* ---- multicast objects ------------------------------------------------------------ */

#if CUDA_VERSION >= 12010
CUresult f_cuMulticastCreate(CUmemGenericAllocationHandle *mc, const CUmulticastObjectProp *prop)
{
    ENTER(FC_cuMulticastCreate);
    NEED_INIT();
    if (mc == NULL || prop == NULL || prop->numDevices == 0 || prop->size == 0 ||
        prop->flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t key;
    CUresult r = fake__take(FAKE_K_MULTICAST, -1, prop->size, NULL, &key);
    *mc = r == CUDA_SUCCESS ? (CUmemGenericAllocationHandle)key : 0;
    return r;
}

static int is_multicast(CUmemGenericAllocationHandle mc, fake_alloc *a)
{
    return fake__lookup((uintptr_t)mc, a) && a->kind == FAKE_K_MULTICAST;
}

CUresult f_cuMulticastAddDevice(CUmemGenericAllocationHandle mc, CUdevice dev)
{
    ENTER(FC_cuMulticastAddDevice);
    fake_alloc a;
    return is_multicast(mc, &a) && device_ok(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult f_cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_offset,
                              CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size,
                              unsigned long long flags)
{
    ENTER(FC_cuMulticastBindMem);
    fake_alloc m, p;
    if (!is_multicast(mc, &m) || !fake__lookup((uintptr_t)mem, &p) || p.kind != FAKE_K_PHYS ||
        flags != 0 || size == 0 || mc_offset + size > m.size || mem_offset + size > p.size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult f_cuMulticastUnbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_offset,
                             size_t size)
{
    ENTER(FC_cuMulticastUnbind);
    fake_alloc m;
    if (!is_multicast(mc, &m) || !device_ok(dev) || mc_offset + size > m.size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
#endif

FAKE_POOLS(FC_ALIAS)
FAKE_MULTICAST(FC_ALIAS)

/* Tests: the pools give back what they hold above their release
 * thresholds through no call the hooks see, as a driver does at
 * cuCtxSynchronize or an event wait. */
FAKE_EXPORT void fake_cuda_pool_release_unseen(void)
{
    fake__pool_synchronize();
}
