/* alloc/tree.c: the treap behind tdm__tree (see tree.h).
 *
 * Invariants: in-order traversal is ascending by cmp; a parent's priority
 * is >= its children's.  Lock: none (the owner's).
 */
#include "tree.h"

void tdm__tree_init(tdm__tree *t, tdm__tcmp cmp)
{
    t->root = NULL;
    t->cmp = cmp;
    t->count = 0;
}

/* Splits `t` into nodes < key (*l) and nodes > key (*r). */
static void split(tdm__tnode *t, const tdm__tnode *key, tdm__tcmp cmp,
                  tdm__tnode **l, tdm__tnode **r)
{
    while (t != NULL) {
        if (cmp(t, key) < 0) {
            *l = t;
            l = &t->right;
            t = t->right;
        } else {
            *r = t;
            r = &t->left;
            t = t->left;
        }
    }
    *l = NULL;
    *r = NULL;
}

void tdm__tree_insert(tdm__tree *t, tdm__tnode *n)
{
    n->prio = tdm__tree_prio(n);
    tdm__tnode **link = &t->root;
    while (*link != NULL && (*link)->prio >= n->prio)
        link = t->cmp(n, *link) < 0 ? &(*link)->left : &(*link)->right;
    split(*link, n, t->cmp, &n->left, &n->right);
    *link = n;
    t->count++;
}

/* Joins two treaps where every node of `a` is below every node of `b`
 * (no comparison needed: priorities only); returns the root. */
static tdm__tnode *join(tdm__tnode *a, tdm__tnode *b)
{
    tdm__tnode *root = NULL;
    tdm__tnode **link = &root;
    while (a != NULL && b != NULL) {
        if (a->prio >= b->prio) {
            *link = a;
            link = &a->right;
            a = a->right;
        } else {
            *link = b;
            link = &b->left;
            b = b->left;
        }
    }
    *link = a != NULL ? a : b;
    return root;
}

void tdm__tree_remove(tdm__tree *t, tdm__tnode *n)
{
    tdm__tnode **link = &t->root;
    while (*link != n && *link != NULL)
        link = t->cmp(n, *link) < 0 ? &(*link)->left : &(*link)->right;
    if (*link == NULL)
        return; /* not in the tree: a caller bug, but never corrupt it */
    *link = join(n->left, n->right);
    n->left = n->right = NULL;
    t->count--;
}

tdm__tnode *tdm__tree_find_ge(const tdm__tree *t, const tdm__tnode *probe)
{
    tdm__tnode *best = NULL;
    for (tdm__tnode *cur = t->root; cur != NULL;) {
        if (t->cmp(cur, probe) >= 0) {
            best = cur;
            cur = cur->left;
        } else {
            cur = cur->right;
        }
    }
    return best;
}

tdm__tnode *tdm__tree_find_gt(const tdm__tree *t, const tdm__tnode *probe)
{
    tdm__tnode *best = NULL;
    for (tdm__tnode *cur = t->root; cur != NULL;) {
        if (t->cmp(cur, probe) > 0) {
            best = cur;
            cur = cur->left;
        } else {
            cur = cur->right;
        }
    }
    return best;
}

tdm__tnode *tdm__tree_find_lt(const tdm__tree *t, const tdm__tnode *probe)
{
    tdm__tnode *best = NULL;
    for (tdm__tnode *cur = t->root; cur != NULL;) {
        if (t->cmp(cur, probe) < 0) {
            best = cur;
            cur = cur->right;
        } else {
            cur = cur->left;
        }
    }
    return best;
}

tdm__tnode *tdm__tree_first(const tdm__tree *t)
{
    tdm__tnode *cur = t->root;
    while (cur != NULL && cur->left != NULL)
        cur = cur->left;
    return cur;
}

tdm__tnode *tdm__tree_last(const tdm__tree *t)
{
    tdm__tnode *cur = t->root;
    while (cur != NULL && cur->right != NULL)
        cur = cur->right;
    return cur;
}
