/* runtime/torch.c: PyTorch's pluggable-allocator entry points
 * (torch.cuda.memory.CUDAPluggableAllocator), in libtidemark.so so that a
 * PyTorch program needs no preload.
 *
 * Owns nothing but the choice of device kind at first use: when the
 * allocator has not started and TIDEMARK_CONF left `device` at sim, the
 * CUDA devices serve if there are any (then HIP's, for ROCm builds of
 * torch, whose pluggable allocator has the same shape), because torch
 * runs kernels on this memory.  Everything else is tdm_malloc's path.
 *
 * Invariants: the entry points never raise errors at torch (it cannot
 * take a status): a failed allocation is NULL, which torch reports as out
 * of memory; a free of an unknown pointer does nothing; the base of an
 * unknown pointer is the pointer itself (size 0).  Stacks start at
 * torch's frame that called us (skip = our one frame).
 * Lock: none of its own; `started` is an atomic flag, and a race of two
 * first calls is settled inside alloc/ (the first provider wins).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "tidemark.h"
#include "vendor.h"

static _Atomic int started;

static __attribute__((noinline)) void start_slow(void)
{
    /* The vendors PyTorch calls CUDA devices, in vendors.def's order. */
    for (int v = 0; v < TDM_VENDOR_COUNT; v++)
        if (v != TDM_VENDOR_SIM &&
            tdm__vendor_info((tdm_vendor)v)->torch_device == TDM_TORCH_DEVICE_CUDA)
            tdm__alloc_prefer_vendor((tdm_vendor)v);
    (void)tdm__alloc_init();
    atomic_store_explicit(&started, 1, memory_order_release);
}

static inline void start(void)
{
    if (!atomic_load_explicit(&started, memory_order_acquire))
        start_slow();
}

TDM_API __attribute__((noinline)) void *
tdm_torch_alloc(size_t size, int device, void *stream)
{
    start();
    void *p = NULL;
    if (tdm__alloc_malloc(&p, size, device, (tdm_stream)(uintptr_t)stream,
                          1) != TDM_OK)
        p = NULL;
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
    return p;
}

TDM_API __attribute__((noinline)) void
tdm_torch_free(void *ptr, size_t size, int device, void *stream)
{
    (void)size;   /* torch's copy of what tidemark already knows */
    (void)device;
    (void)stream; /* a free completes in the block's own stream order */
    (void)tdm__alloc_free(ptr, 1);
    __asm__ volatile("" ::: "memory");
}

TDM_API void tdm_torch_init(int device_count)
{
    (void)device_count; /* torch may pass 0 here; the provider knows */
    start();
}

TDM_API void tdm_torch_reset(void)
{
    start();
    (void)tdm_empty_cache(-1);
}

TDM_API void tdm_torch_memory_fraction(double fraction, int device)
{
    start();
    (void)tdm__alloc_set_memory_fraction(fraction, device);
}

TDM_API void *tdm_torch_base_alloc(void *ptr, size_t *size)
{
    void *base = ptr;
    size_t bytes = 0;
    if (tdm__alloc_base_of(ptr, &base, &bytes) != TDM_OK)
        base = ptr; /* torch's own answer without a base-alloc function */
    if (size)
        *size = bytes;
    return base;
}

TDM_API void tdm_torch_record_stream(void *ptr, void *stream)
{
    (void)tdm_record_stream(ptr, (tdm_stream)(uintptr_t)stream);
}
