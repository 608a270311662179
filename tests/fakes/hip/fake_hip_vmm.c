/* tests/fakes/hip/fake_hip_vmm.c: the fake libamdhip64's virtual memory
 * (hipMemAddressReserve / Free, hipMemCreate / Release, hipMemMap /
 * Unmap, hipMemSetAccess, hipMemGetAllocationGranularity,
 * hipMemGetAllocationPropertiesFromHandle).  Reserved ranges are
 * PROT_NONE mappings; a mapped range becomes read-write; a physical handle
 * counts as device memory in the allocation table (K_PHYS).
 *
 * Lock: mu (fake_hip.c) around the reservation and mapping slots. */
#include "fake_hip_internal.h"

/* ---- virtual memory ------------------------------------------------------- */

/* Mappings and reservations live at once: more than an H200's expandable
 * segments make (~7000 pages of 20 MiB), so the hooks' tables can be
 * tested past any fixed size of theirs. */
#define MAX_MAPS 16384
static struct {
    char *va;    /* NULL: free slot */
    size_t size; /* bytes */
    hipMemGenericAllocationHandle_t h;
} maps[MAX_MAPS];
static struct {
    char *va;
    size_t size;
} reserved[MAX_MAPS];

EXPORT hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                       unsigned long long flags)
{
    ALLOC_PROLOGUE(F_hipMemAddressReserve);
    (void)alignment, (void)addr, (void)flags;
    if (!ptr || size == 0)
        return fake_last(hipErrorInvalidValue);
    void *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED)
        return fake_last(hipErrorOutOfMemory);
    r = hipErrorOutOfMemory;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_MAPS; i++)
        if (!reserved[i].va) {
            reserved[i].va = va;
            reserved[i].size = size;
            r = hipSuccess;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (r != hipSuccess)
        munmap(va, size);
    else
        *ptr = va;
    return fake_last(r);
}

EXPORT hipError_t hipMemAddressFree(void *devPtr, size_t size)
{
    ALLOC_PROLOGUE(F_hipMemAddressFree);
    r = hipErrorInvalidValue;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_MAPS; i++)
        if (reserved[i].va == devPtr && reserved[i].size == size) {
            reserved[i].va = NULL;
            r = hipSuccess;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (r == hipSuccess)
        munmap(devPtr, size);
    return fake_last(r);
}

EXPORT hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                               const hipMemAllocationProp *prop, unsigned long long flags)
{
    int e = enter(F_hipMemCreate);
    if (e)
        return fake_last((hipError_t)e);
    (void)flags;
    if (!handle || !prop || size == 0 || prop->type != hipMemAllocationTypePinned ||
        prop->location.type != hipMemLocationTypeDevice)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = check_device(prop->location.id);
    if (r != hipSuccess)
        return fake_last(r);
    struct ihipMemGenericAllocationHandle *h = calloc(1, sizeof *h);
    if (!h)
        return fake_last(hipErrorOutOfMemory);
    h->size = size;
    h->device = prop->location.id;
    r = track(h, size, h->device, K_PHYS);
    if (r != hipSuccess) {
        free(h);
        return fake_last(r);
    }
    *handle = h;
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipMemGetAllocationPropertiesFromHandle(hipMemAllocationProp *prop,
                                                          hipMemGenericAllocationHandle_t handle)
{
    int e = enter(F_hipMemGetAllocationPropertiesFromHandle);
    if (e)
        return fake_last((hipError_t)e);
    if (!prop || !handle)
        return fake_last(hipErrorInvalidValue);
    memset(prop, 0, sizeof *prop);
    prop->type = hipMemAllocationTypePinned;
    prop->location.type = hipMemLocationTypeDevice;
    prop->location.id = handle->device;
    return fake_last(hipSuccess);
}

static void release_handle(hipMemGenericAllocationHandle_t h)
{
    size_t size;
    untrack(h, h->imported ? K_PHYS_IMPORT : K_PHYS, &size);
    free(h);
}

EXPORT hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)
{
    int e = enter(F_hipMemRelease);
    if (e)
        return fake_last((hipError_t)e);
    if (!handle)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&mu);
    int mapped = handle->maps > 0;
    if (mapped)
        handle->released = 1; /* freed at its last unmap */
    pthread_mutex_unlock(&mu);
    if (!mapped)
        release_handle(handle);
    return fake_last(hipSuccess);
}

/* [ptr, ptr+size) lies in one reservation.  Called with mu held. */
static int in_reservation(const void *ptr, size_t size)
{
    for (int i = 0; i < MAX_MAPS; i++)
        if (reserved[i].va && (const char *)ptr >= reserved[i].va &&
            (const char *)ptr + size <= reserved[i].va + reserved[i].size)
            return 1;
    return 0;
}

EXPORT hipError_t hipMemMap(void *ptr, size_t size, size_t offset,
                            hipMemGenericAllocationHandle_t handle, unsigned long long flags)
{
    int e = enter(F_hipMemMap);
    if (e)
        return fake_last((hipError_t)e);
    (void)flags;
    if (!ptr || !handle || size == 0 || offset + size > handle->size)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = hipErrorInvalidValue;
    pthread_mutex_lock(&mu);
    int inside = in_reservation(ptr, size);
    for (int i = 0; inside && i < MAX_MAPS; i++)
        if (!maps[i].va) {
            maps[i].va = ptr;
            maps[i].size = size;
            maps[i].h = handle;
            handle->maps++;
            r = hipSuccess;
            break;
        }
    pthread_mutex_unlock(&mu);
    return fake_last(r);
}

EXPORT hipError_t hipMemUnmap(void *ptr, size_t size)
{
    int e = enter(F_hipMemUnmap);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = hipErrorInvalidValue;
    hipMemGenericAllocationHandle_t dead = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_MAPS; i++)
        if (maps[i].va == ptr && maps[i].size == size) {
            hipMemGenericAllocationHandle_t h = maps[i].h;
            maps[i].va = NULL;
            if (--h->maps == 0 && h->released)
                dead = h;
            r = hipSuccess;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (dead)
        release_handle(dead);
    return fake_last(r);
}

/* Access to a mapped range: every byte of it must be mapped, and the
 * descriptors must name devices that exist. */
EXPORT hipError_t hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                  size_t count)
{
    int e = enter(F_hipMemSetAccess);
    if (e)
        return fake_last((hipError_t)e);
    if (!ptr || size == 0 || !desc || count == 0)
        return fake_last(hipErrorInvalidValue);
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != hipMemLocationTypeDevice ||
            check_device(desc[i].location.id) != hipSuccess)
            return fake_last(hipErrorInvalidValue);
    size_t covered = 0;
    pthread_mutex_lock(&mu);
    int ok = in_reservation(ptr, size);
    for (int i = 0; ok && i < MAX_MAPS; i++)
        if (maps[i].va && maps[i].va >= (char *)ptr &&
            maps[i].va + maps[i].size <= (char *)ptr + size)
            covered += maps[i].size;
    pthread_mutex_unlock(&mu);
    return fake_last(ok && covered == size ? hipSuccess : hipErrorInvalidValue);
}

/* 2 MiB, as on current AMD GPUs; FAKE_HIP_NO_VMM=1 plays a device without
 * virtual memory management (hipErrorNotSupported). */
EXPORT hipError_t hipMemGetAllocationGranularity(size_t *granularity,
                                                 const hipMemAllocationProp *prop,
                                                 hipMemAllocationGranularity_flags option)
{
    int e = enter(F_hipMemGetAllocationGranularity);
    if (e)
        return fake_last((hipError_t)e);
    (void)option;
    if (!granularity || !prop || prop->type != hipMemAllocationTypePinned ||
        prop->location.type != hipMemLocationTypeDevice)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = check_device(prop->location.id);
    if (r != hipSuccess)
        return fake_last(r);
    if (fake_no_vmm)
        return fake_last(hipErrorNotSupported);
    *granularity = (size_t)2 << 20;
    return fake_last(hipSuccess);
}
