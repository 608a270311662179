/* format/format_decode.h: the .tdm reader's toolbox, shared by
 * format_decode.c (arena, arrays, bounds-checked msgpack cursor, error
 * reporting, maps and rows) and format_read.c (records and the public
 * entry points).  Nothing outside the reader includes it.
 *
 * Invariants: a cursor never reads at or past its `end`; every helper that
 * fails has filled the reader's error (status, byte offset, message) and
 * returns -1, and the first error wins.  No global state, no lock.
 */
#ifndef TDM_FORMAT_FORMAT_DECODE_H
#define TDM_FORMAT_FORMAT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "format_internal.h"

/* Device ordinals a file may name: -1 is the host. */
#define TDM_FMT_DEVICE_MIN (-1)
#define TDM_FMT_DEVICE_MAX INT16_MAX

typedef struct tdm__fmt_chunk tdm__fmt_chunk;

#define TDM_FMT_ARENA_OWNED 18

/* Everything a returned snapshot owns: bump-allocated chunks (strings,
 * the snapshot itself) and the table arrays handed over at the end. */
typedef struct tdm__fmt_arena {
    tdm__fmt_chunk *chunks;
    void *owned[TDM_FMT_ARENA_OWNED];
    size_t nowned;
} tdm__fmt_arena;

/* A growable array (realloc'd while reading, then owned by the arena). */
typedef struct tdm__fmt_vec {
    void *p;
    size_t n, cap; /* elements used, allocated */
} tdm__fmt_vec;

typedef struct tdm__fmt_reader {
    const uint8_t *base; /* the whole file */
    size_t len;          /* bytes */
    tdm_read_error *err; /* may be NULL */
    tdm_status status;   /* first failure; TDM_OK while all is well */
    uint64_t rec_off;    /* start of the record being read, bytes */
    const char *rec_name;   /* its type's name, NULL outside records */
    const uint8_t *rec_payload, *rec_end; /* its payload's bytes */
    tdm__fmt_arena *a;
    tdm_snap_header header;
    int have_header, have_dropped, have_end;
    uint64_t dropped;
    uint8_t device_seen[(TDM_FMT_DEVICE_MAX + 2 + 7) / 8]; /* bit d+1: ordinal d listed */
    /* strings: const char *; stack_frames: uint32_t; stack_off: size_t
     * (where each stack's frames start in stack_frames) */
    tdm__fmt_vec devices, strings, phases, frames, stacks, stack_frames,
        stack_off, events, segments, blocks, stats, imported, annotations;
    /* An events_zstd record's payload, decompressed (reused from record to
     * record).  While it is being read (plain_len > 0) offsets inside it
     * are reported as plain_at, where its compressed bytes start, and
     * messages name the byte of the decompressed payload. */
    uint8_t *plain;
    size_t plain_cap, plain_len;
    uint64_t plain_at;
    void *zstd_dctx; /* ZSTD_DCtx, made at the first events_zstd record */
} tdm__fmt_reader;

typedef struct tdm__fmt_cur {
    const uint8_t *p, *end;
} tdm__fmt_cur;

enum { TDM_FMT_DEC_OK = 0, TDM_FMT_DEC_TYPE = -1, TDM_FMT_DEC_SHORT = -2 };

static inline uint64_t tdm__fmt_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Any msgpack integer at *pp: its 64-bit two's-complement pattern in *v,
 * *neg when it was negative.  Inline: events columns call it per value. */
static inline int tdm__fmt_dec_int(const uint8_t **pp, const uint8_t *end,
                                   uint64_t *v, int *neg)
{
    const uint8_t *p = *pp;
    if (p >= end)
        return TDM_FMT_DEC_SHORT;
    uint8_t b = *p;
    *neg = 0;
    if (b <= 0x7f) {
        *v = b;
        *pp = p + 1;
        return TDM_FMT_DEC_OK;
    }
    if (b >= 0xe0) {
        *v = (uint64_t)(int64_t)(int8_t)b;
        *neg = 1;
        *pp = p + 1;
        return TDM_FMT_DEC_OK;
    }
    int n;
    switch (b) {
    case 0xcc: case 0xd0: n = 1; break;
    case 0xcd: case 0xd1: n = 2; break;
    case 0xce: case 0xd2: n = 4; break;
    case 0xcf: case 0xd3: n = 8; break;
    default: return TDM_FMT_DEC_TYPE;
    }
    if (end - p - 1 < n)
        return TDM_FMT_DEC_SHORT;
    uint64_t x = tdm__fmt_be(p + 1, n);
    int is_signed = b >= 0xd0;
    if (is_signed && n < 8 && ((x >> (8 * n - 1)) & 1))
        x |= ~UINT64_C(0) << (8 * n); /* sign-extend */
    *v = x;
    *neg = is_signed && (int64_t)x < 0;
    *pp = p + 1 + n;
    return TDM_FMT_DEC_OK;
}

/* A str ('s'), bin ('b'), array ('a') or map ('m') header at *pp. */
int tdm__fmt_dec_len(const uint8_t **pp, const uint8_t *end, char kind, uint64_t *len);

const char *tdm__fmt_record_name(uint64_t type);
extern const char *const tdm__fmt_key_names[TDM_KEY_COUNT_];

void *tdm__fmt_alloc(tdm__fmt_arena *a, size_t size);
void tdm__fmt_arena_destroy(tdm__fmt_arena *a);
/* Room for `add` more elements of `esize` bytes at the end of v. */
void *tdm__fmt_vec_more(tdm__fmt_reader *r, tdm__fmt_vec *v, size_t esize, size_t add);

/* Errors.  The message gets " (<type> record at byte N)" appended while a
 * record is being read.  All return -1. */
__attribute__((format(printf, 4, 5))) int
tdm__fmt_fail(tdm__fmt_reader *r, tdm_status st, uint64_t offset, const char *fmt, ...);
int tdm__fmt_oom(tdm__fmt_reader *r);
/* "bad value for field 'f' at byte N: what" (or "runs past the end"). */
int tdm__fmt_bad(tdm__fmt_reader *r, const uint8_t *at, const char *field, const char *what);
uint64_t tdm__fmt_off(const tdm__fmt_reader *r, const uint8_t *p);

/* Typed values at c->p; each advances the cursor. */
int tdm__fmt_u64(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, uint64_t *v);
int tdm__fmt_range(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field,
                   int64_t lo, int64_t hi, int64_t *v);
/* A header of `kind` whose count fits in the bytes left. */
int tdm__fmt_len(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, char kind, uint64_t *n);
/* A string, copied NUL-terminated into the arena; NUL bytes are refused. */
int tdm__fmt_str(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, const char **out);
int tdm__fmt_bool(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, uint8_t *v);
int tdm__fmt_skip(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field);

/* The record's map: pos[k] = where key k's value starts (NULL if absent). */
int tdm__fmt_index_map(tdm__fmt_reader *r, tdm__fmt_cur *c, const uint8_t *pos[TDM_KEY_COUNT_]);
/* Points c at a required field's value. */
int tdm__fmt_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                   tdm__fmt_cur *c);
/* A required field's value: a string, a uint, an integer in [lo, hi]. */
int tdm__fmt_str_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       const char **out);
int tdm__fmt_u64_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       uint64_t *out);
int tdm__fmt_range_field(tdm__fmt_reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                         int64_t lo, int64_t hi, int64_t *out);
/* A row array with at least `fields` elements; row_end skips the extras. */
int tdm__fmt_row_begin(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *what,
                       uint64_t fields, uint64_t *extra);
int tdm__fmt_row_end(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *what, uint64_t extra);
/* A field a later minor version appended to a row: read into *v (an
 * integer in [lo, hi]) when the row has it, counting it off *extra; an
 * older row that stops before it leaves *v at the caller's default. */
int tdm__fmt_optional_range(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field,
                            int64_t lo, int64_t hi, uint64_t *extra, int64_t *v);
/* {"first": have, "rows": [...]}: leaves c at the first row. */
int tdm__fmt_table_begin(tdm__fmt_reader *r, tdm__fmt_cur *c, size_t have, uint64_t *rows);
/* A string id, returned as the string. */
int tdm__fmt_sid(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *field, const char **s);
/* A tdm_stat: [current, peak, allocated, freed]. */
int tdm__fmt_stat(tdm__fmt_reader *r, tdm__fmt_cur *c, const char *name, tdm_stat *s);

/* Until a table arrives, id 0 (the empty stack, phase "") still exists. */
static inline size_t tdm__fmt_stack_limit(const tdm__fmt_reader *r)
{
    return r->stacks.n ? r->stacks.n : 1;
}
static inline size_t tdm__fmt_phase_limit(const tdm__fmt_reader *r)
{
    return r->phases.n ? r->phases.n : 1;
}
/* The `events` record and the `events_zstd` record that holds one
 * compressed (format_read_events.c); 0, or -1 with r's error set. */
int tdm__fmt_read_events(tdm__fmt_reader *r, tdm__fmt_cur *c);
int tdm__fmt_read_events_zstd(tdm__fmt_reader *r, tdm__fmt_cur *c);
/* Frees what tdm__fmt_read_events_zstd keeps between records. */
void tdm__fmt_events_zstd_free(tdm__fmt_reader *r);

#endif
