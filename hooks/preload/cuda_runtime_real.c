/* hooks/preload/cuda_runtime_real.c: what the CUDA runtime hooks ask of
 * the runtime itself: its real functions, the calling thread's device, the
 * runtime's version, the runtime error for a driver error, and the last
 * error cache mode answered without the runtime (cuda_runtime.h).
 *
 * Owns: the runtime's real functions, one slot each, resolved once; the
 * runtime's version; per thread, the last error cache mode answered
 * without the runtime, which cudaGetLastError / cudaPeekAtLastError
 * (cuda_runtime.c) report as the runtime reports its own.  Lock: none
 * (atomics; a slot is written with the same value by whichever thread
 * gets there first).
 */
#define _GNU_SOURCE
#include "cuda_runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

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
    /* A new segment asked for during a graph capture that forbids it. */
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return cudaErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: return cudaErrorStreamCaptureImplicit;
    default: return cudaErrorUnknown;
    }
}

/* ---- graph captures -------------------------------------------------------------------
 * Counted from the runtime's begin/end calls, so that cache mode knows a
 * capture is underway on any stream of any thread: it then frees no
 * segment and records, queries or waits on no event (cache_stream.c). */

static _Atomic int captures;

int tdm__cuda_captures_underway(void)
{
    return atomic_load_explicit(&captures, memory_order_acquire) > 0;
}

void tdm__cuda_rt_capture_begun(cudaError_t r)
{
    if (r == cudaSuccess)
        atomic_fetch_add_explicit(&captures, 1, memory_order_acq_rel);
}

void tdm__cuda_rt_capture_ended(cudaError_t r)
{
    /* An invalidated capture is ended too; other errors (not capturing,
     * wrong thread) end nothing. */
    if (r != cudaSuccess && r != cudaErrorStreamCaptureInvalidated)
        return;
    int n = atomic_load_explicit(&captures, memory_order_relaxed);
    while (n > 0 && !atomic_compare_exchange_weak_explicit(&captures, &n, n - 1,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed))
        ;
}

/* ---- the last error --------------------------------------------------------------------
 * The runtime keeps, per thread, the last error one of its calls returned,
 * until cudaGetLastError reads and clears it (cudaPeekAtLastError only
 * reads).  A call cache mode answers itself (out of memory, a bad free)
 * never reaches the runtime, so that error is kept here, per thread, for
 * cuda_runtime.c's cudaGetLastError / cudaPeekAtLastError to report. */

static __thread cudaError_t served_error;

cudaError_t tdm__cuda_rt_served_error(cudaError_t r)
{
    if (r != cudaSuccess)
        served_error = r;
    return r;
}

cudaError_t tdm__cuda_rt_served_last(int clear)
{
    cudaError_t r = served_error;
    if (clear)
        served_error = cudaSuccess;
    return r;
}
