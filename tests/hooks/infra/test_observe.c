/* tests/hooks/infra/test_observe.c: observe mode (alloc/observe.c) and the
 * alloc/ glue the hooks use, without any hook: exact events, sizes,
 * streams and stats for a known pattern; stacks that name the caller;
 * unknown frees; oom events with free bytes; map/unmap with partial and
 * multi-piece unmaps; the snapshot state alone and beside the allocator's
 * own devices; tags; a stale record replaced, also one of another device;
 * a pool's handle moving to another device; many threads; fork while
 * another thread books; tdm__alloc_use_provider, the memory fraction and
 * the vendor preference of the PyTorch entry points.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "alloc_internal.h"
#include "provider.h"
#include "recorder.h"
#include "stack.h"
#include "symbolize.h"
#include "child_watch.h"

#define MiB ((size_t)1 << 20)
#define NOINLINE __attribute__((noinline, noclone, visibility("default")))

static int oom_hook_calls;
static void on_oom(int device, size_t requested)
{
    (void)device;
    (void)requested;
    oom_hook_calls++;
}

static void record(size_t max_entries)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = max_entries;
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
}

static int setup(void **state)
{
    (void)state;
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "passthrough");
    cfg.device_capacity = 64 * MiB;
    cfg.quiet_oom = 1;
    cfg.on_oom = on_oom;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    oom_hook_calls = 0;
    record(100000);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__alloc_reset_for_tests();
    return 0;
}

static tdm_stats stats_of(int dev)
{
    tdm_stats s;
    memset(&s, 0xab, sizeof s);
    s.size = sizeof s;
    assert_int_equal(tdm_memory_stats(dev, &s), TDM_OK);
    return s;
}

/* The ring's events, oldest first; free() the result. */
static tdm_event *events(size_t *n)
{
    tdm_event *ev = NULL;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, n, &dropped), TDM_OK);
    assert_int_equal(dropped, 0);
    return ev;
}

static void expect(const tdm_event *e, tdm_action action, int device,
                   uint64_t addr, uint64_t size, uint64_t stream)
{
    if (e->action != action)
        fail_msg("action %s, want %s", tdm__action_name(e->action),
                 tdm__action_name(action));
    assert_int_equal(e->device, device);
    assert_int_equal(e->addr, addr);
    assert_int_equal(e->size, size);
    assert_int_equal(e->stream, stream);
}

static const char *function_of(uint32_t stack_id)
{
    static char name[128];
    const uintptr_t *pcs = NULL;
    assert_true(tdm__stack_get(stack_id, &pcs) > 0);
    tdm_symbolizer *sym = NULL;
    assert_int_equal(tdm__symbolizer_open(&sym), TDM_OK);
    tdm_symbol fn;
    tdm__symbolize(sym, pcs[0], &fn);
    snprintf(name, sizeof name, "%s", fn.function);
    tdm__symbolizer_close(sym);
    return name;
}

static void seen_tail_check(uint64_t addr, uint64_t size);

/* ---- the known pattern ------------------------------------------------------ */

NOINLINE void obs_caller_alloc(const void *p, size_t n, tdm_stream s);
NOINLINE tdm_status obs_caller_free(const void *p);

NOINLINE void obs_caller_alloc(const void *p, size_t n, tdm_stream s)
{
    tdm__alloc_observe_alloc(0, p, n, s, 0);
    __asm__ volatile("" ::: "memory");
}

NOINLINE tdm_status obs_caller_free(const void *p)
{
    tdm_status st = tdm__alloc_observe_free(p, 0, 0);
    __asm__ volatile("" ::: "memory");
    return st;
}

static void books_a_pattern_exactly(void **state)
{
    (void)state;
    tdm__alloc_observe_device(0, TDM_VENDOR_CUDA, "Fake Device", 80 * MiB);
    const void *a = (void *)(uintptr_t)0x7000000000;
    const void *b = (void *)(uintptr_t)0x7000100000;
    obs_caller_alloc(a, 1000, 7);
    obs_caller_alloc(b, 5000, 0);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 6000);
    assert_int_equal(s.reserved_bytes.current, 6000);
    assert_int_equal(s.active_bytes.current, 6000);
    assert_int_equal(s.requested_bytes.current, 6000);
    assert_int_equal(s.allocation.current, 2);
    assert_int_equal(s.segment.current, 2);
    assert_int_equal(obs_caller_free(a), TDM_OK);
    /* Unknown and double frees: refused, nothing recorded. */
    assert_int_equal(obs_caller_free(a), TDM_UNKNOWN_POINTER);
    assert_int_equal(obs_caller_free((void *)(uintptr_t)0x1234000), TDM_UNKNOWN_POINTER);
    assert_int_equal(tdm__alloc_observe_free(NULL, 0, 0), TDM_OK);
    s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 5000);
    assert_int_equal(s.allocated_bytes.peak, 6000);
    assert_int_equal(s.allocation.current, 1);
    assert_int_equal(s.segment.current, 1);

    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, 7);
    expect(&ev[0], TDM_ACTION_SEGMENT_ALLOC, 0, 0x7000000000, 1000, 7);
    expect(&ev[1], TDM_ACTION_ALLOC, 0, 0x7000000000, 1000, 7);
    expect(&ev[2], TDM_ACTION_SEGMENT_ALLOC, 0, 0x7000100000, 5000, 0);
    expect(&ev[3], TDM_ACTION_ALLOC, 0, 0x7000100000, 5000, 0);
    expect(&ev[4], TDM_ACTION_FREE_REQUESTED, 0, 0x7000000000, 1000, 7);
    expect(&ev[5], TDM_ACTION_FREE_COMPLETED, 0, 0x7000000000, 1000, 7);
    expect(&ev[6], TDM_ACTION_SEGMENT_FREE, 0, 0x7000000000, 1000, 7);
    /* The stacks start at the caller of the booking function. */
    assert_string_equal(function_of(ev[1].stack_id), "obs_caller_alloc");
    assert_string_equal(function_of(ev[5].stack_id), "obs_caller_free");
    free(ev);

    /* A free on another stream is recorded on that stream. */
    assert_int_equal(tdm__alloc_observe_free(b, 9, 0), TDM_OK);
    ev = events(&n);
    assert_int_equal(n, 10);
    expect(&ev[8], TDM_ACTION_FREE_COMPLETED, 0, 0x7000100000, 5000, 9);
    free(ev);
    s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_int_equal(s.segment.current, 0);
}

static void oom_is_an_event_with_free_bytes(void **state)
{
    (void)state;
    tdm__alloc_observe_oom(1, 3 * MiB, 12345, 5, 0);
    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, 1);
    expect(&ev[0], TDM_ACTION_OOM, 1, 12345, 3 * MiB, 5);
    free(ev);
    tdm_stats s = stats_of(1);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.allocation.current, 0);
    assert_int_equal(oom_hook_calls, 1); /* dump_on=oom's hook */
}

static void map_and_unmap(void **state)
{
    (void)state;
    const uint64_t va = 0x7100000000;
    tdm__alloc_observe_map(0, (void *)(uintptr_t)va, 2 * MiB, 0);
    tdm__alloc_observe_map(0, (void *)(uintptr_t)(va + 2 * MiB), 2 * MiB, 0);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.reserved_bytes.current, 4 * MiB);
    assert_int_equal(s.allocated_bytes.current, 0); /* mapped, not allocated */
    assert_int_equal(s.segment.current, 2);
    /* One unmap over both pieces. */
    assert_int_equal(tdm__alloc_observe_unmap((void *)(uintptr_t)va, 4 * MiB, 0),
                     TDM_OK);
    s = stats_of(0);
    assert_int_equal(s.reserved_bytes.current, 0);
    assert_int_equal(s.segment.current, 0);
    assert_int_equal(tdm__alloc_observe_unmap((void *)(uintptr_t)va, 4 * MiB, 0),
                     TDM_UNKNOWN_POINTER);
    /* A partial unmap leaves the tail mapped. */
    tdm__alloc_observe_map(0, (void *)(uintptr_t)va, 4 * MiB, 0);
    assert_int_equal(tdm__alloc_observe_unmap((void *)(uintptr_t)va, MiB, 0), TDM_OK);
    s = stats_of(0);
    assert_int_equal(s.reserved_bytes.current, 3 * MiB);
    assert_int_equal(s.segment.current, 1);
    assert_int_equal(s.reserved_bytes.peak, 4 * MiB);

    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, 6);
    expect(&ev[0], TDM_ACTION_SEGMENT_MAP, 0, va, 2 * MiB, 0);
    expect(&ev[1], TDM_ACTION_SEGMENT_MAP, 0, va + 2 * MiB, 2 * MiB, 0);
    expect(&ev[2], TDM_ACTION_SEGMENT_UNMAP, 0, va, 2 * MiB, 0);
    expect(&ev[3], TDM_ACTION_SEGMENT_UNMAP, 0, va + 2 * MiB, 2 * MiB, 0);
    expect(&ev[4], TDM_ACTION_SEGMENT_MAP, 0, va, 4 * MiB, 0);
    expect(&ev[5], TDM_ACTION_SEGMENT_UNMAP, 0, va, MiB, 0);
    free(ev);
    /* The tail is its own expandable segment now. */
    seen_tail_check(va + MiB, 3 * MiB);
    assert_int_equal(tdm__alloc_observe_unmap((void *)(uintptr_t)(va + MiB), 3 * MiB, 0),
                     TDM_OK);
    assert_int_equal(stats_of(0).reserved_bytes.current, 0);
}

/* ---- the snapshot state ---------------------------------------------------- */

typedef struct seen {
    int devices;
    int device_index[8];
    char vendor[8][16];
    uint64_t capacity[8];
    int segments;
    tdm_snap_segment seg[16];
    tdm_snap_block blk[16];
    int stats;
    int stats_device[8];
    tdm_stats st[8];
} seen;

static void v_device(void *ctx, const tdm_snap_device *d)
{
    seen *s = ctx;
    s->device_index[s->devices] = d->index;
    snprintf(s->vendor[s->devices], 16, "%s", d->vendor);
    s->capacity[s->devices] = d->capacity;
    s->devices++;
}

static void v_segment(void *ctx, const tdm_snap_segment *seg,
                      const tdm_snap_block *blocks, size_t n)
{
    seen *s = ctx;
    assert_int_equal(n, 1);
    s->seg[s->segments] = *seg;
    s->blk[s->segments] = blocks[0];
    s->segments++;
}

static void v_stats(void *ctx, int device, const tdm_stats *st)
{
    seen *s = ctx;
    s->stats_device[s->stats] = device;
    s->st[s->stats] = *st;
    s->stats++;
}

static seen visit(void)
{
    static seen s;
    memset(&s, 0, sizeof s);
    tdm__state_visitor v = {&s, v_device, v_segment, v_stats, NULL, NULL};
    tdm__alloc_visit_for_tests(&v);
    return s;
}

static void seen_tail_check(uint64_t addr, uint64_t size)
{
    seen v = visit();
    assert_int_equal(v.segments, 1);
    assert_int_equal(v.seg[0].address, addr);
    assert_int_equal(v.seg[0].total_size, size);
    assert_int_equal(v.seg[0].is_expandable, 1);
    assert_int_equal(v.blk[0].state, TDM_BLOCK_INACTIVE);
}

static void observe_alone_keeps_the_allocator_off(void **state)
{
    (void)state;
    tdm__alloc_observe_device(0, TDM_VENDOR_CUDA, "Fake Device", 80 * MiB);
    tdm__alloc_observe_alloc(0, (void *)(uintptr_t)0x7200000000, 4096, 3, 0);
    tdm__alloc_observe_map(0, (void *)(uintptr_t)0x7300000000, 2 * MiB, 0);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 4096);
    assert_int_equal(s.reserved_bytes.current, 4096 + 2 * MiB);
    assert_int_equal(tdm_reset_peak_stats(0), TDM_OK);
    assert_int_equal(atomic_load(&tdm__alloc_g.ready), 0); /* no sim device */
    assert_int_equal(tdm_tag_ptr((void *)(uintptr_t)0x7200000000, TDM_CATEGORY_GRADIENT),
                     TDM_OK);
    assert_int_equal(tdm_tag_ptr((void *)(uintptr_t)0x7200001000, TDM_CATEGORY_GRADIENT),
                     TDM_UNKNOWN_POINTER);

    seen v = visit();
    assert_int_equal(v.devices, 1);
    assert_int_equal(v.device_index[0], 0);
    assert_string_equal(v.vendor[0], "cuda");
    assert_int_equal(v.capacity[0], 80 * MiB);
    assert_int_equal(v.segments, 2);
    assert_int_equal(v.seg[0].address, 0x7200000000);
    assert_int_equal(v.seg[0].pool, TDM_POOL_NONE);
    assert_int_equal(v.seg[0].is_expandable, 0);
    assert_int_equal(v.seg[0].total_size, 4096);
    assert_int_equal(v.seg[0].stream, 3);
    assert_int_equal(v.blk[0].state, TDM_BLOCK_ACTIVE_ALLOCATED);
    assert_int_equal(v.blk[0].requested_size, 4096);
    assert_int_equal(v.blk[0].category, TDM_CATEGORY_GRADIENT);
    assert_int_not_equal(v.blk[0].stack_id, 0);
    assert_int_equal(v.seg[1].is_expandable, 1);
    assert_int_equal(v.blk[1].state, TDM_BLOCK_INACTIVE);
    assert_int_equal(v.blk[1].size, 2 * MiB);
    assert_int_equal(v.stats, 1);
    assert_int_equal(v.st[0].reserved_bytes.current, 4096 + 2 * MiB);

    /* The snapshot header names the mode "observe". */
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    assert_string_equal(snap->header.alloc_mode, "observe");
    assert_int_equal(snap->device_count, 1);
    tdm__rec_snapshot_free(snap);
}

static void observe_beside_the_allocator(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(tdm_malloc(&p, 10000, 0, 0), TDM_OK); /* sim device 0 */
    tdm__alloc_observe_alloc(0, (void *)(uintptr_t)0x7400000000, 512, 0, 0);
    tdm__alloc_observe_device(1, TDM_VENDOR_CUDA, "Fake Device 1", 8 * MiB);
    tdm__alloc_observe_alloc(1, (void *)(uintptr_t)0x7500000000, 2048, 0, 0);
    tdm__alloc_observe_alloc(-1, (void *)(uintptr_t)0x7600000000, 100, 0, 0);

    tdm_stats s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 10240 + 512); /* sim rounds */
    assert_int_equal(s.segment.current, 2);
    assert_int_equal(stats_of(1).allocated_bytes.current, 2048);
    assert_int_equal(stats_of(-1).allocated_bytes.current, 100);
    tdm_stats bad = {.size = sizeof bad};
    assert_int_equal(tdm_memory_stats(5, &bad), TDM_NO_SUCH_DEVICE);

    seen v = visit();
    assert_int_equal(v.devices, 3); /* sim 0 once, fake 1, host -1 */
    int sim0 = 0, fake1 = 0, host = 0;
    for (int i = 0; i < v.devices; i++) {
        if (v.device_index[i] == 0 && strcmp(v.vendor[i], "sim") == 0)
            sim0++;
        if (v.device_index[i] == 1 && strcmp(v.vendor[i], "cuda") == 0)
            fake1++;
        if (v.device_index[i] == -1)
            host++;
    }
    assert_int_equal(sim0 + fake1 + host, 3);
    assert_int_equal(v.segments, 4);
    assert_int_equal(v.stats, 3);
    for (int i = 0; i < v.stats; i++)
        if (v.stats_device[i] == 0)
            assert_int_equal(v.st[i].allocated_bytes.current, 10240 + 512);
    assert_int_equal(tdm_free(p), TDM_OK);
    assert_int_equal(tdm__alloc_observe_free((void *)(uintptr_t)0x7400000000, 0, 0),
                     TDM_OK);
    assert_int_equal(stats_of(0).allocated_bytes.current, 0);
}

static void a_stale_record_is_closed(void **state)
{
    (void)state;
    const void *p = (void *)(uintptr_t)0x7700000000;
    tdm__alloc_observe_alloc(0, p, 1024, 0, 0);
    /* The vendor hands the address out again: its free went unseen. */
    tdm__alloc_observe_alloc(0, p, 2048, 0, 0);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.allocation.current, 1);
    assert_int_equal(s.allocated_bytes.current, 2048);
    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, 7);
    expect(&ev[3], TDM_ACTION_FREE_COMPLETED, 0, 0x7700000000, 1024, 0);
    expect(&ev[6], TDM_ACTION_ALLOC, 0, 0x7700000000, 2048, 0);
    free(ev);
}

/* A device's records change under its own lock only: a stale record of
 * another device is closed on that device; a pool's handle that moves
 * to another device takes its reserve out of the old one; a partial unmap
 * whose tail base holds another device's record unmaps the whole. */
static void records_of_another_device(void **state)
{
    (void)state;
    const void *p = (void *)(uintptr_t)0x7800000000;
    tdm__alloc_observe_alloc(0, p, 1024, 0, 0);
    tdm__alloc_observe_alloc(1, p, 2048, 0, 0); /* its free went unseen */
    assert_int_equal(stats_of(0).allocation.current, 0);
    assert_int_equal(stats_of(0).allocated_bytes.current, 0);
    assert_int_equal(stats_of(1).allocated_bytes.current, 2048);
    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, 7);
    expect(&ev[3], TDM_ACTION_FREE_COMPLETED, 0, 0x7800000000, 1024, 0);
    expect(&ev[6], TDM_ACTION_ALLOC, 1, 0x7800000000, 2048, 0);
    free(ev);
    assert_int_equal(tdm__alloc_observe_free(p, 0, 0), TDM_OK);
    assert_int_equal(stats_of(1).allocated_bytes.current, 0);

    const void *va = (void *)(uintptr_t)0x7900000000;
    tdm__alloc_observe_map(0, va, 4 * MiB, 0);
    tdm__alloc_observe_map(1, (const char *)va + 2 * MiB, MiB, 0);
    assert_int_equal(tdm__alloc_observe_unmap(va, 2 * MiB, 0), TDM_OK);
    assert_int_equal(stats_of(0).reserved_bytes.current, 0);
    assert_int_equal(stats_of(0).segment.current, 0);
    assert_int_equal(stats_of(1).reserved_bytes.current, MiB);
    ev = events(&n);
    expect(&ev[n - 1], TDM_ACTION_SEGMENT_UNMAP, 0, 0x7900000000, 4 * MiB, 0);
    free(ev);

    uint64_t pool = 0x7a00000000;
    tdm__alloc_observe_pool(0, pool, 8 * MiB, 2 * MiB, 0);
    assert_int_equal(stats_of(0).reserved_bytes.current, 6 * MiB);
    tdm__alloc_observe_pool(1, pool, 4 * MiB, 0, 0); /* made anew on device 1 */
    assert_int_equal(stats_of(0).reserved_bytes.current, 0);
    assert_int_equal(stats_of(0).segment.current, 0);
    assert_int_equal(stats_of(1).reserved_bytes.current, 5 * MiB);
    ev = events(&n);
    expect(&ev[n - 2], TDM_ACTION_SEGMENT_UNMAP, 0, pool, 6 * MiB, 0);
    expect(&ev[n - 1], TDM_ACTION_SEGMENT_MAP, 1, pool, 4 * MiB, 0);
    free(ev);
    seen v = visit();
    int pools = 0;
    for (int i = 0; i < v.segments; i++) {
        if (v.seg[i].address == pool) {
            pools++;
            assert_int_equal(v.seg[i].device, 1);
            assert_int_equal(v.seg[i].total_size, 4 * MiB);
        }
    }
    assert_int_equal(pools, 1);
    tdm__alloc_observe_pool(1, pool, 0, 0, 0);
    assert_int_equal(tdm__alloc_observe_unmap((const char *)va + 2 * MiB, MiB, 0), TDM_OK);
    assert_int_equal(stats_of(1).reserved_bytes.current, 0);
}

/* ---- threads and fork ------------------------------------------------------ */

#define THREADS 8
#define PAIRS 20000

static void *churn(void *arg)
{
    uintptr_t base = (uintptr_t)0x100000000000 + ((uintptr_t)arg << 32);
    for (int i = 0; i < PAIRS; i++) {
        const void *p = (void *)(base + (uintptr_t)(i % 64) * 4096);
        tdm__alloc_observe_alloc(0, p, 512 + (size_t)(i % 7) * 512, (tdm_stream)arg, 0);
        if (tdm__alloc_observe_free(p, 0, 0) != TDM_OK)
            fail_msg("free failed in thread %lu", (unsigned long)(uintptr_t)arg);
    }
    return NULL;
}

static void many_threads_stay_consistent(void **state)
{
    (void)state;
    record((size_t)THREADS * PAIRS * 5 + 16);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_int_equal(s.allocation.current, 0);
    assert_int_equal(s.segment.current, 0);
    assert_int_equal(s.allocation.allocated, THREADS * PAIRS);
    assert_true(s.allocated_bytes.peak >= 512);
    assert_true(s.allocated_bytes.peak <= THREADS * 3584);
    size_t n;
    tdm_event *ev = events(&n);
    assert_int_equal(n, (size_t)THREADS * PAIRS * 5);
    /* Per stream (thread): alloc and free alternate for each address. */
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < n; i++) {
        allocs += ev[i].action == TDM_ACTION_ALLOC;
        frees += ev[i].action == TDM_ACTION_FREE_COMPLETED;
    }
    assert_int_equal(allocs, (size_t)THREADS * PAIRS);
    assert_int_equal(frees, (size_t)THREADS * PAIRS);
    free(ev);
}

static _Atomic int stop_churn;
static void *churn_until_stopped(void *arg)
{
    (void)arg;
    uintptr_t i = 0;
    while (!atomic_load(&stop_churn)) {
        const void *p = (void *)(uintptr_t)(0x200000000000 + (i++ % 1024) * 4096);
        tdm__alloc_observe_alloc(0, p, 4096, 0, 0);
        tdm__alloc_observe_free(p, 0, 0);
        void *q = NULL;
        if (tdm_malloc(&q, 4096, 0, 0) == TDM_OK)
            tdm_free(q);
    }
    return NULL;
}

static void fork_while_another_thread_books(void **state)
{
    (void)state;
    pthread_t t;
    atomic_store(&stop_churn, 0);
    pthread_create(&t, NULL, churn_until_stopped, NULL);
    /* Children are judged after the churning thread is stopped and joined:
     * an assertion that jumped out of the loop would leave it running into
     * the teardown.  The alarm is generous (sanitizer builds on a loaded
     * machine are slow); a lock left held hangs for good, not for a minute. */
    int failed = 0, last_status = 0;
    for (int k = 0; k < 40 && !failed; k++) {
        pid_t pid = fork();
        if (pid < 0) {
            failed = 1;
            break;
        }
        if (pid == 0) {
            child_watch(60);
            const void *p = (void *)(uintptr_t)0x300000000000;
            tdm__alloc_observe_alloc(0, p, 4096, 0, 0);
            void *q = NULL;
            int ok = tdm__alloc_observe_free(p, 0, 0) == TDM_OK &&
                     tdm_malloc(&q, 4096, 0, 0) == TDM_OK && tdm_free(q) == TDM_OK;
            _exit(ok ? 0 : 3);
        }
        int status = child_wait(pid, 90);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed = 1;
            last_status = status;
        }
    }
    atomic_store(&stop_churn, 1);
    pthread_join(t, NULL);
    char why[64];
    if (failed)
        fail_msg("a forked child failed: %s", child_describe(last_status, why, sizeof why));
}

/* ---- providers, fraction, vendor preference -------------------------------- */

typedef struct counting {
    tdm_provider pub;
    tdm_provider *sim;
    int allocs, frees, destroyed;
} counting;

static tdm_status c_alloc(tdm_provider *p, int d, size_t n, tdm_stream s, void **out)
{
    counting *c = (counting *)p;
    c->allocs++;
    return c->sim->alloc(c->sim, d, n, s, out);
}
static tdm_status c_free(tdm_provider *p, int d, void *ptr, size_t n)
{
    counting *c = (counting *)p;
    c->frees++;
    return c->sim->free(c->sim, d, ptr, n);
}
static tdm_status c_info(tdm_provider *p, int d, size_t *f, size_t *t)
{
    counting *c = (counting *)p;
    return c->sim->mem_info(c->sim, d, f, t);
}
static void c_name(tdm_provider *p, int d, char *buf, size_t len)
{
    snprintf(buf, len, "counting %d", d);
}
static void c_destroy(tdm_provider *p)
{
    counting *c = (counting *)p;
    c->sim->destroy(c->sim);
    c->destroyed++;
}

static void a_given_provider_serves(void **state)
{
    (void)state;
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK); /* cache mode */
    static counting c;
    memset(&c, 0, sizeof c);
    tdm_sim_config sc = {.device_count = 1, .capacity = 256 * MiB};
    assert_int_equal(tdm__provider_sim_create(&sc, &c.sim), TDM_OK);
    c.pub = (tdm_provider){.vendor = TDM_VENDOR_SIM, .device_count = 1, .alloc = c_alloc,
                           .free = c_free, .mem_info = c_info,
                           .device_name = c_name, .destroy = c_destroy};
    assert_int_equal(tdm__alloc_use_provider(NULL), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__alloc_use_provider(&c.pub), TDM_OK);
    void *p[100];
    for (int i = 0; i < 100; i++)
        assert_int_equal(tdm_malloc(&p[i], 4096, 0, 0), TDM_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(tdm_free(p[i]), TDM_OK);
    assert_int_equal(c.allocs, 1); /* one 2 MiB segment serves them all */
    assert_int_equal(stats_of(0).allocation.allocated, 100);
    /* Too late once the allocator runs. */
    assert_int_equal(tdm__alloc_use_provider(&c.pub), TDM_BAD_CONFIG);

    /* The memory fraction: 64 MiB of 256 MiB. */
    assert_int_equal(tdm__alloc_set_memory_fraction(0.25, 0), TDM_OK);
    void *big = NULL;
    assert_int_equal(tdm_malloc(&big, 80 * MiB, 0, 0), TDM_OUT_OF_MEMORY);
    assert_int_equal(tdm_malloc(&big, 40 * MiB, 0, 0), TDM_OK);
    assert_int_equal(tdm_free(big), TDM_OK);
    assert_int_equal(tdm__alloc_set_memory_fraction(1.0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&big, 80 * MiB, 0, 0), TDM_OK);
    assert_int_equal(tdm_free(big), TDM_OK);
    assert_int_equal(tdm__alloc_set_memory_fraction(2.0, 0), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__alloc_set_memory_fraction(0.5, 3), TDM_NO_SUCH_DEVICE);
    tdm__alloc_reset_for_tests();
    assert_int_equal(c.destroyed, 1); /* the allocator owned it */
}

static void vendor_preference_falls_back_to_sim(void **state)
{
    (void)state;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        skip(); /* a CUDA driver is here: the switch is the GPU tests' job */
    }
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_prefer_vendor(TDM_VENDOR_CUDA), TDM_OK);
    assert_int_equal(tdm__alloc_init(), TDM_OK);
    int count = 0;
    assert_int_equal(tdm_device_count(&count), TDM_OK);
    assert_int_equal(count, 1);
    seen v = visit();
    assert_string_equal(v.vendor[0], "sim");
    /* A configured device kind that is absent fails cleanly. */
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    cfg.device_kind = TDM_VENDOR_CUDA;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    void *p = NULL;
    assert_int_equal(tdm_malloc(&p, 512, 0, 0), TDM_NOT_AVAILABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(books_a_pattern_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(oom_is_an_event_with_free_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(map_and_unmap, setup, teardown),
        cmocka_unit_test_setup_teardown(observe_alone_keeps_the_allocator_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(observe_beside_the_allocator, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stale_record_is_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(records_of_another_device, setup, teardown),
        cmocka_unit_test_setup_teardown(many_threads_stay_consistent, setup, teardown),
        cmocka_unit_test_setup_teardown(fork_while_another_thread_books, setup, teardown),
        cmocka_unit_test_setup_teardown(a_given_provider_serves, setup, teardown),
        cmocka_unit_test_setup_teardown(vendor_preference_falls_back_to_sim, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
