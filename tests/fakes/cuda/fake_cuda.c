/* tests/fakes/cuda/fake_cuda.c: a test double of the CUDA driver,
 * libcuda.so.1, for machines with no GPU.
 *
 * Owns: the knobs (read once), the per-function call counters, and every
 * allocation the simulated devices (FAKE_CUDA_DEVICES, each of
 * FAKE_CUDA_CAPACITY bytes) hand out: device, managed, pitch,
 * stream-ordered, pool, host, and the virtual-memory calls (reservations,
 * physical handles and mappings).  Devices, contexts and streams are
 * fake_cuda_ctx.c; cuGetProcAddress(_v2), which picks the variant by
 * (name, version, flags) as the real driver does, is fake_cuda_gpa.c.  Device memory is PROT_NONE anonymous memory, so a tool
 * that touches it by mistake crashes here instead of passing.
 *
 * Every implementation f_NAME has the type of the toolkit's PFN_* for it
 * (fake_cuda_internal.h; a prototype mismatch is a compile error) and is
 * exported under the driver's name by an alias.  Knobs: fake_cuda.h.
 *
 * What the fake models, each with the sentence of NVIDIA's documentation
 * it implements (tests/hooks/cuda/sem_app.c checks the fake against each):
 *   - contexts: "each context has its own distinct address space ...
 *     CUdeviceptr values from different contexts reference different
 *     memory locations" (CUDA Programming Guide, Driver API, Context):
 *     every device allocation records the context current when it was
 *     made, and fake_cuda_ptr_usable says whether a kernel of the current
 *     context could reach a pointer;
 *   - cuMemFree: "This API will not perform any implicit synchronization
 *     when the pointer was allocated with cuMemAllocAsync or
 *     cuMemAllocFromPoolAsync ... For all other pointers, this API may
 *     perform implicit synchronization" (Driver API, cuMemFree): the fake
 *     does synchronize then (every stream's queued work completes first),
 *     which is what cudaFree's callers rely on;
 *   - stream-ordered allocation: "cuMemAllocAsync allocates from the
 *     current mempool of the provided stream's device"
 *     (cuDeviceSetMemPool): the stream's device, not the current one;
 *   - cuDevicePrimaryCtxReset: "Destroy all allocations and reset all
 *     state on the primary context" (fake_cuda_ctx.c);
 *   - IPC: "Gets an interprocess memory handle for an existing device
 *     memory allocation" and the peer's open "Maps memory exported from
 *     another process" — the whole allocation: a handle names the
 *     allocation containing the pointer, and the peer's pointer is that
 *     allocation's base (fake_cuda_pool.c).
 *
 * Invariants: used[d] is the sum of the sizes of live device, managed,
 * pitch and physical allocations of device d; a mapping lies inside one
 * reservation and refers to a live handle.  Lock: one mutex around the
 * registry, the reservations and the mappings; counters are atomics.
 */
#define _GNU_SOURCE
#include "fake_cuda_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake_memory.h"

const char *const fake__names[FC_COUNT] = {
#define FC_NAME(name, pfn, base, ver, pt, al) #name,
    FAKE_FUNCS(FC_NAME)
#undef FC_NAME
};
static const unsigned char fc_allocates[FC_COUNT] = {
#define FC_AL(name, pfn, base, ver, pt, al) al,
    FAKE_FUNCS(FC_AL)
#undef FC_AL
};

atomic_long fake__calls[FC_COUNT];

/* ---- configuration (read once) ------------------------------------------ */

fake_config fake__cfg;
/* The live allocations (the registry below); its capacity is the knob's. */
fake_memory fake__memory =
    FAKE_MEMORY_INIT(1u << FAKE_K_DEVICE | 1u << FAKE_K_MANAGED | 1u << FAKE_K_PHYS);
#define cfg fake__cfg
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static unsigned long long env_u64(const char *name, unsigned long long def)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : def;
}

static void cfg_load(void)
{
    cfg.devices = (int)env_u64("FAKE_CUDA_DEVICES", 1);
    if (cfg.devices < 1 || cfg.devices > MAX_DEV)
        cfg.devices = 1;
    cfg.capacity = env_u64("FAKE_CUDA_CAPACITY", 1ull << 30);
    fake__memory.capacity = (size_t)cfg.capacity;
    atomic_store(&cfg.oom_above, env_u64("FAKE_CUDA_OOM_ABOVE", 0));
    cfg.init_result = (CUresult)env_u64("FAKE_CUDA_INIT_RESULT", 0);
    cfg.fail_fn = -1;
    const char *f = getenv("FAKE_CUDA_FAIL");
    const char *colon = f ? strchr(f, ':') : NULL;
    if (colon) {
        for (int i = 0; i < FC_COUNT; i++)
            if (strlen(fake__names[i]) == (size_t)(colon - f) &&
                strncmp(fake__names[i], f, (size_t)(colon - f)) == 0)
                cfg.fail_fn = i;
        cfg.fail_code = (CUresult)strtol(colon + 1, NULL, 0);
    }
    cfg.gpa_exported = env_u64("FAKE_CUDA_GPA_EXPORTED", 0) != 0;
    cfg.probe_table = env_u64("FAKE_CUDA_PROBE_TABLE", 0) != 0;
    cfg.report = getenv("FAKE_CUDA_REPORT");
    cfg.capturing = env_u64("FAKE_CUDA_CAPTURING", 0) != 0;
    cfg.no_vmm = env_u64("FAKE_CUDA_NO_VMM", 0) != 0;
    /* A driver that hangs (run.sh must kill such a row at its limit). */
    for (unsigned left = (unsigned)env_u64("FAKE_CUDA_HANG_S", 0); left > 0;)
        left = sleep(left);
}

CUresult fake__enter(int fc)
{
    pthread_once(&cfg_once, cfg_load);
    atomic_fetch_add(&fake__calls[fc], 1);
    return cfg.fail_fn == fc ? cfg.fail_code : CUDA_SUCCESS;
}

/* ---- the registry of live allocations ------------------------------------
 * The fakes' shared bookkeeping (tests/fakes/core): each allocation by its
 * address (a handle for the physical kinds), `span` the bytes mmap'ed for
 * it, `extra` its pool (FAKE_K_POOLED) or the exporter's base (FAKE_K_IPC).
 * Device, managed and physical memory count against the capacity. */

typedef struct mapping {
    uintptr_t va;
    size_t size;       /* bytes */
    uintptr_t handle;
} mapping;

/* Mappings live at once: more than an H200's expandable segments make
 * (~7000 pages of 20 MiB for 141 GB), so the hooks' tables can be tested
 * past any fixed size of theirs. */
#define MAX_MAPS 16384
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the mappings, the handles */
static mapping g_maps[MAX_MAPS];
static int g_nmaps;
static uintptr_t g_next_handle = 0x7000;

static fake_alloc alloc_of(const fake_mem *a)
{
    return (fake_alloc){.size = a->size, .device = a->device, .kind = a->kind,
                        .pool = a->extra, .ctx = a->ctx};
}

/* Makes an allocation of `kind` on `device` (or the host), from `pool`
 * (or NULL), and books it. */
static CUresult take(int kind, int device, size_t size, void *pool, uintptr_t *out)
{
    *out = 0;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long limit = atomic_load(&cfg.oom_above);
    int counted = (fake__memory.counted >> kind) & 1;
    if (counted && limit != 0 && size > limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_mem a = {.size = size, .device = device, .kind = kind, .extra = pool,
                  .ctx = device >= 0 && !fake__is_phys(kind) ? fake__current_ctx() : NULL};
    if (fake__is_phys(kind)) {
        pthread_mutex_lock(&g_lock);
        a.key = g_next_handle;
        g_next_handle += 16;
        pthread_mutex_unlock(&g_lock);
    } else {
        if (counted && device >= 0 && size > cfg.capacity)
            return CUDA_ERROR_OUT_OF_MEMORY; /* no address space spent on it */
        size_t len = (size + 4095) & ~(size_t)4095;
        int prot = kind == FAKE_K_DEVICE || kind == FAKE_K_POOLED || kind == FAKE_K_IPC
                       ? PROT_NONE : PROT_READ | PROT_WRITE;
        void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return CUDA_ERROR_OUT_OF_MEMORY;
        a.key = (uintptr_t)p;
        a.span = len;
    }
    if (fake_memory_track(&fake__memory, &a) != FAKE_MEM_OK) {
        if (a.span)
            munmap((void *)a.key, a.span);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = a.key;
    return CUDA_SUCCESS;
}

/* Frees the allocation at `key` if its kind is in `kinds` (bit mask);
 * *out (when not NULL) gets what it was. */
static CUresult give_rec(uintptr_t key, unsigned kinds, fake_alloc *out)
{
    fake_mem a;
    if (!fake_memory_untrack(&fake__memory, key, kinds, &a))
        return CUDA_ERROR_INVALID_VALUE;
    if (out)
        *out = alloc_of(&a);
    /* A pool's free is stream-ordered: the driver hands the address out
     * again only after the work queued before the free has completed.
     * The fake never does (its pool memory stays reserved address space),
     * so no reuse of it can be early. */
    if (a.span && a.kind != FAKE_K_POOLED)
        munmap((void *)a.key, a.span);
    return CUDA_SUCCESS;
}

static CUresult give(uintptr_t key, unsigned kinds)
{
    return give_rec(key, kinds, NULL);
}

CUresult fake__take(int kind, int device, size_t size, void *pool, uintptr_t *out)
{
    return take(kind, device, size, pool, out);
}

CUresult fake__give(uintptr_t key, unsigned kinds, fake_alloc *out)
{
    return give_rec(key, kinds, out);
}

int fake__lookup(uintptr_t key, fake_alloc *out)
{
    fake_mem a;
    if (!fake_memory_get(&fake__memory, key, &a))
        return 0;
    *out = alloc_of(&a);
    return 1;
}

/* The registry is keyed by base address; an interior pointer (a block
 * some allocator carved out of one allocation) is found by a scan, which
 * passes over handles and reservations. */
int fake__lookup_containing(uintptr_t addr, uintptr_t *base, fake_alloc *out)
{
    fake_mem a;
    unsigned not_memory = 1u << FAKE_K_PHYS | 1u << FAKE_K_PHYS_IMPORT | 1u << FAKE_K_HOST_PHYS |
                          1u << FAKE_K_MULTICAST | 1u << FAKE_K_RESERVE;
    if (!fake_memory_get(&fake__memory, addr, &a) &&
        !fake_memory_containing(&fake__memory, addr, not_memory, &a))
        return 0;
    *base = a.key;
    *out = alloc_of(&a);
    return 1;
}

static int made_in(const fake_mem *a, void *ctx)
{
    return a->ctx == ctx && (a->kind == FAKE_K_DEVICE || a->kind == FAKE_K_MANAGED);
}

void fake__give_context(void *ctx)
{
    fake_mem a;
    while (fake_memory_find(&fake__memory, made_in, ctx, &a))
        give(a.key, 1u << FAKE_K_DEVICE | 1u << FAKE_K_MANAGED);
}

CUresult fake__used_change(int device, long long bytes)
{
    return fake_memory_used_change(&fake__memory, device, bytes) == FAKE_MEM_OK
               ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- memory --------------------------------------------------------------- */

CUresult f_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    ENTER(FC_cuMemGetInfo_v2);
    int d;
    CUresult r = fake__current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned long long used = fake_memory_used(&fake__memory, d);
    if (free_bytes)
        *free_bytes = (size_t)(cfg.capacity - used);
    if (total)
        *total = (size_t)cfg.capacity;
    return CUDA_SUCCESS;
}

/* A device allocation in the current context. */
static CUresult dev_alloc(int kind, CUdeviceptr *dptr, size_t size)
{
    int d;
    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake__current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    uintptr_t p;
    r = take(kind, d, size, NULL, &p);
    *dptr = (CUdeviceptr)p;
    return r;
}

CUresult f_cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    ENTER(FC_cuMemAlloc_v2);
    CUresult r = fake__capture_check(); /* "potentially unsafe" during a capture */
    return r != CUDA_SUCCESS ? r : dev_alloc(FAKE_K_DEVICE, dptr, size);
}

static CUresult dev_free(CUdeviceptr p)
{
    NEED_INIT();
    if (!fake__has_context())
        return CUDA_ERROR_INVALID_CONTEXT;
    return give((uintptr_t)p, 1u << FAKE_K_DEVICE | 1u << FAKE_K_MANAGED);
}

/* "For all other pointers [than stream-ordered ones], this API may
 * perform implicit synchronization": the fake's does, before it frees. */
CUresult f_cuMemFree_v2(CUdeviceptr p)
{
    ENTER(FC_cuMemFree_v2);
    CUresult r = fake__capture_check();
    if (r != CUDA_SUCCESS)
        return r;
    fake_alloc a;
    if (fake__lookup((uintptr_t)p, &a) && a.kind != FAKE_K_POOLED)
        fake__complete_all();
    return dev_free(p);
}

CUresult f_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                     size_t height, unsigned int elem)
{
    ENTER(FC_cuMemAllocPitch_v2);
    if (pitch == NULL || width == 0 || height == 0 ||
        (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511; /* rows start 512-byte aligned */
    CUresult r = dev_alloc(FAKE_K_DEVICE, dptr, p * height);
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

CUresult f_cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    ENTER(FC_cuMemAllocManaged);
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return dev_alloc(FAKE_K_MANAGED, dptr, size);
}

static CUresult host_alloc(void **pp, size_t size)
{
    CUresult r = fake__need_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (pp == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    r = take(FAKE_K_HOST, -1, size, NULL, &p);
    *pp = (void *)p;
    return r;
}

CUresult f_cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    ENTER(FC_cuMemHostAlloc);
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, size);
}

CUresult f_cuMemAllocHost_v2(void **pp, size_t size)
{
    ENTER(FC_cuMemAllocHost_v2);
    return host_alloc(pp, size);
}

CUresult f_cuMemFreeHost(void *p)
{
    ENTER(FC_cuMemFreeHost);
    NEED_INIT();
    return give((uintptr_t)p, 1u << FAKE_K_HOST);
}

/* Stream-ordered calls complete at once (the fake has no queued work):
 * memory comes from, and goes back to, a pool (fake_cuda_pool.c).
 * "cuMemAllocAsync allocates from the current mempool of the provided
 * stream's device" (cuDeviceSetMemPool): the stream's device, whichever
 * context is current, unless the program names a pool. */
static CUresult async_alloc(CUdeviceptr *dptr, size_t size, CUstream s, int ptsz)
{
    int d;
    void *ctx;
    CUresult r = fake__stream_place(s, ptsz, &ctx, &d);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemoryPool pool;
    if ((r = f_cuDeviceGetMemPool(&pool, d)) != CUDA_SUCCESS)
        return r;
    return fake__pool_alloc((fake_pool *)pool, dptr, size);
}

CUresult f_cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
    ENTER(FC_cuMemAllocAsync);
    return async_alloc(dptr, size, s, 0);
}

CUresult f_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
    ENTER(FC_cuMemAllocAsync_ptsz);
    return async_alloc(dptr, size, s, 1);
}

static CUresult async_free(CUdeviceptr p)
{
    NEED_INIT();
    if (!fake__has_context())
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_alloc a;
    if (fake__lookup((uintptr_t)p, &a) && a.kind == FAKE_K_POOLED)
        return fake__pool_free(p);
    return give((uintptr_t)p, 1u << FAKE_K_DEVICE | 1u << FAKE_K_MANAGED);
}

CUresult f_cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    ENTER(FC_cuMemFreeAsync);
    (void)s;
    return async_free(p);
}

CUresult f_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    ENTER(FC_cuMemFreeAsync_ptsz);
    (void)s;
    return async_free(p);
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, CUmemoryPool pool)
{
    CUresult r = fake__need_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == NULL || pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return fake__pool_alloc((fake_pool *)pool, dptr, size);
}

CUresult f_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size,
                                          CUmemoryPool pool, CUstream s)
{
    ENTER(FC_cuMemAllocFromPoolAsync);
    (void)s;
    return pool_alloc(dptr, size, pool);
}

CUresult f_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size,
                                               CUmemoryPool pool, CUstream s)
{
    ENTER(FC_cuMemAllocFromPoolAsync_ptsz);
    (void)s;
    return pool_alloc(dptr, size, pool);
}

/* ---- virtual memory -------------------------------------------------------- */

CUresult f_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                      CUdeviceptr addr, unsigned long long flags)
{
    ENTER(FC_cuMemAddressReserve);
    (void)align;
    NEED_INIT();
    if (ptr == NULL || size == 0 || size % 4096 != 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_mem a = {.key = (uintptr_t)p, .size = size, .span = size, .device = -1,
                  .kind = FAKE_K_RESERVE};
    if (fake_memory_track(&fake__memory, &a) != FAKE_MEM_OK) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult f_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    ENTER(FC_cuMemAddressFree);
    fake_mem r;
    int ok = fake_memory_get(&fake__memory, (uintptr_t)ptr, &r) && r.kind == FAKE_K_RESERVE &&
             r.size == size;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; ok && i < g_nmaps; i++)
        if (g_maps[i].va >= (uintptr_t)ptr && g_maps[i].va < (uintptr_t)ptr + size)
            ok = 0; /* still mapped */
    pthread_mutex_unlock(&g_lock);
    return ok ? give((uintptr_t)ptr, 1u << FAKE_K_RESERVE) : CUDA_ERROR_INVALID_VALUE;
}

CUresult f_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    ENTER(FC_cuMemCreate);
    CUresult r = fake__need_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (h == NULL || prop == NULL || flags != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t key;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
        prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
        prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        r = take(FAKE_K_HOST_PHYS, -1, size, NULL, &key); /* host memory: no device's */
    else if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
             prop->location.id < 0 || prop->location.id >= cfg.devices)
        return CUDA_ERROR_INVALID_VALUE;
    else
        r = take(FAKE_K_PHYS, prop->location.id, size, NULL, &key);
    *h = r == CUDA_SUCCESS ? (CUmemGenericAllocationHandle)key : 0;
    return r;
}

CUresult f_cuMemRelease(CUmemGenericAllocationHandle h)
{
    ENTER(FC_cuMemRelease);
    return give((uintptr_t)h, 1u << FAKE_K_PHYS | 1u << FAKE_K_PHYS_IMPORT | 1u << FAKE_K_HOST_PHYS |
                                  1u << FAKE_K_MULTICAST);
}

/* Whether reservation `a` holds the range at `arg`. */
typedef struct range {
    uintptr_t va;
    size_t size;
} range;
static int reserve_holds(const fake_mem *a, void *arg)
{
    const range *r = arg;
    return a->kind == FAKE_K_RESERVE && r->va >= a->key && r->va + r->size <= a->key + a->size;
}

CUresult f_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle h, unsigned long long flags)
{
    ENTER(FC_cuMemMap);
    uintptr_t va = (uintptr_t)ptr;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    fake_mem phys, reserve;
    range want = {va, size};
    int known = fake_memory_get(&fake__memory, (uintptr_t)h, &phys);
    int inside = fake_memory_find(&fake__memory, reserve_holds, &want, &reserve);
    pthread_mutex_lock(&g_lock);
    if (known && fake__is_phys(phys.kind) && flags == 0 && offset + size <= phys.size &&
        inside && g_nmaps < MAX_MAPS) {
        g_maps[g_nmaps++] = (mapping){.va = va, .size = size, .handle = (uintptr_t)h};
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult f_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ENTER(FC_cuMemUnmap);
    uintptr_t va = (uintptr_t)ptr;
    int removed = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nmaps;) {
        if (g_maps[i].va >= va && g_maps[i].va + g_maps[i].size <= va + size) {
            g_maps[i] = g_maps[--g_nmaps];
            removed++;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return removed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult f_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                 size_t count)
{
    ENTER(FC_cuMemSetAccess);
    (void)ptr;
    (void)size;
    return desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* 2 MiB, as on current GPUs; FAKE_CUDA_NO_VMM=1 plays a device without
 * virtual memory management (CUDA_ERROR_NOT_SUPPORTED). */
CUresult f_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                         CUmemAllocationGranularity_flags option)
{
    ENTER(FC_cuMemGetAllocationGranularity);
    NEED_INIT();
    (void)option;
    if (granularity == NULL || prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= cfg.devices)
        return CUDA_ERROR_INVALID_VALUE;
    if (cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    *granularity = (size_t)2 << 20;
    return CUDA_SUCCESS;
}

/* ---- counters for tests ----------------------------------------------------- */

FAKE_EXPORT long fake_cuda_calls(const char *name)
{
    return fake_calls_of(fake__names, fake__calls, FC_COUNT, name);
}

FAKE_EXPORT long fake_cuda_alloc_calls(void)
{
    long n = 0;
    for (int i = 0; i < FC_COUNT; i++)
        if (fc_allocates[i])
            n += atomic_load(&fake__calls[i]);
    return n;
}

FAKE_EXPORT long fake_cuda_live_allocations(void)
{
    return fake_memory_live(&fake__memory);
}

FAKE_EXPORT unsigned long long fake_cuda_used_bytes(int device)
{
    return device < 0 || device >= MAX_DEV ? 0 : fake_memory_used(&fake__memory, device);
}

/* Whether a kernel running in the current context could use `ptr`: it
 * lies in a live allocation of that context (managed and host memory:
 * of any context). */
FAKE_EXPORT int fake_cuda_ptr_usable(const void *ptr)
{
    uintptr_t base;
    fake_alloc a;
    if (!fake__lookup_containing((uintptr_t)ptr, &base, &a))
        return 0;
    if (a.kind == FAKE_K_MANAGED || a.kind == FAKE_K_HOST || a.kind == FAKE_K_IPC)
        return 1;
    int d;
    if (a.kind == FAKE_K_POOLED) /* a pool is its device's */
        return fake__current_device(&d) == CUDA_SUCCESS && d == a.device;
    return a.ctx != NULL && a.ctx == fake__current_ctx();
}

FAKE_EXPORT void fake_cuda_set_oom_above(unsigned long long bytes)
{
    pthread_once(&cfg_once, cfg_load);
    atomic_store(&cfg.oom_above, bytes);
}

/* ---- the exported entry points (the resolvers: fake_cuda_gpa.c) ----------- */
FAKE_MEMORY(FC_ALIAS)
