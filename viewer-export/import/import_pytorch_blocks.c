/* viewer-export/import/import_pytorch_blocks.c: the block each tensor of a
 * PyTorch history was given (import_pytorch_blocks.h says why).
 *
 * The caching allocator hands a tensor the start of a free block and keeps
 * the block whole unless what is left is worth a block of its own
 * (CUDACachingAllocator.cpp, should_split: in the small pool and in
 * expandable segments a remainder of 512 B or more; in the large pool one
 * above 1 MiB, for requests under max_split_size).  A block is free from
 * its start to the next block still held (freed blocks merge with their
 * free neighbours) or to the end of its segment, so the history itself
 * says how big the free block was: segment events give the segments
 * (segment_map ranges of one expandable segment join), alloc and
 * free_completed the blocks held.  Addresses no segment event covers (a
 * history that started late) get the request rounded as the allocator
 * rounds it.  Kept in sorted arrays: a few thousand live blocks at most,
 * so the moves of an insertion cost less than a tree's allocations.  No
 * state, no locks.
 */
#include "import_pytorch_blocks.h"

#include <stdlib.h>
#include <string.h>

#define MIN_BLOCK UINT64_C(512)       /* kMinBlockSize */
#define SMALL_SIZE UINT64_C(1048576)  /* kSmallSize: the small pool's largest */

typedef struct held {
    uint64_t addr, size;
} held;

typedef struct region {
    uint64_t lo, hi;
    int mapped; /* from segment_map: joins the ranges next to it */
} region;

typedef struct layout {
    held *h;
    size_t nh, caph;
    region *r;
    size_t nr, capr;
} layout;

static int grow(void **v, size_t *cap, size_t need, size_t each)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *g = realloc(*v, cap2 * each);
    if (!g)
        return -1;
    *v = g;
    *cap = cap2;
    return 0;
}

/* First held block with addr >= a. */
static size_t held_lower(const layout *l, uint64_t a)
{
    size_t lo = 0, hi = l->nh;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (l->h[m].addr < a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* First region with lo > a. */
static size_t region_upper(const layout *l, uint64_t a)
{
    size_t lo = 0, hi = l->nr;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (l->r[m].lo <= a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static int region_add(layout *l, uint64_t lo, uint64_t size, int mapped)
{
    if (!size || size > UINT64_MAX - lo)
        return 0;
    uint64_t hi = lo + size;
    size_t k = region_upper(l, lo);
    /* A map range joins the map ranges it touches. */
    if (mapped && k > 0 && l->r[k - 1].mapped && l->r[k - 1].hi == lo) {
        l->r[k - 1].hi = hi;
        if (k < l->nr && l->r[k].mapped && l->r[k].lo == hi) {
            l->r[k - 1].hi = l->r[k].hi;
            memmove(&l->r[k], &l->r[k + 1], (l->nr - k - 1) * sizeof *l->r);
            l->nr--;
        }
        return 0;
    }
    if (mapped && k < l->nr && l->r[k].mapped && l->r[k].lo == hi) {
        l->r[k].lo = lo;
        return 0;
    }
    if (grow((void **)&l->r, &l->capr, l->nr + 1, sizeof *l->r) != 0)
        return -1;
    memmove(&l->r[k + 1], &l->r[k], (l->nr - k) * sizeof *l->r);
    l->r[k] = (region){lo, hi, mapped};
    l->nr++;
    return 0;
}

/* Takes [lo, lo+size) out of the regions (a segment freed, a range
 * unmapped), splitting a region it falls inside. */
static int region_remove(layout *l, uint64_t lo, uint64_t size)
{
    if (!size || size > UINT64_MAX - lo)
        return 0;
    uint64_t hi = lo + size;
    size_t k = region_upper(l, lo);
    if (k > 0 && l->r[k - 1].hi > lo)
        k--;
    while (k < l->nr && l->r[k].lo < hi) {
        region *g = &l->r[k];
        if (g->lo < lo && g->hi > hi) { /* inside: two pieces */
            if (grow((void **)&l->r, &l->capr, l->nr + 1, sizeof *l->r) != 0)
                return -1;
            g = &l->r[k];
            memmove(&l->r[k + 2], &l->r[k + 1], (l->nr - k - 1) * sizeof *l->r);
            l->r[k + 1] = (region){hi, g->hi, g->mapped};
            g->hi = lo;
            l->nr++;
            return 0;
        }
        if (g->lo < lo) {
            g->hi = lo;
            k++;
        } else if (g->hi > hi) {
            g->lo = hi;
            k++;
        } else {
            memmove(&l->r[k], &l->r[k + 1], (l->nr - k - 1) * sizeof *l->r);
            l->nr--;
        }
    }
    return 0;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return v > UINT64_MAX - (to - 1) ? v : (v + to - 1) / to * to;
}

static unsigned log2_floor(uint64_t v)
{
    unsigned n = 0;
    while (v >>= 1)
        n++;
    return n;
}

/* CUDACachingAllocator's round_size: 512 B steps, or with
 * roundup_power2_divisions the next of N equal steps between two powers
 * of two. */
uint64_t tdm__pt_round_size(const tdm_pt_alloc_rules *rules, uint64_t size)
{
    if (size < MIN_BLOCK)
        return MIN_BLOCK;
    unsigned log = log2_floor(size);
    unsigned index = log > 20 ? log - 20 : 0; /* intervals from 1 MiB */
    if (index >= TDM_PT_DIVISION_INTERVALS)
        index = TDM_PT_DIVISION_INTERVALS - 1;
    uint64_t div = rules ? rules->divisions[index] : 0;
    if (div > 1 && size > MIN_BLOCK * div) {
        if ((size & (size - 1)) == 0)
            return size;
        uint64_t floor2 = UINT64_C(1) << log;
        uint64_t step = floor2 >> log2_floor(div);
        if (step == 0)
            return floor2 << 1;
        uint64_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return round_up(size, MIN_BLOCK);
}

static int keeps_whole(const tdm_pt_alloc_rules *rules, uint64_t rounded, uint64_t free_size)
{
    uint64_t left = free_size - rounded;
    if (rounded <= SMALL_SIZE || rules->expandable)
        return left < MIN_BLOCK;
    return !(rounded < rules->max_split_size && left > SMALL_SIZE);
}

static int on_alloc(layout *l, const tdm_pt_alloc_rules *rules, tdm_event *e)
{
    uint64_t rounded = tdm__pt_round_size(rules, e->requested);
    uint64_t size = rounded;
    size_t k = region_upper(l, e->addr);
    size_t at = held_lower(l, e->addr);
    int taken = at < l->nh && l->h[at].addr == e->addr;
    if (!taken && k > 0 && e->addr < l->r[k - 1].hi) {
        uint64_t end = l->r[k - 1].hi;
        if (at < l->nh && l->h[at].addr < end)
            end = l->h[at].addr;
        uint64_t free_size = end - e->addr;
        if (free_size >= rounded && keeps_whole(rules, rounded, free_size))
            size = free_size;
    }
    e->size = size;
    if (taken) { /* held again before its free: the newer one counts */
        l->h[at].size = size;
        return 0;
    }
    if (grow((void **)&l->h, &l->caph, l->nh + 1, sizeof *l->h) != 0)
        return -1;
    memmove(&l->h[at + 1], &l->h[at], (l->nh - at) * sizeof *l->h);
    l->h[at] = (held){e->addr, size};
    l->nh++;
    return 0;
}

static void on_free(layout *l, const tdm_pt_alloc_rules *rules, tdm_event *e, int completed)
{
    size_t at = held_lower(l, e->addr);
    if (at < l->nh && l->h[at].addr == e->addr) {
        e->size = l->h[at].size;
        if (completed) {
            memmove(&l->h[at], &l->h[at + 1], (l->nh - at - 1) * sizeof *l->h);
            l->nh--;
        }
    } else {
        e->size = tdm__pt_round_size(rules, e->requested); /* allocated before the history */
    }
}

int tdm__pt_block_sizes(tdm_event *events, size_t n, const tdm_pt_alloc_rules *rules)
{
    layout l;
    memset(&l, 0, sizeof l);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        tdm_event *e = &events[i];
        switch (e->action) {
        case TDM_ACTION_SEGMENT_ALLOC:
            rc = region_add(&l, e->addr, e->size, 0);
            break;
        case TDM_ACTION_SEGMENT_MAP:
            rc = region_add(&l, e->addr, e->size, 1);
            break;
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_UNMAP:
            rc = region_remove(&l, e->addr, e->size);
            break;
        case TDM_ACTION_ALLOC:
            rc = on_alloc(&l, rules, e);
            break;
        case TDM_ACTION_FREE_REQUESTED:
            on_free(&l, rules, e, 0);
            break;
        case TDM_ACTION_FREE_COMPLETED:
            on_free(&l, rules, e, 1);
            break;
        default:
            break;
        }
    }
    free(l.h);
    free(l.r);
    return rc;
}
