/* tests/gpu/cuda_plug.c: libtidemark.so's PyTorch entry points
 * (tdm_torch_alloc / tdm_torch_free, what CUDAPluggableAllocator calls)
 * driven from C, for tests/gpu/run.sh's row "pluggable under preload",
 * which runs it under libtidemark_preload.so as `tidemark run --conf
 * torch_tensors=pluggable` does with PyTorch.  On a real GPU and on the
 * fake driver alike.
 *
 * The library is dlopen()ed from the path in argv[1], as PyTorch does.  It
 * takes a small block and a 3 MiB one, writes nothing to them (no kernel
 * here: a real GPU's memory is only checked to be handed out), frees both
 * and prints the bytes the blocks take once rounded as PyTorch's caching
 * allocator rounds them (512 B), the figure a snapshot's allocated peak
 * must show: a segment booked twice (once by the cache that made it, once
 * by the preload watching the driver call) shows as far more.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*fn_alloc)(size_t, int, void *);
typedef void (*fn_free)(void *, size_t, int, void *);

static size_t app_rounded(size_t n)
{
    return (n + 511) / 512 * 512;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cuda_plug LIBTIDEMARK.so\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "cuda_plug: %s\n", dlerror());
        return 1;
    }
    fn_alloc alloc = (fn_alloc)dlsym(lib, "tdm_torch_alloc");
    fn_free release = (fn_free)dlsym(lib, "tdm_torch_free");
    if (alloc == NULL || release == NULL) {
        fprintf(stderr, "cuda_plug: %s has no tdm_torch_alloc/tdm_torch_free\n", argv[1]);
        return 1;
    }
    const size_t small = 1000, large = (size_t)3 << 20;
    void *a = alloc(small, 0, NULL);
    void *b = alloc(large, 0, NULL);
    if (a == NULL || b == NULL || a == b) {
        fprintf(stderr, "cuda_plug: tdm_torch_alloc gave %p and %p\n", a, b);
        return 1;
    }
    release(b, large, 0, NULL);
    release(a, small, 0, NULL);
    printf("expected allocated peak %zu\n", app_rounded(small) + app_rounded(large));
    printf("result ok\n");
    return 0;
}
