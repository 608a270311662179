/* tests/hooks/cuda/plug_app.c: libtidemark.so as PyTorch's pluggable
 * allocator over the (fake) CUDA driver, in a process that may also have
 * libtidemark_preload.so loaded (`tidemark run --conf
 * torch_tensors=pluggable` preloads it into every Python program).
 *
 *   plug_app LIBTIDEMARK
 *
 * Looks the entry points up as CUDAPluggableAllocator does (dlopen
 * RTLD_LOCAL, as ctypes.CDLL, then dlsym), allocates 1000 bytes and 3 MiB
 * (one small and one large segment of the cache), and prints, one per
 * line for the shell test:
 *   stats allocated=A reserved=R        tidemark's device 0 statistics
 *   driver cuMemAlloc_v2=N              the fake driver's allocations
 *   base K ok | base K: WHY             tdm_torch_base_alloc of block K
 *                                       against the driver's own answer
 *                                       (cuMemGetAddressRange)
 * then frees both and exits 0 (1 with a message when a call fails).  The
 * snapshot is TIDEMARK_CONF's dump at exit. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake_cuda.h"
#include "tidemark.h"

typedef void *(*alloc_fn)(size_t, int, void *);
typedef void (*free_fn)(void *, size_t, int, void *);
typedef void *(*base_fn)(void *, size_t *);

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (p == NULL) {
        printf("plug_app: %s not exported\n", name);
        exit(1);
    }
    return p;
}

/* Block k's base and size as torch's getBaseAllocation would get them,
 * against the allocation the driver made (what cudaIpcGetMemHandle
 * names). */
static void check_base(base_fn base, int k, void *block, size_t block_size)
{
    CUdeviceptr drv_base = 0;
    size_t drv_size = 0;
    CUresult r = cuMemGetAddressRange(&drv_base, &drv_size, (CUdeviceptr)(uintptr_t)block);
    size_t size = 0;
    void *b = base(block, &size);
    if (r != CUDA_SUCCESS)
        printf("base %d: cuMemGetAddressRange -> %d\n", k, (int)r);
    else if ((uintptr_t)b != (uintptr_t)drv_base || size != drv_size)
        printf("base %d: %p+%zu, the driver's allocation is %p+%zu (block %p+%zu)\n", k, b,
               size, (void *)(uintptr_t)drv_base, drv_size, block, block_size);
    else
        printf("base %d ok\n", k);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: plug_app LIBTIDEMARK\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("plug_app: %s\n", dlerror());
        return 1;
    }
    alloc_fn alloc = (alloc_fn)sym(h, "tdm_torch_alloc");
    free_fn release = (free_fn)sym(h, "tdm_torch_free");
    base_fn base = (base_fn)sym(h, "tdm_torch_base_alloc");
    tdm_status (*stats)(int, tdm_stats *) =
        (tdm_status(*)(int, tdm_stats *))sym(h, "tdm_memory_stats");

    size_t sizes[2] = {1000, (size_t)3 << 20};
    void *p[2];
    for (int k = 0; k < 2; k++) {
        p[k] = alloc(sizes[k], 0, NULL);
        if (p[k] == NULL) {
            printf("plug_app: tdm_torch_alloc(%zu) failed\n", sizes[k]);
            return 1;
        }
    }
    tdm_stats s = {.size = sizeof s};
    if (stats(0, &s) != TDM_OK) {
        printf("plug_app: tdm_memory_stats failed\n");
        return 1;
    }
    printf("stats allocated=%llu reserved=%llu\n",
           (unsigned long long)s.allocated_bytes.current,
           (unsigned long long)s.reserved_bytes.current);
    printf("driver cuMemAlloc_v2=%ld\n", fake_cuda_calls("cuMemAlloc_v2"));
    for (int k = 0; k < 2; k++)
        check_base(base, k, p[k], sizes[k]);
    /* Not a pointer of ours: itself, and no size (torch's default). */
    size_t none = 7;
    void *q = base((void *)(uintptr_t)0x1000, &none);
    if (q != (void *)(uintptr_t)0x1000 || none != 0)
        printf("base of an unknown pointer: %p+%zu\n", q, none);
    for (int k = 0; k < 2; k++)
        release(p[k], sizes[k], 0, NULL);
    return 0;
}
