/* tests/unit/test_ring.c: the bounded event ring and the recorder's hot
 * path: the ring keeps the newest max_entries events and counts the rest;
 * threads recording at once lose nothing and keep their own order; the
 * recorder stamps phase, step and tags; reconfiguration behaves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "ring.h"
#include "recorder.h"

static tdm_event make_event(uint64_t i)
{
    tdm_event ev = {
        .time_ns = 1000 + i, .addr = i * 512, .size = i, .requested = i + 1,
        .stream = 7, .stack_id = (uint32_t)i, .phase = 3, .step = 4,
        .device = 1, .action = TDM_ACTION_ALLOC, .category = 2,
    };
    return ev;
}

static void ring_keeps_newest_and_counts_drops(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(100, &r), TDM_OK);
    for (uint64_t i = 0; i < 1000; i++) {
        tdm_event ev = make_event(i);
        tdm__ring_push(r, &ev);
    }
    tdm_event out[100];
    uint64_t lost = 0;
    size_t n = tdm__ring_copy(r, out, 100, &lost);
    assert_int_equal(n, 100);
    assert_int_equal(lost, 900);
    for (size_t k = 0; k < n; k++) {
        tdm_event want = make_event(900 + k);
        assert_memory_equal(&out[k], &want, sizeof want);
    }
    tdm__ring_destroy(r);
}

static void ring_partial_fill_has_no_drops(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(64, &r), TDM_OK);
    for (uint64_t i = 0; i < 10; i++) {
        tdm_event ev = make_event(i);
        tdm__ring_push(r, &ev);
    }
    tdm_event out[64];
    uint64_t lost = 99;
    assert_int_equal(tdm__ring_copy(r, out, 64, &lost), 10);
    assert_int_equal(lost, 0);
    assert_int_equal(out[0].addr, 0);
    assert_int_equal(out[9].addr, 9 * 512);
    tdm__ring_destroy(r);
}

static void ring_rejects_zero_capacity(void **state)
{
    (void)state;
    tdm__ring *r = (tdm__ring *)1;
    assert_int_equal(tdm__ring_create(0, &r), TDM_INVALID_ARGUMENT);
    assert_null(r);
}

static void ring_retired_stays_writable(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(1000, &r), TDM_OK);
    tdm_event ev = make_event(1);
    tdm__ring_push(r, &ev);
    tdm__ring_retire(r);
    tdm__ring_push(r, &ev); /* a late writer must not fault */
    tdm__ring_destroy(r);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 (as ring.c) */
#endif

/* Whether the page at p is resident. */
static int resident(const void *p)
{
    unsigned char v = 0;
    assert_int_equal(mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v), 0);
    return v & 1;
}

/* The first lap's pages are put in place a step ahead of the writers
 * (populate_ahead in ring.c), not faulted in one by one, and not the whole
 * ring at once; the program's errno is untouched. */
static void ring_pages_come_ahead_of_writers(void **state)
{
    (void)state;
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
    int supported = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    munmap(probe, 4096);
    if (!supported)
        skip(); /* Linux before 5.14: the pages come by faults */
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(1u << 18, &r), TDM_OK); /* 16 MiB of slots */
    assert_int_equal(atomic_load(&r->populated), 0);
    errno = EDOM;
    for (uint64_t i = 0; i < 100; i++) { /* two chunks of 64 */
        tdm_event ev = make_event(i);
        tdm__ring_push(r, &ev);
    }
    assert_int_equal(errno, EDOM);
    uint64_t have = atomic_load(&r->populated);
    uint64_t written = (uint64_t)((char *)&r->slots[128] - (char *)r);
    assert_true(have >= written + (256u << 10)); /* a whole step ahead */
    assert_true(have < r->map_bytes / 4);        /* not the whole ring */
    for (uint64_t off = 0; off < have; off += 4096)
        assert_true(resident((char *)r + off));
    assert_false(resident((char *)r + r->map_bytes - 4096));
    tdm__ring_retire(r); /* nothing more is put in place for a retired ring */
    assert_int_equal(atomic_load(&r->populated), r->map_bytes);
    tdm__ring_destroy(r);
}

/* ---- recorder ------------------------------------------------------------ */

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void record_all(size_t max_entries, tdm_context_mode context,
                       tdm_stacks_mode stacks)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = max_entries;
    o.context = context;
    o.stacks = stacks;
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
}

static void record_off(void)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
}

#define THREADS 4
#define PER_THREAD 50000

static void *record_thread(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PER_THREAD; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, (int)t, (t << 32) | i, i, i, t, 0);
    return NULL;
}

static void four_threads_lose_nothing_and_keep_order(void **state)
{
    (void)state;
    record_all(THREADS * PER_THREAD, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, record_thread, (void *)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, THREADS * PER_THREAD);
    assert_int_equal(dropped, 0);
    uint64_t next[THREADS] = {0};
    uint64_t last_time[THREADS] = {0};
    for (size_t k = 0; k < n; k++) {
        uint64_t t = ev[k].stream;
        assert_true(t < THREADS);
        assert_int_equal(ev[k].device, (int)t);
        /* each thread's events appear in the order it made them */
        assert_int_equal(ev[k].addr, (t << 32) | next[t]);
        assert_true(ev[k].time_ns >= last_time[t]);
        last_time[t] = ev[k].time_ns;
        next[t]++;
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(next[t], PER_THREAD);
    free(ev);
    record_off();
}

static void recorder_counts_drops_past_max_entries(void **state)
{
    (void)state;
    record_all(1000, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    for (uint64_t i = 0; i < 5000; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, i, 1, 1, 0, 0);
    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, 1000);
    assert_int_equal(dropped, 4000);
    assert_int_equal(ev[0].addr, 4000);
    assert_int_equal(ev[999].addr, 4999);
    free(ev);
    record_off();
}

/* A dump costs what was recorded, not what max_entries allows: a copy
 * from a ring of 2^26 entries holding ten walked every chunk of it (a page
 * fault each, a million here; with max_entries=1e9 the exit dump of a
 * program that allocated once ran for minutes and grew by gigabytes). */
static void a_copy_walks_only_what_was_written(void **state)
{
    (void)state;
    record_all((size_t)1 << 26, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    for (uint64_t i = 0; i < 10; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, i, 1, 1, 0, 0);
    long before = minor_faults();
    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    long faults = minor_faults() - before;
    assert_int_equal(n, 10);
    assert_int_equal(dropped, 0);
    assert_int_equal(ev[9].addr, 9);
    free(ev);
    if (faults >= 20000) /* (a million before; sanitizers' shadow pages add some) */
        fail_msg("%ld page faults for a copy of ten events", faults);
    record_off();
}

static void recorder_stamps_phase_step_and_tag(void **state)
{
    (void)state;
    record_all(100, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    uint32_t step0 = tdm__rec_current_step();
    assert_int_equal(tdm_phase("forward"), TDM_OK);
    uint32_t forward = tdm__rec_current_phase();
    assert_int_equal(tdm_step(), TDM_OK);
    assert_int_equal(tdm_tag_push(TDM_CATEGORY_ACTIVATION), TDM_OK);
    tdm__rec_event(TDM_ACTION_ALLOC, 0, 0x1000, 64, 64, 0, 0);
    assert_int_equal(tdm_tag_pop(), TDM_OK);
    assert_int_equal(tdm_tag_pop(), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_phase("backward"), TDM_OK);
    tdm__rec_event(TDM_ACTION_FREE_COMPLETED, 0, 0x1000, 64, 64, 0, 0);
    /* the same name maps to the same phase id */
    assert_int_equal(tdm_phase("forward"), TDM_OK);
    assert_int_equal(tdm__rec_current_phase(), forward);

    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    /* phase, step, alloc, phase, free, phase */
    assert_int_equal(n, 6);
    assert_int_equal(ev[0].action, TDM_ACTION_PHASE);
    assert_int_equal(ev[0].phase, forward);
    assert_int_equal(ev[1].action, TDM_ACTION_STEP);
    assert_int_equal(ev[1].step, step0 + 1);
    assert_int_equal(ev[2].action, TDM_ACTION_ALLOC);
    assert_int_equal(ev[2].category, TDM_CATEGORY_ACTIVATION);
    assert_int_equal(ev[2].phase, forward);
    assert_int_equal(ev[2].step, step0 + 1);
    assert_int_equal(ev[4].action, TDM_ACTION_FREE_COMPLETED);
    assert_int_equal(ev[4].category, TDM_CATEGORY_UNKNOWN);
    assert_int_not_equal(ev[4].phase, forward);
    assert_true(ev[0].time_ns > 1600000000ull * 1000000000ull); /* epoch-based */
    free(ev);
    record_off();
}

static void recorder_off_records_nothing(void **state)
{
    (void)state;
    record_off();
    assert_false(tdm_is_recording());
    tdm__rec_event(TDM_ACTION_ALLOC, 0, 1, 1, 1, 0, 0);
    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, 0);
    free(ev);
}

static void options_are_validated(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = 0;
    assert_int_equal(tdm_record_memory_history(&o), TDM_INVALID_ARGUMENT);
    tdm_history_options_init(&o);
    o.context = (tdm_context_mode)9;
    assert_int_equal(tdm_record_memory_history(&o), TDM_INVALID_ARGUMENT);
    tdm_history_options_init(&o);
    o.stacks = (tdm_stacks_mode)(TDM_STACKS_ALL + 1);
    assert_int_equal(tdm_record_memory_history(&o), TDM_INVALID_ARGUMENT);
    tdm_history_options_init(&o);
    o.size = 4; /* too short to hold the fields */
    assert_int_equal(tdm_record_memory_history(&o), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_tag_push((tdm_category)TDM_CATEGORY_COUNT_), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_phase(""), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_phase(NULL), TDM_INVALID_ARGUMENT);
}

static void resizing_keeps_counting_drops(void **state)
{
    (void)state;
    record_all(10, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    for (int i = 0; i < 25; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, (uint64_t)i, 1, 1, 0, 0);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = 20;
    o.context = TDM_CONTEXT_NONE;
    o.stacks = TDM_STACKS_NONE;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__rec_event(TDM_ACTION_ALLOC, 0, 99, 1, 1, 0, 0);
    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(dropped, 25);
    free(ev);
    record_off();
}

static void compound_entries_expand_in_copies(void **state)
{
    (void)state;
    record_all(10, TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    assert_int_equal(tdm_tag_push(TDM_CATEGORY_INPUT), TDM_OK);
    tdm__rec_event(TDM__ACTION_SEGMENT_ALLOC_ALLOC, 1, 0x2000, 4096, 1000, 5, 7);
    tdm__rec_event(TDM_ACTION_SNAPSHOT, -1, 0, 0, 0, 0, 0);
    tdm__rec_event(TDM__ACTION_FREE_SEGMENT_FREE, 1, 0x2000, 4096, 1000, 5, 8);
    tdm__rec_event(TDM__ACTION_FREE_FREE, 1, 0x2000, 1000, 1000, 5, 9);
    assert_int_equal(tdm_tag_pop(), TDM_OK);
    tdm_event *ev;
    size_t n;
    uint64_t dropped;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_int_equal(n, 8);
    assert_int_equal(dropped, 0);
    static const struct { uint8_t action; uint64_t size, requested; uint32_t stack; } want[] = {
        {TDM_ACTION_SEGMENT_ALLOC, 4096, 1000, 7}, {TDM_ACTION_ALLOC, 1000, 1000, 7},
        {TDM_ACTION_SNAPSHOT, 0, 0, 0},
        {TDM_ACTION_FREE_REQUESTED, 1000, 1000, 8}, {TDM_ACTION_FREE_COMPLETED, 1000, 1000, 8},
        {TDM_ACTION_SEGMENT_FREE, 4096, 1000, 8},
        {TDM_ACTION_FREE_REQUESTED, 1000, 1000, 9}, {TDM_ACTION_FREE_COMPLETED, 1000, 1000, 9},
    };
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev[i].action, want[i].action);
        assert_int_equal(ev[i].size, want[i].size);
        assert_int_equal(ev[i].requested, want[i].requested);
        assert_int_equal(ev[i].stack_id, want[i].stack);
        if (ev[i].action != TDM_ACTION_SNAPSHOT) {
            assert_int_equal(ev[i].addr, 0x2000);
            assert_int_equal(ev[i].device, 1);
            assert_int_equal(ev[i].stream, 5);
            assert_int_equal(ev[i].category, TDM_CATEGORY_INPUT);
        }
    }
    /* the pieces of one entry share its time stamp */
    assert_int_equal(ev[0].time_ns, ev[1].time_ns);
    assert_int_equal(ev[3].time_ns, ev[5].time_ns);
    assert_int_equal(ev[6].time_ns, ev[7].time_ns);
    free(ev);
    record_off();
}

static void status_and_category_names(void **state)
{
    (void)state;
    assert_string_equal(tdm_status_name(TDM_OK), "TDM_OK");
    assert_string_equal(tdm_status_name(TDM_OUT_OF_MEMORY), "TDM_OUT_OF_MEMORY");
    assert_string_equal(tdm_status_name((tdm_status)999), "TDM_UNKNOWN_STATUS");
    assert_string_equal(tdm_strerror(TDM_TRUNCATED), "snapshot file is truncated");
    assert_string_equal(tdm_category_name(TDM_CATEGORY_OPTIMIZER_STATE), "optimizer_state");
    assert_string_equal(tdm__action_name(TDM_ACTION_FREE_REQUESTED), "free_requested");
    assert_int_equal(tdm__action_from_name("segment_unmap"), TDM_ACTION_SEGMENT_UNMAP);
    assert_int_equal(tdm__action_from_name("nope"), -1);
    assert_null(tdm__action_name(TDM_ACTION_COUNT_));
    assert_int_equal(tdm_version(), TDM_VERSION_HEX);
    assert_string_equal(tdm_version_string(), TDM_VERSION_STRING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_keeps_newest_and_counts_drops),
        cmocka_unit_test(ring_partial_fill_has_no_drops),
        cmocka_unit_test(ring_rejects_zero_capacity),
        cmocka_unit_test(ring_retired_stays_writable),
        cmocka_unit_test(ring_pages_come_ahead_of_writers),
        cmocka_unit_test(four_threads_lose_nothing_and_keep_order),
        cmocka_unit_test(recorder_counts_drops_past_max_entries),
        cmocka_unit_test(a_copy_walks_only_what_was_written),
        cmocka_unit_test(recorder_stamps_phase_step_and_tag),
        cmocka_unit_test(recorder_off_records_nothing),
        cmocka_unit_test(options_are_validated),
        cmocka_unit_test(resizing_keeps_counting_drops),
        cmocka_unit_test(compound_entries_expand_in_copies),
        cmocka_unit_test(status_and_category_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
