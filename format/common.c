/* format/common.c: names and messages shared by every layer and by the
 * command-line tool: version, status codes, categories, actions, all
 * generated from the X-macro lists in tidemark.h and event.h, so a new
 * status or action cannot be added without its name; and the "did you
 * mean" helpers of common.h. */
#include <stdint.h>
#include <string.h>

#include "tidemark.h"
#include "common.h"
#include "event.h"

unsigned tdm_version(void) { return TDM_VERSION_HEX; }

const char *tdm_version_string(void) { return TDM_VERSION_STRING; }

static const char *const status_names[] = {
#define XX(name, msg) "TDM_" #name,
    TDM_STATUS_MAP(XX)
#undef XX
};

static const char *const status_messages[] = {
#define XX(name, msg) msg,
    TDM_STATUS_MAP(XX)
#undef XX
};

const char *tdm_status_name(tdm_status status)
{
    if ((unsigned)status >= TDM_STATUS_COUNT_)
        return "TDM_UNKNOWN_STATUS";
    return status_names[status];
}

const char *tdm_strerror(tdm_status status)
{
    if ((unsigned)status >= TDM_STATUS_COUNT_)
        return "unknown status";
    return status_messages[status];
}

static const char *const category_names[] = {
#define XX(name, str) str,
    TDM_CATEGORY_MAP(XX)
#undef XX
};

const char *tdm_category_name(tdm_category category)
{
    if ((unsigned)category >= TDM_CATEGORY_COUNT_)
        return "unknown";
    return category_names[category];
}

static const char *const action_names[] = {
#define XX(name, str) str,
    TDM_ACTION_MAP(XX)
#undef XX
};

const char *tdm__action_name(unsigned action)
{
    if (action >= TDM_ACTION_COUNT_)
        return NULL;
    return action_names[action];
}

int tdm__action_from_name(const char *name)
{
    for (unsigned i = 0; name && i < TDM_ACTION_COUNT_; i++)
        if (strcmp(action_names[i], name) == 0)
            return (int)i;
    return -1;
}

/* ---- did you mean ------------------------------------------------------- */

static unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Levenshtein over one row; with fold_case, ASCII letters compare without
 * case (the C locale's, whatever the program's locale is). */
static size_t distance(const char *a, const char *b, int fold_case)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[TDM__EDIT_DISTANCE_MAX + 1];
    if (la > TDM__EDIT_DISTANCE_MAX || lb > TDM__EDIT_DISTANCE_MAX)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        unsigned char ca = (unsigned char)a[i - 1];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned char cb = (unsigned char)b[j - 1];
            size_t up = row[j];
            int differ = fold_case ? fold(ca) != fold(cb) : ca != cb;
            size_t best = diag + (size_t)differ;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

size_t tdm__edit_distance(const char *a, const char *b)
{
    return distance(a, b, 0);
}

const char *tdm__did_you_mean(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX, best_exact = SIZE_MAX;
    for (size_t i = 0; word && candidates && i < n; i++) {
        if (!candidates[i])
            continue;
        size_t d = distance(word, candidates[i], 1);
        if (d > 2 || d > best_d) /* suggest only within 2 edits */
            continue;
        size_t exact = distance(word, candidates[i], 0);
        if (d < best_d || exact < best_exact) {
            best = candidates[i];
            best_d = d;
            best_exact = exact;
        }
    }
    return best;
}

/* The length of the valid UTF-8 sequence of more than one byte at
 * in[0, n) and its code point; 0 when there is none (1 when the bytes end
 * inside one that may yet be valid: *short_ set). */
static size_t utf8_seq(const unsigned char *in, size_t n, uint32_t *cp, int *short_)
{
    unsigned char b = in[0];
    size_t len;
    uint32_t v, min;
    *short_ = 0;
    if (b >= 0xc2 && b <= 0xdf)
        len = 2, v = b & 0x1f, min = 0x80;
    else if (b >= 0xe0 && b <= 0xef)
        len = 3, v = b & 0x0f, min = 0x800;
    else if (b >= 0xf0 && b <= 0xf4)
        len = 4, v = b & 0x07, min = 0x10000;
    else
        return 0;
    for (size_t i = 1; i < len; i++) {
        if (i >= n) {
            *short_ = 1;
            return 0;
        }
        if ((in[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (in[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

size_t tdm__escape_text(const char *in, size_t n, char *out, size_t cap, int keep_lines,
                        int final, size_t *used)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char b = p[i];
        size_t len = 1;
        int escape;
        if (b < 0x80) {
            escape = (b < 0x20 && !(keep_lines && (b == '\n' || b == '\t'))) || b == 0x7f;
        } else {
            uint32_t cp = 0;
            int short_ = 0;
            size_t k = utf8_seq(p + i, n - i, &cp, &short_);
            if (short_ && !final)
                break; /* the rest of it is still to come */
            escape = k == 0 || cp <= 0x9f;
            len = k ? k : 1;
        }
        if (o + (escape ? 4 * len : len) > cap)
            break;
        for (size_t k = 0; k < len; k++) {
            if (escape)
                o += tdm__hex_escape(out + o, p[i + k]);
            else
                out[o++] = (char)p[i + k];
        }
        i += len;
    }
    *used = i;
    return o;
}
