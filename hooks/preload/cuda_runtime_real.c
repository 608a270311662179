/* hooks/preload/cuda_runtime_real.c: what the CUDA runtime hooks ask of
 * the runtime itself: its real functions, the calling thread's device, the
 * runtime's version, the runtime error for a driver error, and the last
 * error cache mode answered without the runtime (cuda_runtime.h).
 *
 * Owns: the runtimes' real functions, one slot each per runtime, resolved
 * once; which runtime each calling object linked and each call site's
 * answer (cached, in mmap'd tables that grow); each runtime's version;
 * per thread, the last error cache mode answered without the runtime,
 * which cudaGetLastError / cudaPeekAtLastError (cuda_runtime.c) report as
 * the runtime reports its own.  Locks: none on the hot path (a call
 * site seen before: one hash probe, acquire loads); callers_lock when a
 * call site is new (never held while the loader is called).  A function
 * slot is written with the same value by whichever thread gets there
 * first.
 */
#define _GNU_SOURCE
#include "cuda_runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "meta.h"

/* ---- real functions ------------------------------------------------------------
 * Runtime 0 is the default: the next definition after ours (RTLD_NEXT),
 * else whatever loaded object has it.  Runtimes 1.. are libcudart objects
 * that callers' objects depend on, one per object (libcudart.so.12 and
 * libcudart.so.13 are two), each with its own slots.  Which runtime a
 * caller gets is found once per calling object (a walk of the loaded
 * objects) and kept by the object's address range, and each call site's
 * answer is kept by its return address; an object that does not depend on
 * a libcudart (the program itself, a tail call from elsewhere) gets the
 * default. */

#define MAX_RUNTIMES 8

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

/* The object holding an address: its segments' range, whether it is the
 * program itself (the first object listed) and whether it can make a
 * CUDA IPC export (cuda_ipc.c: read from its image while the loader
 * lists it). */
typedef struct object_range {
    uintptr_t addr, lo, hi;
    int index, found, is_program, imports_export;
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
        r->imports_export = tdm__cuda_ipc_imports_export(info);
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

/* ---- callers -------------------------------------------------------------------
 * PyTorch asks cudaGetLastError after every kernel launch, from every
 * extension and AOT-compiled library, so the answer for a caller must cost
 * the same however many objects call: one probe of a hash of call sites
 * (return address -> runtime; open addressing, grown by doubling into a
 * new mmap'd table that is then published, the old one left mapped for
 * readers still in it).  A call site not seen yet is looked up in the
 * calling objects' ranges (sorted, binary search, under callers_lock);
 * only an object not seen yet costs a walk of the loaded objects.  When
 * the system refuses memory for either table (or a table reaches its
 * limit), callers not remembered get the default runtime, with no walk:
 * overflow never brings back a walk per call.  Not covered: an object
 * unloaded and another loaded at its addresses keeps the first one's
 * runtime. */

#define SITES_FIRST ((size_t)1024)
#define SITES_MAX ((size_t)1 << 22)  /* call sites: 64 MiB of slots */
#define OBJECTS_FIRST ((size_t)256)
#define OBJECTS_MAX ((size_t)1 << 16) /* calling objects */

/* What a call site's slot (and a calling object's span) keeps: the
 * runtime's index, and whether the object (program or library) may export
 * its own allocations over CUDA IPC (cuda_ipc.c). */
#define SITE_RUNTIME_MASK 0xffff
#define SITE_EXPORTS_IPC 0x10000

typedef struct site_slot {
    _Atomic uintptr_t addr; /* 0: empty; set last */
    int runtime;            /* with SITE_EXPORTS_IPC */
} site_slot;
typedef struct site_table {
    size_t cap, count; /* count: under callers_lock */
    site_slot slot[];
} site_table;
typedef struct object_span {
    uintptr_t lo, hi;
    int runtime;
} object_span;

static pthread_mutex_t callers_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(site_table *) sites;
static object_span *objects_seen; /* sorted by lo; under callers_lock */
static size_t n_objects, objects_cap;
static _Atomic int callers_full; /* a table could not grow: the default */

static size_t site_home(uintptr_t addr, size_t cap)
{
    return (size_t)(((uint64_t)addr * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The runtime remembered for a call site; -1 when it is new. */
static inline int site_runtime(uintptr_t a)
{
    site_table *t = atomic_load_explicit(&sites, memory_order_acquire);
    if (t == NULL)
        return -1;
    for (size_t i = site_home(a, t->cap);; i = (i + 1) & (t->cap - 1)) {
        uintptr_t k = atomic_load_explicit(&t->slot[i].addr, memory_order_acquire);
        if (k == a)
            return t->slot[i].runtime;
        if (k == 0)
            return -1;
    }
}

static void site_place(site_table *t, uintptr_t a, int runtime)
{
    size_t i = site_home(a, t->cap);
    while (atomic_load_explicit(&t->slot[i].addr, memory_order_relaxed) != 0)
        i = (i + 1) & (t->cap - 1);
    t->slot[i].runtime = runtime;
    atomic_store_explicit(&t->slot[i].addr, a, memory_order_release);
    t->count++;
}

/* Remembers a call site (callers_lock held); 0 when it cannot. */
static int site_remember(uintptr_t a, int runtime)
{
    site_table *t = atomic_load_explicit(&sites, memory_order_relaxed);
    if (t != NULL && site_runtime(a) >= 0)
        return 1; /* another thread got there first */
    if (t == NULL || 2 * (t->count + 1) > t->cap) {
        size_t cap = t ? 2 * t->cap : SITES_FIRST;
        site_table *g = cap <= SITES_MAX
                            ? tdm__meta_map(sizeof *g + cap * sizeof g->slot[0])
                            : NULL;
        if (g == NULL)
            return 0;
        g->cap = cap;
        for (size_t i = 0; t != NULL && i < t->cap; i++) {
            uintptr_t k = atomic_load_explicit(&t->slot[i].addr, memory_order_relaxed);
            if (k != 0)
                site_place(g, k, t->slot[i].runtime);
        }
        /* The old table stays mapped: a reader may still be probing it. */
        atomic_store_explicit(&sites, g, memory_order_release);
        t = g;
    }
    site_place(t, a, runtime);
    return 1;
}

/* The index of the first object whose lo is above a (callers_lock held). */
static size_t object_after(uintptr_t a)
{
    size_t lo = 0, hi = n_objects;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (objects_seen[m].lo <= a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* The runtime of the object holding a, when seen (callers_lock held); -1. */
static int object_runtime(uintptr_t a)
{
    size_t i = object_after(a);
    return i > 0 && a < objects_seen[i - 1].hi ? objects_seen[i - 1].runtime : -1;
}

/* Remembers an object's range (callers_lock held); 0 when it cannot. */
static int object_remember(uintptr_t lo, uintptr_t hi, int runtime)
{
    if (object_runtime(lo) >= 0)
        return 1;
    if (n_objects == objects_cap) {
        size_t cap = objects_cap ? 2 * objects_cap : OBJECTS_FIRST;
        object_span *g = cap <= OBJECTS_MAX ? tdm__meta_map(cap * sizeof *g) : NULL;
        if (g == NULL)
            return 0;
        if (n_objects)
            memcpy(g, objects_seen, n_objects * sizeof *g);
        tdm__meta_unmap(objects_seen, objects_cap * sizeof *objects_seen);
        objects_seen = g;
        objects_cap = cap;
    }
    size_t i = object_after(lo);
    memmove(&objects_seen[i + 1], &objects_seen[i], (n_objects - i) * sizeof *objects_seen);
    objects_seen[i] = (object_span){lo, hi, runtime};
    n_objects++;
    return 1;
}

/* The object holding `caller` and its runtime, by a walk of the loaded
 * objects (no lock held: the loader's is taken inside, and a library
 * constructor running under it may call a hook).  0 when `caller` lies
 * in no object. */
static int walk_for(const void *caller, uintptr_t *lo, uintptr_t *hi, int *runtime)
{
    Dl_info info;
    object_range r = {.addr = (uintptr_t)caller};
    if (!dladdr(caller, &info))
        return 0;
    dl_iterate_phdr(find_range, &r);
    if (!r.found)
        return 0;
    *lo = r.lo;
    *hi = r.hi;
    *runtime = r.is_program || info.dli_fname == NULL ? 0 : runtime_of_object(info.dli_fname);
    if (r.imports_export || tdm__cuda_ipc_library(info.dli_fname))
        *runtime |= SITE_EXPORTS_IPC;
    return 1;
}

/* A fork while another thread holds callers_lock (a DataLoader forking
 * while a thread makes its first runtime call) must not leave the child's
 * copy taken: the forking thread holds it across fork. */
static void callers_prepare(void)
{
    pthread_mutex_lock(&callers_lock);
}
static void callers_release(void)
{
    pthread_mutex_unlock(&callers_lock);
}
static void callers_atfork(void)
{
    pthread_atfork(callers_prepare, callers_release, callers_release);
}

/* First call from a call site: its object's runtime, remembered. */
static __attribute__((noinline)) int runtime_slow(const void *caller)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    uintptr_t a = (uintptr_t)caller;
    if (caller == NULL || tdm__cuda_is_ours(caller) ||
        atomic_load_explicit(&callers_full, memory_order_relaxed))
        return 0;
    pthread_once(&once, callers_atfork);
    pthread_mutex_lock(&callers_lock);
    int rt = object_runtime(a);
    if (rt >= 0 && !site_remember(a, rt))
        atomic_store_explicit(&callers_full, 1, memory_order_relaxed);
    pthread_mutex_unlock(&callers_lock);
    if (rt >= 0)
        return rt;
    uintptr_t lo = 0, hi = 0;
    int in_object = walk_for(caller, &lo, &hi, &rt);
    if (!in_object)
        rt = 0; /* code in no object (generated at run time): the default */
    pthread_mutex_lock(&callers_lock);
    if ((in_object && !object_remember(lo, hi, rt)) || !site_remember(a, rt))
        atomic_store_explicit(&callers_full, 1, memory_order_relaxed);
    pthread_mutex_unlock(&callers_lock);
    return rt;
}

/* The call site's answer: its runtime, with SITE_EXPORTS_IPC. */
static inline int site_of(const void *caller)
{
    int rt = site_runtime((uintptr_t)caller);
    return rt >= 0 ? rt : runtime_slow(caller);
}

static inline int runtime_of(const void *caller)
{
    return site_of(caller) & SITE_RUNTIME_MASK;
}

int tdm__cuda_caller_exports_ipc(const void *caller)
{
    if (!(site_of(caller) & SITE_EXPORTS_IPC))
        return 0;
    tdm__cuda_ipc_note(caller);
    return 1;
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
