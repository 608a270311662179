/* alloc/provider_ze.c: device memory from Intel Level Zero.
 *
 * Owns: the table of Level Zero functions (given by a hook, or resolved
 * here from a dlopen'ed libze_loader.so.1, never linked), the context the
 * memory is allocated in, the devices by ordinal and what each holds.
 * Memory in Level Zero belongs to a context, so a hook hands over the
 * program's own context: blocks served from the cache are then usable by
 * the program's kernels.  Standalone, the provider makes its own context
 * on the first driver and destroys it with the provider.
 *
 * Expandable segments (alloc/cache_expand.c) go through Level Zero's
 * virtual memory (zeVirtualMemReserve, zePhysicalMemCreate,
 * zeVirtualMemMap, ...), given when the table has all seven functions; a
 * device whose zeVirtualMemQueryPageSize fails keeps normal segments.
 *
 * Invariants: device_count >= 1 once created; held[d] = bytes of device d
 * allocated (or made as physical memory) through this provider and not
 * yet freed; capacity[d] = the
 * device's memory size summed over its memory modules.
 *
 * Lock: none; held[] is atomic, everything else is immutable after
 * creation.  Host memory for the provider comes from tdm__meta_map.
 */
#define _GNU_SOURCE
#include "provider_ze.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "meta.h"

typedef struct ze_impl {
    tdm_provider pub;
    struct tdm_ze_fns fns;
    void *lib;                                  /* loader we opened, or NULL */
    int (*context_destroy)(void *context);      /* set when the context is ours */
    uint64_t capacity[TDM__ZE_MAX_DEVICES];     /* bytes */
    _Atomic uint64_t held[TDM__ZE_MAX_DEVICES]; /* bytes */
    char names[TDM__ZE_MAX_DEVICES][64];
} ze_impl;

static tdm_status fail(int code)
{
    tdm__provider_set_vendor_error(code);
    return code == TDM__ZE_ERROR_OUT_OF_DEVICE_MEMORY ? TDM_OUT_OF_MEMORY : TDM_VENDOR_ERROR;
}

static tdm_status ze_alloc(tdm_provider *p, int device, size_t size, tdm_stream stream,
                           void **out)
{
    (void)stream; /* memory is per context; blocks carry the stream */
    ze_impl *z = p->impl;
    *out = NULL;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    tdm__ze_mem_alloc_desc desc = {.stype = TDM__ZE_STYPE_DEVICE_MEM_ALLOC_DESC};
    int r = z->fns.mem_alloc_device(z->fns.context, &desc, size, 0, z->fns.devices[device],
                                    out);
    if (r != TDM__ZE_SUCCESS) {
        *out = NULL;
        return fail(r);
    }
    atomic_fetch_add_explicit(&z->held[device], size, memory_order_relaxed);
    return TDM_OK;
}

static tdm_status ze_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    ze_impl *z = p->impl;
    int r = z->fns.mem_free(z->fns.context, ptr);
    if (r != TDM__ZE_SUCCESS)
        return fail(r);
    if (device >= 0 && device < p->device_count)
        atomic_fetch_sub_explicit(&z->held[device], size, memory_order_relaxed);
    return TDM_OK;
}

/* Free bytes from Sysman; 0 when it cannot say. */
static int sysman_free(const ze_impl *z, int device, uint64_t *free_bytes, uint64_t *total)
{
    if (!z->fns.sysman_enum_memory_modules || !z->fns.sysman_memory_get_state)
        return 0;
    void *modules[8];
    uint32_t n = 8;
    if (z->fns.sysman_enum_memory_modules(z->fns.devices[device], &n, modules) !=
            TDM__ZE_SUCCESS || n == 0)
        return 0;
    uint64_t fr = 0, tot = 0;
    for (uint32_t i = 0; i < n && i < 8; i++) {
        tdm__zes_mem_state st = {.stype = TDM__ZES_STYPE_MEM_STATE};
        if (z->fns.sysman_memory_get_state(modules[i], &st) != TDM__ZE_SUCCESS)
            return 0;
        fr += st.free;
        tot += st.size;
    }
    *free_bytes = fr;
    *total = tot;
    return 1;
}

static tdm_status ze_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                              size_t *total_bytes)
{
    ze_impl *z = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    uint64_t fr, tot;
    if (!sysman_free(z, device, &fr, &tot)) {
        uint64_t held = atomic_load_explicit(&z->held[device], memory_order_relaxed);
        tot = z->capacity[device];
        fr = held < tot ? tot - held : 0;
    }
    if (free_bytes)
        *free_bytes = (size_t)fr;
    if (total_bytes)
        *total_bytes = (size_t)tot;
    return TDM_OK;
}

/* ---- virtual memory (expandable segments) ---------------------------------- */

/* The page size asked for: that of the cache's smallest page (2 MiB), so
 * that every page the cache maps is a multiple of it. */
#define ZE_VMM_PAGE_QUERY_BYTES ((size_t)2 << 20)

static tdm_status ze_vmm_granularity(tdm_provider *p, int device, size_t *bytes)
{
    ze_impl *z = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    /* A driver without virtual memory support refuses this: the cache
     * then keeps normal segments. */
    int r = z->fns.virtual_mem_query_page_size(z->fns.context, z->fns.devices[device],
                                               ZE_VMM_PAGE_QUERY_BYTES, bytes);
    if (r != TDM__ZE_SUCCESS || *bytes == 0) {
        tdm__provider_set_vendor_error(r);
        return TDM_NOT_AVAILABLE;
    }
    return TDM_OK;
}

static tdm_status ze_vmm_reserve(tdm_provider *p, int device, size_t size, void **base)
{
    (void)device; /* address space belongs to the context */
    ze_impl *z = p->impl;
    void *ptr = NULL;
    int r = z->fns.virtual_mem_reserve(z->fns.context, NULL, size, &ptr);
    *base = r == TDM__ZE_SUCCESS ? ptr : NULL;
    return r == TDM__ZE_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status ze_vmm_free_range(tdm_provider *p, int device, void *base, size_t size)
{
    (void)device;
    ze_impl *z = p->impl;
    int r = z->fns.virtual_mem_free(z->fns.context, base, size);
    return r == TDM__ZE_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status ze_vmm_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    ze_impl *z = p->impl;
    *handle = 0;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    tdm__ze_physical_mem_desc desc = {.stype = TDM__ZE_STYPE_PHYSICAL_MEM_DESC, .size = size};
    void *made = NULL;
    int r = z->fns.physical_mem_create(z->fns.context, z->fns.devices[device], &desc, &made);
    if (r != TDM__ZE_SUCCESS)
        return fail(r);
    atomic_fetch_add_explicit(&z->held[device], size, memory_order_relaxed);
    *handle = (uint64_t)(uintptr_t)made;
    return TDM_OK;
}

static tdm_status ze_vmm_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    ze_impl *z = p->impl;
    int r = z->fns.physical_mem_destroy(z->fns.context, (void *)(uintptr_t)handle);
    if (r != TDM__ZE_SUCCESS)
        return fail(r);
    if (device >= 0 && device < p->device_count)
        atomic_fetch_sub_explicit(&z->held[device], size, memory_order_relaxed);
    return TDM_OK;
}

static tdm_status ze_vmm_map(tdm_provider *p, int device, void *addr, size_t size,
                             uint64_t handle)
{
    (void)device;
    ze_impl *z = p->impl;
    int r = z->fns.virtual_mem_map(z->fns.context, addr, size, (void *)(uintptr_t)handle, 0,
                                   TDM__ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
    return r == TDM__ZE_SUCCESS ? TDM_OK : fail(r);
}

/* zeVirtualMemMap already gave the mapping read-write access (Level Zero
 * takes it with the mapping); zeVirtualMemSetAccessAttribute would only
 * say it again. */
static tdm_status ze_vmm_set_access(tdm_provider *p, int device, void *addr, size_t size)
{
    (void)p, (void)device, (void)addr, (void)size;
    return TDM_OK;
}

static tdm_status ze_vmm_unmap(tdm_provider *p, int device, void *addr, size_t size)
{
    (void)device;
    ze_impl *z = p->impl;
    int r = z->fns.virtual_mem_unmap(z->fns.context, addr, size);
    return r == TDM__ZE_SUCCESS ? TDM_OK : fail(r);
}

static const tdm_vmm_ops ze_vmm = {
    .granularity = ze_vmm_granularity,
    .reserve = ze_vmm_reserve,
    .free_range = ze_vmm_free_range,
    .create = ze_vmm_create,
    .release = ze_vmm_release,
    .map = ze_vmm_map,
    .set_access = ze_vmm_set_access,
    .unmap = ze_vmm_unmap,
};

static int has_vmm(const struct tdm_ze_fns *f)
{
    return f->virtual_mem_reserve && f->virtual_mem_free && f->virtual_mem_query_page_size &&
           f->physical_mem_create && f->physical_mem_destroy && f->virtual_mem_map &&
           f->virtual_mem_unmap;
}

static void ze_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    ze_impl *z = p->impl;
    if (len == 0)
        return;
    if (device >= 0 && device < p->device_count)
        snprintf(buf, len, "%s", z->names[device]);
    else
        snprintf(buf, len, "ze%d", device);
}

static void ze_destroy(tdm_provider *p)
{
    ze_impl *z = p->impl;
    if (z->context_destroy && z->fns.context)
        z->context_destroy(z->fns.context);
    if (z->lib)
        dlclose(z->lib);
    tdm__meta_unmap(z, sizeof *z);
}

/* The loader's function `name` (provider_vendor.c: never a preload's). */
static void *sym(ze_impl *z, const char *name)
{
    return tdm__provider_sym(z->lib, name);
}

/* Standalone: the loader's functions, its first driver, all its devices
 * and a context of our own.  Returns the vendor code of what failed. */
static int open_loader(ze_impl *z)
{
    z->lib = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
    if (z->lib == NULL)
        return TDM__ZE_ERROR_UNINITIALIZED;
    int (*init)(unsigned) = (int (*)(unsigned))sym(z, "zeInit");
    int (*driver_get)(uint32_t *, void **) =
        (int (*)(uint32_t *, void **))sym(z, "zeDriverGet");
    int (*device_get)(void *, uint32_t *, void **) =
        (int (*)(void *, uint32_t *, void **))sym(z, "zeDeviceGet");
    int (*context_create)(void *, const tdm__ze_context_desc *, void **) =
        (int (*)(void *, const tdm__ze_context_desc *, void **))sym(z, "zeContextCreate");
    z->context_destroy = (int (*)(void *))sym(z, "zeContextDestroy");
    struct tdm_ze_fns *f = &z->fns;
    f->device_get_properties =
        (int (*)(void *, tdm__ze_device_props *))sym(z, "zeDeviceGetProperties");
    f->device_get_memory_properties = (int (*)(void *, uint32_t *, tdm__ze_memory_props *))sym(
        z, "zeDeviceGetMemoryProperties");
    f->mem_alloc_device =
        (int (*)(void *, const tdm__ze_mem_alloc_desc *, size_t, size_t, void *, void **))sym(
            z, "zeMemAllocDevice");
    f->mem_free = (int (*)(void *, void *))sym(z, "zeMemFree");
    f->sysman_enum_memory_modules =
        (int (*)(void *, uint32_t *, void **))sym(z, "zesDeviceEnumMemoryModules");
    f->sysman_memory_get_state =
        (int (*)(void *, tdm__zes_mem_state *))sym(z, "zesMemoryGetState");
    f->virtual_mem_reserve =
        (int (*)(void *, const void *, size_t, void **))sym(z, "zeVirtualMemReserve");
    f->virtual_mem_free = (int (*)(void *, const void *, size_t))sym(z, "zeVirtualMemFree");
    f->virtual_mem_query_page_size =
        (int (*)(void *, void *, size_t, size_t *))sym(z, "zeVirtualMemQueryPageSize");
    f->physical_mem_create = (int (*)(void *, void *, tdm__ze_physical_mem_desc *, void **))sym(
        z, "zePhysicalMemCreate");
    f->physical_mem_destroy = (int (*)(void *, void *))sym(z, "zePhysicalMemDestroy");
    f->virtual_mem_map = (int (*)(void *, const void *, size_t, void *, size_t, int))sym(
        z, "zeVirtualMemMap");
    f->virtual_mem_unmap =
        (int (*)(void *, const void *, size_t))sym(z, "zeVirtualMemUnmap");
    if (!init || !driver_get || !device_get || !context_create || !z->context_destroy)
        return TDM__ZE_ERROR_UNINITIALIZED;
    int r = init(0);
    if (r != TDM__ZE_SUCCESS)
        return r;
    void *driver = NULL;
    uint32_t n = 1;
    r = driver_get(&n, &driver);
    if (r != TDM__ZE_SUCCESS || n == 0 || driver == NULL)
        return r != TDM__ZE_SUCCESS ? r : TDM__ZE_ERROR_UNINITIALIZED;
    n = TDM__ZE_MAX_DEVICES;
    r = device_get(driver, &n, f->devices);
    if (r != TDM__ZE_SUCCESS)
        return r;
    f->device_count = n;
    tdm__ze_context_desc cd = {.stype = TDM__ZE_STYPE_CONTEXT_DESC};
    return context_create(driver, &cd, &f->context);
}

tdm_status tdm__provider_ze_create(const tdm_ze_fns *fns, tdm_provider **out)
{
    if (out == NULL)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    ze_impl *z = tdm__meta_map(sizeof *z);
    if (z == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    int r = TDM__ZE_SUCCESS;
    if (fns)
        z->fns = *fns;
    else
        r = open_loader(z);
    struct tdm_ze_fns *f = &z->fns;
    if (r == TDM__ZE_SUCCESS &&
        (!f->device_get_properties || !f->device_get_memory_properties ||
         !f->mem_alloc_device || !f->mem_free || !f->context || f->device_count == 0 ||
         f->device_count > TDM__ZE_MAX_DEVICES))
        r = TDM__ZE_ERROR_UNINITIALIZED;
    if (r != TDM__ZE_SUCCESS) {
        tdm__provider_set_vendor_error(r);
        ze_destroy(&(tdm_provider){.impl = z});
        return TDM_NOT_AVAILABLE;
    }
    for (uint32_t d = 0; d < f->device_count; d++) {
        tdm__ze_device_props props = {.stype = TDM__ZE_STYPE_DEVICE_PROPERTIES};
        if (f->device_get_properties(f->devices[d], &props) == TDM__ZE_SUCCESS && props.name[0])
            snprintf(z->names[d], sizeof z->names[d], "%.63s", props.name);
        else
            snprintf(z->names[d], sizeof z->names[d], "ze%u", d);
        tdm__ze_memory_props mem[8];
        uint32_t n = 8;
        for (uint32_t i = 0; i < n; i++)
            mem[i] = (tdm__ze_memory_props){.stype = TDM__ZE_STYPE_DEVICE_MEMORY_PROPERTIES};
        if (f->device_get_memory_properties(f->devices[d], &n, mem) == TDM__ZE_SUCCESS)
            for (uint32_t i = 0; i < n && i < 8; i++)
                z->capacity[d] += mem[i].totalSize;
    }
    z->pub = (tdm_provider){
        .vendor = TDM_VENDOR_ZE,
        .device_count = (int)f->device_count,
        .alloc = ze_alloc,
        .free = ze_free,
        .mem_info = ze_mem_info,
        .device_name = ze_device_name,
        .destroy = ze_destroy,
        .impl = z,
        .vmm = has_vmm(f) ? &ze_vmm : NULL,
    };
    *out = &z->pub;
    return TDM_OK;
}
