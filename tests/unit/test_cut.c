/* tests/unit/test_cut.c: a snapshot taken while other threads allocate is
 * one cut: its events, its allocator state and its stats describe the
 * same instant.
 *
 * Four threads allocate and free (through the C API, or observe mode as
 * the hooks call it), each on its own stream, in rounds; a fifth builds
 * 100 snapshots (40 under ThreadSanitizer) in memory meanwhile (the
 * threads may run at most one round ahead of it, so every snapshot lands
 * among their calls).  The ring holds every event, so for each snapshot:
 *   - replaying its events gives the live allocations and requested bytes
 *     that its blocks and its stats show;
 *   - replaying its segment events (segment_alloc/free, segment_map/unmap)
 *     gives the reserved bytes its segments and its stats show;
 *   - the model the summary and the gate use finds no disagreement between
 *     history and state, and its peak is no higher than the snapshot's own
 *     stats peak, nor than the whole run's (the final snapshot's).
 * In cache and pass-through modes; in observe mode alone (the hooks'
 * calls: allocations on the device and the host, mappings unmapped whole
 * or in part, a stream-ordered pool's reserve); and in cache mode with
 * observe mode booking on the same device (one stats record, the sum).
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
#if defined(__SANITIZE_THREAD__)
#define DUMPS 40 /* five modes stay within a minute under ThreadSanitizer */
#else
#define DUMPS 100
#endif
#define OPS_PER_ROUND 100
#define LIVE_PER_THREAD 32

static _Atomic int dumps_done;
static _Atomic int stop;

typedef struct worker {
    int index;
    unsigned seed;
    int observe; /* books through observe mode rather than the C API */
    long failures;
} worker;

/* Observe mode, as the hooks call it: each thread's addresses apart. */
#define OBS_LIVE 32
#define OBS_MAPS 8
#define SLOT_SPAN ((uint64_t)8 << 20)

typedef struct obs_thread {
    uint64_t base;                      /* of this thread's addresses */
    int alloc_device[OBS_LIVE];         /* -2: slot free */
    uint64_t map_at[OBS_MAPS], map_size[OBS_MAPS]; /* size 0: none */
    uint64_t pool;                      /* its pool's handle */
} obs_thread;

static void obs_op(worker *w, obs_thread *o)
{
    unsigned r = rand_r(&w->seed) % 16;
    if (r < 11) { /* an allocation or its free, on the device or the host */
        int k = (int)(rand_r(&w->seed) % OBS_LIVE);
        const void *p = (const void *)(uintptr_t)(o->base + (uint64_t)k * SLOT_SPAN);
        if (o->alloc_device[k] != -2) {
            w->failures += tdm__alloc_observe_free(p, 0, 0) != TDM_OK;
            o->alloc_device[k] = -2;
        } else {
            int device = rand_r(&w->seed) % 4 == 0 ? -1 : 0;
            size_t size = 1 + (size_t)(rand_r(&w->seed) % (4u << 20));
            tdm__alloc_observe_alloc(device, p, size, (tdm_stream)(w->index + 1), 0);
            o->alloc_device[k] = device;
        }
    } else if (r < 15) { /* a mapping, unmapped whole or its first half */
        int k = (int)(rand_r(&w->seed) % OBS_MAPS);
        uint64_t slot = o->base + ((uint64_t)1 << 34) + (uint64_t)k * SLOT_SPAN;
        if (o->map_size[k] == 0) {
            o->map_at[k] = slot;
            o->map_size[k] = (1 + rand_r(&w->seed) % 32) * ((uint64_t)64 << 10);
            tdm__alloc_observe_map(0, (const void *)(uintptr_t)slot, o->map_size[k], 0);
        } else if (o->map_size[k] >= ((uint64_t)128 << 10) && rand_r(&w->seed) % 2) {
            uint64_t half = o->map_size[k] / 2;
            w->failures += tdm__alloc_observe_unmap((const void *)(uintptr_t)o->map_at[k],
                                                    half, 0) != TDM_OK;
            o->map_at[k] += half;
            o->map_size[k] -= half;
        } else {
            w->failures += tdm__alloc_observe_unmap((const void *)(uintptr_t)o->map_at[k],
                                                    o->map_size[k], 0) != TDM_OK;
            o->map_size[k] = 0;
        }
    } else { /* the pool's counters, as a hook reads them */
        uint64_t reserved = (uint64_t)(rand_r(&w->seed) % 64) << 20;
        uint64_t used = reserved ? (uint64_t)(rand_r(&w->seed) % reserved) : 0;
        tdm__alloc_observe_pool(0, o->pool, reserved, used, 0);
    }
}

static void obs_finish(worker *w, obs_thread *o)
{
    for (int k = 0; k < OBS_LIVE; k++)
        if (o->alloc_device[k] != -2)
            w->failures += tdm__alloc_observe_free(
                (const void *)(uintptr_t)(o->base + (uint64_t)k * SLOT_SPAN), 0, 0) != TDM_OK;
    for (int k = 0; k < OBS_MAPS; k++)
        if (o->map_size[k])
            w->failures += tdm__alloc_observe_unmap(
                (const void *)(uintptr_t)o->map_at[k], o->map_size[k], 0) != TDM_OK;
    tdm__alloc_observe_pool(0, o->pool, 0, 0, 0);
}

static void *work(void *arg)
{
    worker *w = arg;
    obs_thread o = {.base = (uint64_t)0x100000000000 + ((uint64_t)w->index << 36),
                    .pool = (uint64_t)0x7f0000000000 + ((uint64_t)w->index << 20)};
    for (int k = 0; k < OBS_LIVE; k++)
        o.alloc_device[k] = -2;
    void *live[LIVE_PER_THREAD] = {0};
    tdm_stream stream = (tdm_stream)(w->index + 1);
    for (int round = 0; !atomic_load(&stop); round++) {
        /* At most one round ahead of the snapshots. */
        while (atomic_load(&dumps_done) < round - 1 && !atomic_load(&stop))
            sched_yield();
        for (int op = 0; op < OPS_PER_ROUND; op++) {
            if (w->observe) {
                obs_op(w, &o);
                continue;
            }
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
    if (w->observe)
        obs_finish(w, &o);
    return NULL;
}

/* What one snapshot says of `device`, checked against itself; returns its
 * model's peak (0 for a device the snapshot does not know). */
static int64_t check_device(const tdm_snap *s, int n, int device)
{
    int64_t replay_count = 0, replay_bytes = 0, replay_reserved = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (e->device != device)
            continue;
        int64_t size = (int64_t)e->size;
        switch (e->action) {
        case TDM_ACTION_ALLOC:
            replay_count++;
            replay_bytes += size;
            break;
        case TDM_ACTION_FREE_REQUESTED:
            replay_count--;
            replay_bytes -= size;
            break;
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_MAP:
            replay_reserved += size;
            break;
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_UNMAP:
            replay_reserved -= size;
            break;
        default:
            break;
        }
    }
    int64_t block_count = 0, block_requested = 0, block_bytes = 0, reserved = 0;
    for (size_t k = 0; k < s->segment_count; k++) {
        const tdm_snap_segment *seg = &s->segments[k];
        if (seg->device != device)
            continue;
        reserved += (int64_t)seg->total_size;
        for (uint32_t j = 0; j < seg->block_count; j++) {
            const tdm_snap_block *b = &s->blocks[seg->first_block + j];
            if (b->state == TDM_BLOCK_ACTIVE_ALLOCATED) {
                block_count++;
                block_requested += (int64_t)b->requested_size;
                block_bytes += (int64_t)b->size;
            }
        }
    }
    size_t si = tdm__snap_stats_index(s, device, TDM_STAT_POOL_ALL);
    if (si == s->stats_count) {
        if (replay_count || replay_reserved || reserved)
            fail_msg("snapshot %d: device %d has events or segments, no stats", n,
                     device);
        return 0;
    }
    const tdm_stats *st = &s->stats[si].stats;
    assert_int_equal(s->dropped_events, 0);
    if (replay_count != block_count || replay_bytes != block_requested)
        fail_msg("snapshot %d, device %d: events replay to %lld allocations of "
                 "%lld B, its blocks hold %lld of %lld B",
                 n, device, (long long)replay_count, (long long)replay_bytes,
                 (long long)block_count, (long long)block_requested);
    if (replay_reserved != reserved)
        fail_msg("snapshot %d, device %d: segment events replay to %lld B "
                 "reserved, its segments hold %lld B",
                 n, device, (long long)replay_reserved, (long long)reserved);
    if (st->allocation.current != block_count ||
        st->requested_bytes.current != block_requested ||
        st->allocated_bytes.current != block_bytes ||
        st->reserved_bytes.current != reserved)
        fail_msg("snapshot %d, device %d: stats say %lld allocations, %lld B "
                 "requested, %lld B allocated, %lld B reserved; blocks %lld, "
                 "%lld B, %lld B, segments %lld B",
                 n, device, (long long)st->allocation.current,
                 (long long)st->requested_bytes.current,
                 (long long)st->allocated_bytes.current,
                 (long long)st->reserved_bytes.current, (long long)block_count,
                 (long long)block_requested, (long long)block_bytes,
                 (long long)reserved);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    int d = tdm__model_device_index(m, device);
    assert_true(d >= 0);
    const tdm_model_device *dev = &m->devices[d];
    if (dev->anomalies != 0)
        fail_msg("snapshot %d, device %d: %llu disagreements between events and "
                 "state", n, device, (unsigned long long)dev->anomalies);
    int64_t peak = dev->peak_allocated;
    if (peak > st->requested_bytes.peak)
        fail_msg("snapshot %d, device %d: replayed peak %lld B above its stats' "
                 "peak %lld B",
                 n, device, (long long)peak, (long long)st->requested_bytes.peak);
    tdm__model_free(m);
    return peak;
}

/* Device 0's peak; the host (-1, observe mode's pinned memory) is
 * checked too. */
static int64_t check_snapshot(const tdm_snap *s, int n)
{
    assert_true(tdm__snap_stats_index(s, 0, TDM_STAT_POOL_ALL) < s->stats_count);
    check_device(s, n, -1);
    return check_device(s, n, 0);
}

/* Who books: the C API's allocator in `mode` (cache, passthrough) on
 * `api_threads` threads, observe mode on the rest. */
static void run_cut(const char *mode, int api_threads)
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
    o.max_entries = 1u << 18; /* every event of the run fits (about 45k) */
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);

    /* The allocator (and observe mode) start at their first call: before
     * it, a snapshot has no state to compare. */
    if (api_threads > 0) {
        void *first = NULL;
        assert_int_equal(tdm_malloc(&first, 1, 0, 0), TDM_OK);
        assert_int_equal(tdm_free(first), TDM_OK);
    }
    if (api_threads < THREADS) {
        const void *first = (const void *)(uintptr_t)0x7e0000000000;
        tdm__alloc_observe_alloc(0, first, 1, 0, 0);
        assert_int_equal(tdm__alloc_observe_free(first, 0, 0), TDM_OK);
    }
    atomic_store(&dumps_done, 0);
    atomic_store(&stop, 0);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.index = i, .seed = 1234u + (unsigned)i,
                        .observe = i >= api_threads};
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
    int64_t true_peak =
        final->stats[tdm__snap_stats_index(final, 0, TDM_STAT_POOL_ALL)]
            .stats.requested_bytes.peak;
    tdm__rec_snapshot_free(final);
    for (int n = 0; n < DUMPS; n++)
        if (peaks[n] > true_peak)
            fail_msg("snapshot %d: peak %lld B above the run's peak %lld B", n,
                     (long long)peaks[n], (long long)true_peak);

    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__alloc_reset_for_tests();
}

static void test_cut_cache(void **state)
{
    (void)state;
    run_cut("cache", THREADS);
}

static void test_cut_passthrough(void **state)
{
    (void)state;
    run_cut("passthrough", THREADS);
}

static void test_cut_observe(void **state)
{
    (void)state;
    run_cut("cache", 0); /* the allocator is never started */
}

static void test_cut_cache_and_observe(void **state)
{
    (void)state;
    run_cut("cache", THREADS / 2);
}

static void test_cut_passthrough_and_observe(void **state)
{
    (void)state;
    run_cut("passthrough", THREADS / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_cache),
        cmocka_unit_test(test_cut_passthrough),
        cmocka_unit_test(test_cut_observe),
        cmocka_unit_test(test_cut_cache_and_observe),
        cmocka_unit_test(test_cut_passthrough_and_observe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
