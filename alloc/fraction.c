/* alloc/fraction.c: the allocator's wrapper around its provider: a
 * per-device cap on the bytes taken (torch.cuda.set_per_process_memory_
 * fraction, tdm_torch_memory_fraction) and a per-device lock that keeps
 * provider calls out of fork().
 *
 * Owns a provider that wraps another one: it counts, per device, the bytes
 * it holds from the inner provider and refuses, as TDM_OUT_OF_MEMORY, an
 * allocation that would take them past the device's limit.  The caching
 * allocator then reacts as to a full device (frees its cache, retries,
 * reports an OOM), which is what PyTorch does when a request would exceed
 * the allowed fraction.  Free and total bytes are the inner provider's.
 *
 * Physical pages of the virtual memory ops count as held bytes too.
 * Invariants: used[d] == bytes handed out on device d and not yet freed;
 * limit[d] == UINT64_MAX until a fraction is set.
 * Lock: locks[d] is held around every call into the inner provider for
 * device d, so that the fork handlers (alloc.c) can hold them all and no
 * child starts with a provider lock taken by a thread it does not have.
 * It nests inside the cache's device lock and outside the provider's own.
 * `used` and `limit` are atomics (a racing pair of allocations may
 * overshoot the limit by one of them, as in PyTorch where the check and the
 * cudaMalloc are not atomic either).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc_internal.h"
#include "meta.h"

typedef struct frac_impl {
    tdm_provider pub;
    tdm_provider *inner;
    _Atomic uint64_t *used;  /* [device_count] bytes held */
    _Atomic uint64_t *limit; /* [device_count] bytes allowed */
    pthread_mutex_t *locks;  /* [device_count] around inner calls */
} frac_impl;

/* `call` (an inner provider call for `device`) under the device's lock;
 * its status. */
#define UNDER_LOCK(f, device, call)                                            \
    ({                                                                         \
        pthread_mutex_lock(&(f)->locks[device]);                               \
        tdm_status st_ = (call);                                               \
        pthread_mutex_unlock(&(f)->locks[device]);                             \
        st_;                                                                   \
    })

/* Whether `size` more bytes on `device` would pass its limit. */
static int over_limit(frac_impl *f, int device, size_t size)
{
    uint64_t limit = atomic_load_explicit(&f->limit[device], memory_order_relaxed);
    return limit != UINT64_MAX &&
           atomic_load_explicit(&f->used[device], memory_order_relaxed) + size > limit;
}

/* Books `size` bytes taken (sign +1) or given back (-1) once the inner
 * call that moved them succeeded; returns its status. */
static tdm_status booked(frac_impl *f, int device, tdm_status st, int sign, size_t size)
{
    if (st == TDM_OK && sign > 0)
        atomic_fetch_add_explicit(&f->used[device], size, memory_order_relaxed);
    else if (st == TDM_OK)
        atomic_fetch_sub_explicit(&f->used[device], size, memory_order_relaxed);
    return st;
}

static tdm_status frac_alloc(tdm_provider *p, int device, size_t size,
                             tdm_stream stream, void **out)
{
    frac_impl *f = p->impl;
    if (over_limit(f, device, size)) {
        *out = NULL;
        return TDM_OUT_OF_MEMORY;
    }
    tdm_status st = UNDER_LOCK(f, device, f->inner->alloc(f->inner, device, size, stream, out));
    return booked(f, device, st, +1, size);
}

static tdm_status frac_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    frac_impl *f = p->impl;
    tdm_status st = UNDER_LOCK(f, device, f->inner->free(f->inner, device, ptr, size));
    return booked(f, device, st, -1, size);
}

static tdm_status frac_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                                size_t *total_bytes)
{
    frac_impl *f = p->impl;
    return UNDER_LOCK(f, device, f->inner->mem_info(f->inner, device, free_bytes, total_bytes));
}

static void frac_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    frac_impl *f = p->impl;
    f->inner->device_name(f->inner, device, buf, len);
}

/* ---- virtual memory ops: physical pages count as bytes held ---------- */

static tdm_status frac_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    frac_impl *f = p->impl;
    if (over_limit(f, device, size)) {
        *handle = 0;
        return TDM_OUT_OF_MEMORY;
    }
    tdm_status st = UNDER_LOCK(f, device, f->inner->vmm->create(f->inner, device, size, handle));
    return booked(f, device, st, +1, size);
}

static tdm_status frac_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    frac_impl *f = p->impl;
    tdm_status st = UNDER_LOCK(f, device, f->inner->vmm->release(f->inner, device, handle, size));
    return booked(f, device, st, -1, size);
}

/* The ops that only add the lock: frac_<op>(p, device, ...) calls the
 * inner provider's <op> with the same arguments. */
#define FORWARD_VMM(op, params, args)                                          \
    static tdm_status frac_##op params                                         \
    {                                                                          \
        frac_impl *f = p->impl;                                                \
        return UNDER_LOCK(f, device, f->inner->vmm->op args);                  \
    }

FORWARD_VMM(granularity, (tdm_provider *p, int device, size_t *bytes), (f->inner, device, bytes))
FORWARD_VMM(reserve, (tdm_provider *p, int device, size_t size, void **base),
            (f->inner, device, size, base))
FORWARD_VMM(free_range, (tdm_provider *p, int device, void *base, size_t size),
            (f->inner, device, base, size))
FORWARD_VMM(map, (tdm_provider *p, int device, void *addr, size_t size, uint64_t handle),
            (f->inner, device, addr, size, handle))
FORWARD_VMM(set_access, (tdm_provider *p, int device, void *addr, size_t size),
            (f->inner, device, addr, size))
FORWARD_VMM(unmap, (tdm_provider *p, int device, void *addr, size_t size),
            (f->inner, device, addr, size))

static const tdm_vmm_ops frac_vmm = {
    .granularity = frac_granularity,
    .reserve = frac_reserve,
    .free_range = frac_free_range,
    .create = frac_create,
    .release = frac_release,
    .map = frac_map,
    .set_access = frac_set_access,
    .unmap = frac_unmap,
};

/* One region holds the three per-device tables. */
static size_t tables_bytes(int device_count)
{
    size_t n = (size_t)(device_count > 0 ? device_count : 1);
    return n * (2 * sizeof(_Atomic uint64_t) + sizeof(pthread_mutex_t));
}

static void frac_destroy(tdm_provider *p)
{
    frac_impl *f = p->impl;
    int n = p->device_count;
    f->inner->destroy(f->inner);
    for (int i = 0; i < n; i++)
        pthread_mutex_destroy(&f->locks[i]);
    tdm__meta_unmap((void *)f->used, tables_bytes(n));
    tdm__meta_unmap(f, sizeof *f);
}

uint64_t tdm__fraction_limit(tdm_provider *wrapper, int device)
{
    frac_impl *f = wrapper->impl;
    return atomic_load_explicit(&f->limit[device], memory_order_relaxed);
}

void tdm__fraction_lock_all(tdm_provider *wrapper)
{
    frac_impl *f = wrapper->impl;
    for (int i = 0; i < wrapper->device_count; i++)
        pthread_mutex_lock(&f->locks[i]);
}

void tdm__fraction_unlock_all(tdm_provider *wrapper)
{
    frac_impl *f = wrapper->impl;
    for (int i = wrapper->device_count - 1; i >= 0; i--)
        pthread_mutex_unlock(&f->locks[i]);
}

tdm_status tdm__fraction_wrap(tdm_provider *inner, tdm_provider **out)
{
    *out = NULL;
    int n = inner->device_count;
    frac_impl *f = tdm__meta_map(sizeof *f);
    if (f == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    char *tables = tdm__meta_map(tables_bytes(n));
    if (tables == NULL) {
        tdm__meta_unmap(f, sizeof *f);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    size_t rows = (size_t)(n > 0 ? n : 1);
    f->used = (_Atomic uint64_t *)tables;
    f->limit = f->used + rows;
    f->locks = (pthread_mutex_t *)(void *)(f->limit + rows);
    for (int i = 0; i < n; i++) {
        atomic_init(&f->limit[i], UINT64_MAX);
        pthread_mutex_init(&f->locks[i], NULL);
    }
    f->inner = inner;
    f->pub = (tdm_provider){
        .vendor = inner->vendor,
        .device_count = n,
        .alloc = frac_alloc,
        .free = frac_free,
        .mem_info = frac_mem_info,
        .device_name = frac_device_name,
        .destroy = frac_destroy,
        .impl = f,
        /* Streams are the device's: nothing to count or limit there. */
        .streams = inner->streams,
        .streams_ctx = inner->streams_ctx,
        .vmm = inner->vmm ? &frac_vmm : NULL,
    };
    *out = &f->pub;
    return TDM_OK;
}

tdm_status tdm__fraction_set(tdm_provider *wrapper, int device, double fraction)
{
    frac_impl *f = wrapper->impl;
    if (device < 0 || device >= wrapper->device_count)
        return TDM_NO_SUCH_DEVICE;
    if (!(fraction >= 0.0 && fraction <= 1.0))
        return TDM_INVALID_ARGUMENT;
    size_t total = 0;
    tdm_status st = f->inner->mem_info(f->inner, device, NULL, &total);
    if (st != TDM_OK)
        return st;
    uint64_t limit = fraction >= 1.0 ? UINT64_MAX
                                     : (uint64_t)((double)total * fraction);
    atomic_store_explicit(&f->limit[device], limit, memory_order_relaxed);
    return TDM_OK;
}
