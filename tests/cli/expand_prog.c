/* tests/cli/expand_prog.c: a small program linked to libtidemark.so for
 * cli/test_export_expandable.sh.  Under TIDEMARK_CONF (dump=...,
 * expandable_segments=1) it grows an expandable segment, frees part of it
 * and empties the cache, so that its snapshot holds segment_map and
 * segment_unmap events and a segment with a hole unmapped in it.
 * Exit status 0 on success, 2 on a failed tidemark call. */
#include <stdio.h>

#include "tidemark.h"

#define MiB ((size_t)1 << 20)

int main(void)
{
    void *a = NULL, *b = NULL, *c = NULL, *small = NULL;
    if (tdm_malloc(&a, 30 * MiB, 0, 0) != TDM_OK || tdm_malloc(&b, 25 * MiB, 0, 0) != TDM_OK ||
        tdm_malloc(&c, 30 * MiB, 0, 0) != TDM_OK || tdm_malloc(&small, 4096, 0, 0) != TDM_OK)
        return 2;
    /* b spans [30, 55) MiB: freed, page [40, 60) MiB stays (c starts at
     * 55 MiB); a freed too: pages [0, 40) MiB go at empty_cache. */
    if (tdm_free(b) != TDM_OK || tdm_free(a) != TDM_OK || tdm_empty_cache(0) != TDM_OK)
        return 2;
    if (tdm_malloc(&a, 20 * MiB, 0, 0) != TDM_OK) /* maps page [0, 20) MiB again */
        return 2;
    printf("ok\n");
    return 0;
}
