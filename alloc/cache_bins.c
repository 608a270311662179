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
 * TDM__BIN_LIST_MAX blocks is an unordered list, searched whole (most
 * bins hold one block or none); a fuller one is a treap ordered by (size,
 * address) until it empties (cache_bins.h says why).  The order
 * seen through tdm__bins_find_ge / _next / _prev is exactly the tree's,
 * so every choice is the same (cache_bins' reference mode keeps the tree
 * itself, for the test that replays traces through both).
 *
 * Streams of a pool sit in an array sorted by stream id; a stream's bins
 * (45 KiB, mmap'd) are made by tdm__bins_prepare before the first block
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
    tdm__tnode *t = s->root[i];
    s->root[i] = NULL;
    while (t != NULL) {
        tdm__tnode *next = t->right;
        t->left = t->right = NULL;
        tdm__bin_insert(&s->root[i], tdm__bin_blk(t));
        t = next;
    }
    s->len[i] = TDM__BIN_TREE;
}

/* A list's last block strictly before (size, addr). */
static cblock *binl_lt(tdm__tnode *t, uint64_t size, uint64_t addr)
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

/* Bin i's last block strictly before (size, addr). */
static cblock *bin_lt(const cbin_stream *s, unsigned i, uint64_t size, uint64_t addr)
{
    return s->len[i] != TDM__BIN_TREE ? binl_lt(s->root[i], size, addr)
                                      : bint_lt(s->root[i], size, addr);
}

/* Bin i's last block. */
static cblock *bin_last(const cbin_stream *s, unsigned i)
{
    if (s->len[i] != TDM__BIN_TREE)
        return binl_lt(s->root[i], UINT64_MAX, UINT64_MAX);
    tdm__tnode *t = s->root[i];
    while (t != NULL && t->right != NULL)
        t = t->right;
    return tdm__bin_blk(t);
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
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static cblock *ref_key_ge(const cbins *bs, uint64_t stream, uint64_t size, uint64_t addr, int gt)
{
    cblock key;
    key.stream = stream;
    key.size = size;
    key.addr = addr;
    cblock *b = tdm__bin_blk(gt ? tdm__tree_find_gt(&bs->ref, &key.node)
                       : tdm__tree_find_ge(&bs->ref, &key.node));
    return b != NULL && b->stream == stream ? b : NULL;
}

static cblock *ref_key_lt(const cbins *bs, uint64_t stream, uint64_t size, uint64_t addr)
{
    cblock key;
    key.stream = stream;
    key.size = size;
    key.addr = addr;
    cblock *b = tdm__bin_blk(tdm__tree_find_lt(&bs->ref, &key.node));
    return b != NULL && b->stream == stream ? b : NULL;
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
    return tdm__bins_key_ge(bs, stream, size, addr, gt);
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
    if (s->root[i] != NULL) {
        cblock *b = bin_lt(s, i, size, addr);
        if (b != NULL)
            return b;
    }
    if (i == 0)
        return NULL;
    i = prev_bin(s, i - 1);
    return i < TDM__BINS_N ? bin_last(s, i) : NULL;
}

cblock *tdm__bins_find_lt(cbins *bs, uint64_t stream, uint64_t size)
{
    return key_lt(bs, stream, size, 0);
}

cblock *tdm__bins_next_in_stream(cbins *bs, const cblock *b)
{
    return key_ge(bs, b->stream, b->size, b->addr, 1);
}

cblock *tdm__bins_prev_in_stream(cbins *bs, const cblock *b)
{
    return key_lt(bs, b->stream, b->size, b->addr);
}

/* The stream's first block (NULL: none cached). */
static cblock *stream_first(cbin_stream *s)
{
    unsigned i = tdm__bin_next_used(s, 0);
    return i < TDM__BINS_N ? tdm__bin_min(s, i) : NULL;
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
    for (uint32_t i = stream_pos(bs, b->stream) + 1; i < bs->nstreams; i++)
        if ((n = stream_first(bs->streams[i])) != NULL)
            return n;
    return NULL;
}

int tdm__bins_holds(cbins *bs, const cblock *b)
{
    return key_ge(bs, b->stream, b->size, b->addr, 0) == b;
}

int tdm__bins_shape_ok(const cbins *bs, unsigned *bad)
{
    for (uint32_t k = 0; k < bs->nstreams; k++) {
        const cbin_stream *s = bs->streams[k];
        for (unsigned i = 0; i < TDM__BINS_N; i++) {
            *bad = i;
            int used = (s->bits[i / 64] >> (i % 64)) & 1;
            int listed = (s->summary[i / 4096] >> ((i / 64) % 64)) & 1;
            if (used != (s->root[i] != NULL) || (used && !listed))
                return 0;
            if (s->len[i] == TDM__BIN_TREE) {
                if (s->root[i] == NULL)
                    return 0;
                continue;
            }
            unsigned n = 0;
            for (const tdm__tnode *t = s->root[i]; t != NULL && n <= TDM__BIN_LIST_MAX; t = t->right) {
                /* A small bin holds one size: its best fit is its lowest
                 * address (tdm__binl_lowest). */
                const cblock *c = tdm__bin_blk((tdm__tnode *)t);
                if (i < TDM__BINS_SMALL && c->size != (uint64_t)(i + 1) * TDM__MIN_BLOCK)
                    return 0;
                n++;
            }
            if (n != s->len[i] || n > TDM__BIN_LIST_MAX)
                return 0;
        }
    }
    return 1;
}
