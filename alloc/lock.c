/* alloc/lock.c: the slow paths of tdm__lock (see lock.h). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"

/* Backing off is measured in time, not in pauses: a pause lasts ~10 ns
 * on some CPUs and ~40 on others, and the best delays (found with
 * bench/replay's thread rows) are times: long enough that a holder keeps
 * the lock for a run of calls, short enough that a lock given up for good
 * is not left idle for long. */
#define FIRST_DELAY_NS 1500u     /* first look after ~1.5 us */
#define MAX_DELAY_NS 200000u     /* then doubling, up to 200 us between looks */
#define SPIN_NS 1000000u         /* ~1 ms of backing off before yielding */
#define YIELDS 16   /* sched_yield rounds before sleeping */
#define SLEEP_NS 1000000L /* longest sleep without a wake (1 ms) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define SWEEP_SPIN_NS 50000u /* a sweep's spin for one lock; a wait behind one */

/* Looks at l every few pauses, for up to SWEEP_SPIN_NS or until it is
 * held by a call (which may keep it for a run of calls), and takes it
 * as `as`: whether it did. */
static int poll_take(tdm__lock *l, uint32_t as)
{
    /* A free lock (a sweep's usual find) is taken without reading the
     * clock, which cost more than the rest of the sweep (a third of
     * `replay --sweep`'s time, taking one uncontended lock per
     * allocation). */
    if (tdm__lock_try_as(l, as))
        return 1;
    uint64_t t0 = now_ns();
    for (;;) {
        uint32_t v = atomic_load_explicit(&l->held, memory_order_relaxed);
        if (v == TDM__LOCK_FREE && atomic_compare_exchange_weak_explicit(&l->held, &v, as,
                                                                      memory_order_acquire,
                                                                      memory_order_relaxed))
            return 1;
        if (v == TDM__LOCK_CALL && as == TDM__LOCK_CALL)
            return 0;
        if (now_ns() - t0 > SWEEP_SPIN_NS)
            return 0;
        for (int i = 0; i < 8; i++)
            tdm__lock_relax();
    }
}

/* Backs off, yields, then sleeps (lock.h), until l is taken as `as`. */
static void wait_as(tdm__lock *l, uint32_t as)
{
    for (;;) {
        uint64_t delay = FIRST_DELAY_NS, spent = 0;
        int polled = 0;
        while (spent < SPIN_NS) {
            /* Behind a sweep: it gives the lock back in a moment (once per
             * round: one that keeps it longer is in a provider call). */
            if (!polled && atomic_load_explicit(&l->held, memory_order_relaxed) ==
                               TDM__LOCK_SWEEP) {
                polled = 1;
                if (poll_take(l, as))
                    return;
            }
            uint64_t t0 = now_ns();
            do {
                for (int i = 0; i < 16; i++)
                    tdm__lock_relax();
            } while (now_ns() - t0 < delay);
            if (tdm__lock_try_as(l, as))
                return;
            spent += delay;
            if (delay < MAX_DELAY_NS)
                delay *= 2;
        }
        for (unsigned i = 0; i < YIELDS; i++) {
            sched_yield();
            if (tdm__lock_try_as(l, as))
                return;
        }
        /* The holder is in a long operation (a provider call, a dump's
         * copy), or keeps taking the lock again: sleep until a give wakes
         * us, then back off again from the start.  Only sleepers cost the
         * holder a wake, so a waiter that sleeps again at once after each
         * wake would make the holder pay a system call per give. */
        atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
        struct timespec ts = {0, SLEEP_NS};
        uint32_t held = atomic_load_explicit(&l->held, memory_order_seq_cst);
        if (held != TDM__LOCK_FREE)
            syscall(SYS_futex, &l->held, FUTEX_WAIT_PRIVATE, held, &ts, NULL, 0);
        atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
    }
}

void tdm__lock_take_sweep(tdm__lock *l)
{
    if (__libc_single_threaded) { /* as tdm__lock_take: nobody else */
        atomic_store_explicit(&l->held, TDM__LOCK_SWEEP, memory_order_relaxed);
        return;
    }
    /* The holder is in one call: look again every few pauses; a holder
     * in a long operation (a provider call, a dump's copy) is waited for
     * as any taker waits. */
    if (!poll_take(l, TDM__LOCK_SWEEP))
        wait_as(l, TDM__LOCK_SWEEP);
}

void tdm__lock_wait(tdm__lock *l, uint32_t seen)
{
    if (seen == TDM__LOCK_SWEEP && poll_take(l, TDM__LOCK_CALL))
        return;
    wait_as(l, TDM__LOCK_CALL);
}

void tdm__lock_wake(tdm__lock *l)
{
    syscall(SYS_futex, &l->held, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
