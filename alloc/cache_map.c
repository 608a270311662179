/* alloc/cache_map.c: a device's live blocks by address, for tdm_free.
 *
 * Open addressing with linear probing and backward-shift deletion; 16-byte
 * slots (address, block), a power-of-two table from tdm__meta_map that
 * doubles when a quarter full (short runs: a free's lookup and its
 * backward shift stay a probe or two; at half full they cost a ResNet
 * trace's pair ~15 instructions more, ~6 % of its time).  The slot is the
 * top bits of a multiplicative hash of the address.  It lives under the
 * device's lock, like the blocks it points to, so a malloc or free takes
 * no lock beyond that one.
 */
#include "cache_internal.h"

struct cmap_slot {
    uint64_t addr; /* 0: empty */
    cblock *block;
};

#define CMAP_FIRST 1024u

static inline size_t slot_of(const cmap *m, uint64_t addr)
{
    /* Blocks are 512-byte aligned: the low bits carry nothing. */
    return (size_t)(((addr >> 9) * 0x9e3779b97f4a7c15ULL) >> (64 - __builtin_ctzll(m->cap)));
}

/* Out of line: the put that never grows saves no registers for it. */
static __attribute__((noinline)) int grow(cmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : CMAP_FIRST;
    cmap_slot *s = tdm__meta_map(cap * sizeof *s);
    if (s == NULL)
        return 0;
    cmap old = *m;
    m->slots = s;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].addr == 0)
            continue;
        size_t j = slot_of(m, old.slots[i].addr);
        while (s[j].addr != 0)
            j = (j + 1) & (cap - 1);
        s[j] = old.slots[i];
    }
    if (old.slots != NULL)
        tdm__meta_unmap(old.slots, old.cap * sizeof *old.slots);
    return 1;
}

int tdm__cmap_put(cmap *m, cblock *b)
{
    if ((m->count + 1) * 4 > m->cap && !grow(m))
        return 0;
    size_t i = slot_of(m, b->addr);
    while (m->slots[i].addr != 0)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (cmap_slot){b->addr, b};
    m->count++;
    return 1;
}

cblock *tdm__cmap_get(const cmap *m, uint64_t addr)
{
    if (m->count == 0 || addr == 0)
        return NULL;
    for (size_t i = slot_of(m, addr);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].addr == addr)
            return m->slots[i].block;
        if (m->slots[i].addr == 0)
            return NULL;
    }
}

cblock *tdm__cmap_take(cmap *m, uint64_t addr)
{
    if (m->count == 0 || addr == 0)
        return NULL;
    size_t mask = m->cap - 1, i = slot_of(m, addr);
    while (m->slots[i].addr != addr) {
        if (m->slots[i].addr == 0)
            return NULL;
        i = (i + 1) & mask;
    }
    cblock *b = m->slots[i].block;
    /* Backward shift: pull later entries of the run into the hole when
     * their home slot is not between the hole and them. */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (m->slots[j].addr == 0)
            break;
        size_t home = slot_of(m, m->slots[j].addr);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].addr = 0;
    m->slots[i].block = NULL;
    m->count--;
    return b;
}

void tdm__cmap_destroy(cmap *m)
{
    if (m->slots != NULL)
        tdm__meta_unmap(m->slots, m->cap * sizeof *m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}
