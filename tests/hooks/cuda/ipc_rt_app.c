/* tests/hooks/cuda/ipc_rt_app.c: a CUDA runtime program of its own (no
 * NCCL, no framework) that shares device buffers over CUDA IPC:
 * cudaIpcGetMemHandle "Takes a pointer to the base of an existing device
 * memory allocation created with cudaMalloc and exports it for use in
 * another process".  Two 1 MiB buffers, each exported and opened as the
 * peer would (cudaIpcOpenMemHandle; the fake lets a process open its own
 * handle): the peer's mapping must stand for the exported pointer, or the
 * export must fail, never a wrong address.  Prints, per run,
 * "WHAT: driver allocations N" (the fake driver's, for the two buffers),
 * "ipc export WHAT first|second -> ok|refused", then "ok" or "failed".
 *
 *   ipc_rt_app own   the program's own cudaMalloc buffers: linked with the
 *                    shared runtime, the program imports cudaIpcGetMemHandle;
 *                    linked with the static one (ipc_rt_app_static) it
 *                    carries it, as every nvcc program does
 *   ipc_rt_app lib   buffers that $ALLOC_RT_LIB (fake_ipc_lib.c over the
 *                    runtime, a library that imports no export) allocates,
 *                    exported by the program
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static int failed;
static unsigned long long (*ipc_source)(unsigned long long);
static long (*alloc_calls)(void);
static int (*lib_alloc)(unsigned long long *, size_t);

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAIL: " __VA_ARGS__);                                      \
            printf("\n");                                                      \
            failed = 1;                                                        \
        }                                                                      \
    } while (0)

/* The fake driver's controls, once the runtime has loaded it. */
static void load_fake(void)
{
    CHECK(cudaFree(NULL) == cudaSuccess, "the runtime did not start");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ipc_source = h ? (unsigned long long (*)(unsigned long long))dlsym(h, "fake_cuda_ipc_source")
                   : NULL;
    alloc_calls = h ? (long (*)(void))dlsym(h, "fake_cuda_alloc_calls") : NULL;
    if (ipc_source == NULL || alloc_calls == NULL) {
        printf("FAIL: not the fake driver\n");
        exit(1);
    }
}

static void export_one(const char *what, const char *which, void *p)
{
    cudaIpcMemHandle_t h;
    cudaError_t r = cudaIpcGetMemHandle(&h, p);
    printf("ipc export %s %s -> %s\n", what, which, r == cudaSuccess ? "ok" : "refused");
    if (r != cudaSuccess)
        return; /* refused: the peer never sees a wrong address */
    void *o = NULL;
    r = cudaIpcOpenMemHandle(&o, h, cudaIpcMemLazyEnablePeerAccess);
    CHECK(r == cudaSuccess && o != NULL, "%s %s: cudaIpcOpenMemHandle -> %d", what, which,
          (int)r);
    if (o == NULL)
        return;
    CHECK(ipc_source((unsigned long long)(uintptr_t)o) == (uintptr_t)p,
          "the peer's mapping of %s %s stands for %#llx, not the exported %p", what, which,
          ipc_source((unsigned long long)(uintptr_t)o), p);
    CHECK(cudaIpcCloseMemHandle(o) == cudaSuccess, "%s %s: cudaIpcCloseMemHandle", what, which);
}

static cudaError_t from_library(void **p, size_t n)
{
    unsigned long long d = 0;
    int r = lib_alloc(&d, n);
    *p = (void *)(uintptr_t)d;
    return r == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Two buffers from `alloc`, each exported, then freed. */
static void share(const char *what, cudaError_t (*alloc)(void **, size_t))
{
    void *a = NULL, *b = NULL;
    long before = alloc_calls();
    CHECK(alloc(&a, MiB) == cudaSuccess && alloc(&b, MiB) == cudaSuccess,
          "%s: allocations", what);
    printf("%s: driver allocations %ld\n", what, alloc_calls() - before);
    export_one(what, "first", a);
    export_one(what, "second", b);
    CHECK(cudaFree(a) == cudaSuccess && cudaFree(b) == cudaSuccess, "%s: frees", what);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    load_fake();
    if (strcmp(what, "own") == 0) {
        share("own", cudaMalloc);
    } else if (strcmp(what, "lib") == 0) {
        const char *path = getenv("ALLOC_RT_LIB");
        void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
        lib_alloc = lib ? (int (*)(unsigned long long *, size_t))dlsym(lib, "fake_ipc_lib_alloc")
                        : NULL;
        if (lib_alloc == NULL) {
            printf("FAIL: cannot load ALLOC_RT_LIB (%s)\n", path ? dlerror() : "unset");
            return 1;
        }
        share("lib", from_library);
    } else {
        printf("usage: ipc_rt_app own|lib\n");
        return 2;
    }
    printf("%s\n", failed ? "failed" : "ok");
    return failed;
}
