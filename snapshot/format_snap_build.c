/* snapshot/format_snap_build.c: the string pool and array release of
 * snap_build.h.  No state, no locks.
 */
#include "snap_build.h"

#include <stdlib.h>
#include <string.h>

const char *tdm__str_pool_keep(tdm__str_pool *p, const char *s)
{
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        char **items = realloc(p->items, cap * sizeof *items);
        if (!items)
            return NULL;
        p->items = items;
        p->cap = cap;
    }
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
}
