/* snapshot/ring.h: the bounded event ring.
 *
 * A fixed array of 64-byte slots in memory from mmap.  Writers claim a
 * global index with one atomic add and write slot (index % capacity), so
 * the newest `capacity` events are kept and older ones are overwritten; the
 * ring counts what it lost.  No lock anywhere: each slot carries a sequence
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

#include "tidemark.h"
#include "event.h"

typedef struct tdm__ring_slot {
    _Atomic uint64_t seq;  /* 0 empty; 2i+1 writing event i; 2i+2 holds event i */
    _Atomic uint64_t w[7]; /* the tdm_event, word by word */
} tdm__ring_slot;

typedef struct tdm__ring {
    _Alignas(64) _Atomic uint64_t head; /* events claimed so far */
    _Alignas(64) _Atomic uint64_t lost; /* writers that gave up (lapped) */
    tdm__ring_slot *slots;              /* capacity slots, from mmap */
    uint64_t capacity;                  /* events */
    size_t map_bytes;
} tdm__ring;

/* Maps a ring of `capacity` (>= 1) events. */
tdm_status tdm__ring_create(uint64_t capacity, tdm__ring **out);
/* Returns the slots' memory to the system but keeps the mapping, so a
 * writer that still holds the pointer writes into harmless zero pages. */
void tdm__ring_retire(tdm__ring *ring);
/* Unmaps the ring; only when no writer can hold it. */
void tdm__ring_destroy(tdm__ring *ring);

void tdm__ring_push(tdm__ring *ring, const tdm_event *ev);

/* Copies the kept events, oldest first, into out[0..max).  Returns how many
 * were copied; *lost (optional) gets every event claimed but not copied:
 * overwritten, lapped, or still being written at the time of the copy. */
size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost);

#endif
