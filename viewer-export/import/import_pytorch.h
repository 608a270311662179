/* viewer-export/import/import_pytorch.h: what the two halves of the PyTorch
 * pickle importer share (import_pytorch.c walks the snapshot's schema and
 * assembles the history; import_pytorch_tables.c owns the snapshot's
 * memory, interns strings, frames and stacks, and reads typed values).
 *
 * `im` is one import in progress; it is used by one thread.  The first
 * error is kept in im.status and its message in im.err; every function
 * returns -1 (or UINT32_MAX / NULL) once it failed.
 */
#ifndef TDM_VIEWER_IMPORT_PYTORCH_H
#define TDM_VIEWER_IMPORT_PYTORCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "import_formats.h"
#include "pickle_read.h"
#include "snap_build.h" /* tdm__grow_array */

typedef struct schunk {
    struct schunk *next;
    size_t used, cap;
    char data[];
} schunk;

typedef struct owned {
    tdm_snap snap; /* first: tdm__import_pytorch_free casts back */
    schunk *strings;
    uint32_t *stack_frames;
} owned;

/* Open addressing over item indices; equality is the caller's. */
typedef struct htab {
    uint32_t *slot; /* index + 1; 0 = empty */
    uint64_t *hash;
    size_t mask, used;
} htab;

/* Equality of the item at `idx` with `key`, for htab lookups. */
typedef int (*eq_fn)(const void *ctx, uint32_t idx, const void *key);

typedef struct str_key {
    const char *s;
    size_t n;
} str_key;

typedef struct frame_key {
    const char *file, *function;
    uint32_t line;
} frame_key;

typedef struct stack_key {
    const uint32_t *frames;
    uint32_t depth;
} stack_key;

typedef struct pending_mark {
    uint64_t time_ns;
    uint32_t value;  /* phase id, or step number */
    uint32_t order;  /* position in external_annotations (sort tie-break) */
    uint8_t is_step;
    uint8_t is_end;  /* an END: the phase `value` ends, if it is in force */
} pending_mark;

/* An annotation of the history kept for the round trip (format 1.4): an
 * `annotate` entry or a change of user_metadata, placed before event `at`
 * of list `list` as read (c->events before the merge); or an
 * external_annotations entry (list SIZE_MAX), placed by its time. */
typedef struct pending_note {
    size_t at, list;
    tdm_snap_annotation a;
} pending_note;

typedef struct im {
    owned *o;
    char *err;
    size_t errlen;
    tdm_status status;
    tdm_pt_import_report rep;

    const char **strs;      size_t nstrs, cap_strs;    htab str_index;
    tdm_snap_frame *frames; size_t nframes, cap_frames; htab frame_index;
    tdm_snap_stack *stacks; size_t nstacks, cap_stacks; htab stack_index;
    size_t nsf, cap_sf;     /* o->stack_frames used / allocated */
    uint64_t *stack_offs;   size_t cap_offs;            /* offset of each stack's frames */
    const tdm_pkv *last_list; uint32_t last_stack;      /* memo-shared lists repeat */
    uint32_t scratch[1024]; /* frames of the stack being interned */
    /* Frames by the nodes of their strings (the reader shares equal
     * strings), so a repeated frame costs no hashing of its text. */
    struct {
        const tdm_pkv *file, *name;
        uint64_t line;
        uint32_t idx;
    } frame_memo[4096];

    tdm_event *events;      size_t nevents, cap_events;
    size_t *dev_start;      size_t ndev, cap_dev;       /* per trace list */
    pending_mark *marks;    size_t nmarks, cap_marks;
    pending_note *notes;    size_t nnotes, cap_notes;  /* by list, in list order */
    pending_note *ext_notes; size_t next_notes, cap_ext_notes; /* in their list's order */
    tdm_snap_annotation *annotations; size_t nannotations; /* the merged result */
    const char *meta_now;   /* user_metadata in force in the list being read */
    const char **phases;    size_t nphases, cap_phases;
    tdm_snap_segment *segs; size_t nsegs, cap_segs;
    tdm_snap_block *blocks; size_t nblocks, cap_blocks;
    int frames_on_free, frames_on_alloc, frames_on_blocks;
} im;

typedef struct where_t {
    const char *list;
    long i, j; /* -1: absent */
} where_t;

int tdm__pti_htab_init(htab *t);
void tdm__pti_htab_destroy(htab *t);
/* Records a TDM_FORMAT_ERROR "at byte N: PATH: message"; returns -1. */
__attribute__((format(printf, 4, 5)))
int tdm__pti_fail(im *c, const tdm_pkv *at, const where_t *w, const char *fmt, ...);
/* Copies src[0..n) (up to a NUL) into dst[cap] with every byte outside
 * printable ASCII written as \xNN; always terminated, cut to fit. */
void tdm__pti_escape(char *dst, size_t cap, const char *src, size_t n);
int tdm__pti_oom(im *c);
/* external_annotations (optional, never fatal) into c->marks; -1 only on
 * out of memory (import_pytorch_marks.c). */
int tdm__pti_read_annotations(im *c, const tdm_pkv *list);
/* c->marks in time order, without the END marks that end nothing. */
void tdm__pti_order_marks(im *c);
/* During the merge: the notes of list k from *cursor on whose place is
 * at or before that list's event `at` (SIZE_MAX: all left) become
 * annotations before merged event n. */
void tdm__pti_place_notes(im *c, size_t k, size_t *cursor, size_t at, size_t n);
/* After the merge: the external_annotations entries placed by time and
 * merged with the lists' annotations into c->annotations, in history
 * order.  -1 on out of memory. */
int tdm__pti_place_external_notes(im *c);
/* One copy of every distinct string (cut at its first NUL); NULL on OOM. */
const char *tdm__pti_intern(im *c, const char *s, size_t n);
/* The int / str under `key` of dict d: 1 found, 0 absent or None (and not
 * required), -1 error. */
int tdm__pti_get_u64(im *c, const tdm_pkv *d, const char *key, int required,
                     const where_t *w, uint64_t *out);
/* The same for an address or a stream handle: PyTorch writes them as
 * int64, so one at or above 2**63 comes as a negative int, taken as its
 * 64 bits.  tdm__pti_get_u64 refuses negative ints (sizes, times):
 * "KEY out of range at byte N". */
int tdm__pti_get_bits(im *c, const tdm_pkv *d, const char *key, int required,
                      const where_t *w, uint64_t *out);
int tdm__pti_get_str(im *c, const tdm_pkv *d, const char *key, int required,
                     const where_t *w, const tdm_pkv **out);
/* An int within [min, max]: 1 (in *out), 0 absent or None, -1 after
 * failing: not an int, or "KEY out of range at byte N: V (want MIN to
 * MAX)". */
int tdm__pti_get_range(im *c, const tdm_pkv *d, const char *key, int required,
                       const where_t *w, int64_t min, int64_t max, int64_t *out);
/* Records that out-of-range failure of `v` (at `key`); returns -1. */
int tdm__pti_fail_range(im *c, const tdm_pkv *v, const where_t *w, const char *key,
                        int64_t min, uint64_t max);
/* The stack id of a frames list (0: none or empty); UINT32_MAX on error. */
uint32_t tdm__pti_stack_of(im *c, const tdm_pkv *list, const where_t *w);

static inline int tdm__pti_is_str(const tdm_pkv *v, const char *lit)
{
    size_t n = strlen(lit);
    return v && v->type == TDM_PKV_STR && v->n == n && memcmp(v->v.s, lit, n) == 0;
}

#endif
