/* viewer-export/view/view_data.h: the compact data the offline viewer page
 * (`tidemark view`) embeds, and the page's assets.
 *
 * view/ is the offline HTML viewer: the data packing here, the page
 * itself in html/ (embedded at build time by cmake/viewer_assets.cmake).
 * It may include model/ and format/'s reader, never import/, export/,
 * gate/ or cli/.
 *
 * One snapshot becomes one JSON object: the header, devices, peaks and
 * other figures the model computed (so the page shows exactly what
 * `tidemark summary` prints), plus columns of the history, each a stream
 * of LEB128 varints (unsigned, or zigzag for signed deltas) written as
 * base64.  The page decodes them into typed arrays and computes its
 * timelines, live sets and maps itself, at the level of detail the screen
 * needs, so nothing per pixel or per time bucket is stored.
 *
 * Columns (docs/viewer.md has the full table):
 *   ev_t                 per event: zigzag(time - previous time) in ns; the
 *                        first event's time is 0 (the window start)
 *   mk_seq/kind/val      phase and step marks: position delta, 0 = phase /
 *                        1 = step, the phase id or step number
 *   a_*                  one row per allocation of the model, sorted by
 *                        alloc position: seq = delta of (alloc_seq + 1);
 *                        life = free_seq - alloc_seq, 0 when never freed;
 *                        size = index into `sizes` (most frequent first);
 *                        cat = category | model flags << 3; stack id;
 *                        addr = zigzag delta from the previous row; dev =
 *                        device index (only with more than one device)
 *   s_*                  segment intervals, same shape: seq, life, size
 *                        (bytes), addr, dev, pool (tdm_pool_kind, 3 when
 *                        only events saw it, | 4 when expandable)
 *   rs (per device)      reserved bytes: delta of (seq + 1), zigzag delta
 *                        of the value, from the model's samples
 *   st                   stacks 0..n-1: depth, then frame indices
 *   fr                   frames: function, file, line, module (indices
 *                        into `strings`, except line), pc
 *   fk                   per frame its tdm_frame_kind (0 native, 1 inlined,
 *                        2 Python); empty when every frame is native, so
 *                        native-only snapshots pay nothing for it
 * An event position ("seq") is an index into the snapshot's events, -1
 * being the window start, as in model.h.
 *
 * Memory: a tdm_view_columns owns its buffers; free it with
 * tdm__view_columns_free.  No state, no locks.
 */
#ifndef TDM_VIEWER_VIEW_DATA_H
#define TDM_VIEWER_VIEW_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* A growable byte buffer holding one column's varints. */
typedef struct tdm_view_buf {
    uint8_t *data;
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
} tdm_view_buf;

/* Pool byte of a segment row when no final state named its pool. */
#define TDM_VIEW_POOL_UNKNOWN 3u
#define TDM_VIEW_POOL_EXPANDABLE 4u

typedef struct tdm_view_columns {
    size_t event_count;   /* rows of ev_t */
    size_t mark_count;    /* rows of mk_* */
    size_t alloc_count;   /* rows of a_* (the model's allocations) */
    size_t segment_count; /* rows of s_* */
    size_t device_count;  /* entries of rs */
    size_t stack_count;   /* stacks in st (the snapshot's stack table) */
    size_t frame_count;   /* frames in fr */
    tdm_view_buf ev_t;
    tdm_view_buf mk_seq, mk_kind, mk_val;
    tdm_view_buf a_seq, a_life, a_pend, a_size, a_cat, a_stack, a_addr, a_dev;
    tdm_view_buf s_seq, s_life, s_size, s_addr, s_dev, s_pool;
    tdm_view_buf *rs; /* [device_count], reserved timeline per device */
    tdm_view_buf st, fr;
    tdm_view_buf fk; /* frame kinds; empty when all are native */
    uint64_t *sizes;     /* distinct allocation sizes, most frequent first */
    size_t size_count;
    const char **strings; /* borrowed from the snapshot; [0] = "" */
    size_t string_count;
    uint64_t segment_anomalies; /* segment events that contradicted each other */
} tdm_view_columns;

/* Builds every column from a model and its categories (categories.h;
 * cats[i] belongs to model->allocs[i]).  TDM_HOST_OUT_OF_MEMORY is the
 * only failure; *out is then empty. */
tdm_status tdm__view_columns_build(const tdm_model *model, const uint8_t *cats,
                                   tdm_view_columns *out);
void tdm__view_columns_free(tdm_view_columns *cols);

/* Reads the varint at *pos of `b` and moves *pos past it.  Returns 0 at
 * the end of the buffer or on a malformed varint. */
int tdm__view_varint_next(const tdm_view_buf *b, size_t *pos, uint64_t *v);
static inline int64_t tdm__view_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* One snapshot as `tidemark view` shows it. */
typedef struct tdm_view_input {
    const char *path;       /* as given on the command line */
    const char *label;      /* what the page calls it (a run folder's name);
                               NULL: its file's name */
    const tdm_snap *snap;
    const tdm_model *model;
    const uint8_t *cats;    /* tdm__categories_infer's output */
    int truncated;          /* the file was cut: the page says so */
    uint64_t truncated_at;  /* byte offset of the cut */
} tdm_view_input;

/* Writes one snapshot's JSON object on `out` (view_json.c).  Every '<' is written as
 * \u003c so the text can sit inside a <script> element.  *bytes gets the
 * number of bytes written.  TDM_HOST_OUT_OF_MEMORY or TDM_IO_ERROR. */
tdm_status tdm__view_data_write(FILE *out, const tdm_view_input *in,
                                uint64_t *bytes);

/* How the page lays out its snapshots. */
typedef enum tdm_view_layout {
    TDM_VIEW_PANELS = 0, /* one snapshot, or two side by side to compare */
    TDM_VIEW_RANKS = 1,  /* the ranks of a job stacked on one time axis,
                            one of them in detail below */
} tdm_view_layout;

/* Writes the whole page: the template with the stylesheet, the script and
 * the data of `n` snapshots put in, laid out as `layout` says (PANELS
 * takes 1 or 2; RANKS shows them in the order given).  `device` is the
 * device ordinal shown first (-1: the first with allocations).
 * *data_bytes gets the size of the embedded data.  (cmd_view.c) */
tdm_status tdm__view_page_write_as(FILE *out, const tdm_view_input *in, size_t n,
                                   int device, tdm_view_layout layout,
                                   uint64_t *data_bytes);
/* The same with PANELS for 1 or 2 snapshots, RANKS for more. */
tdm_status tdm__view_page_write(FILE *out, const tdm_view_input *in, size_t n,
                                int device, uint64_t *data_bytes);

/* The page's sources, viewer-export/view/html/, turned into C by
 * cmake/viewer_assets.cmake at build time (not NUL-terminated). */
extern const unsigned char tdm__view_asset_html[];
extern const size_t tdm__view_asset_html_len;
extern const unsigned char tdm__view_asset_css[];
extern const size_t tdm__view_asset_css_len;
extern const unsigned char tdm__view_asset_js[];
extern const size_t tdm__view_asset_js_len;

#endif
