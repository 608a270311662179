/* tests/unit/test_clock.c: the recorder's clock follows CLOCK_REALTIME
 * closely, never runs backwards (across re-anchors too), and falls back to
 * clock_gettime when asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <cmocka.h>

#include "clock.h"

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void check_against_real(int samples, long sleep_us)
{
    uint64_t last = 0;
    for (int i = 0; i < samples; i++) {
        uint64_t before = real_ns();
        uint64_t c = tdm__clock_ns();
        uint64_t after = real_ns();
        /* within 500 µs of the real clock around it: the error between
         * anchors is microseconds; the rest is room for a loaded machine
         * and an NTP slew of the real clock */
        assert_true(c + 500000 >= before);
        assert_true(c <= after + 500000);
        assert_true(c >= last);
        last = c;
        if (sleep_us) {
            struct timespec ts = {0, sleep_us * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

static void follows_realtime_across_reanchors(void **state)
{
    (void)state;
    tdm__clock_init();
    if (!tdm__clock_uses_tsc())
        printf("# kernel clocksource is not tsc: clock_gettime path tested\n");
    /* 1 s in 10 ms steps: about ten re-anchors on the TSC path */
    check_against_real(100, 10000);
}

static void never_goes_backwards_in_a_tight_loop(void **state)
{
    (void)state;
    tdm__clock_init();
    uint64_t last = tdm__clock_ns();
    for (int i = 0; i < 2000000; i++) {
        uint64_t c = tdm__clock_ns();
        assert_true(c >= last);
        last = c;
    }
}

static void fallback_is_clock_gettime(void **state)
{
    (void)state;
    int had = tdm__clock_uses_tsc();
    tdm__clock_force_tsc(0);
    assert_false(tdm__clock_uses_tsc());
    check_against_real(50, 0);
    tdm__clock_force_tsc(had);
    assert_int_equal(tdm__clock_uses_tsc(), had);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(follows_realtime_across_reanchors),
        cmocka_unit_test(never_goes_backwards_in_a_tight_loop),
        cmocka_unit_test(fallback_is_clock_gettime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
