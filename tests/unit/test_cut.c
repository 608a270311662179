/* tests/unit/test_cut.c: a snapshot taken while other threads allocate is
 * one cut: its events, its allocator state and its stats describe the
 * same instant.
 *
 * Four threads allocate and free through the C API, each on its own
 * stream, in rounds; a fifth builds 100 snapshots in memory meanwhile (the
 * threads may run at most one round ahead of it, so every snapshot lands
 * among their calls).  The ring holds every event, so for each snapshot:
 *   - replaying its events gives the live allocations and requested bytes
 *     that its blocks and its stats show;
 *   - the model the summary and the gate use finds no disagreement between
 *     history and state, and its peak is no higher than the snapshot's own
 *     stats peak, nor than the whole run's (the final snapshot's).
 * In cache and pass-through modes.
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

#include "alloc.h"
#include "model.h"
#include "recorder.h"

#define THREADS 4
#define DUMPS 100
#define OPS_PER_ROUND 100
#define LIVE_PER_THREAD 32

static _Atomic int dumps_done;
static _Atomic int stop;

typedef struct worker {
    int index;
    unsigned seed;
    long failures;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    void *live[LIVE_PER_THREAD] = {0};
    tdm_stream stream = (tdm_stream)(w->index + 1);
    for (int round = 0; !atomic_load(&stop); round++) {
        /* At most one round ahead of the snapshots. */
        while (atomic_load(&dumps_done) < round - 1 && !atomic_load(&stop))
            sched_yield();
        for (int op = 0; op < OPS_PER_ROUND; op++) {
            int k = (int)(rand_r(&w->seed) % LIVE_PER_THREAD);
            if (live[k]) {
                w->failures += tdm_free(live[k]) != TDM_OK;
                live[k] = NULL;
            } else {
                /* 512 B to 4 MiB, not all multiples of 512. */
                size_t size = 1 + (size_t)(rand_r(&w->seed) % (4u << 20));
                w->failures += tdm_malloc(&live[k], size, 0, stream) != TDM_OK;
            }
        }
    }
    for (int k = 0; k < LIVE_PER_THREAD; k++)
        if (live[k])
            w->failures += tdm_free(live[k]) != TDM_OK;
    return NULL;
}

/* What one snapshot says, checked against itself; returns its model's
 * peak. */
static int64_t check_snapshot(const tdm_snap *s, int n)
{
    int64_t replay_count = 0, replay_bytes = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (e->action == TDM_ACTION_ALLOC) {
            replay_count++;
            replay_bytes += (int64_t)e->size;
        } else if (e->action == TDM_ACTION_FREE_REQUESTED) {
            replay_count--;
            replay_bytes -= (int64_t)e->size;
        }
    }
    int64_t block_count = 0, block_requested = 0, block_bytes = 0;
    for (size_t i = 0; i < s->block_count; i++) {
        if (s->blocks[i].state == TDM_BLOCK_ACTIVE_ALLOCATED) {
            block_count++;
            block_requested += (int64_t)s->blocks[i].requested_size;
            block_bytes += (int64_t)s->blocks[i].size;
        }
    }
    const tdm_stats *st = NULL;
    for (size_t i = 0; i < s->stats_count; i++)
        if (s->stats[i].device == 0 && s->stats[i].pool == TDM_STAT_POOL_ALL)
            st = &s->stats[i].stats;
    assert_non_null(st);
    assert_int_equal(s->dropped_events, 0);
    if (replay_count != block_count || replay_bytes != block_requested)
        fail_msg("snapshot %d: events replay to %lld allocations of %lld B, "
                 "its blocks hold %lld of %lld B",
                 n, (long long)replay_count, (long long)replay_bytes,
                 (long long)block_count, (long long)block_requested);
    if (st->allocation.current != block_count ||
        st->requested_bytes.current != block_requested ||
        st->allocated_bytes.current != block_bytes)
        fail_msg("snapshot %d: stats say %lld allocations, %lld B requested, "
                 "%lld B allocated; blocks %lld, %lld B, %lld B",
                 n, (long long)st->allocation.current,
                 (long long)st->requested_bytes.current,
                 (long long)st->allocated_bytes.current, (long long)block_count,
                 (long long)block_requested, (long long)block_bytes);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    int d = tdm__model_device_index(m, 0);
    assert_true(d >= 0);
    const tdm_model_device *dev = &m->devices[d];
    if (dev->anomalies != 0)
        fail_msg("snapshot %d: %llu disagreements between events and state", n,
                 (unsigned long long)dev->anomalies);
    int64_t peak = dev->peak_allocated;
    if (peak > st->requested_bytes.peak)
        fail_msg("snapshot %d: replayed peak %lld B above its stats' peak %lld B",
                 n, (long long)peak, (long long)st->requested_bytes.peak);
    tdm__model_free(m);
    return peak;
}

static void run_cut(const char *mode)
{
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, mode);
    cfg.device_count = 1;
    cfg.device_capacity = (size_t)64 << 30;
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.context = TDM_CONTEXT_NONE;
    o.stacks = TDM_STACKS_NONE;
    o.max_entries = 1u << 20; /* every event of the run fits */
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);

    /* The allocator starts at its first call: before it, a snapshot has no
     * state to compare. */
    void *first = NULL;
    assert_int_equal(tdm_malloc(&first, 1, 0, 0), TDM_OK);
    assert_int_equal(tdm_free(first), TDM_OK);
    atomic_store(&dumps_done, 0);
    atomic_store(&stop, 0);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.index = i, .seed = 1234u + (unsigned)i};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    int64_t peaks[DUMPS];
    for (int n = 0; n < DUMPS; n++) {
        tdm_snap *s = NULL;
        assert_int_equal(tdm__rec_build_snapshot(&s), TDM_OK);
        peaks[n] = check_snapshot(s, n);
        tdm__rec_snapshot_free(s);
        atomic_store(&dumps_done, n + 1);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    tdm_snap *final = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&final), TDM_OK);
    check_snapshot(final, DUMPS);
    int64_t true_peak = -1;
    for (size_t i = 0; i < final->stats_count; i++)
        if (final->stats[i].device == 0 && final->stats[i].pool == TDM_STAT_POOL_ALL)
            true_peak = final->stats[i].stats.requested_bytes.peak;
    tdm__rec_snapshot_free(final);
    for (int n = 0; n < DUMPS; n++)
        if (peaks[n] > true_peak)
            fail_msg("snapshot %d: peak %lld B above the run's peak %lld B", n,
                     (long long)peaks[n], (long long)true_peak);

    o.enabled = TDM_RECORD_OFF;
    tdm_record_memory_history(&o);
    tdm__alloc_reset_for_tests();
}

static void test_cut_cache(void **state)
{
    (void)state;
    run_cut("cache");
}

static void test_cut_passthrough(void **state)
{
    (void)state;
    run_cut("passthrough");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_cache),
        cmocka_unit_test(test_cut_passthrough),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
