/* tests/fakes/cuda/fake_cudart.c: a test double of the CUDA runtime,
 * libcudart.so.13 (and, built as an archive, of libcudart_static.a).
 *
 * It reaches the driver exactly as the real runtime does: dlopen of
 * libcuda.so.1, dlsym of "cuGetProcAddress_v2", then cuGetProcAddress for
 * "cuGetProcAddress" itself and for every entry point it needs, by base
 * name + version, with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for
 * the _ptsz twins, into a table of function pointers.  So a tool that
 * intercepts the driver lookup sees this runtime's calls the way it would
 * see the real one's, shared or static, and the fake driver
 * (fake_cuda.c) does the bookkeeping.  Driver errors are mapped to runtime
 * errors as the real runtime maps them (CUDA_ERROR_OUT_OF_MEMORY ->
 * cudaErrorMemoryAllocation, CUDA_ERROR_NO_DEVICE -> cudaErrorNoDevice, no
 * libcuda.so.1 -> cudaErrorInsufficientDriver).
 *
 * Every definition is checked against the real cuda_runtime_api.h; the
 * shared library carries the real version node (fake_cudart.map).
 * Invariants: the driver table is written once, under pthread_once.
 * State per thread: current device, last error.  Counters are atomics.
 */
#define _GNU_SOURCE
#include "fake_cudart_internal.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "fake_cuda.h"

#undef cuGetProcAddress

static atomic_long g_calls[RT_COUNT];
static const char *const rt_names[RT_COUNT] = {
#define RT_NAME(name) #name,
    RT_FUNCS(RT_NAME)
#undef RT_NAME
};
static atomic_long g_live;

void fake_rt_count(int fn)
{
    atomic_fetch_add(&g_calls[fn], 1);
}

/* ---- the driver table -------------------------------------------------------- */

static struct {
    PFN_cuGetProcAddress_v12000 gpa;
    PFN_cuInit_v2000 init;
    PFN_cuDriverGetVersion_v2020 driver_version;
    PFN_cuDeviceGetCount_v2000 device_count;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain;
    PFN_cuCtxGetCurrent_v4000 get_current;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuMemGetInfo_v3020 mem_info;
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 free;
    PFN_cuMemAllocPitch_v3020 pitch;
    PFN_cuMemAllocManaged_v6000 managed;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuMemFreeHost_v2000 free_host;
    PFN_cuMemAllocAsync_v11020 alloc_async[2];        /* [ptsz] */
    PFN_cuMemFreeAsync_v11020 free_async[2];
    PFN_cuMemAllocFromPoolAsync_v11020 alloc_pool[2];
    PFN_cuDeviceGetDefaultMemPool_v11020 default_pool;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamDestroy_v4000 stream_destroy;
    PFN_cuStreamBeginCapture_v10010 begin_capture;
    PFN_cuStreamEndCapture_v10000 end_capture;
    PFN_cuStreamIsCapturing_v10000 is_capturing;
    PFN_cuCtxSynchronize_v2000 ctx_sync;
    PFN_cuIpcGetMemHandle_v4010 ipc_get;
    PFN_cuIpcOpenMemHandle_v11000 ipc_open;
    PFN_cuIpcCloseMemHandle_v4010 ipc_close;
} drv;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cudaError_t g_init_error;
static CUcontext g_primary[8];
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int t_device;
static __thread cudaError_t t_last;

static cudaError_t map_error(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return cudaErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: return cudaErrorStreamCaptureImplicit;
    default: return cudaErrorUnknown;
    }
}

/* One lookup through the driver's resolver, by base name and version. */
static void *get(const char *name, int version, int ptsz)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                            : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    if (drv.gpa(name, &fn, version, flags, &q) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    drv.gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    if (drv.gpa == NULL) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    /* Like the real runtime: ask the driver for its own resolver. */
    PFN_cuGetProcAddress_v12000 self = get("cuGetProcAddress", 12000, 0);
    if (self)
        drv.gpa = self;
    drv.init = get("cuInit", 2000, 0);
    drv.driver_version = get("cuDriverGetVersion", 2020, 0);
    drv.device_count = get("cuDeviceGetCount", 2000, 0);
    drv.retain = get("cuDevicePrimaryCtxRetain", 7000, 0);
    drv.get_current = get("cuCtxGetCurrent", 4000, 0);
    drv.set_current = get("cuCtxSetCurrent", 4000, 0);
    drv.mem_info = get("cuMemGetInfo", 3020, 0);
    drv.alloc = get("cuMemAlloc", 3020, 0);
    drv.free = get("cuMemFree", 3020, 0);
    drv.pitch = get("cuMemAllocPitch", 3020, 0);
    drv.managed = get("cuMemAllocManaged", 6000, 0);
    drv.host_alloc = get("cuMemHostAlloc", 2020, 0);
    drv.free_host = get("cuMemFreeHost", 2000, 0);
    for (int pt = 0; pt < 2; pt++) {
        drv.alloc_async[pt] = get("cuMemAllocAsync", 11020, pt);
        drv.free_async[pt] = get("cuMemFreeAsync", 11020, pt);
        drv.alloc_pool[pt] = get("cuMemAllocFromPoolAsync", 11020, pt);
    }
    drv.default_pool = get("cuDeviceGetDefaultMemPool", 11020, 0);
    drv.stream_create = get("cuStreamCreate", 2000, 0);
    drv.stream_destroy = get("cuStreamDestroy", 4000, 0);
    drv.begin_capture = get("cuStreamBeginCapture", 10010, 0);
    drv.end_capture = get("cuStreamEndCapture", 10000, 0);
    drv.is_capturing = get("cuStreamIsCapturing", 10000, 0);
    drv.ctx_sync = get("cuCtxSynchronize", 2000, 0);
    drv.ipc_get = get("cuIpcGetMemHandle", 4010, 0);
    drv.ipc_open = get("cuIpcOpenMemHandle", 11000, 0);
    drv.ipc_close = get("cuIpcCloseMemHandle", 4010, 0);
    if (drv.init == NULL || drv.alloc == NULL || drv.retain == NULL) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    g_init_error = map_error(drv.init(0));
}

cudaError_t fake_rt_result(cudaError_t e)
{
    if (e != cudaSuccess)
        t_last = e;
    return e;
}

cudaError_t fake_rt_ready(void)
{
    pthread_once(&g_once, load_driver);
    if (g_init_error != cudaSuccess)
        return fake_rt_result(g_init_error);
    /* Make the primary context of this thread's device current. */
    CUcontext cur = NULL;
    drv.get_current(&cur);
    pthread_mutex_lock(&g_ctx_lock);
    CUcontext want = g_primary[t_device];
    CUresult r = CUDA_SUCCESS;
    if (want == NULL) {
        r = drv.retain(&want, t_device);
        if (r == CUDA_SUCCESS)
            g_primary[t_device] = want;
    }
    pthread_mutex_unlock(&g_ctx_lock);
    if (r == CUDA_SUCCESS && cur != want)
        r = drv.set_current(want);
    return fake_rt_result(map_error(r));
}

#define READY()                                                                \
    do {                                                                       \
        cudaError_t e_ = fake_rt_ready();                                      \
        if (e_ != cudaSuccess)                                                 \
            return e_;                                                         \
    } while (0)

/* Books a successful allocation: the fake's own leak counter. */
static cudaError_t booked(CUresult r, int delta)
{
    if (r == CUDA_SUCCESS)
        atomic_fetch_add(&g_live, delta);
    return fake_rt_result(map_error(r));
}

/* ---- devices ------------------------------------------------------------------ */

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    fake_rt_count(RT_cudaGetDeviceCount);
    pthread_once(&g_once, load_driver);
    if (g_init_error != cudaSuccess) {
        *count = 0;
        return fake_rt_result(g_init_error);
    }
    return fake_rt_result(map_error(drv.device_count(count)));
}

cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    fake_rt_count(RT_cudaGetDevice);
    *device = t_device;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    fake_rt_count(RT_cudaSetDevice);
    int n = 0;
    pthread_once(&g_once, load_driver);
    if (g_init_error != cudaSuccess)
        return fake_rt_result(g_init_error);
    drv.device_count(&n);
    if (device < 0 || device >= n || device >= 8)
        return fake_rt_result(cudaErrorInvalidDevice);
    t_device = device;
    return fake_rt_ready();
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *v)
{
    fake_rt_count(RT_cudaRuntimeGetVersion);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int *v)
{
    fake_rt_count(RT_cudaDriverGetVersion);
    pthread_once(&g_once, load_driver);
    if (drv.driver_version == NULL) {
        *v = 0;
        return cudaSuccess;
    }
    return fake_rt_result(map_error(drv.driver_version(v)));
}

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    fake_rt_count(RT_cudaGetLastError);
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    fake_rt_count(RT_cudaPeekAtLastError);
    return t_last;
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorUnknown";
    }
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t e)
{
    return cudaGetErrorName(e);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    fake_rt_count(RT_cudaDeviceSynchronize);
    READY();
    return fake_rt_result(map_error(drv.ctx_sync ? drv.ctx_sync() : CUDA_SUCCESS));
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    fake_rt_count(RT_cudaMemGetInfo);
    READY();
    return fake_rt_result(map_error(drv.mem_info(free_bytes, total)));
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s)
{
    fake_rt_count(RT_cudaStreamCreate);
    READY();
    return fake_rt_result(map_error(drv.stream_create((CUstream *)s, 0)));
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s)
{
    fake_rt_count(RT_cudaStreamDestroy);
    READY();
    return fake_rt_result(map_error(drv.stream_destroy((CUstream)s)));
}

/* Graph captures: the driver's, the graph handle passed through. */
cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    fake_rt_count(RT_cudaStreamBeginCapture);
    READY();
    return fake_rt_result(map_error(drv.begin_capture((CUstream)s, (CUstreamCaptureMode)mode)));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    fake_rt_count(RT_cudaStreamEndCapture);
    READY();
    return fake_rt_result(map_error(drv.end_capture((CUstream)s, (CUgraph *)graph)));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    fake_rt_count(RT_cudaStreamIsCapturing);
    READY();
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cudaError_t r = map_error(drv.is_capturing((CUstream)s, &cs));
    if (r == cudaSuccess)
        *st = (enum cudaStreamCaptureStatus)cs;
    return fake_rt_result(r);
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    fake_rt_count(RT_cudaDeviceGetDefaultMemPool);
    READY();
    return fake_rt_result(map_error(drv.default_pool((CUmemoryPool *)pool, device)));
}

/* ---- memory ---------------------------------------------------------------------- */

cudaError_t CUDARTAPI cudaMalloc(void **p, size_t n)
{
    fake_rt_count(RT_cudaMalloc);
    READY();
    if (p == NULL)
        return fake_rt_result(cudaErrorInvalidValue);
    *p = NULL;
    if (n == 0)
        return cudaSuccess; /* as the runtime documents: NULL, success */
    CUdeviceptr d = 0;
    CUresult r = drv.alloc(&d, n);
    *p = (void *)(uintptr_t)d;
    return booked(r, 1);
}

cudaError_t CUDARTAPI cudaFree(void *p)
{
    fake_rt_count(RT_cudaFree);
    READY(); /* cudaFree(NULL) is how programs create the context */
    if (p == NULL)
        return cudaSuccess;
    return booked(drv.free((CUdeviceptr)(uintptr_t)p), -1);
}

cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
    fake_rt_count(RT_cudaMallocManaged);
    READY();
    CUdeviceptr d = 0;
    CUresult r = drv.managed(&d, n, flags);
    *p = (void *)(uintptr_t)d;
    return booked(r, 1);
}

cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    fake_rt_count(RT_cudaHostAlloc);
    READY();
    return booked(drv.host_alloc(p, n, flags), 1);
}

cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t n)
{
    fake_rt_count(RT_cudaMallocHost);
    READY();
    return booked(drv.host_alloc(p, n, 0), 1);
}

cudaError_t CUDARTAPI cudaFreeHost(void *p)
{
    fake_rt_count(RT_cudaFreeHost);
    READY();
    return booked(drv.free_host(p), -1);
}

cudaError_t CUDARTAPI cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    fake_rt_count(RT_cudaMallocPitch);
    READY();
    CUdeviceptr d = 0;
    CUresult r = drv.pitch(&d, pitch, width, height, 4);
    *p = (void *)(uintptr_t)d;
    return booked(r, 1);
}

cudaError_t fake_rt_malloc_async(void **p, size_t n, cudaStream_t s, int ptsz)
{
    READY();
    CUdeviceptr d = 0;
    CUresult r = drv.alloc_async[ptsz](&d, n, (CUstream)s);
    *p = (void *)(uintptr_t)d;
    return booked(r, 1);
}

cudaError_t fake_rt_free_async(void *p, cudaStream_t s, int ptsz)
{
    READY();
    return booked(drv.free_async[ptsz]((CUdeviceptr)(uintptr_t)p, (CUstream)s), -1);
}

cudaError_t fake_rt_malloc_from_pool(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s,
                                     int ptsz)
{
    READY();
    CUdeviceptr d = 0;
    CUresult r = drv.alloc_pool[ptsz](&d, n, (CUmemoryPool)pool, (CUstream)s);
    *p = (void *)(uintptr_t)d;
    return booked(r, 1);
}

cudaError_t CUDARTAPI cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    fake_rt_count(RT_cudaMallocAsync);
    return fake_rt_malloc_async(p, n, s, 0);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *p, cudaStream_t s)
{
    fake_rt_count(RT_cudaFreeAsync);
    return fake_rt_free_async(p, s, 0);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool,
                                              cudaStream_t s)
{
    fake_rt_count(RT_cudaMallocFromPoolAsync);
    return fake_rt_malloc_from_pool(p, n, pool, s, 0);
}

/* ---- memory shared with other processes ----------------------------------------------
 * cudaIpcGetMemHandle "Takes a pointer to the base of an existing device
 * memory allocation created with cudaMalloc and exports it for use in
 * another process"; cudaIpcOpenMemHandle "Maps memory exported from
 * another process with cudaIpcGetMemHandle into the current device
 * address space".  As the real runtime, both are the driver's
 * cuIpcGetMemHandle / cuIpcOpenMemHandle from the table, the handle
 * passed through as it is (both types are 64 opaque bytes): the driver's
 * handle names the allocation containing the pointer (fake_cuda_pool.c). */

_Static_assert(sizeof(CUipcMemHandle) == sizeof(cudaIpcMemHandle_t),
               "the runtime's handle is the driver's");

cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p)
{
    fake_rt_count(RT_cudaIpcGetMemHandle);
    READY();
    if (handle == NULL || drv.ipc_get == NULL)
        return fake_rt_result(cudaErrorInvalidValue);
    CUipcMemHandle h;
    CUresult r = drv.ipc_get(&h, (CUdeviceptr)(uintptr_t)p);
    if (r == CUDA_SUCCESS)
        memcpy(handle, &h, sizeof h);
    return fake_rt_result(map_error(r));
}

cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t handle,
                                           unsigned int flags)
{
    fake_rt_count(RT_cudaIpcOpenMemHandle);
    READY();
    if (p == NULL || drv.ipc_open == NULL)
        return fake_rt_result(cudaErrorInvalidValue);
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    CUdeviceptr d = 0;
    CUresult r = drv.ipc_open(&d, h, flags);
    *p = (void *)(uintptr_t)d;
    return fake_rt_result(map_error(r));
}

cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *p)
{
    fake_rt_count(RT_cudaIpcCloseMemHandle);
    READY();
    if (drv.ipc_close == NULL)
        return fake_rt_result(cudaErrorInvalidValue);
    return fake_rt_result(map_error(drv.ipc_close((CUdeviceptr)(uintptr_t)p)));
}

/* ---- driver entry points ------------------------------------------------------------- */

cudaError_t fake_rt_entry_point(const char *symbol, void **fn, int version,
                                unsigned long long flags,
                                enum cudaDriverEntryPointQueryResult *st, int ptsz)
{
    READY();
    /* cudaEnableDefault means "as this caller was compiled": the _ptsz
     * entry point is the one per-thread-default-stream code calls. */
    cuuint64_t cflags = flags == cudaEnableDefault
                            ? (ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                    : CU_GET_PROC_ADDRESS_LEGACY_STREAM)
                            : (cuuint64_t)flags;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = drv.gpa(symbol, fn, version, cflags, &q);
    if (st)
        *st = (enum cudaDriverEntryPointQueryResult)q;
    return fake_rt_result(r == CUDA_ERROR_NOT_FOUND ? cudaSuccess : map_error(r));
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                              unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *st)
{
    fake_rt_count(RT_cudaGetDriverEntryPoint);
    return fake_rt_entry_point(symbol, fn, CUDART_VERSION, flags, st, 0);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                       unsigned int version,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *st)
{
    fake_rt_count(RT_cudaGetDriverEntryPointByVersion);
    return fake_rt_entry_point(symbol, fn, (int)version, flags, st, 0);
}

/* ---- counters for tests ------------------------------------------------------------- */

long fake_cudart_calls(const char *name)
{
    for (int i = 0; i < RT_COUNT; i++)
        if (strcmp(rt_names[i], name) == 0)
            return atomic_load(&g_calls[i]);
    return -1;
}

long fake_cudart_live_allocations(void)
{
    return atomic_load(&g_live);
}
