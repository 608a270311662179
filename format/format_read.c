/* format/format_read.c: the .tdm reader (tdm__snap_read_file,
 * tdm__snap_read_buffer, tdm__snap_free): the signature, the record
 * envelopes and each record type but events (format_read_events.c), over
 * the cursor of format_decode.c.
 *
 * The input is untrusted.  A record is used only when it is whole and its
 * checksum matches; a file cut inside a record is TDM_TRUNCATED at that
 * record's first byte (or, with partial_ok, the records before it).
 * Unknown record types and unknown map keys are skipped.
 *
 * Invariants of a returned snapshot, so consumers need not re-check them:
 * every stack id, phase id, frame index and string is in range; stacks[0]
 * is empty and phase_names[0] is ""; segments' blocks are in range and
 * tile their segment; actions, categories, block states, pools, frame
 * kinds and device ordinals (-1..32767) are known values; no string is
 * NULL.  What the reader allocates is bounded by the input size: a count
 * is accepted only if the bytes left could hold that many elements (an
 * events record spends at least one byte per event).  A snapshot owns all
 * its memory through one arena (owner_), freed by tdm__snap_free.
 *
 * Lock: none; no global state.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format_decode.h"

typedef tdm__fmt_reader reader;
typedef tdm__fmt_cur cur;

static const uint32_t no_frames[1];

/* ---- records ------------------------------------------------------------ */

static int read_header(reader *r, cur *c)
{
    const uint8_t *pos[TDM_KEY_COUNT_];
    tdm_snap_header *h = &r->header;
    int64_t pid = 0, rank = 0, local_rank = 0, world_size = 0;
    int64_t rmode = 0, cmode = 0, smode = 0;
    if (tdm__fmt_index_map(r, c, pos) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_TOOL_VERSION, &h->tool_version) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_HOST, &h->host) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_PID, INT64_MIN, INT64_MAX, &pid) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_RANK, -1, INT32_MAX, &rank) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_LOCAL_RANK, -1, INT32_MAX, &local_rank) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_WORLD_SIZE, 0, INT32_MAX, &world_size) ||
        tdm__fmt_u64_field(r, pos, TDM_KEY_START_TIME_US, &h->start_time_us) ||
        tdm__fmt_u64_field(r, pos, TDM_KEY_DUMP_TIME_US, &h->dump_time_us) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_CONFIG, &h->config) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_METADATA, &h->metadata) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_COMMAND, &h->command) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_RECORD_MODE, 0, TDM_RECORD_ALL, &rmode) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_CONTEXT_MODE, 0, TDM_CONTEXT_ALL, &cmode) ||
        tdm__fmt_range_field(r, pos, TDM_KEY_STACKS_MODE, 0, TDM_STACKS_ALL, &smode) ||
        tdm__fmt_u64_field(r, pos, TDM_KEY_MAX_ENTRIES, &h->max_entries) ||
        tdm__fmt_str_field(r, pos, TDM_KEY_ALLOC_MODE, &h->alloc_mode) ||
        (pos[TDM_KEY_NOTES] && tdm__fmt_str_field(r, pos, TDM_KEY_NOTES, &h->notes)))
        return -1;
    if (!pos[TDM_KEY_NOTES])
        h->notes = ""; /* before 1.3, or nothing to say */
    h->pid = pid;
    h->rank = (int32_t)rank;
    h->local_rank = (int32_t)local_rank;
    h->world_size = (int32_t)world_size;
    h->record_mode = (uint8_t)rmode;
    h->context_mode = (uint8_t)cmode;
    h->stacks_mode = (uint8_t)smode;
    r->have_header = 1;
    return 0;
}

/* Opens a table record and returns room for its *n rows of esize bytes at
 * the end of v, or NULL with r's error set.  A table whose rows others
 * refer to by a uint32_t id or index passes what to say when it would
 * outgrow one (too_many); the others pass NULL. */
static void *table_rows(reader *r, cur *c, tdm__fmt_vec *v, size_t esize,
                        const char *too_many, uint64_t *n)
{
    if (tdm__fmt_table_begin(r, c, v->n, n))
        return NULL;
    /* Before allocating: a huge table is refused, not out of memory. */
    if (too_many && *n > UINT32_MAX - v->n) {
        tdm__fmt_bad(r, c->p, "rows", too_many);
        return NULL;
    }
    return tdm__fmt_vec_more(r, v, esize, *n);
}

static int read_devices(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_device *d = table_rows(r, c, &r->devices, sizeof *d, NULL, &n);
    if (!d)
        return -1;
    for (uint64_t i = 0; i < n; i++, d++) {
        int64_t index = 0;
        const uint8_t *at;
        if (tdm__fmt_row_begin(r, c, "devices", TDM_DEV_FIELDS, &extra))
            return -1;
        at = c->p;
        if (tdm__fmt_range(r, c, "index", TDM_FMT_DEVICE_MIN, TDM_FMT_DEVICE_MAX, &index) ||
            tdm__fmt_str(r, c, "vendor", &d->vendor) || tdm__fmt_str(r, c, "name", &d->name) ||
            tdm__fmt_u64(r, c, "capacity", &d->capacity) ||
            tdm__fmt_row_end(r, c, "devices", extra))
            return -1;
        unsigned bit = (unsigned)(index + 1);
        if (r->device_seen[bit / 8] >> (bit % 8) & 1)
            return tdm__fmt_bad(r, at, "index", "device listed twice");
        r->device_seen[bit / 8] |= (uint8_t)(1u << (bit % 8));
        d->index = (int32_t)index;
        r->devices.n++;
    }
    return 0;
}

static int read_strings(reader *r, cur *c)
{
    uint64_t n = 0;
    const char **s = table_rows(r, c, &r->strings, sizeof *s, NULL, &n);
    if (!s)
        return -1;
    for (uint64_t i = 0; i < n; i++, r->strings.n++)
        if (tdm__fmt_str(r, c, "rows", &s[i]))
            return -1;
    return 0;
}

static int read_phases(reader *r, cur *c)
{
    uint64_t n = 0;
    const char **s = table_rows(r, c, &r->phases, sizeof *s, NULL, &n);
    if (!s)
        return -1;
    for (uint64_t i = 0; i < n; i++, r->phases.n++) {
        const uint8_t *at = c->p;
        if (tdm__fmt_sid(r, c, "rows", &s[i]))
            return -1;
        if (r->phases.n == 0 && s[i][0] != '\0')
            return tdm__fmt_bad(r, at, "rows", "phase 0 must be the empty string");
    }
    return 0;
}

static int read_frames(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_frame *f = table_rows(r, c, &r->frames, sizeof *f, "too many frames", &n);
    if (!f)
        return -1;
    for (uint64_t i = 0; i < n; i++, f++, r->frames.n++) {
        /* Format 1.2 appended the kind; a 1.0/1.1 row stops before it and
         * is a native frame. */
        int64_t line = 0, kind = TDM_FRAME_NATIVE;
        if (tdm__fmt_row_begin(r, c, "frames", TDM_FRM_FIELDS, &extra) ||
            tdm__fmt_u64(r, c, "pc", &f->pc) || tdm__fmt_sid(r, c, "function", &f->function) ||
            tdm__fmt_sid(r, c, "file", &f->file) ||
            tdm__fmt_range(r, c, "line", 0, UINT32_MAX, &line) ||
            tdm__fmt_sid(r, c, "module", &f->module) ||
            tdm__fmt_optional_range(r, c, "kind", TDM_FRAME_NATIVE, TDM_FRAME_KIND_MAX, &extra,
                                    &kind) ||
            tdm__fmt_row_end(r, c, "frames", extra))
            return -1;
        f->line = (uint32_t)line;
        f->kind = (uint8_t)kind;
    }
    return 0;
}

static int read_stacks(reader *r, cur *c)
{
    uint64_t n = 0;
    if (!table_rows(r, c, &r->stacks, sizeof(tdm_snap_stack), "too many stacks", &n) ||
        !tdm__fmt_vec_more(r, &r->stack_off, sizeof(size_t), n))
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *at = c->p;
        uint64_t depth = 0;
        if (tdm__fmt_len(r, c, "rows", 'a', &depth))
            return -1;
        if (r->stacks.n == 0 && depth != 0)
            return tdm__fmt_bad(r, at, "rows", "stack 0 must be empty");
        uint32_t *fr = tdm__fmt_vec_more(r, &r->stack_frames, sizeof *fr, depth);
        if (!fr)
            return -1;
        for (uint64_t k = 0; k < depth; k++) {
            int64_t idx = 0;
            if (r->frames.n == 0)
                return tdm__fmt_bad(r, c->p, "rows", "no frame table before it");
            if (tdm__fmt_range(r, c, "rows", 0, (int64_t)r->frames.n - 1, &idx))
                return -1;
            fr[k] = (uint32_t)idx;
        }
        ((size_t *)r->stack_off.p)[r->stacks.n] = r->stack_frames.n;
        ((tdm_snap_stack *)r->stacks.p)[r->stacks.n].depth = (uint32_t)depth;
        r->stack_frames.n += depth;
        r->stacks.n++;
        r->stack_off.n++;
    }
    return 0;
}

static int read_blocks(reader *r, cur *c, tdm_snap_segment *g, const uint8_t *row_at)
{
    const uint8_t *at = c->p;
    uint64_t nb = 0, extra = 0;
    if (tdm__fmt_len(r, c, "blocks", 'a', &nb))
        return -1;
    if (nb > UINT32_MAX - r->blocks.n)
        return tdm__fmt_bad(r, at, "blocks", "too many blocks");
    tdm_snap_block *b = tdm__fmt_vec_more(r, &r->blocks, sizeof *b, nb);
    if (!b)
        return -1;
    g->first_block = (uint32_t)r->blocks.n;
    g->block_count = (uint32_t)nb;
    uint64_t end = g->address; /* where the next block must start */
    for (uint64_t k = 0; k < nb; k++, b++) {
        int64_t stack = 0, state = 0, cat = 0;
        if (tdm__fmt_row_begin(r, c, "blocks", TDM_BLK_FIELDS, &extra))
            return -1;
        at = c->p;
        if (tdm__fmt_u64(r, c, "address", &b->address))
            return -1;
        if (b->address != end)
            return tdm__fmt_bad(r, at, "address", "blocks do not tile their segment");
        at = c->p;
        if (tdm__fmt_u64(r, c, "size", &b->size))
            return -1;
        if (b->size > UINT64_MAX - end)
            return tdm__fmt_bad(r, at, "size", "block ends past 2^64");
        end += b->size;
        if (tdm__fmt_u64(r, c, "requested_size", &b->requested_size) ||
            tdm__fmt_u64(r, c, "alloc_time_ns", &b->alloc_time_ns) ||
            tdm__fmt_range(r, c, "stack_id", 0, (int64_t)tdm__fmt_stack_limit(r) - 1, &stack) ||
            tdm__fmt_range(r, c, "state", 0, TDM_BLOCK_ACTIVE_PENDING_FREE, &state) ||
            tdm__fmt_range(r, c, "category", 0, TDM_CATEGORY_COUNT_ - 1, &cat) ||
            tdm__fmt_row_end(r, c, "blocks", extra))
            return -1;
        b->stack_id = (uint32_t)stack;
        b->state = (uint8_t)state;
        b->category = (uint8_t)cat;
    }
    if (end - g->address != g->total_size)
        return tdm__fmt_bad(r, row_at, "total_size", "its blocks do not add up to it");
    r->blocks.n += nb;
    return 0;
}

static int read_segments(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_segment *g = table_rows(r, c, &r->segments, sizeof *g, "too many segments", &n);
    if (!g)
        return -1;
    for (uint64_t i = 0; i < n; i++, g++) {
        int64_t device = 0, pool = 0, stack = 0;
        const uint8_t *total_at;
        if (tdm__fmt_row_begin(r, c, "segments", TDM_SEG_FIELDS, &extra) ||
            tdm__fmt_range(r, c, "device", TDM_FMT_DEVICE_MIN, TDM_FMT_DEVICE_MAX, &device) ||
            tdm__fmt_range(r, c, "pool", 0, TDM_POOL_NONE, &pool) ||
            tdm__fmt_bool(r, c, "is_expandable", &g->is_expandable) ||
            tdm__fmt_u64(r, c, "address", &g->address))
            return -1;
        total_at = c->p;
        if (tdm__fmt_u64(r, c, "total_size", &g->total_size) ||
            tdm__fmt_u64(r, c, "stream", &g->stream) ||
            tdm__fmt_range(r, c, "stack_id", 0, (int64_t)tdm__fmt_stack_limit(r) - 1, &stack))
            return -1;
        g->device = (int32_t)device;
        g->pool = (uint8_t)pool;
        g->stack_id = (uint32_t)stack;
        if (read_blocks(r, c, g, total_at) || tdm__fmt_row_end(r, c, "segments", extra))
            return -1;
        r->segments.n++;
    }
    return 0;
}

static int read_stats(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_device_stats *d = table_rows(r, c, &r->stats, sizeof *d, NULL, &n);
    if (!d)
        return -1;
    for (uint64_t i = 0; i < n; i++, d++) {
        /* Format 1.1 appended the pool; a 1.0 row stops before it and is
         * the device's all-pool row. */
        int64_t device = 0, pool = TDM_STAT_POOL_ALL;
        memset(d, 0, sizeof *d);
        tdm_stats *s = &d->stats;
        s->size = sizeof *s;
        if (tdm__fmt_row_begin(r, c, "stats", TDM_STATS_FIELDS, &extra) ||
            tdm__fmt_range(r, c, "device", TDM_FMT_DEVICE_MIN, TDM_FMT_DEVICE_MAX, &device) ||
            tdm__fmt_stat(r, c, "allocated_bytes", &s->allocated_bytes) ||
            tdm__fmt_stat(r, c, "reserved_bytes", &s->reserved_bytes) ||
            tdm__fmt_stat(r, c, "active_bytes", &s->active_bytes) ||
            tdm__fmt_stat(r, c, "requested_bytes", &s->requested_bytes) ||
            tdm__fmt_stat(r, c, "allocation", &s->allocation) ||
            tdm__fmt_stat(r, c, "segment", &s->segment) ||
            tdm__fmt_u64(r, c, "num_alloc_retries", &s->num_alloc_retries) ||
            tdm__fmt_u64(r, c, "num_ooms", &s->num_ooms) ||
            tdm__fmt_optional_range(r, c, "pool", TDM_STAT_POOL_ALL, TDM_STAT_POOL_LARGE, &extra,
                                    &pool) ||
            tdm__fmt_row_end(r, c, "stats", extra))
            return -1;
        d->device = (int32_t)device;
        d->pool = (uint8_t)pool;
        r->stats.n++;
    }
    return 0;
}

/* Format 1.3: mappings of memory this process did not allocate. */
static int read_imported(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_imported *m = table_rows(r, c, &r->imported, sizeof *m, NULL, &n);
    if (!m)
        return -1;
    for (uint64_t i = 0; i < n; i++, m++) {
        int64_t device = 0, source = 0, kind = 0, stack = 0;
        memset(m, 0, sizeof *m);
        if (tdm__fmt_row_begin(r, c, "imported", TDM_IMP_FIELDS, &extra) ||
            tdm__fmt_range(r, c, "device", TDM_FMT_DEVICE_MIN, TDM_FMT_DEVICE_MAX, &device) ||
            tdm__fmt_range(r, c, "source_device", TDM_IMPORT_SOURCE_UNKNOWN,
                           TDM_FMT_DEVICE_MAX, &source) ||
            tdm__fmt_range(r, c, "kind", 0, TDM_IMPORT_KIND_MAX, &kind) ||
            tdm__fmt_u64(r, c, "address", &m->address) ||
            tdm__fmt_u64(r, c, "size", &m->size) ||
            tdm__fmt_range(r, c, "stack_id", 0, (int64_t)tdm__fmt_stack_limit(r) - 1, &stack) ||
            tdm__fmt_u64(r, c, "map_time_ns", &m->map_time_ns) ||
            tdm__fmt_row_end(r, c, "imported", extra))
            return -1;
        m->device = (int32_t)device;
        m->source_device = (int32_t)source;
        m->kind = (uint8_t)kind;
        m->stack_id = (uint32_t)stack;
        r->imported.n++;
    }
    return 0;
}

/* Format 1.4: annotations of an imported PyTorch history, in history
 * order; their places are checked against the events read before them. */
static int read_annotations(reader *r, cur *c)
{
    uint64_t n = 0, extra = 0;
    tdm_snap_annotation *a = table_rows(r, c, &r->annotations, sizeof *a, NULL, &n);
    if (!a)
        return -1;
    for (uint64_t i = 0; i < n; i++, a++) {
        int64_t kind = 0, device = 0, before = 0;
        memset(a, 0, sizeof *a);
        const uint8_t *at;
        if (tdm__fmt_row_begin(r, c, "annotations", TDM_ANN_FIELDS, &extra) ||
            tdm__fmt_range(r, c, "kind", 0, TDM_ANNOTATION_KIND_MAX, &kind) ||
            (at = c->p, tdm__fmt_range(r, c, "before_event", 0, (int64_t)r->events.n, &before)) ||
            tdm__fmt_u64(r, c, "time_ns", &a->time_ns) ||
            tdm__fmt_range(r, c, "device", TDM_FMT_DEVICE_MIN, TDM_FMT_DEVICE_MAX, &device) ||
            tdm__fmt_u64(r, c, "address", &a->addr) || tdm__fmt_u64(r, c, "size", &a->size) ||
            tdm__fmt_sid(r, c, "text", &a->text) ||
            tdm__fmt_row_end(r, c, "annotations", extra))
            return -1;
        if (r->annotations.n &&
            (uint64_t)before < ((tdm_snap_annotation *)r->annotations.p)[r->annotations.n - 1].before_event)
            return tdm__fmt_bad(r, at, "before_event", "annotations out of history order");
        a->kind = (uint8_t)kind;
        a->before_event = (uint64_t)before;
        a->device = (int32_t)device;
        r->annotations.n++;
    }
    return 0;
}

static int read_dropped(reader *r, cur *c)
{
    const uint8_t *pos[TDM_KEY_COUNT_];
    if (r->have_dropped)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off, "a second dropped record");
    r->have_dropped = 1;
    return tdm__fmt_index_map(r, c, pos) ||
                   tdm__fmt_u64_field(r, pos, TDM_KEY_DROPPED_EVENTS, &r->dropped)
               ? -1
               : 0;
}

static int read_end(reader *r, cur *c)
{
    const uint8_t *pos[TDM_KEY_COUNT_];
    uint64_t events = 0;
    if (tdm__fmt_index_map(r, c, pos) || tdm__fmt_u64_field(r, pos, TDM_KEY_EVENTS, &events))
        return -1;
    if (events != r->events.n) {
        char what[96];
        snprintf(what, sizeof what, "%llu events, but the file holds %zu",
                 (unsigned long long)events, r->events.n);
        return tdm__fmt_bad(r, pos[TDM_KEY_EVENTS], "events", what);
    }
    r->have_end = 1;
    return 0;
}

/* ---- signature and envelopes -------------------------------------------- */

static const uint8_t signature[TDM_SNAP_SIGNATURE_LEN] = TDM_SNAP_SIGNATURE;

static int read_signature(reader *r, const uint8_t **pp)
{
    size_t have = r->len < sizeof signature ? r->len : sizeof signature;
    if (memcmp(r->base, signature, have) != 0)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, 0,
                             "not a tidemark snapshot (no signature at byte 0)");
    const uint8_t *p = r->base + have, *end = r->base + r->len;
    uint64_t version[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const uint8_t *at = p;
        int neg = 0, rc = have < sizeof signature ? TDM_FMT_DEC_SHORT
                                              : tdm__fmt_dec_int(&p, end, &version[i], &neg);
        if (rc == TDM_FMT_DEC_SHORT)
            return tdm__fmt_fail(r, TDM_TRUNCATED, 0, "file ends at byte %zu, inside its signature",
                                 r->len);
        if (rc != TDM_FMT_DEC_OK || neg)
            return tdm__fmt_fail(r, TDM_FORMAT_ERROR, tdm__fmt_off(r, at),
                                 "bad %s format version at byte %llu", i ? "minor" : "major",
                                 (unsigned long long)tdm__fmt_off(r, at));
        /* Checked before the minor is read, so even a cut file says so. */
        if (i == 0 && (version[0] < 1 || version[0] > TDM_FORMAT_VERSION))
            return tdm__fmt_fail(r, TDM_UNSUPPORTED_VERSION, tdm__fmt_off(r, at),
                                 "format version %llu at byte %llu: this reader reads 1 to %d",
                                 (unsigned long long)version[0],
                                 (unsigned long long)tdm__fmt_off(r, at), TDM_FORMAT_VERSION);
    }
    r->header.format_version = (uint32_t)version[0];
    *pp = p;
    return 0;
}

/* need: the record's length in bytes when known, else 0. */
static int envelope_short(reader *r, uint64_t need)
{
    if (need)
        return tdm__fmt_fail(r, TDM_TRUNCATED, r->rec_off,
                             "truncated record: it needs %llu bytes, the file ends at byte %zu",
                             (unsigned long long)need, r->len);
    return tdm__fmt_fail(r, TDM_TRUNCATED, r->rec_off,
                         "truncated record: the file ends at byte %zu inside it", r->len);
}

/* How a record envelope [type, payload, crc] at some p reads. */
typedef enum envelope_status {
    ENVELOPE_WHOLE,      /* every field there and well-formed */
    ENVELOPE_SHORT,      /* the bytes end inside it */
    ENVELOPE_NOT_RECORD, /* p holds no array of three */
    ENVELOPE_BAD_TYPE,   /* the type is no integer in 1..2^32-1 */
    ENVELOPE_NOT_BINARY, /* the payload is no msgpack bin */
    ENVELOPE_BAD_CRC,    /* the checksum field is no 32-bit integer */
} envelope_status;

typedef struct envelope {
    uint64_t type, len, crc;
    int typed;              /* the type was read (it names the record) */
    const uint8_t *payload; /* len bytes */
    const uint8_t *at;      /* past the envelope when whole; else the field
                               that is malformed */
    uint64_t need;          /* ENVELOPE_SHORT once the payload's length is
                               known: the bytes the envelope needs from p
                               (with one of checksum at least); else 0 */
} envelope;

/* Reads the envelope at p (p < end): the reader's and the file reader's
 * early look (envelopes_broken) share it.  Checksums are the caller's. */
static envelope_status envelope_at(const uint8_t *p, const uint8_t *end, envelope *e)
{
    const uint8_t *start = p;
    int neg = 0;
    e->need = 0;
    e->typed = 0;
    e->at = p;
    if (*p != 0x93)
        return ENVELOPE_NOT_RECORD;
    p++;
    e->at = p;
    int rc = tdm__fmt_dec_int(&p, end, &e->type, &neg);
    if (rc == TDM_FMT_DEC_SHORT)
        return ENVELOPE_SHORT;
    if (rc != TDM_FMT_DEC_OK || neg || e->type == 0 || e->type > UINT32_MAX)
        return ENVELOPE_BAD_TYPE;
    e->typed = 1;
    e->at = p;
    rc = tdm__fmt_dec_len(&p, end, 'b', &e->len);
    if (rc == TDM_FMT_DEC_SHORT)
        return ENVELOPE_SHORT;
    if (rc != TDM_FMT_DEC_OK)
        return ENVELOPE_NOT_BINARY;
    if (e->len > (uint64_t)(end - p)) { /* + at least one byte of checksum */
        e->need = (uint64_t)(p - start) + e->len + 1;
        return ENVELOPE_SHORT;
    }
    e->payload = p;
    p += e->len;
    e->at = p;
    rc = tdm__fmt_dec_int(&p, end, &e->crc, &neg);
    if (rc == TDM_FMT_DEC_SHORT)
        return ENVELOPE_SHORT;
    if (rc != TDM_FMT_DEC_OK || neg || e->crc > UINT32_MAX)
        return ENVELOPE_BAD_CRC;
    e->at = p;
    return ENVELOPE_WHOLE;
}

/* One record [type, payload, crc] at *pp: checked, then read or skipped. */
static int read_record(reader *r, const uint8_t **pp)
{
    const uint8_t *p = *pp, *end = r->base + r->len;
    r->rec_off = tdm__fmt_off(r, p);
    r->rec_name = NULL;
    envelope e;
    envelope_status es = envelope_at(p, end, &e);
    if (e.typed)
        r->rec_name = tdm__fmt_record_name(e.type);
    unsigned long long at = (unsigned long long)tdm__fmt_off(r, e.at);
    switch (es) {
    case ENVELOPE_NOT_RECORD:
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off,
                             "expected a record at byte %llu, found 0x%02x",
                             (unsigned long long)r->rec_off, *p);
    case ENVELOPE_SHORT:
        return envelope_short(r, e.need);
    case ENVELOPE_BAD_TYPE:
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off + 1, "bad record type at byte %llu",
                             (unsigned long long)r->rec_off + 1);
    case ENVELOPE_NOT_BINARY:
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at,
                             "expected the record's payload (binary data) at byte %llu", at);
    case ENVELOPE_BAD_CRC:
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at, "bad checksum field at byte %llu", at);
    case ENVELOPE_WHOLE:
        break;
    }
    uint64_t type = e.type, len = e.len, crc = e.crc;
    const uint8_t *payload = e.payload;
    p = e.at;
    if (tdm__format_crc32((uint32_t)type, payload, len) != crc)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off, "checksum mismatch");
    if (!r->have_header && type != TDM_REC_HEADER)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off,
                             "the first record must be the header");

    cur c = {payload, payload + len};
    r->rec_payload = payload;
    r->rec_end = c.end;
    int bad = 0;
    switch (type) {
    case TDM_REC_HEADER:
        if (r->have_header)
            return tdm__fmt_fail(r, TDM_FORMAT_ERROR, r->rec_off, "a second header");
        bad = read_header(r, &c);
        break;
    case TDM_REC_DEVICES: bad = read_devices(r, &c); break;
    case TDM_REC_STRINGS: bad = read_strings(r, &c); break;
    case TDM_REC_FRAMES: bad = read_frames(r, &c); break;
    case TDM_REC_STACKS: bad = read_stacks(r, &c); break;
    case TDM_REC_PHASES: bad = read_phases(r, &c); break;
    case TDM_REC_EVENTS: bad = tdm__fmt_read_events(r, &c); break;
    case TDM_REC_EVENTS_ZSTD: bad = tdm__fmt_read_events_zstd(r, &c); break;
    case TDM_REC_SEGMENTS: bad = read_segments(r, &c); break;
    case TDM_REC_STATS: bad = read_stats(r, &c); break;
    case TDM_REC_DROPPED: bad = read_dropped(r, &c); break;
    case TDM_REC_IMPORTED: bad = read_imported(r, &c); break;
    case TDM_REC_ANNOTATIONS: bad = read_annotations(r, &c); break;
    case TDM_REC_END: bad = read_end(r, &c); break;
    default: break; /* a newer minor version's record: skip it whole */
    }
    if (bad)
        return -1;
    *pp = p;
    return 0;
}

/* ---- assembling the snapshot -------------------------------------------- */

static void free_vectors(reader *r)
{
    tdm__fmt_vec *v[] = {&r->devices, &r->strings, &r->phases, &r->frames,
                         &r->stacks, &r->stack_frames, &r->stack_off, &r->events,
                         &r->segments, &r->blocks, &r->stats, &r->imported,
                         &r->annotations};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        free(v[i]->p);
        v[i]->p = NULL;
    }
    tdm__fmt_events_zstd_free(r);
}

/* Moves what was read into a tdm_snap owned by the arena. */
static tdm_snap *finish(reader *r, int complete)
{
    static const char *const empty = "";
    if (r->stacks.n == 0) { /* stack 0 always exists */
        tdm_snap_stack *s = tdm__fmt_vec_more(r, &r->stacks, sizeof *s, 1);
        size_t *o = tdm__fmt_vec_more(r, &r->stack_off, sizeof *o, 1);
        if (!s || !o)
            return NULL;
        s->depth = 0;
        *o = 0;
        r->stacks.n = r->stack_off.n = 1;
    }
    if (r->phases.n == 0) {
        const char **s = tdm__fmt_vec_more(r, &r->phases, sizeof *s, 1);
        if (!s)
            return NULL;
        *s = empty;
        r->phases.n = 1;
    }
    tdm_snap *snap = tdm__fmt_alloc(r->a, sizeof *snap);
    if (!snap) {
        tdm__fmt_oom(r);
        return NULL;
    }
    memset(snap, 0, sizeof *snap);
    snap->header = r->header;
    tdm_snap_stack *stacks = r->stacks.p;
    const uint32_t *frames = r->stack_frames.p;
    for (size_t i = 0; i < r->stacks.n; i++)
        stacks[i].frames = stacks[i].depth ? frames + ((size_t *)r->stack_off.p)[i] : no_frames;
#define TAKE(field, count, v)                                                  \
    do {                                                                       \
        snap->field = (v).p;                                                   \
        snap->count = (v).n;                                                   \
        r->a->owned[r->a->nowned++] = (v).p;                                   \
        (v).p = NULL;                                                          \
    } while (0)
    TAKE(devices, device_count, r->devices);
    TAKE(phase_names, phase_count, r->phases);
    TAKE(frames, frame_count, r->frames);
    TAKE(stacks, stack_count, r->stacks);
    TAKE(events, event_count, r->events);
    TAKE(segments, segment_count, r->segments);
    TAKE(blocks, block_count, r->blocks);
    TAKE(stats, stats_count, r->stats);
    TAKE(imported, imported_count, r->imported);
    TAKE(annotations, annotation_count, r->annotations);
#undef TAKE
    r->a->owned[r->a->nowned++] = r->stack_frames.p;
    r->stack_frames.p = NULL;
    snap->dropped_events = r->dropped;
    snap->complete = complete;
    snap->owner_ = r->a;
    return snap;
}

tdm_status tdm__snap_read_buffer(const void *data, size_t len, int partial_ok,
                                 tdm_snap **out, tdm_read_error *err)
{
    if (err) {
        err->offset = 0;
        err->message[0] = '\0';
    }
    if (!out || (!data && len))
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    static const uint8_t nothing[1];
    reader r = {.base = data ? data : nothing, .len = len, .err = err, .status = TDM_OK};
    r.a = calloc(1, sizeof *r.a);
    if (!r.a)
        return TDM_HOST_OUT_OF_MEMORY;

    const uint8_t *p = r.base, *end = r.base + len;
    if (read_signature(&r, &p) == 0) {
        for (;;) {
            r.rec_name = NULL;
            if (p == end) {
                if (!r.have_end)
                    tdm__fmt_fail(&r, TDM_TRUNCATED, len,
                                  "file ends at byte %zu before its end record", len);
                break;
            }
            if (r.have_end) {
                tdm__fmt_fail(&r, TDM_FORMAT_ERROR, tdm__fmt_off(&r, p),
                              "unexpected bytes after the end record, at byte %llu",
                              (unsigned long long)tdm__fmt_off(&r, p));
                break;
            }
            if (read_record(&r, &p) != 0) {
                if (r.status == TDM_OK) /* every failure path must say why */
                    tdm__fmt_fail(&r, TDM_INTERNAL, r.rec_off, "reader failed without a reason");
                break;
            }
        }
    }
    tdm_status st = r.status;
    if (st == TDM_TRUNCATED && partial_ok && r.have_header)
        st = TDM_OK; /* err keeps saying where the file was cut */
    if (st == TDM_OK) {
        *out = finish(&r, r.have_end);
        if (!*out)
            st = r.status != TDM_OK && r.status != TDM_TRUNCATED ? r.status
                                                                 : TDM_HOST_OUT_OF_MEMORY;
    }
    free_vectors(&r);
    if (!*out)
        tdm__fmt_arena_destroy(r.a);
    return st;
}

/* read(2), again when a signal interrupts it: the bytes read, or 0 at the
 * end of the file or on an error (then *why says which). */
static size_t read_some(int fd, uint8_t *buf, size_t len, const char **why)
{
    for (;;) {
        ssize_t got = read(fd, buf, len);
        if (got >= 0)
            return (size_t)got;
        if (errno != EINTR) {
            *why = strerror(errno);
            return 0;
        }
    }
}

/* How far the record envelopes in buf[0, n) hold up, from *pos (0: the
 * file's start): *pos moves past each whole envelope; 1 when one is
 * certainly malformed (the signature, a version, a record's first byte,
 * type, payload or checksum field), so that reading can stop there and
 * tdm__snap_read_buffer say so, where the whole file would have been read
 * first.  Only framing: checksums and payloads are the reader's. */
static int envelopes_broken(const uint8_t *buf, size_t n, size_t *pos)
{
    const uint8_t *end = buf + n, *p = buf + *pos;
    uint64_t v;
    int neg;
    if (*pos == 0) {
        if (n < sizeof signature)
            return 0;
        if (memcmp(buf, signature, sizeof signature) != 0)
            return 1;
        p = buf + sizeof signature;
        for (int i = 0; i < 2; i++) {
            int rc = tdm__fmt_dec_int(&p, end, &v, &neg);
            if (rc == TDM_FMT_DEC_SHORT)
                return 0;
            if (rc != TDM_FMT_DEC_OK || neg)
                return 1;
        }
        *pos = (size_t)(p - buf);
    }
    for (;;) {
        if (p == end)
            return 0;
        envelope e;
        envelope_status es = envelope_at(p, end, &e);
        if (es == ENVELOPE_SHORT)
            return 0; /* the rest is still to come */
        if (es != ENVELOPE_WHOLE)
            return 1;
        p = e.at;
        *pos = (size_t)(p - buf);
    }
}

tdm_status tdm__snap_read_file(const char *path, int partial_ok, tdm_snap **out,
                               tdm_read_error *err)
{
    if (err) {
        err->offset = 0;
        err->message[0] = '\0';
    }
    if (!out || !path)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &sb) != 0)
        why = strerror(errno);
    else if (S_ISDIR(sb.st_mode))
        why = "is a directory";
    /* The signature first: a large file of something else is refused
     * after a few bytes, not read whole. */
    uint8_t head[sizeof signature];
    size_t have = 0;
    while (!why && have < sizeof head) {
        size_t got = read_some(fd, head + have, sizeof head - have, &why);
        if (got == 0)
            break;
        have += got;
    }
    if (!why && memcmp(head, signature, have) != 0) {
        close(fd);
        return tdm__snap_read_buffer(head, have, partial_ok, out, err);
    }
    /* Read the whole file (not mmap: a file cut while mapped would SIGBUS).
     * The size is only a hint, so pipes and growing files work too.  In
     * steps of at most READ_STEP, each followed by a look at the record
     * envelopes read so far: junk after a signature (a file of zeros, a
     * pipe that never ends) stops the reading at once.  The buffer grows
     * as the data comes, not to the size the file claims. */
    enum { READ_STEP = 1 << 20 };
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, scanned = 0;
    int oom = 0;
    if (!why) {
        cap = sb.st_size > 0 && (size_t)sb.st_size < READ_STEP ? (size_t)sb.st_size + 1 : 65536;
        if (cap < sizeof head)
            cap = sizeof head;
        buf = malloc(cap);
        if (!buf)
            why = "out of memory", oom = 1;
        else
            memcpy(buf, head, have), n = have;
    }
    while (!why && have == sizeof head) {
        if (n == cap) {
            uint8_t *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                why = "out of memory", oom = 1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = read_some(fd, buf + n, cap - n < READ_STEP ? cap - n : READ_STEP, &why);
        if (got == 0)
            break;
        n += got;
        if (envelopes_broken(buf, n, &scanned))
            break; /* the reader below says where and why */
    }
    if (fd >= 0)
        close(fd);
    if (why) {
        free(buf);
        if (err) {
            err->offset = n;
            snprintf(err->message, sizeof err->message, "cannot read '%s': %s", path, why);
        }
        /* Out of host memory is the tool's failure, not the input's. */
        return oom ? TDM_HOST_OUT_OF_MEMORY : TDM_IO_ERROR;
    }
    tdm_status st = tdm__snap_read_buffer(buf, n, partial_ok, out, err);
    free(buf);
    return st;
}

void tdm__snap_free(tdm_snap *snap)
{
    /* Only the reader's snapshots carry an arena; the snapshot itself lives
     * in it, so read owner_ first. */
    if (snap && snap->owner_)
        tdm__fmt_arena_destroy(snap->owner_);
}
