/* snapshot/ring_cut.c: marking one instant of the event ring (ring_cut.h).
 *
 * Chunk c's state word is (n << 1) | held, n the claim that last took it
 * (ring.c).  At the cut:
 *   - not held: claim n gave the chunk back, so every entry of claim n or
 *     older is stored and any later one belongs to a claim made after the
 *     cut: before[c] = (n + 1) * chunk.  A chunk never claimed (state 0,
 *     its first slot empty) holds nothing yet: before[c] = 0.
 *   - held by claim n: its owner writes slots in order, so the stored
 *     entries are the complete slots from the chunk's start:
 *     before[c] = n * chunk + that many.
 * A claim counted (claims++) but not yet won (the CAS on the state) at the
 * instant writes nothing before it, and its indices are above before[c].
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "ring_cut.h"
#include "spare_map.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

int tdm__ring_cut_init(tdm__ring_cut *cut, tdm__ring *ring)
{
    *cut = (tdm__ring_cut){.ring = ring};
    if (!ring)
        return 0;
    cut->before = calloc((size_t)ring->chunks, sizeof *cut->before);
    if (!cut->before)
        return -1;
    /* Room for every slot, as the ring itself maps it (pages come as
     * written; a spare an earlier dump left, spare_map.h); those written
     * so far are put in place now, so that the copy at the cut, under the
     * allocator's locks, takes no page fault for them. */
    cut->entries_room = (size_t)(ring->chunks << ring->chunk_shift);
    size_t bytes;
    int reused;
    void *m = tdm__spare_map_take(cut->entries_room * sizeof *cut->entries, &bytes, &reused);
    if (!m) {
        free(cut->before);
        cut->before = NULL;
        return -1;
    }
    cut->entries = m;
    cut->map_bytes = bytes;
    size_t used = (size_t)(tdm__ring_used_chunks(ring) << ring->chunk_shift) *
                  sizeof *cut->entries;
    used = (used + 4095) & ~(size_t)4095;
    /* A spare's pages are in place unless the kernel took them back
     * (MADV_FREE), and populating them again costs as much as a copy. */
    if (used && !reused)
        (void)madvise(m, used < bytes ? used : bytes, MADV_POPULATE_WRITE);
    return 0;
}

void tdm__ring_cut_free(tdm__ring_cut *cut)
{
    free(cut->before);
    tdm__spare_map_give(cut->entries, cut->map_bytes);
    *cut = (tdm__ring_cut){0};
}

void tdm__ring_cut_order(tdm__ring_cut *cut, size_t max, tdm__ring_order *o)
{
    if (!cut->ring || !cut->taken) {
        *o = (tdm__ring_order){0};
        return;
    }
    tdm__ring_entries_order(cut->ring, cut->entries, cut->entry_count, cut->horizon_ns, max, o);
}

/* Complete slots from the start of held chunk c, under claim n. */
static uint64_t stored_prefix(tdm__ring *ring, uint64_t c, uint64_t n)
{
    uint64_t first = n << ring->chunk_shift, k = 0;
    tdm__ring_slot *slot = &ring->slots[c << ring->chunk_shift];
    while (k < ring->chunk &&
           atomic_load_explicit(&slot[k].seq, memory_order_acquire) ==
               2 * (first + k) + 2)
        k++;
    return k;
}

void tdm__ring_cut_take(tdm__ring_cut *cut)
{
    tdm__ring *ring = cut->ring;
    cut->taken = 1;
    if (!ring)
        return;
    cut->stored = tdm__ring_events(ring);
    /* (before[] of the chunks never claimed stays 0, from calloc.) */
    uint64_t used = tdm__ring_used_chunks(ring);
    for (uint64_t c = 0; c < used; c++) {
        uint64_t s = atomic_load_explicit(&ring->chunk_state[c], memory_order_acquire);
        uint64_t n = s >> 1;
        if (s & 1) {
            cut->before[c] = (n << ring->chunk_shift) + stored_prefix(ring, c, n);
        } else if (s == 0 &&
                   atomic_load_explicit(&ring->slots[c << ring->chunk_shift].seq,
                                        memory_order_acquire) == 0) {
            cut->before[c] = 0;
        } else {
            cut->before[c] = (n + 1) << ring->chunk_shift;
        }
    }
    cut->entry_count = tdm__ring_read_entries(ring, cut->before, cut->entries,
                                              cut->entries_room, &cut->horizon_ns);
}
