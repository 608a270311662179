/* tests/hooks/cuda/sem_app.c: a CUDA driver API program (linked with the
 * fake libcuda.so.1) that checks, itself, that what it computes is what
 * NVIDIA documents, whoever serves its memory.  Run alone it checks the
 * fake driver against the documentation; run under the preload (observe
 * and cache mode, test_cuda.sh scenarios sem_*) it checks that tidemark
 * changed nothing.  It prints "ok", or a "FAIL:" line per broken promise
 * and exits 1.
 *
 *   sem_app ptds        "it gives each host thread its own default stream"
 *                       (Programming Guide): a block thread A freed on its
 *                       per-thread stream, with A's work still queued, is
 *                       not handed to thread B's per-thread stream
 *   sem_app stream_free cuMemFreeAsync(p, s2) of a block of s1: not reused
 *                       on s1 before s2's work queued before the free ran
 *   sem_app free_sync   cuMemFree "may perform implicit synchronization"
 *                       for memory not stream-ordered (what cudaFree's
 *                       callers rely on, and a static cudart's cudaFree is
 *                       cuMemFree): freed memory is never handed out again
 *                       while work queued before the free may still use it
 *   sem_app ipc         cuIpcGetMemHandle "Gets an interprocess memory
 *                       handle for an existing device memory allocation";
 *                       the peer maps that allocation: what it opens must
 *                       stand for the exported pointer (or the export fails);
 *                       buffers of $NCCL_LIB and $NCCL_RT_LIB (named as
 *                       NCCL, over the driver and the runtime) and of
 *                       $IPC_EXPORTER_LIB (it imports the export and makes
 *                       it) are always exported; those of $IPC_NAMED_LIB
 *                       and the program's own (it looks the export up with
 *                       cuGetProcAddress) may be refused
 *   sem_app async_device "cuMemAllocAsync allocates from the current
 *                       mempool of the provided stream's device", not the
 *                       current context's (needs FAKE_CUDA_DEVICES=2)
 *   sem_app ctx         "each context has its own distinct address space":
 *                       memory allocated with a cuCtxCreate context current
 *                       is usable by that context's kernels
 *   sem_app reset       cuDevicePrimaryCtxReset: "Destroy all allocations":
 *                       memory allocated after it is live, memory freed
 *                       before it is never handed out again
 *   sem_app reset_live  the same, the destroyed allocation never freed: the
 *                       snapshot must not keep it live
 *   sem_app capture     during a relaxed stream capture begun through the
 *                       driver, an impossible cuMemAlloc frees no memory
 *                       the program did not free
 *   sem_app setpool     cuMemSetMemPool (CUDA 13) makes a pool current: the
 *                       stream's cuMemAllocAsync comes from it
 *   sem_app framework   with a framework's caching allocator loaded
 *                       ($FRAMEWORK_LIB), memory freed is free again for
 *                       cuMemGetInfo
 *   sem_app framework_late the same framework loaded only after a first
 *                       allocation: what is allocated after it comes from
 *                       the driver, and the earlier block's free gives its
 *                       memory back for cuMemGetInfo
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

#define MiB ((size_t)1 << 20)

static int failed;
static CUcontext primary0;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAIL: " __VA_ARGS__);                                      \
            printf("\n");                                                      \
            failed = 1;                                                        \
        }                                                                      \
    } while (0)
#define OK(call)                                                               \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        CHECK(r_ == CUDA_SUCCESS, "%s -> %d", #call, (int)r_);                 \
    } while (0)

static void *lookup(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (cuGetProcAddress(name, &fn, version, flags, &q) != CUDA_SUCCESS || fn == NULL) {
        printf("FAIL: no %s\n", name);
        exit(1);
    }
    return fn;
}

/* ---- ptds ------------------------------------------------------------- */

static pthread_barrier_t bar;
static CUdeviceptr a_block, b_block;

static void *thread_a(void *arg)
{
    (void)arg;
    OK(cuCtxSetCurrent(primary0));
    OK(cuMemAllocAsync(&a_block, MiB, CU_STREAM_PER_THREAD));
    fake_cuda_stream_enqueue(CU_STREAM_PER_THREAD); /* a kernel of A reads it */
    OK(cuMemFreeAsync(a_block, CU_STREAM_PER_THREAD));
    pthread_barrier_wait(&bar); /* B allocates */
    pthread_barrier_wait(&bar);
    CHECK(b_block != a_block || fake_cuda_stream_pending(CU_STREAM_PER_THREAD) == 0,
          "thread B's per-thread stream got %#llx, freed on thread A's while A's work on it "
          "was queued", (unsigned long long)a_block);
    fake_cuda_stream_complete(CU_STREAM_PER_THREAD);
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    PFN_cuMemAllocAsync_v11020_ptsz alloc_pt = (PFN_cuMemAllocAsync_v11020_ptsz)lookup(
        "cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    PFN_cuMemFreeAsync_v11020_ptsz free_pt = (PFN_cuMemFreeAsync_v11020_ptsz)lookup(
        "cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    OK(cuCtxSetCurrent(primary0));
    pthread_barrier_wait(&bar);
    /* Per thread: A's queued work is not on B's per-thread stream. */
    CHECK(fake_cuda_stream_pending(CU_STREAM_PER_THREAD) == 0,
          "thread B's per-thread stream holds thread A's work");
    OK(alloc_pt(&b_block, MiB, NULL)); /* 0 in a _ptsz call: B's per-thread stream */
    pthread_barrier_wait(&bar);
    OK(free_pt(b_block, NULL));
    return NULL;
}

static void app_ptds(void)
{
    pthread_t a, b;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&bar);
}

/* ---- stream_free ---------------------------------------------------------- */

static void app_stream_free(void)
{
    CUstream s1, s2;
    CUdeviceptr p, q;
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(cuMemAllocAsync(&p, MiB, s1));
    fake_cuda_stream_enqueue(s2); /* a kernel on s2 reads p */
    OK(cuMemFreeAsync(p, s2));
    OK(cuMemAllocAsync(&q, MiB, s1));
    CHECK(q != p || fake_cuda_stream_pending(s2) == 0,
          "block freed on s2 handed out on s1 while s2's work was queued");
    fake_cuda_stream_complete(s2);
    OK(cuMemFreeAsync(q, s1));
    OK(cuStreamSynchronize(s1));
    OK(cuStreamDestroy(s1));
    OK(cuStreamDestroy(s2));
}

/* ---- free_sync ------------------------------------------------------------ */

static void app_free_sync(void)
{
    CUstream s;
    CUdeviceptr p, q;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&p, MiB));
    fake_cuda_stream_enqueue(s); /* a kernel on s still reads p */
    OK(cuMemFree(p));
    OK(cuMemAlloc(&q, MiB));
    CHECK(q != p || fake_cuda_stream_pending(s) == 0,
          "cuMemFree'd %#llx handed out again while work queued before the free may use it",
          (unsigned long long)p);
    fake_cuda_stream_complete(s);
    OK(cuMemFree(q));
    OK(cuStreamDestroy(s));
}

/* ---- ipc ---------------------------------------------------------------------- */

/* The program reaches the IPC functions through cuGetProcAddress, so that
 * it imports none: cache mode leaves every allocation of an object that
 * imports the export to the driver (hooks/preload/cuda_ipc.c), and the
 * other scenarios need the cache serving this program. */
static PFN_cuIpcGetMemHandle_v4010 ipc_get;
static PFN_cuIpcOpenMemHandle_v11000 ipc_open;
static PFN_cuIpcCloseMemHandle_v4010 ipc_close;
typedef int (*exporter_fn)(CUipcMemHandle *, CUdeviceptr);

static int program_export(CUipcMemHandle *h, CUdeviceptr p)
{
    return (int)ipc_get(h, p);
}

/* Exports p (by `exporter`) and opens the handle as the peer would: what
 * the peer maps must stand for `expect` (the allocation's base, which is
 * p itself for a buffer the program allocated), or the export must fail;
 * `must`: the export must succeed (NCCL's buffers: NCCL does not survive
 * a refusal). */
static void export_one(const char *name, exporter_fn exporter, CUdeviceptr p, CUdeviceptr expect,
                       int must)
{
    CUipcMemHandle h;
    CUresult r = (CUresult)exporter(&h, p);
    printf("ipc export %s -> %s\n", name, r == CUDA_SUCCESS ? "ok" : "refused");
    CHECK(r == CUDA_SUCCESS || !must, "the export of %s refused (%d)", name, (int)r);
    if (r != CUDA_SUCCESS)
        return; /* refused: the peer never sees a wrong address */
    CUdeviceptr o = 0;
    OK(ipc_open(&o, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(fake_cuda_ipc_source(o) == expect,
          "the peer's mapping of %s stands for %#llx, not the exported %#llx", name,
          fake_cuda_ipc_source(o), (unsigned long long)expect);
    OK(ipc_close(o));
}

/* Two buffers from the library at $VAR (fake_ipc_lib.c), each exported:
 * by the library when it makes its own exports, else by the program. */
static void export_from_library(const char *var, const char *name, int must)
{
    const char *path = getenv(var);
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    int (*alloc)(CUdeviceptr *, size_t) =
        lib ? (int (*)(CUdeviceptr *, size_t))dlsym(lib, "fake_ipc_lib_alloc") : NULL;
    if (alloc == NULL) {
        printf("FAIL: cannot load %s (%s)\n", var, path ? dlerror() : "unset");
        failed = 1;
        return;
    }
    exporter_fn exporter = (exporter_fn)dlsym(lib, "fake_ipc_lib_export");
    if (exporter == NULL)
        exporter = program_export;
    CUdeviceptr a, b;
    char label[64];
    CHECK(alloc(&a, MiB) == CUDA_SUCCESS, "%s: first allocation", name);
    CHECK(alloc(&b, MiB) == CUDA_SUCCESS, "%s: second allocation", name);
    snprintf(label, sizeof label, "%s first", name);
    export_one(label, exporter, a, a, must);
    snprintf(label, sizeof label, "%s second", name);
    export_one(label, exporter, b, b, must);
    OK(cuMemFree(a));
    OK(cuMemFree(b));
}

static void app_ipc(void)
{
    ipc_get = (PFN_cuIpcGetMemHandle_v4010)lookup("cuIpcGetMemHandle", 4010, 0);
    ipc_open = (PFN_cuIpcOpenMemHandle_v11000)lookup("cuIpcOpenMemHandle", 11000, 0);
    ipc_close = (PFN_cuIpcCloseMemHandle_v4010)lookup("cuIpcCloseMemHandle", 4010, 0);
    CUdeviceptr a, b;
    OK(cuMemAlloc(&a, MiB));
    OK(cuMemAlloc(&b, MiB));
    export_one("first", program_export, a, a, 0);
    export_one("second", program_export, b, b, 0);
    /* The handle names the allocation containing the pointer: a pointer
     * into a gives the peer a's base (the fake against the sentence). */
    export_one("inside first", program_export, a + 4096, a, 0);
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    export_from_library("NCCL_LIB", "nccl", 1);
    export_from_library("NCCL_RT_LIB", "nccl runtime", 1);
    export_from_library("IPC_EXPORTER_LIB", "exporter", 1);
    export_from_library("IPC_NAMED_LIB", "named", 0);
}

/* ---- async_device --------------------------------------------------------------- */

static void app_async_device(void)
{
    CUcontext c1;
    CUstream s1;
    CUdeviceptr p;
    int dev = -1;
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cuCtxSetCurrent(c1));
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING)); /* a stream of device 1 */
    OK(cuCtxSetCurrent(primary0));
    OK(cuMemAllocAsync(&p, MiB, s1)); /* with device 0's context current */
    OK(cuPointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    CHECK(dev == 1, "cuMemAllocAsync on a stream of device 1 gave memory of device %d", dev);
    OK(cuCtxSetCurrent(c1));
    CHECK(fake_cuda_ptr_usable((void *)(uintptr_t)p), "device 1 cannot use the memory");
    OK(cuMemFreeAsync(p, s1));
    OK(cuStreamSynchronize(s1));
    OK(cuStreamDestroy(s1));
    OK(cuCtxSetCurrent(primary0));
    OK(cuDevicePrimaryCtxRelease(1));
}

/* ---- ctx ------------------------------------------------------------------------- */

static void app_ctx(void)
{
    CUcontext c;
    CUdeviceptr p, q;
    OK(cuCtxCreate(&c, NULL, 0, 0)); /* current from here */
    OK(cuMemAlloc(&p, MiB));
    CHECK(fake_cuda_ptr_usable((void *)(uintptr_t)p),
          "memory allocated in a cuCtxCreate context is not that context's");
    OK(cuMemFree(p));
    OK(cuMemAlloc(&q, 4096));
    CHECK(fake_cuda_ptr_usable((void *)(uintptr_t)q), "small allocation: not the context's");
    OK(cuMemFree(q));
    OK(cuCtxDestroy(c));
    OK(cuCtxSetCurrent(primary0));
    OK(cuMemAlloc(&p, MiB));
    CHECK(fake_cuda_ptr_usable((void *)(uintptr_t)p), "primary context's memory not usable");
    OK(cuMemFree(p));
}

/* ---- reset ----------------------------------------------------------------------- */

static void app_reset(void)
{
    CUdeviceptr freed, live, q;
    CUcontext c;
    OK(cuMemAlloc(&freed, MiB));
    OK(cuMemAlloc(&live, MiB));
    OK(cuMemFree(freed));
    OK(cuDevicePrimaryCtxReset(0));
    CHECK(!fake_cuda_ptr_usable((void *)(uintptr_t)live), "the reset left an allocation alive");
    /* What the reset destroyed is no allocation any more (asked before
     * anything new is allocated, which may get the same address). */
    printf("cuMemFree of memory the reset destroyed -> %d\n", (int)cuMemFree(live));
    OK(cuDevicePrimaryCtxRetain(&c, 0));
    OK(cuCtxSetCurrent(c));
    OK(cuMemAlloc(&q, MiB));
    CHECK(fake_cuda_ptr_usable((void *)(uintptr_t)q),
          "memory allocated after the reset (%#llx) is not live", (unsigned long long)q);
    OK(cuMemFree(q));
    OK(cuDevicePrimaryCtxRelease(0));
}

/* The program never frees what the reset destroyed: its books must not
 * keep it (test_cuda.sh reads the snapshot at exit). */
static void app_reset_live(void)
{
    CUdeviceptr live;
    CUcontext c;
    OK(cuMemAlloc(&live, MiB));
    OK(cuDevicePrimaryCtxReset(0));
    CHECK(!fake_cuda_ptr_usable((void *)(uintptr_t)live), "the reset left an allocation alive");
    OK(cuDevicePrimaryCtxRetain(&c, 0));
    OK(cuDevicePrimaryCtxRelease(0));
}

/* ---- capture --------------------------------------------------------------------- */

static void app_capture(void)
{
    CUstream s;
    CUdeviceptr c, h = 0, g;
    CUgraph graph = NULL;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&c, 8 * MiB));
    OK(cuMemFree(c));
    long frees = fake_cuda_calls("cuMemFree_v2");
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult r = cuMemAlloc(&h, (size_t)1 << 40);
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "an impossible cuMemAlloc -> %d", (int)r);
    OK(cuMemAllocAsync(&g, MiB, s)); /* an allocation node of the graph */
    OK(cuMemFreeAsync(g, s));
    OK(cuStreamEndCapture(s, &graph));
    CHECK(graph != NULL, "the capture was invalidated");
    CHECK(fake_cuda_calls("cuMemFree_v2") == frees, "%ld cuMemFree calls during the capture",
          fake_cuda_calls("cuMemFree_v2") - frees);
    CHECK(fake_cuda_capture_violations() == 0, "%ld calls CUDA forbids during a capture",
          fake_cuda_capture_violations());
    OK(cuStreamDestroy(s));
}

/* ---- setpool ------------------------------------------------------------------------ */

static void app_setpool(void)
{
#if CUDA_VERSION >= 13000
    CUmemoryPool mine, dflt;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUstream s;
    CUdeviceptr p;
    cuuint64_t used = 0;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuDeviceGetDefaultMemPool(&dflt, 0));
    OK(cuMemPoolCreate(&mine, &props));
    OK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, mine));
    OK(cuMemAllocAsync(&p, 4 * MiB, s));
    OK(cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    CHECK(used == 4 * MiB, "the pool made current by cuMemSetMemPool holds %llu bytes, not 4 MiB",
          (unsigned long long)used);
    OK(cuMemFreeAsync(p, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, dflt));
    OK(cuMemPoolDestroy(mine));
    OK(cuStreamDestroy(s));
#else
    printf("headers before CUDA 13: no cuMemSetMemPool\n");
#endif
}

/* ---- framework ------------------------------------------------------------------------ */

static void app_framework(void)
{
    const char *lib = getenv("FRAMEWORK_LIB");
    if (lib == NULL || dlopen(lib, RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf("FAIL: cannot load FRAMEWORK_LIB (%s)\n", lib ? dlerror() : "unset");
        failed = 1;
        return;
    }
    CUdeviceptr p[16];
    size_t fr0 = 0, fr = 0, total = 0;
    OK(cuMemGetInfo(&fr0, &total));
    for (int i = 0; i < 16; i++)
        OK(cuMemAlloc(&p[i], (size_t)(i + 1) * 256 * 1024));
    for (int i = 0; i < 16; i++)
        OK(cuMemFree(p[i]));
    OK(cuMemGetInfo(&fr, &total));
    CHECK(fr == fr0, "cuMemGetInfo: %zu bytes free after every allocation was freed, %zu before",
          fr, fr0);
}

/* Prints which served the first block (the driver, else a segment of
 * tidemark's cache), the one line that differs between modes. */
static void app_framework_late(void)
{
    const char *lib = getenv("FRAMEWORK_LIB");
    size_t fr0 = 0, fr1 = 0, fr2 = 0, fr3 = 0, fr4 = 0, total = 0;
    CUdeviceptr p = 0, q = 0;
    OK(cuMemGetInfo(&fr0, &total));
    OK(cuMemAlloc(&p, 1 * MiB));
    OK(cuMemGetInfo(&fr1, &total));
    printf("before the framework: %s\n", fr0 - fr1 == 1 * MiB ? "the driver's" : "a segment");
    if (lib == NULL || dlopen(lib, RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf("FAIL: cannot load FRAMEWORK_LIB (%s)\n", lib ? dlerror() : "unset");
        failed = 1;
        return;
    }
    /* As long as a real framework's import takes, at least: cache mode
     * looks for one at most every 10 ms per thread. */
    usleep(30 * 1000);
    OK(cuMemAlloc(&q, 4 * MiB));
    OK(cuMemGetInfo(&fr2, &total));
    CHECK(fr1 - fr2 == 4 * MiB,
          "a 4 MiB allocation after the framework was loaded took %zu bytes of the device",
          fr1 - fr2);
    OK(cuMemFree(p));
    OK(cuMemGetInfo(&fr3, &total));
    CHECK(fr3 == fr0 - 4 * MiB,
          "cuMemGetInfo: %zu bytes free after the first block was freed, %zu expected", fr3,
          fr0 - 4 * MiB);
    OK(cuMemFree(q));
    OK(cuMemGetInfo(&fr4, &total));
    CHECK(fr4 == fr0, "cuMemGetInfo: %zu bytes free after every allocation was freed, %zu before",
          fr4, fr0);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    static const struct {
        const char *name;
        void (*fn)(void);
    } apps[] = {{"ptds", app_ptds},
                {"stream_free", app_stream_free},
                {"free_sync", app_free_sync},
                {"ipc", app_ipc},
                {"async_device", app_async_device},
                {"ctx", app_ctx},
                {"reset", app_reset},
                {"reset_live", app_reset_live},
                {"capture", app_capture},
                {"setpool", app_setpool},
                {"framework", app_framework},
                {"framework_late", app_framework_late}};
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&primary0, 0));
    OK(cuCtxSetCurrent(primary0));
    for (size_t i = 0; i < sizeof apps / sizeof apps[0]; i++)
        if (strcmp(what, apps[i].name) == 0) {
            apps[i].fn();
            printf("%s\n", failed ? "failed" : "ok");
            return failed;
        }
    printf("usage: sem_app ptds|stream_free|free_sync|ipc|async_device|ctx|reset|reset_live|capture|"
           "setpool|framework|framework_late\n");
    return 2;
}
