/* runtime/config_alloc.c: the TIDEMARK_CONF keys of the caching allocator
 * that take PyTorch's values: `max_split_size` (a size),
 * `roundup_power2_divisions` (one power of two, or PyTorch's list
 * [MiB:N,...,>:N]) and `garbage_collection_threshold` (a fraction).
 *
 * Invariants: config.c's rule: the parsers accept exactly what
 * docs/configuration.md documents, fill `why` with one line otherwise,
 * and never print, allocate or touch globals.  Fractions are parsed by
 * hand, so that the program's locale cannot change what '.' means.
 *
 * Lock: none; pure functions over caller memory.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Most divisions accepted: keeps 512 x divisions far from overflow. */
#define DIV_MAX ((uint64_t)1 << 30)

/* A power of two >= 1 written in decimal digits, the whole of [b, e). */
static int parse_pow2(const char *b, const char *e, uint64_t *out)
{
    uint64_t v = 0;
    if (b == e)
        return -1;
    for (const char *p = b; p < e; p++) {
        if (!isdigit((unsigned char)*p) || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v == 0 || (v & (v - 1)) != 0)
        return -1;
    *out = v;
    return 0;
}

static unsigned log2_of(uint64_t pow2)
{
    return 63u - (unsigned)__builtin_clzll(pow2);
}

int tdm__config_parse_bytes(const tdm__conf_key *key, const char *value,
                            void *field, char *why, size_t why_len)
{
    (void)key;
    return tdm__config_parse_size(value, (uint64_t *)field, why, why_len);
}

/* One entry of the list, "MiB:N" or ">:N", into div[]. */
static int roundup_entry(const char *b, const char *e, uint32_t *div,
                         int *have, unsigned *last, char *why, size_t why_len)
{
    tdm__config_trim(&b, &e);
    const char *colon = memchr(b, ':', (size_t)(e - b));
    const char *kb = b, *ke = colon ? colon : e;
    const char *vb = colon ? colon + 1 : e, *ve = e;
    tdm__config_trim(&kb, &ke);
    tdm__config_trim(&vb, &ve);
    int rest = ke - kb == 1 && *kb == '>';
    int shown = (int)(e - b > 32 ? 32 : e - b);
    uint64_t mib = 0, v = 0;
    if (!colon || (!rest && parse_pow2(kb, ke, &mib) != 0)) {
        tdm__config_why(why, why_len,
                        "entry '%.*s': expected MiB:divisions with MiB a power of two, "
                        "or >:divisions", shown, b);
        return -1;
    }
    /* 0 turns rounding off for the entry's intervals (PyTorch's "power of
     * 2 or 0"). */
    int zero = ve - vb == 1 && *vb == '0';
    if (!zero && (parse_pow2(vb, ve, &v) != 0 || v > DIV_MAX)) {
        tdm__config_why(why, why_len,
                        "entry '%.*s': divisions must be a power of two, or 0 for none",
                        shown, b);
        return -1;
    }
    if (rest) {
        for (unsigned i = *have ? *last + 1 : 0; i < TDM_ROUNDUP_INTERVALS; i++)
            div[i] = (uint32_t)v;
        *last = TDM_ROUNDUP_INTERVALS - 1;
    } else {
        unsigned idx = log2_of(mib);
        if (idx >= TDM_ROUNDUP_INTERVALS)
            idx = TDM_ROUNDUP_INTERVALS - 1;
        for (unsigned i = 0; !*have && i < idx; i++)
            div[i] = (uint32_t)v;
        div[idx] = (uint32_t)v;
        *last = idx;
    }
    *have = 1;
    return 0;
}

/* 0 (off); one power of two for every size interval; or a list
 * [MiB:divisions,...,>:divisions] of interval starts in MiB (powers of
 * two; [1 MiB, 2 MiB) is interval 0, sizes below 1 MiB go with it).  The
 * first entry also covers the intervals below it; `>` covers every
 * interval after the previous entry. */
int tdm__config_parse_roundup(const tdm__conf_key *key, const char *value,
                              void *field, char *why, size_t why_len)
{
    (void)key;
    uint32_t div[TDM_ROUNDUP_INTERVALS] = {0};
    size_t len = strlen(value);
    if (strcmp(value, "0") == 0) {
        memcpy(field, div, sizeof div);
        return 0;
    }
    if (value[0] != '[') {
        uint64_t v;
        if (parse_pow2(value, value + len, &v) != 0 || v > DIV_MAX) {
            tdm__config_why(why, why_len,
                            "expected a power of two, or a list such as "
                            "[256:1,512:2,>:4]");
            return -1;
        }
        for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
            div[i] = (uint32_t)v;
        memcpy(field, div, sizeof div);
        return 0;
    }
    if (value[len - 1] != ']') {
        tdm__config_why(why, why_len, "a list must end with ']'");
        return -1;
    }
    const char *p = value + 1, *stop = value + len - 1;
    int have = 0;
    unsigned last = 0;
    while (p < stop) {
        const char *e = p;
        while (e < stop && *e != ',')
            e++;
        if (roundup_entry(p, e, div, &have, &last, why, why_len) != 0)
            return -1;
        p = e < stop ? e + 1 : e;
    }
    if (!have) {
        tdm__config_why(why, why_len, "the list is empty");
        return -1;
    }
    memcpy(field, div, sizeof div);
    return 0;
}

int tdm__config_parse_threshold(const tdm__conf_key *key, const char *value,
                                void *field, char *why, size_t why_len)
{
    (void)key;
    const char *p = value;
    double v = 0.0;
    int digits = 0;
    for (; isdigit((unsigned char)*p); p++, digits++)
        v = v * 10.0 + (*p - '0');
    if (*p == '.') {
        double scale = 0.1;
        for (p++; isdigit((unsigned char)*p); p++, digits++, scale /= 10.0)
            v += (*p - '0') * scale;
    }
    if (digits == 0 || *p != '\0' || !(v == 0.0 || (v > 0.0 && v < 1.0))) {
        tdm__config_why(why, why_len,
                        "expected 0 (off) or a fraction between 0 and 1, such as 0.8");
        return -1;
    }
    *(double *)field = v;
    return 0;
}
