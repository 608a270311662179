/* alloc/cache_map.c: a device's live blocks by address, for tdm_free.
 *
 * Open addressing with linear probing (cache_internal.h has put and take,
 * inline); 16-byte slots (address, block), a power-of-two table from
 * tdm__meta_map.  Runs stay short: the table is rebuilt once a quarter of
 * its slots are not empty (at half full a ResNet trace's pair cost ~15
 * instructions more, ~6 % of its time).  The slot is the top bits of a
 * multiplicative hash of the address.  It lives under the device's lock,
 * like the blocks it points to, so a malloc or free takes no lock beyond
 * that one.
 */
#include "cache_internal.h"

#define CMAP_FIRST 1024u

/* Out of line: the put that never rebuilds saves no registers for it. */
__attribute__((noinline)) int tdm__cmap_rebuild(cmap *m)
{
    /* Double when live entries alone would fill an eighth: rebuilding at
     * the same size then still leaves room for as many puts again. */
    size_t cap = m->cap == 0 ? CMAP_FIRST : (m->count + 1) * 8 > m->cap ? m->cap * 2 : m->cap;
    cmap_slot *s = tdm__meta_map(cap * sizeof *s);
    if (s == NULL)
        return 0;
    cmap old = *m;
    m->slots = s;
    m->cap = cap;
    m->shift = 64u - (unsigned)__builtin_ctzll(cap);
    m->used = m->count;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].addr <= TDM__CMAP_GONE)
            continue;
        size_t j = tdm__cmap_slot_of(m, old.slots[i].addr);
        while (s[j].addr != TDM__CMAP_EMPTY)
            j = (j + 1) & (cap - 1);
        s[j] = old.slots[i];
    }
    if (old.slots != NULL)
        tdm__meta_unmap(old.slots, old.cap * sizeof *old.slots);
    return 1;
}

cblock *tdm__cmap_get(const cmap *m, uint64_t addr)
{
    size_t i = tdm__cmap_find(m, addr);
    return i == SIZE_MAX ? NULL : m->slots[i].block;
}

void tdm__cmap_destroy(cmap *m)
{
    if (m->slots != NULL)
        tdm__meta_unmap(m->slots, m->cap * sizeof *m->slots);
    m->slots = NULL;
    m->cap = m->count = m->used = 0;
    m->shift = 0;
}
