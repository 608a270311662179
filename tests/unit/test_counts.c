/* tests/unit/test_counts.c: the dropped count is true in every mode.
 *
 * The same allocation pattern is recorded twice, once into a ring large
 * enough to keep everything and once into a ring of 100 entries.  The
 * events a dump keeps plus the events it counts as dropped must equal the
 * events of the full recording: in cache mode (one plain event per ring
 * entry) and in pass-through and observe modes, whose ring entries stand
 * for 2 or 3 plain events each (format/event.h, compound entries).
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

#define MiB ((size_t)1 << 20)
#define SMALL_RING 100
#define ROUNDS 700
#define THREADS 4

static void configure(const char *mode)
{
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, mode);
    cfg.device_capacity = 256 * MiB;
    cfg.quiet_oom = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_init(), TDM_OK);
}

static void record(uint64_t max_entries)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    o.stacks = TDM_STACKS_NONE;
    o.max_entries = max_entries;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
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

/* One thread's share of the pattern: allocations of a few sizes, freed
 * in a different order, through the allocator or (observe) as a hook
 * books the vendor's own. */
typedef struct worker {
    int observe;
    uintptr_t base; /* observe: the made-up device addresses to book */
} worker;

static void *work(void *arg)
{
    const worker *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        void *p[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3; k++) {
            size_t size = (size_t)(k + 1) * 4096 + (size_t)r % 7 * 512;
            if (w->observe) {
                p[k] = (void *)(w->base + ((uintptr_t)k << 20));
                tdm__alloc_observe_alloc(0, p[k], size, 0, 0);
            } else {
                assert_int_equal(tdm_malloc(&p[k], size, 0, 0), TDM_OK);
            }
        }
        tdm_phase(r % 2 ? "odd" : "even"); /* a plain event in every mode */
        for (int k = 2; k >= 0; k--) {
            if (w->observe)
                assert_int_equal(tdm__alloc_observe_free(p[k], 0, 0), TDM_OK);
            else
                assert_int_equal(tdm_free(p[k]), TDM_OK);
        }
    }
    return NULL;
}

static void run_pattern(int observe)
{
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.observe = observe, .base = ((uintptr_t)i + 1) << 32};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

/* Recorded = kept + dropped, with a ring that keeps all and one that keeps
 * a sliver. */
static void check_mode(const char *name, const char *mode, int observe)
{
    configure(mode);
    record(1000000);
    run_pattern(observe);
    tdm_event *ev = NULL;
    size_t all = 0;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &all, &dropped), TDM_OK);
    free(ev);
    assert_int_equal(dropped, 0);
    assert_true(all > 10 * SMALL_RING);

    configure(mode);
    record(SMALL_RING);
    run_pattern(observe);
    size_t kept = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &kept, &dropped), TDM_OK);
    free(ev);
    assert_true(kept > 0);
    if (kept + dropped != all)
        fail_msg("%s: %zu events kept + %llu dropped != %zu recorded", name, kept,
                 (unsigned long long)dropped, all);
}

static void test_cache(void **state)
{
    (void)state;
    check_mode("cache", "cache", 0);
}

static void test_passthrough(void **state)
{
    (void)state;
    check_mode("passthrough", "passthrough", 0);
}

static void test_observe(void **state)
{
    (void)state;
    check_mode("observe", "passthrough", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cache, teardown),
        cmocka_unit_test_teardown(test_passthrough, teardown),
        cmocka_unit_test_teardown(test_observe, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
