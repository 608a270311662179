/* snapshot/spill_grow.c: reserving a spill region's file space as its
 * writers reach it, ahead of them where a thread can.
 *
 * The ring's slots are reserved in the spill file step by step (a store
 * into a page the file system has no room for would raise SIGBUS; the
 * whole ring at once would commit its memory in every recorded process).
 * On tmpfs a new page of a file costs more than a fresh anonymous page,
 * and while the ring's first lap is written that cost landed on the
 * recording thread: +30% on an event without a stack.  A thread of
 * tidemark's own (the "grower") now keeps a window of WINDOW bytes ahead
 * of the writers reserved, so they find the file's pages allocated.
 * Writers that overtake it (it is descheduled, or the machine has one
 * core) reserve synchronously as before: the grower only moves work off
 * the hot path, never adds a condition to it.
 *
 * Writers take no lock here.  One lock serialises the grower's steps with
 * the removal of a region, so the grower never reserves a region after
 * its ring was retired (which gave its pages back).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spill.h"

#define STEP ((uint64_t)1 << 20)
/* Kept ahead of the furthest writer: at 3 GB/s of events (the ring's
 * peak rate on one thread) 8 MiB is ~2.7 ms, several scheduler ticks. */
#define WINDOW ((uint64_t)8 << 20)
#define MAX_REGIONS 8

typedef struct {
    char *base; /* NULL: the entry is free */
    uint64_t offset, limit;
    _Atomic uint64_t *reserved;
    _Atomic uint64_t want; /* the grower reserves up to here */
} region;

static region regions[MAX_REGIONS];
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t zeros_lock = PTHREAD_MUTEX_INITIALIZER; /* no fallocate */
static _Atomic uint32_t wake_word; /* futex: bumped by each ask */
static int grower_started;         /* under grow_lock */

static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Publishes that a region is reserved up to `to`: the count only grows.
 * fallocate of a range already allocated is harmless, so writers and the
 * grower reserve without a lock between them and the largest end wins. */
static void publish(_Atomic uint64_t *reserved, uint64_t to)
{
    uint64_t cur = atomic_load_explicit(reserved, memory_order_relaxed);
    while (cur < to && !atomic_compare_exchange_weak_explicit(
                           reserved, &cur, to, memory_order_release, memory_order_relaxed))
        ;
}

int tdm__spill_grow(uint64_t region_offset, _Atomic uint64_t *reserved, uint64_t need,
                    uint64_t limit)
{
    /* No lock: a writer that overtook the grower must not wait for it
     * (descheduled while holding a lock, it would stall every writer). */
    uint64_t have = atomic_load_explicit(reserved, memory_order_acquire);
    if (need <= have)
        return 1;
    uint64_t want = have + STEP;
    if (want < need)
        want = need;
    if (want > limit)
        want = limit;
    int rc = tdm__spill_fallocate(region_offset + have, want - have);
    if (rc == 0) {
        publish(reserved, want);
        return 1;
    }
    if (rc < 0)
        return 0;
    /* No fallocate: zeros are written, which must never land on a range
     * already published (a writer may be filling it), so these writers
     * go one at a time and start from what is reserved under the lock. */
    pthread_mutex_lock(&zeros_lock);
    int ok = 1;
    have = atomic_load_explicit(reserved, memory_order_acquire);
    if (need > have) {
        want = have + STEP < need ? need : have + STEP;
        if (want > limit)
            want = limit;
        ok = tdm__spill_write_zeros(region_offset + have, want - have) == 0;
        if (ok)
            publish(reserved, want);
    }
    pthread_mutex_unlock(&zeros_lock);
    return ok;
}

/* One step of work for the grower on region r, under grow_lock: 1 when
 * it reserved something (there may be more), 0 when r is served. */
static int grow_one(region *r)
{
    if (!r->base)
        return 0;
    uint64_t have = atomic_load_explicit(r->reserved, memory_order_relaxed);
    uint64_t want = atomic_load_explicit(&r->want, memory_order_relaxed);
    if (want > r->limit)
        want = r->limit;
    if (have >= want)
        return 0;
    uint64_t to = have + STEP < want ? have + STEP : want;
    if (tdm__spill_fallocate(r->offset + have, to - have) != 0) {
        /* No room, or a file system without fallocate (writing zeros
         * ahead would race with the writers' own): the writers reserve
         * themselves and count what finds no room. */
        atomic_store_explicit(&r->want, have, memory_order_relaxed);
        return 0;
    }
    /* Only the file's pages: mapping them here too (MADV_POPULATE_WRITE)
     * halves the grower's pace (4.3 -> 2.0 GB/s on tmpfs) below a
     * writer's (~3 GB/s of events), and a writer's fault on an allocated
     * page costs less than one on fresh anonymous memory. */
    publish(r->reserved, to);
    return 1;
}

static void *grower(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&wake_word, memory_order_acquire);
        int busy = 0;
        for (int i = 0; i < MAX_REGIONS; i++) {
            pthread_mutex_lock(&grow_lock);
            busy |= grow_one(&regions[i]);
            pthread_mutex_unlock(&grow_lock);
        }
        if (!busy)
            futex_wait(&wake_word, seen);
    }
    return NULL;
}

/* Under grow_lock.  The grower must never run a signal handler of the
 * program's (nor take SIGINT meant for a thread that can act on it). */
static void start_grower(void)
{
    if (grower_started)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN > 65536 ? PTHREAD_STACK_MIN : 65536);
    if (pthread_create(&t, &attr, grower, NULL) == 0) {
        grower_started = 1;
        pthread_setname_np(t, "tidemark-spill");
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int tdm__spill_ahead_add(void *base, uint64_t offset, _Atomic uint64_t *reserved,
                         uint64_t limit)
{
    int handle = -1;
    pthread_mutex_lock(&grow_lock);
    for (int i = 0; i < MAX_REGIONS && handle < 0; i++) {
        if (!regions[i].base) {
            regions[i].offset = offset;
            regions[i].limit = limit;
            regions[i].reserved = reserved;
            atomic_store_explicit(&regions[i].want, 0, memory_order_relaxed);
            regions[i].base = base;
            handle = i;
        }
    }
    if (handle >= 0)
        start_grower();
    pthread_mutex_unlock(&grow_lock);
    return handle;
}

void tdm__spill_ahead_remove(int handle)
{
    if (handle < 0 || handle >= MAX_REGIONS)
        return;
    pthread_mutex_lock(&grow_lock);
    regions[handle].base = NULL;
    pthread_mutex_unlock(&grow_lock);
}

void tdm__spill_ahead_ask(int handle, uint64_t end)
{
    region *r = &regions[handle];
    uint64_t want = end + WINDOW;
    /* Moves in whole steps: one wake per STEP of events at most. */
    if (want < atomic_load_explicit(&r->want, memory_order_relaxed) + STEP)
        return;
    atomic_store_explicit(&r->want, want, memory_order_relaxed);
    atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
    futex_wake(&wake_word);
}

void tdm__spill_ahead_fork_child(void)
{
    /* The only thread of the child: no lock is held by anyone else. */
    pthread_mutex_init(&grow_lock, NULL);
    pthread_mutex_init(&zeros_lock, NULL);
    for (int i = 0; i < MAX_REGIONS; i++)
        regions[i].base = NULL;
    grower_started = 0;
}
