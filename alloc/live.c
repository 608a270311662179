/* alloc/live.c: a pointer map's live records copied out for the dump, in
 * the modes where each allocation is its own segment (pass-through,
 * observe).
 *
 * The copy is taken one shard lock at a time and the visitor is then
 * called with no allocator lock held.  Host memory for the copy comes
 * from mmap (meta.h), never from the program's malloc.  No state, no
 * locks of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"
#include "meta.h"

typedef struct collect_ctx {
    tdm__live_list *l;
    int is_map;
} collect_ctx;

static void collect(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    collect_ctx *c = ctx;
    tdm__live_list *l = c->l;
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 1024;
        tdm__live *n = tdm__meta_map(ncap * sizeof *n);
        if (n == NULL)
            return; /* out of host memory: the dump lists what fitted */
        if (l->items) {
            memcpy(n, l->items, l->n * sizeof *n);
            tdm__meta_unmap(l->items, l->cap * sizeof *n);
        }
        l->items = n;
        l->cap = ncap;
    }
    l->items[l->n] = (tdm__live){.addr = key, .rec = *rec, .is_map = c->is_map};
    l->n++;
}

void tdm__live_collect(tdm__live_list *l, tdm__ptrmap *m, int is_map)
{
    collect_ctx c = {l, is_map};
    tdm__ptrmap_each(m, collect, &c);
}

static int by_device_addr(const void *a, const void *b)
{
    const tdm__live *x = a, *y = b;
    if (x->rec.device != y->rec.device)
        return x->rec.device < y->rec.device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void tdm__live_sort(tdm__live_list *l)
{
    if (l->n > 1)
        qsort(l->items, l->n, sizeof *l->items, by_device_addr);
}

void tdm__live_visit(const tdm__state_visitor *v, const tdm__live *l)
{
    if (!v->segment)
        return;
    tdm_snap_segment seg = {
        .device = l->rec.device, .pool = TDM_POOL_NONE,
        .is_expandable = (uint8_t)l->is_map, .address = l->addr,
        .total_size = l->rec.size, .stream = l->rec.stream,
        .stack_id = l->rec.stack_id,
    };
    /* A mapping is reserved, not allocated: one inactive block. */
    tdm_snap_block blk = {
        .address = l->addr, .size = l->rec.size,
        .requested_size = l->is_map ? 0 : l->rec.requested,
        .alloc_time_ns = l->is_map ? 0 : l->rec.alloc_time_ns,
        .stack_id = l->rec.stack_id,
        .state = l->is_map ? TDM_BLOCK_INACTIVE : TDM_BLOCK_ACTIVE_ALLOCATED,
        .category = l->rec.category,
    };
    v->segment(v->ctx, &seg, &blk, 1);
}

void tdm__live_free(tdm__live_list *l)
{
    if (l->items)
        tdm__meta_unmap(l->items, l->cap * sizeof *l->items);
    *l = (tdm__live_list){0};
}
