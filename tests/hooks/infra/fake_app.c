/* tests/hooks/infra/fake_app.c: an "unmodified program" of the fake vendor
 * (fake_vendor.h).  It links only libtdmfake_vendor.so, never tidemark;
 * the tests run it under LD_PRELOAD=libtdmfake_preload.so with
 * TIDEMARK_CONF and read the snapshot back with snapcheck.  Its own
 * functions have distinctive names (fa_*) for the stacks to show.
 *
 *   fake_app pattern        the known pattern below; prints the counters
 *   fake_app churn N        N x (4 KiB alloc + free): cache-mode counting
 *   fake_app threads T N    T threads x N alloc/free pairs, each thread on
 *                           its own stream, with a SIGUSR2 dump meanwhile
 *   fake_app fork           parent 11111 B, child 22222 B (and frees the
 *                           parent's), parent then 33333 B; child exit()s
 *   fake_app forkstress N   N forks while a thread allocates and frees
 *   fake_app exec           77777 B, then exec of itself with `pattern`
 *   fake_app selftest       fvhook_selftest() of the preload, if there
 *
 * The pattern: fa_make_weights 1 MiB (fv_malloc, kept to the end);
 * fa_make_activation 3000 B on stream 0x51 (fv_malloc_async); fa_make_table
 * 10 x 100 B (fv_calloc, which calls fv_malloc_async inside the vendor);
 * fa_bad_free of a pointer never allocated (FV_ERROR_INVALID back);
 * fa_try_huge, twice the capacity (FV_ERROR_OUT_OF_MEMORY back);
 * fa_map_pages: reserve 4 MiB, map 2 x 2 MiB, unmap all 4 MiB, map 4 MiB
 * (kept); then free the activation and the table.
 * Exit status 0, or 1 with a message when the vendor answers wrongly. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_vendor.h"

#define NOINLINE __attribute__((noinline, noclone))

/* Exported (-rdynamic) so that the symbolizer names them in stacks. */
NOINLINE void *fa_make_weights(void);
NOINLINE void *fa_make_activation(void);
NOINLINE void *fa_make_table(void);
NOINLINE void fa_bad_free(void);
NOINLINE void fa_try_huge(void);
NOINLINE void fa_map_pages(void);
NOINLINE void fa_churn_once(void);
NOINLINE void *fa_worker(void *arg);
NOINLINE void *fa_parent_alloc(size_t n);
NOINLINE void *fa_child_alloc(size_t n);
NOINLINE void *fa_before_exec(void);

static void die(const char *what, int got)
{
    printf("fake_app: %s (got %d)\n", what, got);
    exit(1);
}

NOINLINE void *fa_make_weights(void)
{
    void *p = NULL;
    fv_result r = fv_malloc(&p, 1 << 20);
    if (r != FV_SUCCESS || !p)
        die("fv_malloc 1 MiB", r);
    return p;
}

NOINLINE void *fa_make_activation(void)
{
    void *p = NULL;
    fv_result r = fv_malloc_async(&p, 3000, (fv_stream)(uintptr_t)0x51);
    if (r != FV_SUCCESS || !p)
        die("fv_malloc_async 3000", r);
    return p;
}

NOINLINE void *fa_make_table(void)
{
    void *p = NULL;
    fv_result r = fv_calloc(&p, 10, 100);
    if (r != FV_SUCCESS || !p)
        die("fv_calloc 10x100", r);
    return p;
}

NOINLINE void fa_bad_free(void)
{
    fv_result r = fv_free((void *)(uintptr_t)0xdead000);
    if (r != FV_ERROR_INVALID)
        die("fv_free of a bad pointer must be FV_ERROR_INVALID", r);
}

NOINLINE void fa_try_huge(void)
{
    size_t total = 0;
    fv_mem_get_info(NULL, &total);
    void *p = (void *)1;
    fv_result r = fv_malloc(&p, total * 2);
    if (r != FV_ERROR_OUT_OF_MEMORY || p != NULL)
        die("fv_malloc past the capacity must be FV_ERROR_OUT_OF_MEMORY", r);
}

NOINLINE void fa_map_pages(void)
{
    const size_t mib2 = (size_t)2 << 20;
    void *va = NULL;
    fv_result r = fv_reserve(&va, 2 * mib2);
    if (r != FV_SUCCESS)
        die("fv_reserve", r);
    if ((r = fv_map(va, mib2)) != FV_SUCCESS ||
        (r = fv_map((char *)va + mib2, mib2)) != FV_SUCCESS)
        die("fv_map", r);
    if ((r = fv_unmap(va, 2 * mib2)) != FV_SUCCESS)
        die("fv_unmap", r);
    if ((r = fv_unmap(va, 2 * mib2)) != FV_ERROR_INVALID)
        die("fv_unmap of nothing must be FV_ERROR_INVALID", r);
    if ((r = fv_map(va, 2 * mib2)) != FV_SUCCESS)
        die("fv_map 4 MiB", r);
}

static void print_counters(void)
{
    fv_counters c = fv_get_counters();
    printf("vendor alloc_calls=%ld free_calls=%ld live=%ld v1_calls=%ld mapped=%ld\n",
           c.alloc_calls, c.free_calls, c.live, c.v1_calls, c.mapped);
}

static int pattern(void)
{
    void *w = fa_make_weights();
    void *a = fa_make_activation();
    void *t = fa_make_table();
    fa_bad_free();
    fa_try_huge();
    fa_map_pages();
    fv_result r;
    if ((r = fv_free(a)) != FV_SUCCESS || (r = fv_free(t)) != FV_SUCCESS)
        die("fv_free", r);
    (void)w;
    print_counters();
    return 0;
}

NOINLINE void fa_churn_once(void)
{
    void *p = NULL;
    fv_result r = fv_malloc(&p, 4096);
    if (r != FV_SUCCESS)
        die("fv_malloc 4096", r);
    if ((r = fv_free(p)) != FV_SUCCESS)
        die("fv_free 4096", r);
}

static int churn(int n)
{
    for (int i = 0; i < n; i++)
        fa_churn_once();
    print_counters();
    return 0;
}

typedef struct worker {
    int index;
    int iters;
} worker;

NOINLINE void *fa_worker(void *arg)
{
    worker *w = arg;
    fv_stream s = (fv_stream)(uintptr_t)(0x100 + w->index);
    void *held[8] = {0};
    for (int i = 0; i < w->iters; i++) {
        int k = i % 8;
        if (held[k] && fv_free(held[k]) != FV_SUCCESS)
            die("worker fv_free", 0);
        held[k] = NULL;
        if (fv_malloc_async(&held[k], 512 * (size_t)(1 + (i + w->index) % 16), s) !=
            FV_SUCCESS)
            die("worker fv_malloc_async", 0);
    }
    for (int k = 0; k < 8; k++)
        if (held[k] && fv_free(held[k]) != FV_SUCCESS)
            die("worker final fv_free", 0);
    return NULL;
}

static int threads(int t, int n)
{
    pthread_t tid[64];
    worker w[64];
    if (t > 64)
        t = 64;
    for (int i = 0; i < t; i++) {
        w[i] = (worker){i, n};
        pthread_create(&tid[i], NULL, fa_worker, &w[i]);
    }
    /* A snapshot taken while every thread allocates: it must read back
     * (only when tidemark was asked to catch the signal). */
    const char *conf = getenv("TIDEMARK_CONF");
    usleep(2000);
    if (conf && strstr(conf, "signal"))
        raise(SIGUSR2);
    for (int i = 0; i < t; i++)
        pthread_join(tid[i], NULL);
    print_counters();
    return 0;
}

NOINLINE void *fa_parent_alloc(size_t n)
{
    void *p = NULL;
    if (fv_malloc(&p, n) != FV_SUCCESS)
        die("parent fv_malloc", 0);
    return p;
}

NOINLINE void *fa_child_alloc(size_t n)
{
    void *p = NULL;
    if (fv_malloc(&p, n) != FV_SUCCESS)
        die("child fv_malloc", 0);
    return p;
}

static int do_fork(void)
{
    void *a = fa_parent_alloc(11111);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", -1);
    if (pid == 0) {
        (void)fa_child_alloc(22222);
        if (fv_free(a) != FV_SUCCESS)
            die("child frees the parent's allocation", 0);
        printf("child %d\n", (int)getpid());
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("child failed", status);
    (void)fa_parent_alloc(33333);
    printf("parent %d\n", (int)getpid());
    return 0;
}

static _Atomic int stress_stop;

static void *stress_worker(void *arg)
{
    (void)arg;
    while (!stress_stop)
        fa_churn_once();
    return NULL;
}

static int forkstress(int n)
{
    pthread_t t;
    pthread_create(&t, NULL, stress_worker, NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork", -1);
        if (pid == 0) {
            /* The other thread may have held any lock at the fork. */
            fa_churn_once();
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("forked child failed", status);
    }
    stress_stop = 1;
    pthread_join(t, NULL);
    printf("forkstress %d ok\n", n);
    return 0;
}

NOINLINE void *fa_before_exec(void)
{
    void *p = NULL;
    if (fv_malloc(&p, 77777) != FV_SUCCESS)
        die("fv_malloc before exec", 0);
    return p;
}

static int do_exec(char *self)
{
    (void)fa_before_exec();
    printf("exec from %d\n", (int)getpid());
    fflush(stdout);
    char *args[] = {self, "pattern", NULL};
    execv("/proc/self/exe", args);
    die("execv", -1);
    return 1;
}

static int selftest(void)
{
    int (*fn)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fvhook_selftest");
    if (!fn) {
        printf("selftest: no hook loaded\n");
        return 1;
    }
    printf("selftest bits=%d\n", fn());
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *cmd = argc > 1 ? argv[1] : "pattern";
    if (strcmp(cmd, "pattern") == 0)
        return pattern();
    if (strcmp(cmd, "churn") == 0 && argc > 2)
        return churn(atoi(argv[2]));
    if (strcmp(cmd, "threads") == 0 && argc > 3)
        return threads(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(cmd, "fork") == 0)
        return do_fork();
    if (strcmp(cmd, "forkstress") == 0 && argc > 2)
        return forkstress(atoi(argv[2]));
    if (strcmp(cmd, "exec") == 0)
        return do_exec(argv[0]);
    if (strcmp(cmd, "selftest") == 0)
        return selftest();
    fprintf(stderr, "fake_app: unknown command\n");
    return 2;
}
