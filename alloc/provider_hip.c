/* alloc/provider_hip.c: device memory from AMD HIP (libamdhip64).
 *
 * Owns: the table of HIP functions, resolved once (given by a hook, or
 * dlopen'ed here and never linked), and the handle of the library when it
 * opened it.  Segments are hipMalloc'ed on the device asked for: the
 * thread's current device is switched for the call and put back, since
 * HIP keeps the current device per thread and the program's own calls
 * must not see ours.
 *
 * Expandable segments (alloc/cache_expand.c) go through HIP's virtual
 * memory management (hipMemAddressReserve, hipMemCreate, hipMemMap,
 * hipMemSetAccess, ...), given when the table has all eight functions; a
 * device whose hipMemGetAllocationGranularity fails keeps normal segments.
 * Errors our own calls leave as the thread's last error are taken back.
 *
 * Stream markers (alloc/provider.h) are HIP events made and recorded with
 * the block's device current (an event belongs to the device current at
 * its creation, and stream 0 is that device's null stream); given only
 * when the table has every event function.
 *
 * Invariants: device_count >= 1 once created (a machine with no device
 * gives TDM_NOT_AVAILABLE); vendor codes of failed calls are noted with
 * tdm__provider_set_vendor_error before a status goes back.
 *
 * Lock: none; the table is immutable after creation and HIP is
 * thread-safe.  Host memory for the provider comes from tdm__meta_map.
 */
#define _GNU_SOURCE
#include "provider_hip.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "meta.h"

typedef struct hip_impl {
    tdm_provider pub;
    struct tdm_hip_fns fns;
    void *lib; /* dlopen handle when we opened libamdhip64; else NULL */
} hip_impl;

static tdm_status fail(int code)
{
    tdm__provider_set_vendor_error(code);
    return code == TDM__HIP_ERROR_OUT_OF_MEMORY ? TDM_OUT_OF_MEMORY : TDM_VENDOR_ERROR;
}

/* Makes `device` current on this thread; *prev gets the one to restore
 * (-1: nothing to restore). */
static int enter_device(const struct tdm_hip_fns *f, int device, int *prev)
{
    int cur = -1;
    *prev = -1;
    int r = f->get_device(&cur);
    if (r == TDM__HIP_SUCCESS && cur == device)
        return TDM__HIP_SUCCESS;
    r = f->set_device(device);
    if (r == TDM__HIP_SUCCESS && cur >= 0)
        *prev = cur;
    return r;
}

static void leave_device(const struct tdm_hip_fns *f, int prev)
{
    if (prev >= 0)
        f->set_device(prev);
}

/* HIP keeps the error of a call as the thread's last error until
 * hipGetLastError: one that only our own call made (the thread had none
 * before) is taken back, so the program sees what its calls did. */
static int last_error_before(const hip_impl *h)
{
    return h->fns.peek_last_error ? h->fns.peek_last_error() : -1;
}

static void forget_own_error(const hip_impl *h, int before, int r)
{
    if (r != TDM__HIP_SUCCESS && before == TDM__HIP_SUCCESS && h->fns.get_last_error)
        h->fns.get_last_error();
}

static tdm_status hip_alloc(tdm_provider *p, int device, size_t size, tdm_stream stream,
                            void **out)
{
    (void)stream; /* segments are device-wide; blocks carry the stream */
    hip_impl *h = p->impl;
    *out = NULL;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    /* A segment that does not fit is retried after the cache gives back
     * what it holds: the program must not find that first failure in
     * hipGetLastError (a final one reaches it through the hook). */
    int before = last_error_before(h);
    int prev;
    int r = enter_device(&h->fns, device, &prev);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.malloc(out, size);
    leave_device(&h->fns, prev);
    forget_own_error(h, before, r);
    if (r != TDM__HIP_SUCCESS) {
        *out = NULL;
        return fail(r);
    }
    return TDM_OK;
}

static tdm_status hip_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    (void)device, (void)size;
    hip_impl *h = p->impl;
    int r = h->fns.free(ptr);
    return r == TDM__HIP_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status hip_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                               size_t *total_bytes)
{
    hip_impl *h = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    size_t fr = 0, tot = 0;
    int prev;
    int r = enter_device(&h->fns, device, &prev);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_get_info(&fr, &tot);
    leave_device(&h->fns, prev);
    if (r != TDM__HIP_SUCCESS)
        return fail(r);
    if (free_bytes)
        *free_bytes = fr;
    if (total_bytes)
        *total_bytes = tot;
    return TDM_OK;
}

/* ---- stream markers: HIP events on the block's device ---- */

#define TDM__HIP_EVENT_DISABLE_TIMING 0x2 /* hipEventDisableTiming */

static tdm_status hip_marker_record(void *ctx, int device, tdm_stream stream, void **marker)
{
    hip_impl *h = ctx;
    int prev;
    int r = enter_device(&h->fns, device, &prev);
    if (r == TDM__HIP_SUCCESS && *marker == NULL)
        r = h->fns.event_create((tdm__hip_event *)marker, TDM__HIP_EVENT_DISABLE_TIMING);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.event_record(*marker, (tdm__hip_stream)(uintptr_t)stream);
    leave_device(&h->fns, prev);
    return r == TDM__HIP_SUCCESS ? TDM_OK : fail(r);
}

static int hip_marker_done(void *ctx, int device, void *marker)
{
    (void)device; /* an event knows its device */
    hip_impl *h = ctx;
    int before = last_error_before(h);
    int r = h->fns.event_query(marker);
    forget_own_error(h, before, r);
    /* Another error (a failed kernel, a runtime shutting down) will not
     * clear by waiting. */
    return r != TDM__HIP_ERROR_NOT_READY;
}

static void hip_marker_wait(void *ctx, int device, void *marker)
{
    (void)device;
    hip_impl *h = ctx;
    h->fns.event_synchronize(marker);
}

static void hip_marker_destroy(void *ctx, int device, void *marker)
{
    (void)device;
    hip_impl *h = ctx;
    h->fns.event_destroy(marker);
}

static int hip_capturing(void *ctx, int device, tdm_stream stream)
{
    hip_impl *h = ctx;
    if (h->fns.captures_underway && h->fns.captures_underway())
        return 1;
    if (h->fns.stream_is_capturing == NULL)
        return 0; /* a runtime without graphs */
    int prev, status = 0;
    int r = enter_device(&h->fns, device, &prev);
    if (r == TDM__HIP_SUCCESS) {
        int before = last_error_before(h);
        r = h->fns.stream_is_capturing((tdm__hip_stream)(uintptr_t)stream, &status);
        forget_own_error(h, before, r);
    }
    leave_device(&h->fns, prev);
    /* An error here is the null stream's "another stream is capturing"
     * (hipErrorStreamCaptureImplicit): capturing, to be safe. */
    return r != TDM__HIP_SUCCESS || status != 0;
}

static void hip_device_sync(void *ctx, int device)
{
    hip_impl *h = ctx;
    int prev;
    if (enter_device(&h->fns, device, &prev) == TDM__HIP_SUCCESS)
        h->fns.device_synchronize();
    leave_device(&h->fns, prev);
}

static const tdm_stream_ops hip_stream_ops = {
    .marker_record = hip_marker_record,
    .marker_done = hip_marker_done,
    .marker_wait = hip_marker_wait,
    .marker_destroy = hip_marker_destroy,
    .capturing = hip_capturing,
    .device_sync = hip_device_sync,
};

/* ---- virtual memory management (expandable segments) ---------------------- */

/* Each call runs with `device` current (as the segments' hipMalloc does),
 * and an error it leaves as the thread's last error is taken back: the
 * cache retries or falls back, and the status that ends a program's call
 * reaches it through the hook. */
static int vmm_begin(const hip_impl *h, int device, int *prev, int *before)
{
    *before = last_error_before(h);
    return enter_device(&h->fns, device, prev);
}

static tdm_status vmm_end(const hip_impl *h, int prev, int before, int r)
{
    leave_device(&h->fns, prev);
    forget_own_error(h, before, r);
    return r == TDM__HIP_SUCCESS ? TDM_OK : fail(r);
}

static void vmm_prop(int device, tdm__hip_mem_prop *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = TDM__HIP_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = TDM__HIP_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = device;
}

static tdm_status hip_vmm_granularity(tdm_provider *p, int device, size_t *bytes)
{
    hip_impl *h = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    tdm__hip_mem_prop prop;
    vmm_prop(device, &prop);
    /* A device without virtual memory management refuses this: the
     * cache then keeps normal segments. */
    int before = last_error_before(h);
    int r = h->fns.mem_get_allocation_granularity(bytes, &prop,
                                                  TDM__HIP_MEM_ALLOC_GRANULARITY_MINIMUM);
    forget_own_error(h, before, r);
    if (r != TDM__HIP_SUCCESS || *bytes == 0) {
        tdm__provider_set_vendor_error(r);
        return TDM_NOT_AVAILABLE;
    }
    return TDM_OK;
}

static tdm_status hip_vmm_reserve(tdm_provider *p, int device, size_t size, void **base)
{
    hip_impl *h = p->impl;
    void *ptr = NULL;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_address_reserve(&ptr, size, 0, NULL, 0);
    *base = r == TDM__HIP_SUCCESS ? ptr : NULL;
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_free_range(tdm_provider *p, int device, void *base, size_t size)
{
    hip_impl *h = p->impl;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_address_free(base, size);
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    hip_impl *h = p->impl;
    tdm__hip_mem_prop prop;
    vmm_prop(device, &prop);
    tdm__hip_mem_handle made = NULL;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_create(&made, size, &prop, 0);
    *handle = r == TDM__HIP_SUCCESS ? (uint64_t)(uintptr_t)made : 0;
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    (void)size;
    hip_impl *h = p->impl;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_release((tdm__hip_mem_handle)(uintptr_t)handle);
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_map(tdm_provider *p, int device, void *addr, size_t size,
                              uint64_t handle)
{
    hip_impl *h = p->impl;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_map(addr, size, 0, (tdm__hip_mem_handle)(uintptr_t)handle, 0);
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_set_access(tdm_provider *p, int device, void *addr, size_t size)
{
    hip_impl *h = p->impl;
    tdm__hip_access_desc desc = {
        .location = {.type = TDM__HIP_MEM_LOCATION_TYPE_DEVICE, .id = device},
        .flags = TDM__HIP_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_set_access(addr, size, &desc, 1);
    return vmm_end(h, prev, before, r);
}

static tdm_status hip_vmm_unmap(tdm_provider *p, int device, void *addr, size_t size)
{
    hip_impl *h = p->impl;
    int prev, before;
    int r = vmm_begin(h, device, &prev, &before);
    if (r == TDM__HIP_SUCCESS)
        r = h->fns.mem_unmap(addr, size);
    return vmm_end(h, prev, before, r);
}

static const tdm_vmm_ops hip_vmm = {
    .granularity = hip_vmm_granularity,
    .reserve = hip_vmm_reserve,
    .free_range = hip_vmm_free_range,
    .create = hip_vmm_create,
    .release = hip_vmm_release,
    .map = hip_vmm_map,
    .set_access = hip_vmm_set_access,
    .unmap = hip_vmm_unmap,
};

static int has_vmm(const struct tdm_hip_fns *f)
{
    return f->mem_address_reserve && f->mem_address_free && f->mem_create && f->mem_release &&
           f->mem_map && f->mem_unmap && f->mem_set_access && f->mem_get_allocation_granularity;
}

static int has_events(const struct tdm_hip_fns *f)
{
    return f->event_create && f->event_record && f->event_query && f->event_synchronize &&
           f->event_destroy && f->device_synchronize;
}

static void hip_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    hip_impl *h = p->impl;
    if (len == 0)
        return;
    buf[0] = '\0';
    int n = len > 256 ? 256 : (int)len;
    if (h->fns.device_get_name(buf, n, device) != TDM__HIP_SUCCESS || buf[0] == '\0')
        snprintf(buf, len, "hip%d", device);
    buf[len - 1] = '\0';
}

static void hip_destroy(tdm_provider *p)
{
    hip_impl *h = p->impl;
    if (h->lib)
        dlclose(h->lib);
    tdm__meta_unmap(h, sizeof *h);
}

/* Fills fns from the library; 0 when a function is missing. */
static int resolve(void *lib, struct tdm_hip_fns *fns)
{
    static const char *const names[] = {
        "hipGetDeviceCount", "hipGetDevice", "hipSetDevice", "hipMalloc",
        "hipFree", "hipMemGetInfo", "hipDeviceGetName", "hipDeviceTotalMem",
    };
    void *sym[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sym[i] = tdm__provider_sym(lib, names[i]);
        if (sym[i] == NULL)
            return 0;
    }
    /* void * to function pointer: POSIX guarantees the representation. */
    fns->get_device_count = (int (*)(int *))sym[0];
    fns->get_device = (int (*)(int *))sym[1];
    fns->set_device = (int (*)(int))sym[2];
    fns->malloc = (int (*)(void **, size_t))sym[3];
    fns->free = (int (*)(void *))sym[4];
    fns->mem_get_info = (int (*)(size_t *, size_t *))sym[5];
    fns->device_get_name = (int (*)(char *, int, int))sym[6];
    fns->device_total_mem = (int (*)(size_t *, int))sym[7];
    static const char *const optional[] = {
        "hipEventCreateWithFlags", "hipEventRecord",       "hipEventQuery",
        "hipEventSynchronize",     "hipEventDestroy",      "hipDeviceSynchronize",
        "hipStreamIsCapturing",    "hipPeekAtLastError",   "hipGetLastError",
    };
    void *o[sizeof optional / sizeof optional[0]];
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        o[i] = tdm__provider_sym(lib, optional[i]);
    fns->event_create = (int (*)(tdm__hip_event *, unsigned))o[0];
    fns->event_record = (int (*)(tdm__hip_event, tdm__hip_stream))o[1];
    fns->event_query = (int (*)(tdm__hip_event))o[2];
    fns->event_synchronize = (int (*)(tdm__hip_event))o[3];
    fns->event_destroy = (int (*)(tdm__hip_event))o[4];
    fns->device_synchronize = (int (*)(void))o[5];
    fns->stream_is_capturing = (int (*)(tdm__hip_stream, int *))o[6];
    fns->peek_last_error = (int (*)(void))o[7];
    fns->get_last_error = (int (*)(void))o[8];
    static const char *const vmm[] = {TDM__HIP_FNS_VMM_NAMES};
    void *v[sizeof vmm / sizeof vmm[0]];
    for (size_t i = 0; i < sizeof vmm / sizeof vmm[0]; i++)
        v[i] = tdm__provider_sym(lib, vmm[i]);
    fns->mem_address_reserve =
        (int (*)(void **, size_t, size_t, void *, unsigned long long))v[0];
    fns->mem_address_free = (int (*)(void *, size_t))v[1];
    fns->mem_create = (int (*)(tdm__hip_mem_handle *, size_t, const tdm__hip_mem_prop *,
                               unsigned long long))v[2];
    fns->mem_release = (int (*)(tdm__hip_mem_handle))v[3];
    fns->mem_map =
        (int (*)(void *, size_t, size_t, tdm__hip_mem_handle, unsigned long long))v[4];
    fns->mem_unmap = (int (*)(void *, size_t))v[5];
    fns->mem_set_access = (int (*)(void *, size_t, const tdm__hip_access_desc *, size_t))v[6];
    fns->mem_get_allocation_granularity =
        (int (*)(size_t *, const tdm__hip_mem_prop *, int))v[7];
    return 1;
}

/* ---- which libamdhip64 ------------------------------------------------------
 * The one the process has loaded, wherever (a library's local scope
 * included: JAX, CuPy, ctypes.CDLL load theirs RTLD_LOCAL, where a lookup
 * by one soname misses it) and whatever its soname: ROCm 5's
 * libamdhip64.so.5, ROCm 6's .so.6, ROCm 7's .so.7, or the bare
 * libamdhip64.so PyTorch's wheels bundle.  Only when none is loaded, one
 * is opened by name, newest ROCm first. */

typedef struct loaded_names {
    const char *name[512];
    int n;
} loaded_names;

static int collect_hip(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    loaded_names *o = arg;
    const char *path = info->dlpi_name;
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (base && strncmp(base, "libamdhip64.so", 14) == 0 && o->n < 512)
        o->name[o->n++] = path;
    return 0;
}

/* A handle on libamdhip64 (a reference of ours); NULL when there is none. */
static void *open_hip(void)
{
    void *lib = NULL;
    loaded_names *o = tdm__meta_map(sizeof *o);
    if (o != NULL) {
        /* Names collected first, opened after: no loader call while
         * dl_iterate_phdr holds the loader's lock. */
        dl_iterate_phdr(collect_hip, o);
        for (int i = 0; i < o->n && lib == NULL; i++)
            lib = dlopen(o->name[i], RTLD_NOW | RTLD_NOLOAD);
        tdm__meta_unmap(o, sizeof *o);
    }
    static const char *const sonames[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                          "libamdhip64.so.5", "libamdhip64.so"};
    for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && lib == NULL; i++)
        lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    return lib;
}

static int complete(const struct tdm_hip_fns *f)
{
    return f->get_device_count && f->get_device && f->set_device && f->malloc && f->free &&
           f->mem_get_info && f->device_get_name && f->device_total_mem;
}

tdm_status tdm__provider_hip_create(const tdm_hip_fns *fns, tdm_provider **out)
{
    if (out == NULL)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    hip_impl *h = tdm__meta_map(sizeof *h);
    if (h == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    if (fns) {
        h->fns = *fns;
    } else {
        h->lib = open_hip();
        if (h->lib == NULL || !resolve(h->lib, &h->fns))
            goto unavailable;
    }
    if (!complete(&h->fns))
        goto unavailable;
    int count = 0;
    int r = h->fns.get_device_count(&count);
    if (r != TDM__HIP_SUCCESS || count < 1) {
        tdm__provider_set_vendor_error(r != TDM__HIP_SUCCESS ? r : TDM__HIP_ERROR_NO_DEVICE);
        goto unavailable;
    }
    h->pub = (tdm_provider){
        .vendor = TDM_VENDOR_HIP,
        .device_count = count,
        .alloc = hip_alloc,
        .free = hip_free,
        .mem_info = hip_mem_info,
        .device_name = hip_device_name,
        .destroy = hip_destroy,
        .impl = h,
        .streams = has_events(&h->fns) ? &hip_stream_ops : NULL,
        .streams_ctx = h,
        .vmm = has_vmm(&h->fns) ? &hip_vmm : NULL,
    };
    *out = &h->pub;
    return TDM_OK;
unavailable:
    hip_destroy(&(tdm_provider){.impl = h});
    return TDM_NOT_AVAILABLE;
}
