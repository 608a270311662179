/* viewer-export/export/json.h: the little JSON the exporters need, written and
 * read by us.
 *
 * Writer (tdm_jw): appends to a large buffer and flushes it to a FILE in
 * big writes, formatting integers by hand; the exporters write millions
 * of events, and printf per number would dominate.  Strings are escaped
 * as RFC 8259 asks (quote, backslash, control characters); bytes >= 0x80
 * pass through (the writer's input is UTF-8 or treated as such).  The
 * first write error sticks and is reported by tdm__jw_finish().  Commas
 * are the caller's business: tdm__jw_sep() writes one when the current
 * container already has an element.
 *
 * Reader (tdm_jr): a validating scanner over a buffer, not a tree: it
 * finds a value's extent (to skip or copy it), walks an object's members,
 * and reads numbers and strings.  That is all --merge needs to splice
 * events into a profiler trace of hundreds of MB without holding a tree.
 * Depth is limited (TDM_JR_MAX_DEPTH) so hostile input cannot blow the
 * stack.
 *
 * No global state; a writer or a reader is used by one thread.
 */
#ifndef TDM_VIEWER_JSON_H
#define TDM_VIEWER_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"

/* ---- writer --------------------------------------------------------------- */

#define TDM_JW_DEPTH 32

typedef struct tdm_jw {
    FILE *out;
    char *buf;        /* pending bytes */
    size_t len, cap;  /* bytes pending, buffer size */
    int failed;       /* a write failed (or the buffer could not be made) */
    int depth;
    uint8_t has_item[TDM_JW_DEPTH]; /* per open container: an element written */
} tdm_jw;

tdm_status tdm__jw_init(tdm_jw *w, FILE *out);
/* Flushes and frees; TDM_IO_ERROR if any write failed. */
tdm_status tdm__jw_finish(tdm_jw *w);

void tdm__jw_flush(tdm_jw *w);
void tdm__jw_raw(tdm_jw *w, const char *s, size_t n);
static inline void tdm__jw_lit(tdm_jw *w, const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    tdm__jw_raw(w, s, n);
}
/* Containers: open/close, and a comma before an element if needed. */
void tdm__jw_open(tdm_jw *w, char c);  /* '{' or '[' */
void tdm__jw_close(tdm_jw *w, char c); /* '}' or ']' */
void tdm__jw_sep(tdm_jw *w);
/* "key": (with the separator before it). */
void tdm__jw_key(tdm_jw *w, const char *key);
/* Values (no separator: after a key, or after tdm__jw_sep in an array). */
void tdm__jw_str(tdm_jw *w, const char *s);
void tdm__jw_strn(tdm_jw *w, const char *s, size_t n);
void tdm__jw_u64(tdm_jw *w, uint64_t v);
void tdm__jw_i64(tdm_jw *w, int64_t v);
/* A duration or time in ns written as µs with 3 decimals ("12.345"). */
void tdm__jw_us(tdm_jw *w, int64_t ns);
/* Shorthands: "key": value, separator included. */
void tdm__jw_kstr(tdm_jw *w, const char *key, const char *s);
void tdm__jw_ku64(tdm_jw *w, const char *key, uint64_t v);
void tdm__jw_ki64(tdm_jw *w, const char *key, int64_t v);

/* ---- reader --------------------------------------------------------------- */

#define TDM_JR_MAX_DEPTH 512

typedef struct tdm_jr {
    const char *p, *end; /* the rest of the input */
    const char *base;    /* the whole input, for error offsets */
    const char *error;   /* NULL, or what went wrong */
    size_t error_at;     /* byte offset of the error */
} tdm_jr;

void tdm__jr_init(tdm_jr *r, const char *data, size_t len);
/* Skips whitespace; returns the next byte (0 at the end). */
char tdm__jr_peek(tdm_jr *r);
/* Skips one whole value, validating it.  -1 on error (r->error set). */
int tdm__jr_skip(tdm_jr *r);
/* Object walking: call tdm__jr_object_begin at '{', then
 * tdm__jr_object_next until it returns 0 (end) or -1 (error); on 1 the key
 * is in key/keylen (raw, escapes not decoded) and the reader sits at the
 * member's value, which the caller must consume (skip or read). */
int tdm__jr_object_begin(tdm_jr *r);
int tdm__jr_object_next(tdm_jr *r, const char **key, size_t *keylen);
/* Array walking, the same way: 1 = at an element, 0 = end, -1 = error. */
int tdm__jr_array_begin(tdm_jr *r);
int tdm__jr_array_next(tdm_jr *r);
/* Reads a number (as a double and, when it is an integer that fits, as an
 * int64 in *i with *is_int = 1). */
int tdm__jr_number(tdm_jr *r, double *d, int64_t *i, int *is_int);
/* Reads a string's raw bytes (escapes not decoded). */
int tdm__jr_string(tdm_jr *r, const char **s, size_t *len);
/* Nonzero when `key` (raw, from object_next) equals `want`. */
int tdm__jr_key_is(const char *key, size_t keylen, const char *want);

#endif
