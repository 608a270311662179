/* bench/hook_overhead.c: what libtidemark_preload.so adds to each
 * intercepted vendor call.
 *
 * Times alloc+free pairs through the fake vendor libraries of the tests
 * (tests/fakes: libamdhip64.so.5 and the Level Zero driver under the real
 * loader) in a child process per configuration: without the preload (the
 * baseline), and under LD_PRELOAD=libtidemark_preload.so with
 * TIDEMARK_CONF set to record=off (hooks pass straight through), observe
 * mode with record=state (booking, no event ring), observe mode without
 * stacks, observe mode with native stacks (context=all: a stack at the allocation and at
 * the free) and cache mode; for Level Zero also through the shim driver.
 * Prints a table: ns per pair, ns per call, and ns added per call over
 * the baseline (the target in observe mode without stacks is <= 20 ns).
 *
 * Each child is this program again (--child), so every run starts clean;
 * it pins itself to one CPU, warms up, and reports the best of `runs`
 * timings of `pairs` pairs.  The calls go through dlsym(RTLD_DEFAULT),
 * i.e. through the preload's definitions when it is loaded, exactly where
 * a program's PLT would go.
 *
 * Usage: hook_overhead [--instructions] [pairs] [runs]
 * --instructions counts instructions per call under valgrind's cachegrind
 * instead of timing (the count of n pairs is that of a run of 2n less one
 * of n, n = min(pairs, 20000)): figures that do not move with the load.
 * Paths come from the build (TDM_BENCH_* definitions, set by
 * tests/fakes/{hip,ze}/CMakeLists.txt) or from the environment:
 * TDM_BENCH_PRELOAD, TDM_BENCH_FAKE_HIP, TDM_BENCH_FAKE_ZE, TDM_BENCH_ZE_SHIM.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cachegrind.h"

#ifndef TDM_BENCH_PRELOAD
#define TDM_BENCH_PRELOAD ""
#endif
#ifndef TDM_BENCH_FAKE_HIP
#define TDM_BENCH_FAKE_HIP ""
#endif
#ifndef TDM_BENCH_FAKE_ZE
#define TDM_BENCH_FAKE_ZE ""
#endif
#ifndef TDM_BENCH_ZE_SHIM
#define TDM_BENCH_ZE_SHIM ""
#endif

static const char *path(const char *env, const char *built)
{
    const char *p = getenv(env);
    return p && *p ? p : built;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- the child: time pairs through one vendor ---------------------------- */

/* The vendor entry points, by their ABI (no vendor header needed). */
typedef int (*hip_malloc_fn)(void **ptr, size_t size);
typedef int (*hip_free_fn)(void *ptr);
typedef int (*ze_init_fn)(unsigned flags);
typedef int (*ze_driver_get_fn)(uint32_t *count, void **drivers);
typedef int (*ze_device_get_fn)(void *driver, uint32_t *count, void **devices);
typedef int (*ze_context_create_fn)(void *driver, const void *desc, void **ctx);
typedef int (*ze_alloc_device_fn)(void *ctx, const void *desc, size_t size, size_t align,
                                  void *device, void **ptr);
typedef int (*ze_free_fn)(void *ctx, void *ptr);

/* ze_device_mem_alloc_desc_t / ze_context_desc_t, by layout. */
static const struct {
    uint32_t stype;
    const void *next;
    uint32_t flags, ordinal;
} ze_dd = {0x15, NULL, 0, 0};
static const struct {
    uint32_t stype;
    const void *next;
    uint32_t flags;
} ze_cd = {0xd, NULL, 0};

static double best_of(int runs, long pairs, double (*one)(long, void *), void *ctx)
{
    if (runs == 0) /* counted, not timed (--instructions): one run, as is */
        return one(pairs, ctx);
    one(pairs / 10 + 1000, ctx); /* warm-up: first-call resolution, caches */
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t = one(pairs, ctx);
        if (t < best)
            best = t;
    }
    return best;
}

typedef struct hip_ctx {
    hip_malloc_fn malloc_;
    hip_free_fn free_;
} hip_ctx;

static double hip_pairs(long n, void *arg)
{
    hip_ctx *c = arg;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *p;
        if (c->malloc_(&p, 4096) != 0 || c->free_(p) != 0) {
            fprintf(stderr, "hook_overhead: hip call failed\n");
            exit(1);
        }
    }
    return (now_ns() - t0) / (double)n;
}

typedef struct ze_ctx {
    ze_alloc_device_fn alloc;
    ze_free_fn free_;
    void *context, *device;
} ze_ctx;

static double ze_pairs(long n, void *arg)
{
    ze_ctx *c = arg;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *p;
        if (c->alloc(c->context, &ze_dd, 4096, 0, c->device, &p) != 0 ||
            c->free_(c->context, p) != 0) {
            fprintf(stderr, "hook_overhead: ze call failed\n");
            exit(1);
        }
    }
    return (now_ns() - t0) / (double)n;
}

static int child(const char *vendor, long pairs, int runs)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one); /* best effort */
    double ns;
    if (strcmp(vendor, "hip") == 0) {
        if (!dlopen(path("TDM_BENCH_FAKE_HIP", TDM_BENCH_FAKE_HIP), RTLD_NOW | RTLD_GLOBAL)) {
            fprintf(stderr, "hook_overhead: %s\n", dlerror());
            return 1;
        }
        hip_ctx c = {(hip_malloc_fn)dlsym(RTLD_DEFAULT, "hipMalloc"),
                     (hip_free_fn)dlsym(RTLD_DEFAULT, "hipFree")};
        ns = best_of(runs, pairs, hip_pairs, &c);
    } else {
        void *loader = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!loader) {
            fprintf(stderr, "hook_overhead: %s\n", dlerror());
            return 1;
        }
        ze_init_fn init = (ze_init_fn)dlsym(RTLD_DEFAULT, "zeInit");
        ze_driver_get_fn drivers = (ze_driver_get_fn)dlsym(loader, "zeDriverGet");
        ze_device_get_fn devices = (ze_device_get_fn)dlsym(loader, "zeDeviceGet");
        ze_context_create_fn create = (ze_context_create_fn)dlsym(loader, "zeContextCreate");
        ze_ctx c = {(ze_alloc_device_fn)dlsym(RTLD_DEFAULT, "zeMemAllocDevice"),
                    (ze_free_fn)dlsym(RTLD_DEFAULT, "zeMemFree"), NULL, NULL};
        void *drv = NULL;
        uint32_t n = 1;
        if (init(0) != 0 || drivers(&n, &drv) != 0 || devices(drv, &n, &c.device) != 0 ||
            create(drv, &ze_cd, &c.context) != 0) {
            fprintf(stderr, "hook_overhead: Level Zero set-up failed\n");
            return 1;
        }
        ns = best_of(runs, pairs, ze_pairs, &c);
    }
    printf("%.2f\n", ns);
    return 0;
}

/* ---- the parent: one child per configuration, then the table ---------------- */

typedef struct config {
    const char *vendor;   /* "hip", "ze" */
    const char *label;
    int preload;          /* LD_PRELOAD the preload library */
    int shim;             /* Level Zero through the shim driver */
    const char *conf;     /* TIDEMARK_CONF, NULL for unset */
} config;

static const config configs[] = {
    {"hip", "no preload (baseline)", 0, 0, NULL},
    {"hip", "preload, record=off", 1, 0, "record=off,dump_on=none"},
    {"hip", "observe, record=state (no ring)", 1, 0, "mode=observe,record=state,stacks=none,dump_on=none"},
    {"hip", "observe, stacks=none", 1, 0, "mode=observe,stacks=none,dump_on=none"},
    {"hip", "observe, stacks=native", 1, 0, "mode=observe,stacks=native,dump_on=none"},
    {"hip", "cache, stacks=none", 1, 0, "mode=cache,stacks=none,dump_on=none"},
    {"ze", "no preload (baseline)", 0, 0, NULL},
    {"ze", "preload, record=off", 1, 0, "record=off,dump_on=none"},
    {"ze", "observe, record=state (no ring)", 1, 0, "mode=observe,record=state,stacks=none,dump_on=none"},
    {"ze", "observe, stacks=none", 1, 0, "mode=observe,stacks=none,dump_on=none"},
    {"ze", "observe, stacks=native", 1, 0, "mode=observe,stacks=native,dump_on=none"},
    {"ze", "cache, stacks=none", 1, 0, "mode=cache,stacks=none,dump_on=none"},
    {"ze", "shim driver, observe, stacks=none", 0, 1, "mode=observe,stacks=none,dump_on=none"},
};

/* Runs one configuration; the child's ns per pair, or -1.  With `count`
 * set, the child runs under cachegrind (no cache model: an instruction
 * count) and the result is the instructions it executed in all, or -1. */
static double run_child_as(const config *c, long pairs, int runs, int count)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        unsetenv("LD_PRELOAD");
        unsetenv("TIDEMARK_CONF");
        if (c->preload)
            setenv("LD_PRELOAD", path("TDM_BENCH_PRELOAD", TDM_BENCH_PRELOAD), 1);
        if (c->conf)
            setenv("TIDEMARK_CONF", c->conf, 1);
        if (strcmp(c->vendor, "ze") == 0) {
            const char *fake = path("TDM_BENCH_FAKE_ZE", TDM_BENCH_FAKE_ZE);
            if (c->shim) {
                setenv("ZE_ENABLE_ALT_DRIVERS", path("TDM_BENCH_ZE_SHIM", TDM_BENCH_ZE_SHIM), 1);
                setenv("TIDEMARK_ZE_DRIVER", fake, 1);
            } else {
                setenv("ZE_ENABLE_ALT_DRIVERS", fake, 1);
            }
        }
        char n[32], r[32];
        snprintf(n, sizeof n, "%ld", pairs);
        snprintf(r, sizeof r, "%d", runs);
        if (count) {
            dup2(STDOUT_FILENO, STDERR_FILENO); /* cachegrind's summary, to the pipe */
            const char *args[] = {"--child", c->vendor, n, r, NULL};
            cachegrind_exec_self(args);
            _exit(127);
        }
        execl("/proc/self/exe", "hook_overhead", "--child", c->vendor, n, r, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[8192] = "";
    ssize_t got = 0, k;
    while (got < (ssize_t)sizeof buf - 1 && (k = read(fd[0], buf + got, sizeof buf - 1 - (size_t)got)) != 0) {
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            break;
        got += k;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got == 0)
        return -1;
    buf[got] = 0;
    if (!count)
        return strtod(buf, NULL);
    return cachegrind_irefs(buf);
}

static double run_child(const config *c, long pairs, int runs)
{
    return run_child_as(c, pairs, runs, 0);
}

/* Instructions per pair of configuration c: the count of a run of 2n
 * pairs less that of a run of n (the start-up, the same in both, cancels
 * out); -1 when valgrind is missing or a run failed. */
static double instructions_per_pair(const config *c, long n)
{
    double one = run_child_as(c, n, 0, 1), two = run_child_as(c, 2 * n, 0, 1);
    return one < 0 || two < 0 ? -1 : (two - one) / (double)n;
}

static int have(const char *p)
{
    return p && *p && access(p, R_OK) == 0;
}

/* Whether configuration c can run here. */
static int present(const config *c, int have_hip, int have_ze, int have_shim)
{
    return !((strcmp(c->vendor, "hip") == 0 && !have_hip) ||
             (strcmp(c->vendor, "ze") == 0 && !have_ze) || (c->shim && !have_shim));
}

/* One row per configuration present: its figure per pair, per call, and
 * what it adds per call over its vendor's baseline.  The figure is ns
 * (best of `runs`), or with `counting` instructions under cachegrind,
 * which do not move with the machine's load (the wall-clock rows move by
 * tens of ns on a shared VM). */
static void table(int counting, long pairs, int runs, int have_hip, int have_ze, int have_shim)
{
    const char *unit = counting ? "instr" : "ns";
    char per_pair[32], per_call[32];
    snprintf(per_pair, sizeof per_pair, "%s/pair", unit);
    snprintf(per_call, sizeof per_call, "%s/call", unit);
    printf("%-7s %-36s %10s %10s %12s\n", "vendor", "configuration", per_pair, per_call,
           "added/call");
    double base = -1;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const config *c = &configs[i];
        if (!present(c, have_hip, have_ze, have_shim))
            continue;
        double v = counting ? instructions_per_pair(c, pairs) : run_child(c, pairs, runs);
        if (!c->preload && !c->shim)
            base = v;
        if (v < 0) {
            printf("%-7s %-36s %10s\n", c->vendor, c->label,
                   counting ? "failed (valgrind?)" : "failed");
            continue;
        }
        if ((!c->preload && !c->shim) || base < 0)
            printf("%-7s %-36s %10.1f %10.1f %12s\n", c->vendor, c->label, v, v / 2, "-");
        else
            printf("%-7s %-36s %10.1f %10.1f %12.1f\n", c->vendor, c->label, v, v / 2,
                   (v - base) / 2);
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], atol(argv[3]), atoi(argv[4]));
    int counting = argc > 1 && strcmp(argv[1], "--instructions") == 0;
    if (counting) {
        argv++;
        argc--;
    }
    long pairs = argc > 1 ? atol(argv[1]) : 200000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (pairs < 1 || runs < 1) {
        fprintf(stderr, "usage: hook_overhead [--instructions] [pairs] [runs]\n");
        return 2;
    }
    const char *preload = path("TDM_BENCH_PRELOAD", TDM_BENCH_PRELOAD);
    int have_hip = have(path("TDM_BENCH_FAKE_HIP", TDM_BENCH_FAKE_HIP));
    int have_ze = have(path("TDM_BENCH_FAKE_ZE", TDM_BENCH_FAKE_ZE));
    int have_shim = have(path("TDM_BENCH_ZE_SHIM", TDM_BENCH_ZE_SHIM));
    if (!have(preload) || (!have_hip && !have_ze)) {
        printf("hook_overhead: skipped (needs libtidemark_preload.so and a fake vendor library;"
               " build the tests, or set TDM_BENCH_PRELOAD and TDM_BENCH_FAKE_HIP/_ZE)\n");
        return 0;
    }
    if (counting) {
        long n = pairs < 20000 ? pairs : 20000;
        printf("hook_overhead --instructions: instructions per intercepted call under "
               "cachegrind\n(the count of %ld pairs: a run of %ld less one of %ld; added = "
               "(pair - baseline pair) / 2)\n\n", n, 2 * n, n);
        table(1, n, 0, have_hip, have_ze, have_shim);
        return 0;
    }
    printf("hook_overhead: ns per intercepted call, alloc+free pairs of 4 KiB over the fake "
           "vendor libraries\n(best of %d runs x %ld pairs, one CPU; added = (pair - baseline "
           "pair) / 2; target observe/stacks=none <= 20 ns)\n\n",
           runs, pairs);
    table(0, pairs, runs, have_hip, have_ze, have_shim);
    return 0;
}
