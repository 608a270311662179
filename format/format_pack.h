/* format/format_pack.h: msgpack integers and array headers packed straight
 * into a byte buffer, for the writer's event columns (format_write.c).
 *
 * msgpack_packer hands every value to its write callback, one call and a
 * copy per value; a dump of a million events packs eleven million values.
 * The writer reserves room for a whole column once and packs it here.
 * The encodings are msgpack-c's own, byte for byte (the shortest form; a
 * non-negative value of a signed column in the unsigned forms, as
 * msgpack_pack_int64 does), so a file does not depend on which of the two
 * packed it.
 *
 * No state, no lock.  Each function writes at most TDM__PACK_INT_MAX (or
 * TDM__PACK_ARRAY_MAX) bytes at p, which must have that much room even
 * where the value takes fewer, and returns the byte after the value.
 */
#ifndef TDM_FORMAT_FORMAT_PACK_H
#define TDM_FORMAT_FORMAT_PACK_H

#include <stdint.h>
#include <string.h>

#define TDM__PACK_INT_MAX 9   /* 0xcf/0xd3 and 8 bytes */
#define TDM__PACK_ARRAY_MAX 5 /* 0xdd and 4 bytes */

static inline uint8_t *tdm__pack_be16(uint8_t *p, uint8_t tag, uint16_t v)
{
    p[0] = tag;
    v = __builtin_bswap16(v);
    memcpy(p + 1, &v, 2);
    return p + 3;
}

static inline uint8_t *tdm__pack_be32(uint8_t *p, uint8_t tag, uint32_t v)
{
    p[0] = tag;
    v = __builtin_bswap32(v);
    memcpy(p + 1, &v, 4);
    return p + 5;
}

/* tag, then the low 2^cls bytes of v, big-endian.  Stores 9 bytes: the
 * caller's room is TDM__PACK_INT_MAX for every value. */
static inline uint8_t *tdm__pack_tagged(uint8_t *p, uint8_t tag, unsigned cls, uint64_t v)
{
    unsigned len = 1u << cls;
    uint64_t be = __builtin_bswap64(v << (64 - 8 * len));
    p[0] = tag;
    memcpy(p + 1, &be, 8);
    return p + 1 + len;
}

/* 0..3: 1, 2, 4 or 8 bytes hold v unsigned. */
static inline unsigned tdm__pack_uint_class(uint64_t v)
{
    return (unsigned)(v >= 0x100) + (v >= 0x10000) + (v >= 0x100000000ull);
}

/* Without a branch on the size: the deltas of a column change size from
 * one event to the next, which a branch predicts badly. */
static inline uint8_t *tdm__pack_uint(uint8_t *p, uint64_t v)
{
    if (v < 0x80) {
        *p = (uint8_t)v; /* positive fixint */
        return p + 1;
    }
    unsigned cls = tdm__pack_uint_class(v);
    return tdm__pack_tagged(p, (uint8_t)(0xcc + cls), cls, v); /* uint 8..64 */
}

static inline uint8_t *tdm__pack_int(uint8_t *p, int64_t v)
{
    if ((uint64_t)v + 32 < 32 + 0x80) {
        *p = (uint8_t)(int8_t)v; /* negative or positive fixint */
        return p + 1;
    }
    unsigned neg = (unsigned)(v < -128) + (v < -32768) + (v < -2147483647ll - 1);
    unsigned pos = tdm__pack_uint_class((uint64_t)v);
    unsigned cls = v < 0 ? neg : pos;
    uint8_t tag = (uint8_t)((v < 0 ? 0xd0 : 0xcc) + cls); /* int 8..64, uint 8..64 */
    return tdm__pack_tagged(p, tag, cls, (uint64_t)v);
}

static inline uint8_t *tdm__pack_array_header(uint8_t *p, uint32_t n)
{
    if (n < 16) {
        *p = (uint8_t)(0x90 | n); /* fixarray */
        return p + 1;
    }
    if (n < 0x10000)
        return tdm__pack_be16(p, 0xdc, (uint16_t)n);
    return tdm__pack_be32(p, 0xdd, n);
}

#endif
