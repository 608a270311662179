/* tests/fakes/ze/fake_ze_vmm.c: the fake driver's virtual and physical
 * memory (zeVirtualMemReserve / Free / QueryPageSize / Map / Unmap,
 * zePhysicalMemCreate / Destroy).
 *
 * A reservation is PROT_NONE host address space aligned to the 64 KiB
 * page; a mapping must lie inside one, on whole pages, over no other
 * mapping, and is undone only as it was made; a physical memory object
 * counts as device memory (the allocation table's K_PHYS) and cannot be
 * destroyed while it is mapped.  With FAKE_ZE_NO_VMM=1 the page size
 * query fails as on a device without virtual memory support.
 *
 * Lock: vmm_mu around the reservations and mappings (the allocation table
 * has its own, taken inside it).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fake_ze_internal.h"

#define PAGE_SIZE_VM ((size_t)64 << 10) /* virtual memory page, bytes */
#define MAX_RANGES 256

struct _ze_physical_mem_handle_t {
    fake_ze_handle_head head;
    int device;
    size_t size; /* bytes */
};

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *va; /* NULL: free slot */
    size_t size;
} reserved[MAX_RANGES];
static struct {
    char *va; /* NULL: free slot */
    size_t size;
    ze_physical_mem_handle_t phys;
} mapped[MAX_RANGES];

ze_result_t ZE_APICALL fake_ze_virtual_mem_reserve(ze_context_handle_t c, const void *pStart,
                                                   size_t size, void **pptr)
{
    ENTER(F_zeVirtualMemReserve);
    (void)pStart; /* a hint only */
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!pptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || size % PAGE_SIZE_VM)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    /* One page more, trimmed to a page-aligned range. */
    char *raw = mmap(NULL, size + PAGE_SIZE_VM, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    char *va = (char *)(((uintptr_t)raw + PAGE_SIZE_VM - 1) & ~(uintptr_t)(PAGE_SIZE_VM - 1));
    if (va > raw)
        munmap(raw, (size_t)(va - raw));
    size_t tail = (size_t)(raw + size + PAGE_SIZE_VM - (va + size));
    if (tail)
        munmap(va + size, tail);
    ze_result_t r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < MAX_RANGES; i++)
        if (!reserved[i].va) {
            reserved[i].va = va;
            reserved[i].size = size;
            r = ZE_RESULT_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&vmm_mu);
    if (r != ZE_RESULT_SUCCESS)
        munmap(va, size);
    else
        *pptr = va;
    return r;
}

ze_result_t ZE_APICALL fake_ze_virtual_mem_free(ze_context_handle_t c, const void *ptr,
                                                size_t size)
{
    ENTER(F_zeVirtualMemFree);
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    ze_result_t r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < MAX_RANGES; i++)
        if (reserved[i].va == ptr && reserved[i].size == size) {
            r = ZE_RESULT_SUCCESS;
            for (int j = 0; j < MAX_RANGES; j++)
                if (mapped[j].va && mapped[j].va >= reserved[i].va &&
                    mapped[j].va < reserved[i].va + reserved[i].size)
                    r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE; /* still mapped */
            if (r == ZE_RESULT_SUCCESS)
                reserved[i].va = NULL;
            break;
        }
    pthread_mutex_unlock(&vmm_mu);
    if (r == ZE_RESULT_SUCCESS)
        munmap((void *)ptr, size);
    return r;
}

ze_result_t ZE_APICALL fake_ze_virtual_mem_query_page_size(ze_context_handle_t c,
                                                           ze_device_handle_t dev, size_t size,
                                                           size_t *pagesize)
{
    ENTER(F_zeVirtualMemQueryPageSize);
    (void)size;
    if (!c || fake_ze_device_index(dev) < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!pagesize)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (fake_ze_no_vmm)
        return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    *pagesize = PAGE_SIZE_VM;
    return ZE_RESULT_SUCCESS;
}

/* [p, p+size) lies inside one reservation and overlaps no mapping.
 * Called with vmm_mu held. */
static int free_to_map(const char *p, size_t size)
{
    int inside = 0;
    for (int i = 0; i < MAX_RANGES; i++)
        if (reserved[i].va && p >= reserved[i].va && p + size <= reserved[i].va + reserved[i].size)
            inside = 1;
    for (int i = 0; inside && i < MAX_RANGES; i++)
        if (mapped[i].va && p < mapped[i].va + mapped[i].size && mapped[i].va < p + size)
            return 0;
    return inside;
}

ze_result_t ZE_APICALL fake_ze_virtual_mem_map(ze_context_handle_t c, const void *ptr,
                                               size_t size, ze_physical_mem_handle_t phys,
                                               size_t offset, ze_memory_access_attribute_t access)
{
    ENTER(F_zeVirtualMemMap);
    if (!c || !phys)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || size % PAGE_SIZE_VM || offset + size > phys->size ||
        (uintptr_t)ptr % PAGE_SIZE_VM)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (access != ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE &&
        access != ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY && access != ZE_MEMORY_ACCESS_ATTRIBUTE_NONE)
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    ze_result_t r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&vmm_mu);
    if (free_to_map(ptr, size)) {
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        for (int i = 0; i < MAX_RANGES; i++)
            if (!mapped[i].va) {
                mapped[i].va = (char *)ptr;
                mapped[i].size = size;
                mapped[i].phys = phys;
                r = ZE_RESULT_SUCCESS;
                break;
            }
    }
    pthread_mutex_unlock(&vmm_mu);
    return r;
}

ze_result_t ZE_APICALL fake_ze_virtual_mem_unmap(ze_context_handle_t c, const void *ptr,
                                                 size_t size)
{
    ENTER(F_zeVirtualMemUnmap);
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || size % PAGE_SIZE_VM)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    ze_result_t r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < MAX_RANGES; i++)
        if (mapped[i].va == ptr && mapped[i].size == size) {
            mapped[i].va = NULL;
            r = ZE_RESULT_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&vmm_mu);
    return r;
}

ze_result_t ZE_APICALL fake_ze_physical_mem_create(ze_context_handle_t c, ze_device_handle_t dev,
                                                   ze_physical_mem_desc_t *desc,
                                                   ze_physical_mem_handle_t *phPhysicalMemory)
{
    ENTER(F_zePhysicalMemCreate);
    int d = fake_ze_device_index(dev);
    if (!c || d < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !phPhysicalMemory)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->size == 0 || desc->size % PAGE_SIZE_VM)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    ze_physical_mem_handle_t h = calloc(1, sizeof *h);
    if (!h)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    h->head = fake_ze_head();
    h->device = d;
    h->size = desc->size;
    ze_result_t r = fake_ze_track_phys(h, desc->size, d);
    if (r != ZE_RESULT_SUCCESS) {
        free(h);
        return r;
    }
    *phPhysicalMemory = h;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL fake_ze_physical_mem_destroy(ze_context_handle_t c,
                                                    ze_physical_mem_handle_t h)
{
    ENTER(F_zePhysicalMemDestroy);
    if (!c || !h)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    int in_use = 0;
    pthread_mutex_lock(&vmm_mu);
    for (int i = 0; i < MAX_RANGES; i++)
        in_use |= mapped[i].va != NULL && mapped[i].phys == h;
    pthread_mutex_unlock(&vmm_mu);
    if (in_use)
        return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    if (!fake_ze_untrack_phys(h))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    free(h);
    return ZE_RESULT_SUCCESS;
}
