/* tests/unit/test_alloc_passthrough.c: tdm_malloc/tdm_free in
 * mode=passthrough (each allocation its own segment): exact stats after a
 * known pattern, peaks and their reset, size 0, unknown pointers, OOM,
 * the events and the snapshot state, and many threads at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>

#include "alloc.h"
#include "recorder.h"
#include "stack.h"
#include "symbolize.h"

#define MiB ((size_t)1 << 20)

static int setup_pt(void **state)
{
    (void)state;
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "passthrough");
    cfg.device_capacity = 64 * MiB;
    cfg.device_count = 2;
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
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

static void test_stats_exact(void **state)
{
    (void)state;
    const size_t req[] = {100, 512, 0, 1000, MiB + 1};
    const size_t rnd[] = {512, 512, 512, 1024, MiB + 512};
    void *p[5];
    int64_t bytes = 0, asked = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tdm_malloc(&p[i], req[i], 1, 0), TDM_OK);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 512, 0);
        bytes += (int64_t)rnd[i];
        asked += (int64_t)req[i];
    }
    tdm_stats s = stats_of(1);
    assert_int_equal(s.allocated_bytes.current, bytes);
    assert_int_equal(s.reserved_bytes.current, bytes);
    assert_int_equal(s.active_bytes.current, bytes);
    assert_int_equal(s.requested_bytes.current, asked);
    assert_int_equal(s.allocation.current, 5);
    assert_int_equal(s.segment.current, 5);
    assert_int_equal(s.allocated_bytes.peak, bytes);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(s.num_alloc_retries, 0);
    /* Device 0 saw nothing. */
    tdm_stats s0 = stats_of(0);
    assert_int_equal(s0.allocation.allocated, 0);
    assert_int_equal(s0.reserved_bytes.peak, 0);
    size_t f = 0, t = 0;
    assert_int_equal(tdm_mem_get_info(1, &f, &t), TDM_OK);
    assert_int_equal(t, 64 * MiB);
    assert_int_equal(f, 64 * MiB - (size_t)bytes);

    /* Free the largest: current drops, peak stays, freed sums grow. */
    assert_int_equal(tdm_free(p[4]), TDM_OK);
    s = stats_of(1);
    assert_int_equal(s.allocated_bytes.current, bytes - (int64_t)rnd[4]);
    assert_int_equal(s.allocated_bytes.peak, bytes);
    assert_int_equal(s.allocated_bytes.freed, (int64_t)rnd[4]);
    assert_int_equal(s.allocated_bytes.allocated, bytes);
    assert_int_equal(s.requested_bytes.current, asked - (int64_t)req[4]);
    assert_int_equal(s.allocation.current, 4);
    assert_int_equal(s.allocation.allocated, 5);
    assert_int_equal(s.allocation.freed, 1);
    assert_int_equal(s.segment.freed, 1);

    assert_int_equal(tdm_reset_peak_stats(1), TDM_OK);
    s = stats_of(1);
    assert_int_equal(s.allocated_bytes.peak, s.allocated_bytes.current);
    assert_int_equal(s.allocation.peak, 4);
    assert_int_equal(s.allocation.allocated, 5); /* sums are not peaks */

    for (int i = 0; i < 4; i++)
        assert_int_equal(tdm_free(p[i]), TDM_OK);
    s = stats_of(1);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_int_equal(s.requested_bytes.current, 0);
    assert_int_equal(s.segment.current, 0);
    assert_int_equal(s.allocated_bytes.freed, bytes);
    assert_int_equal(tdm_mem_get_info(1, &f, &t), TDM_OK);
    assert_int_equal(f, 64 * MiB);
    /* Pass-through has no pools: the per-pool rows stay empty. */
    tdm_stats sp = {.size = sizeof sp};
    assert_int_equal(tdm_memory_stats_pool(1, TDM_STAT_POOL_SMALL, &sp), TDM_OK);
    assert_int_equal(sp.allocation.allocated, 0);
}

static void test_size_zero_and_unknown(void **state)
{
    (void)state;
    void *a = NULL, *b = NULL;
    assert_int_equal(tdm_malloc(&a, 0, 0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&b, 0, 0, 0), TDM_OK);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    tdm_stats before = stats_of(0);
    assert_int_equal(tdm_free((void *)0x12345600), TDM_UNKNOWN_POINTER);
    assert_int_equal(tdm_free((char *)a + 256), TDM_UNKNOWN_POINTER);
    assert_int_equal(tdm_free(NULL), TDM_OK);
    tdm_stats after = stats_of(0);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(tdm_free(a), TDM_OK);
    assert_int_equal(tdm_free(a), TDM_UNKNOWN_POINTER); /* double free */
    assert_int_equal(tdm_free(b), TDM_OK);
    assert_int_equal(stats_of(0).allocation.current, 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    void *a = (void *)1;
    assert_int_equal(tdm_malloc(&a, 512, 2, 0), TDM_NO_SUCH_DEVICE);
    assert_null(a);
    assert_int_equal(tdm_malloc(&a, 512, -1, 0), TDM_NO_SUCH_DEVICE);
    assert_int_equal(tdm_malloc(NULL, 512, 0, 0), TDM_INVALID_ARGUMENT);
    int n = 0;
    assert_int_equal(tdm_device_count(&n), TDM_OK);
    assert_int_equal(n, 2);
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(5, &s), TDM_NO_SUCH_DEVICE);
    assert_int_equal(tdm_reset_peak_stats(5), TDM_NO_SUCH_DEVICE);
    /* Devices are in use: a new configuration is refused. */
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_BAD_CONFIG);
    assert_string_equal(tdm__alloc_mode_name(), "passthrough");
}

static void test_oom(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    o.stacks = TDM_STACKS_NONE;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    void *a = NULL, *b = (void *)1;
    assert_int_equal(tdm_malloc(&a, 40 * MiB, 0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&b, 30 * MiB + 5, 0, 7), TDM_OUT_OF_MEMORY);
    assert_null(b);
    tdm_stats s = stats_of(0);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.allocation.current, 1);
    tdm_event *ev = NULL;
    size_t n = 0;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_true(n >= 3);
    const tdm_event *oom = &ev[n - 1];
    assert_int_equal(oom->action, TDM_ACTION_OOM);
    assert_int_equal(oom->addr, 24 * MiB); /* device free bytes */
    assert_int_equal(oom->size, 30 * MiB + 512);
    assert_int_equal(oom->requested, 30 * MiB + 5);
    assert_int_equal(oom->stream, 7);
    free(ev);
    assert_int_equal(tdm_free(a), TDM_OK);
}

static void test_events(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    void *a = NULL;
    assert_int_equal(tdm_malloc(&a, 1000, 1, 3), TDM_OK);
    assert_int_equal(tdm_free(a), TDM_OK);
    tdm_event *ev = NULL;
    size_t n = 0;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, 5);
    const int want[5] = {TDM_ACTION_SEGMENT_ALLOC, TDM_ACTION_ALLOC,
                         TDM_ACTION_FREE_REQUESTED, TDM_ACTION_FREE_COMPLETED,
                         TDM_ACTION_SEGMENT_FREE};
    const uint64_t size[5] = {1024, 1000, 1000, 1000, 1024};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ev[i].action, want[i]);
        assert_int_equal(ev[i].addr, (uintptr_t)a);
        assert_int_equal(ev[i].size, size[i]);
        assert_int_equal(ev[i].requested, 1000);
        assert_int_equal(ev[i].device, 1);
        assert_int_equal(ev[i].stream, 3);
        /* context=all with native stacks: every event has a stack, and the
         * alloc's stack is the segment's. */
        assert_int_not_equal(ev[i].stack_id, 0);
    }
    assert_int_equal(ev[0].stack_id, ev[1].stack_id);
    /* tidemark's own frames are skipped: the innermost frame of the
     * allocation stack is this test, where tdm_malloc was called. */
    const uintptr_t *pcs = NULL;
    assert_true(tdm__stack_get(ev[1].stack_id, &pcs) > 0);
    tdm_symbolizer *sym = NULL;
    assert_int_equal(tdm__symbolizer_open(&sym), TDM_OK);
    tdm_symbol fn;
    tdm__symbolize(sym, pcs[0], &fn);
    assert_string_equal(fn.function, "test_events");
    assert_true(tdm__stack_get(ev[3].stack_id, &pcs) > 0);
    tdm__symbolize(sym, pcs[0], &fn);
    assert_string_equal(fn.function, "test_events"); /* the free's own stack */
    tdm__symbolizer_close(sym);
    free(ev);
}

/* The alloc event and the live block agree on when and what: the event
 * reuses the time and category the allocation's record took. */
static void test_event_matches_block(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    assert_int_equal(tdm_tag_push(TDM_CATEGORY_ACTIVATION), TDM_OK);
    void *a = NULL;
    assert_int_equal(tdm_malloc(&a, 3000, 0, 0), TDM_OK);
    assert_int_equal(tdm_tag_pop(), TDM_OK);
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    const tdm_event *alloc = NULL;
    for (size_t i = 0; i < snap->event_count; i++)
        if (snap->events[i].action == TDM_ACTION_ALLOC)
            alloc = &snap->events[i];
    assert_non_null(alloc);
    assert_int_equal(snap->block_count, 1);
    assert_int_not_equal(alloc->time_ns, 0);
    assert_int_equal(alloc->time_ns, snap->blocks[0].alloc_time_ns);
    assert_int_equal(alloc->category, TDM_CATEGORY_ACTIVATION);
    assert_int_equal(snap->blocks[0].category, TDM_CATEGORY_ACTIVATION);
    tdm__rec_snapshot_free(snap);
    assert_int_equal(tdm_free(a), TDM_OK);
}

typedef struct seen {
    int devices, segments;
    uint64_t last_addr[2];
    uint64_t bytes[2];
    int ordered;
    int cat_param;
} seen;

static void on_device(void *ctx, const tdm_snap_device *d)
{
    seen *s = ctx;
    assert_string_equal(d->vendor, "sim");
    assert_string_equal(d->name, d->index == 0 ? "sim0" : "sim1");
    assert_int_equal(d->capacity, 64 * MiB);
    s->devices++;
}

static void on_segment(void *ctx, const tdm_snap_segment *seg,
                       const tdm_snap_block *b, size_t n)
{
    seen *s = ctx;
    assert_int_equal(n, 1);
    assert_int_equal(seg->pool, TDM_POOL_NONE);
    assert_int_equal(b[0].address, seg->address);
    assert_int_equal(b[0].size, seg->total_size);
    assert_int_equal(b[0].state, TDM_BLOCK_ACTIVE_ALLOCATED);
    if (seg->address < s->last_addr[seg->device])
        s->ordered = 0;
    s->last_addr[seg->device] = seg->address;
    s->bytes[seg->device] += seg->total_size;
    if (b[0].category == TDM_CATEGORY_PARAMETER)
        s->cat_param++;
    s->segments++;
}

static void on_stats(void *ctx, int dev, const tdm_stats *st)
{
    seen *s = ctx;
    assert_int_equal(st->reserved_bytes.current, (int64_t)s->bytes[dev]);
}

/* The allocator registers its state source with the recorder; reach it
 * through a snapshot build so the test sees what a dump sees. */
static void test_state_source(void **state)
{
    (void)state;
    void *p[10];
    for (int i = 0; i < 10; i++)
        assert_int_equal(tdm_malloc(&p[i], (size_t)(i + 1) * 1000, i % 2, 0), TDM_OK);
    assert_int_equal(tdm_tag_ptr(p[3], TDM_CATEGORY_PARAMETER), TDM_OK);
    assert_int_equal(tdm_tag_ptr((char *)p[3] + 512, TDM_CATEGORY_PARAMETER),
                     TDM_UNKNOWN_POINTER);
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    assert_int_equal(snap->device_count, 2);
    assert_int_equal(snap->segment_count, 10);
    assert_int_equal(snap->block_count, 10);
    int params = 0;
    for (size_t i = 0; i < snap->block_count; i++)
        params += snap->blocks[i].category == TDM_CATEGORY_PARAMETER;
    assert_int_equal(params, 1);
    assert_string_equal(snap->header.alloc_mode, "passthrough");
    tdm__rec_snapshot_free(snap);

    /* And the visitor directly, through a local copy of the interface. */
    seen s = {.ordered = 1};
    tdm__state_visitor v = {.ctx = &s, .device = on_device,
                            .segment = on_segment, .stats = on_stats};
    tdm__alloc_visit_for_tests(&v);
    assert_int_equal(s.devices, 2);
    assert_int_equal(s.segments, 10);
    assert_true(s.ordered);
    assert_int_equal(s.cat_param, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(tdm_free(p[i]), TDM_OK);
}

typedef struct thr {
    unsigned seed;
    int errors;
    int64_t allocs;
} thr;

static void *hammer(void *arg)
{
    thr *t = arg;
    void *live[32] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&t->seed) % 32);
        if (live[k]) {
            t->errors += tdm_free(live[k]) != TDM_OK;
            live[k] = NULL;
        } else {
            size_t sz = (size_t)(rand_r(&t->seed) % 50000);
            t->errors += tdm_malloc(&live[k], sz, k % 2, 0) != TDM_OK;
            t->allocs++;
        }
    }
    for (int k = 0; k < 32; k++)
        if (live[k])
            t->errors += tdm_free(live[k]) != TDM_OK;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    enum { T = 8 };
    pthread_t th[T];
    thr t[T];
    for (int i = 0; i < T; i++) {
        t[i] = (thr){.seed = (unsigned)(i * 31 + 1)};
        pthread_create(&th[i], NULL, hammer, &t[i]);
    }
    int64_t allocs = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].errors, 0);
        allocs += t[i].allocs;
    }
    tdm_stats s0 = stats_of(0), s1 = stats_of(1);
    assert_int_equal(s0.allocation.current + s1.allocation.current, 0);
    assert_int_equal(s0.allocation.allocated + s1.allocation.allocated, allocs);
    assert_int_equal(s0.allocation.freed + s1.allocation.freed, allocs);
    assert_int_equal(s0.reserved_bytes.current + s1.reserved_bytes.current, 0);
    size_t f = 0, tot = 0;
    assert_int_equal(tdm_mem_get_info(0, &f, &tot), TDM_OK);
    assert_int_equal(f, tot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stats_exact, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_size_zero_and_unknown, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_oom, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_events, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_event_matches_block, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_state_source, setup_pt, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup_pt, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
