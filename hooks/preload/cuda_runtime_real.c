/* hooks/preload/cuda_runtime_real.c: what the CUDA runtime hooks ask of
 * the runtime itself: its real functions, the calling thread's device, the
 * runtime's version, the runtime error for a driver error, and the last
 * error cache mode answered without the runtime (cuda_runtime.h).
 *
 * Owns: the runtimes' real functions, one slot each per runtime, resolved
 * once; which runtime each calling object linked (cached); each runtime's
 * version; per thread, the last error cache mode answered
 * without the runtime, which cudaGetLastError / cudaPeekAtLastError
 * (cuda_runtime.c) report as the runtime reports its own.  Lock: none
 * (atomics; a slot is written with the same value by whichever thread
 * gets there first).
 */
#define _GNU_SOURCE
#include "cuda_runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

/* ---- real functions ------------------------------------------------------------
 * Runtime 0 is the default: the next definition after ours (RTLD_NEXT),
 * else whatever loaded object has it.  Runtimes 1.. are libcudart objects
 * that callers' objects depend on, one per object (libcudart.so.12 and
 * libcudart.so.13 are two), each with its own slots.  Which runtime a
 * caller gets is found once per calling object and cached by address
 * range; an object that does not depend on a libcudart (the program
 * itself, a tail call from elsewhere) gets the default. */

#define MAX_RUNTIMES 8
#define MAX_CALLERS 64

static const char *const rt_names[TDM__RT_COUNT] = {
#define RT_NAME(name) #name,
    TDM__RT_FUNCS(RT_NAME)
#undef RT_NAME
};
static _Atomic(void *) rt_real[MAX_RUNTIMES][TDM__RT_COUNT];
static char rt_missing; /* marks a name the runtime does not have */

/* Runtimes 1..: the libcudart's handle (a reference kept) and base. */
static struct {
    _Atomic(void *) handle; /* set last: the entry is usable once it is */
    _Atomic(const void *) base;
} runtimes[MAX_RUNTIMES];
static _Atomic int n_runtimes = 1;

/* Calling objects seen: [lo, hi) of their loaded segments -> runtime. */
static struct {
    uintptr_t lo, hi;
    int runtime;
    _Atomic int ready; /* set last */
} callers[MAX_CALLERS];
static _Atomic int n_callers;

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

/* Runtime 0's function `f`. */
static void *default_resolve(int f)
{
    void *p = tdm__hook_real(rt_names[f]);
    if (p == NULL || tdm__cuda_is_ours(p)) {
        /* cudart in a private scope (dlopen'ed RTLD_LOCAL, e.g. by a
         * Python extension): RTLD_NEXT cannot see it, its object can. */
        /* 4 KiB: off the program's stack, and off this library's TLS,
         * which stays a few words (its guard is initial-exec: common.c). */
        objects *o = calloc(1, sizeof *o);
        if (o == NULL)
            return NULL;
        p = NULL;
        dl_iterate_phdr(collect, o);
        for (int i = 0; i < o->n && p == NULL; i++) {
            void *h = dlopen(o->name[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h == NULL)
                continue;
            void *q = tdm__hook_real_dlsym(h, rt_names[f]);
            dlclose(h);
            if (q && !tdm__cuda_is_ours(q))
                p = q;
        }
        free(o);
    }
    return p;
}

static __attribute__((noinline)) void *rt_resolve(int rt, int f)
{
    void *p;
    void *h = rt ? atomic_load_explicit(&runtimes[rt].handle, memory_order_acquire) : NULL;
    if (h) {
        p = tdm__hook_real_dlsym(h, rt_names[f]);
        if (p && tdm__cuda_is_ours(p))
            p = NULL;
    } else {
        p = default_resolve(f);
    }
    atomic_store_explicit(&rt_real[rt][f], p ? p : (void *)&rt_missing, memory_order_release);
    return p;
}

/* The object holding an address: its segments' range, and whether it is
 * the program itself (the first object listed). */
typedef struct object_range {
    uintptr_t addr, lo, hi;
    int index, found, is_program;
} object_range;

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    object_range *r = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int holds = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
        holds |= r->addr >= a && r->addr < a + ph->p_memsz;
    }
    if (holds) {
        r->lo = lo, r->hi = hi, r->found = 1;
        r->is_program = r->index == 0;
        return 1;
    }
    r->index++;
    return 0;
}

/* The runtime of the libcudart the calling object depends on: a lookup
 * in the object's own scope (itself, then its dependencies, breadth
 * first; neither the global scope nor this library), as the dynamic linker
 * bound the object's versioned references. */
static int runtime_of_object(const char *path)
{
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    void *p = h ? tdm__hook_real_dlsym(h, "cudaRuntimeGetVersion") : NULL;
    Dl_info rt;
    int found = p && !tdm__cuda_is_ours(p) && dladdr(p, &rt) && rt.dli_fbase;
    if (h)
        dlclose(h);
    if (!found)
        return 0;
    int n = atomic_load_explicit(&n_runtimes, memory_order_acquire);
    for (int i = 1; i < n && i < MAX_RUNTIMES; i++)
        if (atomic_load_explicit(&runtimes[i].handle, memory_order_acquire) &&
            atomic_load_explicit(&runtimes[i].base, memory_order_relaxed) == rt.dli_fbase)
            return i;
    int i = atomic_fetch_add(&n_runtimes, 1);
    if (i >= MAX_RUNTIMES)
        return 0;
    void *rh = dlopen(rt.dli_fname, RTLD_LAZY | RTLD_NOLOAD); /* kept */
    if (rh == NULL)
        return 0;
    atomic_store_explicit(&runtimes[i].base, rt.dli_fbase, memory_order_relaxed);
    atomic_store_explicit(&runtimes[i].handle, rh, memory_order_release);
    return i;
}

/* First call from an object: find and cache its runtime.  No lock (the
 * loader's is taken inside; a library constructor running under it may
 * call a hook): threads racing here find the same answer. */
static __attribute__((noinline)) int runtime_slow(const void *caller)
{
    Dl_info info;
    object_range r = {.addr = (uintptr_t)caller};
    if (caller == NULL || tdm__cuda_is_ours(caller) || !dladdr(caller, &info))
        return 0;
    dl_iterate_phdr(find_range, &r);
    if (!r.found)
        return 0;
    int rt = r.is_program || info.dli_fname == NULL ? 0 : runtime_of_object(info.dli_fname);
    int i = atomic_fetch_add(&n_callers, 1);
    if (i < MAX_CALLERS) {
        callers[i].lo = r.lo;
        callers[i].hi = r.hi;
        callers[i].runtime = rt;
        atomic_store_explicit(&callers[i].ready, 1, memory_order_release);
    }
    return rt;
}

static inline int runtime_of(const void *caller)
{
    uintptr_t a = (uintptr_t)caller;
    int n = atomic_load_explicit(&n_callers, memory_order_acquire);
    n = n < MAX_CALLERS ? n : MAX_CALLERS;
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&callers[i].ready, memory_order_acquire) &&
            a >= callers[i].lo && a < callers[i].hi)
            return callers[i].runtime;
    return runtime_slow(caller);
}

void *tdm__cuda_rt_real_for(int f, const void *caller)
{
    int rt = runtime_of(caller);
    void *p = atomic_load_explicit(&rt_real[rt][f], memory_order_acquire);
    if (p == NULL)
        return rt_resolve(rt, f);
    return p == (void *)&rt_missing ? NULL : p;
}

int tdm__cuda_rt_device_for(const void *caller)
{
    cudaError_t (*get)(int *) =
        (cudaError_t(*)(int *))tdm__cuda_rt_real_for(TDM__RT_cudaGetDevice, caller);
    int d = 0;
    if (get == NULL || get(&d) != cudaSuccess || d < 0)
        return 0;
    return d;
}

size_t tdm__cuda_rt_free_bytes_for(const void *caller)
{
    cudaError_t (*info)(size_t *, size_t *) = (cudaError_t(*)(size_t *, size_t *))
        tdm__cuda_rt_real_for(TDM__RT_cudaMemGetInfo, caller);
    size_t fr = 0, total = 0;
    if (info == NULL || info(&fr, &total) != cudaSuccess)
        return 0;
    return fr;
}

int tdm__cuda_rt_version_for(const void *caller)
{
    static _Atomic int version[MAX_RUNTIMES];
    int rt = runtime_of(caller);
    int v = atomic_load_explicit(&version[rt], memory_order_relaxed);
    if (v == 0) {
        cudaError_t (*get)(int *) =
            (cudaError_t(*)(int *))tdm__cuda_rt_real_for(TDM__RT_cudaRuntimeGetVersion, caller);
        if (get == NULL || get(&v) != cudaSuccess || v <= 0)
            v = CUDART_VERSION;
        atomic_store_explicit(&version[rt], v, memory_order_relaxed);
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

void tdm__cuda_capture_count(int delta)
{
    if (delta > 0) {
        atomic_fetch_add_explicit(&captures, 1, memory_order_acq_rel);
        return;
    }
    int n = atomic_load_explicit(&captures, memory_order_relaxed);
    while (n > 0 && !atomic_compare_exchange_weak_explicit(&captures, &n, n - 1,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed))
        ;
}

void tdm__cuda_rt_capture_begun(cudaError_t r)
{
    if (r == cudaSuccess)
        tdm__cuda_capture_count(1);
}

void tdm__cuda_rt_capture_ended(cudaError_t r)
{
    /* An invalidated capture is ended too; other errors (not capturing,
     * wrong thread) end nothing. */
    if (r != cudaSuccess && r != cudaErrorStreamCaptureInvalidated)
        return;
    tdm__cuda_capture_count(-1);
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
