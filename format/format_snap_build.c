/* format/format_snap_build.c: the growable arrays, string pool and array
 * release of snap_build.h.  No state, no locks.
 */
#include "snap_build.h"

#include <stdlib.h>
#include <string.h>

int tdm__grow_array(void *arr, size_t *cap, size_t need, size_t elem)
{
    void **p = arr;
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *g = realloc(*p, n * elem);
    if (!g)
        return -1;
    *p = g;
    *cap = n;
    return 0;
}

const char *tdm__str_pool_keep(tdm__str_pool *p, const char *s)
{
    if (tdm__grow_array(&p->items, &p->cap, p->count + 1, sizeof *p->items) != 0)
        return NULL;
    char *copy = strdup(s ? s : "");
    if (copy)
        p->items[p->count++] = copy;
    return copy;
}

void tdm__str_pool_free(tdm__str_pool *p)
{
    for (size_t i = 0; i < p->count; i++)
        free(p->items[i]);
    free(p->items);
    *p = (tdm__str_pool){0};
}

void tdm__snap_free_arrays(tdm_snap *snap)
{
    free(snap->devices);
    free((void *)snap->phase_names);
    free(snap->frames);
    free(snap->stacks);
    free(snap->events);
    free(snap->segments);
    free(snap->blocks);
    free(snap->stats);
    free(snap->imported);
    free(snap->annotations);
}
