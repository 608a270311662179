/* alloc/meta.c: mmap-backed host memory for alloc/'s bookkeeping.
 *
 * Owns: the chunks of every tdm__objpool and the regions of tdm__meta_map.
 * Invariant: a pool's records are either on its free list, handed out
 * (counted in `live`), or not yet cut from the newest chunk.
 * Lock: none; each pool is guarded by its owner's lock (see meta.h).
 */
#include "meta.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK_BYTES ((size_t)64 << 10)

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) & ~(page - 1);
}

void *tdm__meta_map(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void tdm__meta_unmap(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, page_round(bytes ? bytes : 1));
}

void tdm__objpool_init(tdm__objpool *pool, size_t obj_size)
{
    memset(pool, 0, sizeof *pool);
    /* 16-byte records keep every field naturally aligned. */
    obj_size = obj_size < sizeof(void *) ? sizeof(void *) : obj_size;
    pool->obj_size = (obj_size + 15) & ~(size_t)15;
}

void *tdm__objpool_get(tdm__objpool *pool)
{
    void *obj = pool->free_list;
    if (obj != NULL) {
        memcpy(&pool->free_list, obj, sizeof(void *));
        memset(obj, 0, pool->obj_size);
        pool->live++;
        return obj;
    }
    if (pool->bump == NULL || pool->bump + pool->obj_size > pool->bump_end) {
        char *chunk = tdm__meta_map(CHUNK_BYTES);
        if (chunk == NULL)
            return NULL;
        memcpy(chunk, &pool->chunks, sizeof(void *));
        pool->chunks = chunk;
        /* The chunk's first 16 bytes hold the chunk link. */
        pool->bump = chunk + 16;
        pool->bump_end = chunk + CHUNK_BYTES;
    }
    obj = pool->bump;
    pool->bump += pool->obj_size;
    pool->live++;
    return obj; /* fresh mmap memory is already zero */
}

void tdm__objpool_put(tdm__objpool *pool, void *obj)
{
    if (obj == NULL)
        return;
    memcpy(obj, &pool->free_list, sizeof(void *));
    pool->free_list = obj;
    pool->live--;
}

void tdm__objpool_destroy(tdm__objpool *pool)
{
    void *chunk = pool->chunks;
    while (chunk != NULL) {
        void *next;
        memcpy(&next, chunk, sizeof(void *));
        munmap(chunk, CHUNK_BYTES);
        chunk = next;
    }
    size_t obj_size = pool->obj_size;
    memset(pool, 0, sizeof *pool);
    pool->obj_size = obj_size;
}
