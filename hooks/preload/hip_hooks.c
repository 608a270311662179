/* hooks/preload/hip_hooks.c: the HIP interposers of libtidemark_preload.so.
 *
 * Owns: the exported hip* allocation entry points (hip.syms), the real
 * libamdhip64 functions behind them (resolved once, by their versioned
 * names hip_4.2 / hip_5.1, in whichever loaded libamdhip64 -- .so.5, .so.6,
 * .so.7 -- the process has, local scopes included), the set of devices
 * already described to the
 * snapshot, and in cache mode the HIP provider given to the allocator.
 *
 * libamdhip64 exports hipMalloc@@hip_4.2 and friends; our definitions are
 * unversioned, and glibc binds a versioned reference to an unversioned
 * definition found first, so programs linked against the real library
 * reach these.  Every hook is exactly one frame above the program's call
 * (helpers are always_inline), which is what TDM_HOOK_SKIP tells the
 * stack capture.
 *
 * What each call books:
 *   hipMalloc, hipMallocAsync   observe: alloc on the current device (the
 *                               Async form: on the stream's device, with
 *                               the stream, and its pool's reserve:
 *                               hip_pool.c); cache: served from
 *                               tidemark's caching allocator (not an Async
 *                               one on a capturing stream, or on a device
 *                               whose current pool the program set)
 *   hipExtMallocWithFlags, hipMallocManaged, hipMallocFromPoolAsync
 *                               observe in both modes (their flags and
 *                               pools mean memory the cache cannot give)
 *   hipHostMalloc, hipMallocHost, hipHostAlloc, hipExtHostAlloc
 *                               observe on the host (device -1)
 *   hipFree, hipFreeAsync, hipHostFree, hipFreeHost
 *                               the block back to the cache (hipFree after
 *                               the device's work, hipFreeAsync after the
 *                               stream's), or the free booked BEFORE the
 *                               vendor call
 *   hipMemMap / hipMemUnmap     segment_map / segment_unmap on the handle's
 *                               device; a further mapping of a handle, or
 *                               one of an imported handle: imported memory
 *   hipMemCreate / hipMemRelease  the handle remembered / forgotten; a
 *                               failed create is an oom event
 *   hipStreamBeginCapture, hipStreamBeginCaptureToGraph, hipStreamEndCapture
 *                               nothing; counted, so that cache mode
 *                               frees no segment and touches no event
 *                               while a graph is being captured
 * Pools, IPC and imported handles: hip_pool.c.
 * Errors go back unchanged; hipErrorOutOfMemory also books an `oom` event
 * with the device's free bytes (hipMemGetInfo).
 *
 * Lock: resolve_mu, on the slow path only, until the real functions are
 * found; they are then written once, before tdm__hip_real_ready.  The
 * described-device bits, the cache switch and the capture count are
 * atomics.
 */
#include "hip_hooks.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "provider_hip.h"

/* The provider's copies of the virtual-memory structures (it builds
 * without the HIP headers). */
_Static_assert(sizeof(hipMemAllocationProp) == sizeof(tdm__hip_mem_prop), "hipMemAllocationProp");
_Static_assert(offsetof(hipMemAllocationProp, location) == offsetof(tdm__hip_mem_prop, location) &&
                   offsetof(hipMemAllocationProp, type) == offsetof(tdm__hip_mem_prop, type),
               "hipMemAllocationProp layout");
_Static_assert(sizeof(hipMemAccessDesc) == sizeof(tdm__hip_access_desc) &&
                   offsetof(hipMemAccessDesc, flags) == offsetof(tdm__hip_access_desc, flags),
               "hipMemAccessDesc layout");
_Static_assert(sizeof(hipMemGenericAllocationHandle_t) == sizeof(tdm__hip_mem_handle),
               "hipMemGenericAllocationHandle_t width");
_Static_assert((int)hipMemAllocationTypePinned == (int)TDM__HIP_MEM_ALLOCATION_TYPE_PINNED &&
                   (int)hipMemLocationTypeDevice == (int)TDM__HIP_MEM_LOCATION_TYPE_DEVICE &&
                   (int)hipMemAccessFlagsProtReadWrite ==
                       (int)TDM__HIP_MEM_ACCESS_FLAGS_PROT_READWRITE &&
                   (int)hipMemAllocationGranularityMinimum ==
                       (int)TDM__HIP_MEM_ALLOC_GRANULARITY_MINIMUM,
               "virtual-memory constants");

TDM_HIP_HIDDEN struct tdm__hip_real_fns tdm__hip_real;
TDM_HIP_HIDDEN _Atomic int tdm__hip_real_ready;
#define real tdm__hip_real /* this file's name for it */

/* RTLD_NEXT finds libamdhip64 when it is in the global scope (linked, or
 * dlopen'ed RTLD_GLOBAL).  A copy dlopen'ed RTLD_LOCAL (a Python
 * extension's dependency: JAX, CuPy, ctypes.CDLL) still binds its callers
 * to us, but RTLD_NEXT cannot see it: then the loaded object is found by
 * walking the loaded objects, whatever its soname (libamdhip64.so.5 for
 * ROCm 5, .so.6 and .so.7 for ROCm 6 and 7, or the bare libamdhip64.so
 * PyTorch's wheels bundle). */
static void *lookup(const char *name, const char *version, void *local)
{
    if (local != NULL) {
        void *p = version ? dlvsym(local, name, version) : NULL;
        return p ? p : tdm__hook_real_dlsym(local, name);
    }
    return tdm__hook_real_versioned(name, version);
}

/* Whether p lies in this library (a lookup that found our own hook). */
static int is_ours(const void *p)
{
    Dl_info self, info;
    return dladdr((void *)is_ours, &self) && dladdr(p, &info) &&
           info.dli_fbase == self.dli_fbase;
}

/* The loaded objects' names, collected first and opened after, so that no
 * loader call is made while dl_iterate_phdr holds the loader's lock. */
typedef struct loaded {
    const char *name[512];
    int n;
    unsigned long long adds; /* objects ever loaded (glibc's count) */
} loaded;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    loaded *o = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        o->adds = info->dlpi_adds;
    if (info->dlpi_name && info->dlpi_name[0] && o->n < 512)
        o->name[o->n++] = info->dlpi_name;
    return 0;
}

static int is_amdhip64(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libamdhip64.so", 14) == 0;
}

/* A handle (a reference kept) on the loaded libamdhip64: an object named
 * libamdhip64.so*, else any object that gives a hipMalloc@hip_4.2 not
 * ours; NULL when none is loaded. */
static void *find_loaded(unsigned long long *adds)
{
    loaded *o = calloc(1, sizeof *o); /* 4 KiB, off the program's stack */
    if (o == NULL)
        return NULL;
    dl_iterate_phdr(collect, o);
    *adds = o->adds;
    void *found = NULL;
    for (int pass = 0; pass < 2 && found == NULL; pass++) {
        for (int i = 0; i < o->n && found == NULL; i++) {
            if ((pass == 0) != is_amdhip64(o->name[i]))
                continue;
            void *h = dlopen(o->name[i], RTLD_NOW | RTLD_NOLOAD);
            if (h == NULL)
                continue;
            void *p = dlvsym(h, "hipMalloc", "hip_4.2");
            if (p != NULL && !is_ours(p))
                found = h;
            else
                dlclose(h);
        }
    }
    free(o);
    return found;
}

/* Resolution is done once HIP is found.  Until then (a hook called
 * before any libamdhip64 is loaded, or in a process without one) a slow
 * call looks again only when an object was loaded since the last look. */
static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long looked_at_adds;
static int looked;

static int first_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the count is the same in every entry */
}

void tdm__hip_resolve_slow(void)
{
    pthread_mutex_lock(&resolve_mu);
    if (atomic_load_explicit(&tdm__hip_real_ready, memory_order_acquire)) {
        pthread_mutex_unlock(&resolve_mu);
        return;
    }
    void *local = NULL;
    void *next = tdm__hook_real_versioned("hipMalloc", "hip_4.2");
    if (next == NULL || is_ours(next)) {
        unsigned long long adds = 0;
        dl_iterate_phdr(first_adds, &adds);
        if (looked && adds == looked_at_adds && adds != 0) {
            pthread_mutex_unlock(&resolve_mu);
            return;
        }
        local = find_loaded(&adds);
        if (local == NULL) {
            looked = 1;
            looked_at_adds = adds;
            pthread_mutex_unlock(&resolve_mu);
            return;
        }
    }
#define REAL_LOOKUP(name, ver) real.name = (__typeof__(name) *)lookup(#name, ver, local);
    HIP_REAL_FUNCS(REAL_LOOKUP)
    HIP_STREAM_REAL_FUNCS(REAL_LOOKUP)
    HIP_SHARED_REAL_FUNCS(REAL_LOOKUP)
    HIP_OPTIONAL_REAL_FUNCS(REAL_LOOKUP)
#undef REAL_LOOKUP
    /* The handle (if any) is kept: it pins the library our pointers point
     * into, should the program dlclose its own. */
    atomic_store_explicit(&tdm__hip_real_ready, 1, memory_order_release);
    pthread_mutex_unlock(&resolve_mu);
}

/* ---- devices, streams, oom ----------------------------------------------- */

static _Atomic uint64_t described; /* bit d: device d described */

static __attribute__((noinline)) void describe(int device)
{
    char name[256] = "";
    size_t total = 0;
    if (real.hipDeviceGetName == NULL ||
        real.hipDeviceGetName(name, (int)sizeof name, device) != hipSuccess)
        name[0] = '\0';
    if (real.hipDeviceTotalMem == NULL || real.hipDeviceTotalMem(&total, device) != hipSuccess)
        total = 0;
    tdm__alloc_observe_device(device, TDM_VENDOR_HIP, name, total);
    atomic_fetch_or_explicit(&described, (uint64_t)1 << device, memory_order_release);
}

/* The thread's current device, described to the snapshot on first use. */
INLINE int current_device(void)
{
    int device = 0;
    if (real.hipGetDevice == NULL || real.hipGetDevice(&device) != hipSuccess)
        device = 0;
    if (device >= 0 && device < 64 &&
        !(atomic_load_explicit(&described, memory_order_acquire) & ((uint64_t)1 << device)))
        describe(device);
    return device;
}

int tdm__hip_current_device(void)
{
    return current_device();
}

void tdm__hip_describe_once(int device)
{
    if (device >= 0 && device < 64 &&
        !(atomic_load_explicit(&described, memory_order_acquire) & ((uint64_t)1 << device)))
        describe(device);
}

INLINE tdm_stream stream_of(hipStream_t s)
{
    return (tdm_stream)(uintptr_t)s;
}

/* The device of stream `s`, described on first use: "The allocation
 * comes from the memory pool associated with the stream's device"
 * (hipMallocAsync), which need not be the current one.  hipStreamGetDevice
 * where HIP has it, else hipGetStreamDeviceId (ROCm 5); the null stream
 * and hipStreamPerThread are the current device's. */
INLINE int stream_device(hipStream_t s)
{
    if (s == NULL || s == hipStreamPerThread)
        return current_device();
    hipDevice_t d = -1;
    if (real.hipStreamGetDevice == NULL || real.hipStreamGetDevice(s, &d) != hipSuccess)
        d = real.hipGetStreamDeviceId ? real.hipGetStreamDeviceId(s) : -1;
    if (d < 0)
        return current_device();
    tdm__hip_describe_once(d);
    return d;
}

static size_t free_bytes_now(void)
{
    size_t fr = 0, total = 0;
    if (real.hipMemGetInfo == NULL || real.hipMemGetInfo(&fr, &total) != hipSuccess)
        fr = 0;
    return fr;
}

/* Books what a vendor allocation call did: the allocation, or an `oom`
 * event when it ran out of memory.  Other errors book nothing. */
INLINE void book_alloc(hipError_t r, int device, void **ptr, size_t size, tdm_stream stream)
{
    if (r == hipSuccess && ptr != NULL)
        tdm__alloc_observe_alloc(device, *ptr, size, stream, TDM_HOOK_SKIP);
    else if (r == hipErrorOutOfMemory)
        tdm__alloc_observe_oom(device, size, device >= 0 ? free_bytes_now() : 0, stream,
                               TDM_HOOK_SKIP);
}

/* ---- cache mode ------------------------------------------------------------ */

static int captures_underway(void); /* graph captures, at the end */

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static _Atomic int cache_on; /* the allocator serves HIP device memory */

static void cache_setup(void)
{
    struct tdm_hip_fns fns = {0};
    /* Our table's int-returning types are the ABI of hipError_t. */
    fns.get_device_count = (int (*)(int *))(void *)real.hipGetDeviceCount;
    fns.get_device = (int (*)(int *))(void *)real.hipGetDevice;
    fns.set_device = (int (*)(int))(void *)real.hipSetDevice;
    fns.malloc = (int (*)(void **, size_t))(void *)real.hipMalloc;
    fns.free = (int (*)(void *))(void *)real.hipFree;
    fns.mem_get_info = (int (*)(size_t *, size_t *))(void *)real.hipMemGetInfo;
    fns.device_get_name = (int (*)(char *, int, int))(void *)real.hipDeviceGetName;
    fns.device_total_mem = (int (*)(size_t *, int))(void *)real.hipDeviceTotalMem;
    fns.event_create = (int (*)(tdm__hip_event *, unsigned))(void *)real.hipEventCreateWithFlags;
    fns.event_record = (int (*)(tdm__hip_event, tdm__hip_stream))(void *)real.hipEventRecord;
    fns.event_query = (int (*)(tdm__hip_event))(void *)real.hipEventQuery;
    fns.event_synchronize = (int (*)(tdm__hip_event))(void *)real.hipEventSynchronize;
    fns.event_destroy = (int (*)(tdm__hip_event))(void *)real.hipEventDestroy;
    fns.device_synchronize = (int (*)(void))(void *)real.hipDeviceSynchronize;
    /* hipStreamCaptureStatus is an int-sized enum. */
    fns.stream_is_capturing =
        (int (*)(tdm__hip_stream, int *))(void *)real.hipStreamIsCapturing;
    fns.captures_underway = captures_underway;
    fns.peek_last_error = (int (*)(void))(void *)real.hipPeekAtLastError;
    fns.get_last_error = (int (*)(void))(void *)real.hipGetLastError;
    /* Virtual memory (expandable segments): the un-hooked functions, so
     * that the cache's own mappings are not recorded as the program's. */
    fns.mem_address_reserve = (int (*)(void **, size_t, size_t, void *, unsigned long long))(
        void *)real.hipMemAddressReserve;
    fns.mem_address_free = (int (*)(void *, size_t))(void *)real.hipMemAddressFree;
    fns.mem_create = (int (*)(tdm__hip_mem_handle *, size_t, const tdm__hip_mem_prop *,
                              unsigned long long))(void *)real.hipMemCreate;
    fns.mem_release = (int (*)(tdm__hip_mem_handle))(void *)real.hipMemRelease;
    fns.mem_map = (int (*)(void *, size_t, size_t, tdm__hip_mem_handle, unsigned long long))(
        void *)real.hipMemMap;
    fns.mem_unmap = (int (*)(void *, size_t))(void *)real.hipMemUnmap;
    fns.mem_set_access = (int (*)(void *, size_t, const tdm__hip_access_desc *, size_t))(
        void *)real.hipMemSetAccess;
    fns.mem_get_allocation_granularity = (int (*)(size_t *, const tdm__hip_mem_prop *, int))(
        void *)real.hipMemGetAllocationGranularity;
    tdm_provider *p = NULL;
    if (tdm__provider_hip_create(&fns, &p) != TDM_OK)
        return; /* no device: every call passes through and fails as HIP says */
    if (tdm__alloc_use_provider(p) != TDM_OK) {
        p->destroy(p); /* the allocator already serves another device kind */
        return;
    }
    atomic_store_explicit(&cache_on, 1, memory_order_release);
}

/* Whether work on `s` is being captured into a graph: a stream-ordered
 * allocation there is a graph memory node, HIP's own to make.  HIP is
 * asked only while a capture is underway somewhere. */
INLINE int stream_capturing(hipStream_t s)
{
    if (!captures_underway())
        return 0;
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    return real.hipStreamIsCapturing == NULL ||
           real.hipStreamIsCapturing(s, &status) != hipSuccess ||
           status != hipStreamCaptureStatusNone;
}

/* Whether this call is served from the cache (cache mode, set up). */
INLINE int serve_from_cache(tdm__hook_mode mode)
{
    if (mode != TDM__HOOK_CACHE)
        return 0;
    pthread_once(&cache_once, cache_setup);
    return atomic_load_explicit(&cache_on, memory_order_acquire);
}

/* ---- the last error ------------------------------------------------------------
 * HIP keeps, per thread, the last error a call returned until
 * hipGetLastError reads and clears it (hipPeekAtLastError only reads).  A
 * call cache mode answers itself never reaches HIP, so its error is kept
 * here and reported the same way; HIP's own, when there is one, wins. */

static __thread hipError_t served_error;

static hipError_t served(hipError_t r)
{
    if (r != hipSuccess)
        served_error = r;
    return r;
}

TDM_HOOK_API hipError_t hipGetLastError(void)
{
    resolve();
    hipError_t r = CALL_REAL(hipGetLastError);
    hipError_t ours = served_error;
    served_error = hipSuccess;
    return r == hipSuccess ? ours : r;
}

TDM_HOOK_API hipError_t hipPeekAtLastError(void)
{
    resolve();
    hipError_t r = CALL_REAL(hipPeekAtLastError);
    return r == hipSuccess ? served_error : r;
}

/* A tidemark status as HIP says it. */
static hipError_t hip_error_of_status(tdm_status st)
{
    switch (st) {
    case TDM_OK: return hipSuccess;
    case TDM_OUT_OF_MEMORY:
    case TDM_HOST_OUT_OF_MEMORY: return hipErrorOutOfMemory;
    case TDM_INVALID_ARGUMENT: return hipErrorInvalidValue;
    case TDM_NO_SUCH_DEVICE: return hipErrorInvalidDevice;
    case TDM_VENDOR_ERROR: return (hipError_t)tdm__provider_last_vendor_error();
    default: return hipErrorUnknown;
    }
}

/* The error of a call the cache answered, kept for hipGetLastError. */
static hipError_t hip_error_of(tdm_status st)
{
    return served(hip_error_of_status(st));
}


/* ---- device allocations ------------------------------------------------------ */

TDM_HOOK_API hipError_t hipMalloc(void **ptr, size_t size)
{
    HOOK_PROLOGUE(hipMalloc, ptr, size);
    hipError_t r;
    int device = current_device();
    if (ptr != NULL && size > 0 && serve_from_cache(mode)) {
        r = hip_error_of(tdm__alloc_malloc(ptr, size, device, 0, TDM_HOOK_SKIP));
    } else {
        r = CALL_REAL(hipMalloc, ptr, size);
        book_alloc(r, device, ptr, size, 0);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream)
{
    HOOK_PROLOGUE(hipMallocAsync, dev_ptr, size, stream);
    hipError_t r;
    int device = stream_device(stream);
    if (dev_ptr != NULL && size > 0 && serve_from_cache(mode) && !stream_capturing(stream) &&
        !tdm__pool_program(&tdm__hip_pools, device)) {
        r = hip_error_of(
            tdm__alloc_malloc(dev_ptr, size, device, stream_of(stream), TDM_HOOK_SKIP));
    } else {
        r = CALL_REAL(hipMallocAsync, dev_ptr, size, stream);
        book_alloc(r, device, dev_ptr, size, stream_of(stream));
        if (r == hipSuccess) {
            tdm__pool_book(&tdm__hip_pools, tdm__pool_current(&tdm__hip_pools, device), device);
            if (stream_capturing(stream))
                tdm__alloc_observe_graph_capture(); /* a graph memory node */
        }
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size, hipMemPool_t mem_pool,
                                               hipStream_t stream)
{
    HOOK_PROLOGUE(hipMallocFromPoolAsync, dev_ptr, size, mem_pool, stream);
    int device = current_device();
    hipError_t r = CALL_REAL(hipMallocFromPoolAsync, dev_ptr, size, mem_pool, stream);
    if (r == hipSuccess && dev_ptr != NULL) { /* the pool may be another device's */
        device = tdm__hip_pointer_device(*dev_ptr, device);
        tdm__hip_describe_once(device);
    }
    book_alloc(r, device, dev_ptr, size, stream_of(stream));
    if (r == hipSuccess) {
        tdm__pool_book(&tdm__hip_pools, (void *)mem_pool, device);
        if (stream_capturing(stream))
            tdm__alloc_observe_graph_capture(); /* a graph memory node */
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags)
{
    HOOK_PROLOGUE(hipExtMallocWithFlags, ptr, sizeBytes, flags);
    int device = current_device();
    hipError_t r = CALL_REAL(hipExtMallocWithFlags, ptr, sizeBytes, flags);
    book_alloc(r, device, ptr, sizeBytes, 0);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
    HOOK_PROLOGUE(hipMallocManaged, dev_ptr, size, flags);
    int device = current_device();
    hipError_t r = CALL_REAL(hipMallocManaged, dev_ptr, size, flags);
    book_alloc(r, device, dev_ptr, size, 0);
    tdm__hook_leave();
    return r;
}

/* ---- pinned host memory ------------------------------------------------------- */

static _Atomic int host_described;

INLINE void describe_host(void)
{
    if (!atomic_load_explicit(&host_described, memory_order_acquire)) {
        tdm__alloc_observe_device(-1, TDM_VENDOR_HIP, "host (pinned)", 0);
        atomic_store_explicit(&host_described, 1, memory_order_release);
    }
}

TDM_HOOK_API hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    HOOK_PROLOGUE(hipHostMalloc, ptr, size, flags);
    describe_host();
    hipError_t r = CALL_REAL(hipHostMalloc, ptr, size, flags);
    book_alloc(r, -1, ptr, size, 0);
    tdm__hook_leave();
    return r;
}

/* HIPIFY's cudaHostAlloc, recorded as the CUDA hook records that. */
TDM_HOOK_API hipError_t hipHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    HOOK_PROLOGUE(hipHostAlloc, ptr, size, flags);
    describe_host();
    hipError_t r = CALL_REAL(hipHostAlloc, ptr, size, flags);
    book_alloc(r, -1, ptr, size, 0);
    tdm__hook_leave();
    return r;
}

/* ROCm 6's pinned host allocation (freed by hipHostFree). */
TDM_HOOK_API hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    HOOK_PROLOGUE(hipExtHostAlloc, ptr, size, flags);
    describe_host();
    hipError_t r = CALL_REAL(hipExtHostAlloc, ptr, size, flags);
    book_alloc(r, -1, ptr, size, 0);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMallocHost(void **ptr, size_t size)
{
    HOOK_PROLOGUE(hipMallocHost, ptr, size);
    describe_host();
    hipError_t r = CALL_REAL(hipMallocHost, ptr, size);
    book_alloc(r, -1, ptr, size, 0);
    tdm__hook_leave();
    return r;
}

/* ---- frees ------------------------------------------------------------------------ */

/* Cache mode: 1 / 0 / -1 as tdm__hook_cache_free (freed / not the
 * cache's / a bad pointer into the cache's memory).  `ordered`:
 * hipFreeAsync on `stream`, the block reused only after that stream's
 * work so far; else hipFree, which first waits for the device as HIP's
 * does (programs rely on it before reading results on the host). */
INLINE int cache_free(void *ptr, int ordered, tdm_stream stream)
{
    tdm_status st = ordered ? tdm__alloc_free_on_stream(ptr, stream, TDM_HOOK_SKIP)
                            : tdm__alloc_free_synchronized(ptr, TDM_HOOK_SKIP);
    if (st == TDM_OK)
        return 1;
    return tdm__alloc_owns(ptr) ? -1 : 0;
}

/* A device free: the block back to the cache when the cache made it;
 * else the free is booked first, then the vendor frees. */
#define DEVICE_FREE(name, ptr, ordered, stream, ...)                           \
    HOOK_PROLOGUE(name, __VA_ARGS__);                                          \
    hipError_t r;                                                              \
    int cached = (ptr) != NULL && serve_from_cache(mode)                       \
                     ? cache_free((ptr), (ordered), (stream)) : 0;             \
    if (cached > 0) {                                                          \
        r = hipSuccess;                                                        \
    } else if (cached < 0) {                                                   \
        r = served(hipErrorInvalidValue);                                      \
    } else {                                                                   \
        tdm__alloc_observe_free((ptr), (stream), TDM_HOOK_SKIP);               \
        r = CALL_REAL(name, __VA_ARGS__);                                      \
        tdm__pool_book_all(&tdm__hip_pools); /* a pool's block went back */   \
    }                                                                          \
    tdm__hook_leave();                                                         \
    return r

TDM_HOOK_API hipError_t hipFree(void *ptr)
{
    DEVICE_FREE(hipFree, ptr, 0, 0, ptr);
}

TDM_HOOK_API hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream)
{
    DEVICE_FREE(hipFreeAsync, dev_ptr, 1, stream_of(stream), dev_ptr, stream);
}

TDM_HOOK_API hipError_t hipHostFree(void *ptr)
{
    HOOK_PROLOGUE(hipHostFree, ptr);
    tdm__alloc_observe_free(ptr, 0, TDM_HOOK_SKIP);
    hipError_t r = CALL_REAL(hipHostFree, ptr);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipFreeHost(void *ptr)
{
    HOOK_PROLOGUE(hipFreeHost, ptr);
    tdm__alloc_observe_free(ptr, 0, TDM_HOOK_SKIP);
    hipError_t r = CALL_REAL(hipFreeHost, ptr);
    tdm__hook_leave();
    return r;
}

/* ---- virtual memory ------------------------------------------------------------------ */

TDM_HOOK_API hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                                     const hipMemAllocationProp *prop, unsigned long long flags)
{
    HOOK_PROLOGUE(hipMemCreate, handle, size, prop, flags);
    hipError_t r = CALL_REAL(hipMemCreate, handle, size, prop, flags);
    if (r == hipSuccess && handle != NULL && prop != NULL)
        tdm__vmm_created(&tdm__hip_vmm, (uint64_t)(uintptr_t)*handle,
                         prop->location.type == hipMemLocationTypeDevice ? prop->location.id
                                                                         : -1,
                         TDM_HIP_OWN);
    if (r == hipErrorOutOfMemory && prop != NULL) {
        int device = prop->location.id;
        size_t fr = 0;
        int prev = -1;
        /* hipMemGetInfo answers for the current device. */
        if (real.hipGetDevice && real.hipSetDevice && real.hipGetDevice(&prev) == hipSuccess &&
            prev != device && real.hipSetDevice(device) == hipSuccess) {
            fr = free_bytes_now();
            real.hipSetDevice(prev);
        } else {
            fr = free_bytes_now();
        }
        tdm__alloc_observe_oom(device, size, fr, 0, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemMap(void *ptr, size_t size, size_t offset,
                                  hipMemGenericAllocationHandle_t handle,
                                  unsigned long long flags)
{
    HOOK_PROLOGUE(hipMemMap, ptr, size, offset, handle, flags);
    hipError_t r = CALL_REAL(hipMemMap, ptr, size, offset, handle, flags);
    if (r == hipSuccess) {
        tdm__vmm_booking b =
            tdm__vmm_mapped(&tdm__hip_vmm, (uint64_t)(uintptr_t)handle, (uint64_t)(uintptr_t)ptr);
        if (b.kind == TDM_HIP_OWN) {
            tdm__hip_describe_once(b.device);
            tdm__alloc_observe_map(b.device, ptr, size, TDM_HOOK_SKIP);
        } else { /* imported, or a further mapping of memory counted once */
            tdm__alloc_observe_import(current_device(), ptr, size, b.device, b.kind,
                                      TDM_HOOK_SKIP);
        }
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemUnmap(void *ptr, size_t size)
{
    HOOK_PROLOGUE(hipMemUnmap, ptr, size);
    tdm__vmm_unmapped(&tdm__hip_vmm, (uint64_t)(uintptr_t)ptr);
    if (tdm__alloc_observe_unmap(ptr, size, TDM_HOOK_SKIP) != TDM_OK)
        tdm__alloc_observe_unimport(ptr);
    hipError_t r = CALL_REAL(hipMemUnmap, ptr, size);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle)
{
    HOOK_PROLOGUE(hipMemRelease, handle);
    hipError_t r = CALL_REAL(hipMemRelease, handle);
    if (r == hipSuccess)
        tdm__vmm_released(&tdm__hip_vmm, (uint64_t)(uintptr_t)handle);
    tdm__hook_leave();
    return r;
}

/* ---- graph captures -------------------------------------------------------------------
 * Counted from the begin/end calls, so that cache mode knows a capture is
 * underway on any stream of any thread (hipStreamIsCapturing asks about
 * one stream only): it then frees no segment and records, queries or
 * waits on no event (alloc/cache_stream.c). */

static _Atomic int captures;

static int captures_underway(void)
{
    return atomic_load_explicit(&captures, memory_order_acquire) > 0;
}

TDM_HOOK_API hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode)
{
    resolve();
    hipError_t r = CALL_REAL(hipStreamBeginCapture, stream, mode);
    if (r == hipSuccess)
        atomic_fetch_add_explicit(&captures, 1, memory_order_acq_rel);
    return r;
}

/* ROCm 6.1: a capture into a graph the program made, ended by
 * hipStreamEndCapture like the other. */
TDM_HOOK_API hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph,
                                                     const hipGraphNode_t *dependencies,
                                                     const void *dependencyData,
                                                     size_t numDependencies,
                                                     hipStreamCaptureMode mode)
{
    resolve();
    hipError_t r = CALL_REAL(hipStreamBeginCaptureToGraph, stream, graph, dependencies,
                             dependencyData, numDependencies, mode);
    if (r == hipSuccess)
        atomic_fetch_add_explicit(&captures, 1, memory_order_acq_rel);
    return r;
}

TDM_HOOK_API hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph)
{
    resolve();
    hipError_t r = CALL_REAL(hipStreamEndCapture, stream, graph);
    /* An invalidated capture is ended too; other errors (not capturing,
     * wrong thread) end nothing. */
    if (r != hipSuccess && r != hipErrorStreamCaptureInvalidated)
        return r;
    int n = atomic_load_explicit(&captures, memory_order_relaxed);
    while (n > 0 && !atomic_compare_exchange_weak_explicit(&captures, &n, n - 1,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed))
        ;
    return r;
}
