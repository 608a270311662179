/* alloc/cache_bins.h: the hot half of a pool's bins (cache_bins.c has
 * the rest and says how they work): insert, remove and best fit, inline,
 * since a pair of allocator calls makes about four of them and the calls
 * cost as much as a small bin's work.  Included by cache_internal.h.
 */
#ifndef TDM_ALLOC_CACHE_BINS_H
#define TDM_ALLOC_CACHE_BINS_H

#define TDM__BINS_SMALL 2048u /* sizes 512 B .. 1 MiB, one bin per 512 B */
#define TDM__BINS_SUB_BITS 6u /* 64 bins per power of two above 1 MiB */
#define TDM__BINS_N (TDM__BINS_SMALL + (64u - 20u) * (1u << TDM__BINS_SUB_BITS))
_Static_assert(TDM__BINS_N <= 65536, "a block keeps its bin in 16 bits");
#define TDM__BINS_WORDS ((TDM__BINS_N + 63u) / 64u)
#define TDM__BINS_SUMMARY ((TDM__BINS_WORDS + 63u) / 64u)

/* A bin holds up to this many blocks as a list, more as a treap. */
#define TDM__BIN_LIST_MAX 32u
/* len[i]: a list's blocks (the low six bits, both lists), with
 * TDM__BIN_ASIDE while `aside` may hold some; or TDM__BIN_TREE for a
 * treap. */
#define TDM__BIN_COUNT 0x3fu
#define TDM__BIN_ASIDE 0x40u
#define TDM__BIN_TREE 0xffu
/* An insert walks past at most this many blocks of a list. */
#define TDM__BIN_WALK_MAX 2u

struct cbin_stream {
    uint64_t stream;
    uint64_t summary[TDM__BINS_SUMMARY]; /* bit w clear: bits[w] is zero */
    uint64_t bits[TDM__BINS_WORDS];      /* bit i: bin i holds blocks */
    tdm__tnode *root[TDM__BINS_N];
    tdm__tnode *aside[TDM__BINS_N];      /* a list's blocks not yet in order */
    uint8_t len[TDM__BINS_N];            /* see TDM__BIN_COUNT */
    tdm__tnode **scratch;                /* written instead of a missing
                                            neighbour's slot (lists) */
};

/* Monotonic in size: a larger size never has a lower bin. */
static inline unsigned tdm__bin_of(uint64_t size)
{
    if (__builtin_expect(size <= ((uint64_t)1 << 20), 1)) /* most requests are */
        return (unsigned)((size - (size != 0)) >> 9); /* (no branch on size 0) */
    unsigned e = 63u - (unsigned)__builtin_clzll(size);
    unsigned sub = (unsigned)(size >> (e - TDM__BINS_SUB_BITS)) & ((1u << TDM__BINS_SUB_BITS) - 1);
    return TDM__BINS_SMALL + ((e - 20u) << TDM__BINS_SUB_BITS) + sub;
}

static inline cblock *tdm__bin_blk(tdm__tnode *n)
{
    return n ? TDM__CONTAINER_OF(n, cblock, node) : NULL;
}

/* (size, addr) order within a bin: whether key (s1, a1) is before (s2, a2).
 * In bit operations: no branch of its own on whether the sizes differ. */
static inline int tdm__bin_key_before(uint64_t s1, uint64_t a1, uint64_t s2, uint64_t a2)
{
    return (s1 < s2) | ((s1 == s2) & (a1 < a2));
}

/* Whether block c's key is at or after (size, addr) (gt: strictly after):
 * the test of every search for the first such block. */
static inline int tdm__bin_at_or_after(const cblock *c, uint64_t size, uint64_t addr, int gt)
{
    return gt ? tdm__bin_key_before(size, addr, c->size, c->addr)
              : !tdm__bin_key_before(c->size, c->addr, size, addr);
}

/* Whether block x is before block y. */
static inline int tdm__bin_before(const cblock *x, const cblock *y)
{
    return tdm__bin_key_before(x->size, x->addr, y->size, y->addr);
}

/* ---- one bin: a treap by (size, address) ------------------------------- */

/* Puts node t (may be NULL) in the slot `at` (a bin's root or a node's
 * left or right), noting the slot in its block: a removal starts there
 * instead of searching down from the root, whose every step was a branch
 * the CPU could not predict (one in four of a pair's mispredictions). */
static inline void tdm__bin_put(tdm__tnode **at, tdm__tnode *t)
{
    *at = t;
    if (t != NULL)
        tdm__bin_blk(t)->bin_link = at;
}

static inline void tdm__bin_insert(tdm__tnode **root, cblock *b)
{
    tdm__tnode *n = &b->node;
    /* The priority hashes the record's address, so a record that kept it
     * (0: fresh from the pool, zeroed) need not hash it again. */
    if (n->prio == 0)
        n->prio = tdm__tree_prio(n);
    tdm__tnode **link = root;
    while (*link != NULL && (*link)->prio >= n->prio)
        link = tdm__bin_before(b, tdm__bin_blk(*link)) ? &(*link)->left : &(*link)->right;
    /* Split what hangs below into the nodes before b and after it. */
    tdm__tnode *t = *link, **l = &n->left, **r = &n->right;
    while (t != NULL) {
        if (tdm__bin_before(tdm__bin_blk(t), b)) {
            tdm__bin_put(l, t);
            l = &t->right;
            t = t->right;
        } else {
            tdm__bin_put(r, t);
            r = &t->left;
            t = t->left;
        }
    }
    *l = *r = NULL;
    tdm__bin_put(link, n);
}

/* Joins treaps a and b (every key of a before every key of b) into the
 * slot `at`, keeping the blocks' slots (as tree.c's join, with them). */
static inline void tdm__bin_join(tdm__tnode **at, tdm__tnode *a, tdm__tnode *b)
{
    while (a != NULL && b != NULL) {
        if (a->prio >= b->prio) {
            tdm__bin_put(at, a);
            at = &a->right;
            a = a->right;
        } else {
            tdm__bin_put(at, b);
            at = &b->left;
            b = b->left;
        }
    }
    tdm__bin_put(at, a != NULL ? a : b);
}

static inline void tdm__bin_remove(tdm__tnode **root, cblock *b)
{
    tdm__tnode **link = b->bin_link;
    if (__builtin_expect(link == NULL || *link != &b->node, 0)) {
        /* Never wrong where the bins alone move blocks; searched anyway
         * rather than trusted, so that a stale slot cannot corrupt a bin. */
        link = root;
        while (*link != &b->node && *link != NULL)
            link = tdm__bin_before(b, tdm__bin_blk(*link)) ? &(*link)->left : &(*link)->right;
        if (*link == NULL)
            return; /* not there: a caller bug, but never corrupt the bin */
    }
    tdm__bin_join(link, b->node.left, b->node.right);
    b->node.left = b->node.right = NULL;
    b->bin_link = NULL;
}

/* First node at or after (size, addr) (gt: strictly after). */
static inline cblock *tdm__bin_ge(tdm__tnode *t, uint64_t size, uint64_t addr, int gt)
{
    cblock *best = NULL;
    while (t != NULL) {
        cblock *c = tdm__bin_blk(t);
        if (tdm__bin_at_or_after(c, size, addr, gt)) {
            best = c;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}


static inline cblock *tdm__bin_first(tdm__tnode *t)
{
    while (t != NULL && t->left != NULL)
        t = t->left;
    return tdm__bin_blk(t);
}

/* ---- one bin: a short list ------------------------------------------------- */

/* Most bins hold one block or none, and a treap's insert decides on its
 * random priorities where the CPU cannot predict it (a pair's largest
 * cost after the rules' own decisions).  A bin of up to TDM__BIN_LIST_MAX
 * blocks is a list instead (linked by node.right; bin_link is the slot
 * holding the block: the bin's root or the block before's node.right).
 *
 * The list is kept in (size, address) order, so that the best fit is the
 * first block at or after the request and a small bin's is its first: on
 * real traces nine inserts in ten go first (a freed block usually has the
 * lowest address of its size, as when it was taken) and most others
 * second, tests the CPU predicts, where a pass over every block to find
 * the lowest ended at a different length each time.  Some bins fill with
 * blocks that merges, not allocations, take out again (a long tail of
 * sizes), where walking to each one's place cost more than the passes
 * did: an insert that would walk past TDM__BIN_WALK_MAX blocks puts the
 * block on the bin's second list, `aside`, instead, which the bin's next
 * search merges into the order (tdm__bin_order); merges take blocks out
 * of either list alike.  A bin whose lists would hold more than the bound
 * becomes a treap (cache_bins.c), which stays one until the bin is
 * empty. */

/* Where a write to n's bin_link goes: n's, or the scratch slot when there
 * is no n (selected, not branched on). */
static inline tdm__tnode ***tdm__binl_link_of(cbin_stream *s, tdm__tnode *n)
{
    /* In integers: no pointer is made from NULL plus an offset. */
    uintptr_t at = (uintptr_t)n - offsetof(cblock, node) + offsetof(cblock, bin_link);
    return n != NULL ? (tdm__tnode ***)at : &s->scratch;
}

/* Links b into the slot `at` of a list (before what it holds). */
static inline void tdm__binl_link(cbin_stream *s, tdm__tnode **at, cblock *b)
{
    tdm__tnode *next = *at;
    b->node.left = NULL;
    b->node.right = next;
    *tdm__binl_link_of(s, next) = &b->node.right;
    *at = &b->node;
    b->bin_link = at;
}

/* Whether b goes after the block in slot `at` (none: no). */
static inline int tdm__binl_after(tdm__tnode *const *at, const cblock *b)
{
    return *at != NULL && tdm__bin_before(tdm__bin_blk(*at), b);
}

/* Returns TDM__BIN_ASIDE when b went aside, else 0.  The walk is spelt
 * out: its first test is the common case's only one. */
static inline unsigned tdm__binl_insert(cbin_stream *s, unsigned i, cblock *b)
{
    _Static_assert(TDM__BIN_WALK_MAX == 2, "the walk below passes two blocks");
    tdm__tnode **at = &s->root[i];
    unsigned aside = 0;
    if (tdm__binl_after(at, b)) {
        at = &(*at)->right;
        if (tdm__binl_after(at, b)) {
            at = &(*at)->right;
            if (__builtin_expect(tdm__binl_after(at, b), 0)) {
                at = &s->aside[i];
                aside = TDM__BIN_ASIDE;
            }
        }
    }
    tdm__binl_link(s, at, b);
    return aside;
}

/* 0 when b is not in the list. */
static inline int tdm__binl_unlink(cbin_stream *s, unsigned i, cblock *b)
{
    tdm__tnode **at = b->bin_link;
    if (__builtin_expect(at == NULL || *at != &b->node, 0)) {
        /* Never wrong where the bins alone move blocks; searched anyway
         * rather than trusted, so that a stale slot cannot corrupt a bin. */
        at = &s->root[i];
        while (*at != &b->node && *at != NULL)
            at = &(*at)->right;
        if (*at == NULL)
            for (at = &s->aside[i]; *at != &b->node && *at != NULL;)
                at = &(*at)->right;
        if (*at == NULL)
            return 0; /* not there: a caller bug, but never corrupt the bin */
    }
    tdm__tnode *next = b->node.right;
    *at = next;
    *tdm__binl_link_of(s, next) = at;
    b->node.right = NULL;
    b->bin_link = NULL;
    return 1;
}

/* The (ordered) list's first block at or after (size, addr) (gt: after). */
static inline cblock *tdm__binl_ge(tdm__tnode *t, uint64_t size, uint64_t addr, int gt)
{
    while (t != NULL && !tdm__bin_at_or_after(tdm__bin_blk(t), size, addr, gt))
        t = t->right;
    return tdm__bin_blk(t);
}

/* ---- one bin, either kind ---------------------------------------------------- */

void tdm__bin_to_tree(cbin_stream *s, unsigned i);
/* Merges the blocks set aside into list i's order (a list, not a treap). */
void tdm__bin_order(cbin_stream *s, unsigned i);
/* Lists turned into treaps since the process started (tests; atomic:
 * devices convert under their own locks). */
extern _Atomic uint64_t tdm__bins_trees_made TDM__HIDDEN;

static inline void tdm__bin_add(cbin_stream *s, unsigned i, cblock *b)
{
    unsigned n = s->len[i];
    /* (A treap's TDM__BIN_TREE has every count bit set.) */
    if (__builtin_expect((n & TDM__BIN_COUNT) < TDM__BIN_LIST_MAX, 1)) {
        s->len[i] = (uint8_t)((n + 1) | tdm__binl_insert(s, i, b));
        return;
    }
    if (n != TDM__BIN_TREE)
        tdm__bin_to_tree(s, i);
    tdm__bin_insert(&s->root[i], b);
}

static inline void tdm__bin_del(cbin_stream *s, unsigned i, cblock *b)
{
    unsigned n = s->len[i];
    if (__builtin_expect(n != TDM__BIN_TREE, 1)) {
        s->len[i] = (uint8_t)(n - (unsigned)tdm__binl_unlink(s, i, b));
        return;
    }
    tdm__bin_remove(&s->root[i], b);
    if (s->root[i] == NULL)
        s->len[i] = 0; /* empty: a list again */
}

/* Bin i's first block at or after (size, addr) (gt: after). */
static inline cblock *tdm__bin_find(cbin_stream *s, unsigned i, uint64_t size, uint64_t addr,
                                    int gt)
{
    unsigned n = s->len[i];
    if (__builtin_expect(n != TDM__BIN_TREE, 1)) {
        if (__builtin_expect(n & TDM__BIN_ASIDE, 0))
            tdm__bin_order(s, i);
        return tdm__binl_ge(s->root[i], size, addr, gt);
    }
    return tdm__bin_ge(s->root[i], size, addr, gt);
}

/* Bin i's first block (NULL: none). */
static inline cblock *tdm__bin_min(cbin_stream *s, unsigned i)
{
    unsigned n = s->len[i];
    if (__builtin_expect(n != TDM__BIN_TREE, 1)) {
        if (__builtin_expect(n & TDM__BIN_ASIDE, 0))
            tdm__bin_order(s, i);
        return tdm__bin_blk(s->root[i]);
    }
    return tdm__bin_first(s->root[i]);
}


/* ---- the bitmap ------------------------------------------------------------ */

static inline void tdm__bin_mark(cbin_stream *s, unsigned i)
{
    s->bits[i / 64] |= (uint64_t)1 << (i % 64);
    s->summary[i / 4096] |= (uint64_t)1 << ((i / 64) % 64);
}

/* Clears bin i's bit when it is empty (as tdm__bin_del counted), without
 * a branch: whether a removal empties its bin is as good as random to the
 * CPU.  The summary is left as it is (half the instructions): a summary
 * bit may stand over a word gone empty, and tdm__bin_next_used_far clears
 * it when it finds one; a clear summary bit always means an empty word. */
static inline void tdm__bin_unmark_if_empty(cbin_stream *s, unsigned i)
{
    uint64_t empty = (s->len[i] & TDM__BIN_COUNT) == 0;
    s->bits[i / 64] &= ~(empty << (i % 64));
}

/* The first bin holding blocks in words >= w of the bitmap; TDM__BINS_N
 * if none. */
static inline unsigned tdm__bin_next_used_far(cbin_stream *s, unsigned w)
{
    for (unsigned sw = w / 64; sw < TDM__BINS_SUMMARY; sw++) {
        uint64_t sm = s->summary[sw];
        if (sw == w / 64)
            sm &= ~(uint64_t)0 << (w % 64);
        while (sm != 0) {
            unsigned ww = sw * 64 + (unsigned)__builtin_ctzll(sm);
            if (s->bits[ww] != 0)
                return ww * 64 + (unsigned)__builtin_ctzll(s->bits[ww]);
            s->summary[sw] &= ~((uint64_t)1 << (ww % 64)); /* its bins emptied */
            sm &= sm - 1;
        }
    }
    return TDM__BINS_N;
}

/* The first bin >= i holding blocks; TDM__BINS_N if none. */
static inline unsigned tdm__bin_next_used(cbin_stream *s, unsigned i)
{
    if (i >= TDM__BINS_N)
        return TDM__BINS_N;
    unsigned w = i / 64;
    uint64_t m = s->bits[w] & (~(uint64_t)0 << (i % 64));
    if (m != 0)
        return w * 64 + (unsigned)__builtin_ctzll(m);
    return tdm__bin_next_used_far(s, w + 1);
}

/* ---- streams ------------------------------------------------------------ */

cbin_stream *tdm__bins_stream_slow(cbins *bs, uint64_t stream);

/* The stream's bins; NULL if it never had any (tdm__bins_prepare). */
static inline cbin_stream *tdm__bins_stream(cbins *bs, uint64_t stream)
{
    if (__builtin_expect(bs->last != NULL && bs->last->stream == stream, 1))
        return bs->last;
    return tdm__bins_stream_slow(bs, stream);
}

/* ---- the pool's index ------------------------------------------------------ */

/* The reference mode (one tree: cache_bins.c), for the test that replays
 * traces through both. */
void tdm__bins_ref_insert(cbins *bs, cblock *b);
void tdm__bins_ref_remove(cbins *bs, cblock *b);
cblock *tdm__bins_ref_find_ge(cbins *bs, uint64_t stream, uint64_t size);

/* A block remembers its stream's bins (b->bins) from its first insert,
 * and a split passes them on: no lookup, and no test of the reference
 * mode, where it has none, on the way in or out. */
static inline void tdm__bins_insert(cbins *bs, cblock *b)
{
    bs->count++;
    cbin_stream *s = b->bins;
    if (__builtin_expect(s == NULL, 0)) {
        if (bs->reference) {
            tdm__bins_ref_insert(bs, b);
            return;
        }
        /* tdm__bins_prepare made the stream's bins before its first block. */
        s = b->bins = tdm__bins_stream(bs, tdm__cblock_stream(b));
    }
    unsigned i = tdm__bin_of(b->size);
    b->bin = (uint16_t)i;
    tdm__bin_add(s, i, b);
    tdm__bin_mark(s, i);
}

static inline void tdm__bins_remove(cbins *bs, cblock *b)
{
    bs->count--;
    cbin_stream *s = b->bins;
    if (s == NULL) { /* never inserted but in the reference mode */
        tdm__bins_ref_remove(bs, b);
        return;
    }
    unsigned i = b->bin; /* its size has not changed since it came in */
    tdm__bin_del(s, i, b);
    tdm__bin_unmark_if_empty(s, i);
}

/* First block of the stream at or after (size, addr) (gt: after), bins
 * only. */
static inline cblock *tdm__bins_key_ge(cbins *bs, uint64_t stream, uint64_t size,
                                       uint64_t addr, int gt)
{
    cbin_stream *s = tdm__bins_stream(bs, stream);
    if (s == NULL)
        return NULL;
    unsigned i = tdm__bin_of(size);
    if (s->len[i] != 0) { /* (its ordered list may be empty, its aside not) */
        /* A small bin's blocks all have its size: the best fit in it
         * (addr 0) is its lowest address. */
        cblock *b = !gt && addr == 0 && i < TDM__BINS_SMALL ? tdm__bin_min(s, i)
                                                            : tdm__bin_find(s, i, size, addr, gt);
        if (b != NULL)
            return b;
    }
    i = tdm__bin_next_used(s, i + 1);
    return i < TDM__BINS_N ? tdm__bin_min(s, i) : NULL;
}

/* The stream's first block at or after (size, address 0): best fit. */
static inline cblock *tdm__bins_find_ge(cbins *bs, uint64_t stream, uint64_t size)
{
    if (bs->reference)
        return tdm__bins_ref_find_ge(bs, stream, size);
    return tdm__bins_key_ge(bs, stream, size, 0, 0);
}

#endif
