/* alloc/lock.h: the caching allocator's device lock.
 *
 * Held for a few dozen nanoseconds per malloc or free, by threads that
 * mostly do not contend, so taking it is one atomic compare-exchange and
 * giving it back one release store (a pthread mutex costs two atomic
 * operations and a call each way: a third of a cached malloc+free pair).
 * A thread that finds it taken looks again after delays that double from
 * 1.5 us to 200 us (the holder is almost always about to give it back),
 * for about a millisecond, then yields, then
 * sleeps on a futex that the holder wakes when it sees sleepers; the
 * sleep has a timeout, so a wake missed in the instant between the
 * holder's store and its look at the sleepers costs at most that timeout,
 * never a hang.  Not fair, on purpose: a thread that gives the lock back
 * and takes it again at once (one hammering malloc and free) usually
 * keeps it, and the device's data stays in its core's cache; handing it
 * over at every call moved that data between cores each time and made two
 * threads 5x slower per call than one (bench/replay's thread rows).
 *
 * A sweep (a call that takes every shard's lock of a device for a moment,
 * alloc/cache_shard.c) marks the locks it holds: a thread that finds its
 * shard's lock held by a sweep looks again every few pauses, since the
 * sweep gives it back within a microsecond and does not take it again.
 * Backing off 1.5 us behind every sweep cost two threads on streams of
 * their own a tenth of their time.
 */
#ifndef TDM_ALLOC_LOCK_H
#define TDM_ALLOC_LOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/single_threaded.h>

/* tdm__lock.held */
enum { TDM__LOCK_FREE = 0, TDM__LOCK_CALL = 1, TDM__LOCK_SWEEP = 2 };

typedef struct tdm__lock {
    _Atomic uint32_t held;     /* TDM__LOCK_FREE, _CALL (taken) or _SWEEP */
    _Atomic uint32_t sleepers; /* threads asleep (or about to be) on `held` */
} tdm__lock;

#define TDM__LOCK_INIT {0, 0}

/* One pause of a spinning wait (a hint to the CPU, nothing on others). */
static inline void tdm__lock_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Waits for l, found held as `seen` (TDM__LOCK_CALL or _SWEEP), and
 * takes it. */
void tdm__lock_wait(tdm__lock *l, uint32_t seen);
void tdm__lock_wake(tdm__lock *l);
/* Takes l for a sweep, marked TDM__LOCK_SWEEP.  The holder of a shard's
 * lock is in one short call, so a sweep looks again every few pauses
 * instead of backing off, for up to 50 us (then it waits as any taker
 * does). */
void tdm__lock_take_sweep(tdm__lock *l);

static inline void tdm__lock_take(tdm__lock *l)
{
    /* While the process has one thread (glibc's flag, cleared before a
     * second thread starts) nobody else can hold it: no atomic needed,
     * as glibc's own locks do. */
    if (__libc_single_threaded) {
        atomic_store_explicit(&l->held, TDM__LOCK_CALL, memory_order_relaxed);
        return;
    }
    /* A compare-exchange, not an exchange: a sweep's mark stays for the
     * other waiters to see. */
    uint32_t seen = TDM__LOCK_FREE;
    if (!atomic_compare_exchange_strong_explicit(&l->held, &seen, TDM__LOCK_CALL,
                                                 memory_order_acquire, memory_order_relaxed))
        tdm__lock_wait(l, seen);
}

/* Takes l as `as` (TDM__LOCK_CALL or _SWEEP) if it is free. */
static inline int tdm__lock_try_as(tdm__lock *l, uint32_t as)
{
    uint32_t v = atomic_load_explicit(&l->held, memory_order_relaxed);
    return v == TDM__LOCK_FREE &&
           atomic_compare_exchange_strong_explicit(&l->held, &v, as, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline int tdm__lock_try(tdm__lock *l)
{
    return tdm__lock_try_as(l, TDM__LOCK_CALL);
}

static inline void tdm__lock_give(tdm__lock *l)
{
    atomic_store_explicit(&l->held, TDM__LOCK_FREE, memory_order_release);
    if (atomic_load_explicit(&l->sleepers, memory_order_relaxed) != 0)
        tdm__lock_wake(l);
}

/* A lock known free, as after fork() in the child. */
static inline void tdm__lock_init(tdm__lock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_relaxed);
    atomic_store_explicit(&l->sleepers, 0, memory_order_relaxed);
}

#endif
