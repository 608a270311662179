/* alloc/cache_bins.c: a pool's cached blocks, indexed for best fit.
 *
 * PyTorch's best fit is the smallest cached block of the stream at least
 * as large as the request, the lowest address among equals: the first
 * block at or after (stream, size, 0) in (stream, size, address) order.
 * One ordered tree of all of them made every hit a descent through a
 * pool's whole cache with a comparison call per level.  Here each stream
 * of a pool has size bins: one per 512-byte size up to 1 MiB (a small
 * pool's bins each hold one size), then 64 per power of two; a bitmap of
 * the bins that hold blocks (with a summary word over it) finds the first
 * bin with a block large enough in a few instructions.  A bin of up to
 * TDM__BIN_LIST_MAX blocks is a list in (size, address) order, but for
 * blocks set aside until the bin's next search (most bins hold one block
 * or none); a fuller one is a treap in that order until it empties
 * (cache_bins.h says why).  The order
 * seen through tdm__bins_find_ge / _next / _prev is exactly the tree's,
 * so every choice is the same (cache_bins' reference mode keeps the tree
 * itself, for the test that replays traces through both).
 *
 * Streams of a pool sit in an array sorted by stream id; a stream's bins
 * (81 KiB, mmap'd) are made by tdm__bins_prepare before the first block
 * of the stream can be cached, so inserting never needs memory.
 * Lock: the device's (as for everything in a cpool).
 */
#include <string.h>

#include "cache_internal.h"

/* The last bin <= i holding blocks; TDM__BINS_N if none. */
static unsigned prev_bin(const cbin_stream *s, unsigned i)
{
    for (unsigned j = i + 1; j-- > 0;) {
        uint64_t m = s->bits[j / 64];
        if (j % 64 != 63)
            m &= ((uint64_t)1 << (j % 64 + 1)) - 1;
        if (m != 0)
            return (j / 64) * 64 + 63u - (unsigned)__builtin_clzll(m);
        j -= j % 64; /* on to the word before */
    }
    return TDM__BINS_N;
}

/* ---- one bin, the way back (cache_bins.h has the rest) ---------------- */

_Atomic uint64_t tdm__bins_trees_made;

void tdm__bin_to_tree(cbin_stream *s, unsigned i)
{
    atomic_fetch_add_explicit(&tdm__bins_trees_made, 1, memory_order_relaxed);
    tdm__tnode *lists[2] = {s->root[i], s->aside[i]};
    s->root[i] = s->aside[i] = NULL;
    for (int k = 0; k < 2; k++) {
        for (tdm__tnode *t = lists[k]; t != NULL;) {
            tdm__tnode *next = t->right;
            t->left = t->right = NULL;
            tdm__bin_insert(&s->root[i], tdm__bin_blk(t));
            t = next;
        }
    }
    s->len[i] = TDM__BIN_TREE;
}

void tdm__bin_order(cbin_stream *s, unsigned i)
{
    s->len[i] = (uint8_t)(s->len[i] & TDM__BIN_COUNT);
    tdm__tnode *t = s->aside[i];
    s->aside[i] = NULL;
    while (t != NULL) {
        tdm__tnode *next = t->right;
        cblock *b = tdm__bin_blk(t);
        tdm__tnode **at = &s->root[i];
        while (tdm__binl_after(at, b))
            at = &(*at)->right;
        tdm__binl_link(s, at, b);
        t = next;
    }
}

/* The walks below (next, previous, first, last: releases, the checker,
 * the snapshot) leave the bins as they are, blocks set aside included,
 * so that looking never changes what later calls do. */

/* The first block at or after (size, addr) (gt: after) of a list in any
 * order (a bin's blocks set aside). */
static cblock *binl_ge_any(tdm__tnode *t, uint64_t size, uint64_t addr, int gt)
{
    cblock *best = NULL;
    for (; t != NULL; t = t->right) {
        cblock *c = tdm__bin_blk(t);
        if (tdm__bin_at_or_after(c, size, addr, gt) &&
            (best == NULL || tdm__bin_before(c, best)))
            best = c;
    }
    return best;
}

/* The last block strictly before (size, addr) of a list in any order. */
static cblock *binl_lt_any(tdm__tnode *t, uint64_t size, uint64_t addr)
{
    cblock *best = NULL;
    for (; t != NULL; t = t->right) {
        cblock *c = tdm__bin_blk(t);
        if (tdm__bin_key_before(c->size, c->addr, size, addr) &&
            (best == NULL || tdm__bin_before(best, c)))
            best = c;
    }
    return best;
}

/* A treap's last node strictly before (size, addr). */
static cblock *bint_lt(tdm__tnode *t, uint64_t size, uint64_t addr)
{
    cblock *best = NULL;
    while (t != NULL) {
        cblock *c = tdm__bin_blk(t);
        if (tdm__bin_key_before(c->size, c->addr, size, addr)) {
            best = c;
            t = t->right;
        } else {
            t = t->left;
        }
    }
    return best;
}

/* The earlier, or the later, of two blocks (either may be NULL: the
 * other). */
static cblock *earlier(cblock *a, cblock *b)
{
    return a == NULL || (b != NULL && tdm__bin_before(b, a)) ? b : a;
}

static cblock *later(cblock *a, cblock *b)
{
    return a == NULL || (b != NULL && tdm__bin_before(a, b)) ? b : a;
}

/* Bin i's first block at or after (size, addr) (gt: after). */
static cblock *bin_ge(const cbin_stream *s, unsigned i, uint64_t size, uint64_t addr, int gt)
{
    if (s->len[i] == TDM__BIN_TREE)
        return tdm__bin_ge(s->root[i], size, addr, gt);
    return earlier(tdm__binl_ge(s->root[i], size, addr, gt),
                   binl_ge_any(s->aside[i], size, addr, gt));
}

/* Bin i's last block strictly before (size, addr). */
static cblock *bin_lt(const cbin_stream *s, unsigned i, uint64_t size, uint64_t addr)
{
    if (s->len[i] == TDM__BIN_TREE)
        return bint_lt(s->root[i], size, addr);
    return later(binl_lt_any(s->root[i], size, addr), binl_lt_any(s->aside[i], size, addr));
}

/* ---- streams ----------------------------------------------------------------- */

/* The index of the first stream entry >= stream. */
static uint32_t stream_pos(const cbins *bs, uint64_t stream)
{
    uint32_t lo = 0, hi = bs->nstreams;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (bs->streams[mid]->stream < stream)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

cbin_stream *tdm__bins_stream_slow(cbins *bs, uint64_t stream)
{
    uint32_t i = stream_pos(bs, stream);
    if (i == bs->nstreams || bs->streams[i]->stream != stream)
        return NULL;
    bs->last = bs->streams[i];
    return bs->last;
}

/* ---- the reference: one tree of every block (the former index) --------- */

static int cmp_block(const tdm__tnode *a, const tdm__tnode *b)
{
    const cblock *x = tdm__bin_blk((tdm__tnode *)a), *y = tdm__bin_blk((tdm__tnode *)b);
    uint64_t xs = tdm__cblock_stream(x), ys = tdm__cblock_stream(y);
    if (xs != ys)
        return xs < ys ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static cblock *ref_key_ge(const cbins *bs, uint64_t stream, uint64_t size, uint64_t addr, int gt)
{
    cseg key_seg = {.stream = stream};
    cblock key = {.seg = &key_seg, .size = size, .addr = addr};
    cblock *b = tdm__bin_blk(gt ? tdm__tree_find_gt(&bs->ref, &key.node)
                       : tdm__tree_find_ge(&bs->ref, &key.node));
    return b != NULL && tdm__cblock_stream(b) == stream ? b : NULL;
}

static cblock *ref_key_lt(const cbins *bs, uint64_t stream, uint64_t size, uint64_t addr)
{
    cseg key_seg = {.stream = stream};
    cblock key = {.seg = &key_seg, .size = size, .addr = addr};
    cblock *b = tdm__bin_blk(tdm__tree_find_lt(&bs->ref, &key.node));
    return b != NULL && tdm__cblock_stream(b) == stream ? b : NULL;
}

/* ---- the pool's index -------------------------------------------------------- */

void tdm__bins_init(cbins *bs, int reference)
{
    memset(bs, 0, sizeof *bs);
    bs->reference = reference;
    tdm__tree_init(&bs->ref, cmp_block);
}

void tdm__bins_destroy(cbins *bs)
{
    for (uint32_t i = 0; i < bs->nstreams; i++)
        tdm__meta_unmap(bs->streams[i], sizeof(cbin_stream));
    if (bs->streams != NULL)
        tdm__meta_unmap(bs->streams, sizeof(cbin_stream *) * bs->cap);
    tdm__bins_init(bs, bs->reference);
}

int tdm__bins_prepare(cbins *bs, uint64_t stream)
{
    if (bs->reference || tdm__bins_stream(bs, stream) != NULL)
        return 1;
    if (bs->nstreams == bs->cap) {
        uint32_t cap = bs->cap ? bs->cap * 2 : 16;
        cbin_stream **a = tdm__meta_map(sizeof *a * cap);
        if (a == NULL)
            return 0;
        if (bs->streams != NULL) {
            memcpy(a, bs->streams, sizeof *a * bs->nstreams);
            tdm__meta_unmap(bs->streams, sizeof *a * bs->cap);
        }
        bs->streams = a;
        bs->cap = cap;
    }
    cbin_stream *s = tdm__meta_map(sizeof *s); /* zeroed: no bins used */
    if (s == NULL)
        return 0;
    s->stream = stream;
    uint32_t i = stream_pos(bs, stream);
    memmove(&bs->streams[i + 1], &bs->streams[i], sizeof s * (bs->nstreams - i));
    bs->streams[i] = s;
    bs->nstreams++;
    bs->last = s;
    return 1;
}

void tdm__bins_ref_insert(cbins *bs, cblock *b)
{
    tdm__tree_insert(&bs->ref, &b->node);
}

void tdm__bins_ref_remove(cbins *bs, cblock *b)
{
    tdm__tree_remove(&bs->ref, &b->node);
}

cblock *tdm__bins_ref_find_ge(cbins *bs, uint64_t stream, uint64_t size)
{
    return ref_key_ge(bs, stream, size, 0, 0);
}

static cblock *key_ge(cbins *bs, uint64_t stream, uint64_t size, uint64_t addr, int gt)
{
    if (bs->reference)
        return ref_key_ge(bs, stream, size, addr, gt);
    cbin_stream *s = tdm__bins_stream(bs, stream);
    if (s == NULL)
        return NULL;
    unsigned i = tdm__bin_of(size);
    cblock *b = bin_ge(s, i, size, addr, gt);
    if (b != NULL)
        return b;
    i = tdm__bin_next_used(s, i + 1);
    return i < TDM__BINS_N ? bin_ge(s, i, 0, 0, 0) : NULL;
}

/* Last block of the stream strictly before (size, addr). */
static cblock *key_lt(cbins *bs, uint64_t stream, uint64_t size, uint64_t addr)
{
    if (bs->reference)
        return ref_key_lt(bs, stream, size, addr);
    cbin_stream *s = tdm__bins_stream(bs, stream);
    if (s == NULL)
        return NULL;
    unsigned i = tdm__bin_of(size);
    cblock *b = bin_lt(s, i, size, addr);
    if (b != NULL)
        return b;
    if (i == 0)
        return NULL;
    i = prev_bin(s, i - 1);
    return i < TDM__BINS_N ? bin_lt(s, i, UINT64_MAX, UINT64_MAX) : NULL;
}

cblock *tdm__bins_find_lt(cbins *bs, uint64_t stream, uint64_t size)
{
    return key_lt(bs, stream, size, 0);
}

cblock *tdm__bins_next_in_stream(cbins *bs, const cblock *b)
{
    return key_ge(bs, tdm__cblock_stream(b), b->size, b->addr, 1);
}

cblock *tdm__bins_prev_in_stream(cbins *bs, const cblock *b)
{
    return key_lt(bs, tdm__cblock_stream(b), b->size, b->addr);
}

/* The stream's first block (NULL: none cached). */
static cblock *stream_first(cbin_stream *s)
{
    unsigned i = tdm__bin_next_used(s, 0);
    return i < TDM__BINS_N ? bin_ge(s, i, 0, 0, 0) : NULL;
}

cblock *tdm__bins_first(cbins *bs)
{
    if (bs->reference)
        return tdm__bin_blk(tdm__tree_first(&bs->ref));
    for (uint32_t i = 0; i < bs->nstreams; i++) {
        cblock *b = stream_first(bs->streams[i]);
        if (b != NULL)
            return b;
    }
    return NULL;
}

cblock *tdm__bins_next(cbins *bs, const cblock *b)
{
    if (bs->reference)
        return tdm__bin_blk(tdm__tree_find_gt(&bs->ref, &b->node));
    cblock *n = tdm__bins_next_in_stream(bs, b);
    if (n != NULL)
        return n;
    for (uint32_t i = stream_pos(bs, tdm__cblock_stream(b)) + 1; i < bs->nstreams; i++)
        if ((n = stream_first(bs->streams[i])) != NULL)
            return n;
    return NULL;
}

int tdm__bins_holds(cbins *bs, const cblock *b)
{
    return key_ge(bs, tdm__cblock_stream(b), b->size, b->addr, 0) == b;
}

/* Whether the 64 bins of bitmap word w, none of them marked as holding
 * blocks, are empty as the per-bin check below wants them (no root, no
 * blocks set aside, a length of 0 with at most the aside flag): one
 * branch-free pass, since tdm__alloc_check runs this after every call in
 * the tests and nearly every word is empty. */
static int unused_word_empty(const cbin_stream *s, unsigned w)
{
    unsigned lo = w * 64, hi = lo + 64 < TDM__BINS_N ? lo + 64 : TDM__BINS_N;
    uintptr_t held = 0;
    unsigned stray = 0;
    for (unsigned i = lo; i < hi; i++) {
        held |= (uintptr_t)s->root[i] | (uintptr_t)s->aside[i];
        stray |= s->len[i] & ~TDM__BIN_ASIDE;
    }
    return held == 0 && stray == 0;
}

int tdm__bins_shape_ok(const cbins *bs, unsigned *bad)
{
    for (uint32_t k = 0; k < bs->nstreams; k++) {
        const cbin_stream *s = bs->streams[k];
        for (unsigned i = 0; i < TDM__BINS_N; i++) {
            if (i % 64 == 0 && s->bits[i / 64] == 0 && unused_word_empty(s, i / 64)) {
                i += 63; /* (the loop's i++ moves to the next word) */
                continue;
            }
            *bad = i;
            int used = (s->bits[i / 64] >> (i % 64)) & 1;
            int listed = (s->summary[i / 4096] >> ((i / 64) % 64)) & 1;
            int holds = s->root[i] != NULL || s->aside[i] != NULL;
            if (used != holds || (used && !listed))
                return 0;
            if (s->len[i] == TDM__BIN_TREE) {
                if (s->root[i] == NULL || s->aside[i] != NULL)
                    return 0;
                continue;
            }
            /* A bin holds its size class (a small bin one size: its best
             * fit is its first block), and a list is in (size, address)
             * order but for the blocks set aside. */
            unsigned n = 0;
            const tdm__tnode *lists[2] = {s->root[i], s->aside[i]};
            for (int l = 0; l < 2; l++) {
                const cblock *before = NULL;
                for (const tdm__tnode *t = lists[l]; t != NULL && n <= TDM__BIN_LIST_MAX; t = t->right) {
                    const cblock *c = tdm__bin_blk((tdm__tnode *)t);
                    if (tdm__bin_of(c->size) != i || t->left != NULL)
                        return 0;
                    if (l == 0 && before != NULL && !tdm__bin_before(before, c))
                        return 0;
                    before = c;
                    n++;
                }
            }
            if (n != (s->len[i] & TDM__BIN_COUNT) || n > TDM__BIN_LIST_MAX ||
                (s->len[i] & ~(TDM__BIN_COUNT | TDM__BIN_ASIDE)) != 0 ||
                (s->aside[i] != NULL && !(s->len[i] & TDM__BIN_ASIDE)))
                return 0;
        }
    }
    return 1;
}
