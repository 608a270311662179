/* snapshot/ring.h: the bounded event ring.
 *
 * A fixed array of 64-byte slots in memory from mmap.  Writers claim a
 * global index with one atomic add and write slot (index & mask); the slot
 * count is the power of two at or above `capacity` (a mask, not a
 * division, on the hot path), and a copy returns exactly the newest
 * `capacity` events; the ring counts what it lost.  No lock anywhere: each slot carries a sequence
 * word (2*index+1 while being written, 2*index+2 when complete) that lets
 * the reader take a consistent copy while writers keep going, and lets a
 * writer that was lapped by a newer one give up instead of tearing it.
 *
 * Events of one thread keep their order (its claims are increasing); the
 * copy comes out in claim order, which is time order up to the few
 * nanoseconds between taking the time and claiming the index.
 */
#ifndef TDM_SNAPSHOT_RING_H
#define TDM_SNAPSHOT_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tidemark.h"
#include "event.h"
#include "seqlock.h"

typedef struct tdm__ring_slot {
    _Atomic uint64_t seq;  /* 0 empty; 2i+1 writing event i; 2i+2 holds event i */
    _Atomic uint64_t w[7]; /* the tdm_event, word by word */
} tdm__ring_slot;

typedef struct tdm__ring {
    _Alignas(64) _Atomic uint64_t head; /* events claimed so far */
    _Alignas(64) _Atomic uint64_t lost; /* writers that gave up (lapped) */
    tdm__ring_slot *slots;              /* mask + 1 slots, from mmap */
    uint64_t capacity;                  /* events kept: the newest `capacity` */
    uint64_t mask;                      /* slots - 1; slots is the power of
                                           two >= capacity, so no division */
    size_t map_bytes;
} tdm__ring;

/* Maps a ring of `capacity` (>= 1) events. */
tdm_status tdm__ring_create(uint64_t capacity, tdm__ring **out);
/* Returns the slots' memory to the system but keeps the mapping, so a
 * writer that still holds the pointer writes into harmless zero pages. */
void tdm__ring_retire(tdm__ring *ring);
/* Unmaps the ring; only when no writer can hold it. */
void tdm__ring_destroy(tdm__ring *ring);

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* How long a writer waits for an older writer still busy in its slot. */
#define TDM_RING_WAIT_SPINS 4096

/* The slot protocol is described at the top of ring.c.  Inline: it is the
 * recorder's hot path. */

static inline void tdm__ring_push(tdm__ring *ring, const tdm_event *ev)
{
    uint64_t i = atomic_fetch_add_explicit(&ring->head, 1, memory_order_relaxed);
    tdm__ring_slot *slot = &ring->slots[i & ring->mask];
    const uint64_t busy = 2 * i + 1, done = 2 * i + 2;
    uint64_t s = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    for (unsigned spins = 0;; spins++) {
        if (s >= busy || spins >= TDM_RING_WAIT_SPINS) {
            /* Lapped by a newer event, or an older writer is stuck. */
            atomic_fetch_add_explicit(&ring->lost, 1, memory_order_relaxed);
            return;
        }
        if (s & 1) { /* an older writer is still in this slot */
            cpu_relax();
            s = atomic_load_explicit(&slot->seq, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&slot->seq, &s, busy,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            break;
    }
    TDM_SEQ_FENCE_RELEASE();
    uint64_t w[7];
    memcpy(w, ev, sizeof w);
    for (int k = 0; k < 7; k++)
        atomic_store_explicit(&slot->w[k], w[k], TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->seq, done, memory_order_release);
}


/* Copies the kept events, oldest first, into out[0..max).  Returns how many
 * were copied; *lost (optional) gets every event claimed but not copied:
 * overwritten, lapped, or still being written at the time of the copy. */
size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost);

#endif
