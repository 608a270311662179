/* tests/unit/test_stress_ring.c: 8 threads record 1M events each while
 * another thread writes a snapshot file every few milliseconds and reads
 * it back; in cache, pass-through and observe modes.
 *
 * Each thread allocates and frees on its own stream (stream = thread + 1)
 * with a request of `seq + 1` bytes, seq counting its allocations, so
 * every alloc/free event names its thread and its place in that thread's
 * order.  For every file written:
 *   - the snapshot reader reads it;
 *   - every event is well formed (a known action on device 0, on a
 *     stream of one of the threads, size == requested for allocations and
 *     frees: a torn slot would mix two events' words), and each thread's
 *     events come in its own order (seq never goes back, and the events of
 *     one seq in the order the allocator records them);
 *   - in cache and pass-through modes, the events kept plus those counted
 *     dropped are exactly the events recorded up to the dump's cut, as the
 *     snapshot's own stats count them (allocations, frees and segments
 *     made so far, plus the snapshot marks);
 * and the last file, written once the threads are done, holds or counts
 * every event of the run in all three modes.
 *
 * Size: 8 x 1M events per mode in every build: a few seconds in all on
 * two cores in the normal and ASan builds, about 50 s under TSan.
 * TDM_STRESS_EVENTS (events per thread) overrides it.
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
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "alloc_internal.h"
#include "recorder.h"

#define THREADS 8
#define WARM_UP_STREAM (THREADS + 1) /* the main thread's first call */
#define DEFAULT_EVENTS 1000000L

enum { MODE_CACHE, MODE_PASSTHROUGH, MODE_OBSERVE };

static long events_per_thread(void)
{
    const char *e = getenv("TDM_STRESS_EVENTS");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : DEFAULT_EVENTS;
}

typedef struct worker {
    int index;
    int mode;
    long pairs; /* allocations (each freed at once) */
    long failures;
} worker;

static _Atomic int workers_left;

static void *work(void *arg)
{
    worker *w = arg;
    tdm_stream stream = (tdm_stream)(w->index + 1);
    for (long seq = 0; seq < w->pairs; seq++) {
        size_t size = (size_t)seq + 1;
        if (w->mode == MODE_OBSERVE) {
            /* Addresses the vendor would have handed out: one per thread. */
            const void *p = (const void *)(uintptr_t)((uint64_t)(w->index + 1) << 40);
            tdm__alloc_observe_alloc(0, p, size, stream, 0);
            w->failures += tdm__alloc_observe_free(p, stream, 0) != TDM_OK;
        } else {
            void *p = NULL;
            w->failures += tdm_malloc(&p, size, 0, stream) != TDM_OK;
            w->failures += tdm_free(p) != TDM_OK;
        }
    }
    atomic_fetch_sub(&workers_left, 1);
    return NULL;
}

/* Where an action stands among the events of one allocation, in the
 * order the allocator records them; -1 for events that carry no seq. */
static int order_of(int mode, unsigned action)
{
    switch (action) {
    case TDM_ACTION_SEGMENT_ALLOC: return mode == MODE_CACHE ? -1 : 0;
    case TDM_ACTION_ALLOC: return 1;
    case TDM_ACTION_FREE_REQUESTED: return 2;
    case TDM_ACTION_FREE_COMPLETED: return 3;
    case TDM_ACTION_SEGMENT_FREE: return mode == MODE_CACHE ? -1 : 4;
    default: return -1;
    }
}

/* Events recorded up to the cut, from the snapshot's stats: cache mode
 * records alloc, free_requested + free_completed, and each segment made
 * or released; pass-through mode a segment with each allocation. */
static uint64_t recorded_at_cut(const tdm_snap *s, int mode, uint64_t snapshots)
{
    for (size_t i = 0; i < s->stats_count; i++) {
        if (s->stats[i].device != 0 || s->stats[i].pool != TDM_STAT_POOL_ALL)
            continue;
        const tdm_stats *st = &s->stats[i].stats;
        uint64_t allocs = (uint64_t)st->allocation.allocated;
        uint64_t frees = (uint64_t)st->allocation.freed;
        uint64_t segs = (uint64_t)(st->segment.allocated + st->segment.freed);
        return snapshots + (mode == MODE_CACHE ? allocs + 2 * frees + segs
                                               : 2 * allocs + 3 * frees);
    }
    fail_msg("no stats for device 0");
    return 0;
}

typedef struct checked {
    uint64_t kept, dropped, recorded;
} checked;

static checked check_file(const char *path, int mode, uint64_t snapshots,
                          int exact)
{
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = tdm__snap_read_file(path, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("reading snapshot %llu: %s at byte %llu",
                 (unsigned long long)snapshots, err.message,
                 (unsigned long long)err.offset);
    int64_t last_seq[THREADS];
    int last_order[THREADS];
    for (int t = 0; t < THREADS; t++) {
        last_seq[t] = -1;
        last_order[t] = 99;
    }
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (e->action == TDM_ACTION_SNAPSHOT || e->stream == WARM_UP_STREAM)
            continue;
        int order = order_of(mode, e->action);
        if (e->device != 0 || e->stream < 1 || e->stream > THREADS ||
            (order < 0 && e->action != TDM_ACTION_SEGMENT_ALLOC &&
             e->action != TDM_ACTION_SEGMENT_FREE))
            fail_msg("snapshot %llu, event %zu: malformed (action %u, device "
                     "%d, stream %llu)", (unsigned long long)snapshots, i,
                     e->action, e->device, (unsigned long long)e->stream);
        if (order < 0)
            continue; /* a cache segment: its size is the segment's */
        int t = (int)e->stream - 1;
        int64_t seq = (int64_t)e->requested - 1;
        if ((order >= 1 && order <= 3 && e->size != e->requested) ||
            (mode == MODE_OBSERVE && e->addr != (uint64_t)(t + 1) << 40))
            fail_msg("snapshot %llu, event %zu: torn (size %llu, requested "
                     "%llu, addr %#llx)", (unsigned long long)snapshots, i,
                     (unsigned long long)e->size, (unsigned long long)e->requested,
                     (unsigned long long)e->addr);
        if (seq < last_seq[t] || (seq == last_seq[t] && order <= last_order[t]))
            fail_msg("snapshot %llu, event %zu: thread %d's seq %lld (step %d) "
                     "after seq %lld (step %d)", (unsigned long long)snapshots,
                     i, t, (long long)seq, order, (long long)last_seq[t],
                     last_order[t]);
        last_seq[t] = seq;
        last_order[t] = order;
    }
    checked c = {s->event_count, s->dropped_events, 0};
    if (exact) {
        c.recorded = recorded_at_cut(s, mode, snapshots);
        if (c.kept + c.dropped != c.recorded)
            fail_msg("snapshot %llu: %llu kept + %llu dropped, %llu recorded",
                     (unsigned long long)snapshots, (unsigned long long)c.kept,
                     (unsigned long long)c.dropped, (unsigned long long)c.recorded);
    }
    tdm__snap_free(s);
    return c;
}

static void run_stress(int mode)
{
    tdm__alloc_reset_for_tests();
    tdm__obs_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, mode == MODE_CACHE ? "cache" : "passthrough");
    cfg.device_count = 1;
    cfg.device_capacity = (size_t)64 << 30;
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.context = TDM_CONTEXT_NONE;
    o.stacks = TDM_STACKS_NONE;
    o.max_entries = 1u << 16; /* far fewer than recorded: most are dropped */
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    if (mode != MODE_OBSERVE) {
        /* The allocator starts at its first call: from then on a dump has
         * its stats to count with. */
        void *p = NULL;
        assert_int_equal(tdm_malloc(&p, 1, 0, WARM_UP_STREAM), TDM_OK);
        assert_int_equal(tdm_free(p), TDM_OK);
    }

    char dir[] = "/tmp/tdm_stress_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/s.tdm", dir);

    /* Plain events per allocation and free: cache mode 3, pass-through and
     * observe modes 5 (segment with each). */
    long pairs = events_per_thread() / (mode == MODE_CACHE ? 3 : 5);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&workers_left, THREADS);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.index = i, .mode = mode, .pairs = pairs};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    uint64_t dumps = 0, dropped_seen = 0;
    while (atomic_load(&workers_left) > 0) {
        assert_int_equal(tdm_dump_snapshot(path), TDM_OK);
        dumps++;
        checked c = check_file(path, mode, dumps, mode != MODE_OBSERVE);
        dropped_seen += c.dropped;
        usleep(2000);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(tdm_dump_snapshot(path), TDM_OK);
    dumps++;
    checked c = check_file(path, mode, dumps, mode != MODE_OBSERVE);
    dropped_seen += c.dropped;
    /* Pass-through and observe modes: every event of the run is counted
     * without the stats' help (cache mode's segments are the allocator's
     * choice: its count came from the stats above). */
    if (mode != MODE_CACHE) {
        uint64_t everything = (uint64_t)THREADS * (uint64_t)pairs * 5 + dumps;
        if (mode == MODE_PASSTHROUGH)
            everything += 5; /* the first call's */
        if (c.kept + c.dropped != everything)
            fail_msg("final snapshot: %llu kept + %llu dropped, %llu recorded",
                     (unsigned long long)c.kept, (unsigned long long)c.dropped,
                     (unsigned long long)everything);
    }
    assert_true(dropped_seen > 0); /* the ring overflowed: drops were counted */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "%s: %d threads x %ld events, %llu dumps, %.2f s\n",
            mode == MODE_CACHE ? "cache" : mode == MODE_PASSTHROUGH ? "passthrough"
                                                                      : "observe",
            THREADS, events_per_thread(), (unsigned long long)dumps,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    unlink(path);
    rmdir(dir);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__obs_reset_for_tests();
    tdm__alloc_reset_for_tests();
}

static void test_stress_cache(void **state)
{
    (void)state;
    run_stress(MODE_CACHE);
}

static void test_stress_passthrough(void **state)
{
    (void)state;
    run_stress(MODE_PASSTHROUGH);
}

static void test_stress_observe(void **state)
{
    (void)state;
    run_stress(MODE_OBSERVE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_cache),
        cmocka_unit_test(test_stress_passthrough),
        cmocka_unit_test(test_stress_observe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
