/* tests/gpu/cuda_drv.c: a CUDA driver-API program for tests/gpu/run.sh, the
 * one row family that runs the same on a real GPU and on the fake driver
 * (tests/fakes/cuda), so that `run.sh --fake` checks the script's own
 * reading of snapshots before a GPU ever runs it.
 *
 * It reaches libcuda.so.1 as PyTorch and cudart do, by dlopen + dlsym (so
 * no build-time link to either driver, and the preload sees it through its
 * dlsym hook).  Shaped like cuda_app.cu: weights kept for the whole run;
 * per step an activation from cuMemAllocAsync on a stream and a temporary
 * from cuMemAlloc, both freed; pinned and managed memory once.  It prints
 * the peak of device bytes it had live at once (what a snapshot must show)
 * and "result ok".
 *
 * Where the driver has cuMemsetD32_v2 and cuMemcpyDtoH_v2 (a real one;
 * the fake has no copies), every live buffer gets its own value and each
 * is read back before it is freed: memory that tidemark's cache handed out
 * twice, or that no kernel could reach, shows as "result WRONG".  The line
 * "data check ..." says whether that ran.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*fn_init)(unsigned);
typedef CUresult (*fn_dev_get)(CUdevice *, int);
typedef CUresult (*fn_ctx_retain)(CUcontext *, CUdevice);
typedef CUresult (*fn_ctx_release)(CUdevice);
typedef CUresult (*fn_ctx_set)(CUcontext);
typedef CUresult (*fn_stream_create)(CUstream *, unsigned);
typedef CUresult (*fn_stream)(CUstream);
typedef CUresult (*fn_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_free)(CUdeviceptr);
typedef CUresult (*fn_alloc_async)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*fn_free_async)(CUdeviceptr, CUstream);
typedef CUresult (*fn_alloc_host)(void **, size_t);
typedef CUresult (*fn_free_host)(void *);
typedef CUresult (*fn_alloc_managed)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*fn_memset)(CUdeviceptr, unsigned, size_t);
typedef CUresult (*fn_dtoh)(void *, CUdeviceptr, size_t);

static struct {
    fn_init init;
    fn_dev_get dev_get;
    fn_ctx_retain ctx_retain;
    fn_ctx_release ctx_release;
    fn_ctx_set ctx_set;
    fn_stream_create stream_create;
    fn_stream stream_sync, stream_destroy;
    fn_alloc alloc;
    fn_free free;
    fn_alloc_async alloc_async;
    fn_free_async free_async;
    fn_alloc_host alloc_host;
    fn_free_host free_host;
    fn_alloc_managed alloc_managed;
    fn_memset memset; /* NULL where the driver has none (the fake) */
    fn_dtoh dtoh;
} cu;

static int ok = 1;

static void app_check(CUresult r, const char *call, int line)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuda_drv.c:%d %s -> %d\n", line, call, (int)r);
        exit(1);
    }
}
#define CHECK(call) app_check((call), #call, __LINE__)

static void *app_need(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (f == NULL) {
        fprintf(stderr, "cuda_drv: libcuda.so.1 has no %s\n", name);
        exit(1);
    }
    return f;
}

/* Gives buffer `p` of `n` bytes the value `v` in every word (data check). */
static void app_mark(CUdeviceptr p, size_t n, unsigned v)
{
    if (cu.memset)
        CHECK(cu.memset(p, v, n / 4));
}

/* Its first and last words must still be `v`. */
static void app_verify(CUdeviceptr p, size_t n, unsigned v)
{
    unsigned w[2] = {0, 0};
    if (!cu.dtoh)
        return;
    CHECK(cu.dtoh(&w[0], p, 4));
    CHECK(cu.dtoh(&w[1], p + n - 4, 4));
    if (w[0] != v || w[1] != v) {
        fprintf(stderr, "cuda_drv: buffer of %zu B holds %#x/%#x, not %#x\n", n, w[0], w[1], v);
        ok = 0;
    }
}

static void app_step(CUdeviceptr w, size_t wn, CUstream s, int step)
{
    const size_t an = (size_t)4 << 20, tn = (size_t)2 << 20;
    CUdeviceptr act = 0, tmp = 0;
    CHECK(cu.alloc_async(&act, an, s));
    CHECK(cu.alloc(&tmp, tn));
    CHECK(cu.stream_sync(s));
    app_mark(act, an, 0x100u + (unsigned)step);
    app_mark(tmp, tn, 0x200u + (unsigned)step);
    app_verify(w, wn, 0x1u);
    app_verify(act, an, 0x100u + (unsigned)step);
    app_verify(tmp, tn, 0x200u + (unsigned)step);
    CHECK(cu.free(tmp));
    CHECK(cu.free_async(act, s));
}

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        fprintf(stderr, "cuda_drv: %s\n", dlerror());
        return 1;
    }
    cu.init = (fn_init)app_need(lib, "cuInit");
    cu.dev_get = (fn_dev_get)app_need(lib, "cuDeviceGet");
    cu.ctx_retain = (fn_ctx_retain)app_need(lib, "cuDevicePrimaryCtxRetain");
    cu.ctx_release = (fn_ctx_release)app_need(lib, "cuDevicePrimaryCtxRelease_v2");
    cu.ctx_set = (fn_ctx_set)app_need(lib, "cuCtxSetCurrent");
    cu.stream_create = (fn_stream_create)app_need(lib, "cuStreamCreate");
    cu.stream_sync = (fn_stream)app_need(lib, "cuStreamSynchronize");
    cu.stream_destroy = (fn_stream)app_need(lib, "cuStreamDestroy_v2");
    cu.alloc = (fn_alloc)app_need(lib, "cuMemAlloc_v2");
    cu.free = (fn_free)app_need(lib, "cuMemFree_v2");
    cu.alloc_async = (fn_alloc_async)app_need(lib, "cuMemAllocAsync");
    cu.free_async = (fn_free_async)app_need(lib, "cuMemFreeAsync");
    cu.alloc_host = (fn_alloc_host)app_need(lib, "cuMemAllocHost_v2");
    cu.free_host = (fn_free_host)app_need(lib, "cuMemFreeHost");
    cu.alloc_managed = (fn_alloc_managed)app_need(lib, "cuMemAllocManaged");
    cu.memset = (fn_memset)dlsym(lib, "cuMemsetD32_v2");
    cu.dtoh = (fn_dtoh)dlsym(lib, "cuMemcpyDtoH_v2");
    if (!cu.memset || !cu.dtoh)
        cu.memset = NULL, cu.dtoh = NULL;

    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CHECK(cu.init(0));
    CHECK(cu.dev_get(&dev, 0));
    CHECK(cu.ctx_retain(&ctx, dev));
    CHECK(cu.ctx_set(ctx));
    CHECK(cu.stream_create(&s, CU_STREAM_DEFAULT));

    const size_t wn = (size_t)8 << 20, mn = (size_t)1 << 20;
    const int steps = 5;
    CUdeviceptr w = 0, managed = 0;
    void *pinned = NULL;
    CHECK(cu.alloc(&w, wn));
    app_mark(w, wn, 0x1u);
    CHECK(cu.alloc_host(&pinned, 4096));
    CHECK(cu.alloc_managed(&managed, mn, CU_MEM_ATTACH_GLOBAL));
    for (int i = 0; i < steps; i++)
        app_step(w, wn, s, i);
    CHECK(cu.stream_sync(s));
    app_verify(w, wn, 0x1u);
    CHECK(cu.free_host(pinned));
    CHECK(cu.free(managed));
    CHECK(cu.free(w));
    CHECK(cu.stream_destroy(s));
    CHECK(cu.ctx_release(dev));
    /* weights + activation + temporary, plus the managed MiB */
    printf("expected peak device bytes %zu\n", wn + ((size_t)4 << 20) + ((size_t)2 << 20) + mn);
    printf("data check %s\n", cu.memset ? "ran" : "not run (no cuMemsetD32_v2/cuMemcpyDtoH_v2 in this driver)");
    printf("result %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
