/* viewer-export/import/merge_torch_maps.c: an expandable segment's pages
 * as PyTorch books them (merge_torch.h, tdm__merge_torch_join_maps).
 *
 * PyTorch's expandable segments map a range of pages at once and book
 * one segment_map for it (one segment_unmap when they go back); the
 * driver is called once a page (cuMemMap / cuMemUnmap), and that is what
 * tidemark's hooks record.  In a merged snapshot the reserved memory is
 * tidemark's, so a run of its page events that PyTorch booked as one
 * range becomes that one event, where its first page was: the segment
 * timeline is PyTorch's, event
 * for event, and the bytes are the same.  Runs PyTorch did not book as one
 * (another program's maps, a history that missed them) stay as recorded;
 * the range must be booked about when its pages were mapped (an unmapped
 * segment is mapped again later, in other runs).
 * No state, no locks.
 */
#include "merge_torch.h"

#include <stdlib.h>

/* How far apart (in merged events) two pages of one range may be. */
#define JOIN_WINDOW 256

typedef struct booked {
    int32_t device;
    uint8_t action;
    uint64_t addr, size;
    uint64_t time_ns;
} booked;

/* PyTorch books a range once all its pages are mapped; the two sides read
 * the clock apart (the first map of a run, cold, some milliseconds). */
#define BOOKED_BEFORE_NS INT64_C(1000000)
#define BOOKED_AFTER_NS INT64_C(50000000)

static int booked_cmp(const void *pa, const void *pb)
{
    const booked *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->action != b->action)
        return a->action < b->action ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return a->time_ns < b->time_ns ? -1 : a->time_ns > b->time_ns;
}

/* Whether PyTorch booked [addr, addr+size) with this action between the
 * run's first page and a little after its last. */
static int was_booked(const booked *b, size_t nb, const tdm_event *first, uint64_t size,
                      uint64_t last_ns)
{
    uint64_t lo = first->time_ns > (uint64_t)BOOKED_BEFORE_NS ? first->time_ns - BOOKED_BEFORE_NS : 0;
    booked key = {first->device, first->action, first->addr, size, lo};
    size_t a = 0, z = nb;
    while (a < z) {
        size_t m = a + (z - a) / 2;
        if (booked_cmp(&b[m], &key) < 0)
            a = m + 1;
        else
            z = m;
    }
    return a < nb && b[a].device == key.device && b[a].action == key.action &&
           b[a].addr == key.addr && b[a].size == size && b[a].time_ns <= last_ns + BOOKED_AFTER_NS;
}

static int is_page_event(unsigned a)
{
    return a == TDM_ACTION_SEGMENT_MAP || a == TDM_ACTION_SEGMENT_UNMAP;
}

int tdm__merge_torch_join_maps(tdm_event *ev, size_t *n, const tdm_snap *torch)
{
    size_t nb = 0;
    for (size_t i = 0; i < torch->event_count; i++)
        nb += is_page_event(torch->events[i].action);
    if (!nb)
        return 0;
    booked *b = malloc(nb * sizeof *b);
    if (!b)
        return -1;
    nb = 0;
    for (size_t i = 0; i < torch->event_count; i++) {
        const tdm_event *e = &torch->events[i];
        if (is_page_event(e->action))
            b[nb++] = (booked){e->device, e->action, e->addr, e->size, e->time_ns};
    }
    qsort(b, nb, sizeof *b, booked_cmp);
    /* drop[j]: page event j is part of an earlier one's joined range. */
    uint8_t *drop = calloc(*n ? *n : 1, 1);
    if (!drop) {
        free(b);
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        tdm_event *e = &ev[i];
        if (drop[i] || !is_page_event(e->action))
            continue;
        /* The longest run of contiguous page events, one after another
         * in tidemark's order (PyTorch's tensor events and marks may fall
         * between them in the merged one: the clocks are read apart),
         * whose whole range PyTorch booked as one. */
        uint64_t size = e->size, best_size = e->size;
        size_t last = i, best_last = i;
        for (size_t j = i + 1; j < *n && j - last <= JOIN_WINDOW; j++) {
            const tdm_event *f = &ev[j];
            if (drop[j] || f->device != e->device)
                continue;
            if (!is_page_event(f->action)) {
                if (f->action == TDM_ACTION_SEGMENT_ALLOC || f->action == TDM_ACTION_SEGMENT_FREE)
                    break;
                continue;
            }
            if (f->action != e->action || f->addr != e->addr + size || f->size > UINT64_MAX - size)
                break;
            size += f->size;
            last = j;
            if (was_booked(b, nb, e, size, f->time_ns)) {
                best_size = size;
                best_last = j;
            }
        }
        if (best_last == i)
            continue;
        for (size_t j = i + 1; j <= best_last; j++)
            if (!drop[j] && ev[j].device == e->device && is_page_event(ev[j].action))
                drop[j] = 1;
        e->size = best_size;
    }
    size_t out = 0;
    for (size_t i = 0; i < *n; i++)
        if (!drop[i])
            ev[out++] = ev[i];
    free(drop);
    *n = out;
    free(b);
    return 0;
}
