/* hooks/preload/cuda_common.c: what the CUDA wrappers ask of the driver
 * besides the call they wrap, and cache mode's provider.
 *
 * Owns: the driver functions tidemark calls but does not hook (resolved
 * once each from the loaded libcuda.so.1), the set of devices already
 * described to the allocator, the tracker of virtual-memory handles and
 * mappings (vmm_track.h), the per-thread default streams' ids, each
 * device's primary context (where cache mode's segments live), and whether
 * cache mode could start (the cuda provider over the real driver, given to
 * the allocator once; not under a framework that caches itself) and still
 * serves (it stands aside, once, where it cannot keep CUDA's semantics, or
 * when such a framework is loaded later; from then on it keeps no segment
 * idle).
 *
 * Invariants: nothing here records an event; everything runs inside a
 * wrapper (the recursion guard is held), so driver calls made here reach
 * the driver directly.  Locks: the tracker's own (vmm_track.h); the rest
 * are atomics (no lock is held
 * while the loader or the driver is called).
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "provider_cuda.h"

_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult is int-sized");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice is an int");
_Static_assert(sizeof(CUdeviceptr) == sizeof(tdm__cu_deviceptr), "CUdeviceptr width");
_Static_assert(sizeof(CUcontext) == sizeof(tdm__cu_context), "CUcontext is a pointer");
/* The provider's copies of the virtual-memory structures. */
_Static_assert(sizeof(CUmemAllocationProp) == sizeof(tdm__cu_mem_prop), "CUmemAllocationProp");
_Static_assert(offsetof(CUmemAllocationProp, location) == offsetof(tdm__cu_mem_prop, location),
               "CUmemAllocationProp.location");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) ==
                   offsetof(tdm__cu_mem_prop, compression_type),
               "CUmemAllocationProp.allocFlags");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(tdm__cu_access_desc), "CUmemAccessDesc");
_Static_assert(offsetof(CUmemAccessDesc, flags) == offsetof(tdm__cu_access_desc, flags),
               "CUmemAccessDesc.flags");
_Static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(tdm__cu_mem_handle),
               "CUmemGenericAllocationHandle width");
_Static_assert((int)CU_MEM_ALLOCATION_TYPE_PINNED == (int)TDM__CU_MEM_ALLOCATION_TYPE_PINNED &&
                   (int)CU_MEM_LOCATION_TYPE_DEVICE == (int)TDM__CU_MEM_LOCATION_TYPE_DEVICE &&
                   (int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE ==
                       (int)TDM__CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
                   (int)CU_MEM_ALLOC_GRANULARITY_MINIMUM ==
                       (int)TDM__CU_MEM_ALLOC_GRANULARITY_MINIMUM,
               "virtual-memory constants");

TDM_CUDA_HIDDEN void *tdm__cuda_lib(void); /* cuda_lookup.c */

/* ---- helper functions ------------------------------------------------------ */

#define HELPERS(X)                                                             \
    X(cuCtxGetDevice) X(cuMemGetInfo_v2) X(cuDeviceGet) X(cuDeviceGetName)     \
    X(cuDeviceTotalMem_v2) X(cuInit) X(cuDeviceGetCount)                       \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)                \
    X(cuCtxGetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)          \
    X(cuStreamIsCapturing) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) \
    X(cuEventSynchronize) X(cuEventDestroy_v2) X(cuCtxSynchronize)             \
    X(cuMemPoolGetAttribute) X(cuDeviceGetMemPool)                             \
    X(cuDeviceGetDefaultMemPool) X(cuMemGetAddressRange_v2) X(cuPointerGetAttribute) \
    X(cuMemGetAllocationPropertiesFromHandle) X(cuMemSetAccess)                  \
    X(cuMemGetAllocationGranularity) X(cuStreamGetCtx) X(cuStreamGetDevice)
/* From here on the provider can do without them (provider_cuda.h): older
 * drivers lack some. */
#define H_FIRST_OPTIONAL H_cuStreamIsCapturing

enum {
#define H_ENUM(name) H_##name,
    HELPERS(H_ENUM)
#undef H_ENUM
    H_COUNT
};
static const char *const helper_names[H_COUNT] = {
#define H_NAME(name) #name,
    HELPERS(H_NAME)
#undef H_NAME
};
static _Atomic(void *) helpers[H_COUNT];
static char helper_missing; /* marks a name the loaded driver lacks */

static void *helper(int i)
{
    void *p = atomic_load_explicit(&helpers[i], memory_order_acquire);
    if (p == NULL) {
        void *lib = tdm__cuda_lib();
        if (lib == NULL)
            return NULL; /* no driver yet: ask again next time */
        p = tdm__hook_real_dlsym(lib, helper_names[i]);
        atomic_store_explicit(&helpers[i], p ? p : (void *)&helper_missing,
                              memory_order_release);
    }
    return p == (void *)&helper_missing ? NULL : p;
}

void *tdm__cuda_helper(const char *name)
{
    for (int i = 0; i < H_COUNT; i++)
        if (strcmp(helper_names[i], name) == 0)
            return helper(i);
    return NULL;
}

int tdm__cuda_current_device(void)
{
    PFN_cuCtxGetDevice_v2000 f = (PFN_cuCtxGetDevice_v2000)helper(H_cuCtxGetDevice);
    CUdevice d = -1;
    if (f == NULL || f(&d) != CUDA_SUCCESS)
        return -1;
    return d;
}

/* Each device's primary context, asked once (a retain and its release:
 * called only while the cache's provider holds its own retain, so the
 * pair creates and destroys nothing); NULL when unknown. */
static _Atomic(void *) primary_ctx[64];

static CUcontext primary_of(int dev)
{
    if (dev < 0 || dev >= 64)
        return NULL;
    CUcontext c = atomic_load_explicit(&primary_ctx[dev], memory_order_acquire);
    if (c != NULL)
        return c;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain =
        (PFN_cuDevicePrimaryCtxRetain_v7000)helper(H_cuDevicePrimaryCtxRetain);
    PFN_cuDevicePrimaryCtxRelease_v11000 release =
        (PFN_cuDevicePrimaryCtxRelease_v11000)helper(H_cuDevicePrimaryCtxRelease_v2);
    if (retain == NULL || release == NULL || retain(&c, dev) != CUDA_SUCCESS)
        return NULL;
    release(dev);
    atomic_store_explicit(&primary_ctx[dev], (void *)c, memory_order_release);
    return c;
}

static int is_default_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The device of context `ctx` (cuCtxGetDevice answers for the current
 * one only: pushed and popped around it); -1 when unknown. */
static int device_of_ctx(CUcontext ctx)
{
    PFN_cuCtxPushCurrent_v4000 push = (PFN_cuCtxPushCurrent_v4000)helper(H_cuCtxPushCurrent_v2);
    PFN_cuCtxPopCurrent_v4000 pop = (PFN_cuCtxPopCurrent_v4000)helper(H_cuCtxPopCurrent_v2);
    if (ctx == NULL || push == NULL || pop == NULL || push(ctx) != CUDA_SUCCESS)
        return -1;
    int d = tdm__cuda_current_device();
    CUcontext popped;
    pop(&popped);
    return d;
}

int tdm__cuda_current_is_primary(int dev)
{
    PFN_cuCtxGetCurrent_v4000 cur = (PFN_cuCtxGetCurrent_v4000)helper(H_cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (cur == NULL || cur(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return 1; /* none current: the runtime makes its primary one current */
    return ctx == primary_of(dev);
}

int tdm__cuda_place(CUstream s, int ordered, int *primary)
{
    PFN_cuCtxGetCurrent_v4000 cur = (PFN_cuCtxGetCurrent_v4000)helper(H_cuCtxGetCurrent);
    CUcontext ctx = NULL;
    int dev = -1;
    if (ordered && !is_default_stream(s)) {
        /* "cuMemAllocAsync allocates from the current mempool of the
         * provided stream's device" */
        PFN_cuStreamGetCtx_v9020 get_ctx = (PFN_cuStreamGetCtx_v9020)helper(H_cuStreamGetCtx);
        PFN_cuStreamGetDevice_v12080 get_dev =
            (PFN_cuStreamGetDevice_v12080)helper(H_cuStreamGetDevice);
        CUdevice d = -1;
        if (get_ctx == NULL || get_ctx(s, &ctx) != CUDA_SUCCESS)
            ctx = NULL;
        if (get_dev != NULL && get_dev(s, &d) == CUDA_SUCCESS)
            dev = d;
        else
            dev = device_of_ctx(ctx);
    } else {
        if (cur == NULL || cur(&ctx) != CUDA_SUCCESS)
            ctx = NULL;
        dev = tdm__cuda_current_device();
    }
    if (primary)
        *primary = dev >= 0 && ctx != NULL && ctx == primary_of(dev);
    return dev;
}

size_t tdm__cuda_free_bytes(void)
{
    PFN_cuMemGetInfo_v3020 f = (PFN_cuMemGetInfo_v3020)helper(H_cuMemGetInfo_v2);
    size_t fr = 0, total = 0;
    if (f == NULL || f(&fr, &total) != CUDA_SUCCESS)
        return 0;
    return fr;
}

int tdm__cuda_capturing(tdm_stream stream)
{
    PFN_cuStreamIsCapturing_v10000 f =
        (PFN_cuStreamIsCapturing_v10000)helper(H_cuStreamIsCapturing);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (f == NULL)
        return 0; /* a driver without graphs */
    return f(tdm__cuda_vendor_stream(stream), &st) != CUDA_SUCCESS ||
           st != CU_STREAM_CAPTURE_STATUS_NONE;
}

__thread uint64_t tdm__cuda_ptds_key_t;

/* A thread's per-thread stream id, at its first use: numbers are never
 * reused, so a thread that exits leaves no id for a later one. */
uint64_t tdm__cuda_ptds_key_slow(void)
{
    static _Atomic uint32_t next;
    uint32_t n = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
    if (n == 0) /* 2^32 threads later: skip the id that means "not yet" */
        n = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
    tdm__cuda_ptds_key_t = (uint64_t)n << 32 | TDM__CUDA_PTDS_TAG;
    return tdm__cuda_ptds_key_t;
}

/* The provider's stream calls get recorded ids (cache markers, capture
 * queries); the driver gets its handles. */
static _Atomic(PFN_cuEventRecord_v2000) real_event_record;
static _Atomic(PFN_cuStreamIsCapturing_v10000) real_stream_is_capturing;

static int event_record_id(tdm__cu_event ev, tdm__cu_stream s)
{
    PFN_cuEventRecord_v2000 f = atomic_load_explicit(&real_event_record, memory_order_relaxed);
    return (int)f((CUevent)ev, tdm__cuda_vendor_stream((tdm_stream)(uintptr_t)s));
}

static int stream_is_capturing_id(tdm__cu_stream s, int *status)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    PFN_cuStreamIsCapturing_v10000 f =
        atomic_load_explicit(&real_stream_is_capturing, memory_order_relaxed);
    CUresult r = f(tdm__cuda_vendor_stream((tdm_stream)(uintptr_t)s), &st);
    *status = (int)st;
    return (int)r;
}

static _Atomic unsigned long long described; /* bit d: device d; bit 63: host */

void tdm__cuda_describe(int device)
{
    if (device < -1 || device > 62)
        return;
    unsigned long long bit = 1ull << (device < 0 ? 63 : device);
    if (atomic_load_explicit(&described, memory_order_relaxed) & bit)
        return;
    if (device < 0) {
        tdm__alloc_observe_device(-1, TDM_VENDOR_CUDA, "host (pinned)", 0);
    } else {
        PFN_cuDeviceGet_v2000 get = (PFN_cuDeviceGet_v2000)helper(H_cuDeviceGet);
        PFN_cuDeviceGetName_v2000 name = (PFN_cuDeviceGetName_v2000)helper(H_cuDeviceGetName);
        PFN_cuDeviceTotalMem_v3020 total =
            (PFN_cuDeviceTotalMem_v3020)helper(H_cuDeviceTotalMem_v2);
        CUdevice dev;
        char buf[64] = "";
        size_t bytes = 0;
        if (get == NULL || get(&dev, device) != CUDA_SUCCESS)
            return; /* not yet knowable; try at the next allocation */
        if (name == NULL || name(buf, (int)sizeof buf, dev) != CUDA_SUCCESS)
            buf[0] = '\0';
        buf[sizeof buf - 1] = '\0';
        if (total == NULL || total(&bytes, dev) != CUDA_SUCCESS)
            bytes = 0;
        tdm__alloc_observe_device(device, TDM_VENDOR_CUDA, buf, bytes);
    }
    atomic_fetch_or_explicit(&described, bit, memory_order_relaxed);
}

void tdm__cuda_say(const char *msg)
{
    fprintf(stderr, "tidemark: %s\n", msg);
}

CUresult tdm__cuda_status_result(tdm_status st)
{
    switch (st) {
    case TDM_OK: return CUDA_SUCCESS;
    case TDM_OUT_OF_MEMORY:
    case TDM_HOST_OUT_OF_MEMORY: return CUDA_ERROR_OUT_OF_MEMORY;
    case TDM_VENDOR_ERROR: return (CUresult)tdm__provider_last_vendor_error();
    case TDM_INVALID_ARGUMENT: return CUDA_ERROR_INVALID_VALUE;
    case TDM_NO_SUCH_DEVICE: return CUDA_ERROR_INVALID_DEVICE;
    default: return CUDA_ERROR_UNKNOWN;
    }
}

/* ---- cache mode ----------------------------------------------------------------- */

static _Atomic int cache_state = -1; /* -1 not tried, 0 unavailable, 1 ready */

/* The provider's table, from the real (un-hooked) driver functions. */
static int fill_fns(struct tdm_cuda_fns *f)
{
    void *h[H_COUNT];
    for (int i = 0; i < H_COUNT; i++)
        if ((h[i] = helper(i)) == NULL && i < H_FIRST_OPTIONAL)
            return 0;
    void *alloc = tdm__cuda_real(TDM__CV_cuMemAlloc_v2);
    void *release = tdm__cuda_real(TDM__CV_cuMemFree_v2);
    if (alloc == NULL || release == NULL)
        return 0;
    /* CUDA's types and the provider's are ABI-equal (asserted above). */
    f->init = (int (*)(unsigned int))h[H_cuInit];
    f->device_get_count = (int (*)(int *))h[H_cuDeviceGetCount];
    f->device_get = (int (*)(int *, int))h[H_cuDeviceGet];
    f->device_get_name = (int (*)(char *, int, int))h[H_cuDeviceGetName];
    f->device_total_mem = (int (*)(size_t *, int))h[H_cuDeviceTotalMem_v2];
    f->primary_ctx_retain = (int (*)(tdm__cu_context *, int))h[H_cuDevicePrimaryCtxRetain];
    f->primary_ctx_release = (int (*)(int))h[H_cuDevicePrimaryCtxRelease_v2];
    f->ctx_get_current = (int (*)(tdm__cu_context *))h[H_cuCtxGetCurrent];
    f->ctx_push = (int (*)(tdm__cu_context))h[H_cuCtxPushCurrent_v2];
    f->ctx_pop = (int (*)(tdm__cu_context *))h[H_cuCtxPopCurrent_v2];
    f->mem_alloc = (int (*)(tdm__cu_deviceptr *, size_t))alloc;
    f->mem_free = (int (*)(tdm__cu_deviceptr))release;
    f->mem_get_info = (int (*)(size_t *, size_t *))h[H_cuMemGetInfo_v2];
    f->event_create = (int (*)(tdm__cu_event *, unsigned int))h[H_cuEventCreate];
    atomic_store_explicit(&real_event_record, (PFN_cuEventRecord_v2000)h[H_cuEventRecord],
                          memory_order_relaxed);
    f->event_record = h[H_cuEventRecord] ? event_record_id : NULL;
    f->event_query = (int (*)(tdm__cu_event))h[H_cuEventQuery];
    f->event_synchronize = (int (*)(tdm__cu_event))h[H_cuEventSynchronize];
    f->event_destroy = (int (*)(tdm__cu_event))h[H_cuEventDestroy_v2];
    f->ctx_synchronize = (int (*)(void))h[H_cuCtxSynchronize];
    atomic_store_explicit(&real_stream_is_capturing,
                          (PFN_cuStreamIsCapturing_v10000)h[H_cuStreamIsCapturing],
                          memory_order_relaxed);
    f->stream_is_capturing = h[H_cuStreamIsCapturing] ? stream_is_capturing_id : NULL;
    f->captures_underway = tdm__cuda_captures_underway;
    /* Virtual memory: the un-hooked functions, so that the cache's own
     * mappings are not recorded as the program's. */
    f->mem_address_reserve =
        (int (*)(tdm__cu_deviceptr *, size_t, size_t, tdm__cu_deviceptr, unsigned long long))
            tdm__cuda_real(TDM__CV_cuMemAddressReserve);
    f->mem_address_free =
        (int (*)(tdm__cu_deviceptr, size_t))tdm__cuda_real(TDM__CV_cuMemAddressFree);
    f->mem_create = (int (*)(tdm__cu_mem_handle *, size_t, const tdm__cu_mem_prop *,
                             unsigned long long))tdm__cuda_real(TDM__CV_cuMemCreate);
    f->mem_release = (int (*)(tdm__cu_mem_handle))tdm__cuda_real(TDM__CV_cuMemRelease);
    f->mem_map = (int (*)(tdm__cu_deviceptr, size_t, size_t, tdm__cu_mem_handle,
                          unsigned long long))tdm__cuda_real(TDM__CV_cuMemMap);
    f->mem_unmap = (int (*)(tdm__cu_deviceptr, size_t))tdm__cuda_real(TDM__CV_cuMemUnmap);
    f->mem_set_access = (int (*)(tdm__cu_deviceptr, size_t, const tdm__cu_access_desc *,
                                 size_t))h[H_cuMemSetAccess];
    f->mem_get_allocation_granularity =
        (int (*)(size_t *, const tdm__cu_mem_prop *, int))h[H_cuMemGetAllocationGranularity];
    return 1;
}

/* A framework with a caching allocator of its own, by a library it loads
 * (its file name starts with the pattern).  Under one, cache mode would
 * cache the framework's cache: what its empty_cache gives back would stay
 * in tidemark's segments, invisible to cuMemGetInfo (which vLLM sizes
 * its KV cache from) and unavailable to what the cache never serves
 * (NCCL's cuMemCreate, expandable segments, pools). */
static const struct {
    const char *file, *name;
} frameworks[] = {
    {"libc10_cuda", "PyTorch (libc10_cuda)"},
    {"xla_extension", "JAX/XLA (xla_extension)"},
    {"libtensorflow_framework", "TensorFlow (libtensorflow_framework)"},
    {"cupy_backends", "CuPy"},
};

static int find_framework(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *path = info->dlpi_name ? info->dlpi_name : "";
    for (size_t i = 0; i < sizeof frameworks / sizeof frameworks[0]; i++) {
        const char *hit = strstr(path, frameworks[i].file);
        /* at the start of a file name, or (CuPy's modules) a folder */
        if (hit && (hit == path || hit[-1] == '/')) {
            *(const char **)out = frameworks[i].name;
            return 1;
        }
    }
    return 0;
}

/* The framework loaded, its caching allocator on; NULL when none is. */
static const char *loaded_framework(void)
{
    const char *framework = NULL;
    dl_iterate_phdr(find_framework, &framework);
    /* PyTorch with its caching off asks the driver for each tensor: then
     * tidemark's cache is the only one.  libc10_cuda's own cudaMalloc calls
     * still go to the driver, as every IPC exporter's do (it imports
     * cudaIpcGetMemHandle: tensor sharing); the cache serves the rest of
     * the program (an extension's buffers, a library's workspace). */
    const char *uncached = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    if (framework != NULL && strstr(framework, "PyTorch") && uncached && *uncached &&
        strcmp(uncached, "0") != 0)
        framework = NULL;
    return framework;
}

static int first_adds(struct dl_phdr_info *info, size_t size, void *out)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)out = info->dlpi_adds;
    return 1; /* the count is the same in every entry */
}

/* How many objects the dynamic linker had ever loaded when the loaded
 * objects were last searched for a framework (glibc's dlpi_adds). */
static _Atomic unsigned long long framework_looked_at;

static unsigned long long objects_ever_loaded(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(first_adds, &adds);
    return adds;
}

/* No lock: making the provider loads libraries and initializes the
 * driver, which take the loader's lock, under which a library constructor
 * may call a wrapper.  Threads racing here each make a provider; the
 * allocator keeps one (tdm__alloc_use_provider), the first answer stored
 * is the one that counts. */
static __attribute__((noinline)) int cache_setup(void)
{
    /* The count first: an object loaded during the search is looked at
     * again by the next allocation (tdm__cuda_cache_serves). */
    atomic_store_explicit(&framework_looked_at, objects_ever_loaded(), memory_order_relaxed);
    const char *framework = loaded_framework();
    if (framework != NULL) {
        int expected = -1;
        if (atomic_compare_exchange_strong(&cache_state, &expected, 0))
            fprintf(stderr, "tidemark: mode=cache: %s caches device memory itself; CUDA "
                            "allocations are observed instead, so that what it frees is "
                            "free for cuMemGetInfo\n", framework);
        return atomic_load_explicit(&cache_state, memory_order_acquire);
    }
    struct tdm_cuda_fns fns = {0};
    tdm_provider *p = NULL;
    tdm_status st = tdm__provider_cuda_create(fill_fns(&fns) ? &fns : NULL, &p);
    if (st == TDM_OK && tdm__alloc_use_provider(p) != TDM_OK) {
        p->destroy(p); /* the allocator already serves something */
        st = TDM_BAD_CONFIG;
    }
    int expected = -1, state = st == TDM_OK;
    if (atomic_compare_exchange_strong(&cache_state, &expected, state) && !state) {
        if (tdm__cuda_lib() == NULL)
            fprintf(stderr, "tidemark: mode=cache: no CUDA driver (libcuda.so.1); CUDA "
                            "allocations are observed instead\n");
        else
            fprintf(stderr,
                    "tidemark: mode=cache: the CUDA driver cannot serve device memory "
                    "here (%s, CUresult %d); CUDA allocations are observed instead\n",
                    tdm_status_name(st), tdm__provider_last_vendor_error());
    }
    return atomic_load_explicit(&cache_state, memory_order_acquire);
}

int tdm__cuda_cache_ready(void)
{
    int s = atomic_load_explicit(&cache_state, memory_order_acquire);
    return s >= 0 ? s : cache_setup();
}

static atomic_int cache_aside;
_Atomic unsigned long long tdm__cuda_reset_devices;

void tdm__cuda_note_reset(int device)
{
    if (device >= 0 && device < 64)
        atomic_fetch_or(&tdm__cuda_reset_devices, 1ull << device);
}

/* How often a thread looks at the dynamic linker's load count: the count
 * takes the loader's lock (dl_iterate_phdr), global, so not on every
 * allocation; a thread's coarse clock (no lock, no system call) gates it.
 * An import of a framework takes far longer than this. */
#define FRAMEWORK_LOOK_EVERY_NS (10u * 1000u * 1000u)

static uint64_t coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A framework loaded after the cache started serving (an import of torch
 * after a first allocation): its allocator would cache in the cache's
 * segments, so the cache stands aside.  Each thread looks at most every
 * FRAMEWORK_LOOK_EVERY_NS, and its first allocation at once; the loaded
 * objects are searched only when the dynamic linker loaded one since the
 * last search (the count: one dl_iterate_phdr stopped at its first entry). */
static void look_for_late_framework(void)
{
    static __thread uint64_t looked_ns;
    uint64_t now = coarse_now_ns();
    if (looked_ns != 0 && now - looked_ns < FRAMEWORK_LOOK_EVERY_NS)
        return;
    looked_ns = now ? now : 1;
    unsigned long long adds = objects_ever_loaded();
    unsigned long long seen = atomic_load_explicit(&framework_looked_at, memory_order_relaxed);
    if (adds == seen ||
        !atomic_compare_exchange_strong(&framework_looked_at, &seen, adds))
        return; /* nothing new, or another thread searches */
    const char *framework = loaded_framework();
    if (framework == NULL)
        return;
    char why[160];
    snprintf(why, sizeof why, "%s, loaded after the cache started serving, caches device "
                              "memory itself", framework);
    tdm__cuda_cache_stand_aside(why);
}

int tdm__cuda_cache_serves(void)
{
    if (atomic_load_explicit(&cache_aside, memory_order_relaxed) || !tdm__cuda_cache_ready())
        return 0;
    look_for_late_framework();
    return !atomic_load_explicit(&cache_aside, memory_order_relaxed);
}

/* Standing aside also gives the cache's idle segments back, and every
 * later free that returns a block to the cache gives its segment back
 * once it is idle (tdm__cuda_cache_freed): the cache serves nothing any
 * more, and what the program frees must be free for cuMemGetInfo. */
void tdm__cuda_cache_stand_aside(const char *why)
{
    if (atomic_exchange(&cache_aside, 1) == 0) {
        fprintf(stderr, "tidemark: mode=cache: %s; CUDA allocations are the driver's (observed) "
                        "from here on\n", why);
        tdm_empty_cache(-1);
    }
}

void tdm__cuda_cache_freed(void)
{
    if (atomic_load_explicit(&cache_aside, memory_order_relaxed))
        tdm_empty_cache(-1);
}

/* ---- virtual-memory handles and mappings ----------------------------------------
 * The tracker (vmm_track.c) with CUDA's one operation: the place of a
 * handle made before tidemark was loaded, as the driver says, else the
 * context's device. */

static int unseen_device(uint64_t h)
{
    PFN_cuMemGetAllocationPropertiesFromHandle_v10020 props =
        (PFN_cuMemGetAllocationPropertiesFromHandle_v10020)helper(
            H_cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    if (props != NULL && props(&prop, (CUmemGenericAllocationHandle)h) == CUDA_SUCCESS) {
        if (prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
            return prop.location.id;
        if (prop.location.type != CU_MEM_LOCATION_TYPE_INVALID)
            return -1; /* a host or host-NUMA location */
    }
    int d = tdm__cuda_current_device();
    return d < 0 ? 0 : d;
}

static const tdm__vmm_ops cuda_vmm_ops = {.unseen_device = unseen_device};
tdm__vmm_track tdm__cuda_vmm = TDM__VMM_TRACK_INIT(&cuda_vmm_ops);
