/* viewer-export/export/export_pytorch.c: `tidemark export --format pytorch`, a
 * snapshot pickle that pytorch.org/memory_viz and torch/cuda/_memory_viz.py
 * load unchanged (../shared/reference/pytorch-snapshot-format.md;
 * docs/export.md "pytorch").
 *
 * What goes where:
 *   segments              the final allocator state, one dict per segment
 *                         of a device >= 0, sorted by (device, address),
 *                         blocks tiling it exactly (export_pytorch_state.c)
 *   device_traces[d]      the events of device d that replay onto that
 *                         state, oldest first, one list per ordinal 0..max
 *   external_annotations  phase marks as START/END of their name, step
 *                         marks as "ProfilerStep#N" (what PyTorch's
 *                         profiler calls its steps); an imported PyTorch
 *                         history's own list when the file keeps it
 *                         (its annotations, format 1.4), as do its
 *                         `annotate` entries and user_metadata
 *   allocator_settings    expandable_segments, and a "tidemark" dict with
 *                         the snapshot header (so `tidemark import` can
 *                         restore it); for PyTorch's caching allocator
 *                         seen from below (torch_segments.h) it also has
 *                         "memory": the note that the blocks drawn are
 *                         its segments, not tensors (the viewer shows
 *                         the dict in its Allocator Settings tab)
 *   host_segments/traces  segments and events of device -1, if any
 * Every trace entry carries `category` (tdm__categories_infer), and at
 * least one entry is "unknown" (old viewers crash otherwise, §12 P5).
 * Addresses and streams are written as signed 64-bit integers (§3.3).
 *
 * Speed: each frame and each stack is encoded once, into a cache, and
 * copied into every entry that uses it; keys are pre-encoded.  The pickle
 * streams out through a 1 MiB buffer.  No state, no locks.
 */
#include "export_formats.h"
#include "export_pytorch.h"
#include "categories.h"
#include "hash.h"
#include "torch_segments.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define KEY TDM_PKW_KEY

/* A dict of a few fixed items, all in one MARK … SETITEMS batch (the
 * batching tdm__pkw_dict_begin() is for dicts of any length). */
static void dict_open(tdm_pkw *w)
{
    tdm__pkw_byte(w, TDM_PK_EMPTY_DICT);
    tdm__pkw_byte(w, TDM_PK_MARK);
}

static void dict_close(tdm_pkw *w) { tdm__pkw_byte(w, TDM_PK_SETITEMS); }

/* ---- frames, encoded once ---------------------------------------------- */

#define NOT_YET UINT64_MAX

typedef struct fcache {
    const tdm_snap *snap;
    tdm_pkw buf;          /* encoded frames and frame lists, back to back */
    uint64_t *frame_off;  /* per frame: offset in buf, or NOT_YET */
    uint32_t *frame_len;
    uint64_t *stack_off;  /* per stack id */
    uint32_t *stack_len;
    uint32_t *stack_memo; /* per stack id: its list's memo index, or NO_MEMO */
    uint32_t next_memo;   /* memo indexes used so far in the pickle */
    /* Stack ids whose list is memoized, by the hash of its bytes: two ids
     * whose frames read the same (return addresses on one source line)
     * share one memo entry, so a re-import exports the same bytes. */
    uint32_t *by_bytes;   /* [by_bytes_mask + 1], 0 = empty */
    size_t by_bytes_mask;
} fcache;

#define NO_MEMO UINT32_MAX

static int fcache_init(fcache *c, const tdm_snap *snap)
{
    memset(c, 0, sizeof *c);
    c->snap = snap;
    size_t nf = snap->frame_count ? snap->frame_count : 1;
    size_t ns = snap->stack_count ? snap->stack_count : 1;
    c->frame_off = malloc(nf * sizeof *c->frame_off);
    c->frame_len = malloc(nf * sizeof *c->frame_len);
    c->stack_off = malloc(ns * sizeof *c->stack_off);
    c->stack_len = malloc(ns * sizeof *c->stack_len);
    c->stack_memo = malloc(ns * sizeof *c->stack_memo);
    size_t slots = 16;
    while (slots < 2 * ns)
        slots *= 2;
    c->by_bytes = calloc(slots, sizeof *c->by_bytes);
    c->by_bytes_mask = slots - 1;
    if (!c->frame_off || !c->frame_len || !c->stack_off || !c->stack_len ||
        !c->stack_memo || !c->by_bytes ||
        tdm__pkw_init_mem(&c->buf) != TDM_OK)
        return -1;
    memset(c->frame_off, 0xff, nf * sizeof *c->frame_off);
    memset(c->stack_off, 0xff, ns * sizeof *c->stack_off);
    memset(c->stack_memo, 0xff, ns * sizeof *c->stack_memo);
    return 0;
}

static void fcache_destroy(fcache *c)
{
    tdm__pkw_destroy(&c->buf);
    free(c->frame_off);
    free(c->frame_len);
    free(c->stack_off);
    free(c->stack_len);
    free(c->stack_memo);
    free(c->by_bytes);
}

static const char *nonempty(const char *s) { return s && s[0] ? s : NULL; }

/* {"filename": str, "line": int, "name": str}: the source file, else the
 * module, else "??"; the function, else "??". */
static void encode_frame(tdm_pkw *w, const tdm_snap_frame *f)
{
    dict_open(w);
    KEY(w, "filename");
    const char *file = f ? nonempty(f->file) : NULL;
    if (!file && f)
        file = nonempty(f->module);
    tdm__pkw_cstr(w, file ? file : "??");
    KEY(w, "line");
    tdm__pkw_int(w, f ? f->line : 0);
    KEY(w, "name");
    const char *fn = f ? nonempty(f->function) : NULL;
    tdm__pkw_cstr(w, fn ? fn : "??");
    dict_close(w);
}

static void frame_bytes(fcache *c, uint32_t fi)
{
    if (c->frame_off[fi] != NOT_YET)
        return;
    uint64_t at = c->buf.len;
    encode_frame(&c->buf, &c->snap->frames[fi]);
    c->frame_off[fi] = at;
    c->frame_len[fi] = (uint32_t)(c->buf.len - at);
}

/* The encoded frames list of a stack: innermost first, as the snapshot
 * keeps them and as PyTorch writes them.  Valid until the next call. */
static const unsigned char *stack_bytes(fcache *c, uint32_t id, size_t *len)
{
    static const unsigned char empty = TDM_PK_EMPTY_LIST;
    if (id == 0 || id >= c->snap->stack_count) {
        *len = 1;
        return &empty;
    }
    if (c->stack_off[id] == NOT_YET) {
        const tdm_snap_stack *st = &c->snap->stacks[id];
        for (uint32_t k = 0; k < st->depth; k++)
            if (st->frames[k] < c->snap->frame_count)
                frame_bytes(c, st->frames[k]);
        uint64_t at = c->buf.len;
        tdm_pkw_seq seq;
        tdm__pkw_list_begin(&c->buf, &seq);
        for (uint32_t k = 0; k < st->depth; k++) {
            tdm__pkw_list_item(&c->buf, &seq);
            uint32_t fi = st->frames[k];
            if (fi >= c->snap->frame_count) {
                encode_frame(&c->buf, NULL);
                continue;
            }
            /* Reserve first: the copy's source lives in the same buffer. */
            if (tdm__pkw_reserve(&c->buf, c->frame_len[fi]) == 0) {
                memcpy(c->buf.buf + c->buf.len, c->buf.buf + c->frame_off[fi],
                       c->frame_len[fi]);
                c->buf.len += c->frame_len[fi];
            }
        }
        tdm__pkw_list_end(&c->buf, &seq);
        c->stack_off[id] = at;
        c->stack_len[id] = (uint32_t)(c->buf.len - at);
    }
    if (c->buf.status != TDM_OK) {
        *len = 1;
        return &empty;
    }
    *len = c->stack_len[id];
    return c->buf.buf + c->stack_off[id];
}

/* A memo opcode: the 1-byte form for indexes below 256, else the 4-byte. */
static void put_memo_op(tdm_pkw *w, unsigned char short_op, unsigned char long_op,
                        uint32_t index)
{
    if (index < 256) {
        unsigned char op[2] = {short_op, (unsigned char)index};
        tdm__pkw_raw(w, op, sizeof op);
    } else {
        unsigned char op[5] = {long_op, (unsigned char)index, (unsigned char)(index >> 8),
                               (unsigned char)(index >> 16), (unsigned char)(index >> 24)};
        tdm__pkw_raw(w, op, sizeof op);
    }
}

/* A stack's frames list is written once and memoized; every later entry
 * with that stack fetches it from the memo (BINGET), as Python's pickle
 * does for a shared object.  Both viewers and _memory_viz.py only read
 * frames, so sharing one list is safe, and a snapshot with many events
 * over few stacks shrinks by an order of magnitude. */
static void put_frames(tdm_pkw *w, fcache *c, uint32_t stack_id)
{
    int memoizable = stack_id != 0 && stack_id < c->snap->stack_count;
    if (memoizable && c->stack_memo[stack_id] != NO_MEMO) {
        put_memo_op(w, TDM_PK_BINGET, TDM_PK_LONG_BINGET, c->stack_memo[stack_id]);
        return;
    }
    size_t len;
    const unsigned char *b = stack_bytes(c, stack_id, &len);
    if (!memoizable || c->buf.status != TDM_OK) {
        tdm__pkw_raw(w, b, len);
        return;
    }
    size_t i = (size_t)tdm__fnv1a(b, len) & c->by_bytes_mask;
    for (uint32_t other; (other = c->by_bytes[i]) != 0; i = (i + 1) & c->by_bytes_mask) {
        if (c->stack_len[other] == len &&
            memcmp(c->buf.buf + c->stack_off[other], b, len) == 0) {
            c->stack_memo[stack_id] = c->stack_memo[other];
            put_memo_op(w, TDM_PK_BINGET, TDM_PK_LONG_BINGET, c->stack_memo[stack_id]);
            return;
        }
    }
    tdm__pkw_raw(w, b, len);
    put_memo_op(w, TDM_PK_BINPUT, TDM_PK_LONG_BINPUT, c->next_memo);
    c->stack_memo[stack_id] = c->next_memo++;
    c->by_bytes[i] = stack_id; /* each id enters once: never more than half full */
}

/* ---- pieces ------------------------------------------------------------- */

/* A byte count: unsigned, so clamped rather than wrapped negative (only a
 * damaged file has one above 2^63). */
static void put_bytes(tdm_pkw *w, uint64_t v)
{
    tdm__pkw_int(w, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

static const char *const state_names[] = {"inactive", "active_allocated",
                                          "active_pending_free"};

static void put_block(tdm_pkw *w, fcache *c, const tdm_snap_block *b)
{
    dict_open(w);
    KEY(w, "address");
    tdm__pkw_int(w, (int64_t)b->address);
    KEY(w, "size");
    put_bytes(w, b->size);
    KEY(w, "requested_size");
    put_bytes(w, b->state == TDM_BLOCK_INACTIVE ? 0 : b->requested_size);
    KEY(w, "state");
    tdm__pkw_cstr(w, state_names[b->state <= 2 ? b->state : 0]);
    KEY(w, "frames");
    put_frames(w, c, b->state == TDM_BLOCK_INACTIVE ? 0 : b->stack_id);
    dict_close(w);
}

static void put_segment(tdm_pkw *w, fcache *c, const tdm_pt_state *st,
                        const tdm_snap_segment *g)
{
    uint64_t allocated = 0, active = 0, requested = 0;
    const tdm_snap_block *blocks = st->blocks + g->first_block;
    for (uint32_t k = 0; k < g->block_count; k++) {
        if (blocks[k].state == TDM_BLOCK_ACTIVE_ALLOCATED)
            allocated += blocks[k].size;
        if (blocks[k].state != TDM_BLOCK_INACTIVE) {
            active += blocks[k].size;
            requested += blocks[k].requested_size;
        }
    }
    /* Observe/pass-through segments have no pool: name it by size, the
     * way the caching allocator would have. */
    int small = g->pool == TDM_POOL_SMALL ||
                (g->pool == TDM_POOL_NONE && g->total_size <= (1u << 20));
    dict_open(w);
    KEY(w, "device");
    tdm__pkw_int(w, g->device);
    KEY(w, "address");
    tdm__pkw_int(w, (int64_t)g->address);
    KEY(w, "total_size");
    put_bytes(w, g->total_size);
    KEY(w, "allocated_size");
    put_bytes(w, allocated);
    KEY(w, "active_size");
    put_bytes(w, active);
    KEY(w, "requested_size");
    put_bytes(w, requested);
    KEY(w, "stream");
    tdm__pkw_int(w, (int64_t)g->stream);
    KEY(w, "segment_type");
    tdm__pkw_cstr(w, small ? "small" : "large");
    KEY(w, "segment_pool_id");
    tdm__pkw_int(w, 0);
    tdm__pkw_int(w, 0);
    tdm__pkw_tuple2(w);
    KEY(w, "is_expandable");
    tdm__pkw_bool(w, g->is_expandable);
    KEY(w, "frames");
    put_frames(w, c, g->stack_id);
    KEY(w, "blocks");
    tdm_pkw_seq seq;
    tdm__pkw_list_begin(w, &seq);
    for (uint32_t k = 0; k < g->block_count; k++) {
        tdm__pkw_list_item(w, &seq);
        put_block(w, c, &blocks[k]);
    }
    tdm__pkw_list_end(w, &seq);
    dict_close(w);
}

static void put_entry(tdm_pkw *w, fcache *c, const tdm_event *e, uint8_t cat,
                      const char *user_metadata)
{
    dict_open(w);
    KEY(w, "action");
    const char *action = tdm__action_name(e->action);
    tdm__pkw_str(w, action, strlen(action));
    if (e->action == TDM_ACTION_OOM) {
        KEY(w, "device_free"); /* an oom has no address (reference §2.4) */
        put_bytes(w, e->addr);
    } else {
        KEY(w, "addr");
        tdm__pkw_int(w, (int64_t)e->addr);
    }
    KEY(w, "size");
    /* PyTorch's trace names a tensor by the bytes asked for (its blocks
     * are in the segments); an oom by the request rounded. */
    int tensor = e->action == TDM_ACTION_ALLOC || e->action == TDM_ACTION_FREE_REQUESTED ||
                 e->action == TDM_ACTION_FREE_COMPLETED;
    put_bytes(w, tensor && e->requested ? e->requested : e->size);
    KEY(w, "stream");
    tdm__pkw_int(w, (int64_t)e->stream);
    KEY(w, "time_us");
    tdm__pkw_int(w, (int64_t)(e->time_ns / 1000));
    KEY(w, "frames");
    put_frames(w, c, e->stack_id);
    KEY(w, "category");
    const char *cn = tdm_category_name((tdm_category)cat);
    tdm__pkw_str(w, cn, strlen(cn));
    if (user_metadata && user_metadata[0]) {
        KEY(w, "user_metadata");
        tdm__pkw_cstr(w, user_metadata);
    }
    dict_close(w);
}

/* An `annotate` entry of an imported history (_annotate_tensor). */
static void put_annotate_entry(tdm_pkw *w, const tdm_snap_annotation *a)
{
    dict_open(w);
    KEY(w, "action");
    tdm__pkw_cstr(w, "annotate");
    KEY(w, "addr");
    tdm__pkw_int(w, (int64_t)a->addr);
    KEY(w, "size");
    put_bytes(w, a->size);
    KEY(w, "stream");
    tdm__pkw_int(w, 0);
    KEY(w, "time_us");
    tdm__pkw_int(w, (int64_t)(a->time_ns / 1000));
    KEY(w, "frames");
    tdm_pkw_seq none;
    tdm__pkw_list_begin(w, &none);
    tdm__pkw_list_end(w, &none);
    KEY(w, "user_metadata");
    tdm__pkw_cstr(w, a->text);
    dict_close(w);
}

/* A device list's walk over the file's annotations, in step with its
 * events: the user_metadata in force there, and `annotate` entries in
 * their places. */
typedef struct note_walk {
    size_t next;
    const char *user_metadata;
} note_walk;

/* Those of `device` placed before event `before` (SIZE_MAX: all left). */
static void put_notes_before(tdm_pkw *w, tdm_pkw_seq *list, const tdm_snap *snap,
                             note_walk *nw, int device, size_t before, uint64_t *entries)
{
    for (; nw->next < snap->annotation_count &&
           snap->annotations[nw->next].before_event <= before;
         nw->next++) {
        const tdm_snap_annotation *a = &snap->annotations[nw->next];
        if (a->device != device)
            continue;
        if (a->kind == TDM_ANNOTATION_USER_METADATA) {
            nw->user_metadata = a->text;
        } else if (a->kind == TDM_ANNOTATION_TENSOR) {
            tdm__pkw_list_item(w, list);
            put_annotate_entry(w, a);
            (*entries)++;
        }
    }
}

/* A `snapshot` entry at dump time: added when the history would otherwise
 * have no "unknown" category, or when nothing at all would be shown (the
 * newest viewer throws on a snapshot with no device to show). */
static void put_snapshot_entry(tdm_pkw *w, const tdm_snap *snap)
{
    tdm_event e = {.time_ns = snap->header.dump_time_us * 1000, .action = TDM_ACTION_SNAPSHOT};
    if (!e.time_ns && snap->event_count)
        e.time_ns = snap->events[snap->event_count - 1].time_ns;
    fcache none = {.snap = snap};
    put_entry(w, &none, &e, TDM_CATEGORY_UNKNOWN, NULL);
}

/* One external_annotations entry; `device` as PyTorch writes it (>= 0
 * for the marks tidemark makes). */
static void put_annotation(tdm_pkw *w, tdm_pkw_seq *seq, const char *name,
                           const char *stage, int device, uint64_t time_ns)
{
    tdm__pkw_list_item(w, seq);
    dict_open(w);
    KEY(w, "name");
    tdm__pkw_cstr(w, name);
    KEY(w, "stage");
    tdm__pkw_cstr(w, stage);
    KEY(w, "device");
    tdm__pkw_int(w, device);
    KEY(w, "time_us");
    tdm__pkw_int(w, (int64_t)(time_ns / 1000));
    dict_close(w);
}

/* An imported history's own external_annotations, as PyTorch wrote them;
 * 0 when the file keeps none. */
static int put_kept_annotations(tdm_pkw *w, const tdm_snap *snap, tdm_pkw_seq *seq)
{
    int kept = 0;
    for (size_t i = 0; i < snap->annotation_count; i++) {
        const tdm_snap_annotation *a = &snap->annotations[i];
        if (a->kind != TDM_ANNOTATION_START && a->kind != TDM_ANNOTATION_END)
            continue;
        put_annotation(w, seq, a->text, a->kind == TDM_ANNOTATION_START ? "START" : "END",
                       a->device, a->time_ns);
        kept = 1;
    }
    return kept;
}

/* Phases as START/END pairs of their name, steps as ProfilerStep#N; a
 * window that opens inside a phase or step starts it at its first event.
 * An imported history's own list instead, when the file keeps it. */
static void put_annotations(tdm_pkw *w, const tdm_snap *snap, const tdm_model *model)
{
    tdm_pkw_seq seq;
    char buf[32], name[32];
    uint32_t phase = 0, step = 0;
    uint64_t t = 0;
    tdm__pkw_list_begin(w, &seq);
    if (put_kept_annotations(w, snap, &seq)) {
        tdm__pkw_list_end(w, &seq);
        return;
    }
    for (size_t i = 0; i < snap->event_count; i++) {
        const tdm_event *e = &snap->events[i];
        int device = e->device < 0 ? 0 : e->device; /* a process-wide mark: device 0 */
        t = e->time_ns;
        uint32_t new_phase = e->action == TDM_ACTION_PHASE || i == 0 ? e->phase : phase;
        uint32_t new_step = e->action == TDM_ACTION_STEP || i == 0 ? e->step : step;
        if (new_phase != phase || (e->action == TDM_ACTION_PHASE && new_phase)) {
            if (phase)
                put_annotation(w, &seq, tdm__model_phase_name(model, phase, buf, sizeof buf),
                               "END", device, t);
            if (new_phase)
                put_annotation(w, &seq, tdm__model_phase_name(model, new_phase, buf, sizeof buf),
                               "START", device, t);
            phase = new_phase;
        }
        if (new_step != step || (e->action == TDM_ACTION_STEP && new_step)) {
            if (step) {
                snprintf(name, sizeof name, "ProfilerStep#%u", step);
                put_annotation(w, &seq, name, "END", device, t);
            }
            if (new_step) {
                snprintf(name, sizeof name, "ProfilerStep#%u", new_step);
                put_annotation(w, &seq, name, "START", device, t);
            }
            step = new_step;
        }
    }
    if (phase)
        put_annotation(w, &seq, tdm__model_phase_name(model, phase, buf, sizeof buf), "END", 0, t);
    if (step) {
        snprintf(name, sizeof name, "ProfilerStep#%u", step);
        put_annotation(w, &seq, name, "END", 0, t);
    }
    tdm__pkw_list_end(w, &seq);
}

static const char *mode_name(unsigned v, const char *const *names, unsigned n)
{
    return v < n ? names[v] : "?";
}

/* An int for allocator_settings, which the viewer JSON.stringify()s:
 * kept within ±2^53 so that it stays an exact JavaScript Number. */
static void put_json_int(tdm_pkw *w, int64_t v)
{
    const int64_t lim = INT64_C(1) << 53;
    tdm__pkw_int(w, v > lim ? lim : v < -lim ? -lim : v);
}

/* The "key": value items of allocator_settings, one line each (KEY takes
 * a literal, so these are macros). */
#define STR_ITEM(w, key, s)                                                    \
    do {                                                                       \
        KEY(w, key);                                                           \
        tdm__pkw_cstr(w, s);                                                   \
    } while (0)
#define JSON_INT_ITEM(w, key, v)                                               \
    do {                                                                       \
        KEY(w, key);                                                           \
        put_json_int(w, v);                                                    \
    } while (0)

/* "devices": [{"index", "vendor", "name", "capacity"}, …] as recorded. */
static void put_devices(tdm_pkw *w, const tdm_snap *snap)
{
    KEY(w, "devices");
    tdm_pkw_seq seq;
    tdm__pkw_list_begin(w, &seq);
    for (size_t i = 0; i < snap->device_count; i++) {
        const tdm_snap_device *d = &snap->devices[i];
        tdm__pkw_list_item(w, &seq);
        dict_open(w);
        JSON_INT_ITEM(w, "index", d->index);
        STR_ITEM(w, "vendor", d->vendor);
        STR_ITEM(w, "name", d->name);
        JSON_INT_ITEM(w, "capacity", (int64_t)d->capacity);
        dict_close(w);
    }
    tdm__pkw_list_end(w, &seq);
}

/* The header, for `tidemark import` and for people reading the viewer's
 * "Allocator Settings" tab.  Only str, bool and ints far below 2^53: the
 * tab JSON.stringify()s this dict. */
static void put_header(tdm_pkw *w, const tdm_snap *snap, uint64_t left_out)
{
    static const char *const rec[] = {"off", "state", "all"};
    static const char *const ctxn[] = {"none", "state", "alloc", "all"};
    static const char *const stk[] = {"none", "native", "python", "all"};
    const tdm_snap_header *h = &snap->header;
    dict_open(w);
    STR_ITEM(w, "exported_by", "tidemark " TDM_VERSION_STRING);
    STR_ITEM(w, "recorded_by", h->tool_version);
    STR_ITEM(w, "alloc_mode", h->alloc_mode);
    if (tdm__torch_segments_seen(snap))
        STR_ITEM(w, "memory", TDM_TORCH_SEGMENTS_NOTE);
    STR_ITEM(w, "config", h->config);
    STR_ITEM(w, "metadata", h->metadata);
    STR_ITEM(w, "command", h->command);
    STR_ITEM(w, "host", h->host);
    JSON_INT_ITEM(w, "pid", h->pid);
    JSON_INT_ITEM(w, "rank", h->rank);
    JSON_INT_ITEM(w, "local_rank", h->local_rank);
    JSON_INT_ITEM(w, "world_size", h->world_size);
    JSON_INT_ITEM(w, "start_time_us", (int64_t)h->start_time_us);
    JSON_INT_ITEM(w, "dump_time_us", (int64_t)h->dump_time_us);
    STR_ITEM(w, "record", mode_name(h->record_mode, rec, 3));
    STR_ITEM(w, "context", mode_name(h->context_mode, ctxn, 4));
    STR_ITEM(w, "stacks", mode_name(h->stacks_mode, stk, 4));
    JSON_INT_ITEM(w, "max_entries", h->max_entries > INT32_MAX ? -1 : (int64_t)h->max_entries);
    JSON_INT_ITEM(w, "dropped_events",
                  snap->dropped_events > INT64_MAX ? INT64_MAX : (int64_t)snap->dropped_events);
    JSON_INT_ITEM(w, "events_left_out", (int64_t)left_out);
    put_devices(w, snap);
    dict_close(w);
}

static void put_settings(tdm_pkw *w, const tdm_snap *snap, const tdm_pt_state *st,
                         uint64_t left_out)
{
    int expandable = 0;
    for (size_t i = 0; i < st->segment_count; i++)
        expandable |= st->segments[i].is_expandable;
    dict_open(w);
    KEY(w, "expandable_segments");
    tdm__pkw_bool(w, expandable);
    KEY(w, "tidemark");
    put_header(w, snap, left_out);
    dict_close(w);
}

/* ---- the whole pickle --------------------------------------------------- */

/* Ordinals above this are not devices but damage: int16 events cannot
 * name them, and each would cost an empty list. */
#define MAX_ORDINAL 32767

tdm_status tdm__pt_write(tdm_pkw *w, const tdm_snap *snap, const tdm_model *model,
                         int device, tdm_pt_report *report)
{
    tdm_pt_report rep;
    memset(&rep, 0, sizeof rep);
    size_t nev = snap->event_count;
    uint8_t *cats = NULL, *keep = NULL, *cat = NULL;
    uint32_t *order = NULL;
    size_t *first = NULL;
    tdm_pt_state st;
    fcache fc;
    memset(&st, 0, sizeof st);
    tdm_status s = fcache_init(&fc, snap) == 0 ? TDM_OK : TDM_HOST_OUT_OF_MEMORY;
    if (s == TDM_OK)
        s = tdm__categories_infer(model, &cats);
    if (s == TDM_OK)
        s = tdm__pt_state_build(snap, model, &st);
    keep = malloc(nev ? nev : 1);
    cat = malloc(nev ? nev : 1);
    order = malloc((nev ? nev : 1) * sizeof *order);
    if (s == TDM_OK && (!keep || !cat || !order))
        s = TDM_HOST_OUT_OF_MEMORY;
    if (s == TDM_OK)
        s = tdm__pt_replay(snap, model, cats, &st, keep, cat, rep.left_out_by_action);
    if (s != TDM_OK)
        goto out;
    for (unsigned a = 0; a < TDM_ACTION_COUNT_; a++)
        rep.left_out += rep.left_out_by_action[a];
    rep.segments_left_out = st.segments_left_out;
    rep.blocks_repaired = st.blocks_repaired;
    rep.synthesized_state = st.synthesized;

    /* Which events go out, and on which device list. */
    int max_ord = device >= 0 ? device : 0;
    if (device < 0) {
        for (size_t i = 0; i < snap->device_count; i++)
            if (snap->devices[i].index > max_ord && snap->devices[i].index <= MAX_ORDINAL)
                max_ord = snap->devices[i].index;
        for (size_t i = 0; i < st.segment_count; i++)
            if (st.segments[i].device > max_ord && st.segments[i].device <= MAX_ORDINAL)
                max_ord = st.segments[i].device;
    }
    uint64_t unknown = 0, shown_segments = 0, host_segments = 0;
    for (size_t i = 0; i < nev; i++) {
        const tdm_event *e = &snap->events[i];
        if (!keep[i])
            continue;
        if (device >= 0 && e->device != device &&
            !(e->device < 0 && e->action == TDM_ACTION_SNAPSHOT))
            keep[i] = 0;
        else if (e->device > max_ord)
            max_ord = e->device;
        if (keep[i])
            unknown += cat[i] == TDM_CATEGORY_UNKNOWN;
    }
    for (size_t i = 0; i < st.segment_count; i++) {
        const tdm_snap_segment *g = &st.segments[i];
        if (g->device < 0)
            host_segments++;
        else if ((device < 0 || g->device == device) && g->device <= MAX_ORDINAL)
            shown_segments++;
    }
    /* Counting sort of kept events by ordinal (slot max_ord + 1: host).  A
     * snapshot mark of the whole process (device -1) goes on every device's
     * list: PyTorch keeps its `snapshot` entries per device. */
    size_t slots = (size_t)max_ord + 2;
    int lo = device >= 0 ? device : 0, hi = max_ord;
    first = calloc(slots + 1, sizeof *first);
    if (!first) {
        s = TDM_HOST_OUT_OF_MEMORY;
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < nev; i++) {
        if (!keep[i])
            continue;
        const tdm_event *e = &snap->events[i];
        if (e->device < 0 && e->action == TDM_ACTION_SNAPSHOT) {
            for (int k = lo; k <= hi; k++)
                first[k]++;
            total += (size_t)(hi - lo + 1);
        } else {
            first[e->device < 0 ? slots - 1 : (size_t)e->device]++;
            total++;
        }
    }
    uint64_t device_entries = 0;
    for (size_t k = 0, sum = 0; k <= slots; k++) {
        size_t c = k < slots ? first[k] : 0;
        first[k] = sum;
        sum += c;
    }
    device_entries = first[slots - 1];
    {
        size_t *fill = calloc(slots, sizeof *fill);
        uint32_t *grown = realloc(order, (total ? total : 1) * sizeof *order);
        if (!fill || !grown) {
            free(fill);
            s = TDM_HOST_OUT_OF_MEMORY;
            goto out;
        }
        order = grown;
        for (size_t i = 0; i < nev; i++) {
            if (!keep[i])
                continue;
            const tdm_event *e = &snap->events[i];
            if (e->device < 0 && e->action == TDM_ACTION_SNAPSHOT) {
                for (int k = lo; k <= hi; k++)
                    order[first[k] + fill[k]++] = (uint32_t)i;
            } else {
                size_t k = e->device < 0 ? slots - 1 : (size_t)e->device;
                order[first[k] + fill[k]++] = (uint32_t)i;
            }
        }
        free(fill);
    }
    /* Where a `snapshot` entry goes, if one is needed (-1: none). */
    int extra_on = -1;
    if (device_entries && !unknown) {
        for (int k = 0; k <= max_ord && extra_on < 0; k++)
            if (first[k + 1] > first[k])
                extra_on = k;
    } else if (!device_entries && !shown_segments)
        extra_on = device >= 0 ? device : 0;
    rep.added_snapshot_entry = extra_on >= 0;

    tdm__pkw_proto(w, 4);
    tdm_pkw_seq top, seq, inner;
    tdm__pkw_dict_begin(w, &top);

    tdm__pkw_dict_item(w, &top);
    KEY(w, "segments");
    tdm__pkw_list_begin(w, &seq);
    for (size_t i = 0; i < st.segment_count; i++) {
        const tdm_snap_segment *g = &st.segments[i];
        if (g->device < 0 || g->device > MAX_ORDINAL || (device >= 0 && g->device != device))
            continue;
        tdm__pkw_list_item(w, &seq);
        put_segment(w, &fc, &st, g);
    }
    tdm__pkw_list_end(w, &seq);

    tdm__pkw_dict_item(w, &top);
    KEY(w, "device_traces");
    tdm__pkw_list_begin(w, &seq);
    for (int k = 0; k <= max_ord; k++) {
        tdm__pkw_list_item(w, &seq);
        tdm__pkw_list_begin(w, &inner);
        note_walk nw = {0, NULL};
        for (size_t j = first[k]; j < first[k + 1]; j++) {
            put_notes_before(w, &inner, snap, &nw, k, order[j], &rep.entries);
            tdm__pkw_list_item(w, &inner);
            put_entry(w, &fc, &snap->events[order[j]], cat[order[j]], nw.user_metadata);
            rep.entries++;
        }
        put_notes_before(w, &inner, snap, &nw, k, SIZE_MAX, &rep.entries);
        if (k == extra_on) {
            tdm__pkw_list_item(w, &inner);
            put_snapshot_entry(w, snap);
            rep.entries++;
        }
        tdm__pkw_list_end(w, &inner);
    }
    tdm__pkw_list_end(w, &seq);

    tdm__pkw_dict_item(w, &top);
    KEY(w, "allocator_settings");
    put_settings(w, snap, &st, rep.left_out);

    tdm__pkw_dict_item(w, &top);
    KEY(w, "external_annotations");
    put_annotations(w, snap, model);

    if (device < 0 && (host_segments || first[slots] > first[slots - 1])) {
        tdm__pkw_dict_item(w, &top);
        KEY(w, "host_segments");
        tdm__pkw_list_begin(w, &seq);
        for (size_t i = 0; i < st.segment_count; i++)
            if (st.segments[i].device < 0) {
                tdm__pkw_list_item(w, &seq);
                put_segment(w, &fc, &st, &st.segments[i]);
            }
        tdm__pkw_list_end(w, &seq);
        tdm__pkw_dict_item(w, &top);
        KEY(w, "host_traces");
        tdm__pkw_list_begin(w, &seq);
        note_walk nw = {0, NULL};
        for (size_t j = first[slots - 1]; j < first[slots]; j++) {
            put_notes_before(w, &seq, snap, &nw, -1, order[j], &rep.entries);
            tdm__pkw_list_item(w, &seq);
            put_entry(w, &fc, &snap->events[order[j]], cat[order[j]], nw.user_metadata);
            rep.entries++;
        }
        put_notes_before(w, &seq, snap, &nw, -1, SIZE_MAX, &rep.entries);
        tdm__pkw_list_end(w, &seq);
    }
    tdm__pkw_dict_end(w, &top);
    tdm__pkw_stop(w);
    s = w->status != TDM_OK ? w->status : fc.buf.status;
    rep.bytes = tdm__pkw_tell(w);
out:
    fcache_destroy(&fc);
    tdm__pt_state_free(&st);
    free(cats);
    free(keep);
    free(cat);
    free(order);
    free(first);
    if (report)
        *report = rep;
    return s;
}

tdm_status tdm__export_pytorch(FILE *out, const tdm_export_context *ctx)
{
    tdm_pkw w;
    tdm_pt_report rep;
    tdm_status s = tdm__pkw_init_file(&w, out);
    if (s == TDM_OK)
        s = tdm__pt_write(&w, ctx->snap, ctx->model, ctx->device, &rep);
    tdm_status f = tdm__pkw_finish(&w);
    tdm__pkw_destroy(&w);
    if (s == TDM_OK)
        s = f;
    if (s != TDM_OK || ctx->quiet)
        return s;
    const char *in = ctx->input_path ? ctx->input_path : "snapshot";
    if (tdm__torch_segments_seen(ctx->snap))
        fprintf(stderr, "tidemark export: note: %s: %s\n", in, TDM_TORCH_SEGMENTS_NOTE);
    if (rep.synthesized_state)
        fprintf(stderr, "tidemark export: warning: %s has no final allocator state (the file "
                        "was cut); the pickle shows one segment per device spanning the "
                        "addresses the history used, and no segment events\n", in);
    if (rep.left_out) {
        char what[256] = "";
        size_t used = 0;
        for (unsigned a = 0; a < TDM_ACTION_COUNT_; a++) {
            if (!rep.left_out_by_action[a] || used >= sizeof what)
                continue;
            int n = snprintf(what + used, sizeof what - used, "%s%s %" PRIu64,
                             used ? ", " : "", tdm__action_name(a), rep.left_out_by_action[a]);
            used += n > 0 ? (size_t)n : 0;
        }
        fprintf(stderr, "tidemark export: warning: %" PRIu64 " of %zu events of %s left out so "
                        "that the history replays onto the final state (%s); see "
                        "docs/export.md\n", rep.left_out, ctx->snap->event_count, in, what);
    }
    if (rep.segments_left_out || rep.blocks_repaired)
        fprintf(stderr, "tidemark export: warning: the final state of %s is inconsistent: "
                        "%" PRIu64 " overlapping or empty segments left out, %" PRIu64
                        " blocks dropped or gaps filled so that blocks tile their segments\n",
                in, rep.segments_left_out, rep.blocks_repaired);
    return TDM_OK;
}
