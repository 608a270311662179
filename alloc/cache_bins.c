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
 * bin with a block large enough in a few instructions, and each bin is a
 * small treap ordered by (size, address), compared inline.  The order
 * seen through tdm__bins_find_ge / _next / _prev is exactly the tree's,
 * so every choice is the same (cache_bins' reference mode keeps the tree
 * itself, for the test that replays traces through both).
 *
 * Streams of a pool sit in an array sorted by stream id; a stream's bins
 * (40 KiB, mmap'd) are made by tdm__bins_prepare before the first block
 * of the stream can be cached, so inserting never needs memory.
 * Lock: the device's (as for everything in a cpool).
 */
#include <string.h>

#include "cache_internal.h"

#define SMALL_BINS 2048u /* sizes 512 B .. 1 MiB, one bin per 512 B */
#define SUB_BITS 6u      /* 64 bins per power of two above 1 MiB */
#define NBINS (SMALL_BINS + (64u - 20u) * (1u << SUB_BITS))
#define NWORDS ((NBINS + 63u) / 64u)
#define NSUMMARY ((NWORDS + 63u) / 64u)

struct cbin_stream {
    uint64_t stream;
    uint64_t summary[NSUMMARY]; /* bit w: bits[w] is not zero */
    uint64_t bits[NWORDS];      /* bit i: root[i] holds blocks */
    tdm__tnode *root[NBINS];
};

/* Monotonic in size: a larger size never has a lower bin. */
static inline unsigned bin_of(uint64_t size)
{
    if (size <= ((uint64_t)1 << 20))
        return size == 0 ? 0 : (unsigned)((size - 1) >> 9);
    unsigned e = 63u - (unsigned)__builtin_clzll(size);
    unsigned sub = (unsigned)(size >> (e - SUB_BITS)) & ((1u << SUB_BITS) - 1);
    return SMALL_BINS + ((e - 20u) << SUB_BITS) + sub;
}

static inline cblock *blk(tdm__tnode *n)
{
    return n ? TDM__CONTAINER_OF(n, cblock, node) : NULL;
}

/* (size, addr) order within a bin: whether key (s1, a1) is before (s2, a2). */
static inline int key_before(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2)
{
    return s1 != s2 ? s1 < s2 : a1 < a2;
}

/* Whether block x is before block y. */
static inline int before(const cblock *x, const cblock *y)
{
    return key_before(x->size, x->addr, y->size, y->addr);
}

/* ---- one bin: a treap by (size, address) ------------------------------- */

static void bin_insert(tdm__tnode **root, cblock *b)
{
    tdm__tnode *n = &b->node;
    n->prio = tdm__tree_prio(n);
    tdm__tnode **link = root;
    while (*link != NULL && (*link)->prio >= n->prio)
        link = before(b, blk(*link)) ? &(*link)->left : &(*link)->right;
    /* Split what hangs below into the nodes before b and after it. */
    tdm__tnode *t = *link, **l = &n->left, **r = &n->right;
    while (t != NULL) {
        if (before(blk(t), b)) {
            *l = t;
            l = &t->right;
            t = t->right;
        } else {
            *r = t;
            r = &t->left;
            t = t->left;
        }
    }
    *l = *r = NULL;
    *link = n;
}

static void bin_remove(tdm__tnode **root, cblock *b)
{
    tdm__tnode **link = root;
    while (*link != &b->node && *link != NULL)
        link = before(b, blk(*link)) ? &(*link)->left : &(*link)->right;
    if (*link == NULL)
        return; /* not there: a caller bug, but never corrupt the bin */
    *link = tdm__tree_join(b->node.left, b->node.right);
    b->node.left = b->node.right = NULL;
}

/* First node at or after (size, addr) (gt: strictly after). */
static cblock *bin_ge(tdm__tnode *t, uint64_t size, uint64_t addr, int gt)
{
    cblock *best = NULL;
    while (t != NULL) {
        cblock *c = blk(t);
        int after = gt ? key_before(size, addr, c->size, c->addr)
                       : !key_before(c->size, c->addr, size, addr);
        if (after) {
            best = c;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

/* Last node strictly before (size, addr). */
static cblock *bin_lt(tdm__tnode *t, uint64_t size, uint64_t addr)
{
    cblock *best = NULL;
    while (t != NULL) {
        cblock *c = blk(t);
        if (key_before(c->size, c->addr, size, addr)) {
            best = c;
            t = t->right;
        } else {
            t = t->left;
        }
    }
    return best;
}

static cblock *bin_first(tdm__tnode *t)
{
    while (t != NULL && t->left != NULL)
        t = t->left;
    return blk(t);
}

static cblock *bin_last(tdm__tnode *t)
{
    while (t != NULL && t->right != NULL)
        t = t->right;
    return blk(t);
}

/* ---- the bitmap ------------------------------------------------------------ */

static inline void mark(cbin_stream *s, unsigned i)
{
    s->bits[i / 64] |= (uint64_t)1 << (i % 64);
    s->summary[i / 4096] |= (uint64_t)1 << ((i / 64) % 64);
}

static inline void unmark(cbin_stream *s, unsigned i)
{
    s->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
    if (s->bits[i / 64] == 0)
        s->summary[i / 4096] &= ~((uint64_t)1 << ((i / 64) % 64));
}

/* The first bin >= i holding blocks; NBINS if none. */
static unsigned next_bin(const cbin_stream *s, unsigned i)
{
    if (i >= NBINS)
        return NBINS;
    unsigned w = i / 64;
    uint64_t m = s->bits[w] & (~(uint64_t)0 << (i % 64));
    if (m != 0)
        return w * 64 + (unsigned)__builtin_ctzll(m);
    for (unsigned sw = (w + 1) / 64; sw < NSUMMARY; sw++) {
        uint64_t sm = s->summary[sw];
        if (sw == (w + 1) / 64)
            sm &= (w + 1) % 64 == 0 ? ~(uint64_t)0 : ~(uint64_t)0 << ((w + 1) % 64);
        if (sm != 0) {
            unsigned ww = sw * 64 + (unsigned)__builtin_ctzll(sm);
            return ww * 64 + (unsigned)__builtin_ctzll(s->bits[ww]);
        }
    }
    return NBINS;
}

/* The last bin <= i holding blocks; NBINS if none. */
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
    return NBINS;
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

static inline cbin_stream *find_stream(cbins *bs, uint64_t stream)
{
    if (bs->last != NULL && bs->last->stream == stream)
        return bs->last;
    uint32_t i = stream_pos(bs, stream);
    if (i == bs->nstreams || bs->streams[i]->stream != stream)
        return NULL;
    bs->last = bs->streams[i];
    return bs->last;
}

/* ---- the reference: one tree of every block (the former index) --------- */

static int cmp_block(const tdm__tnode *a, const tdm__tnode *b)
{
    const cblock *x = blk((tdm__tnode *)a), *y = blk((tdm__tnode *)b);
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
    cblock *b = blk(gt ? tdm__tree_find_gt(&bs->ref, &key.node)
                       : tdm__tree_find_ge(&bs->ref, &key.node));
    return b != NULL && b->stream == stream ? b : NULL;
}

static cblock *ref_key_lt(const cbins *bs, uint64_t stream, uint64_t size, uint64_t addr)
{
    cblock key;
    key.stream = stream;
    key.size = size;
    key.addr = addr;
    cblock *b = blk(tdm__tree_find_lt(&bs->ref, &key.node));
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
    if (bs->reference || find_stream(bs, stream) != NULL)
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

void tdm__bins_insert(cbins *bs, cblock *b)
{
    bs->count++;
    if (bs->reference) {
        tdm__tree_insert(&bs->ref, &b->node);
        return;
    }
    /* tdm__bins_prepare made the stream's bins before its first block. */
    cbin_stream *s = find_stream(bs, b->stream);
    unsigned i = bin_of(b->size);
    bin_insert(&s->root[i], b);
    mark(s, i);
}

void tdm__bins_remove(cbins *bs, cblock *b)
{
    bs->count--;
    if (bs->reference) {
        tdm__tree_remove(&bs->ref, &b->node);
        return;
    }
    cbin_stream *s = find_stream(bs, b->stream);
    unsigned i = bin_of(b->size);
    bin_remove(&s->root[i], b);
    if (s->root[i] == NULL)
        unmark(s, i);
}

/* First block of the stream at or after (size, addr) (gt: after). */
static cblock *key_ge(cbins *bs, uint64_t stream, uint64_t size, uint64_t addr, int gt)
{
    if (bs->reference)
        return ref_key_ge(bs, stream, size, addr, gt);
    cbin_stream *s = find_stream(bs, stream);
    if (s == NULL)
        return NULL;
    unsigned i = bin_of(size);
    if (s->root[i] != NULL) {
        cblock *b = bin_ge(s->root[i], size, addr, gt);
        if (b != NULL)
            return b;
    }
    i = next_bin(s, i + 1);
    return i < NBINS ? bin_first(s->root[i]) : NULL;
}

/* Last block of the stream strictly before (size, addr). */
static cblock *key_lt(cbins *bs, uint64_t stream, uint64_t size, uint64_t addr)
{
    if (bs->reference)
        return ref_key_lt(bs, stream, size, addr);
    cbin_stream *s = find_stream(bs, stream);
    if (s == NULL)
        return NULL;
    unsigned i = bin_of(size);
    if (s->root[i] != NULL) {
        cblock *b = bin_lt(s->root[i], size, addr);
        if (b != NULL)
            return b;
    }
    if (i == 0)
        return NULL;
    i = prev_bin(s, i - 1);
    return i < NBINS ? bin_last(s->root[i]) : NULL;
}

cblock *tdm__bins_find_ge(cbins *bs, uint64_t stream, uint64_t size)
{
    return key_ge(bs, stream, size, 0, 0);
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
static cblock *stream_first(const cbin_stream *s)
{
    unsigned i = next_bin(s, 0);
    return i < NBINS ? bin_first(s->root[i]) : NULL;
}

cblock *tdm__bins_first(cbins *bs)
{
    if (bs->reference)
        return blk(tdm__tree_first(&bs->ref));
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
        return blk(tdm__tree_find_gt(&bs->ref, &b->node));
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
