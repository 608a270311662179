/* format/format_stream.c: the .tdm framing checked as a stream arrives
 * (format_stream.h).  Fields are gathered in s->hold one byte at a time
 * (a signature with its versions is at most 28 bytes, an envelope's head
 * at most 15, a checksum at most 9); payloads pass through the checksum
 * in bulk.  No allocation, no lock. */
#include "format_stream.h"

#include "format_decode.h"
#include "format_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { STAGE_SIGNATURE, STAGE_HEAD, STAGE_PAYLOAD, STAGE_CRC, STAGE_DONE, STAGE_BAD };

static const uint8_t signature[TDM_SNAP_SIGNATURE_LEN] = TDM_SNAP_SIGNATURE;

void tdm__snap_stream_init(tdm__snap_stream *s)
{
    memset(s, 0, sizeof *s);
    s->stage = STAGE_SIGNATURE;
}

__attribute__((format(printf, 3, 4))) static int bad(tdm__snap_stream *s, uint64_t at,
                                                     const char *fmt, ...)
{
    s->stage = STAGE_BAD;
    s->bad_at = at;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* The held bytes with one more, s->off that byte's offset: 0 while the
 * field is not yet whole or was whole and the stage moved on; -1 when
 * bad. */
static int take_byte(tdm__snap_stream *s, uint8_t b)
{
    s->hold[s->held++] = b;
    const uint8_t *p = s->hold, *end = s->hold + s->held;
    uint64_t v, len;
    int neg = 0, rc;
    switch (s->stage) {
    case STAGE_SIGNATURE:
        if (s->held <= sizeof signature) {
            if (b != signature[s->held - 1])
                return bad(s, 0, "not a tidemark snapshot (no signature at byte 0)");
            return 0;
        }
        p += sizeof signature;
        for (int i = 0; i < 2; i++) {
            const uint8_t *at = p;
            rc = tdm__fmt_dec_int(&p, end, &v, &neg);
            if (rc == TDM_FMT_DEC_SHORT)
                return 0;
            if (rc != TDM_FMT_DEC_OK || neg)
                return bad(s, (uint64_t)(at - s->hold), "bad %s format version at byte %llu",
                           i ? "minor" : "major", (unsigned long long)(at - s->hold));
        }
        s->stage = STAGE_HEAD;
        s->held = 0;
        return 0;
    case STAGE_HEAD:
        if (s->held == 1) {
            s->rec_off = s->off;
            if (b != 0x93)
                return bad(s, s->off, "expected a record at byte %llu, found 0x%02x",
                           (unsigned long long)s->off, b);
            return 0;
        }
        p++;
        rc = tdm__fmt_dec_int(&p, end, &v, &neg);
        if (rc == TDM_FMT_DEC_SHORT)
            return 0;
        if (rc != TDM_FMT_DEC_OK || neg || v == 0 || v > UINT32_MAX)
            return bad(s, s->rec_off + 1, "bad record type at byte %llu",
                       (unsigned long long)s->rec_off + 1);
        if (s->records == 0 && v != TDM_REC_HEADER)
            return bad(s, s->rec_off, "the first record must be the header (record at byte %llu)",
                       (unsigned long long)s->rec_off);
        s->type = v;
        const uint8_t *at = p;
        rc = tdm__fmt_dec_len(&p, end, 'b', &len);
        if (rc == TDM_FMT_DEC_SHORT)
            return 0;
        if (rc != TDM_FMT_DEC_OK) {
            unsigned long long o = s->rec_off + (uint64_t)(at - s->hold);
            return bad(s, o, "expected the record's payload (binary data) at byte %llu", o);
        }
        s->left = len;
        s->crc = tdm__format_crc32((uint32_t)s->type, NULL, 0);
        s->stage = len ? STAGE_PAYLOAD : STAGE_CRC;
        s->held = 0;
        return 0;
    case STAGE_CRC:
        rc = tdm__fmt_dec_int(&p, end, &v, &neg);
        if (rc == TDM_FMT_DEC_SHORT)
            return 0;
        if (rc != TDM_FMT_DEC_OK || neg || v > UINT32_MAX) {
            unsigned long long o = s->off + 1 - s->held;
            return bad(s, o, "bad checksum field at byte %llu", o);
        }
        if (v != s->crc)
            return bad(s, s->rec_off, "checksum mismatch (record at byte %llu)",
                       (unsigned long long)s->rec_off);
        s->records++;
        s->stage = s->type == TDM_REC_END ? STAGE_DONE : STAGE_HEAD;
        s->held = 0;
        return 0;
    case STAGE_DONE:
        return bad(s, s->off, "unexpected bytes after the end record, at byte %llu",
                   (unsigned long long)s->off);
    default:
        return -1;
    }
}

int tdm__snap_stream_feed(tdm__snap_stream *s, const void *data, size_t n)
{
    const uint8_t *p = data, *end = p + n;
    while (p < end) {
        if (s->stage == STAGE_BAD)
            return -1;
        if (s->stage == STAGE_PAYLOAD) {
            size_t k = (uint64_t)(end - p) < s->left ? (size_t)(end - p) : (size_t)s->left;
            s->crc = tdm__format_crc32(s->crc, p, k);
            s->left -= k;
            s->off += k;
            p += k;
            if (!s->left)
                s->stage = STAGE_CRC;
            continue;
        }
        if (take_byte(s, *p) != 0)
            return -1;
        s->off++;
        p++;
    }
    return s->stage == STAGE_BAD ? -1 : 0;
}
