/* bench/replay_peers.c: the columns of bench/replay — tidemark's cache
 * (recording off / on without stacks) and the host allocators it is
 * compared with: glibc malloc, jemalloc and mimalloc.
 *
 * jemalloc and mimalloc are dlopen()ed with RTLD_LOCAL and called through
 * dlsym'd pointers (mallocx/sdallocx, mi_malloc/mi_free), so the process's
 * own malloc stays glibc's and neither library is needed to build; a
 * library missing at run time makes its column "n/a".
 *
 * Fairness: a caching allocator keeps what it reserved and never gives it
 * back while the program runs, and nobody here touches the memory handed
 * out.  The host allocators get the trace's sizes unchanged (scaling them
 * down would move small requests into the tiny size classes, where host
 * allocators are at their fastest, and so flatter them) but are set up to
 * behave like a cache too, with no way back to the kernel on the hot path:
 *   - glibc: mallopt(M_MMAP_MAX, 0) turns the mmap path off (by default
 *     requests over 128 KiB, later up to 32 MiB, were mmap()ed and
 *     munmap()ed one by one: a system call and a page fault on the chunk
 *     header per request), so every size is carved from the heap;
 *     M_TRIM_THRESHOLD = INT_MAX keeps the heap from being trimmed.
 *   - jemalloc: dirty_decay_ms and muzzy_decay_ms -1 (never purge).
 *   - mimalloc: allow_decommit 0 (never decommit or reset), and a reserved
 *     arena (reserve_os_memory) so huge objects are not mmap()ed per call.
 * These are set before the libraries start (environment, mallopt); the
 * table's header repeats them.  Minor page faults per pass are reported
 * next to the times, so a column that touches pages shows it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "lock.h"
#include "recorder.h"
#include "replay.h"
#include "tidemark.h"

const char *peers_policy_text =
    "host allocators get the trace's sizes unchanged, set up to keep what they take:\n"
    "  glibc mallopt(M_MMAP_MAX=0, M_TRIM_THRESHOLD=INT_MAX): no mmap path, no trim;\n"
    "  jemalloc dirty/muzzy_decay_ms=-1: no purge; mimalloc allow_decommit=0 and a\n"
    "  reserved 16 GiB arena: huge objects not mmap()ed per call.  Nobody touches memory.";

/* ---- tidemark ---- */

static int tdm_a(void *ctx, void **p, size_t size)
{
    return tdm_malloc(p, size, 0, (tdm_stream)(uintptr_t)ctx) == TDM_OK ? 0 : -1;
}
static void tdm_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    tdm_free(p);
}

static void set_recording(int on)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.enabled = on ? TDM_RECORD_ALL : TDM_RECORD_OFF;
    o.stacks = TDM_STACKS_NONE;
    o.context = TDM_CONTEXT_NONE;
    o.max_entries = 1 << 12; /* wraps within every pass, as in a long run */
    if (tdm_record_memory_history(&o) != TDM_OK) {
        fprintf(stderr, "replay: cannot %s recording\n", on ? "start" : "stop");
        exit(1);
    }
    /* Turning recording off gives the ring back, and on makes a fresh
     * one: its first lap's page faults (64 pages; 12 us each on some
     * VMs) would land in the timed pass, where a long run has none.  Two
     * laps of events here, untimed, put every page of the ring in place. */
    if (on)
        for (uint64_t i = 0; i < 2 * (uint64_t)o.max_entries; i++)
            tdm__rec_event(TDM_ACTION_ALLOC, 0, (i + 1) << 9, 512, 512, 0, 0);
}
static void recording_off(void) { set_recording(0); }
static void recording_on(void) { set_recording(1); }

static void fresh_cache(int expandable_segments, int devices)
{
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_capacity = (uint64_t)64 << 30;
    cfg.device_count = devices;
    cfg.expandable_segments = expandable_segments;
    tdm__alloc_configure(&cfg);
    set_recording(0);
}

void use_cache_with(int expandable_segments) { fresh_cache(expandable_segments, 1); }
void use_cache(void) { fresh_cache(0, 1); }
void use_cache_devices(int devices) { fresh_cache(0, devices); }

void cache_set_stream_ctx(backend *b, uintptr_t stream)
{
    if (b->alloc == tdm_a)
        b->ctx = (void *)stream;
}

/* ---- glibc ---- */

static int libc_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    *p = malloc(size);
    return *p ? 0 : -1;
}
static void libc_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

/* ---- jemalloc ---- */

static void *(*je_mallocx)(size_t, int);
static void (*je_sdallocx)(void *, size_t, int);
static int je_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    *p = je_mallocx(size ? size : 1, 0);
    return *p ? 0 : -1;
}
static void je_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    je_sdallocx(p, size ? size : 1, 0);
}

/* ---- mimalloc (declared here: no header needed to build) ---- */

static void *(*mi_malloc_fn)(size_t);
static void (*mi_free_fn)(void *);
static int mi_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    *p = mi_malloc_fn(size);
    return *p ? 0 : -1;
}
static void mi_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    mi_free_fn(p);
}

void peers_prepare_process(char **argv)
{
    /* Read by jemalloc and mimalloc when they start (first call / load). */
    setenv("MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1", 1);
    setenv("MIMALLOC_ALLOW_DECOMMIT", "0", 1);
    setenv("MIMALLOC_RESERVE_OS_MEMORY", "16GiB", 1);
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);

    void *je = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (je == NULL && getenv("TDM_BENCH_REEXEC") == NULL) {
        /* Debian's jemalloc needs 2.6 KB of static TLS, more than glibc
         * keeps for dlopen(); ask for room and start again. */
        setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=16384", 1);
        setenv("TDM_BENCH_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
    }
    if (je != NULL) {
        je_mallocx = (void *(*)(size_t, int))dlsym(je, "mallocx");
        je_sdallocx = (void (*)(void *, size_t, int))dlsym(je, "sdallocx");
    }
    void *mi = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (mi != NULL) {
        mi_malloc_fn = (void *(*)(size_t))dlsym(mi, "mi_malloc");
        mi_free_fn = (void (*)(void *))dlsym(mi, "mi_free");
    }
}

/* ---- tidemark, a device per thread ---- */

static int dev_a(void *ctx, void **p, size_t size)
{
    return tdm_malloc(p, size, (int)(uintptr_t)ctx, 0) == TDM_OK ? 0 : -1;
}

void device_columns(backend cols[DCOL_COUNT])
{
    cols[DCOL_OWN_DEVICE] = (backend){"tidemark, devices 1..N", dev_a, tdm_f, NULL, NULL, 1, 0};
}

void peers_fill(backend cols[COL_COUNT])
{
    cols[COL_CACHE] = (backend){"tidemark cache", tdm_a, tdm_f, recording_off, NULL, 1, 0};
    cols[COL_CACHE_REC] = (backend){"tidemark cache+rec", tdm_a, tdm_f, recording_on, NULL, 1, 0};
    cols[COL_GLIBC] = (backend){"glibc", libc_a, libc_f, NULL, NULL, 1, 1};
    cols[COL_JEMALLOC] = (backend){"jemalloc", je_a, je_f, NULL, NULL,
                                   je_mallocx != NULL && je_sdallocx != NULL, 1};
    cols[COL_MIMALLOC] = (backend){"mimalloc", mi_a, mi_f, NULL, NULL,
                                   mi_malloc_fn != NULL && mi_free_fn != NULL, 1};
}
