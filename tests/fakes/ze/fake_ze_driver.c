/* tests/fakes/ze/fake_ze_driver.c: a test double of a Level Zero driver
 * (what libze_intel_gpu.so.1 is), for the REAL loader libze_loader.so.1.
 *
 * The loader is pointed at it with ZE_ENABLE_ALT_DRIVERS=/abs/libfake_ze_driver.so
 * and then reaches it only through the exported zeGet*ProcAddrTable /
 * zetGet* / zesGet* getters; every table slot is typed by the real
 * ze_ddi.h, so a wrong prototype does not compile.  The loader 1.8.12
 * refuses a driver that lacks any of 46 getters: they are all exported,
 * the tables this fake leaves empty from fake_ze_empty_tables.c.  The library must not link the loader (the
 * loader's own getters would shadow ours in dlsym on our handle).
 *
 * "Device" memory is host memory; each device has a capacity past which
 * allocations fail with ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY.  Sysman's
 * zesMemoryGetState reports the free bytes.
 *
 * Every handle starts with pointers to the driver's own tables, and the
 * driver says so (the DDI handles extension, fake_ze_ddi_handles.c), as
 * Intel's GPU driver does; a newer loader may then call through those.
 *
 * Tests read back (dlsym on this library, or RTLD_DEFAULT):
 *   fake_ze_calls(name)          calls of one entry ("zeMemAllocDevice")
 *   fake_ze_live_allocations()   allocations and physical memory not freed
 *   fake_ze_used_bytes(device)   device bytes in use
 *   fake_ze_device_use(ptr), fake_ze_device_finish(), fake_ze_in_use(ptr, n),
 *   fake_ze_free_violations()    the device's use of memory and the free
 *                                policies (see "the device's use of memory")
 * Knobs (environment, read once):
 *   FAKE_ZE_DEVICES=n    devices (default 1, at most 8)
 *   FAKE_ZE_CAPACITY=n   bytes per device (default 1 GiB)
 *   FAKE_ZE_FAIL=name=code[,name=code]  that entry returns `code`
 *   FAKE_ZE_DDI_HANDLES=0  the extension is not offered
 *   FAKE_ZE_NO_VMM=1     no virtual memory support: zeVirtualMemQueryPageSize
 *                        answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
 * Virtual and physical memory: fake_ze_vmm.c.
 *
 * Lock: one mutex around the allocation table and byte counts; counters
 * are atomics.
 */
#define _GNU_SOURCE
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_api.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_ze.h"
#include "fake_ze_internal.h"
#include "fake_memory.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8

/* The opaque handle types, given a body here; each starts with the head
 * of the DDI handles extension (fake_ze_ddi_handles.c). */
struct _ze_driver_handle_t {
    fake_ze_handle_head head;
    int tag;
};
struct _ze_device_handle_t {
    fake_ze_handle_head head;
    int index;
};
struct _ze_context_handle_t {
    fake_ze_handle_head head;
    int tag;
};
struct _zes_mem_handle_t {
    int device;
};
/* A command queue, or a command list (immediate or not): what a command
 * in flight runs on (the device's use of memory, below). */
struct _ze_command_queue_handle_t {
    fake_ze_handle_head head;
    ze_context_handle_t ctx;
};
struct _ze_command_list_handle_t {
    fake_ze_handle_head head;
    ze_context_handle_t ctx;
    int immediate;
};

static struct _ze_driver_handle_t the_driver = {.tag = 7};
static struct _ze_device_handle_t devices[MAX_DEVICES];
static struct _zes_mem_handle_t mem_modules[MAX_DEVICES];

/* ---- counters and knobs ------------------------------------------------ */

static const char *const func_names[F_COUNT] = {
#define FAKE_NAME(n) #n,
    FAKE_FUNCS(FAKE_NAME)
#undef FAKE_NAME
};
static atomic_long calls[F_COUNT];
static long long fail_code[F_COUNT]; /* 0 = no injected failure */

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;
static int n_devices = 1;
static size_t capacity = (size_t)1 << 30;
/* The live allocations (tests/fakes/core): every kind but host memory
 * counts on its device; shared memory made with no device (device -1)
 * counts nowhere. */
static fake_memory memory = FAKE_MEMORY_INIT(1u << K_DEVICE | 1u << K_SHARED | 1u << K_PHYS);
int fake_ze_no_vmm;

static void read_conf(void)
{
    const char *s = getenv("FAKE_ZE_DEVICES");
    if (s && *s) {
        n_devices = atoi(s);
        n_devices = n_devices < 1 ? 1 : n_devices > MAX_DEVICES ? MAX_DEVICES : n_devices;
    }
    s = getenv("FAKE_ZE_CAPACITY");
    if (s && *s)
        capacity = (size_t)strtoull(s, NULL, 0);
    memory.capacity = capacity;
    for (int i = 0; i < MAX_DEVICES; i++) {
        devices[i].index = i;
        mem_modules[i].device = i;
    }
    s = getenv("FAKE_ZE_NO_VMM");
    fake_ze_no_vmm = s && *s && atoi(s) != 0;
    fake_fail_codes(getenv("FAKE_ZE_FAIL"), func_names, F_COUNT, fail_code);
}

/* The heads of the handles made once (not in read_conf: filling the
 * tables they point to calls the getters, which read the knobs). */
static pthread_once_t heads_once = PTHREAD_ONCE_INIT;

static void set_heads(void)
{
    the_driver.head = fake_ze_head();
    for (int i = 0; i < MAX_DEVICES; i++)
        devices[i].head = the_driver.head;
}

ze_result_t fake_ze_enter(int f)
{
    pthread_once(&conf_once, read_conf);
    atomic_fetch_add_explicit(&calls[f], 1, memory_order_relaxed);
    return (ze_result_t)fail_code[f];
}

int fake_ze_device_index(ze_device_handle_t d)
{
    if (d < devices || d >= devices + n_devices)
        return -1;
    return d->index;
}

/* ---- allocations: the fakes' shared bookkeeping (tests/fakes/core) -------- */

/* What the registry knows of an allocation. */
typedef fake_mem entry;
#define ENTRY_PTR(e) ((void *)(e).key)

static ze_result_t track(void *p, size_t size, int device, int kind, size_t alignment)
{
    fake_mem a = {.key = (uintptr_t)p, .size = size, .alignment = alignment, .device = device,
                  .kind = kind};
    int r = fake_memory_track(&memory, &a);
    return r == FAKE_MEM_OK               ? ZE_RESULT_SUCCESS
           : r == FAKE_MEM_OVER_CAPACITY  ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY
                                          : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

/* Forgets `p` if it is an allocation of one of the kinds in `mask`
 * (1 << kind); its entry goes to *out.  0 when there is none. */
static int untrack(const void *p, unsigned mask, entry *out)
{
    return fake_memory_untrack(&memory, (uintptr_t)p, mask, out);
}

ze_result_t fake_ze_track_phys(void *h, size_t size, int device)
{
    return track(h, size, device, K_PHYS, 0);
}

int fake_ze_untrack_phys(void *h)
{
    return untrack(h, 1u << K_PHYS, NULL);
}

/* The allocation holding address p (any kind but physical); 0 if none. */
static int lookup(const void *p, entry *out)
{
    return fake_memory_containing(&memory, (uintptr_t)p, 1u << K_PHYS, out);
}

static ze_result_t fake_alloc(size_t size, size_t alignment, int device, int kind, void **pptr)
{
    if (!pptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0)
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (alignment & (alignment - 1))
        return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (kind != K_HOST && device >= 0 && size > capacity)
        return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    if (alignment < 64)
        alignment = 64;
    size_t bytes = (size + alignment - 1) & ~(alignment - 1);
    void *p = fake_block_get(bytes, alignment);
    if (!p)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    ze_result_t r = track(p, size, device, kind, alignment);
    if (r != ZE_RESULT_SUCCESS) {
        fake_block_put(p, bytes, alignment);
        return r;
    }
    *pptr = p;
    return ZE_RESULT_SUCCESS;
}

/* ---- global, driver, device, context ------------------------------------- */

static ze_result_t ZE_APICALL f_zeInit(ze_init_flags_t flags)
{
    ENTER(F_zeInit);
    (void)flags;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers)
{
    ENTER(F_zeDriverGet);
    pthread_once(&heads_once, set_heads);
    if (!pCount)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*pCount > 0 && phDrivers)
        phDrivers[0] = &the_driver;
    *pCount = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeDeviceGet(ze_driver_handle_t h, uint32_t *pCount,
                                            ze_device_handle_t *phDevices)
{
    ENTER(F_zeDeviceGet);
    pthread_once(&heads_once, set_heads);
    if (h != &the_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!pCount)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*pCount == 0 || !phDevices) {
        *pCount = (uint32_t)n_devices;
        return ZE_RESULT_SUCCESS;
    }
    uint32_t n = *pCount < (uint32_t)n_devices ? *pCount : (uint32_t)n_devices;
    for (uint32_t i = 0; i < n; i++)
        phDevices[i] = &devices[i];
    *pCount = n;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeDeviceGetSubDevices(ze_device_handle_t h, uint32_t *pCount,
                                                      ze_device_handle_t *ph)
{
    (void)h, (void)ph;
    *pCount = 0;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeDeviceGetProperties(ze_device_handle_t h,
                                                      ze_device_properties_t *p)
{
    ENTER(F_zeDeviceGetProperties);
    int d = fake_ze_device_index(h);
    if (d < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->deviceId = 0x7d30 + (uint32_t)d;
    p->maxMemAllocSize = capacity;
    snprintf(p->name, sizeof p->name, "Fake Level Zero GPU %d", d);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeDeviceGetMemoryProperties(ze_device_handle_t h, uint32_t *pCount,
                                                            ze_device_memory_properties_t *props)
{
    ENTER(F_zeDeviceGetMemoryProperties);
    if (fake_ze_device_index(h) < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (*pCount > 0 && props) {
        props[0].flags = 0;
        props[0].maxClockRate = 1000;
        props[0].maxBusWidth = 256;
        props[0].totalSize = capacity;
        snprintf(props[0].name, sizeof props[0].name, "HBM");
    }
    *pCount = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeContextCreate(ze_driver_handle_t h, const ze_context_desc_t *desc,
                                                ze_context_handle_t *phContext)
{
    ENTER(F_zeContextCreate);
    if (h != &the_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !phContext)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *phContext = calloc(1, sizeof **phContext);
    if (!*phContext)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    (*phContext)->head = fake_ze_head();
    (*phContext)->tag = 0xc7;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeContextDestroy(ze_context_handle_t h)
{
    ENTER(F_zeContextDestroy);
    if (!h)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    free(h);
    return ZE_RESULT_SUCCESS;
}

/* ---- memory -------------------------------------------------------------- */

static ze_result_t ZE_APICALL f_zeMemAllocDevice(ze_context_handle_t c,
                                                 const ze_device_mem_alloc_desc_t *dd, size_t size,
                                                 size_t alignment, ze_device_handle_t dev,
                                                 void **pptr)
{
    ENTER(F_zeMemAllocDevice);
    int d = fake_ze_device_index(dev);
    if (!c || d < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!dd)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return fake_alloc(size, alignment, d, K_DEVICE, pptr);
}

static ze_result_t ZE_APICALL f_zeMemAllocHost(ze_context_handle_t c,
                                               const ze_host_mem_alloc_desc_t *hd, size_t size,
                                               size_t alignment, void **pptr)
{
    ENTER(F_zeMemAllocHost);
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!hd)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    return fake_alloc(size, alignment, -1, K_HOST, pptr);
}

static ze_result_t ZE_APICALL f_zeMemAllocShared(ze_context_handle_t c,
                                                 const ze_device_mem_alloc_desc_t *dd,
                                                 const ze_host_mem_alloc_desc_t *hd, size_t size,
                                                 size_t alignment, ze_device_handle_t dev,
                                                 void **pptr)
{
    ENTER(F_zeMemAllocShared);
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!dd || !hd)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    int d = dev ? fake_ze_device_index(dev) : -1;
    if (dev && d < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return fake_alloc(size, alignment, d, K_SHARED, pptr);
}

static ze_result_t mem_free(ze_context_handle_t c, void *ptr)
{
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    entry e;
    if (!untrack(ptr, 1u << K_DEVICE | 1u << K_HOST | 1u << K_SHARED, &e))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    fake_block_put(ptr, (e.size + e.alignment - 1) & ~(e.alignment - 1), e.alignment);
    return ZE_RESULT_SUCCESS;
}

/* ---- the device's use of memory, and the free policies ---------------------
 * The fake runs no commands; a test says that a command in flight on a
 * command queue (or immediate command list) uses an allocation
 * (fake_ze_queue_use; fake_ze_device_use: on a queue no handle names, one
 * the program made where tidemark could not see it) and when every
 * command has completed (fake_ze_device_finish).  zeCommandQueueSynchronize
 * "Synchronizes a command queue by waiting on the host", its timeout
 * "if zero, then immediately returns the status of the command queue; if
 * UINT64_MAX, then function will not return until complete or device is
 * lost" (ZE_RESULT_NOT_READY: "synchronization primitive not signaled"):
 * with 0 it answers NOT_READY while a command of the queue uses memory,
 * with any other timeout the queue's commands complete (the fake's finish
 * within any wait) and so do the deferred frees they held.  The frees
 * follow the specification's words (ze_api.h, Level Zero 1.4):
 *   zeMemFree, and zeMemFreeExt with no policy: "The application must
 *     ensure the device is not currently referencing the memory before it
 *     is freed" -- freeing memory in use is the program's error: counted
 *     (fake_ze_free_violations), then freed;
 *   ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE: "blocks until all
 *     commands using the memory are complete before freeing" -- the
 *     commands using it complete (the wait), then it is freed;
 *   ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE: "schedules the memory
 *     to be freed but does not free immediately" -- memory in use is freed
 *     when the commands using it complete (its queue synchronized, or
 *     fake_ze_device_finish), not before, so no allocation gets it
 *     meanwhile;
 *   a policy past the two flags: ZE_RESULT_ERROR_INVALID_ENUMERATION
 *     ("0x3 < pMemFreeDesc->freePolicy").
 * Under `mu`. */

#define USE_SLOTS 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const char *lo, *hi; /* an allocation a command in flight uses */
    const void *queue;   /* what it runs on; NULL: a queue no handle names */
} in_use[USE_SLOTS];
static int n_in_use;
static struct {
    ze_context_handle_t c;
    void *ptr;
} deferred[USE_SLOTS];
static int n_deferred;
static long free_violations;

/* Whether [p, p + n) overlaps memory a command in flight uses; mu held. */
static int used_by_device(const void *p, size_t n)
{
    const char *lo = p, *hi = (const char *)p + (n ? n : 1);
    for (int i = 0; i < n_in_use; i++)
        if (lo < in_use[i].hi && in_use[i].lo < hi)
            return 1;
    return 0;
}

/* The size of the allocation at exactly p (0: none). */
static size_t size_at(const void *p)
{
    fake_mem a;
    return fake_memory_get(&memory, (uintptr_t)p, &a) ? a.size : 0;
}

/* A command in flight on `queue` uses [lo, hi). */
static void note_use(const void *queue, const char *lo, const char *hi)
{
    pthread_mutex_lock(&mu);
    if (n_in_use < USE_SLOTS) {
        in_use[n_in_use].lo = lo;
        in_use[n_in_use].hi = hi;
        in_use[n_in_use].queue = queue;
        n_in_use++;
    }
    pthread_mutex_unlock(&mu);
}

EXPORT void fake_ze_queue_use(void *queue, const void *ptr, size_t size)
{
    note_use(queue, ptr, (const char *)ptr + size);
}

EXPORT void fake_ze_device_use(const void *ptr)
{
    entry e;
    if (!lookup(ptr, &e))
        return;
    const char *lo = ENTRY_PTR(e);
    note_use(NULL, lo, lo + e.size);
}

/* Whether a command of `queue` is in flight; mu held. */
static int queue_busy(const void *queue)
{
    for (int i = 0; i < n_in_use; i++)
        if (in_use[i].queue == queue)
            return 1;
    return 0;
}

/* The commands of `queue` complete, and with them the deferred frees of
 * memory no command uses any more. */
static void queue_complete(const void *queue)
{
    struct {
        ze_context_handle_t c;
        void *ptr;
    } due[USE_SLOTS];
    int n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_in_use;)
        if (in_use[i].queue == queue)
            in_use[i] = in_use[--n_in_use];
        else
            i++;
    for (int i = 0; i < n_deferred;)
        if (!used_by_device(deferred[i].ptr, size_at(deferred[i].ptr))) {
            due[n].c = deferred[i].c;
            due[n++].ptr = deferred[i].ptr;
            deferred[i] = deferred[--n_deferred];
        } else {
            i++;
        }
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++)
        mem_free(due[i].c, due[i].ptr);
}

static ze_result_t ZE_APICALL f_zeCommandQueueCreate(ze_context_handle_t c, ze_device_handle_t dev,
                                                     const ze_command_queue_desc_t *desc,
                                                     ze_command_queue_handle_t *phq)
{
    ENTER(F_zeCommandQueueCreate);
    if (!c || fake_ze_device_index(dev) < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !phq)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *phq = calloc(1, sizeof **phq);
    if (!*phq)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    (*phq)->head = fake_ze_head();
    (*phq)->ctx = c;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeCommandQueueDestroy(ze_command_queue_handle_t q)
{
    ENTER(F_zeCommandQueueDestroy);
    if (!q)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    queue_complete(q); /* "the application must ensure the device is not
                          currently referencing" it: its commands are done */
    free(q);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeCommandQueueSynchronize(ze_command_queue_handle_t q,
                                                          uint64_t timeout)
{
    ENTER(F_zeCommandQueueSynchronize);
    if (!q)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (timeout == 0) {
        pthread_mutex_lock(&mu);
        int busy = queue_busy(q);
        pthread_mutex_unlock(&mu);
        return busy ? ZE_RESULT_NOT_READY : ZE_RESULT_SUCCESS;
    }
    queue_complete(q);
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeCommandListCreateImmediate(ze_context_handle_t c,
                                                             ze_device_handle_t dev,
                                                             const ze_command_queue_desc_t *desc,
                                                             ze_command_list_handle_t *phl)
{
    ENTER(F_zeCommandListCreateImmediate);
    if (!c || fake_ze_device_index(dev) < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !phl)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    *phl = calloc(1, sizeof **phl);
    if (!*phl)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    (*phl)->head = fake_ze_head();
    (*phl)->ctx = c;
    (*phl)->immediate = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zeCommandListDestroy(ze_command_list_handle_t l)
{
    ENTER(F_zeCommandListDestroy);
    if (!l)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    queue_complete(l);
    free(l);
    return ZE_RESULT_SUCCESS;
}

EXPORT int fake_ze_in_use(const void *ptr, size_t size)
{
    pthread_mutex_lock(&mu);
    int r = used_by_device(ptr, size);
    pthread_mutex_unlock(&mu);
    return r;
}

EXPORT long fake_ze_free_violations(void)
{
    pthread_mutex_lock(&mu);
    long v = free_violations;
    pthread_mutex_unlock(&mu);
    return v;
}

EXPORT void fake_ze_device_finish(void)
{
    pthread_mutex_lock(&mu);
    n_in_use = 0;
    int n = n_deferred;
    n_deferred = 0;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++) /* the deferred frees happen now */
        mem_free(deferred[i].c, deferred[i].ptr);
}

static ze_result_t ZE_APICALL f_zeMemFree(ze_context_handle_t c, void *ptr)
{
    ENTER(F_zeMemFree);
    pthread_mutex_lock(&mu);
    if (ptr && used_by_device(ptr, size_at(ptr)))
        free_violations++;
    pthread_mutex_unlock(&mu);
    return mem_free(c, ptr);
}

static ze_result_t ZE_APICALL f_zeMemFreeExt(ze_context_handle_t c,
                                             const ze_memory_free_ext_desc_t *desc, void *ptr)
{
    ENTER(F_zeMemFreeExt);
    if (!desc)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (!c)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->freePolicy > 0x3)
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    pthread_mutex_lock(&mu);
    size_t size = size_at(ptr);
    int busy = size > 0 && used_by_device(ptr, size);
    if (busy && (desc->freePolicy & ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE)) {
        /* the wait: the commands using this memory complete */
        const char *lo = ptr, *hi = (const char *)ptr + size;
        for (int i = 0; i < n_in_use;)
            if (lo < in_use[i].hi && in_use[i].lo < hi)
                in_use[i] = in_use[--n_in_use];
            else
                i++;
        busy = 0;
    } else if (busy && (desc->freePolicy & ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE) &&
               n_deferred < USE_SLOTS) {
        deferred[n_deferred].c = c;
        deferred[n_deferred].ptr = ptr;
        n_deferred++;
        pthread_mutex_unlock(&mu);
        return ZE_RESULT_SUCCESS;
    } else if (busy) {
        free_violations++;
    }
    pthread_mutex_unlock(&mu);
    return mem_free(c, ptr);
}

static ze_result_t ZE_APICALL f_zeMemGetAllocProperties(ze_context_handle_t c, const void *ptr,
                                                        ze_memory_allocation_properties_t *props,
                                                        ze_device_handle_t *phDevice)
{
    ENTER(F_zeMemGetAllocProperties);
    (void)c;
    entry e;
    int found = lookup(ptr, &e);
    props->type = !found ? ZE_MEMORY_TYPE_UNKNOWN
                  : e.kind == K_DEVICE ? ZE_MEMORY_TYPE_DEVICE
                  : e.kind == K_HOST   ? ZE_MEMORY_TYPE_HOST
                                       : ZE_MEMORY_TYPE_SHARED;
    props->id = found ? (uint64_t)e.key : 0;
    props->pageSize = 4096;
    if (phDevice)
        *phDevice = found && e.device >= 0 ? &devices[e.device] : NULL;
    return ZE_RESULT_SUCCESS;
}

/* ---- sysman: free device memory -------------------------------------------- */

static ze_result_t ZE_APICALL f_zesDeviceEnumMemoryModules(zes_device_handle_t h, uint32_t *pCount,
                                                           zes_mem_handle_t *phMemory)
{
    ENTER(F_zesDeviceEnumMemoryModules);
    int d = fake_ze_device_index((ze_device_handle_t)h);
    if (d < 0)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (*pCount > 0 && phMemory)
        phMemory[0] = &mem_modules[d];
    *pCount = 1;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t ZE_APICALL f_zesMemoryGetState(zes_mem_handle_t h, zes_mem_state_t *state)
{
    ENTER(F_zesMemoryGetState);
    if (h < mem_modules || h >= mem_modules + n_devices)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    state->free = capacity - fake_memory_used(&memory, h->device);
    state->size = capacity;
    state->health = ZES_MEM_HEALTH_OK;
    return ZE_RESULT_SUCCESS;
}

/* ---- exported DDI getters -------------------------------------------------- */

#define TABLE_HEAD(t)                                                          \
    (void)version;                                                             \
    pthread_once(&conf_once, read_conf);                                       \
    if (!(t))                                                                  \
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                           \
    memset((t), 0, sizeof *(t))

EXPORT ze_result_t ZE_APICALL zeGetGlobalProcAddrTable(ze_api_version_t version,
                                                       ze_global_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnInit = f_zeInit;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetDriverProcAddrTable(ze_api_version_t version,
                                                       ze_driver_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnGet = f_zeDriverGet;
    t->pfnGetApiVersion = fake_ze_driver_get_api_version;
    t->pfnGetProperties = fake_ze_driver_get_properties;
    t->pfnGetExtensionProperties = fake_ze_driver_get_extension_properties;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetDeviceProcAddrTable(ze_api_version_t version,
                                                       ze_device_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnGet = f_zeDeviceGet;
    t->pfnGetSubDevices = f_zeDeviceGetSubDevices;
    t->pfnGetProperties = f_zeDeviceGetProperties;
    t->pfnGetMemoryProperties = f_zeDeviceGetMemoryProperties;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetContextProcAddrTable(ze_api_version_t version,
                                                        ze_context_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnCreate = f_zeContextCreate;
    t->pfnDestroy = f_zeContextDestroy;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetCommandQueueProcAddrTable(ze_api_version_t version,
                                                             ze_command_queue_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnCreate = f_zeCommandQueueCreate;
    t->pfnDestroy = f_zeCommandQueueDestroy;
    t->pfnSynchronize = f_zeCommandQueueSynchronize;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetCommandListProcAddrTable(ze_api_version_t version,
                                                            ze_command_list_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnCreateImmediate = f_zeCommandListCreateImmediate;
    t->pfnDestroy = f_zeCommandListDestroy;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetMemProcAddrTable(ze_api_version_t version, ze_mem_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnAllocShared = f_zeMemAllocShared;
    t->pfnAllocDevice = f_zeMemAllocDevice;
    t->pfnAllocHost = f_zeMemAllocHost;
    t->pfnFree = f_zeMemFree;
    t->pfnGetAllocProperties = f_zeMemGetAllocProperties;
    t->pfnFreeExt = f_zeMemFreeExt;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetVirtualMemProcAddrTable(ze_api_version_t version,
                                                           ze_virtual_mem_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnReserve = fake_ze_virtual_mem_reserve;
    t->pfnFree = fake_ze_virtual_mem_free;
    t->pfnQueryPageSize = fake_ze_virtual_mem_query_page_size;
    t->pfnMap = fake_ze_virtual_mem_map;
    t->pfnUnmap = fake_ze_virtual_mem_unmap;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetPhysicalMemProcAddrTable(ze_api_version_t version,
                                                            ze_physical_mem_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnCreate = fake_ze_physical_mem_create;
    t->pfnDestroy = fake_ze_physical_mem_destroy;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zesGetDeviceProcAddrTable(ze_api_version_t version,
                                                        zes_device_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnEnumMemoryModules = f_zesDeviceEnumMemoryModules;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zesGetMemoryProcAddrTable(ze_api_version_t version,
                                                        zes_memory_dditable_t *t)
{
    TABLE_HEAD(t);
    t->pfnGetState = f_zesMemoryGetState;
    return ZE_RESULT_SUCCESS;
}

/* ---- what tests read back ---------------------------------------------------- */

EXPORT long fake_ze_calls(const char *name)
{
    return fake_calls_of(func_names, calls, F_COUNT, name);
}

EXPORT long fake_ze_live_allocations(void)
{
    return fake_memory_live(&memory);
}

EXPORT size_t fake_ze_used_bytes(int device)
{
    return device < 0 || device >= MAX_DEVICES ? 0 : fake_memory_used(&memory, device);
}
