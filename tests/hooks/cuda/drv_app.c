/* tests/hooks/cuda/drv_app.c: an ordinary program of the CUDA driver API,
 * linked with -lcuda (the fake libcuda.so.1), for the hook tests.  It
 * reaches the driver the three ways programs do: exported symbols,
 * cuGetProcAddress (with and without the per-thread-default-stream flag),
 * and dlopen + dlsym of the resolver (how cudart and PyTorch do it).
 * Every return code goes to stdout; the fake's counters to stderr.
 *
 *   drv_app pattern   each hooked driver call once
 *   drv_app errors    out of memory (device, stream-ordered, physical),
 *                     a bad free, no current context
 *   drv_app cache     many allocations and frees
 *   drv_app devices   memory of device 1 (needs FAKE_CUDA_DEVICES=2)
 *   drv_app pools     stream-ordered pools that keep freed memory: the
 *                     default pool (threshold raised, as PyTorch does),
 *                     a pool of the program's own made current, a trim
 *   drv_app shared    memory mapped but not allocated here: an IPC handle
 *                     opened, a shareable handle imported, one physical
 *                     allocation mapped twice; and host-NUMA memory
 *   drv_app multicast a multicast object with a device's physical memory
 *                     bound to it, both mapped (NCCL's NVLS buffers)
 *   drv_app many_maps 4100 pages of 2 MiB made and mapped (more than a
 *                     4096-entry table holds: an H200's expandable
 *                     segments map ~7000 pages of 20 MiB), then one more
 *                     mapping of the first page and an imported handle's
 *                     (needs FAKE_CUDA_CAPACITY of 9 GiB or more)
 * (pools, shared, multicast and many_maps leave memory live for the
 * snapshot at exit.)
 * Functions are named app_* so snapshots can be checked for them.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define NOINLINE __attribute__((noinline))

static void app_report(const char *what, CUresult r)
{
    printf("%s -> %d\n", what, (int)r);
}

static CUstream s1;
static CUdevice dev;

static NOINLINE CUdeviceptr app_exported(void)
{
    CUdeviceptr d = 0;
    app_report("cuMemAlloc 1000", cuMemAlloc(&d, 1000));
    return d;
}

static NOINLINE void *app_lookup(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    CUresult r = cuGetProcAddress(name, &fn, version, flags, &q);
    printf("cuGetProcAddress %s %d %llu -> %d q=%d\n", name, version,
           (unsigned long long)flags, (int)r, (int)q);
    return fn;
}

static NOINLINE CUdeviceptr app_by_proc_address(void)
{
    CUdeviceptr d = 0;
    void *fn = app_lookup("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    app_report("cuMemAlloc 2000 (proc address)", ((PFN_cuMemAlloc_v3020)fn)(&d, 2000));
    return d;
}

static NOINLINE CUdeviceptr app_per_thread_stream(void)
{
    CUdeviceptr d = 0;
    void *fn = app_lookup("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    app_report("cuMemAllocAsync_ptsz 3000",
               ((PFN_cuMemAllocAsync_v11020_ptsz)fn)(&d, 3000, NULL));
    return d;
}

/* As libcudart does: the resolver from dlsym on the driver's handle. */
static NOINLINE void app_through_dlsym(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v12000 gpa =
        (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    PFN_cuGetProcAddress_v11030 gpa1 = (PFN_cuGetProcAddress_v11030)dlsym(h, "cuGetProcAddress");
    void *fa = NULL, *ff = NULL, *fm = NULL;
    CUdriverProcAddressQueryResult q;
    app_report("dlsym resolver: cuMemAllocAsync", gpa("cuMemAllocAsync", &fa, 12000, 0, &q));
    app_report("dlsym resolver: cuMemFreeAsync", gpa("cuMemFreeAsync", &ff, 12000, 0, &q));
    app_report("dlsym legacy resolver: cuMemAllocManaged",
               gpa1("cuMemAllocManaged", &fm, 6000, 0));
    CUdeviceptr d = 0, m = 0;
    app_report("cuMemAllocAsync 4000 (dlsym)", ((PFN_cuMemAllocAsync_v11020)fa)(&d, 4000, s1));
    app_report("cuMemFreeAsync (dlsym)", ((PFN_cuMemFreeAsync_v11020)ff)(d, s1));
    app_report("cuMemAllocManaged 5000 (dlsym)",
               ((PFN_cuMemAllocManaged_v6000)fm)(&m, 5000, CU_MEM_ATTACH_GLOBAL));
    app_report("cuMemFree managed", cuMemFree(m));
    /* Entry points looked up by their exported names on the handle, as
     * numba and XLA's driver stubs do. */
    PFN_cuMemAlloc_v3020 alloc = (PFN_cuMemAlloc_v3020)dlsym(h, "cuMemAlloc_v2");
    PFN_cuMemFree_v3020 release = (PFN_cuMemFree_v3020)dlsym(h, "cuMemFree_v2");
    CUdeviceptr n = 0;
    app_report("cuMemAlloc_v2 6000 (dlsym by name)", alloc(&n, 6000));
    app_report("cuMemFree_v2 (dlsym by name)", release(n));
    dlclose(h);
}

static NOINLINE CUdeviceptr app_pitched(void)
{
    CUdeviceptr d = 0;
    size_t pitch = 0;
    app_report("cuMemAllocPitch 1000x4", cuMemAllocPitch(&d, &pitch, 1000, 4, 4));
    app_report("pitch", (CUresult)pitch);
    return d;
}

static NOINLINE void app_pinned(void)
{
    void *h = NULL;
    app_report("cuMemHostAlloc 6000", cuMemHostAlloc(&h, 6000, 0));
    app_report("cuMemFreeHost", cuMemFreeHost(h));
}

static NOINLINE void app_pool(void)
{
    CUmemoryPool pool;
    CUdeviceptr d = 0;
    app_report("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool(&pool, dev));
    app_report("cuMemAllocFromPoolAsync 7000", cuMemAllocFromPoolAsync(&d, 7000, pool, s1));
    app_report("cuMemFreeAsync pool", cuMemFreeAsync(d, s1));
}

static NOINLINE void app_virtual_memory(void)
{
    const size_t piece = 2u << 20;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2];
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    app_report("cuMemAddressReserve", cuMemAddressReserve(&va, 2 * piece, 0, 0, 0));
    app_report("cuMemCreate", cuMemCreate(&h[0], piece, &prop, 0));
    app_report("cuMemCreate", cuMemCreate(&h[1], piece, &prop, 0));
    app_report("cuMemMap", cuMemMap(va, piece, 0, h[0], 0));
    app_report("cuMemMap", cuMemMap(va + piece, piece, 0, h[1], 0));
    app_report("cuMemUnmap first", cuMemUnmap(va, piece));
    app_report("cuMemUnmap second", cuMemUnmap(va + piece, piece));
    app_report("cuMemRelease", cuMemRelease(h[0]));
    app_report("cuMemRelease", cuMemRelease(h[1]));
    app_report("cuMemAddressFree", cuMemAddressFree(va, 2 * piece));
}

static NOINLINE void app_free_all(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr p)
{
    void *free_ptsz = app_lookup("cuMemFreeAsync", 12000,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    void *free_v2 = app_lookup("cuMemFree", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    app_report("cuMemFreeAsync_ptsz", ((PFN_cuMemFreeAsync_v11020_ptsz)free_ptsz)(c, NULL));
    app_report("cuMemFree (proc address)", ((PFN_cuMemFree_v3020)free_v2)(b));
    app_report("cuMemFree pitched", cuMemFree(p));
    app_report("cuMemFree", cuMemFree(a));
}

static NOINLINE int app_pattern(void)
{
    CUdeviceptr a = app_exported();
    CUdeviceptr b = app_by_proc_address();
    CUdeviceptr c = app_per_thread_stream();
    app_through_dlsym();
    CUdeviceptr p = app_pitched();
    app_pinned();
    app_pool();
    app_virtual_memory();
    app_free_all(a, b, c, p);
    return 0;
}

static NOINLINE void app_too_big(void)
{
    CUdeviceptr d = 0;
    app_report("cuMemAlloc 3 GiB", cuMemAlloc(&d, (size_t)3 << 30));
    app_report("cuMemAllocAsync 2 GiB", cuMemAllocAsync(&d, (size_t)2 << 30, s1));
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    app_report("cuMemCreate 4 GiB", cuMemCreate(&h, (size_t)4 << 30, &prop, 0));
}

static NOINLINE int app_errors(CUcontext ctx)
{
    CUdeviceptr keep = app_exported();
    app_too_big();
    int x;
    app_report("cuMemFree bad pointer", cuMemFree((CUdeviceptr)(uintptr_t)&x));
    /* Freed twice (a block with a segment of its own), and a pointer into a
     * live block: the driver's own error, also when tidemark's cache made
     * the memory. */
    CUdeviceptr twice = 0;
    app_report("cuMemAlloc 12 MiB", cuMemAlloc(&twice, 12 << 20));
    app_report("cuMemFree 12 MiB", cuMemFree(twice));
    app_report("cuMemFree 12 MiB again", cuMemFree(twice));
    app_report("cuMemFree inside a block", cuMemFree(keep + 256));
    app_report("cuCtxSetCurrent NULL", cuCtxSetCurrent(NULL));
    CUdeviceptr d = 0;
    app_report("cuMemAlloc without a context", cuMemAlloc(&d, 100));
    app_report("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
    app_report("cuMemFree", cuMemFree(keep));
    return 0;
}

static NOINLINE int app_cache(void)
{
    int n = 0;
    for (int r = 0; r < 50; r++) {
        CUdeviceptr d[6];
        for (int i = 0; i < 6; i++, n++)
            if (cuMemAlloc(&d[i], 1000 * (size_t)(i + 1)) != CUDA_SUCCESS)
                return 1;
        for (int i = 0; i < 6; i++)
            if (cuMemFree(d[i]) != CUDA_SUCCESS)
                return 1;
        CUdeviceptr a;
        if (cuMemAllocAsync(&a, 50000, s1) != CUDA_SUCCESS || cuMemFreeAsync(a, s1) != CUDA_SUCCESS)
            return 1;
        n++;
    }
    printf("device allocations made -> %d\n", n);
    app_too_big();
    return 0;
}

/* FAKE_CUDA_DEVICES=2: memory of device 1 while device 0's context is
 * current (physical memory belongs to the device it was created on), and
 * device 1's context current. */
static NOINLINE int app_devices(void)
{
    const size_t piece = 2u << 20;
    CUcontext ctx1;
    CUdeviceptr va = 0, d = 0;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    app_report("cuMemAddressReserve", cuMemAddressReserve(&va, piece, 0, 0, 0));
    app_report("cuMemCreate on device 1", cuMemCreate(&h, piece, &prop, 0));
    app_report("cuMemMap", cuMemMap(va, piece, 0, h, 0));
    app_report("cuDevicePrimaryCtxRetain 1", cuDevicePrimaryCtxRetain(&ctx1, 1));
    app_report("cuCtxPushCurrent", cuCtxPushCurrent(ctx1));
    app_report("cuMemAlloc 1234 on device 1", cuMemAlloc(&d, 1234));
    app_report("cuMemFree", cuMemFree(d));
    app_report("cuCtxPopCurrent", cuCtxPopCurrent(&ctx1));
    app_report("cuMemUnmap", cuMemUnmap(va, piece));
    app_report("cuMemRelease", cuMemRelease(h));
    app_report("cuMemAddressFree", cuMemAddressFree(va, piece));
    return 0;
}

static void app_pool_report(const char *what, CUmemoryPool pool)
{
    cuuint64_t reserved = 0, used = 0;
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    printf("%s: pool reserved %llu used %llu\n", what, (unsigned long long)reserved,
           (unsigned long long)used);
}

static NOINLINE int app_pools(void)
{
    const size_t mib = 1u << 20;
    CUmemoryPool def, mine;
    CUdeviceptr a = 0, b = 0, c = 0;
    app_report("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool(&def, dev));
    cuuint64_t keep_all = ~(cuuint64_t)0; /* PyTorch's backend:cudaMallocAsync */
    app_report("cuMemPoolSetAttribute threshold",
               cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
    app_report("cuMemAllocAsync 1 MiB", cuMemAllocAsync(&a, mib, s1));
    app_report("cuMemAllocAsync 2 MiB", cuMemAllocAsync(&b, 2 * mib, s1));
    app_report("cuMemFreeAsync 1 MiB", cuMemFreeAsync(a, s1));
    app_report("cuMemFreeAsync 2 MiB", cuMemFreeAsync(b, s1));
    app_report("cuStreamSynchronize", cuStreamSynchronize(s1));
    app_pool_report("default after frees", def);
    /* A pool of the program's own, made the device's current pool: kept
     * 4 MiB, then trimmed away. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    app_report("cuMemPoolCreate", cuMemPoolCreate(&mine, &props));
    app_report("cuMemPoolSetAttribute threshold",
               cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
    app_report("cuDeviceSetMemPool", cuDeviceSetMemPool(dev, mine));
    app_report("cuMemAllocAsync 4 MiB", cuMemAllocAsync(&c, 4 * mib, s1));
    app_report("cuMemFreeAsync 4 MiB", cuMemFreeAsync(c, s1));
    app_pool_report("mine after free", mine);
    app_report("cuMemPoolTrimTo 0", cuMemPoolTrimTo(mine, 0));
    app_pool_report("mine after trim", mine);
    app_report("cuDeviceSetMemPool default", cuDeviceSetMemPool(dev, def));
    app_report("cuMemPoolDestroy", cuMemPoolDestroy(mine));
    /* One allocation still live at the dump, from the default pool's
     * idle memory. */
    app_report("cuMemAllocAsync 1 MiB again", cuMemAllocAsync(&a, mib, s1));
    app_pool_report("default at the end", def);
    /* The threshold lowered, and the idle 2 MiB given back through no call
     * the hooks see (as at a cuCtxSynchronize): the snapshot at exit must
     * read the pool again, not keep what the last hooked call booked. */
    cuuint64_t keep_none = 0;
    app_report("cuMemPoolSetAttribute threshold 0",
               cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_none));
    void (*release)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "fake_cuda_pool_release_unseen");
    if (release)
        release();
    app_pool_report("default after an unseen release", def);
    return 0;
}

/* A driver function by cuGetProcAddress, so that the program imports no
 * IPC export: cache mode would leave all its allocations to the driver
 * (hooks/preload/cuda_ipc.c), and the other scenarios test the cache. */
static void *driver_fn(const char *name, int version)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
        fn == NULL) {
        printf("no %s\n", name);
        exit(1);
    }
    return fn;
}

static NOINLINE int app_shared(void)
{
    const size_t mib = 1u << 20;
    CUdeviceptr a = 0, opened = 0, twice = 0, va = 0;
    CUipcMemHandle ipc;
    PFN_cuIpcGetMemHandle_v4010 ipc_get =
        (PFN_cuIpcGetMemHandle_v4010)driver_fn("cuIpcGetMemHandle", 4010);
    PFN_cuIpcOpenMemHandle_v11000 ipc_open =
        (PFN_cuIpcOpenMemHandle_v11000)driver_fn("cuIpcOpenMemHandle", 11000);
    PFN_cuIpcCloseMemHandle_v4010 ipc_close =
        (PFN_cuIpcCloseMemHandle_v4010)driver_fn("cuIpcCloseMemHandle", 4010);
    app_report("cuMemAlloc 1 MiB", cuMemAlloc(&a, mib));
    app_report("cuIpcGetMemHandle", ipc_get(&ipc, a));
    app_report("cuIpcOpenMemHandle", ipc_open(&opened, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    app_report("cuIpcOpenMemHandle again",
               ipc_open(&twice, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    app_report("cuIpcCloseMemHandle", ipc_close(twice));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle own, host, imported;
    app_report("cuMemAddressReserve", cuMemAddressReserve(&va, 8 * mib, 0, 0, 0));
    app_report("cuMemCreate device 2 MiB", cuMemCreate(&own, 2 * mib, &prop, 0));
    app_report("cuMemMap", cuMemMap(va, 2 * mib, 0, own, 0));
    app_report("cuMemMap the same again", cuMemMap(va + 2 * mib, 2 * mib, 0, own, 0));
    int fd = -1;
    app_report("cuMemExportToShareableHandle",
               cuMemExportToShareableHandle(&fd, own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    app_report("cuMemImportFromShareableHandle",
               cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    app_report("cuMemMap imported", cuMemMap(va + 4 * mib, 2 * mib, 0, imported, 0));
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 0;
    app_report("cuMemCreate host NUMA 2 MiB", cuMemCreate(&host, 2 * mib, &prop, 0));
    app_report("cuMemMap host", cuMemMap(va + 6 * mib, 2 * mib, 0, host, 0));
    return 0;
}

static NOINLINE int app_many_maps(void)
{
    enum { PAGES = 4100 };
    const size_t page = (size_t)2 << 20;
    CUdeviceptr va = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    app_report("cuMemAddressReserve", cuMemAddressReserve(&va, (PAGES + 2) * page, 0, 0, 0));
    CUmemGenericAllocationHandle first = 0, imported = 0;
    int created = 0, mapped = 0;
    for (int i = 0; i < PAGES; i++) {
        CUmemGenericAllocationHandle h = 0;
        created += cuMemCreate(&h, page, &prop, 0) == CUDA_SUCCESS;
        mapped += cuMemMap(va + (CUdeviceptr)i * page, page, 0, h, 0) == CUDA_SUCCESS;
        if (i == 0)
            first = h;
    }
    printf("cuMemCreate x%d -> %d made, cuMemMap -> %d mapped\n", PAGES, created, mapped);
    app_report("cuMemMap the first page again",
               cuMemMap(va + (CUdeviceptr)PAGES * page, page, 0, first, 0));
    int fd = -1;
    app_report("cuMemExportToShareableHandle",
               cuMemExportToShareableHandle(&fd, first, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    app_report("cuMemImportFromShareableHandle",
               cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    app_report("cuMemMap imported",
               cuMemMap(va + (CUdeviceptr)(PAGES + 1) * page, page, 0, imported, 0));
    return 0;
}

static NOINLINE int app_multicast(void)
{
#if CUDA_VERSION >= 12010
    const size_t mib = 1u << 20;
    CUdeviceptr va = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmulticastObjectProp mc_prop;
    memset(&mc_prop, 0, sizeof mc_prop);
    mc_prop.numDevices = 1;
    mc_prop.size = 2 * mib;
    CUmemGenericAllocationHandle own, mc;
    app_report("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * mib, 0, 0, 0));
    app_report("cuMemCreate device 2 MiB", cuMemCreate(&own, 2 * mib, &prop, 0));
    app_report("cuMemMap", cuMemMap(va, 2 * mib, 0, own, 0));
    app_report("cuMulticastCreate", cuMulticastCreate(&mc, &mc_prop));
    app_report("cuMulticastAddDevice", cuMulticastAddDevice(mc, dev));
    app_report("cuMulticastBindMem", cuMulticastBindMem(mc, 0, own, 0, 2 * mib, 0));
    app_report("cuMemMap multicast", cuMemMap(va + 2 * mib, 2 * mib, 0, mc, 0));
    return 0;
#else
    printf("no multicast in these headers\n");
    return 0;
#endif
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pattern";
    CUcontext ctx;
    app_report("cuInit", cuInit(0));
    app_report("cuDeviceGet", cuDeviceGet(&dev, 0));
    app_report("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
    app_report("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
    app_report("cuStreamCreate", cuStreamCreate(&s1, 0));
    int rc;
    if (strcmp(what, "pattern") == 0)
        rc = app_pattern();
    else if (strcmp(what, "errors") == 0)
        rc = app_errors(ctx);
    else if (strcmp(what, "cache") == 0)
        rc = app_cache();
    else if (strcmp(what, "devices") == 0)
        rc = app_devices();
    else if (strcmp(what, "pools") == 0)
        rc = app_pools();
    else if (strcmp(what, "shared") == 0)
        rc = app_shared();
    else if (strcmp(what, "multicast") == 0)
        rc = app_multicast();
    else if (strcmp(what, "many_maps") == 0)
        rc = app_many_maps();
    else
        return fprintf(stderr, "drv_app: unknown scenario %s\n", what), 2;
    app_report("cuStreamDestroy", cuStreamDestroy(s1));
    fflush(stdout);
    fprintf(stderr, "fake: alloc_calls=%ld cuMemAlloc_v2=%ld cuMemAllocAsync=%ld live=%ld\n",
            fake_cuda_alloc_calls(), fake_cuda_calls("cuMemAlloc_v2"),
            fake_cuda_calls("cuMemAllocAsync"), fake_cuda_live_allocations());
    return rc;
}
