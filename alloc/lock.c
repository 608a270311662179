/* alloc/lock.c: the slow paths of tdm__lock (see lock.h). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"

#define SPINS 12    /* looks before yielding: ~1 ms of backing off */
#define MAX_BACKOFF 8192u /* most pauses between looks (~190 us here) */
#define YIELDS 16   /* sched_yield rounds before sleeping */
#define SLEEP_NS 1000000L /* longest sleep without a wake (1 ms) */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void tdm__lock_wait(tdm__lock *l)
{
    for (;;) {
        unsigned backoff = 64; /* ~1.5 us: a holder that just took it back keeps it a while */
        for (unsigned round = 0; round < SPINS + YIELDS; round++) {
            if (tdm__lock_try(l))
                return;
            if (round < SPINS) {
                for (unsigned i = 0; i < backoff; i++)
                    cpu_relax();
                if (backoff < MAX_BACKOFF)
                    backoff *= 2;
            } else {
                sched_yield();
            }
        }
        /* The holder is in a long operation (a provider call, a dump's
         * copy), or keeps taking the lock again: sleep until a give wakes
         * us, then back off again from the start.  Only sleepers cost the
         * holder a wake, so a waiter that sleeps again at once after each
         * wake would make the holder pay a system call per give. */
        atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
        struct timespec ts = {0, SLEEP_NS};
        if (atomic_load_explicit(&l->held, memory_order_seq_cst) != 0)
            syscall(SYS_futex, &l->held, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
        atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
    }
}

void tdm__lock_wake(tdm__lock *l)
{
    syscall(SYS_futex, &l->held, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
