/* snapshot/spare_map.c: large mappings kept between dumps (spare_map.h). */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "spare_map.h"

#ifndef MADV_FREE
#define MADV_FREE 8 /* Linux 4.5 */
#endif

typedef struct spare {
    void *map;
    size_t bytes;
} spare;

static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static spare spares[TDM__SPARE_MAPS];

void *tdm__spare_map_take(size_t bytes, size_t *mapped, int *reused)
{
    size_t want = (bytes + 4095) & ~(size_t)4095;
    if (want < bytes)
        return NULL;
    if (!want)
        want = 4096;
    /* The smallest spare that is large enough. */
    spare got = {0};
    pthread_mutex_lock(&spare_lock);
    int best = -1;
    for (int i = 0; i < TDM__SPARE_MAPS; i++)
        if (spares[i].map && spares[i].bytes >= want &&
            (best < 0 || spares[i].bytes < spares[best].bytes))
            best = i;
    if (best >= 0) {
        got = spares[best];
        spares[best] = (spare){0};
    }
    pthread_mutex_unlock(&spare_lock);
    if (reused)
        *reused = got.map != NULL;
    if (got.map) {
        *mapped = got.bytes;
        return got.map;
    }
    void *m = mmap(NULL, want, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    *mapped = want;
    return m;
}

void tdm__spare_map_give(void *map, size_t mapped)
{
    if (!map)
        return;
    if (madvise(map, mapped, MADV_FREE) != 0) {
        munmap(map, mapped);
        return;
    }
    /* An empty slot, else the smallest spare if this one is larger. */
    spare out = {map, mapped};
    pthread_mutex_lock(&spare_lock);
    int slot = -1;
    for (int i = 0; i < TDM__SPARE_MAPS && slot < 0; i++)
        if (!spares[i].map)
            slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < TDM__SPARE_MAPS; i++)
            if (spares[i].bytes < spares[slot].bytes)
                slot = i;
        if (spares[slot].bytes >= mapped)
            slot = -1;
    }
    if (slot >= 0) {
        spare kept = spares[slot];
        spares[slot] = out;
        out = kept;
    }
    pthread_mutex_unlock(&spare_lock);
    if (out.map)
        munmap(out.map, out.bytes);
}

void tdm__spare_maps_release(void)
{
    spare gone[TDM__SPARE_MAPS];
    pthread_mutex_lock(&spare_lock);
    for (int i = 0; i < TDM__SPARE_MAPS; i++) {
        gone[i] = spares[i];
        spares[i] = (spare){0};
    }
    pthread_mutex_unlock(&spare_lock);
    for (int i = 0; i < TDM__SPARE_MAPS; i++)
        if (gone[i].map)
            munmap(gone[i].map, gone[i].bytes);
}

/* The thread that held the lock at fork() does not exist in the child;
 * the spares are the child's own copies (private mappings). */
void tdm__spare_maps_fork_child(void)
{
    pthread_mutex_init(&spare_lock, NULL);
}
