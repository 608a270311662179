/* viewer-export/export/pickle_write.c: the rare paths of the minimal pickler
 * (pickle_write.h): buffer management, integer, float and string
 * encodings, container brackets.
 *
 * Invariants: `buf` holds whole opcodes only once a public call returns;
 * in file mode at most `cap` bytes are pending and everything before them
 * went to fwrite in order.  After a failure `status` is set and never
 * cleared, and no more bytes are appended.  No state, no locks.
 */
#include "pickle_write.h"

#include <stdlib.h>

/* File mode buffers this much before calling fwrite: large enough that
 * stdio's own copy is amortized, small enough to stay in L2/L3. */
#define PKW_FILE_BUFFER (1u << 20)

tdm_status tdm__pkw_init_file(tdm_pkw *w, FILE *file)
{
    memset(w, 0, sizeof *w);
    w->file = file;
    w->buf = malloc(PKW_FILE_BUFFER);
    if (!w->buf) {
        w->status = TDM_HOST_OUT_OF_MEMORY;
        return w->status;
    }
    w->cap = PKW_FILE_BUFFER;
    return TDM_OK;
}

tdm_status tdm__pkw_init_mem(tdm_pkw *w)
{
    memset(w, 0, sizeof *w);
    w->buf = malloc(4096);
    if (!w->buf) {
        w->status = TDM_HOST_OUT_OF_MEMORY;
        return w->status;
    }
    w->cap = 4096;
    return TDM_OK;
}

static int flush_file(tdm_pkw *w)
{
    if (w->len && fwrite(w->buf, 1, w->len, w->file) != w->len) {
        w->status = TDM_IO_ERROR;
        return -1;
    }
    w->flushed += w->len;
    w->len = 0;
    return 0;
}

__attribute__((noinline))
int tdm__pkw_reserve_slow(tdm_pkw *w, size_t n)
{
    if (w->status != TDM_OK)
        return -1;
    if (w->file) {
        if (flush_file(w) != 0)
            return -1;
        if (n <= w->cap)
            return 0;
        /* One item bigger than the buffer (a huge string): grow for it. */
    }
    size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2) {
            w->status = TDM_HOST_OUT_OF_MEMORY;
            return -1;
        }
        cap *= 2;
    }
    unsigned char *grown = realloc(w->buf, cap);
    if (!grown) {
        w->status = TDM_HOST_OUT_OF_MEMORY;
        return -1;
    }
    w->buf = grown;
    w->cap = cap;
    return 0;
}

tdm_status tdm__pkw_finish(tdm_pkw *w)
{
    if (w->status == TDM_OK && w->file) {
        if (flush_file(w) == 0 && fflush(w->file) != 0)
            w->status = TDM_IO_ERROR;
    }
    return w->status;
}

unsigned char *tdm__pkw_take(tdm_pkw *w, size_t *len)
{
    *len = 0;
    if (w->status != TDM_OK || w->file)
        return NULL;
    unsigned char *out = w->buf;
    *len = w->len;
    w->buf = NULL;
    w->len = w->cap = 0;
    return out;
}

void tdm__pkw_destroy(tdm_pkw *w)
{
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

void tdm__pkw_proto(tdm_pkw *w, unsigned version)
{
    if (tdm__pkw_reserve(w, 2) == 0) {
        w->buf[w->len++] = TDM_PK_PROTO;
        w->buf[w->len++] = (unsigned char)version;
    }
}

void tdm__pkw_int(tdm_pkw *w, int64_t v)
{
    if (tdm__pkw_reserve(w, 10) != 0)
        return;
    unsigned char *p = w->buf + w->len;
    /* BININT1 and BININT2 are unsigned; BININT is signed 32-bit. */
    if (v >= 0 && v < 256) {
        p[0] = TDM_PK_BININT1;
        p[1] = (unsigned char)v;
        w->len += 2;
    } else if (v >= 0 && v < 65536) {
        p[0] = TDM_PK_BININT2;
        p[1] = (unsigned char)v;
        p[2] = (unsigned char)(v >> 8);
        w->len += 3;
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        p[0] = TDM_PK_BININT;
        for (int i = 0; i < 4; i++)
            p[1 + i] = (unsigned char)(u >> (8 * i));
        w->len += 5;
    } else {
        /* LONG1: little-endian two's complement, as few bytes as keep the
         * sign: drop a top byte while it only repeats the sign of the byte
         * below it. */
        uint64_t u = (uint64_t)v;
        unsigned n = 8;
        while (n > 1) {
            unsigned top = (unsigned)(u >> (8 * (n - 1))) & 0xff;
            unsigned below_sign = (unsigned)(u >> (8 * (n - 1) - 1)) & 1;
            if ((top == 0x00 && !below_sign) || (top == 0xff && below_sign))
                n--;
            else
                break;
        }
        p[0] = TDM_PK_LONG1;
        p[1] = (unsigned char)n;
        for (unsigned i = 0; i < n; i++)
            p[2 + i] = (unsigned char)(u >> (8 * i));
        w->len += 2 + n;
    }
}

void tdm__pkw_float(tdm_pkw *w, double v)
{
    if (tdm__pkw_reserve(w, 9) != 0)
        return;
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    unsigned char *p = w->buf + w->len;
    p[0] = TDM_PK_BINFLOAT; /* big-endian IEEE 754 */
    for (int i = 0; i < 8; i++)
        p[1 + i] = (unsigned char)(u >> (56 - 8 * i));
    w->len += 9;
}

void tdm__pkw_str(tdm_pkw *w, const char *s, size_t len)
{
    if (len > UINT32_MAX) /* BINUNICODE's limit; no symbol is 4 GiB long */
        len = UINT32_MAX;
    if (tdm__pkw_reserve(w, len + 5) != 0)
        return;
    unsigned char *p = w->buf + w->len;
    if (len < 256) {
        p[0] = TDM_PK_SHORT_BINUNICODE;
        p[1] = (unsigned char)len;
        p += 2;
        w->len += 2;
    } else {
        p[0] = TDM_PK_BINUNICODE;
        for (int i = 0; i < 4; i++)
            p[1 + i] = (unsigned char)(len >> (8 * i));
        p += 5;
        w->len += 5;
    }
    memcpy(p, s, len);
    w->len += len;
}

/* Length of the valid UTF-8 sequence at s[i..len), or 0 if it is not one
 * (bad lead byte, bad continuation, overlong, surrogate, > U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t i, size_t len)
{
    unsigned c = s[i];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (len - i < n || s[i + 1] < lo || s[i + 1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[i + k] & 0xC0) != 0x80)
            return 0;
    return n;
}

int tdm__pkw_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = utf8_seq(s, i, len);
        if (!n)
            return 0;
        i += n;
    }
    return 1;
}

void tdm__pkw_str_utf8(tdm_pkw *w, const char *str, size_t len)
{
    if (!str) {
        tdm__pkw_str(w, "", 0);
        return;
    }
    if (tdm__pkw_utf8_valid(str, len)) {
        tdm__pkw_str(w, str, len);
        return;
    }
    /* Rare: paths or symbols in a legacy encoding.  Build a copy with
     * each bad byte replaced by U+FFFD (EF BF BD). */
    const unsigned char *s = (const unsigned char *)str;
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(s, i, len);
        out += n ? n : 3;
        i += n ? n : 1;
    }
    char *copy = malloc(out ? out : 1);
    if (!copy) {
        w->status = w->status == TDM_OK ? TDM_HOST_OUT_OF_MEMORY : w->status;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(s, i, len);
        if (n) {
            memcpy(copy + o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(copy + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    tdm__pkw_str(w, copy, o);
    free(copy);
}

void tdm__pkw_list_begin(tdm_pkw *w, tdm_pkw_seq *seq)
{
    seq->n = 0;
    tdm__pkw_byte(w, TDM_PK_EMPTY_LIST);
}

void tdm__pkw_list_end(tdm_pkw *w, tdm_pkw_seq *seq)
{
    if (seq->n) /* an empty list needs no MARK … APPENDS at all */
        tdm__pkw_byte(w, TDM_PK_APPENDS);
}

void tdm__pkw_dict_begin(tdm_pkw *w, tdm_pkw_seq *seq)
{
    seq->n = 0;
    tdm__pkw_byte(w, TDM_PK_EMPTY_DICT);
}

void tdm__pkw_dict_end(tdm_pkw *w, tdm_pkw_seq *seq)
{
    if (seq->n)
        tdm__pkw_byte(w, TDM_PK_SETITEMS);
}
