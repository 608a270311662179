/* tests/unit/test_lock.c: the shard lock (alloc/lock.h) excludes, with
 * sweeps' takes among the others, marks a sweep's hold, lets a sleeping
 * waiter in, and leaves no sleeper count behind. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include "lock.h"

static tdm__lock lock = TDM__LOCK_INIT;
static long counter; /* plain: only the lock keeps increments whole */

enum { THREADS = 4, ROUNDS = 200000 };

static void *hammer(void *arg)
{
    int sweeps = arg != NULL; /* every other take is a sweep's */
    for (int i = 0; i < ROUNDS; i++) {
        if (sweeps && i % 2)
            tdm__lock_take_sweep(&lock);
        else
            tdm__lock_take(&lock);
        long c = counter;
        __asm__ __volatile__("" ::: "memory");
        counter = c + 1;
        tdm__lock_give(&lock);
    }
    return NULL;
}

static void test_excludes(void **state)
{
    (void)state;
    counter = 0;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, i % 2 ? &lock : NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(counter, (long)THREADS * ROUNDS);
    assert_int_equal(atomic_load(&lock.held), 0);
    assert_int_equal(atomic_load(&lock.sleepers), 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double got_at;

/* The lock's sleeper count once a waiter has gone to sleep (or after 5 s). */
static unsigned sleepers_within_5s(void)
{
    double deadline = now_s() + 5.0;
    while (atomic_load(&lock.sleepers) == 0 && now_s() < deadline) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&lock.sleepers);
}

/* Gives the lock back to the waiter t: it got it after the give, never
 * before, and gave it back leaving no sleeper count. */
static void give_to_waiter(pthread_t t)
{
    double given = now_s();
    tdm__lock_give(&lock);
    pthread_join(t, NULL);
    assert_true(got_at >= given);
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_FREE);
    assert_int_equal(atomic_load(&lock.sleepers), 0);
}

static void *waiter(void *arg)
{
    if (arg != NULL)
        tdm__lock_take_sweep(&lock);
    else
        tdm__lock_take(&lock);
    got_at = now_s();
    tdm__lock_give(&lock);
    return NULL;
}

/* A holder in a long operation: the waiter goes to sleep, gets the lock
 * once it is given back, never before, and leaves no sleeper count. */
static void test_sleeper_gets_it(void **state)
{
    (void)state;
    tdm__lock_take(&lock);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    assert_int_equal(sleepers_within_5s(), 1);
    struct timespec hold = {0, 30000000}; /* 30 ms, well past the spins */
    nanosleep(&hold, NULL);
    give_to_waiter(t);
}

/* A sweep behind a holder in a long operation stops spinning, waits as
 * any other taker, and gets the lock once it is given back, never
 * before. */
static void test_sweep_waits(void **state)
{
    (void)state;
    tdm__lock_take(&lock);
    pthread_t t;
    got_at = 0;
    pthread_create(&t, NULL, waiter, &lock);
    struct timespec hold = {0, 30000000}; /* 30 ms, past the sweep's spin */
    nanosleep(&hold, NULL);
    give_to_waiter(t);
}

/* A call behind a sweep's long hold ends up asleep like any waiter,
 * leaves the sweep's mark as it is (other waiters look at it to poll
 * rather than back off), and gets the lock once it is given back. */
static void test_call_behind_sweep(void **state)
{
    (void)state;
    tdm__lock_take_sweep(&lock);
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_SWEEP);
    pthread_t t;
    got_at = 0;
    pthread_create(&t, NULL, waiter, NULL);
    assert_int_equal(sleepers_within_5s(), 1);
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_SWEEP);
    give_to_waiter(t);
}

static void test_try(void **state)
{
    (void)state;
    assert_true(tdm__lock_try(&lock));
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_CALL);
    assert_false(tdm__lock_try(&lock));
    assert_false(tdm__lock_try_as(&lock, TDM__LOCK_SWEEP));
    tdm__lock_give(&lock);
    assert_true(tdm__lock_try_as(&lock, TDM__LOCK_SWEEP));
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_SWEEP);
    assert_false(tdm__lock_try(&lock));
    assert_int_equal(atomic_load(&lock.held), TDM__LOCK_SWEEP);
    tdm__lock_give(&lock);
    assert_true(tdm__lock_try(&lock));
    tdm__lock_give(&lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excludes),
        cmocka_unit_test(test_sleeper_gets_it),
        cmocka_unit_test(test_sweep_waits),
        cmocka_unit_test(test_call_behind_sweep),
        cmocka_unit_test(test_try),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
