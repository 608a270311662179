/* alloc/tree.h: an intrusive ordered set (a treap), the one search
 * structure of alloc/: the sim device's free ranges by size and by address,
 * and the caching allocator's cached blocks by (stream, size, address).
 *
 * Keys live in the records that embed a tdm__tnode; `cmp` orders two
 * records and must never call two distinct records equal.  Searches take a
 * probe record holding just the key fields.  Priorities come from the node
 * address, so the shape is random-like without any random state; expected
 * depth is O(log n).  No allocation, no lock: the owner's lock covers it.
 */
#ifndef TDM_ALLOC_TREE_H
#define TDM_ALLOC_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tdm__tnode {
    struct tdm__tnode *left, *right;
    uint32_t prio;
} tdm__tnode;

typedef int (*tdm__tcmp)(const tdm__tnode *a, const tdm__tnode *b);

typedef struct tdm__tree {
    tdm__tnode *root;
    tdm__tcmp cmp;
    size_t count; /* nodes in the tree */
} tdm__tree;

/* A node's treap priority: a hash of its address (random-like, no state).
 * Shared with the caching allocator's bins (cache_bins.h). */
static inline uint32_t tdm__tree_prio(const void *node)
{
    uint64_t x = (uint64_t)(uintptr_t)node;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

void tdm__tree_init(tdm__tree *t, tdm__tcmp cmp);
void tdm__tree_insert(tdm__tree *t, tdm__tnode *n);
/* `n` must be in the tree. */
void tdm__tree_remove(tdm__tree *t, tdm__tnode *n);
/* Smallest node >= probe (> probe), or NULL. */
tdm__tnode *tdm__tree_find_ge(const tdm__tree *t, const tdm__tnode *probe);
tdm__tnode *tdm__tree_find_gt(const tdm__tree *t, const tdm__tnode *probe);
/* Largest node < probe, or NULL. */
tdm__tnode *tdm__tree_find_lt(const tdm__tree *t, const tdm__tnode *probe);
tdm__tnode *tdm__tree_first(const tdm__tree *t);
tdm__tnode *tdm__tree_last(const tdm__tree *t);
/* The in-order successor / predecessor of a node in the tree. */
static inline tdm__tnode *tdm__tree_next(const tdm__tree *t, const tdm__tnode *n)
{
    return tdm__tree_find_gt(t, n);
}
static inline tdm__tnode *tdm__tree_prev(const tdm__tree *t, const tdm__tnode *n)
{
    return tdm__tree_find_lt(t, n);
}

#define TDM__CONTAINER_OF(ptr, type, member)                                   \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
