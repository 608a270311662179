/* tests/hooks/cuda/two_rt_app.c: a program with two CUDA runtimes in it,
 * through two libraries (two_rt_lib.c): cu12 linked to libcudart.so.12,
 * cu13 to libcudart.so.13.  It makes 3 allocation pairs through cu12 and 5
 * through cu13, then asks each runtime (its own fake_cudart_calls, found
 * on that runtime's handle) how many cudaMalloc and cudaFree it served:
 *     libcudart.so.12: cudaMalloc=3 cudaFree=3
 *     libcudart.so.13: cudaMalloc=5 cudaFree=5
 * is right; anything else means a call went to the other runtime. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int two_rt_cu12_work(int n);
int two_rt_cu13_work(int n);

static void report(const char *soname)
{
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    long (*calls)(const char *) = h ? (long (*)(const char *))dlsym(h, "fake_cudart_calls") : NULL;
    if (calls == NULL) {
        printf("%s: not loaded\n", soname);
        return;
    }
    printf("%s: cudaMalloc=%ld cudaFree=%ld\n", soname, calls("cudaMalloc"), calls("cudaFree"));
}

int main(void)
{
    printf("cu12 work -> %d\n", two_rt_cu12_work(3));
    printf("cu13 work -> %d\n", two_rt_cu13_work(5));
    report("libcudart.so.12");
    report("libcudart.so.13");
    return 0;
}
