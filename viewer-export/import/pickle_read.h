/* viewer-export/import/pickle_read.h: a reader for the pickles PyTorch writes for
 * its memory snapshots (torch.cuda.memory._dump_snapshot, the C++
 * _memory_snapshot_pickled, and tidemark's own exporter).
 *
 * It accepts exactly the opcodes PyTorch's memory viewer accepts
 * (../shared/reference/pytorch-snapshot-format.md §3.1): PROTO 2..5, FRAME,
 * STOP, MARK, EMPTY_DICT/DICT, SETITEM(S), EMPTY_LIST/LIST, APPEND(S),
 * EMPTY_TUPLE/TUPLE/TUPLE1..3, NONE, NEWTRUE/NEWFALSE, BININT1/BININT2/
 * BININT, LONG1, BINFLOAT, SHORT_BINUNICODE/BINUNICODE, BINPUT/LONG_BINPUT/
 * MEMOIZE, BINGET/LONG_BINGET, BYTEARRAY8.  Anything else (GLOBAL, REDUCE,
 * text-mode opcodes, …) is a TDM_FORMAT_ERROR naming the opcode and its
 * byte offset: the reader never builds objects of other types and never
 * runs code.
 *
 * The result is a tree of tdm_pkv values.  Memo references (BINGET) share
 * nodes, so the "tree" is a graph and may even be cyclic: walk it by a
 * schema of known depth, never by unbounded recursion.
 *
 * Bounds: every length is checked against the bytes left before anything
 * is allocated; every opcode creates at most one node and container slots
 * only for values already on the stack, so memory is O(input size) (about
 * 60 bytes per input byte at worst, a few bytes per byte in practice).
 * Parsing is iterative.  No global state; one document per thread.
 */
#ifndef TDM_VIEWER_PICKLE_READ_H
#define TDM_VIEWER_PICKLE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

typedef enum tdm_pkv_type {
    TDM_PKV_NONE = 0,
    TDM_PKV_BOOL,
    TDM_PKV_INT,
    TDM_PKV_FLOAT,
    TDM_PKV_STR,   /* UTF-8 bytes as the pickle holds them */
    TDM_PKV_BYTES, /* BYTEARRAY8 */
    TDM_PKV_LIST,
    TDM_PKV_TUPLE,
    TDM_PKV_DICT,
} tdm_pkv_type;

typedef struct tdm_pkv tdm_pkv;
struct tdm_pkv {
    uint8_t type; /* tdm_pkv_type */
    uint8_t big;  /* INT: the value is in [2^63, 2^64) and lives in `u` */
    uint32_t n;   /* STR/BYTES: bytes; LIST/TUPLE: items; DICT: pairs */
    uint32_t cap; /* LIST/DICT: slots allocated (internal) */
    uint32_t at;  /* byte offset of the opcode that made it (saturated) */
    union {
        int64_t i;       /* INT (big == 0), BOOL (0/1) */
        uint64_t u;      /* INT (big == 1) */
        double f;        /* FLOAT */
        const char *s;   /* STR/BYTES: n bytes plus a NUL */
        tdm_pkv **items; /* LIST/TUPLE: n; DICT: 2n (key, value, key, …) */
    } v;
};

typedef struct tdm_pk_error {
    uint64_t offset;   /* byte offset of the offending opcode */
    char message[200]; /* "unsupported opcode 0x63 ('c', GLOBAL)" … */
} tdm_pk_error;

typedef struct tdm_pk_doc tdm_pk_doc;

/* Parses data[0..len).  On success *root is the object STOP returned (it
 * and everything under it live until tdm__pk_free(*doc)); bytes after STOP
 * are ignored (the viewer's base64 embedding pads with NULs).  Errors:
 * TDM_FORMAT_ERROR (bad or unsupported opcode or structure), TDM_TRUNCATED
 * (the input ends before STOP), TDM_HOST_OUT_OF_MEMORY; *err says where
 * and why, *doc and *root are NULL. */
tdm_status tdm__pk_parse(const void *data, size_t len, tdm_pk_doc **doc,
                         const tdm_pkv **root, tdm_pk_error *err);
void tdm__pk_free(tdm_pk_doc *doc);

/* The value of `key` in a dict with string keys; NULL if `dict` is not a
 * dict or has no such key.  Linear: snapshot dicts have a dozen keys. */
const tdm_pkv *tdm__pk_get(const tdm_pkv *dict, const char *key);
/* "int", "str", "list", … */
const char *tdm__pk_type_name(const tdm_pkv *v);
/* Nonzero when v is a LIST or TUPLE (both are sequences to the viewer). */
static inline int tdm__pk_is_seq(const tdm_pkv *v)
{
    return v && (v->type == TDM_PKV_LIST || v->type == TDM_PKV_TUPLE);
}
/* v as a 64-bit pattern (two's complement for negatives, so a signed
 * address and its unsigned spelling agree); 0 on success, -1 if v is not
 * an INT (a BOOL counts as 0/1, as in Python). */
int tdm__pk_u64(const tdm_pkv *v, uint64_t *out);

#endif
