/* tests/fuzz/tdm_crc_fix.h: fuzzing past the checksum.  A mutated .tdm
 * file fails its records' CRC-32 at once, so a fuzzer that mutates raw
 * bytes never reaches what the payloads hold (an event size of 2^63-1, a
 * stack id past its table) nor the commands that use them.  This rewrites
 * every whole record of a buffer with the checksum its type and payload
 * have (docs/format.md: [type, payload, crc], crc = zlib.crc32(payload,
 * type)), each crc as a msgpack uint32, and leaves everything else (the
 * signature, a record the walk cannot parse, the bytes after it) as it
 * was.  Header-only: each target that fuzzes past the CRC includes it. */
#ifndef TDM_FUZZ_TDM_CRC_FIX_H
#define TDM_FUZZ_TDM_CRC_FIX_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format_decode.h"
#include "format_internal.h"

/* A copy of data[0..size) with every record's checksum made right; its
 * length in *out_size.  NULL when out of memory.  The caller frees it. */
static inline uint8_t *tdm_fuzz_fix_crcs(const uint8_t *data, size_t size, size_t *out_size)
{
    *out_size = 0; /* until there is a copy */
    /* A crc grows from 1 byte to 5 at most, and a record takes 4 bytes at
     * least: twice the input is room enough. */
    uint8_t *out = malloc(2 * size + 16);
    if (!out)
        return NULL;
    const uint8_t *p = data, *end = data + size;
    size_t o = 0;
    /* The signature ["tidemark", MAJOR, MINOR]: its 10 fixed bytes, then
     * two uints, copied as they are. */
    if (size >= 10) {
        const uint8_t *q = p + 10;
        uint64_t v;
        int neg;
        if (tdm__fmt_dec_int(&q, end, &v, &neg) == TDM_FMT_DEC_OK &&
            tdm__fmt_dec_int(&q, end, &v, &neg) == TDM_FMT_DEC_OK) {
            memcpy(out, p, (size_t)(q - p));
            o = (size_t)(q - p);
            p = q;
        }
    }
    while (p < end && *p == 0x93) {
        const uint8_t *q = p + 1, *payload;
        uint64_t type, len, crc;
        int neg;
        if (tdm__fmt_dec_int(&q, end, &type, &neg) != TDM_FMT_DEC_OK || neg ||
            type > UINT32_MAX)
            break;
        if (tdm__fmt_dec_len(&q, end, 'b', &len) != TDM_FMT_DEC_OK ||
            len > (uint64_t)(end - q))
            break;
        payload = q;
        q += len;
        const uint8_t *crc_at = q;
        if (tdm__fmt_dec_int(&q, end, &crc, &neg) != TDM_FMT_DEC_OK)
            break;
        memcpy(out + o, p, (size_t)(crc_at - p));
        o += (size_t)(crc_at - p);
        uint32_t good = tdm__format_crc32((uint32_t)type, payload, (size_t)len);
        out[o++] = 0xce;
        out[o++] = (uint8_t)(good >> 24);
        out[o++] = (uint8_t)(good >> 16);
        out[o++] = (uint8_t)(good >> 8);
        out[o++] = (uint8_t)good;
        p = q;
    }
    memcpy(out + o, p, (size_t)(end - p));
    o += (size_t)(end - p);
    *out_size = o;
    return out;
}

#endif
