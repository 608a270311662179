/* tests/hooks/cuda/many_rt_app.c: a program that loads many small
 * libraries (many_rt_obj.c; argv: their paths, those linked to
 * libcudart.so.12 first, then as many linked to libcudart.so.13, in turns:
 * obj_0 cu12, obj_1 cu13, ...) and has each ask its runtime for the last
 * error.  Each must get its own runtime's error, and once every library
 * made its first call, no further call may walk the loaded objects:
 * dl_iterate_phdr is counted here (the program's definition comes first
 * in the global scope, -rdynamic, so the preload's calls land in it).
 * Prints one line per check; exits 1 when one fails. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*phdr_cb)(struct dl_phdr_info *, size_t, void *);
static long walks;

/* Not instrumented: ThreadSanitizer's runtime walks the objects itself
 * while it starts, before its shadow memory is there. */
#if defined(__SANITIZE_THREAD__) || defined(__clang__)
#define NOT_INSTRUMENTED __attribute__((no_sanitize("thread")))
#else
#define NOT_INSTRUMENTED
#endif
__attribute__((visibility("default"))) int dl_iterate_phdr(phdr_cb cb, void *data);
NOT_INSTRUMENTED int dl_iterate_phdr(phdr_cb cb, void *data)
{
    static int (*real)(phdr_cb, void *);
    if (real == NULL)
        real = (int (*)(phdr_cb, void *))dlsym(RTLD_NEXT, "dl_iterate_phdr");
    walks++;
    return real ? real(cb, data) : 0;
}

typedef struct obj {
    int (*peek)(void);
    int (*get)(void);
    int (*fail)(int);
} obj;

static int failures;
static void check(const char *what, int got, int want)
{
    printf("%s: %d%s\n", what, got, got == want ? "" : " (WRONG)");
    failures += got != want;
}

int main(int argc, char **argv)
{
    int n = argc - 1;
    obj *o = calloc((size_t)n + 1, sizeof *o);
    if (n < 2 || o == NULL)
        return fprintf(stderr, "usage: many_rt_app OBJ0 OBJ1 ...\n"), 2;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(argv[i + 1], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            return fprintf(stderr, "many_rt_app: %s\n", dlerror()), 2;
        o[i].peek = (int (*)(void))dlsym(h, "obj_peek");
        o[i].get = (int (*)(void))dlsym(h, "obj_get");
        o[i].fail = (int (*)(int))dlsym(h, "obj_fail");
        if (!o[i].peek || !o[i].get || !o[i].fail)
            return fprintf(stderr, "many_rt_app: %s lacks obj_*\n", argv[i + 1]), 2;
    }
    printf("objects: %d\n", n);
    /* The first call of each: no error anywhere yet. */
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += o[i].peek() != 0;
    check("objects with an error before any failed", wrong, 0);

    /* One error in each runtime: invalid device in 12's, invalid value in 13's. */
    int e12 = o[0].fail(0), e13 = o[1].fail(1);
    printf("cu12 failed with %d, cu13 with %d\n", e12, e13);
    walks = 0;
    int wrong12 = 0, wrong13 = 0;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < n; i++) {
            int e = o[i].peek();
            if (i % 2 == 0)
                wrong12 += e != e12;
            else
                wrong13 += e != e13;
        }
    check("cu12 objects that saw another error (3 rounds)", wrong12, 0);
    check("cu13 objects that saw another error (3 rounds)", wrong13, 0);
    check("loaded-object walks after each object's first call", (int)walks, 0);

    /* cudaGetLastError clears its runtime's error only. */
    int last12 = (n - 1) & ~1, last13 = n % 2 ? n - 2 : n - 1;
    check("cudaGetLastError through the last cu12 object", o[last12].get(), e12);
    check("then cudaPeekAtLastError through the first cu12 object", o[0].peek(), 0);
    check("and through the last cu13 object", o[last13].peek(), e13);
    check("cudaGetLastError through the first cu13 object", o[1].get(), e13);
    check("then through the last cu13 object", o[last13].get(), 0);
    check("loaded-object walks in all", (int)walks, 0);
    free(o);
    return failures ? 1 : 0;
}
