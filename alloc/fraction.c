/* alloc/fraction.c: a per-device cap on the bytes taken from a provider,
 * for torch.cuda.set_per_process_memory_fraction (tdm_torch_memory_fraction).
 *
 * Owns a provider that wraps another one: it counts, per device, the bytes
 * it holds from the inner provider and refuses, as TDM_OUT_OF_MEMORY, an
 * allocation that would take them past the device's limit.  The caching
 * allocator then reacts as to a full device (frees its cache, retries,
 * reports an OOM), which is what PyTorch does when a request would exceed
 * the allowed fraction.  Free and total bytes are the inner provider's.
 *
 * Invariants: used[d] == bytes handed out on device d and not yet freed;
 * limit[d] == UINT64_MAX until a fraction is set.
 * Lock: none of its own; `used` and `limit` are atomics (a racing pair of
 * allocations may overshoot the limit by one of them, as in PyTorch where
 * the check and the cudaMalloc are not atomic either).
 */
#include <stdatomic.h>
#include <string.h>

#include "alloc_internal.h"
#include "meta.h"

typedef struct frac_impl {
    tdm_provider pub;
    tdm_provider *inner;
    _Atomic uint64_t *used;  /* [device_count] bytes held */
    _Atomic uint64_t *limit; /* [device_count] bytes allowed */
} frac_impl;

static tdm_status frac_alloc(tdm_provider *p, int device, size_t size,
                             tdm_stream stream, void **out)
{
    frac_impl *f = p->impl;
    uint64_t limit = atomic_load_explicit(&f->limit[device], memory_order_relaxed);
    if (limit != UINT64_MAX &&
        atomic_load_explicit(&f->used[device], memory_order_relaxed) + size > limit) {
        *out = NULL;
        return TDM_OUT_OF_MEMORY;
    }
    tdm_status st = f->inner->alloc(f->inner, device, size, stream, out);
    if (st == TDM_OK)
        atomic_fetch_add_explicit(&f->used[device], size, memory_order_relaxed);
    return st;
}

static tdm_status frac_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    frac_impl *f = p->impl;
    tdm_status st = f->inner->free(f->inner, device, ptr, size);
    if (st == TDM_OK)
        atomic_fetch_sub_explicit(&f->used[device], size, memory_order_relaxed);
    return st;
}

static tdm_status frac_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                                size_t *total_bytes)
{
    frac_impl *f = p->impl;
    return f->inner->mem_info(f->inner, device, free_bytes, total_bytes);
}

static void frac_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    frac_impl *f = p->impl;
    f->inner->device_name(f->inner, device, buf, len);
}

static size_t table_bytes(int device_count)
{
    return sizeof(_Atomic uint64_t) * (size_t)device_count;
}

static void frac_destroy(tdm_provider *p)
{
    frac_impl *f = p->impl;
    int n = p->device_count;
    f->inner->destroy(f->inner);
    tdm__meta_unmap((void *)f->used, table_bytes(n));
    tdm__meta_unmap((void *)f->limit, table_bytes(n));
    tdm__meta_unmap(f, sizeof *f);
}

tdm_status tdm__fraction_wrap(tdm_provider *inner, tdm_provider **out)
{
    *out = NULL;
    int n = inner->device_count;
    frac_impl *f = tdm__meta_map(sizeof *f);
    if (f == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    f->used = tdm__meta_map(table_bytes(n > 0 ? n : 1));
    f->limit = tdm__meta_map(table_bytes(n > 0 ? n : 1));
    if (f->used == NULL || f->limit == NULL) {
        if (f->used)
            tdm__meta_unmap((void *)f->used, table_bytes(n > 0 ? n : 1));
        if (f->limit)
            tdm__meta_unmap((void *)f->limit, table_bytes(n > 0 ? n : 1));
        tdm__meta_unmap(f, sizeof *f);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    for (int i = 0; i < n; i++)
        atomic_init(&f->limit[i], UINT64_MAX);
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
