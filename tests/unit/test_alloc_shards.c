/* tests/unit/test_alloc_shards.c: a device's caching allocator as shards
 * by stream (alloc/cache_shard.c).
 *
 * Streams get shards of their own up to the most, then share them; a
 * pointer is freed from whichever shard holds it, by any thread; the
 * device's stats are the shards' summed, and its peaks stay exact:
 * single-threaded, each equals the highest value seen after any call;
 * with threads on streams of their own, the allocated peak lies between
 * the highest any one thread held and the sum of those.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"
#include "cache_internal.h"
#include "alloc_fixtures.h"

#define MiB ((size_t)1 << 20)

static void use(size_t capacity, double gc_threshold)
{
    tdm__alloc_config cfg = tdm_test_cache_config(capacity);
    cfg.garbage_collection_threshold = gc_threshold;
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_init(), TDM_OK);
}

static int teardown(void **state)
{
    (void)state;
    tdm__alloc_reset_for_tests();
    return 0;
}

static tdm__cache_group *group0(void)
{
    return tdm__alloc_g.cache[0]->group;
}

static int64_t allocated_now(void)
{
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    return s.allocated_bytes.current;
}

/* One stream keeps the device on its one shard; the second gets a shard,
 * and so on up to the most; then streams share.  Each stream's blocks
 * stay in its shard, whichever order they are freed in. */
static void test_streams_get_shards(void **state)
{
    (void)state;
    use(64 * MiB * 1024, 0.0);
    enum { STREAMS = 80, PER = 3 };
    void *p[STREAMS][PER];
    assert_int_equal(tdm_malloc(&p[0][0], 4096, 0, (tdm_stream)1000), TDM_OK);
    assert_int_equal(tdm__cache_nshards(group0()), 1);
    assert_int_equal(tdm__alloc_g.cache[0]->solo, TDM__SOLO_STREAM);
    for (int s = 0; s < STREAMS; s++)
        for (int k = s == 0; k < PER; k++)
            assert_int_equal(tdm_malloc(&p[s][k], 512 * (size_t)(1 + s + k), 0,
                                        (tdm_stream)(1000 + s)),
                             TDM_OK);
    tdm_test_check_devices();
    assert_int_equal(tdm__cache_nshards(group0()), TDM__SHARDS_MAX);
    assert_int_equal(tdm__alloc_g.cache[0]->solo, TDM__SOLO_SHARDS);
    /* Every block sits in the shard that serves its stream. */
    for (int s = 0; s < STREAMS; s++) {
        tdm__cache_device *d = tdm__cache_shard_for(group0(), (uint64_t)(1000 + s));
        assert_non_null(d);
        for (int k = 0; k < PER; k++) {
            cblock *b = tdm__cmap_get(&d->map, (uint64_t)(uintptr_t)p[s][k]);
            assert_non_null(b);
            assert_int_equal(tdm__cblock_stream(b), 1000 + s);
        }
    }
    /* Freed in an order that crosses shards at every call. */
    for (int k = PER - 1; k >= 0; k--)
        for (int s = STREAMS - 1; s >= 0; s--)
            assert_int_equal(tdm_free(p[s][k]), TDM_OK);
    assert_int_equal(allocated_now(), 0);
    int x = 0;
    assert_int_equal(tdm_free(&x), TDM_UNKNOWN_POINTER);
    tdm_test_check_devices();
    assert_int_equal(tdm_empty_cache(0), TDM_OK);
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.reserved_bytes.current, 0);
    tdm_test_check_devices();
}

/* Garbage collection ages blocks by the device's calls: with it on, every
 * stream stays in the one shard. */
static void test_gc_keeps_one_shard(void **state)
{
    (void)state;
    use(1024 * MiB, 0.5);
    void *p[6];
    for (int s = 0; s < 6; s++)
        assert_int_equal(tdm_malloc(&p[s], 3 * MiB, 0, (tdm_stream)s), TDM_OK);
    assert_int_equal(tdm__cache_nshards(group0()), 1);
    tdm_test_check_devices();
    for (int s = 0; s < 6; s++)
        assert_int_equal(tdm_free(p[s]), TDM_OK);
    tdm_test_check_devices();
}

/* Peaks with shards, single-threaded: the highest sum reached, not the
 * sum of each shard's highest; and a reset starts from the values. */
static void test_peak_is_the_sums(void **state)
{
    (void)state;
    use(1024 * MiB, 0.0);
    void *a, *b;
    /* Stream 1 up to 4 MiB and back, then stream 2 up to 4 MiB: the device
     * never held more than 4 MiB (each shard's highest sums to 8). */
    assert_int_equal(tdm_malloc(&a, 4 * MiB, 0, (tdm_stream)1), TDM_OK);
    assert_int_equal(tdm_free(a), TDM_OK);
    assert_int_equal(tdm_malloc(&b, 4 * MiB, 0, (tdm_stream)2), TDM_OK);
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.peak, 4 * MiB);
    assert_int_equal(s.allocation.peak, 1);
    /* Both at once: 4 + 2. */
    assert_int_equal(tdm_malloc(&a, 2 * MiB, 0, (tdm_stream)1), TDM_OK);
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.peak, 6 * MiB);
    assert_int_equal(s.allocation.peak, 2);
    assert_int_equal(tdm_free(b), TDM_OK);
    assert_int_equal(tdm_reset_peak_stats(0), TDM_OK);
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.peak, 2 * MiB);
    tdm_test_check_devices();
    /* Within the shards' shares again: a block from stream 2's cache. */
    assert_int_equal(tdm_malloc(&b, 1 * MiB, 0, (tdm_stream)2), TDM_OK);
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.current, 3 * MiB);
    assert_int_equal(s.allocated_bytes.peak, 3 * MiB);
    assert_int_equal(tdm_free(a), TDM_OK);
    assert_int_equal(tdm_free(b), TDM_OK);
    tdm_test_check_devices();
}

/* ---- threads ---------------------------------------------------------------- */

enum { THREADS = 3, ROUNDS = 30000, SLOTS = 48 };

typedef struct worker {
    pthread_t t;
    tdm_stream stream;
    unsigned seed;
    int64_t held, most; /* allocated bytes: now, highest */
    void **shared;      /* pointers another thread frees */
    int failed;
} worker;

static void *churn(void *arg)
{
    worker *w = arg;
    void *live[SLOTS] = {0};
    size_t bytes[SLOTS] = {0};
    for (int i = 0; i < ROUNDS && !w->failed; i++) {
        int k = (int)(rand_r(&w->seed) % SLOTS);
        if (live[k] != NULL) {
            w->failed |= tdm_free(live[k]) != TDM_OK;
            live[k] = NULL;
            w->held -= (int64_t)bytes[k];
            continue;
        }
        /* Small-pool sizes: a block is its size rounded to 512 bytes,
         * never more, so the thread knows what it holds. */
        size_t sz = 1 + (size_t)(rand_r(&w->seed) % (256 * 1024));
        w->failed |= tdm_malloc(&live[k], sz, 0, w->stream) != TDM_OK;
        bytes[k] = (sz + 511) & ~(size_t)511;
        w->held += (int64_t)bytes[k];
        if (w->held > w->most)
            w->most = w->held;
    }
    for (int k = 0; k < SLOTS; k++) {
        if (live[k] == NULL)
            continue;
        if (k % 2 == 0) { /* half of the rest for another thread to free */
            w->shared[k] = live[k];
        } else {
            w->failed |= tdm_free(live[k]) != TDM_OK;
        }
    }
    return NULL;
}

static _Atomic int readers_stop;

/* Stats, checks and snapshots of the state while the workers run. */
static void *reader(void *arg)
{
    int *failed = arg;
    while (!atomic_load(&readers_stop)) {
        tdm_stats s = {.size = sizeof s};
        *failed |= tdm_memory_stats(0, &s) != TDM_OK;
        *failed |= s.allocated_bytes.current > s.allocated_bytes.peak;
        char msg[256];
        if (tdm__alloc_check(0, msg, sizeof msg) != TDM_OK) {
            fprintf(stderr, "check: %s\n", msg);
            *failed = 1;
        }
    }
    return NULL;
}

static void test_threads_on_streams(void **state)
{
    (void)state;
    use(4096 * MiB, 0.0);
    static void *shared[THREADS][SLOTS];
    memset(shared, 0, sizeof shared);
    worker w[THREADS];
    memset(w, 0, sizeof w);
    int reader_failed = 0;
    pthread_t rt;
    atomic_store(&readers_stop, 0);
    pthread_create(&rt, NULL, reader, &reader_failed);
    for (int i = 0; i < THREADS; i++) {
        w[i].stream = (tdm_stream)(7 + i);
        w[i].seed = 99u + (unsigned)i;
        w[i].shared = shared[i];
        pthread_create(&w[i].t, NULL, churn, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].t, NULL);
    atomic_store(&readers_stop, 1);
    pthread_join(rt, NULL);
    assert_false(reader_failed);
    int64_t most_one = 0, sum_most = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_false(w[i].failed);
        most_one = w[i].most > most_one ? w[i].most : most_one;
        sum_most += w[i].most;
    }
    assert_int_equal(tdm__cache_nshards(group0()), THREADS);
    /* Each thread's leftovers, freed here: by another thread. */
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < SLOTS; k++)
            if (shared[i][k] != NULL)
                assert_int_equal(tdm_free(shared[i][k]), TDM_OK);
    tdm_test_check_devices();
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_true(s.allocated_bytes.peak >= most_one);
    assert_true(s.allocated_bytes.peak <= sum_most);
    print_message("allocated peak %lld: one thread's most %lld, the sum of theirs %lld\n",
                  (long long)s.allocated_bytes.peak, (long long)most_one, (long long)sum_most);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_streams_get_shards, teardown),
        cmocka_unit_test_teardown(test_gc_keeps_one_shard, teardown),
        cmocka_unit_test_teardown(test_peak_is_the_sums, teardown),
        cmocka_unit_test_teardown(test_threads_on_streams, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
