/* alloc/lock.h: the caching allocator's device lock.
 *
 * Held for a few dozen nanoseconds per malloc or free, by threads that
 * mostly do not contend, so taking it is one atomic exchange and giving it
 * back one release store (a pthread mutex costs two atomic operations and
 * a call each way: a third of a cached malloc+free pair).  A thread that
 * finds it taken looks again after delays that double from 1.5 us to
 * 200 us (the holder is almost always about to give it back), for about
 * a millisecond, then yields, then
 * sleeps on a futex that the holder wakes when it sees sleepers; the
 * sleep has a timeout, so a wake missed in the instant between the
 * holder's store and its look at the sleepers costs at most that timeout,
 * never a hang.  Not fair, on purpose: a thread that gives the lock back
 * and takes it again at once (one hammering malloc and free) usually
 * keeps it, and the device's data stays in its core's cache; handing it
 * over at every call moved that data between cores each time and made two
 * threads 5x slower per call than one (bench/replay's thread rows).
 */
#ifndef TDM_ALLOC_LOCK_H
#define TDM_ALLOC_LOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/single_threaded.h>

typedef struct tdm__lock {
    _Atomic uint32_t held;     /* 0 free, 1 taken */
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

void tdm__lock_wait(tdm__lock *l);
void tdm__lock_wake(tdm__lock *l);
/* Takes l for a sweep: a call that takes every shard's lock of a device
 * (alloc/cache_shard.c).  The holder of a shard's lock is in one short
 * call, so a sweep looks again every few pauses instead of backing off,
 * for up to 50 us (then as tdm__lock_take). */
void tdm__lock_take_sweep(tdm__lock *l);

static inline void tdm__lock_take(tdm__lock *l)
{
    /* While the process has one thread (glibc's flag, cleared before a
     * second thread starts) nobody else can hold it: no atomic needed,
     * as glibc's own locks do. */
    if (__libc_single_threaded) {
        atomic_store_explicit(&l->held, 1, memory_order_relaxed);
        return;
    }
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire) != 0)
        tdm__lock_wait(l);
}

static inline int tdm__lock_try(tdm__lock *l)
{
    return atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
           atomic_exchange_explicit(&l->held, 1, memory_order_acquire) == 0;
}

static inline void tdm__lock_give(tdm__lock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
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
