/* snapshot/spare_map.h: the large private mappings a dump makes (the
 * cut's copy of the ring, the snapshot's events), kept for the next dump
 * instead of unmapped.
 *
 * Fresh memory costs a page fault and a zeroed page per 4 KiB: for a
 * 1M-event dump, 64 MiB of ring copy and 56 MiB of events, 30,000 faults,
 * a third of the dump's time.  A program that dumps every few steps (or
 * on every signal) pays that each time.  A mapping given back is kept
 * (TDM__SPARE_MAPS at most) with MADV_FREE: the kernel may take its pages
 * back whenever memory runs short (they then read as zero, and are
 * faulted in again when written), and until then the next dump writes
 * over them without a fault.  Where MADV_FREE is refused (Linux before
 * 4.5) nothing is kept.  tdm__spare_maps_release unmaps all, when
 * recording stops.
 *
 * Lock: one mutex for the slots, never held across a system call other
 * than munmap of a slot being replaced; not on any recording path.
 * After fork() the child starts with the lock free (tdm__spare_maps_fork_child).
 */
#ifndef TDM_SNAPSHOT_SPARE_MAP_H
#define TDM_SNAPSHOT_SPARE_MAP_H

#include <stddef.h>

#define TDM__SPARE_MAPS 2

/* A private read-write mapping of at least `bytes` (page-rounded; its
 * size in *mapped): a spare one large enough if there is one (*reused 1),
 * else a new one (MAP_NORESERVE; *reused 0).  Its contents are undefined.
 * NULL when out of address space.  reused may be NULL. */
void *tdm__spare_map_take(size_t bytes, size_t *mapped, int *reused);
/* Gives back a mapping from tdm__spare_map_take (its `mapped` size): kept
 * as a spare, or unmapped.  NULL is ignored. */
void tdm__spare_map_give(void *map, size_t mapped);
/* Unmaps every spare. */
void tdm__spare_maps_release(void);
void tdm__spare_maps_fork_child(void);

#endif
