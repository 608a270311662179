/* tests/hooks/cuda/rt_app.c: an ordinary program of the CUDA runtime API,
 * for the hook tests.  It knows nothing of tidemark: it makes a known
 * pattern of allocations and frees, prints every return code on stdout
 * (so a run with and without LD_PRELOAD can be compared line by line) and,
 * on stderr, the fake driver's counters ("fake: ...").
 *
 *   rt_app pattern   each hooked runtime call once (the _ptsz forms come
 *                    from rt_app_ptsz.c), the driver reached through
 *                    cudaGetDriverEntryPoint*, virtual memory as PyTorch's
 *                    expandable segments use it
 *   rt_app errors    calls that fail: out of memory, a bad free, an error
 *                    the fake driver injects (FAKE_CUDA_FAIL)
 *   rt_app cache     many small allocations and frees, the kind a caching
 *                    allocator turns into few driver calls
 *   rt_app threads   4 threads allocating and freeing at once
 *   rt_app devices   allocations on device 1 and device 0
 *   rt_app framework_late  a cudaMalloc, then $FRAMEWORK_LIB (named as
 *                    PyTorch's libc10_cuda.so) loaded, then another: it
 *                    prints what each took of the device (cudaMemGetInfo)
 *                    and what is free again after each cudaFree
 * Built twice: against the fake libcudart.so.13, and with the fake runtime
 * linked in statically (as nvcc links libcudart_static.a).
 * Functions are named app_* so snapshots can be checked for them.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "rt_app.h"

#define NOINLINE __attribute__((noinline))

void app_report(const char *what, int code)
{
    printf("%s -> %d\n", what, code);
}

/* The fake driver's counters, found by name (the program does not link
 * the driver; the runtime loaded it). */
static void app_print_counters(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    long (*calls)(const char *) = h ? (long (*)(const char *))dlsym(h, "fake_cuda_calls") : NULL;
    long (*alloc_calls)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_alloc_calls") : NULL;
    long (*live)(void) = h ? (long (*)(void))dlsym(h, "fake_cuda_live_allocations") : NULL;
    if (!calls || !alloc_calls || !live) {
        fprintf(stderr, "fake: none\n");
        return;
    }
    fprintf(stderr, "fake: alloc_calls=%ld cuMemAlloc_v2=%ld live=%ld rt_cudaMalloc=%ld rt_live=%ld\n",
            alloc_calls(), calls("cuMemAlloc_v2"), live(), fake_cudart_calls("cudaMalloc"),
            fake_cudart_live_allocations());
}

/* ---- pattern ---------------------------------------------------------------------- */

static NOINLINE void *app_alloc_weights(void)
{
    void *p = NULL;
    app_report("cudaMalloc 1000000", cudaMalloc(&p, 1000000));
    return p;
}

static NOINLINE void *app_alloc_on_stream(cudaStream_t s)
{
    void *p = NULL;
    app_report("cudaMallocAsync 4096", cudaMallocAsync(&p, 4096, s));
    return p;
}

static NOINLINE void *app_alloc_from_pool(cudaStream_t s)
{
    void *p = NULL;
    cudaMemPool_t pool;
    app_report("cudaDeviceGetDefaultMemPool", cudaDeviceGetDefaultMemPool(&pool, 0));
    app_report("cudaMallocFromPoolAsync 12288", cudaMallocFromPoolAsync(&p, 12288, pool, s));
    return p;
}

static NOINLINE void *app_alloc_managed(void)
{
    void *p = NULL;
    app_report("cudaMallocManaged 65536", cudaMallocManaged(&p, 65536, cudaMemAttachGlobal));
    return p;
}

static NOINLINE void app_alloc_pinned(void **a, void **b)
{
    app_report("cudaMallocHost 4096", cudaMallocHost(a, 4096));
    app_report("cudaHostAlloc 8192", cudaHostAlloc(b, 8192, cudaHostAllocDefault));
}

static NOINLINE void *app_alloc_pitched(void)
{
    void *p = NULL;
    size_t pitch = 0;
    app_report("cudaMallocPitch 1000x10", cudaMallocPitch(&p, &pitch, 1000, 10));
    app_report("pitch", (int)pitch);
    return p;
}

/* The driver through the runtime's entry-point lookup. */
static NOINLINE void app_driver_entry_points(void)
{
    void *fa = NULL, *ff = NULL;
    enum cudaDriverEntryPointQueryResult q;
    /* Deprecated in CUDA 13, still what older programs call. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    app_report("cudaGetDriverEntryPoint cuMemAlloc",
               cudaGetDriverEntryPoint("cuMemAlloc", &fa, cudaEnableDefault, &q));
#pragma GCC diagnostic pop
    app_report("cudaGetDriverEntryPointByVersion cuMemFree",
               cudaGetDriverEntryPointByVersion("cuMemFree", &ff, 12000, cudaEnableDefault, &q));
    if (fa == NULL || ff == NULL)
        return;
    CUdeviceptr d = 0;
    app_report("cuMemAlloc 5000 (entry point)", ((PFN_cuMemAlloc_v3020)fa)(&d, 5000));
    app_report("cuMemFree (entry point)", ((PFN_cuMemFree_v3020)ff)(d));
}

/* What PyTorch's expandable segments do: VA reserved once, 2 MiB pieces
 * of physical memory created and mapped into it, unmapped in one call. */
static NOINLINE void app_expandable_segment(void)
{
    void *reserve, *create, *map, *access, *unmap, *release, *addr_free;
    enum cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuMemAddressReserve", &reserve, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemCreate", &create, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemMap", &map, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemSetAccess", &access, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemUnmap", &unmap, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemRelease", &release, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuMemAddressFree", &addr_free, 12000, cudaEnableDefault, &q);
    const size_t piece = 2u << 20;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2] = {0, 0};
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    app_report("cuMemAddressReserve", ((PFN_cuMemAddressReserve_v10020)reserve)(&va, 4 * piece, 0, 0, 0));
    for (int i = 0; i < 2; i++) {
        app_report("cuMemCreate", ((PFN_cuMemCreate_v10020)create)(&h[i], piece, &prop, 0));
        app_report("cuMemMap", ((PFN_cuMemMap_v10020)map)(va + i * piece, piece, 0, h[i], 0));
        app_report("cuMemSetAccess", ((PFN_cuMemSetAccess_v10020)access)(va + i * piece, piece, &acc, 1));
    }
    app_report("cuMemUnmap", ((PFN_cuMemUnmap_v10020)unmap)(va, 2 * piece));
    for (int i = 0; i < 2; i++)
        app_report("cuMemRelease", ((PFN_cuMemRelease_v10020)release)(h[i]));
    app_report("cuMemAddressFree", ((PFN_cuMemAddressFree_v10020)addr_free)(va, 4 * piece));
}

static NOINLINE void app_free_all(void *w, void *a, void *c, void *m, void *h1, void *h2,
                                  void *pp, cudaStream_t s)
{
    app_report("cudaFreeAsync", cudaFreeAsync(a, s));
    app_report("cudaFreeAsync pool", cudaFreeAsync(c, s));
    app_report("cudaFree managed", cudaFree(m));
    app_report("cudaFreeHost", cudaFreeHost(h1));
    app_report("cudaFreeHost", cudaFreeHost(h2));
    app_report("cudaFree pitched", cudaFree(pp));
    app_report("cudaFree", cudaFree(w));
}

static NOINLINE int app_pattern(void)
{
    cudaStream_t s;
    app_report("cudaFree(NULL)", cudaFree(NULL));
    app_report("cudaStreamCreate", cudaStreamCreate(&s));
    void *w = app_alloc_weights();
    void *a = app_alloc_on_stream(s);
    void *b = app_alloc_per_thread_stream();
    void *c = app_alloc_from_pool(s);
    void *m = app_alloc_managed();
    void *h1 = NULL, *h2 = NULL;
    app_alloc_pinned(&h1, &h2);
    void *pp = app_alloc_pitched();
    app_driver_entry_points();
    app_expandable_segment();
    app_free_per_thread_stream(b);
    app_free_all(w, a, c, m, h1, h2, pp, s);
    app_report("cudaStreamDestroy", cudaStreamDestroy(s));
    return 0;
}

/* ---- errors ------------------------------------------------------------------------ */

static NOINLINE void app_too_big(void)
{
    void *p = (void *)1;
    app_report("cudaMalloc 3 GiB", cudaMalloc(&p, (size_t)3 << 30));
}

static NOINLINE void app_too_big_async(cudaStream_t s)
{
    void *p = (void *)1;
    app_report("cudaMallocAsync 2 GiB", cudaMallocAsync(&p, (size_t)2 << 30, s));
}

static NOINLINE int app_errors(void)
{
    cudaStream_t s;
    app_report("cudaStreamCreate", cudaStreamCreate(&s));
    void *keep = app_alloc_weights();
    app_too_big();
    /* The runtime keeps the error until it is read, also when tidemark's
     * cache answered the call. */
    app_report("cudaPeekAtLastError", cudaPeekAtLastError());
    app_report("cudaGetLastError", cudaGetLastError());
    app_report("cudaGetLastError again", cudaGetLastError());
    app_too_big_async(s);
    app_report("cudaGetLastError", cudaGetLastError());
    int x;
    app_report("cudaFree bad pointer", cudaFree(&x));
    app_report("cudaFreeHost bad pointer", cudaFreeHost(&x));
    /* Freed twice (a block with a segment of its own), and a pointer into a
     * live block: the runtime's own error, also when tidemark's cache made
     * the memory. */
    void *twice = NULL;
    app_report("cudaMalloc 12 MiB", cudaMalloc(&twice, 12 << 20));
    app_report("cudaFree 12 MiB", cudaFree(twice));
    app_report("cudaFree 12 MiB again", cudaFree(twice));
    app_report("cudaGetLastError", cudaGetLastError());
    app_report("cudaFree inside a block", cudaFree((char *)keep + 256));
    app_report("cudaGetLastError", cudaGetLastError());
    /* FAKE_CUDA_FAIL=cuMemAllocManaged:201: not out of memory, not booked. */
    void *m = (void *)1;
    app_report("cudaMallocManaged (injected)", cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
    app_report("cudaGetLastError", cudaGetLastError());
    app_report("cudaFree", cudaFree(keep));
    app_report("cudaStreamDestroy", cudaStreamDestroy(s));
    return 0;
}

/* ---- cache ------------------------------------------------------------------------------ */

static NOINLINE int app_many_small(int rounds)
{
    void *p[8];
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 8; i++) {
            cudaError_t e = cudaMalloc(&p[i], 4096 * (size_t)(i + 1));
            if (e != cudaSuccess)
                return app_report("cudaMalloc in loop", e), -1;
            n++;
        }
        for (int i = 7; i >= 0; i--)
            if (cudaFree(p[i]) != cudaSuccess)
                return app_report("cudaFree in loop", 1), -1;
    }
    return n;
}

static NOINLINE int app_many_async(int rounds, cudaStream_t s)
{
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        void *p;
        if (cudaMallocAsync(&p, 100000, s) != cudaSuccess || cudaFreeAsync(p, s) != cudaSuccess)
            return -1;
        n++;
    }
    return n;
}

static NOINLINE int app_cache(void)
{
    cudaStream_t s;
    app_report("cudaStreamCreate", cudaStreamCreate(&s));
    int n = app_many_small(50);
    int m = app_many_async(50, s);
    app_report("device allocations made", n + m);
    app_too_big();
    app_report("cudaStreamDestroy", cudaStreamDestroy(s));
    return n < 0 || m < 0;
}

/* ---- devices (FAKE_CUDA_DEVICES=2) ------------------------------------------------------ */

static NOINLINE void *app_alloc_on_device(int device, size_t size)
{
    void *p = NULL;
    app_report("cudaSetDevice", cudaSetDevice(device));
    app_report("cudaMalloc on device", cudaMalloc(&p, size));
    return p;
}

static NOINLINE int app_devices(void)
{
    void *a = app_alloc_on_device(1, 300000);
    void *b = app_alloc_on_device(0, 200000);
    app_report("cudaSetDevice", cudaSetDevice(1));
    app_report("cudaFree", cudaFree(a));
    app_report("cudaSetDevice", cudaSetDevice(0));
    app_report("cudaFree", cudaFree(b));
    return 0;
}

/* ---- threads ------------------------------------------------------------------------ */

static void *app_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        void *p;
        if (cudaMalloc(&p, 512 * (size_t)(1 + i % 7)) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

static NOINLINE int app_threads(void)
{
    pthread_t t[4];
    int bad = 0;
    cudaFree(NULL);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, app_thread, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    app_report("threads failed", bad);
    return bad;
}

/* Device bytes in use, as cudaMemGetInfo says. */
static size_t used_bytes(void)
{
    size_t fr = 0, total = 0;
    cudaMemGetInfo(&fr, &total);
    return total - fr;
}

static int app_framework_late(void)
{
    const size_t mib = (size_t)1 << 20;
    void *p = NULL, *q = NULL;
    size_t u0 = used_bytes();
    app_report("cudaMalloc before the framework", cudaMalloc(&p, mib));
    printf("before the framework: %s\n", used_bytes() - u0 == mib ? "the driver's" : "a segment");
    const char *lib = getenv("FRAMEWORK_LIB");
    if (lib == NULL || dlopen(lib, RTLD_NOW | RTLD_GLOBAL) == NULL)
        return printf("cannot load FRAMEWORK_LIB\n"), 1;
    /* As long as a real framework's import takes, at least: cache mode
     * looks for one at most every 10 ms per thread. */
    usleep(30 * 1000);
    size_t u1 = used_bytes();
    app_report("cudaMalloc after the framework", cudaMalloc(&q, 4 * mib));
    printf("after the framework: took %zu MiB\n", (used_bytes() - u1) / mib);
    app_report("cudaFree of the first block", cudaFree(p));
    printf("after the first free: %zu MiB in use\n", (used_bytes() - u0) / mib);
    app_report("cudaFree of the second block", cudaFree(q));
    printf("after both frees: %zu bytes in use\n", used_bytes() - u0);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pattern";
    int rc;
    if (strcmp(what, "pattern") == 0)
        rc = app_pattern();
    else if (strcmp(what, "errors") == 0)
        rc = app_errors();
    else if (strcmp(what, "cache") == 0)
        rc = app_cache();
    else if (strcmp(what, "threads") == 0)
        rc = app_threads();
    else if (strcmp(what, "devices") == 0)
        rc = app_devices();
    else if (strcmp(what, "framework_late") == 0)
        rc = app_framework_late();
    else
        return fprintf(stderr, "rt_app: unknown scenario %s\n", what), 2;
    fflush(stdout);
    app_print_counters();
    return rc;
}
