/* format/snap_build.h: what the two builders of a tdm_snap in memory
 * share: the recorder's dump (dump.c) and the importers of other tools'
 * files (viewer-export/import/import_build.c).  Such a snapshot points into a
 * pool of string copies, and each of its arrays is its own malloc.  (A
 * snapshot read from a file lives in the reader's arena instead, freed by
 * tdm__snap_free.)  Part of the format library, so the command-line tool
 * has it without the recorder.  No state, no locks.
 */
#ifndef TDM_FORMAT_SNAP_BUILD_H
#define TDM_FORMAT_SNAP_BUILD_H

#include <stddef.h>

#include "snap_model.h"

/* Makes the array *arr (of `elem`-byte items, room for *cap) hold at least
 * `need` items, doubling its room.  0, or -1 out of host memory (the array
 * is then as it was).  `arr` is the address of the array's pointer. */
int tdm__grow_array(void *arr, size_t *cap, size_t need, size_t elem);

typedef struct tdm__str_pool {
    char **items;        /* every copy handed out */
    size_t count, cap;   /* copies / room */
} tdm__str_pool;

/* A copy of s ("" for NULL), kept until tdm__str_pool_free; NULL when out
 * of host memory. */
const char *tdm__str_pool_keep(tdm__str_pool *p, const char *s);
/* Frees every copy and the pool's own array; the pool is then empty. */
void tdm__str_pool_free(tdm__str_pool *p);

/* Frees snap's arrays (devices, phase names, frames, stacks, events,
 * segments, blocks, stats), not the strings they point to, nor snap. */
void tdm__snap_free_arrays(tdm_snap *snap);

#endif
