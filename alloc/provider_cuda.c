/* alloc/provider_cuda.c: device memory from the CUDA driver (libcuda.so.1).
 *
 * Owns: the table of driver functions, resolved once (given by a hook, or
 * dlopen'ed here and never linked), the handle of the library when it
 * opened it, the device names (read once at creation) and, per device, the
 * primary context it retained on first use.  Functions are looked up with
 * libc's dlsym (tdm__provider_sym), not the one a preloaded
 * libtidemark_preload.so puts in front of it: that one hands out the
 * preload's wrappers, and calling them would book each segment a second
 * time as the program's.
 *
 * Segments live in the device's primary context, the one the CUDA runtime
 * uses, so the memory is valid for the program's kernels and outlives any
 * context the program makes and destroys.  A call runs with that context
 * current: directly when the thread already has it current, else pushed
 * for the call and popped after, so the program never sees our context.
 * Totals come from cuDeviceTotalMem (no context needed), so creating the
 * provider and describing devices touches no GPU.
 *
 * Invariants: device_count >= 1 once created (no driver, cuInit failing or
 * no device gives TDM_NOT_AVAILABLE); vendor codes of failed calls are
 * noted with tdm__provider_set_vendor_error before a status goes back.
 * Lock: ctx_lock guards the one-time retain of each primary context; the
 * hot path reads the context with an acquire load.  The table is
 * immutable after creation.  Host memory comes from tdm__meta_map.
 */
#define _GNU_SOURCE
#include "provider_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "meta.h"

#define CUDA_MAX_DEVICES 64
#define CUDA_NAME_LEN 64

typedef struct cuda_impl {
    tdm_provider pub;
    struct tdm_cuda_fns fns;
    void *lib;                  /* dlopen handle when we opened libcuda; else NULL */
    pthread_mutex_t ctx_lock;   /* one-time retains */
    _Atomic(tdm__cu_context) ctx[CUDA_MAX_DEVICES]; /* retained primary contexts */
    char names[CUDA_MAX_DEVICES][CUDA_NAME_LEN];
} cuda_impl;

static tdm_status fail(int code)
{
    tdm__provider_set_vendor_error(code);
    return code == TDM__CU_ERROR_OUT_OF_MEMORY ? TDM_OUT_OF_MEMORY : TDM_VENDOR_ERROR;
}

static __attribute__((noinline)) int retain_slow(cuda_impl *c, int device,
                                                 tdm__cu_context *out)
{
    int r = TDM__CU_SUCCESS;
    pthread_mutex_lock(&c->ctx_lock);
    tdm__cu_context ctx = atomic_load_explicit(&c->ctx[device], memory_order_relaxed);
    if (ctx == NULL) {
        int dev = 0;
        r = c->fns.device_get(&dev, device);
        if (r == TDM__CU_SUCCESS)
            r = c->fns.primary_ctx_retain(&ctx, dev);
        if (r == TDM__CU_SUCCESS)
            atomic_store_explicit(&c->ctx[device], ctx, memory_order_release);
    }
    pthread_mutex_unlock(&c->ctx_lock);
    *out = ctx;
    return r;
}

/* Makes device's primary context current; *pushed says whether to pop. */
static int enter_ctx(cuda_impl *c, int device, int *pushed)
{
    *pushed = 0;
    tdm__cu_context want = atomic_load_explicit(&c->ctx[device], memory_order_acquire);
    int r = TDM__CU_SUCCESS;
    if (want == NULL && (r = retain_slow(c, device, &want)) != TDM__CU_SUCCESS)
        return r;
    tdm__cu_context cur = NULL;
    if (c->fns.ctx_get_current(&cur) == TDM__CU_SUCCESS && cur == want)
        return TDM__CU_SUCCESS;
    r = c->fns.ctx_push(want);
    *pushed = r == TDM__CU_SUCCESS;
    return r;
}

static void leave_ctx(cuda_impl *c, int pushed)
{
    tdm__cu_context popped;
    if (pushed)
        c->fns.ctx_pop(&popped);
}

static tdm_status cuda_alloc(tdm_provider *p, int device, size_t size, tdm_stream stream,
                             void **out)
{
    (void)stream; /* segments are device-wide; blocks carry the stream */
    cuda_impl *c = p->impl;
    *out = NULL;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    int pushed;
    tdm__cu_deviceptr d = 0;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_alloc(&d, size);
    leave_ctx(c, pushed);
    if (r != TDM__CU_SUCCESS)
        return fail(r);
    *out = (void *)(uintptr_t)d;
    return TDM_OK;
}

static tdm_status cuda_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    (void)size;
    cuda_impl *c = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_free((tdm__cu_deviceptr)(uintptr_t)ptr);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                                size_t *total_bytes)
{
    cuda_impl *c = p->impl;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    int dev = 0;
    size_t total = 0;
    int r = c->fns.device_get(&dev, device);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.device_total_mem(&total, dev);
    if (r != TDM__CU_SUCCESS)
        return fail(r);
    if (total_bytes)
        *total_bytes = total;
    if (free_bytes == NULL)
        return TDM_OK;
    /* Free bytes are per context in the driver API: ask in ours. */
    size_t fr = 0, tot = 0;
    int pushed;
    r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_get_info(&fr, &tot);
    leave_ctx(c, pushed);
    if (r != TDM__CU_SUCCESS)
        return fail(r);
    *free_bytes = fr;
    return TDM_OK;
}

/* ---- stream markers: CUDA events in the device's primary context ---- */

#define TDM__CU_EVENT_DISABLE_TIMING 0x2 /* CU_EVENT_DISABLE_TIMING */
#define TDM__CU_ERROR_NOT_READY 600      /* CUDA_ERROR_NOT_READY */

static tdm_status cuda_marker_record(void *ctx, int device, tdm_stream stream, void **marker)
{
    cuda_impl *c = ctx;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS && *marker == NULL)
        r = c->fns.event_create((tdm__cu_event *)marker, TDM__CU_EVENT_DISABLE_TIMING);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.event_record(*marker, (tdm__cu_stream)(uintptr_t)stream);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static int cuda_marker_done(void *ctx, int device, void *marker)
{
    cuda_impl *c = ctx;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.event_query(marker);
    leave_ctx(c, pushed);
    /* Another error (a failed kernel, a driver shutting down) will not
     * clear by waiting. */
    return r != TDM__CU_ERROR_NOT_READY;
}

static void cuda_marker_wait(void *ctx, int device, void *marker)
{
    cuda_impl *c = ctx;
    int pushed;
    if (enter_ctx(c, device, &pushed) == TDM__CU_SUCCESS)
        c->fns.event_synchronize(marker);
    leave_ctx(c, pushed);
}

static void cuda_marker_destroy(void *ctx, int device, void *marker)
{
    cuda_impl *c = ctx;
    int pushed;
    if (enter_ctx(c, device, &pushed) == TDM__CU_SUCCESS)
        c->fns.event_destroy(marker);
    leave_ctx(c, pushed);
}

static int cuda_capturing(void *ctx, int device, tdm_stream stream)
{
    cuda_impl *c = ctx;
    if (c->fns.captures_underway && c->fns.captures_underway())
        return 1;
    if (c->fns.stream_is_capturing == NULL)
        return 0; /* a driver without graphs */
    int pushed, status = 0;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.stream_is_capturing((tdm__cu_stream)(uintptr_t)stream, &status);
    leave_ctx(c, pushed);
    /* An error here is the legacy stream's "another stream is capturing"
     * (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT): capturing, to be safe. */
    return r != TDM__CU_SUCCESS || status != 0;
}

static void cuda_device_sync(void *ctx, int device)
{
    cuda_impl *c = ctx;
    int pushed;
    if (enter_ctx(c, device, &pushed) == TDM__CU_SUCCESS)
        c->fns.ctx_synchronize();
    leave_ctx(c, pushed);
}

static const tdm_stream_ops cuda_stream_ops = {
    .marker_record = cuda_marker_record,
    .marker_done = cuda_marker_done,
    .marker_wait = cuda_marker_wait,
    .marker_destroy = cuda_marker_destroy,
    .capturing = cuda_capturing,
    .device_sync = cuda_device_sync,
};

/* ---- virtual memory management (expandable segments) ---------------------- */

static tdm_status cuda_vmm_prop(cuda_impl *c, int device, tdm__cu_mem_prop *prop)
{
    int dev = 0;
    int r = c->fns.device_get(&dev, device);
    if (r != TDM__CU_SUCCESS)
        return fail(r);
    memset(prop, 0, sizeof *prop);
    prop->type = TDM__CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = TDM__CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
    return TDM_OK;
}

static tdm_status cuda_vmm_granularity(tdm_provider *p, int device, size_t *bytes)
{
    cuda_impl *c = p->impl;
    tdm__cu_mem_prop prop;
    if (device < 0 || device >= p->device_count)
        return TDM_NO_SUCH_DEVICE;
    tdm_status st = cuda_vmm_prop(c, device, &prop);
    if (st != TDM_OK)
        return st;
    /* A device without virtual memory management refuses this (PyTorch
     * asks the same question to decide). */
    int r = c->fns.mem_get_allocation_granularity(bytes, &prop,
                                                  TDM__CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != TDM__CU_SUCCESS || *bytes == 0) {
        tdm__provider_set_vendor_error(r);
        return TDM_NOT_AVAILABLE;
    }
    return TDM_OK;
}

static tdm_status cuda_vmm_reserve(tdm_provider *p, int device, size_t size, void **base)
{
    cuda_impl *c = p->impl;
    tdm__cu_deviceptr d = 0;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_address_reserve(&d, size, 0, 0, 0);
    leave_ctx(c, pushed);
    *base = (void *)(uintptr_t)d;
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_vmm_free_range(tdm_provider *p, int device, void *base, size_t size)
{
    cuda_impl *c = p->impl;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_address_free((tdm__cu_deviceptr)(uintptr_t)base, size);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_vmm_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    cuda_impl *c = p->impl;
    tdm__cu_mem_prop prop;
    tdm__cu_mem_handle h = 0;
    *handle = 0;
    tdm_status st = cuda_vmm_prop(c, device, &prop);
    if (st != TDM_OK)
        return st;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_create(&h, size, &prop, 0);
    leave_ctx(c, pushed);
    if (r != TDM__CU_SUCCESS)
        return fail(r);
    *handle = h;
    return TDM_OK;
}

static tdm_status cuda_vmm_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    (void)size;
    cuda_impl *c = p->impl;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_release(handle);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_vmm_map(tdm_provider *p, int device, void *addr, size_t size,
                               uint64_t handle)
{
    cuda_impl *c = p->impl;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_map((tdm__cu_deviceptr)(uintptr_t)addr, size, 0, handle, 0);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_vmm_set_access(tdm_provider *p, int device, void *addr, size_t size)
{
    cuda_impl *c = p->impl;
    tdm__cu_mem_prop prop;
    tdm_status st = cuda_vmm_prop(c, device, &prop);
    if (st != TDM_OK)
        return st;
    tdm__cu_access_desc desc = {.location = prop.location,
                                .flags = TDM__CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_set_access((tdm__cu_deviceptr)(uintptr_t)addr, size, &desc, 1);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static tdm_status cuda_vmm_unmap(tdm_provider *p, int device, void *addr, size_t size)
{
    cuda_impl *c = p->impl;
    int pushed;
    int r = enter_ctx(c, device, &pushed);
    if (r == TDM__CU_SUCCESS)
        r = c->fns.mem_unmap((tdm__cu_deviceptr)(uintptr_t)addr, size);
    leave_ctx(c, pushed);
    return r == TDM__CU_SUCCESS ? TDM_OK : fail(r);
}

static const tdm_vmm_ops cuda_vmm = {
    .granularity = cuda_vmm_granularity,
    .reserve = cuda_vmm_reserve,
    .free_range = cuda_vmm_free_range,
    .create = cuda_vmm_create,
    .release = cuda_vmm_release,
    .map = cuda_vmm_map,
    .set_access = cuda_vmm_set_access,
    .unmap = cuda_vmm_unmap,
};

static int has_vmm(const struct tdm_cuda_fns *f)
{
    return f->mem_address_reserve && f->mem_address_free && f->mem_create && f->mem_release &&
           f->mem_map && f->mem_unmap && f->mem_set_access && f->mem_get_allocation_granularity;
}

static int has_events(const struct tdm_cuda_fns *f)
{
    return f->event_create && f->event_record && f->event_query && f->event_synchronize &&
           f->event_destroy && f->ctx_synchronize;
}

static void cuda_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    cuda_impl *c = p->impl;
    if (len == 0)
        return;
    if (device >= 0 && device < p->device_count && c->names[device][0])
        snprintf(buf, len, "%s", c->names[device]);
    else
        snprintf(buf, len, "cuda%d", device);
}

static void cuda_destroy(tdm_provider *p)
{
    cuda_impl *c = p->impl;
    for (int i = 0; i < p->device_count && i < CUDA_MAX_DEVICES; i++) {
        int dev = 0;
        if (atomic_load(&c->ctx[i]) && c->fns.device_get(&dev, i) == TDM__CU_SUCCESS)
            c->fns.primary_ctx_release(dev);
    }
    pthread_mutex_destroy(&c->ctx_lock);
    if (c->lib)
        dlclose(c->lib);
    tdm__meta_unmap(c, sizeof *c);
}

/* Fills fns from the library; 0 when a function is missing. */
static int resolve(void *lib, struct tdm_cuda_fns *f)
{
    static const char *const names[] = {TDM__CUDA_FNS_NAMES};
    void *sym[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sym[i] = tdm__provider_sym(lib, names[i]);
        if (sym[i] == NULL)
            return 0;
    }
    /* void * to function pointer: POSIX guarantees the representation. */
    f->init = (int (*)(unsigned int))sym[0];
    f->device_get_count = (int (*)(int *))sym[1];
    f->device_get = (int (*)(int *, int))sym[2];
    f->device_get_name = (int (*)(char *, int, int))sym[3];
    f->device_total_mem = (int (*)(size_t *, int))sym[4];
    f->primary_ctx_retain = (int (*)(tdm__cu_context *, int))sym[5];
    f->primary_ctx_release = (int (*)(int))sym[6];
    f->ctx_get_current = (int (*)(tdm__cu_context *))sym[7];
    f->ctx_push = (int (*)(tdm__cu_context))sym[8];
    f->ctx_pop = (int (*)(tdm__cu_context *))sym[9];
    f->mem_alloc = (int (*)(tdm__cu_deviceptr *, size_t))sym[10];
    f->mem_free = (int (*)(tdm__cu_deviceptr))sym[11];
    f->mem_get_info = (int (*)(size_t *, size_t *))sym[12];
    static const char *const optional[] = {TDM__CUDA_FNS_OPTIONAL_NAMES};
    void *o[sizeof optional / sizeof optional[0]];
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        o[i] = tdm__provider_sym(lib, optional[i]);
    f->event_create = (int (*)(tdm__cu_event *, unsigned int))o[0];
    f->event_record = (int (*)(tdm__cu_event, tdm__cu_stream))o[1];
    f->event_query = (int (*)(tdm__cu_event))o[2];
    f->event_synchronize = (int (*)(tdm__cu_event))o[3];
    f->event_destroy = (int (*)(tdm__cu_event))o[4];
    f->ctx_synchronize = (int (*)(void))o[5];
    f->stream_is_capturing = (int (*)(tdm__cu_stream, int *))o[6];
    static const char *const vmm[] = {TDM__CUDA_FNS_VMM_NAMES};
    void *v[sizeof vmm / sizeof vmm[0]];
    for (size_t i = 0; i < sizeof vmm / sizeof vmm[0]; i++)
        v[i] = tdm__provider_sym(lib, vmm[i]);
    f->mem_address_reserve = (int (*)(tdm__cu_deviceptr *, size_t, size_t, tdm__cu_deviceptr,
                                      unsigned long long))v[0];
    f->mem_address_free = (int (*)(tdm__cu_deviceptr, size_t))v[1];
    f->mem_create = (int (*)(tdm__cu_mem_handle *, size_t, const tdm__cu_mem_prop *,
                             unsigned long long))v[2];
    f->mem_release = (int (*)(tdm__cu_mem_handle))v[3];
    f->mem_map = (int (*)(tdm__cu_deviceptr, size_t, size_t, tdm__cu_mem_handle,
                          unsigned long long))v[4];
    f->mem_unmap = (int (*)(tdm__cu_deviceptr, size_t))v[5];
    f->mem_set_access = (int (*)(tdm__cu_deviceptr, size_t, const tdm__cu_access_desc *,
                                 size_t))v[6];
    f->mem_get_allocation_granularity = (int (*)(size_t *, const tdm__cu_mem_prop *, int))v[7];
    return 1;
}

static int complete(const struct tdm_cuda_fns *f)
{
    return f->init && f->device_get_count && f->device_get && f->device_get_name &&
           f->device_total_mem && f->primary_ctx_retain && f->primary_ctx_release &&
           f->ctx_get_current && f->ctx_push && f->ctx_pop && f->mem_alloc &&
           f->mem_free && f->mem_get_info;
}

tdm_status tdm__provider_cuda_create(const tdm_cuda_fns *fns, tdm_provider **out)
{
    if (out == NULL)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    cuda_impl *c = tdm__meta_map(sizeof *c);
    if (c == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    pthread_mutex_init(&c->ctx_lock, NULL);
    if (fns) {
        c->fns = *fns;
    } else {
        c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (c->lib == NULL || !resolve(c->lib, &c->fns))
            goto unavailable;
    }
    if (!complete(&c->fns))
        goto unavailable;
    int count = 0;
    int r = c->fns.init(0); /* cheap when the program already did it */
    if (r == TDM__CU_SUCCESS)
        r = c->fns.device_get_count(&count);
    if (r != TDM__CU_SUCCESS || count < 1) {
        tdm__provider_set_vendor_error(r != TDM__CU_SUCCESS ? r : TDM__CU_ERROR_NO_DEVICE);
        goto unavailable;
    }
    if (count > CUDA_MAX_DEVICES)
        count = CUDA_MAX_DEVICES;
    for (int i = 0; i < count; i++) {
        int dev = 0;
        if (c->fns.device_get(&dev, i) != TDM__CU_SUCCESS ||
            c->fns.device_get_name(c->names[i], CUDA_NAME_LEN, dev) != TDM__CU_SUCCESS)
            c->names[i][0] = '\0';
        c->names[i][CUDA_NAME_LEN - 1] = '\0';
    }
    c->pub = (tdm_provider){
        .vendor = TDM_VENDOR_CUDA,
        .device_count = count,
        .alloc = cuda_alloc,
        .free = cuda_free,
        .mem_info = cuda_mem_info,
        .device_name = cuda_device_name,
        .destroy = cuda_destroy,
        .impl = c,
        .streams = has_events(&c->fns) ? &cuda_stream_ops : NULL,
        .streams_ctx = c,
        .vmm = has_vmm(&c->fns) ? &cuda_vmm : NULL,
    };
    *out = &c->pub;
    return TDM_OK;
unavailable:
    cuda_destroy(&(tdm_provider){.impl = c, .device_count = 0});
    return TDM_NOT_AVAILABLE;
}
