/* tests/hooks/hip/hip_app.c: an ordinary HIP program for the hook tests.
 *
 * It knows nothing of tidemark: it is linked against libamdhip64 (the real
 * one when installed) and run as is, with or without
 * LD_PRELOAD=libtidemark_preload.so, on the fake library
 * (LD_LIBRARY_PATH) or on the real one.  Each allocation is made in a
 * function of its own, so the tests can check that stacks start at the
 * program's function.  It prints every return code, so a run under the
 * preload can be compared with a run without it.
 *
 *   hip_app pattern   one call of every hooked kind, then frees them all
 *   hip_app errors    calls that fail: the codes must come back unchanged
 *   hip_app oom       runs the device out of memory (FAKE_HIP_CAPACITY)
 *   hip_app cache     many small allocations and frees (cache mode test)
 *   hip_app threads   4 threads allocating and freeing at once
 *   hip_app expand    30 + 8 MiB freed on the null stream, then 50 MiB on
 *                     another stream (of a 64 MiB device: expandable
 *                     segments must give back the first stream's pages)
 *   hip_app nogpu     what a program does first on a machine without GPU
 *   hip_app pools     stream-ordered pools that keep freed memory: the
 *                     default pool (threshold raised, as PyTorch does), a
 *                     pool of the program's own made current, a trim
 *   hip_app shared    memory mapped but not allocated here: an IPC handle
 *                     opened, a shareable handle imported, one physical
 *                     allocation mapped twice
 *   hip_app many_maps 4100 pages of 2 MiB made and mapped (more than a
 *                     4096-entry table holds), then one more mapping of
 *                     the first page and an imported handle's (needs
 *                     FAKE_HIP_CAPACITY of 9 GiB or more)
 * (pools, shared and many_maps leave memory live for the snapshot at exit.)
 *
 * With the fake library it also prints the fake's counters (looked up with
 * dlsym: they exist only in the fake).
 */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_hip.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define NOINLINE __attribute__((noinline, used))
/* Keeps a call from being the last thing a function does, so the
 * function's own frame is on the stack while the call runs. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* Not static: the names must stay as written in the symbol table. */
void alloc_weights(void);
void alloc_activations(void);
void alloc_managed(void);
void alloc_fine_grained(void);
void alloc_from_pool(void);
void alloc_pinned(void);
void map_virtual(void);
void unmap_virtual(void);
void release_everything(void);
void alloc_survivor(void);
void alloc_too_much(void);
void create_too_much(void);
void alloc_small_blocks(void **blocks, hipStream_t s);
void free_small_blocks(void **blocks, hipStream_t s);
void app_pools(void);
void app_shared(void);
void app_many_maps(void);

static void say(const char *what, hipError_t r)
{
    printf("%s -> %d\n", what, (int)r);
}

/* ---- pattern ------------------------------------------------------------ */

static void *w, *a, *m, *e, *pp, *h;
static hipStream_t s1;

NOINLINE void alloc_weights(void)
{
    say("hipMalloc(1000000)", hipMalloc(&w, 1000000));
    KEEP_FRAME();
}

NOINLINE void alloc_activations(void)
{
    say("hipMallocAsync(4096, s1)", hipMallocAsync(&a, 4096, s1));
    KEEP_FRAME();
}

NOINLINE void alloc_managed(void)
{
    say("hipMallocManaged(65536)", hipMallocManaged(&m, 65536, hipMemAttachGlobal));
    KEEP_FRAME();
}

NOINLINE void alloc_fine_grained(void)
{
    say("hipExtMallocWithFlags(3000)", hipExtMallocWithFlags(&e, 3000, hipDeviceMallocFinegrained));
    KEEP_FRAME();
}

NOINLINE void alloc_from_pool(void)
{
    hipMemPool_t pool;
    say("hipDeviceGetDefaultMemPool", hipDeviceGetDefaultMemPool(&pool, 0));
    say("hipMallocFromPoolAsync(8192, s1)", hipMallocFromPoolAsync(&pp, 8192, pool, s1));
    KEEP_FRAME();
}

NOINLINE void alloc_pinned(void)
{
    say("hipHostMalloc(512)", hipHostMalloc(&h, 512, 0));
    KEEP_FRAME();
}

static void *va;
static hipMemGenericAllocationHandle_t phys;

NOINLINE void map_virtual(void)
{
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    say("hipMemAddressReserve(4 MiB)", hipMemAddressReserve(&va, 4 << 20, 0, NULL, 0));
    say("hipMemCreate(2 MiB)", hipMemCreate(&phys, 2 << 20, &prop, 0));
    say("hipMemMap(2 MiB)", hipMemMap(va, 2 << 20, 0, phys, 0));
    KEEP_FRAME();
}

NOINLINE void unmap_virtual(void)
{
    say("hipMemUnmap(2 MiB)", hipMemUnmap(va, 2 << 20));
    say("hipMemRelease", hipMemRelease(phys));
    say("hipMemAddressFree", hipMemAddressFree(va, 4 << 20));
    KEEP_FRAME();
}

NOINLINE void release_everything(void)
{
    say("hipFreeAsync(a, s1)", hipFreeAsync(a, s1));
    say("hipFree(w)", hipFree(w));
    say("hipFree(m)", hipFree(m));
    say("hipFree(e)", hipFree(e));
    say("hipFreeAsync(pp, s1)", hipFreeAsync(pp, s1));
    say("hipHostFree(h)", hipHostFree(h));
    KEEP_FRAME();
}

static void pattern(void)
{
    say("hipSetDevice(0)", hipSetDevice(0));
    say("hipStreamCreate", hipStreamCreate(&s1));
    alloc_weights();
    alloc_activations();
    alloc_managed();
    alloc_fine_grained();
    alloc_from_pool();
    alloc_pinned();
    map_virtual();
    unmap_virtual();
    release_everything();
    say("hipStreamSynchronize", hipStreamSynchronize(s1));
    say("hipStreamDestroy", hipStreamDestroy(s1));
}

/* ---- errors ---------------------------------------------------------------- */

NOINLINE void alloc_survivor(void)
{
    say("hipMalloc(2048)", hipMalloc(&w, 2048));
    KEEP_FRAME();
}

static void errors(void)
{
    int bogus;
    void *p = NULL;
    say("hipMalloc(NULL, 16)", hipMalloc(NULL, 16));
    say("hipMalloc(&p, 0)", hipMalloc(&p, 0));
    printf("p after size 0: %s\n", p ? "set" : "NULL");
    say("hipFree(bogus)", hipFree(&bogus));
    say("hipFree(NULL)", hipFree(NULL));
    say("hipHostFree(bogus)", hipHostFree(&bogus));
    say("hipFreeAsync(bogus)", hipFreeAsync(&bogus, NULL));
    /* Freed twice, and a pointer into a live block: HIP's own error, also
     * when tidemark's cache made the memory. */
    void *twice = NULL, *live = NULL;
    say("hipGetLastError (clears)", hipGetLastError());
    say("hipGetLastError (cleared)", hipGetLastError());
    say("hipMalloc(1 MiB)", hipMalloc(&twice, 1 << 20));
    say("hipMalloc(4096)", hipMalloc(&live, 4096));
    say("hipFree(1 MiB)", hipFree(twice));
    say("hipFree(1 MiB) again", hipFree(twice));
    /* HIP keeps the error until it is read, also when tidemark's cache
     * answered the call. */
    say("hipPeekAtLastError", hipPeekAtLastError());
    say("hipGetLastError", hipGetLastError());
    say("hipFree(inside a block)", hipFree((char *)live + 256));
    say("hipGetLastError", hipGetLastError());
    say("hipFree(4096)", hipFree(live));
    say("hipExtMallocWithFlags(bad flags)", hipExtMallocWithFlags(&p, 64, 0x80));
    say("hipMallocFromPoolAsync(NULL pool)", hipMallocFromPoolAsync(&p, 64, NULL, NULL));
    say("hipMemCreate(NULL prop)", hipMemCreate(NULL, 64, NULL, 0));
    say("hipMemMap(NULL)", hipMemMap(NULL, 64, 0, NULL, 0));
    say("hipMemUnmap(bogus)", hipMemUnmap(&bogus, 64));
    say("hipMemRelease(NULL)", hipMemRelease(NULL));
    say("hipSetDevice(7)", hipSetDevice(7));
    /* Injected with FAKE_HIP_FAIL by the test: */
    say("hipMallocAsync(injected)", hipMallocAsync(&p, 4096, NULL));
    say("hipMallocManaged(injected)", hipMallocManaged(&p, 4096, hipMemAttachGlobal));
    alloc_survivor();
    say("hipFree(survivor)", hipFree(w));
}

/* ---- out of memory --------------------------------------------------------------- */

NOINLINE void alloc_too_much(void)
{
    void *p = NULL;
    say("hipMalloc(10 MiB) again", hipMalloc(&p, 10 << 20));
    KEEP_FRAME();
}

NOINLINE void create_too_much(void)
{
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    hipMemGenericAllocationHandle_t hdl;
    say("hipMemCreate(32 MiB)", hipMemCreate(&hdl, 32 << 20, &prop, 0));
    KEEP_FRAME();
}

static void oom(void)
{
    say("hipMalloc(10 MiB)", hipMalloc(&w, 10 << 20));
    alloc_too_much();
    say("hipGetLastError", hipGetLastError());
    say("hipGetLastError again", hipGetLastError());
    create_too_much();
    say("hipFree(10 MiB)", hipFree(w));
}

/* ---- cache ---------------------------------------------------------------------- */

#define ROUNDS 4
#define PER_ROUND 50

NOINLINE void alloc_small_blocks(void **blocks, hipStream_t s)
{
    for (int i = 0; i < PER_ROUND; i++) {
        hipError_t r = i % 2 ? hipMallocAsync(&blocks[i], 1000 + 8 * (size_t)i, s)
                             : hipMalloc(&blocks[i], 1000 + 8 * (size_t)i);
        if (r != hipSuccess)
            say("small allocation", r);
    }
    KEEP_FRAME();
}

NOINLINE void free_small_blocks(void **blocks, hipStream_t s)
{
    for (int i = 0; i < PER_ROUND; i++) {
        hipError_t r = i % 2 ? hipFreeAsync(blocks[i], s) : hipFree(blocks[i]);
        if (r != hipSuccess)
            say("small free", r);
    }
    KEEP_FRAME();
}

static void cache(void)
{
    void *blocks[PER_ROUND];
    hipStream_t s;
    say("hipStreamCreate", hipStreamCreate(&s));
    for (int round = 0; round < ROUNDS; round++) {
        alloc_small_blocks(blocks, s);
        free_small_blocks(blocks, s);
    }
    printf("app allocations: %d\n", ROUNDS * PER_ROUND);
    say("hipStreamDestroy", hipStreamDestroy(s));
}

/* ---- expand ------------------------------------------------------------------------ */

static void expand(void)
{
    void *first = NULL, *second = NULL;
    hipStream_t s;
    say("hipStreamCreate", hipStreamCreate(&s));
    say("hipMalloc(30 MiB)", hipMalloc(&first, 30 << 20));
    say("hipMalloc(8 MiB)", hipMalloc(&second, 8 << 20));
    say("hipFree(30 MiB)", hipFree(first));
    say("hipFree(8 MiB)", hipFree(second));
    say("hipMallocAsync(50 MiB)", hipMallocAsync(&first, 50 << 20, s));
    say("hipFreeAsync(50 MiB)", hipFreeAsync(first, s));
    say("hipStreamSynchronize", hipStreamSynchronize(s));
    /* Whatever failed inside a cache that then succeeded is not ours. */
    say("hipGetLastError", hipGetLastError());
    say("hipStreamDestroy", hipStreamDestroy(s));
}

/* ---- threads -------------------------------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 500

static void *thread_body(void *arg)
{
    (void)arg;
    int failures = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        void *p = NULL;
        failures += hipMalloc(&p, 256 + (size_t)i) != hipSuccess;
        failures += hipFree(p) != hipSuccess;
    }
    return (void *)(long)failures;
}

static void threads(void)
{
    pthread_t t[THREADS];
    long failures = 0;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, thread_body, NULL);
    for (int i = 0; i < THREADS; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    printf("thread failures: %ld\n", failures);
}

/* ---- pools and shared memory ------------------------------------------------------ */

static void pool_report(const char *what, hipMemPool_t pool)
{
    uint64_t reserved = 0, used = 0;
    hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved);
    hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &used);
    printf("%s: pool reserved %llu used %llu\n", what, (unsigned long long)reserved,
           (unsigned long long)used);
}

NOINLINE void app_pools(void)
{
    const size_t mib = 1u << 20;
    hipMemPool_t def, mine;
    void *one = NULL, *two = NULL, *four = NULL;
    hipStream_t s;
    say("hipStreamCreate", hipStreamCreate(&s));
    say("hipDeviceGetDefaultMemPool", hipDeviceGetDefaultMemPool(&def, 0));
    uint64_t keep_all = UINT64_MAX; /* PyTorch's backend:cudaMallocAsync */
    say("hipMemPoolSetAttribute threshold",
        hipMemPoolSetAttribute(def, hipMemPoolAttrReleaseThreshold, &keep_all));
    say("hipMallocAsync 1 MiB", hipMallocAsync(&one, mib, s));
    say("hipMallocAsync 2 MiB", hipMallocAsync(&two, 2 * mib, s));
    say("hipFreeAsync 1 MiB", hipFreeAsync(one, s));
    say("hipFreeAsync 2 MiB", hipFreeAsync(two, s));
    say("hipStreamSynchronize", hipStreamSynchronize(s));
    pool_report("default after frees", def);
    /* A pool of the program's own, made the device's current pool: kept
     * 4 MiB, then trimmed away. */
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypePinned;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    say("hipMemPoolCreate", hipMemPoolCreate(&mine, &props));
    say("hipMemPoolSetAttribute threshold",
        hipMemPoolSetAttribute(mine, hipMemPoolAttrReleaseThreshold, &keep_all));
    say("hipDeviceSetMemPool", hipDeviceSetMemPool(0, mine));
    say("hipMallocAsync 4 MiB", hipMallocAsync(&four, 4 * mib, s));
    say("hipFreeAsync 4 MiB", hipFreeAsync(four, s));
    pool_report("mine after free", mine);
    say("hipMemPoolTrimTo 0", hipMemPoolTrimTo(mine, 0));
    pool_report("mine after trim", mine);
    say("hipDeviceSetMemPool default", hipDeviceSetMemPool(0, def));
    say("hipMemPoolDestroy", hipMemPoolDestroy(mine));
    /* One allocation still live at the dump, from the default pool's
     * idle memory. */
    say("hipMallocAsync 1 MiB again", hipMallocAsync(&one, mib, s));
    pool_report("default at the end", def);
    /* The threshold lowered, and the idle memory given back through no
     * call the hooks see: the snapshot at exit must read the pool again. */
    uint64_t keep_none = 0;
    say("hipMemPoolSetAttribute threshold 0",
        hipMemPoolSetAttribute(def, hipMemPoolAttrReleaseThreshold, &keep_none));
    void (*release)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "fake_hip_pool_release_unseen");
    if (release)
        release();
    pool_report("default after an unseen release", def);
    KEEP_FRAME();
}

NOINLINE void app_shared(void)
{
    const size_t mib = 1u << 20;
    void *mine = NULL, *opened = NULL, *twice = NULL, *range = NULL;
    hipIpcMemHandle_t ipc;
    say("hipMalloc 1 MiB", hipMalloc(&mine, mib));
    say("hipIpcGetMemHandle", hipIpcGetMemHandle(&ipc, mine));
    say("hipIpcOpenMemHandle",
        hipIpcOpenMemHandle(&opened, ipc, hipIpcMemLazyEnablePeerAccess));
    say("hipIpcOpenMemHandle again",
        hipIpcOpenMemHandle(&twice, ipc, hipIpcMemLazyEnablePeerAccess));
    say("hipIpcCloseMemHandle", hipIpcCloseMemHandle(twice));
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    hipMemGenericAllocationHandle_t own, imported;
    char *base;
    say("hipMemAddressReserve", hipMemAddressReserve(&range, 8 * mib, 0, NULL, 0));
    base = range;
    say("hipMemCreate 2 MiB", hipMemCreate(&own, 2 * mib, &prop, 0));
    say("hipMemMap", hipMemMap(base, 2 * mib, 0, own, 0));
    say("hipMemMap the same again", hipMemMap(base + 2 * mib, 2 * mib, 0, own, 0));
    int fd = -1;
    say("hipMemExportToShareableHandle",
        hipMemExportToShareableHandle(&fd, own, hipMemHandleTypePosixFileDescriptor, 0));
    say("hipMemImportFromShareableHandle",
        hipMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                        hipMemHandleTypePosixFileDescriptor));
    say("hipMemMap imported", hipMemMap(base + 4 * mib, 2 * mib, 0, imported, 0));
    /* A mapping that comes and goes is listed no more. */
    say("hipMemMap imported again", hipMemMap(base + 6 * mib, 2 * mib, 0, imported, 0));
    say("hipMemUnmap imported again", hipMemUnmap(base + 6 * mib, 2 * mib));
    KEEP_FRAME();
}

NOINLINE void app_many_maps(void)
{
    enum { PAGES = 4100 };
    const size_t page = (size_t)2 << 20;
    void *range = NULL;
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    say("hipMemAddressReserve", hipMemAddressReserve(&range, (PAGES + 2) * page, 0, NULL, 0));
    char *base = range;
    hipMemGenericAllocationHandle_t first = NULL, imported = NULL;
    int created = 0, mapped = 0;
    for (int i = 0; i < PAGES; i++) {
        hipMemGenericAllocationHandle_t ph = NULL;
        created += hipMemCreate(&ph, page, &prop, 0) == hipSuccess;
        mapped += hipMemMap(base + (size_t)i * page, page, 0, ph, 0) == hipSuccess;
        if (i == 0)
            first = ph;
    }
    printf("hipMemCreate x%d -> %d made, hipMemMap -> %d mapped\n", PAGES, created, mapped);
    say("hipMemMap the first page again", hipMemMap(base + (size_t)PAGES * page, page, 0, first, 0));
    int fd = -1;
    say("hipMemExportToShareableHandle",
        hipMemExportToShareableHandle(&fd, first, hipMemHandleTypePosixFileDescriptor, 0));
    say("hipMemImportFromShareableHandle",
        hipMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                        hipMemHandleTypePosixFileDescriptor));
    say("hipMemMap imported", hipMemMap(base + (size_t)(PAGES + 1) * page, page, 0, imported, 0));
    KEEP_FRAME();
}

/* ---- no GPU ------------------------------------------------------------------------------ */

static void nogpu(void)
{
    int count = -1;
    void *p = NULL;
    say("hipGetDeviceCount", hipGetDeviceCount(&count));
    printf("count = %d\n", count);
    say("hipMalloc(1024)", hipMalloc(&p, 1024));
    say("hipMallocAsync(1024)", hipMallocAsync(&p, 1024, NULL));
    say("hipHostMalloc(1024)", hipHostMalloc(&p, 1024, 0));
    say("hipMallocManaged(1024)", hipMallocManaged(&p, 1024, hipMemAttachGlobal));
    say("hipFree(NULL)", hipFree(NULL));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pattern";
    if (strcmp(what, "pattern") == 0)
        pattern();
    else if (strcmp(what, "errors") == 0)
        errors();
    else if (strcmp(what, "oom") == 0)
        oom();
    else if (strcmp(what, "cache") == 0)
        cache();
    else if (strcmp(what, "threads") == 0)
        threads();
    else if (strcmp(what, "expand") == 0)
        expand();
    else if (strcmp(what, "nogpu") == 0)
        nogpu();
    else if (strcmp(what, "pools") == 0)
        app_pools();
    else if (strcmp(what, "shared") == 0)
        app_shared();
    else if (strcmp(what, "many_maps") == 0)
        app_many_maps();
    else {
        fprintf(stderr, "hip_app: unknown scenario %s\n", what);
        return 2;
    }
    fake_hip_calls_fn calls = (fake_hip_calls_fn)dlsym(RTLD_DEFAULT, "fake_hip_calls");
    fake_hip_live_allocations_fn live =
        (fake_hip_live_allocations_fn)dlsym(RTLD_DEFAULT, "fake_hip_live_allocations");
    if (calls && live) {
        /* stderr: the stdout of runs with and without the preload must be
         * equal, and these counts differ in cache mode. */
        fprintf(stderr,
                "fake: hipMalloc=%ld hipMallocAsync=%ld hipFree=%ld hipFreeAsync=%ld "
                "hipMemCreate=%ld hipMemMap=%ld hipMemUnmap=%ld hipMemRelease=%ld live=%ld\n",
                calls("hipMalloc"), calls("hipMallocAsync"), calls("hipFree"),
                calls("hipFreeAsync"), calls("hipMemCreate"), calls("hipMemMap"),
                calls("hipMemUnmap"), calls("hipMemRelease"), live());
    }
    return 0;
}
