/* viewer-export/export/pickle_write.h: a minimal, fast pickler for the subset of
 * Python's pickle format that PyTorch's memory viewer reads
 * (../shared/reference/pytorch-snapshot-format.md §3.1).
 *
 * It writes protocol 4 without FRAME and without memo: EMPTY_DICT, MARK …
 * SETITEMS, EMPTY_LIST, MARK … APPENDS, TUPLE2, SHORT_BINUNICODE /
 * BINUNICODE, BININT1 / BININT2 / BININT / LONG1 (at most 8 bytes, so every
 * integer is a signed 64-bit value), NEWTRUE / NEWFALSE, NONE, BINFLOAT,
 * STOP.  Nothing else, ever: the exporter's output passes an opcode
 * whitelist by construction.
 *
 * Containers are written as "begin, item…, end" through a tdm_pkw_seq
 * counter, which closes a MARK … APPENDS (or SETITEMS) batch every
 * TDM_PKW_BATCH items, as CPython does: the JavaScript viewer spreads a
 * batch into a function call, and a million arguments would overflow its
 * stack.
 *
 * Output goes either to a FILE (buffered here in 1 MiB, written with
 * fwrite) or to a growing memory buffer.  Errors are sticky: the first
 * failure is kept in `status` and every later call does nothing, so a
 * writer is checked once, at tdm__pkw_finish().  One writer per thread; no
 * locks, no global state.
 */
#ifndef TDM_VIEWER_PICKLE_WRITE_H
#define TDM_VIEWER_PICKLE_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tidemark.h"

/* Items per MARK … APPENDS / SETITEMS batch (CPython uses 1000 too). */
#define TDM_PKW_BATCH 1000u

/* Opcodes written (byte values of Python's pickle). */
enum {
    TDM_PK_MARK = '(',
    TDM_PK_STOP = '.',
    TDM_PK_BININT = 'J',
    TDM_PK_BININT1 = 'K',
    TDM_PK_BININT2 = 'M',
    TDM_PK_NONE = 'N',
    TDM_PK_BINFLOAT = 'G',
    TDM_PK_BINUNICODE = 'X',
    TDM_PK_EMPTY_LIST = ']',
    TDM_PK_APPENDS = 'e',
    TDM_PK_SETITEMS = 'u',
    TDM_PK_EMPTY_DICT = '}',
    TDM_PK_PROTO = 0x80,
    TDM_PK_TUPLE2 = 0x86,
    TDM_PK_NEWTRUE = 0x88,
    TDM_PK_NEWFALSE = 0x89,
    TDM_PK_LONG1 = 0x8a,
    TDM_PK_SHORT_BINUNICODE = 0x8c,
    TDM_PK_BINPUT = 'q',      /* memo[1-byte index] = top of stack */
    TDM_PK_LONG_BINPUT = 'r', /* memo[4-byte LE index] = top of stack */
    TDM_PK_BINGET = 'h',      /* push memo[1-byte index] */
    TDM_PK_LONG_BINGET = 'j', /* push memo[4-byte LE index] */
};

typedef struct tdm_pkw {
    unsigned char *buf; /* pending bytes (file mode) or everything (memory) */
    size_t len;         /* bytes used in buf */
    size_t cap;         /* bytes allocated in buf */
    FILE *file;         /* NULL in memory mode */
    uint64_t flushed;   /* bytes already handed to fwrite */
    tdm_status status;  /* first failure; TDM_OK while all is well */
} tdm_pkw;

/* Items written so far into the open list or dict (a dict item is one
 * key and its value). */
typedef struct tdm_pkw_seq {
    uint64_t n;
} tdm_pkw_seq;

/* File mode: bytes are buffered and written to `file` (not closed here). */
tdm_status tdm__pkw_init_file(tdm_pkw *w, FILE *file);
/* Memory mode: tdm__pkw_take() hands the bytes over. */
tdm_status tdm__pkw_init_mem(tdm_pkw *w);
/* File mode: writes what is buffered and fflush()es.  Returns the sticky
 * status (TDM_IO_ERROR when a write failed). */
tdm_status tdm__pkw_finish(tdm_pkw *w);
/* Memory mode: the bytes written (malloc'd; the caller frees them), and
 * resets the writer to empty.  NULL when the writer failed. */
unsigned char *tdm__pkw_take(tdm_pkw *w, size_t *len);
/* Frees the buffer (both modes). */
void tdm__pkw_destroy(tdm_pkw *w);
/* Total bytes written so far (flushed and pending). */
static inline uint64_t tdm__pkw_tell(const tdm_pkw *w) { return w->flushed + w->len; }

/* Makes room for `n` more bytes; 0 on success.  The slow path flushes or
 * grows. */
int tdm__pkw_reserve_slow(tdm_pkw *w, size_t n);
static inline int tdm__pkw_reserve(tdm_pkw *w, size_t n)
{
    if (__builtin_expect(w->cap - w->len >= n && w->status == TDM_OK, 1))
        return 0;
    return tdm__pkw_reserve_slow(w, n);
}

static inline void tdm__pkw_byte(tdm_pkw *w, unsigned char op)
{
    if (tdm__pkw_reserve(w, 1) == 0)
        w->buf[w->len++] = op;
}

/* Bytes that are already a pickle fragment (e.g. a cached frames list). */
static inline void tdm__pkw_raw(tdm_pkw *w, const void *data, size_t n)
{
    if (tdm__pkw_reserve(w, n) == 0) {
        memcpy(w->buf + w->len, data, n);
        w->len += n;
    }
}

void tdm__pkw_proto(tdm_pkw *w, unsigned version);
static inline void tdm__pkw_stop(tdm_pkw *w) { tdm__pkw_byte(w, TDM_PK_STOP); }
static inline void tdm__pkw_none(tdm_pkw *w) { tdm__pkw_byte(w, TDM_PK_NONE); }
static inline void tdm__pkw_bool(tdm_pkw *w, int v)
{
    tdm__pkw_byte(w, v ? TDM_PK_NEWTRUE : TDM_PK_NEWFALSE);
}
static inline void tdm__pkw_tuple2(tdm_pkw *w) { tdm__pkw_byte(w, TDM_PK_TUPLE2); }

/* Any signed 64-bit value, in the shortest of BININT1/BININT2/BININT/LONG1.
 * Unsigned quantities (addresses) are passed through int64_t on purpose:
 * the reference's §3.3 asks for two's-complement signed 64-bit. */
void tdm__pkw_int(tdm_pkw *w, int64_t v);
void tdm__pkw_float(tdm_pkw *w, double v);
/* A str from bytes that are already valid UTF-8 (constant keys). */
void tdm__pkw_str(tdm_pkw *w, const char *s, size_t len);
/* A str from bytes of unknown encoding: invalid UTF-8 sequences (and
 * UTF-16 surrogates, which browsers reject) become U+FFFD, so both CPython
 * and the viewer decode it.  NULL is written as "". */
void tdm__pkw_str_utf8(tdm_pkw *w, const char *s, size_t len);
static inline void tdm__pkw_cstr(tdm_pkw *w, const char *s)
{
    tdm__pkw_str_utf8(w, s ? s : "", s ? strlen(s) : 0);
}
/* Nonzero when s[0..len) is valid UTF-8 without surrogates. */
int tdm__pkw_utf8_valid(const char *s, size_t len);

/* A pre-encoded SHORT_BINUNICODE key for a constant string literal: the
 * exporter writes the same dozen keys millions of times. */
#define TDM_PKW_KEY(w, lit)                                                     \
    do {                                                                        \
        _Static_assert(sizeof(lit) - 1 < 256, "key too long");                 \
        if (tdm__pkw_reserve((w), sizeof(lit) + 1) == 0) {                      \
            (w)->buf[(w)->len] = TDM_PK_SHORT_BINUNICODE;                       \
            (w)->buf[(w)->len + 1] = (unsigned char)(sizeof(lit) - 1);          \
            memcpy((w)->buf + (w)->len + 2, lit, sizeof(lit) - 1);                \
            (w)->len += sizeof(lit) + 1;                                        \
        }                                                                       \
    } while (0)

/* Lists: begin, then tdm__pkw_item() before each item, then end. */
void tdm__pkw_list_begin(tdm_pkw *w, tdm_pkw_seq *seq);
void tdm__pkw_list_end(tdm_pkw *w, tdm_pkw_seq *seq);
/* Dicts: begin, then tdm__pkw_item() before each key (followed by its
 * value), then end. */
void tdm__pkw_dict_begin(tdm_pkw *w, tdm_pkw_seq *seq);
void tdm__pkw_dict_end(tdm_pkw *w, tdm_pkw_seq *seq);
/* Starts the next item of a list or dict.  `closer` is TDM_PK_APPENDS for
 * lists, TDM_PK_SETITEMS for dicts. */
static inline void tdm__pkw_item_(tdm_pkw *w, tdm_pkw_seq *seq, unsigned char closer)
{
    uint64_t k = seq->n++ % TDM_PKW_BATCH;
    if (k == 0 && tdm__pkw_reserve(w, 2) == 0) {
        if (seq->n > 1)
            w->buf[w->len++] = closer; /* close the previous batch */
        w->buf[w->len++] = TDM_PK_MARK;
    }
}
static inline void tdm__pkw_list_item(tdm_pkw *w, tdm_pkw_seq *seq)
{
    tdm__pkw_item_(w, seq, TDM_PK_APPENDS);
}
static inline void tdm__pkw_dict_item(tdm_pkw *w, tdm_pkw_seq *seq)
{
    tdm__pkw_item_(w, seq, TDM_PK_SETITEMS);
}

#endif
