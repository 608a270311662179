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
 * Taking a cut reads every chunk's state and scans the slots of the chunks
 * held by threads: no lock, no allocation, no stdio (it runs while the
 * allocator's locks are held).  An entry being written at the instant
 * counts as after it.
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
    int taken;        /* tdm__ring_cut_take ran */
} tdm__ring_cut;

/* Room for a cut of `ring` (may be NULL: nothing to cut).  0, or -1 when
 * out of host memory. */
int tdm__ring_cut_init(tdm__ring_cut *cut, tdm__ring *ring);
/* Marks this instant. */
void tdm__ring_cut_take(tdm__ring_cut *cut);
void tdm__ring_cut_free(tdm__ring_cut *cut);

/* Copies, as tdm__ring_copy does, the newest min(capacity, max) entries
 * stored before the cut (entry index < before[chunk]); *copied_plain gets
 * the plain events they stand for.  Defined in ring.c. */
size_t tdm__ring_copy_before(tdm__ring *ring, const uint64_t *before,
                             tdm_event *out, size_t max, uint64_t *copied_plain);

#endif
