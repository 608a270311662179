/* tests/unit/test_cut_wrap.c: a snapshot taken while eight threads
 * allocate, with a ring far smaller than the run, is still one consistent
 * cut (issue 39, point 5: with 8 recording threads and a dump every 3 ms,
 * replayed peaks rose above the dump's own stats peak, the model found
 * "inconsistencies", and with the default ring a dump kept 100 of 5.9M
 * events).
 *
 * Eight threads allocate and free through the C API on their own streams,
 * free-running (the ring laps many times between two dumps); a ninth
 * records a burst now and then and idles between (it holds a part-used
 * chunk of old events, which the ring skips while the others lap it).
 * The main thread builds a snapshot every 3 ms meanwhile.  For each:
 *   - the model the summary and the gate use finds no disagreement
 *     between history and final state, and its replayed peak is no higher
 *     than the snapshot's own stats peak (requested bytes);
 *   - what it kept is the newest stretch of the history, not a handful:
 *     at least half of the ring once it is full, in 9 dumps of 10 or more
 *     (see run_wrap).
 * With a ring of 4096 events and with the default ring of 1M.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <time.h>

#include "alloc.h"
#include "model.h"
#include "recorder.h"

#define THREADS 8
#define LIVE_PER_THREAD 32
#define RUN_MS 1000
#define MAX_RUN_MS 20000 /* a slow build on a busy machine */
#define FULL_DUMPS 3     /* dumps of a full ring wanted, at least, */
#define LAPS 4           /* the last after the ring was filled this often */

static _Atomic int stop;

typedef struct worker {
    int index;
    unsigned seed;
    int sleepy; /* a burst of 20 calls, then 20 ms idle */
    long failures;
} worker;

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *work(void *arg)
{
    worker *w = arg;
    void *live[LIVE_PER_THREAD] = {0};
    tdm_stream stream = (tdm_stream)(w->index + 1);
    for (long op = 0; !atomic_load_explicit(&stop, memory_order_relaxed); op++) {
        if (w->sleepy && op % 20 == 0)
            nap_ms(20);
        else if (op % 64 == 0)
            sched_yield(); /* the dumping thread gets its turn on few cores */
        int k = (int)(rand_r(&w->seed) % LIVE_PER_THREAD);
        if (live[k]) {
            w->failures += tdm_free(live[k]) != TDM_OK;
            live[k] = NULL;
        } else {
            size_t size = 1 + (size_t)(rand_r(&w->seed) % (1u << 20));
            w->failures += tdm_malloc(&live[k], size, 0, stream) != TDM_OK;
        }
    }
    for (int k = 0; k < LIVE_PER_THREAD; k++)
        if (live[k])
            w->failures += tdm_free(live[k]) != TDM_OK;
    return NULL;
}

typedef struct verdict {
    int dumps, inconsistent, too_high, too_few, full;
    uint64_t fewest_kept, its_recorded; /* the dump that kept least, full ring */
    uint64_t most_recorded;
    long long worst_peak, its_stats_peak;
} verdict;

static void check_snapshot(const tdm_snap *s, uint64_t capacity, verdict *v)
{
    size_t si = tdm__snap_stats_index(s, 0, TDM_STAT_POOL_ALL);
    assert_true(si < s->stats_count);
    const tdm_stats *st = &s->stats[si].stats;
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    int d = tdm__model_device_index(m, 0);
    assert_true(d >= 0);
    const tdm_model_device *dev = &m->devices[d];
    v->dumps++;
    v->inconsistent += dev->anomalies != 0;
    if (dev->peak_allocated > st->requested_bytes.peak) {
        v->too_high++;
        if (dev->peak_allocated - st->requested_bytes.peak >
            v->worst_peak - v->its_stats_peak) {
            v->worst_peak = dev->peak_allocated;
            v->its_stats_peak = st->requested_bytes.peak;
        }
    }
    uint64_t recorded = s->event_count + s->dropped_events;
    if (recorded > v->most_recorded)
        v->most_recorded = recorded;
    if (recorded >= capacity) {
        v->full++;
        if (s->event_count < capacity / 2)
            v->too_few++;
        if (v->fewest_kept == 0 || s->event_count < v->fewest_kept) {
            v->fewest_kept = s->event_count;
            v->its_recorded = recorded;
        }
    }
    tdm__model_free(m);
}

static void run_wrap(uint64_t capacity)
{
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_count = 1;
    cfg.device_capacity = (size_t)64 << 30;
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.context = TDM_CONTEXT_NONE;
    o.stacks = TDM_STACKS_NONE;
    o.max_entries = (size_t)capacity;
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    void *first = NULL;
    assert_int_equal(tdm_malloc(&first, 1, 0, 0), TDM_OK);
    assert_int_equal(tdm_free(first), TDM_OK);

    atomic_store(&stop, 0);
    pthread_t t[THREADS + 1];
    worker w[THREADS + 1];
    for (int i = 0; i <= THREADS; i++) {
        w[i] = (worker){.index = i, .seed = 4321u + (unsigned)i, .sleepy = i == THREADS};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    verdict v = {0};
    struct timespec t0, now;
    long ms;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        tdm_snap *s = NULL;
        assert_int_equal(tdm__rec_build_snapshot(&s), TDM_OK);
        check_snapshot(s, capacity, &v);
        tdm__rec_snapshot_free(s);
        nap_ms(3);
        clock_gettime(CLOCK_MONOTONIC, &now);
        ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    } while ((ms < RUN_MS || v.full < FULL_DUMPS || v.most_recorded < LAPS * capacity) &&
             ms < MAX_RUN_MS);
    atomic_store(&stop, 1);
    for (int i = 0; i <= THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    print_message("ring %llu: %d dumps (%d with a full ring): %d inconsistent, "
                  "%d with a peak above their stats', %d kept under half the ring; "
                  "fewest kept %llu of %llu recorded\n",
                  (unsigned long long)capacity, v.dumps, v.full, v.inconsistent,
                  v.too_high, v.too_few, (unsigned long long)v.fewest_kept,
                  (unsigned long long)v.its_recorded);
    if (v.too_high)
        print_message("  worst: replayed peak %lld B, stats peak %lld B\n",
                      v.worst_peak, v.its_stats_peak);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__alloc_reset_for_tests();
    assert_true(v.most_recorded >= LAPS * capacity); /* the run did lap the ring */
    assert_int_equal(v.inconsistent, 0);
    assert_int_equal(v.too_high, 0);
    /* A chunk held over laps (the idle thread's, or a busy one's whose
     * thread the scheduler set aside) holds events as new as its
     * give-back; the ring overwrites it a lap later than its turn (ring.h),
     * so a dump still keeps half the ring or more.  CI under ASan on two
     * busy cores saw 22 dumps of 194 keep less before that rule.  Allowed:
     * 1 in 10, for a claim that passed over IDLE_CHUNKS such chunks. */
    assert_true(v.too_few * 10 <= v.full);
}

static void test_cut_wrap_small_ring(void **state)
{
    (void)state;
    run_wrap(4096);
}

static void test_cut_wrap_default_ring(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    /* Under ThreadSanitizer nine threads record too slowly to lap a
     * million-entry ring four times in the 20 s the test allows (each
     * dump of it takes over a second); the small ring's case has the same
     * threads and cuts, and laps. */
    skip();
#endif
    run_wrap(1000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_wrap_small_ring),
        cmocka_unit_test(test_cut_wrap_default_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
