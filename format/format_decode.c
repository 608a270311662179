/* format/format_decode.c: the .tdm reader's toolbox: the arena a
 * returned snapshot lives in, growable arrays, error reporting with byte
 * offsets, and a bounds-checked msgpack cursor (integers, strings,
 * lengths, skipping, record maps, row arrays).  format_read.c builds the
 * records on it.
 *
 * Why not msgpack_unpack: it reserves 24 bytes per element an array header
 * claims before looking at the input, so a corrupt length costs gigabytes,
 * and its objects do not carry byte offsets, which every error here names.
 * This cursor checks each length against the bytes left in the record.
 *
 * Invariants: see format_decode.h.  No global state, no lock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format_decode.h"

/* ---- arena: every byte a returned snapshot owns ------------------------- */

struct tdm__fmt_chunk {
    struct tdm__fmt_chunk *next;
    size_t used, cap; /* bytes of data[] */
    max_align_t data[];
};

void *tdm__fmt_alloc(tdm__fmt_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    tdm__fmt_chunk *c = a->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        /* A big one-off goes behind the current chunk, which keeps filling. */
        if (a->chunks && size > 65536) {
            c->next = a->chunks->next;
            a->chunks->next = c;
        } else {
            c->next = a->chunks;
            a->chunks = c;
        }
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

void tdm__fmt_arena_destroy(tdm__fmt_arena *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nowned; i++)
        free(a->owned[i]);
    for (tdm__fmt_chunk *c = a->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

const char *const tdm__fmt_key_names[TDM_KEY_COUNT_] = {
#define XX(name, str) str,
    TDM_FMT_KEY_MAP(XX)
#undef XX
};

const char *tdm__fmt_record_name(uint64_t type)
{
    switch (type) {
#define XX(name, id, str) case id: return str;
        TDM_FMT_RECORD_MAP(XX)
#undef XX
    default:
        return "unknown";
    }
}

int tdm__fmt_fail(tdm__fmt_reader *r, tdm_status st, uint64_t offset, const char *fmt, ...)
{
    if (r->status != TDM_OK)
        return -1;
    r->status = st;
    if (r->err) {
        r->err->offset = offset;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(r->err->message, sizeof r->err->message, fmt, ap);
        va_end(ap);
        size_t used = n < 0 ? 0 : (size_t)n;
        if (r->rec_name && used < sizeof r->err->message)
            snprintf(r->err->message + used, sizeof r->err->message - used,
                     " (%s record at byte %llu)", r->rec_name,
                     (unsigned long long)r->rec_off);
    }
    return -1;
}

static int in_plain(const tdm__fmt_reader *r, const uint8_t *p)
{
    return r->plain_len && p >= r->plain && p <= r->plain + r->plain_len;
}

uint64_t tdm__fmt_off(const tdm__fmt_reader *r, const uint8_t *p)
{
    if (in_plain(r, p))
        return r->plain_at;
    return (uint64_t)(p - r->base);
}

int tdm__fmt_oom(tdm__fmt_reader *r)
{
    return tdm__fmt_fail(r, TDM_HOST_OUT_OF_MEMORY, r->rec_off, "out of memory");
}

/* Makes room for `add` more elements of `esize` bytes. */
void *tdm__fmt_vec_more(tdm__fmt_reader *r, tdm__fmt_vec *v, size_t esize, size_t add)
{
    if (!v->p || add > v->cap - v->n) { /* never NULL on success, even for 0 */
        size_t cap = v->cap ? v->cap : 16;
        while (cap - v->n < add) {
            if (cap > SIZE_MAX / 2 / esize) {
                tdm__fmt_oom(r);
                return NULL;
            }
            cap *= 2;
        }
        void *p = realloc(v->p, cap * esize);
        if (!p) {
            tdm__fmt_oom(r);
            return NULL;
        }
        v->p = p;
        v->cap = cap;
    }
    return (char *)v->p + v->n * esize;
}

/* ---- msgpack cursor ---------------------------------------------------- */

int tdm__fmt_dec_len(const uint8_t **pp, const uint8_t *end, char kind, uint64_t *len)
{
    const uint8_t *p = *pp;
    if (p >= end)
        return TDM_FMT_DEC_SHORT;
    uint8_t b = *p;
    int n = -1;
    uint64_t fixed = 0;
    switch (kind) {
    case 's':
        if (b >= 0xa0 && b <= 0xbf) n = 0, fixed = b & 0x1f;
        else if (b == 0xd9) n = 1;
        else if (b == 0xda) n = 2;
        else if (b == 0xdb) n = 4;
        break;
    case 'b':
        if (b == 0xc4) n = 1;
        else if (b == 0xc5) n = 2;
        else if (b == 0xc6) n = 4;
        break;
    case 'a':
        if (b >= 0x90 && b <= 0x9f) n = 0, fixed = b & 0x0f;
        else if (b == 0xdc) n = 2;
        else if (b == 0xdd) n = 4;
        break;
    default:
        if (b >= 0x80 && b <= 0x8f) n = 0, fixed = b & 0x0f;
        else if (b == 0xde) n = 2;
        else if (b == 0xdf) n = 4;
        break;
    }
    if (n < 0)
        return TDM_FMT_DEC_TYPE;
    if (end - p - 1 < n)
        return TDM_FMT_DEC_SHORT;
    *len = n ? tdm__fmt_be(p + 1, n) : fixed;
    *pp = p + 1 + n;
    return TDM_FMT_DEC_OK;
}

static const char *kind_text(char kind)
{
    switch (kind) {
    case 's': return "a string";
    case 'b': return "binary data";
    case 'a': return "an array";
    case 'm': return "a map";
    case 'u': return "an unsigned integer";
    default: return "an integer";
    }
}

int tdm__fmt_bad(tdm__fmt_reader *r, const uint8_t *at, const char *field, const char *what)
{
    char where[96];
    if (in_plain(r, at)) /* no byte of the file holds it: say which decompressed one */
        snprintf(where, sizeof where, "byte %llu of the payload decompressed from byte %llu",
                 (unsigned long long)(at - r->plain), (unsigned long long)r->plain_at);
    else
        snprintf(where, sizeof where, "byte %llu", (unsigned long long)tdm__fmt_off(r, at));
    if (at >= r->rec_end)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, at),
                             "field '%s' at %s runs past the end of its record", field, where);
    return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, at),
                         "bad value for field '%s' at %s: %s", field, where, what);
}

static int bad_kind(tdm__fmt_reader *r, const uint8_t *at, const char *field, char kind)
{
    char what[64];
    snprintf(what, sizeof what, "expected %s", kind_text(kind));
    return tdm__fmt_bad(r, at, field, what);
}

int tdm__fmt_u64(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, uint64_t *v)
{
    const uint8_t *at = c->p;
    int neg = 0;
    if (tdm__fmt_dec_int(&c->p, c->end, v, &neg) != TDM_FMT_DEC_OK || neg)
        return bad_kind(r, at, field, 'u');
    return 0;
}

/* An integer in [lo, hi]. */
int tdm__fmt_range(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, int64_t lo, int64_t hi,
                   int64_t *v)
{
    const uint8_t *at = c->p;
    uint64_t x = 0;
    int neg = 0;
    if (tdm__fmt_dec_int(&c->p, c->end, &x, &neg) != TDM_FMT_DEC_OK)
        return bad_kind(r, at, field, 'i');
    if ((!neg && x > (uint64_t)INT64_MAX) || (int64_t)x < lo || (int64_t)x > hi) {
        char what[96];
        snprintf(what, sizeof what, "%s%llu is outside %lld..%lld", neg ? "-" : "",
                 (unsigned long long)(neg ? -x : x), (long long)lo, (long long)hi);
        return tdm__fmt_bad(r, at, field, what);
    }
    *v = (int64_t)x;
    return 0;
}

int tdm__fmt_len(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, char kind, uint64_t *n)
{
    const uint8_t *at = c->p;
    if (tdm__fmt_dec_len(&c->p, c->end, kind, n) != TDM_FMT_DEC_OK)
        return bad_kind(r, at, field, kind);
    /* Every element takes at least one byte (a map entry two; a string's
     * bytes are its length), so a count larger than what is left is a lie. */
    uint64_t left = (uint64_t)(c->end - c->p);
    if ((kind == 'm' && *n > left / 2) || *n > left)
        return tdm__fmt_bad(r, at, field, "length runs past the end of its record");
    return 0;
}

/* A string copied into the arena, NUL-terminated. */
int tdm__fmt_str(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, const char **out)
{
    const uint8_t *at = c->p;
    uint64_t n = 0;
    if (tdm__fmt_len(r, c, field, 's', &n) != 0)
        return -1;
    if (memchr(c->p, 0, n))
        return tdm__fmt_bad(r, at, field, "string contains a NUL byte");
    char *s = tdm__fmt_alloc(r->a, n + 1);
    if (!s)
        return tdm__fmt_oom(r);
    memcpy(s, c->p, n);
    s[n] = '\0';
    c->p += n;
    *out = s;
    return 0;
}

int tdm__fmt_bool(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, uint8_t *v)
{
    if (c->p < c->end && (*c->p == 0xc2 || *c->p == 0xc3)) {
        *v = *c->p++ == 0xc3;
        return 0;
    }
    int64_t x = 0;
    if (tdm__fmt_range(r, c, field, 0, 1, &x) != 0)
        return -1;
    *v = (uint8_t)x;
    return 0;
}

/* Skips one value of any type.  Iterative, so nesting depth costs nothing;
 * every value takes at least one byte, so it ends. */
int tdm__fmt_skip(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field)
{
    uint64_t pending = 1;
    while (pending > 0) {
        const uint8_t *at = c->p;
        if (at >= c->end)
            return tdm__fmt_bad(r, at, field, "value runs past the end of its record");
        uint8_t b = *c->p++;
        pending--;
        uint64_t extra = 0, len = 0; /* bytes to skip; nested values to add */
        int lenbytes = 0;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
            continue;
        if (b >= 0x80 && b <= 0x8f) { pending += 2u * (b & 0x0f); goto check; }
        if (b >= 0x90 && b <= 0x9f) { pending += b & 0x0f; goto check; }
        if (b >= 0xa0 && b <= 0xbf) { extra = b & 0x1f; goto advance; }
        switch (b) {
        case 0xcc: case 0xd0: extra = 1; break;
        case 0xcd: case 0xd1: extra = 2; break;
        case 0xca: case 0xce: case 0xd2: extra = 4; break;
        case 0xcb: case 0xcf: case 0xd3: extra = 8; break;
        case 0xd4: extra = 2; break;
        case 0xd5: extra = 3; break;
        case 0xd6: extra = 5; break;
        case 0xd7: extra = 9; break;
        case 0xd8: extra = 17; break;
        case 0xc4: case 0xd9: lenbytes = 1; break;
        case 0xc5: case 0xda: lenbytes = 2; break;
        case 0xc6: case 0xdb: lenbytes = 4; break;
        case 0xc7: lenbytes = 1; extra = 1; break; /* ext: length, type, data */
        case 0xc8: lenbytes = 2; extra = 1; break;
        case 0xc9: lenbytes = 4; extra = 1; break;
        case 0xdc: case 0xde: lenbytes = 2; break;
        case 0xdd: case 0xdf: lenbytes = 4; break;
        default:
            return tdm__fmt_bad(r, at, field, "0xc1 is not a msgpack value");
        }
        if (lenbytes) {
            if (c->end - c->p < lenbytes)
                return tdm__fmt_bad(r, at, field, "value runs past the end of its record");
            len = tdm__fmt_be(c->p, lenbytes);
            c->p += lenbytes;
            if (b == 0xdc || b == 0xdd) {
                pending += len;
                goto check;
            }
            if (b == 0xde || b == 0xdf) {
                pending += 2 * len;
                goto check;
            }
            extra += len;
        }
    advance:
        if ((uint64_t)(c->end - c->p) < extra)
            return tdm__fmt_bad(r, at, field, "value runs past the end of its record");
        c->p += extra;
        continue;
    check:
        if (pending > (uint64_t)(c->end - c->p))
            return tdm__fmt_bad(r, at, field, "length runs past the end of its record");
    }
    return 0;
}

/* ---- maps and rows --------------------------------------------------------- */

/* Reads a record's map: where each known key's value starts.  Unknown keys
 * are skipped (a newer minor version may add them); a repeated key is an
 * error.  The map must fill the payload. */
int tdm__fmt_index_map(tdm__fmt_reader *r, tdm__fmt_cur *c, const uint8_t *pos[TDM_KEY_COUNT_])
{
    memset(pos, 0, TDM_KEY_COUNT_ * sizeof *pos);
    uint64_t n = 0;
    if (tdm__fmt_len(r, c, r->rec_name, 'm', &n) != 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *at = c->p;
        uint64_t klen = 0;
        if (tdm__fmt_len(r, c, "(map key)", 's', &klen) != 0)
            return -1;
        const char *key = (const char *)c->p;
        c->p += klen;
        int k = 0;
        for (k = 0; k < TDM_KEY_COUNT_; k++)
            if (strlen(tdm__fmt_key_names[k]) == klen &&
                memcmp(tdm__fmt_key_names[k], key, klen) == 0)
                break;
        if (k < TDM_KEY_COUNT_) {
            if (pos[k])
                return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, at),
                                     "field '%s' appears twice, at byte %llu",
                                     tdm__fmt_key_names[k],
                                     (unsigned long long)tdm__fmt_off(r, at));
            pos[k] = c->p;
        }
        if (tdm__fmt_skip(r, c, k < TDM_KEY_COUNT_ ? tdm__fmt_key_names[k] : "(unknown field)") !=
            0)
            return -1;
    }
    if (c->p != c->end)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, c->p),
                             "unexpected bytes after the record's map at byte %llu",
                             (unsigned long long)tdm__fmt_off(r, c->p));
    return 0;
}

/* Points `c` at the value of a required field. */
int tdm__fmt_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                   tdm__fmt_cur *c)
{
    if (!pos[k])
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off, "missing field '%s'",
                             tdm__fmt_key_names[k]);
    c->p = pos[k];
    c->end = r->rec_end;
    return 0;
}

/* Required fields of a record map, by type. */
int tdm__fmt_str_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       const char **out)
{
    tdm__fmt_cur c = {0};
    return tdm__fmt_field(r, pos, k, &c) || tdm__fmt_str(r, &c, tdm__fmt_key_names[k], out) ? -1
                                                                                            : 0;
}

int tdm__fmt_u64_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       uint64_t *out)
{
    tdm__fmt_cur c = {0};
    return tdm__fmt_field(r, pos, k, &c) || tdm__fmt_u64(r, &c, tdm__fmt_key_names[k], out) ? -1
                                                                                            : 0;
}

int tdm__fmt_range_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       int64_t lo, int64_t hi, int64_t *out)
{
    tdm__fmt_cur c = {0};
    return tdm__fmt_field(r, pos, k, &c) ||
                   tdm__fmt_range(r, &c, tdm__fmt_key_names[k], lo, hi, out)
               ? -1
               : 0;
}

/* Opens a row array of at least `fields` elements; *extra is how many
 * trailing elements (from a newer minor version) follow them. */
int tdm__fmt_row_begin(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *what, uint64_t fields,
                       uint64_t *extra)
{
    const uint8_t *at = c->p;
    uint64_t n = 0;
    if (tdm__fmt_len(r, c, what, 'a', &n) != 0)
        return -1;
    if (n < fields) {
        char msg[96];
        snprintf(msg, sizeof msg, "a row of %llu fields, needs %llu",
                 (unsigned long long)n, (unsigned long long)fields);
        return tdm__fmt_bad(r, at, what, msg);
    }
    *extra = n - fields;
    return 0;
}

int tdm__fmt_row_end(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *what, uint64_t extra)
{
    for (uint64_t i = 0; i < extra; i++)
        if (tdm__fmt_skip(r, c, what) != 0)
            return -1;
    return 0;
}

int tdm__fmt_optional_range(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, int64_t lo,
                            int64_t hi, uint64_t *extra, int64_t *v)
{
    if (*extra == 0)
        return 0;
    if (tdm__fmt_range(r, c, field, lo, hi, v) != 0)
        return -1;
    (*extra)--;
    return 0;
}

/* A table record: {"first": n, "rows": [...]}.  Points c at the first row. */
int tdm__fmt_table_begin(tdm__fmt_reader *r, tdm__fmt_cur *c, size_t have, uint64_t *rows)
{
    const uint8_t *pos[TDM_KEY_COUNT_];
    uint64_t first = 0;
    tdm__fmt_cur f = {0};
    if (tdm__fmt_index_map(r, c, pos) != 0 || tdm__fmt_field(r, pos, TDM_KEY_FIRST, &f) != 0 ||
        tdm__fmt_u64(r, &f, "first", &first) != 0)
        return -1;
    if (first != have)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, pos[TDM_KEY_FIRST]),
                             "field 'first' at byte %llu is %llu, but %zu rows came before",
                             (unsigned long long)tdm__fmt_off(r, pos[TDM_KEY_FIRST]),
                             (unsigned long long)first, have);
    if (tdm__fmt_field(r, pos, TDM_KEY_ROWS, c) != 0 || tdm__fmt_len(r, c, "rows", 'a', rows) != 0)
        return -1;
    return 0;
}

/* A string id, as a pointer into the table. */
int tdm__fmt_sid(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field_name, const char **s)
{
    int64_t id = 0;
    if (r->strings.n == 0)
        return tdm__fmt_bad(r, c->p, field_name, "no string table before it");
    if (tdm__fmt_range(r, c, field_name, 0, (int64_t)r->strings.n - 1, &id) != 0)
        return -1;
    *s = ((const char **)r->strings.p)[id];
    return 0;
}

int tdm__fmt_stat(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *name, tdm_stat *s)
{
    uint64_t extra = 0;
    int64_t v[TDM_FMT_STAT_FIELDS];
    if (tdm__fmt_row_begin(r, c, name, TDM_FMT_STAT_FIELDS, &extra) != 0)
        return -1;
    for (int i = 0; i < TDM_FMT_STAT_FIELDS; i++)
        if (tdm__fmt_range(r, c, name, INT64_MIN, INT64_MAX, &v[i]) != 0)
            return -1;
    s->current = v[0];
    s->peak = v[1];
    s->allocated = v[2];
    s->freed = v[3];
    return tdm__fmt_row_end(r, c, name, extra);
}
