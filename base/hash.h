/* base/hash.h: FNV-1a, the one string and byte hash of tidemark's
 * open-addressing tables (string tables of the writer and the symbolizer,
 * the viewer's string table, the pickle exporter's frames memo, the pickle
 * importer's interning).  Pure functions; no state, no locks.
 */
#ifndef TDM_BASE_HASH_H
#define TDM_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TDM__FNV_BASIS UINT64_C(0xcbf29ce484222325)
#define TDM__FNV_PRIME UINT64_C(0x100000001b3)

/* Continues hash h over n bytes at p. */
static inline uint64_t tdm__fnv1a_from(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * TDM__FNV_PRIME;
    return h;
}

/* FNV-1a of n bytes at p. */
static inline uint64_t tdm__fnv1a(const void *p, size_t n)
{
    return tdm__fnv1a_from(TDM__FNV_BASIS, p, n);
}

#endif
