/* viewer-export/export/json.c: the JSON writer and scanner of json.h.
 *
 * Writer invariant: buf[0..len) are bytes not yet written to `out`; a
 * flush happens before the buffer would overflow, so any single append of
 * up to TDM_JW_SLACK bytes never needs a check.  Reader invariant: p never
 * passes end; the first error is kept and every later call fails.
 */
#include "json.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define JW_CAP (1u << 20)
#define JW_SLACK 64 /* the longest fixed-size piece (a number, a key prefix) */

/* ---- writer --------------------------------------------------------------- */

tdm_status tdm__jw_init(tdm_jw *w, FILE *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->cap = JW_CAP;
    w->buf = malloc(w->cap);
    if (!w->buf) {
        w->failed = 1;
        return TDM_HOST_OUT_OF_MEMORY;
    }
    return TDM_OK;
}

void tdm__jw_flush(tdm_jw *w)
{
    if (w->len && !w->failed && fwrite(w->buf, 1, w->len, w->out) != w->len)
        w->failed = 1;
    w->len = 0;
}

tdm_status tdm__jw_finish(tdm_jw *w)
{
    if (w->buf)
        tdm__jw_flush(w);
    if (w->out && fflush(w->out) != 0)
        w->failed = 1;
    free(w->buf);
    w->buf = NULL;
    return w->failed ? TDM_IO_ERROR : TDM_OK;
}

/* Room for n more bytes, flushing first if needed; NULL when failed. */
static inline char *room(tdm_jw *w, size_t n)
{
    if (!w->buf)
        return NULL;
    if (w->len + n > w->cap) {
        tdm__jw_flush(w);
        if (n > w->cap)
            return NULL;
    }
    return w->buf + w->len;
}

void tdm__jw_raw(tdm_jw *w, const char *s, size_t n)
{
    if (!w->buf)
        return;
    while (n) {
        if (w->len == w->cap)
            tdm__jw_flush(w);
        size_t k = w->cap - w->len < n ? w->cap - w->len : n;
        memcpy(w->buf + w->len, s, k);
        w->len += k;
        s += k;
        n -= k;
    }
}

static inline void put(tdm_jw *w, char c)
{
    char *p = room(w, 1);
    if (p) {
        *p = c;
        w->len++;
    }
}

void tdm__jw_sep(tdm_jw *w)
{
    if (w->depth > 0 && w->depth <= TDM_JW_DEPTH) {
        if (w->has_item[w->depth - 1])
            put(w, ',');
        w->has_item[w->depth - 1] = 1;
    }
}

void tdm__jw_open(tdm_jw *w, char c)
{
    put(w, c);
    if (w->depth < TDM_JW_DEPTH)
        w->has_item[w->depth] = 0;
    w->depth++;
}

void tdm__jw_close(tdm_jw *w, char c)
{
    put(w, c);
    if (w->depth > 0)
        w->depth--;
}

void tdm__jw_strn(tdm_jw *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put(w, '"');
    size_t run = 0; /* bytes that need no escape, copied in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        tdm__jw_raw(w, s + i - run, run);
        run = 0;
        char e[6] = {'\\', 0};
        switch (c) {
        case '"': e[1] = '"'; tdm__jw_raw(w, e, 2); break;
        case '\\': e[1] = '\\'; tdm__jw_raw(w, e, 2); break;
        case '\n': e[1] = 'n'; tdm__jw_raw(w, e, 2); break;
        case '\t': e[1] = 't'; tdm__jw_raw(w, e, 2); break;
        case '\r': e[1] = 'r'; tdm__jw_raw(w, e, 2); break;
        default:
            e[1] = 'u'; e[2] = '0'; e[3] = '0';
            e[4] = hex[c >> 4]; e[5] = hex[c & 15];
            tdm__jw_raw(w, e, 6);
        }
    }
    tdm__jw_raw(w, s + n - run, run);
    put(w, '"');
}

void tdm__jw_str(tdm_jw *w, const char *s)
{
    tdm__jw_strn(w, s ? s : "", s ? strlen(s) : 0);
}

void tdm__jw_u64(tdm_jw *w, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char *p = room(w, (size_t)n);
    if (!p)
        return;
    for (int i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    w->len += (size_t)n;
}

void tdm__jw_i64(tdm_jw *w, int64_t v)
{
    if (v < 0) {
        put(w, '-');
        tdm__jw_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        tdm__jw_u64(w, (uint64_t)v);
    }
}

void tdm__jw_us(tdm_jw *w, int64_t ns)
{
    uint64_t a;
    if (ns < 0) {
        put(w, '-');
        a = (uint64_t)0 - (uint64_t)ns;
    } else {
        a = (uint64_t)ns;
    }
    tdm__jw_u64(w, a / 1000);
    char *p = room(w, 4);
    if (!p)
        return;
    unsigned f = (unsigned)(a % 1000);
    p[0] = '.';
    p[1] = (char)('0' + f / 100);
    p[2] = (char)('0' + f / 10 % 10);
    p[3] = (char)('0' + f % 10);
    w->len += 4;
}

void tdm__jw_key(tdm_jw *w, const char *key)
{
    tdm__jw_sep(w);
    tdm__jw_str(w, key);
    put(w, ':');
}

void tdm__jw_kstr(tdm_jw *w, const char *key, const char *s)
{
    tdm__jw_key(w, key);
    tdm__jw_str(w, s);
}

void tdm__jw_ku64(tdm_jw *w, const char *key, uint64_t v)
{
    tdm__jw_key(w, key);
    tdm__jw_u64(w, v);
}

void tdm__jw_ki64(tdm_jw *w, const char *key, int64_t v)
{
    tdm__jw_key(w, key);
    tdm__jw_i64(w, v);
}

/* ---- reader --------------------------------------------------------------- */

void tdm__jr_init(tdm_jr *r, const char *data, size_t len)
{
    r->p = r->base = data;
    r->end = data + len;
    r->error = NULL;
    r->error_at = 0;
}

static int jr_fail(tdm_jr *r, const char *what)
{
    if (!r->error) {
        r->error = what;
        r->error_at = (size_t)(r->p - r->base);
    }
    return -1;
}

static void ws(tdm_jr *r)
{
    while (r->p < r->end &&
           (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

char tdm__jr_peek(tdm_jr *r)
{
    ws(r);
    return r->p < r->end && !r->error ? *r->p : 0;
}

int tdm__jr_string(tdm_jr *r, const char **s, size_t *len)
{
    if (r->error)
        return -1;
    ws(r);
    if (r->p >= r->end || *r->p != '"')
        return jr_fail(r, "expected a string");
    const char *start = ++r->p;
    while (r->p < r->end) {
        unsigned char c = (unsigned char)*r->p;
        if (c == '"') {
            *s = start;
            *len = (size_t)(r->p - start);
            r->p++;
            return 0;
        }
        if (c < 0x20)
            return jr_fail(r, "control character in a string");
        if (c == '\\') {
            if (r->end - r->p < 2)
                break;
            char e = r->p[1];
            if (e == 'u') {
                if (r->end - r->p < 6)
                    break;
                for (int i = 2; i < 6; i++) {
                    char h = r->p[i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return jr_fail(r, "bad \\u escape");
                }
                r->p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || !e)
                return jr_fail(r, "bad escape in a string");
            r->p += 2;
            continue;
        }
        r->p++;
    }
    return jr_fail(r, "unterminated string");
}

int tdm__jr_number(tdm_jr *r, double *d, int64_t *i, int *is_int)
{
    if (r->error)
        return -1;
    ws(r);
    const char *s = r->p;
    const char *q = s;
    if (q < r->end && *q == '-')
        q++;
    if (q >= r->end || *q < '0' || *q > '9')
        return jr_fail(r, "expected a number");
    if (*q == '0')
        q++;
    else
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    int integral = 1;
    if (q < r->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return jr_fail(r, "bad number");
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < r->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return jr_fail(r, "bad number");
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - s);
    r->p = q;
    if (d || i) {
        if (n >= sizeof tmp) {
            /* Only absurdly long numbers: their value is out of any range
             * we use; read the leading part as a double. */
            n = sizeof tmp - 1;
            integral = 0;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        double v = strtod(tmp, NULL);
        if (d)
            *d = v;
        int fits = 0;
        if (integral && i) {
            char *end;
            long long ll = strtoll(tmp, &end, 10);
            fits = *end == '\0' && !(ll == LLONG_MAX || ll == LLONG_MIN);
            if (fits)
                *i = ll;
        }
        if (is_int)
            *is_int = fits;
    }
    return 0;
}

static int skip_depth(tdm_jr *r, int depth);

static int skip_container(tdm_jr *r, int depth, char open)
{
    if (depth >= TDM_JR_MAX_DEPTH)
        return jr_fail(r, "nested too deep");
    char close = open == '{' ? '}' : ']';
    r->p++; /* the opener */
    ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        if (open == '{') {
            const char *k;
            size_t kl;
            if (tdm__jr_string(r, &k, &kl) != 0)
                return -1;
            ws(r);
            if (r->p >= r->end || *r->p != ':')
                return jr_fail(r, "expected ':'");
            r->p++;
        }
        if (skip_depth(r, depth + 1) != 0)
            return -1;
        ws(r);
        if (r->p >= r->end)
            return jr_fail(r, "unterminated container");
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            return 0;
        }
        return jr_fail(r, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int literal(tdm_jr *r, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0)
        return jr_fail(r, "unexpected character");
    r->p += n;
    return 0;
}

static int skip_depth(tdm_jr *r, int depth)
{
    const char *s;
    size_t n;
    switch (tdm__jr_peek(r)) {
    case '{':
    case '[':
        return skip_container(r, depth, *r->p);
    case '"':
        return tdm__jr_string(r, &s, &n);
    case 't':
        return literal(r, "true");
    case 'f':
        return literal(r, "false");
    case 'n':
        return literal(r, "null");
    case 0:
        return jr_fail(r, r->error ? r->error : "unexpected end of input");
    default:
        if (*r->p != '-' && (*r->p < '0' || *r->p > '9'))
            return jr_fail(r, "unexpected character");
        return tdm__jr_number(r, NULL, NULL, NULL);
    }
}

int tdm__jr_skip(tdm_jr *r)
{
    if (r->error)
        return -1;
    return skip_depth(r, 0);
}

/* Walking state lives in the input position: after begin, the reader is
 * just past the opener; `next` eats a separator when one is due.  A
 * container is "fresh" right after its opener, which we detect by the
 * byte before the (whitespace-skipped) position being the opener. */
static int walk_begin(tdm_jr *r, char open)
{
    if (tdm__jr_peek(r) != open)
        return jr_fail(r, open == '{' ? "expected an object" : "expected an array");
    r->p++;
    return 0;
}

static int walk_next(tdm_jr *r, char open)
{
    char close = open == '{' ? '}' : ']';
    char c = tdm__jr_peek(r);
    if (r->error)
        return -1;
    /* Look back over whitespace: just after the opener, or after an element. */
    const char *b = r->p;
    while (b > r->base && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t'))
        b--;
    int fresh = b > r->base && b[-1] == open;
    if (c == close) {
        r->p++;
        return 0;
    }
    if (!fresh) {
        if (c != ',')
            return jr_fail(r, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        r->p++;
    }
    if (!tdm__jr_peek(r))
        return jr_fail(r, "unterminated container");
    return 1;
}

int tdm__jr_object_begin(tdm_jr *r) { return walk_begin(r, '{'); }
int tdm__jr_array_begin(tdm_jr *r) { return walk_begin(r, '['); }

int tdm__jr_object_next(tdm_jr *r, const char **key, size_t *keylen)
{
    int k = walk_next(r, '{');
    if (k != 1)
        return k;
    if (tdm__jr_string(r, key, keylen) != 0)
        return -1;
    if (tdm__jr_peek(r) != ':')
        return jr_fail(r, "expected ':'");
    r->p++;
    ws(r);
    return 1;
}

int tdm__jr_array_next(tdm_jr *r) { return walk_next(r, '['); }

int tdm__jr_key_is(const char *key, size_t keylen, const char *want)
{
    return strlen(want) == keylen && memcmp(key, want, keylen) == 0;
}
