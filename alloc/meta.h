/* alloc/meta.h: host memory for the allocator's own bookkeeping.
 *
 * Nothing in alloc/ takes host memory from the program's malloc: a program
 * that tidemark watches must see the same heap with or without it.  Two
 * sources, both built directly on mmap:
 *   - tdm__meta_map / tdm__meta_unmap: page-granular regions for tables
 *     (the pointer map, snapshot copies);
 *   - tdm__objpool: fixed-size records (range nodes, blocks, segments) cut
 *     from 64 KiB mmap'd chunks and recycled through a free list.  A pool
 *     has no lock of its own: its owner's lock (a device lock) covers it,
 *     so the hot path takes no extra lock for metadata.
 * Chunks go back to the system only when the pool is destroyed.
 *
 * Why not a private jemalloc arena (the first plan): Debian's jemalloc is
 * built with initial-exec TLS (2.6 KB), and any shared object embedding
 * it can no longer be dlopen()ed ("cannot allocate memory in static TLS
 * block"), which would break torch's CUDAPluggableAllocator and ctypes.
 */
#ifndef TDM_ALLOC_META_H
#define TDM_ALLOC_META_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

/* A zeroed region of at least `bytes` (rounded up to pages); NULL when the
 * system refuses.  Exported for the preload's tables (hooks/preload/
 * vmm_track.c), which must not take the program's malloc either. */
TDM_API void *tdm__meta_map(size_t bytes);
/* Gives back a region from tdm__meta_map; `bytes` as passed to it. */
TDM_API void tdm__meta_unmap(void *p, size_t bytes);

typedef struct tdm__objpool {
    size_t obj_size;      /* bytes per record, >= sizeof(void *) */
    void *free_list;      /* recycled records, linked through their first word */
    void *chunks;         /* mmap'd chunks, linked through their first word */
    char *bump;           /* next never-used record in the newest chunk */
    char *bump_end;       /* end of the newest chunk */
    size_t live;          /* records handed out and not put back */
} tdm__objpool;

void tdm__objpool_init(tdm__objpool *pool, size_t obj_size);
/* A zeroed record, or NULL when the system has no memory left. */
void *tdm__objpool_get(tdm__objpool *pool);
void tdm__objpool_put(tdm__objpool *pool, void *obj);

/* A record as it was put back, not zeroed: for a caller that sets every
 * field itself (the caching allocator's split, once per call, where
 * zeroing 192 bytes cost more than the rest of the split).  Its first
 * word holds the free-list link.  NULL when the system has no memory. */
static inline void *tdm__objpool_get_dirty(tdm__objpool *pool)
{
    void *obj = pool->free_list;
    if (obj == NULL)
        return tdm__objpool_get(pool); /* fresh: zero, which is as good */
    pool->free_list = *(void **)obj;
    pool->live++;
    return obj;
}
/* Unmaps every chunk; records still out become invalid. */
void tdm__objpool_destroy(tdm__objpool *pool);

#endif
