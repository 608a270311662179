/* tests/unit/test_spill_grow.c: the spill file's space is reserved ahead
 * of the ring's writers by a thread that does not record, woken through
 * the waker (the preload's signal watcher; here a thread of the test's
 * that does the same), so that a ring's first lap does not pay for the
 * file system's page allocation on the hot path (snapshot/spill_grow.c).
 * Without a waker nothing is reserved ahead; with one the reservation
 * stays ahead, stops at the ring's end, leaves a retired ring alone, and a
 * forked child (no waker there) still records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ring.h"
#include "spill.h"

#define MIB ((uint64_t)1 << 20)

static char path[256];

/* The stand-in for the signal watcher: a pipe, a byte per wake-up. */
static int wake_pipe[2] = {-1, -1};
static pthread_t worker;

static void wake_worker(void)
{
    char g = 'g';
    if (write(wake_pipe[1], &g, 1) < 0) {
        /* full: wake-ups are pending */
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    char byte;
    while (read(wake_pipe[0], &byte, 1) == 1 && byte == 'g')
        tdm__spill_ahead_work();
    return NULL;
}

static void start_worker(void)
{
    assert_int_equal(pipe(wake_pipe), 0);
    assert_int_equal(pthread_create(&worker, NULL, worker_main, NULL), 0);
    tdm__spill_ahead_set_waker(wake_worker);
}

static void stop_worker(void)
{
    tdm__spill_ahead_set_waker(NULL);
    char q = 'q';
    assert_int_equal(write(wake_pipe[1], &q, 1), 1);
    pthread_join(worker, NULL);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
}

static int open_spill(void **state)
{
    (void)state;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/tdm-test-spill-grow-%d", dir, (int)getpid());
    char why[256];
    if (tdm__spill_open(path, "", "sim", why, sizeof why) != TDM_OK) {
        fprintf(stderr, "cannot open spill %s: %s\n", path, why);
        return -1;
    }
    return 0;
}

static int remove_spill(void **state)
{
    (void)state;
    tdm__spill_remove();
    return 0;
}

static uint64_t reserved(tdm__ring *r)
{
    return atomic_load_explicit(&r->spill_reserved, memory_order_acquire);
}

/* Waits up to 5 s for the worker to reserve `want` bytes of the ring. */
static uint64_t wait_reserved(tdm__ring *r, uint64_t want)
{
    for (int i = 0; i < 5000 && reserved(r) < want; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return reserved(r);
}

static void push_n(tdm__ring *r, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        tdm_event ev = {.time_ns = 1 + i, .addr = i, .size = 64, .action = TDM_ACTION_ALLOC};
        tdm__ring_push(r, &ev);
    }
}

static void nothing_ahead_without_a_waker(void **state)
{
    (void)state;
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(1 << 20, &r), TDM_OK);
    push_n(r, 1000);
    uint64_t written = (uint64_t)((char *)&r->slots[1024] - (char *)r);
    struct timespec settle = {0, 30 * 1000000};
    nanosleep(&settle, NULL);
    /* The writer's own steps: 1 MiB past what it needed, no window. */
    assert_true(reserved(r) >= written);
    assert_true(reserved(r) <= written + 2 * MIB);
    tdm__ring_retire(r);
    tdm__ring_destroy(r);
}

static void window_stays_ahead_of_the_writer(void **state)
{
    (void)state;
    start_worker();
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(1 << 20, &r), TDM_OK); /* 64 MiB of slots */
    assert_true(r->spill_offset != 0);
    assert_true(r->spill_ahead >= 0);
    uint64_t start = reserved(r);
    push_n(r, 1000); /* one chunk's claim asks for a window ahead */
    uint64_t written = (uint64_t)((char *)&r->slots[1024] - (char *)r);
    /* The writer reserved at most one step itself; the rest is the
     * worker's, which goes on after the writer stopped. */
    uint64_t got = wait_reserved(r, written + 4 * MIB);
    assert_true(got >= written + 4 * MIB);
    assert_true(got > start + 2 * MIB);
    /* ...but not past the window: a ring's file space is not committed
     * before its events come. */
    struct timespec settle = {0, 50 * 1000000};
    nanosleep(&settle, NULL);
    assert_true(reserved(r) <= written + 16 * MIB);
    tdm__ring_retire(r);
    tdm__ring_destroy(r);
    stop_worker();
}

static void window_stops_at_the_ring_end(void **state)
{
    (void)state;
    start_worker();
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(8192, &r), TDM_OK); /* under 1 MiB */
    push_n(r, 3 * 8192); /* laps */
    assert_int_equal(wait_reserved(r, r->map_bytes), r->map_bytes);
    struct timespec settle = {0, 20 * 1000000};
    nanosleep(&settle, NULL);
    assert_int_equal(reserved(r), r->map_bytes);
    tdm__ring_retire(r);
    tdm__ring_destroy(r);
    stop_worker();
}

static void retired_ring_is_left_alone(void **state)
{
    (void)state;
    start_worker();
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(1 << 20, &r), TDM_OK);
    push_n(r, 1000);
    int handle = r->spill_ahead;
    assert_true(handle >= 0);
    tdm__ring_retire(r);
    assert_int_equal(r->spill_ahead, -1);
    uint64_t at_retire = reserved(r);
    struct timespec settle = {0, 30 * 1000000};
    nanosleep(&settle, NULL);
    assert_int_equal(reserved(r), at_retire);
    tdm__ring_destroy(r);
    /* Its entry is free again: a new ring is reserved ahead too. */
    tdm__ring *again = NULL;
    assert_int_equal(tdm__ring_create(1 << 20, &again), TDM_OK);
    assert_true(again->spill_ahead >= 0);
    tdm__ring_retire(again);
    tdm__ring_destroy(again);
    stop_worker();
}

static void forked_child_records_without_the_waker(void **state)
{
    (void)state;
    start_worker();
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(1 << 16, &r), TDM_OK);
    push_n(r, 100);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tdm__ring_fork_child(r);
        if (r->spill_offset != 0 || r->spill_ahead != -1)
            _exit(2);
        push_n(r, 200000); /* wraps: private memory, no file */
        _exit(tdm__ring_events(r) >= 200000 ? 0 : 3);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    tdm__ring_retire(r);
    tdm__ring_destroy(r);
    stop_worker();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nothing_ahead_without_a_waker),
        cmocka_unit_test(window_stays_ahead_of_the_writer),
        cmocka_unit_test(window_stops_at_the_ring_end),
        cmocka_unit_test(retired_ring_is_left_alone),
        cmocka_unit_test(forked_child_records_without_the_waker),
    };
    return cmocka_run_group_tests(tests, open_spill, remove_spill);
}
