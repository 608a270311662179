/* snapshot/spill_grow.c: reserving a spill region's file space as its
 * writers reach it, ahead of them where another thread can.
 *
 * The ring's slots are reserved in the spill file step by step (a store
 * into a page the file system has no room for would raise SIGBUS; the
 * whole ring at once would commit its memory in every recorded process).
 * On tmpfs a new page of a file costs more than a fresh anonymous page,
 * and while the ring's first lap is written that cost landed on the
 * recording thread: +27% on an event without a stack.  So writers ask for
 * a window of WINDOW bytes ahead of them, and a thread that does not record
 * reserves it (tdm__spill_ahead_work), woken by a callback the layer above
 * registers: the preload's signal watcher, which a recorded program has
 * whenever it writes an exit snapshot.  tidemark starts no thread for this
 * alone: a second thread turns off glibc's single-thread fast paths (its
 * mutexes and malloc stop skipping their atomic operations) in the whole
 * program, which cost a single-threaded program far more (+30 ns per
 * hooked call) than the pages do.  Without a waker, or when a writer
 * overtakes the reservation, writers reserve synchronously as before: the
 * window only moves work off the hot path, never adds a condition to it.
 *
 * Writers take no lock here.  One lock serialises the work steps with the
 * removal of a region, so a region is never reserved after its ring was
 * retired (which gave its pages back).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "spill.h"

#define STEP ((uint64_t)1 << 20)
/* Kept ahead of the furthest writer: at 3 GB/s of events (the ring's
 * peak rate on one thread) 8 MiB is ~2.7 ms, several scheduler ticks. */
#define WINDOW ((uint64_t)8 << 20)
#define MAX_REGIONS 8

typedef struct {
    _Atomic uint64_t *reserved; /* NULL: the entry is free */
    uint64_t offset, limit;
    _Atomic uint64_t want; /* work() reserves up to here */
} region;

static region regions[MAX_REGIONS];
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t zeros_lock = PTHREAD_MUTEX_INITIALIZER; /* no fallocate */
static void (*_Atomic waker)(void); /* wakes a thread that calls work() */

/* Publishes that a region is reserved up to `to`: the count only grows.
 * fallocate of a range already allocated is harmless, so writers and the
 * thread doing the work reserve without a lock between them, and the
 * largest end wins. */
static void publish(_Atomic uint64_t *reserved, uint64_t to)
{
    uint64_t cur = atomic_load_explicit(reserved, memory_order_relaxed);
    while (cur < to && !atomic_compare_exchange_weak_explicit(
                           reserved, &cur, to, memory_order_release, memory_order_relaxed))
        ;
}

/* Where a reservation from `have` ends: one step on, or `need` if further,
 * never past `limit`. */
static uint64_t step_end(uint64_t have, uint64_t need, uint64_t limit)
{
    uint64_t to = have + STEP < need ? need : have + STEP;
    return to < limit ? to : limit;
}

int tdm__spill_grow(uint64_t region_offset, _Atomic uint64_t *reserved, uint64_t need,
                    uint64_t limit)
{
    /* No lock: a writer that overtook the work must not wait for it
     * (descheduled while holding a lock, it would stall every writer). */
    uint64_t have = atomic_load_explicit(reserved, memory_order_acquire);
    if (need <= have)
        return 1;
    uint64_t want = step_end(have, need, limit);
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
        want = step_end(have, need, limit);
        ok = tdm__spill_write_zeros(region_offset + have, want - have) == 0;
        if (ok)
            publish(reserved, want);
    }
    pthread_mutex_unlock(&zeros_lock);
    return ok;
}

/* One step of work on region r, under grow_lock: 1 when
 * it reserved something (there may be more), 0 when r is served. */
static int grow_one(region *r)
{
    if (!r->reserved)
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
     * halves the pace of the work (4.3 -> 2.0 GB/s on tmpfs) below a
     * writer's (~3 GB/s of events), and a writer's fault on an allocated
     * page costs less than one on fresh anonymous memory. */
    publish(r->reserved, to);
    return 1;
}

void tdm__spill_ahead_set_waker(void (*wake)(void))
{
    atomic_store_explicit(&waker, wake, memory_order_release);
}

void tdm__spill_ahead_work(void)
{
    for (int busy = 1; busy;) {
        busy = 0;
        for (int i = 0; i < MAX_REGIONS; i++) {
            pthread_mutex_lock(&grow_lock);
            busy |= grow_one(&regions[i]);
            pthread_mutex_unlock(&grow_lock);
        }
    }
}

int tdm__spill_ahead_add(uint64_t offset, _Atomic uint64_t *reserved, uint64_t limit)
{
    int handle = -1;
    pthread_mutex_lock(&grow_lock);
    for (int i = 0; i < MAX_REGIONS && handle < 0; i++) {
        if (!regions[i].reserved) {
            regions[i].offset = offset;
            regions[i].limit = limit;
            atomic_store_explicit(&regions[i].want, 0, memory_order_relaxed);
            regions[i].reserved = reserved;
            handle = i;
        }
    }
    pthread_mutex_unlock(&grow_lock);
    return handle;
}

void tdm__spill_ahead_remove(int handle)
{
    if (handle < 0 || handle >= MAX_REGIONS)
        return;
    pthread_mutex_lock(&grow_lock);
    regions[handle].reserved = NULL;
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
    void (*wake)(void) = atomic_load_explicit(&waker, memory_order_acquire);
    if (wake)
        wake();
}

void tdm__spill_ahead_fork_child(void)
{
    /* The only thread of the child: no lock is held by anyone else. */
    pthread_mutex_init(&grow_lock, NULL);
    pthread_mutex_init(&zeros_lock, NULL);
    for (int i = 0; i < MAX_REGIONS; i++)
        regions[i].reserved = NULL;
    atomic_store(&waker, NULL);
}
