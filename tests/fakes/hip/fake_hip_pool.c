/* tests/fakes/hip/fake_hip_pool.c: the fake libamdhip64's stream-ordered
 * memory pools, IPC handles, shareable handles and pointer queries.
 *
 * Pools behave as HIP (and CUDA) document them: an allocation takes memory
 * the pool holds idle first and grows the pool (the device's used bytes)
 * for the rest; hipFreeAsync (or hipFree) gives the memory back to the
 * pool, which keeps it; hipStreamSynchronize / hipDeviceSynchronize
 * release what a pool holds beyond its release threshold (0 by default:
 * everything idle; PyTorch's backend:cudaMallocAsync sets UINT64_MAX);
 * hipMemPoolTrimTo releases idle memory down to a size.  The attributes
 * report reserved / used bytes and their high-water marks.  hipMallocAsync
 * takes from the device's current pool (hipDeviceSetMemPool; the default
 * pool until then).
 *
 * IPC: hipIpcGetMemHandle writes the allocation's address into the
 * handle; hipIpcOpenMemHandle maps a new range of the same size (not the
 * device's memory: it does not count against capacity) whose device
 * ordinal is the exporter's.  The fake lets a process open its own handle
 * (HIP refuses that), so one test program can play both sides.
 * Shareable handles: the "file descriptor" is 1000 + a slot of the export
 * table; an import makes a new handle for the same memory, not counted
 * again.
 *
 * Lock: pool_mu around every pool's counters and the current pools, taken
 * before mu (fake_hip.c) where both are needed.
 */
#include "fake_hip_internal.h"

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ihipMemPoolHandle_t default_pools[MAX_DEVICES];
static hipMemPool_t current[MAX_DEVICES]; /* NULL: the default pool */

static int is_default(hipMemPool_t p)
{
    return p >= default_pools && p < default_pools + MAX_DEVICES;
}

/* The current pool of `device` (checked). */
static hipMemPool_t current_pool(int device)
{
    pthread_mutex_lock(&pool_mu);
    hipMemPool_t p = current[device];
    pthread_mutex_unlock(&pool_mu);
    if (p == NULL) {
        p = &default_pools[device];
        p->device = device;
    }
    return p;
}

EXPORT hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t *mem_pool, int device)
{
    int e = enter(F_hipDeviceGetDefaultMemPool);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!mem_pool)
        return fake_last(hipErrorInvalidValue);
    default_pools[device].device = device;
    *mem_pool = &default_pools[device];
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipDeviceGetMemPool(hipMemPool_t *mem_pool, int device)
{
    int e = enter(F_hipDeviceGetMemPool);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!mem_pool)
        return fake_last(hipErrorInvalidValue);
    *mem_pool = current_pool(device);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool)
{
    int e = enter(F_hipDeviceSetMemPool);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!mem_pool || mem_pool->device != device)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    current[device] = mem_pool;
    pthread_mutex_unlock(&pool_mu);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipMemPoolCreate(hipMemPool_t *mem_pool, const hipMemPoolProps *pool_props)
{
    int e = enter(F_hipMemPoolCreate);
    if (e)
        return fake_last((hipError_t)e);
    if (!mem_pool || !pool_props || pool_props->location.type != hipMemLocationTypeDevice)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = check_device(pool_props->location.id);
    if (r != hipSuccess)
        return fake_last(r);
    *mem_pool = calloc(1, sizeof **mem_pool);
    if (!*mem_pool)
        return fake_last(hipErrorOutOfMemory);
    (*mem_pool)->device = pool_props->location.id;
    (*mem_pool)->made = 1;
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool)
{
    int e = enter(F_hipMemPoolDestroy);
    if (e)
        return fake_last((hipError_t)e);
    if (!mem_pool)
        return fake_last(hipErrorInvalidValue);
    if (is_default(mem_pool))
        return fake_last(hipSuccess); /* the fake's defaults live on */
    pthread_mutex_lock(&pool_mu);
    for (int d = 0; d < MAX_DEVICES; d++)
        if (current[d] == mem_pool)
            current[d] = NULL; /* back to the default pool */
    fake_pool_bytes_keep(&fake_hip_memory, &mem_pool->bytes, mem_pool->device, 0); /* what is idle */
    int busy = mem_pool->bytes.used != 0;
    pthread_mutex_unlock(&pool_mu);
    if (!busy) /* a pool with live allocations lives on until they go */
        free(mem_pool);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipMemPoolSetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void *value)
{
    int e = enter(F_hipMemPoolSetAttribute);
    if (e)
        return fake_last((hipError_t)e);
    if (!mem_pool || !value)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = hipSuccess;
    pthread_mutex_lock(&pool_mu);
    switch (attr) {
    case hipMemPoolAttrReleaseThreshold: mem_pool->bytes.threshold = *(uint64_t *)value; break;
    case hipMemPoolAttrReservedMemHigh: mem_pool->bytes.reserved_high = mem_pool->bytes.reserved; break;
    case hipMemPoolAttrUsedMemHigh: mem_pool->bytes.used_high = mem_pool->bytes.used; break;
    default: r = hipErrorInvalidValue; break;
    }
    pthread_mutex_unlock(&pool_mu);
    return fake_last(r);
}

EXPORT hipError_t hipMemPoolGetAttribute(hipMemPool_t mem_pool, hipMemPoolAttr attr, void *value)
{
    int e = enter(F_hipMemPoolGetAttribute);
    if (e)
        return fake_last((hipError_t)e);
    if (!mem_pool || !value)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = hipSuccess;
    uint64_t *out = value;
    pthread_mutex_lock(&pool_mu);
    switch (attr) {
    case hipMemPoolAttrReleaseThreshold: *out = mem_pool->bytes.threshold; break;
    case hipMemPoolAttrReservedMemCurrent: *out = mem_pool->bytes.reserved; break;
    case hipMemPoolAttrReservedMemHigh: *out = mem_pool->bytes.reserved_high; break;
    case hipMemPoolAttrUsedMemCurrent: *out = mem_pool->bytes.used; break;
    case hipMemPoolAttrUsedMemHigh: *out = mem_pool->bytes.used_high; break;
    default: r = hipErrorInvalidValue; break;
    }
    pthread_mutex_unlock(&pool_mu);
    return fake_last(r);
}

EXPORT hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold)
{
    int e = enter(F_hipMemPoolTrimTo);
    if (e)
        return fake_last((hipError_t)e);
    if (!mem_pool)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    fake_pool_bytes_keep(&fake_hip_memory, &mem_pool->bytes, mem_pool->device, min_bytes_to_hold);
    pthread_mutex_unlock(&pool_mu);
    return fake_last(hipSuccess);
}

void fake_pools_synchronize(void)
{
    pthread_mutex_lock(&pool_mu);
    for (int d = 0; d < MAX_DEVICES; d++) {
        hipMemPool_t ps[2] = {current[d], &default_pools[d]};
        for (int i = 0; i < 2; i++)
            if (ps[i])
                fake_pool_bytes_keep(&fake_hip_memory, &ps[i]->bytes, ps[i]->device,
                               ps[i]->bytes.threshold);
    }
    pthread_mutex_unlock(&pool_mu);
}

EXPORT void fake_hip_pool_release_unseen(void)
{
    fake_pools_synchronize();
}

/* An allocation of `size` from pool p. */
static hipError_t pool_alloc(hipMemPool_t p, void **dev_ptr, size_t size)
{
    if (!dev_ptr)
        return hipErrorInvalidValue;
    *dev_ptr = NULL;
    if (size == 0)
        return hipSuccess;
    pthread_mutex_lock(&pool_mu);
    hipError_t r = fake_pool_bytes_take(&fake_hip_memory, &p->bytes, p->device, size) == FAKE_MEM_OK
                       ? hipSuccess : hipErrorOutOfMemory;
    pthread_mutex_unlock(&pool_mu);
    if (r != hipSuccess)
        return r;
    void *block = block_get(rounded(size));
    r = block ? track_in(block, size, p->device, K_POOLED, p) : hipErrorOutOfMemory;
    if (r != hipSuccess) { /* no address: the memory stays idle in the pool */
        if (block)
            block_put(block, rounded(size));
        pthread_mutex_lock(&pool_mu);
        fake_pool_bytes_back(&p->bytes, size);
        pthread_mutex_unlock(&pool_mu);
        return r;
    }
    *dev_ptr = block;
    return hipSuccess;
}

int fake_pool_give(void *ptr)
{
    size_t size = 0;
    void *pool = NULL;
    if (ptr == NULL || !untrack_in(ptr, K_POOLED, &size, &pool))
        return 0;
    block_put(ptr, rounded(size));
    hipMemPool_t p = pool;
    pthread_mutex_lock(&pool_mu);
    fake_pool_bytes_back(&p->bytes, size); /* the pool keeps it until a synchronization */
    pthread_mutex_unlock(&pool_mu);
    return 1;
}

/* HIP's documentation of hipMallocAsync (hip_runtime_api.h): "The
 * allocation comes from the memory pool associated with the stream's
 * device."  So a stream made on device 1 allocates from device 1's current
 * pool whichever device is current; the null stream and hipStreamPerThread
 * are the current device's. */
EXPORT hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream)
{
    ALLOC_PROLOGUE(F_hipMallocAsync);
    return fake_last(pool_alloc(current_pool(fake_stream_device(stream)), dev_ptr, size));
}

EXPORT hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size, hipMemPool_t mem_pool,
                                         hipStream_t stream)
{
    ALLOC_PROLOGUE(F_hipMallocFromPoolAsync);
    (void)stream;
    if (!mem_pool)
        return fake_last(hipErrorInvalidValue);
    return fake_last(pool_alloc(mem_pool, dev_ptr, size));
}

EXPORT hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream)
{
    ALLOC_PROLOGUE(F_hipFreeAsync);
    (void)stream;
    if (dev_ptr == NULL || fake_pool_give(dev_ptr))
        return fake_last(hipSuccess);
    size_t size = 0; /* hipMalloc'ed memory may be freed this way too */
    if (!untrack(dev_ptr, K_DEVICE, &size))
        return fake_last(hipErrorInvalidValue);
    block_put(dev_ptr, rounded(size));
    return fake_last(hipSuccess);
}

/* ---- pointer queries --------------------------------------------------------- */

EXPORT hipError_t hipPointerGetAttribute(void *data, hipPointer_attribute attribute,
                                         hipDeviceptr_t ptr)
{
    int e = enter(F_hipPointerGetAttribute);
    if (e)
        return fake_last((hipError_t)e);
    int kind, device;
    size_t size;
    if (!data || attribute != HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
        !lookup(ptr, &kind, &size, &device) || device < 0)
        return fake_last(hipErrorInvalidValue);
    *(int *)data = device;
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipMemGetAddressRange(hipDeviceptr_t *pbase, size_t *psize, hipDeviceptr_t dptr)
{
    int e = enter(F_hipMemGetAddressRange);
    if (e)
        return fake_last((hipError_t)e);
    int kind, device;
    size_t size;
    if (!lookup(dptr, &kind, &size, &device) || kind == K_PHYS || kind == K_PHYS_IMPORT)
        return fake_last(hipErrorNotFound);
    if (pbase)
        *pbase = dptr;
    if (psize)
        *psize = size;
    return fake_last(hipSuccess);
}

/* ---- IPC ------------------------------------------------------------------------ */

EXPORT hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *devPtr)
{
    int e = enter(F_hipIpcGetMemHandle);
    if (e)
        return fake_last((hipError_t)e);
    int kind, device;
    size_t size;
    if (!handle || !lookup(devPtr, &kind, &size, &device) ||
        (kind != K_DEVICE && kind != K_POOLED))
        return fake_last(hipErrorInvalidValue);
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &devPtr, sizeof devPtr);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle, unsigned int flags)
{
    int e = enter(F_hipIpcOpenMemHandle);
    if (e)
        return fake_last((hipError_t)e);
    (void)flags;
    void *src;
    memcpy(&src, handle.reserved, sizeof src);
    int kind, device;
    size_t size;
    if (!devPtr || !lookup(src, &kind, &size, &device) || (kind != K_DEVICE && kind != K_POOLED))
        return fake_last(hipErrorInvalidValue);
    void *p = block_get(rounded(size));
    hipError_t r = p ? track(p, size, device, K_IPC) : hipErrorOutOfMemory;
    if (r != hipSuccess && p)
        block_put(p, rounded(size));
    *devPtr = r == hipSuccess ? p : NULL;
    return fake_last(r);
}

EXPORT hipError_t hipIpcCloseMemHandle(void *devPtr)
{
    int e = enter(F_hipIpcCloseMemHandle);
    if (e)
        return fake_last((hipError_t)e);
    size_t size;
    if (!devPtr || !untrack(devPtr, K_IPC, &size))
        return fake_last(hipErrorInvalidValue);
    block_put(devPtr, rounded(size));
    return fake_last(hipSuccess);
}

/* ---- shareable handles ---------------------------------------------------------- */

#define MAX_EXPORTS 64
#define FD_BASE 1000
static hipMemGenericAllocationHandle_t exported[MAX_EXPORTS];

EXPORT hipError_t hipMemExportToShareableHandle(void *shareableHandle,
                                                hipMemGenericAllocationHandle_t handle,
                                                hipMemAllocationHandleType handleType,
                                                unsigned long long flags)
{
    int e = enter(F_hipMemExportToShareableHandle);
    if (e)
        return fake_last((hipError_t)e);
    if (!shareableHandle || !handle || flags != 0 ||
        handleType != hipMemHandleTypePosixFileDescriptor)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = hipErrorOutOfMemory;
    pthread_mutex_lock(&pool_mu);
    for (int i = 0; i < MAX_EXPORTS; i++)
        if (exported[i] == NULL || exported[i] == handle) {
            exported[i] = handle;
            *(int *)shareableHandle = FD_BASE + i;
            r = hipSuccess;
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    return fake_last(r);
}

EXPORT hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                  void *osHandle,
                                                  hipMemAllocationHandleType shHandleType)
{
    int e = enter(F_hipMemImportFromShareableHandle);
    if (e)
        return fake_last((hipError_t)e);
    long fd = (long)(intptr_t)osHandle - FD_BASE;
    if (!handle || shHandleType != hipMemHandleTypePosixFileDescriptor || fd < 0 ||
        fd >= MAX_EXPORTS)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&pool_mu);
    hipMemGenericAllocationHandle_t src = exported[fd];
    pthread_mutex_unlock(&pool_mu);
    if (!src)
        return fake_last(hipErrorInvalidValue);
    struct ihipMemGenericAllocationHandle *h = calloc(1, sizeof *h);
    if (!h)
        return fake_last(hipErrorOutOfMemory);
    h->size = src->size;
    h->device = src->device;
    h->imported = 1;
    hipError_t r = track(h, h->size, h->device, K_PHYS_IMPORT);
    if (r != hipSuccess) {
        free(h);
        return fake_last(r);
    }
    *handle = h;
    return fake_last(hipSuccess);
}
