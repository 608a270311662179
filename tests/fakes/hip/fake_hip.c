/* tests/fakes/hip/fake_hip.c: a test double of AMD's libamdhip64.so.5.
 *
 * Built as libamdhip64.so.5 against the real HIP headers (every function
 * has the header's exact prototype) with the real library's symbol
 * versions (fake_hip.map: hip_4.2, hip_4.3, hip_5.1), so a program linked against
 * the real libamdhip64 runs on it unchanged (LD_LIBRARY_PATH).  "Device"
 * memory is host memory; each device has a capacity, and allocations past
 * it fail with hipErrorOutOfMemory as a full GPU would.
 *
 * What tests read back (exported in the FAKE_TEST version node; look them
 * up with dlsym, an unmodified program does not link them):
 *   fake_hip_calls(name)          calls of one entry point so far
 *   fake_hip_live_allocations()   allocations (any kind) not yet freed
 *   fake_hip_used_bytes(device)   device bytes in use
 *   fake_hip_reset_calls()        zeroes the call counters
 *   fake_hip_stream_*             stream work that completes when told
 *                                 (fake_hip_stream.c)
 * Stream-ordered pools, IPC and shareable handles: fake_hip_pool.c.
 * Knobs (environment, read once):
 *   FAKE_HIP_DEVICES=n     devices (default 1; 0 behaves like a machine
 *                          without a GPU: hipErrorNoDevice / InvalidDevice)
 *   FAKE_HIP_CAPACITY=n    bytes per device (default 1 GiB)
 *   FAKE_HIP_FAIL=name=code[,name=code]  that entry point returns `code`
 *                          without doing anything (error injection)
 *   FAKE_HIP_NO_VMM=1      devices without virtual memory management:
 *                          hipMemGetAllocationGranularity answers
 *                          hipErrorNotSupported (fake_hip_vmm.c)
 *
 * Lock: one mutex around the allocation table, mappings and byte counts;
 * call counters are atomics.  The current device is per thread, as in HIP.
 */
#include "fake_hip_internal.h"
#include "fake_memory.h"

/* ---- call counters ------------------------------------------------------ */

static const char *const func_names[F_COUNT] = {
#define FAKE_NAME(n) #n,
    FAKE_FUNCS(FAKE_NAME)
#undef FAKE_NAME
};

static atomic_long calls[F_COUNT];
static long long fail_code[F_COUNT]; /* 0 = no injected failure */

/* ---- configuration -------------------------------------------------------- */

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;
static int n_devices = 1;
static size_t capacity = (size_t)1 << 30;
/* The live allocations (tests/fakes/core): the device's own memory counts
 * (the rest is counted elsewhere: host memory, a pool's reserve, another
 * allocation's memory). */
fake_memory fake_hip_memory = FAKE_MEMORY_INIT(1u << K_DEVICE | 1u << K_PHYS);
int fake_no_vmm;

static void read_conf(void)
{
    const char *s = getenv("FAKE_HIP_DEVICES");
    if (s && *s)
        n_devices = atoi(s) < 0 ? 0 : atoi(s) > MAX_DEVICES ? MAX_DEVICES : atoi(s);
    s = getenv("FAKE_HIP_CAPACITY");
    if (s && *s)
        capacity = (size_t)strtoull(s, NULL, 0);
    fake_hip_memory.capacity = capacity;
    s = getenv("FAKE_HIP_NO_VMM");
    fake_no_vmm = s && *s && atoi(s) != 0;
    fake_fail_codes(getenv("FAKE_HIP_FAIL"), func_names, F_COUNT, fail_code);
}

/* Counts the call; returns the injected error, or 0 to go on. */
int enter(int f)
{
    pthread_once(&conf_once, read_conf);
    atomic_fetch_add_explicit(&calls[f], 1, memory_order_relaxed);
    return (int)fail_code[f];
}

__thread int cur_device;
/* The last error an entry point returned in this thread, until
 * hipGetLastError reads it (hipPeekAtLastError only looks), as in HIP. */
static __thread hipError_t t_last;

hipError_t fake_last(hipError_t e)
{
    if (e != hipSuccess)
        t_last = e;
    return e;
}

hipError_t check_device(int device)
{
    if (n_devices == 0)
        return hipErrorNoDevice;
    return device >= 0 && device < n_devices ? hipSuccess : hipErrorInvalidDevice;
}

/* ---- allocations: the fakes' shared bookkeeping (tests/fakes/core) -------- */

/* Guards the reservations and mappings (fake_hip_vmm.c); the registry
 * has its own lock. */
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static hipError_t result_of(int r)
{
    return r == FAKE_MEM_OK ? hipSuccess : hipErrorOutOfMemory;
}

/* Books a new allocation; hipErrorOutOfMemory past the capacity. */
hipError_t track_in(void *p, size_t size, int device, int kind, void *pool)
{
    fake_mem a = {.key = (uintptr_t)p, .size = size, .device = device, .kind = kind,
                  .extra = pool};
    return result_of(fake_memory_track(&fake_hip_memory, &a));
}

hipError_t track(void *p, size_t size, int device, int kind)
{
    return track_in(p, size, device, kind, NULL);
}

hipError_t used_change(int device, long long bytes)
{
    return result_of(fake_memory_used_change(&fake_hip_memory, device, bytes));
}

int lookup(const void *p, int *kind, size_t *size, int *device)
{
    fake_mem a;
    if (!fake_memory_get(&fake_hip_memory, (uintptr_t)p, &a))
        return 0;
    *kind = a.kind;
    *size = a.size;
    *device = a.device;
    return 1;
}

/* Forgets an allocation of `kind` (its size to *size); 0 when there is
 * none. */
int untrack_in(void *p, int kind, size_t *size, void **pool)
{
    fake_mem a;
    if (!fake_memory_untrack(&fake_hip_memory, (uintptr_t)p, 1u << kind, &a))
        return 0;
    *size = a.size;
    if (pool)
        *pool = a.extra;
    return 1;
}

int untrack(void *p, int kind, size_t *size)
{
    return untrack_in(p, kind, size, NULL);
}

void *block_get(size_t bytes)
{
    return fake_block_get(bytes, 256);
}

void block_put(void *p, size_t bytes)
{
    fake_block_put(p, bytes, 256);
}

size_t rounded(size_t size)
{
    return (size + 255) & ~(size_t)255;
}

static hipError_t fake_alloc(void **ptr, size_t size, int device, int kind)
{
    if (!ptr)
        return hipErrorInvalidValue;
    *ptr = NULL;
    if (size == 0)
        return hipSuccess;
    if (kind == K_DEVICE && size > capacity)
        return hipErrorOutOfMemory;
    void *p = block_get(rounded(size));
    if (!p)
        return hipErrorOutOfMemory;
    hipError_t r = track(p, size, device, kind);
    if (r != hipSuccess) {
        block_put(p, rounded(size));
        return r;
    }
    *ptr = p;
    return hipSuccess;
}

static hipError_t fake_free(void *ptr, int kind)
{
    size_t size = 0;
    if (!ptr)
        return hipSuccess;
    if (!untrack(ptr, kind, &size))
        return hipErrorInvalidValue;
    block_put(ptr, rounded(size));
    return hipSuccess;
}

/* ---- device management ------------------------------------------------------ */

EXPORT hipError_t hipInit(unsigned int flags)
{
    int e = enter(F_hipInit);
    (void)flags;
    return fake_last(e ? (hipError_t)e : n_devices ? hipSuccess : hipErrorNoDevice);
}

EXPORT hipError_t hipGetDeviceCount(int *count)
{
    int e = enter(F_hipGetDeviceCount);
    if (e)
        return fake_last((hipError_t)e);
    if (!count)
        return fake_last(hipErrorInvalidValue);
    *count = n_devices;
    return fake_last(n_devices ? hipSuccess : hipErrorNoDevice);
}

EXPORT hipError_t hipGetDevice(int *deviceId)
{
    int e = enter(F_hipGetDevice);
    if (e)
        return fake_last((hipError_t)e);
    if (!deviceId)
        return fake_last(hipErrorInvalidValue);
    hipError_t r = check_device(cur_device);
    if (r == hipSuccess)
        *deviceId = cur_device;
    return fake_last(r);
}

EXPORT hipError_t hipSetDevice(int deviceId)
{
    int e = enter(F_hipSetDevice);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(deviceId);
    if (r == hipSuccess)
        cur_device = deviceId;
    return fake_last(r);
}

EXPORT hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device)
{
    int e = enter(F_hipDeviceGetName);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!name || len <= 0)
        return fake_last(hipErrorInvalidValue);
    snprintf(name, (size_t)len, "Fake AMD GPU %d", device);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device)
{
    int e = enter(F_hipDeviceTotalMem);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(device);
    if (r == hipSuccess && !bytes)
        r = hipErrorInvalidValue;
    if (r == hipSuccess)
        *bytes = capacity;
    return fake_last(r);
}

EXPORT hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total)
{
    int e = enter(F_hipMemGetInfo);
    if (e)
        return fake_last((hipError_t)e);
    hipError_t r = check_device(cur_device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!free_bytes || !total)
        return fake_last(hipErrorInvalidValue);
    *free_bytes = capacity - fake_memory_used(&fake_hip_memory, cur_device);
    *total = capacity;
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipGetLastError(void)
{
    int e = enter(F_hipGetLastError);
    if (e)
        return (hipError_t)e;
    hipError_t last = t_last;
    t_last = hipSuccess;
    return last;
}

EXPORT hipError_t hipPeekAtLastError(void)
{
    int e = enter(F_hipPeekAtLastError);
    if (e)
        return (hipError_t)e;
    return t_last;
}

EXPORT const char *hipGetErrorName(hipError_t hip_error)
{
    switch (hip_error) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    default: return "hipErrorUnknown";
    }
}

EXPORT const char *hipGetErrorString(hipError_t hipError)
{
    return hipGetErrorName(hipError);
}

/* ---- allocation ----------------------------------------------------------- */


EXPORT hipError_t hipMalloc(void **ptr, size_t size)
{
    ALLOC_PROLOGUE(F_hipMalloc);
    if ((r = fake_capture_check()) != hipSuccess)
        return fake_last(r);
    return fake_last(fake_alloc(ptr, size, cur_device, K_DEVICE));
}

EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags)
{
    ALLOC_PROLOGUE(F_hipExtMallocWithFlags);
    if (flags & ~(unsigned)(hipDeviceMallocFinegrained | hipMallocSignalMemory))
        return fake_last(hipErrorInvalidValue);
    return fake_last(fake_alloc(ptr, sizeBytes, cur_device, K_DEVICE));
}

EXPORT hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
    ALLOC_PROLOGUE(F_hipMallocManaged);
    (void)flags;
    return fake_last(fake_alloc(dev_ptr, size, cur_device, K_DEVICE));
}

EXPORT hipError_t hipFree(void *ptr)
{
    ALLOC_PROLOGUE(F_hipFree);
    if ((r = fake_capture_check()) != hipSuccess)
        return fake_last(r);
    /* HIP's documentation of hipFree (hip_runtime_api.h): "This API
     * performs an implicit hipDeviceSynchronize() call." */
    if (ptr != NULL)
        fake_device_idle();
    if (fake_pool_give(ptr))
        return fake_last(hipSuccess);
    return fake_last(fake_free(ptr, K_DEVICE));
}

EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    ALLOC_PROLOGUE(F_hipHostMalloc);
    (void)flags;
    return fake_last(fake_alloc(ptr, size, -1, K_HOST));
}

/* HIPIFY's cudaHostAlloc (deprecated in ROCm 5 for hipHostMalloc, still
 * exported); the same pinned host memory. */
EXPORT hipError_t hipHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    ALLOC_PROLOGUE(F_hipHostAlloc);
    (void)flags;
    return fake_last(fake_alloc(ptr, size, -1, K_HOST));
}

#if FAKE_HIP_MAJOR >= 6
/* ROCm 6: "Allocates device accessible page locked (pinned) host memory",
 * freed by hipHostFree like hipHostMalloc's. */
EXPORT hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    ALLOC_PROLOGUE(F_hipExtHostAlloc);
    (void)flags;
    return fake_last(fake_alloc(ptr, size, -1, K_HOST));
}
#endif

EXPORT hipError_t hipMallocHost(void **ptr, size_t size)
{
    ALLOC_PROLOGUE(F_hipMallocHost);
    return fake_last(fake_alloc(ptr, size, -1, K_HOST));
}

EXPORT hipError_t hipHostFree(void *ptr)
{
    ALLOC_PROLOGUE(F_hipHostFree);
    return fake_last(fake_free(ptr, K_HOST));
}

EXPORT hipError_t hipFreeHost(void *ptr)
{
    ALLOC_PROLOGUE(F_hipFreeHost);
    return fake_last(fake_free(ptr, K_HOST));
}

/* ---- what tests read back -------------------------------------------------- */

EXPORT long fake_hip_calls(const char *name)
{
    return fake_calls_of(func_names, calls, F_COUNT, name);
}

EXPORT long fake_hip_live_allocations(void)
{
    return fake_memory_live(&fake_hip_memory);
}

EXPORT size_t fake_hip_used_bytes(int device)
{
    return device < 0 || device >= MAX_DEVICES ? 0 : fake_memory_used(&fake_hip_memory, device);
}

EXPORT void fake_hip_reset_calls(void)
{
    for (int i = 0; i < F_COUNT; i++)
        atomic_store(&calls[i], 0);
}
