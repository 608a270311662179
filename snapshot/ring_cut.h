/* snapshot/ring_cut.h: one instant of the event ring, so that a dump's
 * events stop exactly where its allocator state was copied.
 *
 * A cut records, for each chunk of the ring, the first entry index that
 * was not yet stored at that instant (ring.h: a chunk is written in index
 * order by one thread, and a claim of it made later gets higher indices),
 * and how many plain events had been stored in all.  Copying "before the
 * cut" then keeps the entries stored up to that instant and none stored
 * afterwards, however long after the cut the copy runs.
 *
 * Taking a cut reads every chunk's state and then copies the ring's
 * complete slots of entries before it into memory of its own, sized when
 * the cut was made ready (tdm__ring_cut_init): no lock, no allocation, no
 * stdio.  It runs while the allocator's locks are held, so the threads
 * that record allocations and frees wait for the copy, a sequential read
 * of the ring, instead of overwriting, while a dump's later copy and sort
 * run, the events the dump is made of (with eight threads and a dump
 * every 3 ms, a dump had kept 100 of 5.9M events).  What was lost anyway
 * (overwritten before the cut, or by events recorded outside those locks)
 * is older than the cut's horizon_ns (ring.h), and the copy keeps only
 * newer events: a dump's history is one unbroken stretch up to the cut.
 * An entry being written at the instant counts as after it.
 */
#ifndef TDM_SNAPSHOT_RING_CUT_H
#define TDM_SNAPSHOT_RING_CUT_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h"

typedef struct tdm__ring_cut {
    tdm__ring *ring;  /* the ring it was made for */
    uint64_t *before; /* [ring->chunks]: entries of index < before[c] in
                       * chunk c were stored before the cut */
    uint64_t stored;  /* plain events stored before the cut (kept,
                       * overwritten or refused) */
    tdm__ring_entry *entries; /* the entries before the cut, as copied at
                               * it (from mmap: room for every slot) */
    size_t entries_room;      /* slots it has room for */
    size_t entry_count;
    size_t map_bytes;
    uint64_t horizon_ns; /* every entry lost by the copy is this old or older */
    int taken;        /* tdm__ring_cut_take ran */
} tdm__ring_cut;

/* Room for a cut of `ring` (may be NULL: nothing to cut).  0, or -1 when
 * out of host memory. */
int tdm__ring_cut_init(tdm__ring_cut *cut, tdm__ring *ring);
/* Marks this instant. */
void tdm__ring_cut_take(tdm__ring_cut *cut);
void tdm__ring_cut_free(tdm__ring_cut *cut);

/* The newest min(capacity, max) entries stored before the cut (taken)
 * and newer than anything lost, in order, from the cut's own copy
 * (tdm__ring_entries_order, which reorders that copy in place; free the
 * order with tdm__ring_order_free before the cut). */
void tdm__ring_cut_order(tdm__ring_cut *cut, size_t max, tdm__ring_order *o);

#endif
