/* hooks/preload/cuda_runtime.c: the CUDA runtime API hooks (cudaMalloc &
 * co.) and what they share: the runtime's real functions.
 *
 * These exported symbols interpose a libcudart.so that the program loads
 * (unversioned definitions interpose its versioned ones).  A program with
 * cudart linked statically never calls them; its allocations are seen one
 * level down, at the driver (cuda_lookup.c).  With a shared cudart both
 * levels see the call; the recursion guard makes the outer one (this
 * file, whose stack starts at the program's call) the only one to book.
 * Pinned host memory is booked on device -1; managed memory and pitched
 * allocations on the current device; cache mode serves cudaMalloc and
 * cudaMallocAsync only (see cuda_runtime_body.h).
 *
 * Owns: the runtime's real functions, one slot each, resolved once; the
 * runtime's version; per thread, the last error cache mode answered
 * without the runtime, which cudaGetLastError / cudaPeekAtLastError report
 * as the runtime reports its own.  Lock: none (atomics; a slot is written
 * with the same value by whichever thread gets there first).
 */
#define _GNU_SOURCE
#include "cuda_runtime_body.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

#define TDM_RT_EXPORT __attribute__((visibility("default")))

/* ---- real functions ----------------------------------------------------------- */

static const char *const rt_names[TDM__RT_COUNT] = {
#define RT_NAME(name) #name,
    TDM__RT_FUNCS(RT_NAME)
#undef RT_NAME
};
static _Atomic(void *) rt_real[TDM__RT_COUNT];
static char rt_missing; /* marks a name no loaded object has */

/* The loaded objects' names (the loader's strings, valid while loaded):
 * collected first, looked into after, so that no loader call is made
 * while dl_iterate_phdr holds the loader's lock. */
typedef struct objects {
    const char *name[512];
    int n;
} objects;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    objects *o = arg;
    if (info->dlpi_name && info->dlpi_name[0] && o->n < 512)
        o->name[o->n++] = info->dlpi_name;
    return 0;
}

static __attribute__((noinline)) void *rt_resolve(int f)
{
    void *p = tdm__hook_real(rt_names[f]);
    if (p == NULL || tdm__cuda_is_ours(p)) {
        /* cudart in a private scope (dlopen'ed RTLD_LOCAL, e.g. by a
         * Python extension): RTLD_NEXT cannot see it, its object can. */
        static __thread objects o; /* 4 KiB: off the program's stack */
        o.n = 0;
        p = NULL;
        dl_iterate_phdr(collect, &o);
        for (int i = 0; i < o.n && p == NULL; i++) {
            void *h = dlopen(o.name[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h == NULL)
                continue;
            void *q = tdm__hook_real_dlsym(h, rt_names[f]);
            dlclose(h);
            if (q && !tdm__cuda_is_ours(q))
                p = q;
        }
    }
    atomic_store_explicit(&rt_real[f], p ? p : (void *)&rt_missing, memory_order_release);
    return p;
}

void *tdm__cuda_rt_real(int f)
{
    void *p = atomic_load_explicit(&rt_real[f], memory_order_acquire);
    if (p == NULL)
        return rt_resolve(f);
    return p == (void *)&rt_missing ? NULL : p;
}

int tdm__cuda_rt_device(void)
{
    cudaError_t (*get)(int *) = (cudaError_t(*)(int *))tdm__cuda_rt_real(TDM__RT_cudaGetDevice);
    int d = 0;
    if (get == NULL || get(&d) != cudaSuccess || d < 0)
        return 0;
    return d;
}

size_t tdm__cuda_rt_free_bytes(void)
{
    cudaError_t (*info)(size_t *, size_t *) =
        (cudaError_t(*)(size_t *, size_t *))tdm__cuda_rt_real(TDM__RT_cudaMemGetInfo);
    size_t fr = 0, total = 0;
    if (info == NULL || info(&fr, &total) != cudaSuccess)
        return 0;
    return fr;
}

int tdm__cuda_rt_version(void)
{
    static _Atomic int version;
    int v = atomic_load_explicit(&version, memory_order_relaxed);
    if (v == 0) {
        cudaError_t (*get)(int *) =
            (cudaError_t(*)(int *))tdm__cuda_rt_real(TDM__RT_cudaRuntimeGetVersion);
        if (get == NULL || get(&v) != cudaSuccess || v <= 0)
            v = CUDART_VERSION;
        atomic_store_explicit(&version, v, memory_order_relaxed);
    }
    return v;
}

cudaError_t tdm__cuda_rt_error(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    default: return cudaErrorUnknown;
    }
}

/* ---- the last error --------------------------------------------------------------------
 * The runtime keeps, per thread, the last error one of its calls returned,
 * until cudaGetLastError reads and clears it (cudaPeekAtLastError only
 * reads).  A call cache mode answers itself (out of memory, a bad free)
 * never reaches the runtime, so that error is kept here and reported in
 * the same way; when the runtime has one of its own, the runtime's wins,
 * and both are cleared. */

static __thread cudaError_t served_error;

cudaError_t tdm__cuda_rt_served_error(cudaError_t r)
{
    if (r != cudaSuccess)
        served_error = r;
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t (*real)(void) = (cudaError_t(*)(void))tdm__cuda_rt_real(TDM__RT_cudaGetLastError);
    cudaError_t r = real ? real() : TDM_RT_ABSENT;
    cudaError_t ours = served_error;
    served_error = cudaSuccess;
    return r == cudaSuccess ? ours : r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    cudaError_t (*real)(void) =
        (cudaError_t(*)(void))tdm__cuda_rt_real(TDM__RT_cudaPeekAtLastError);
    cudaError_t r = real ? real() : TDM_RT_ABSENT;
    return r == cudaSuccess ? served_error : r;
}

/* ---- device memory ------------------------------------------------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMalloc(void **p, size_t size)
{
    cudaError_t (*real)(void **, size_t) =
        (cudaError_t(*)(void **, size_t))tdm__cuda_rt_real(TDM__RT_cudaMalloc);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p, size) : TDM_RT_ABSENT;
    cudaError_t r;
    if (!tdm__rt_cache_alloc(m, &r, p, size, 0, 0)) {
        r = real(p, size);
        tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFree(void *p)
{
    cudaError_t (*real)(void *) = (cudaError_t(*)(void *))tdm__cuda_rt_real(TDM__RT_cudaFree);
    /* cudaFree(NULL) is how programs make the context: the runtime's. */
    tdm__hook_mode m = p ? tdm__rt_open((void *)real) : TDM__HOOK_OFF;
    if (m == TDM__HOOK_OFF)
        return real ? real(p) : TDM_RT_ABSENT;
    cudaError_t r = cudaSuccess;
    int cached = tdm__rt_cache_free(m, p);
    if (cached < 0) {
        r = tdm__cuda_rt_served_error(cudaErrorInvalidValue);
    } else if (cached == 0) {
        tdm__alloc_observe_free(p, 0, TDM_HOOK_SKIP);
        r = real(p);
    }
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
    cudaError_t (*real)(void **, size_t, unsigned int) =
        (cudaError_t(*)(void **, size_t, unsigned int))tdm__cuda_rt_real(TDM__RT_cudaMallocManaged);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p, size, flags) : TDM_RT_ABSENT;
    cudaError_t r = real(p, size, flags);
    tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void **p, size_t *pitch, size_t width,
                                                    size_t height)
{
    cudaError_t (*real)(void **, size_t *, size_t, size_t) =
        (cudaError_t(*)(void **, size_t *, size_t, size_t))tdm__cuda_rt_real(
            TDM__RT_cudaMallocPitch);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p, pitch, width, height) : TDM_RT_ABSENT;
    cudaError_t r = real(p, pitch, width, height);
    /* The runtime picks the pitch; the allocation is pitch x height. */
    size_t size = r == cudaSuccess && pitch ? *pitch * height : width * height;
    tdm__rt_book(r, tdm__cuda_rt_device(), r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

/* ---- pinned host memory: device -1 ------------------------------------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t size)
{
    cudaError_t (*real)(void **, size_t) =
        (cudaError_t(*)(void **, size_t))tdm__cuda_rt_real(TDM__RT_cudaMallocHost);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p, size) : TDM_RT_ABSENT;
    cudaError_t r = real(p, size);
    tdm__rt_book(r, -1, r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    cudaError_t (*real)(void **, size_t, unsigned int) =
        (cudaError_t(*)(void **, size_t, unsigned int))tdm__cuda_rt_real(TDM__RT_cudaHostAlloc);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p, size, flags) : TDM_RT_ABSENT;
    cudaError_t r = real(p, size, flags);
    tdm__rt_book(r, -1, r == cudaSuccess && p ? *p : NULL, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void *p)
{
    cudaError_t (*real)(void *) = (cudaError_t(*)(void *))tdm__cuda_rt_real(TDM__RT_cudaFreeHost);
    tdm__hook_mode m = tdm__rt_open((void *)real);
    if (m == TDM__HOOK_OFF)
        return real ? real(p) : TDM_RT_ABSENT;
    tdm__alloc_observe_free(p, 0, TDM_HOOK_SKIP);
    cudaError_t r = real(p);
    tdm__hook_leave();
    return r;
}

/* ---- stream-ordered memory, entry points (legacy default stream) ------------------------ */

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    return tdm__rt_malloc_async(TDM__RT_cudaMallocAsync, p, size, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    return tdm__rt_free_async(TDM__RT_cudaFreeAsync, p, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t size,
                                                            cudaMemPool_t pool, cudaStream_t s)
{
    return tdm__rt_from_pool(TDM__RT_cudaMallocFromPoolAsync, p, size, pool, s, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(
    const char *symbol, void **fn, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry(TDM__RT_cudaGetDriverEntryPoint, symbol, fn, flags, st, 0);
}

TDM_RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *st)
{
    return tdm__rt_entry_ver(TDM__RT_cudaGetDriverEntryPointByVersion, symbol, fn, version,
                             flags, st, 0);
}
