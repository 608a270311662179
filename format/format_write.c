/* format/format_write.c: the .tdm writer (tdm__snap_write) and the
 * record checksum shared with the reader.
 *
 * A snapshot becomes: the signature ["tidemark", major, minor], then one
 * record per table chunk, each [type, payload (bin), crc32].  A record's
 * payload is packed into a memory buffer first (its length and checksum
 * go before/after it), then the envelope goes to the file through our own
 * 1 MiB output buffer; msgpack_packer does the encoding over those two
 * write callbacks, but for the events columns, which are packed in place
 * into room reserved for a whole column (format_pack.h: the same bytes,
 * without a call per value).  Layout and encodings: docs/format.md.
 *
 * Invariants: the snapshot is validated in full (format_validate.c)
 * before any file is made, its events chunk by chunk as they are packed
 * (the temporary is removed when one is refused), so the writer never
 * produces a file that the reader would reject; the
 * bytes go to "<path>.tmp.<pid>.<n>" (format_file.h: mode 0600 or
 * file_mode=, never over a link, FIFO or device, SIGXFSZ held), which is
 * fsynced and renamed over `path`, and removed on every failure, so `path`
 * is either the old file or the whole new one; temporaries that killed
 * dumps left in that folder are removed first.  On TDM_IO_ERROR errno
 * says why (an errno value or a TDM__OUT_* code: tdm__out_strerror).
 *
 * Lock: none.  The writer keeps no pointer into the snapshot after it
 * returns; the only shared state is the CRC table, built once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <zstd.h>

#include "format_file.h"
#include "format_internal.h"
#include "format_pack.h"
#include "hash.h"

/* ---- CRC-32 (reflected 0xEDB88320), slicing by 8 ---------------------- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_table[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t prev = crc_table[s - 1][i];
            crc_table[s][i] = (prev >> 8) ^ crc_table[0][prev & 0xff];
        }
}

uint32_t tdm__format_crc32(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Eight bytes a step: about 4x the bytewise loop, and checksums run over
     * every byte of a file on both write and read. */
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
#endif
    while (len--)
        crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- sinks: memory (a record's payload) and the output file ------------- */

typedef struct membuf {
    uint8_t *p;
    size_t n, cap; /* bytes used, bytes allocated */
    int failed;    /* an allocation failed; the payload is incomplete */
} membuf;

static __attribute__((noinline)) int membuf_grow(membuf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 65536;
    while (cap - b->n < need) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Room for `len` more bytes at the end of b: where they go, or NULL when
 * it cannot grow (b->failed set).  The caller advances b->n. */
static uint8_t *membuf_reserve(membuf *b, size_t len)
{
    if (len > b->cap - b->n && membuf_grow(b, len) != 0) {
        b->failed = 1;
        return NULL;
    }
    return b->p + b->n;
}

static int membuf_write(void *data, const char *buf, size_t len)
{
    membuf *b = data;
    uint8_t *at = membuf_reserve(b, len);
    if (!at)
        return -1;
    memcpy(at, buf, len);
    b->n += len;
    return 0;
}

#define FILESINK_CAP ((size_t)1 << 20)

typedef struct filesink {
    int fd;
    uint8_t *buf; /* FILESINK_CAP bytes */
    size_t n;     /* bytes buffered */
    int err;      /* errno of the first failed write, 0 while all is well */
} filesink;

static int write_all(filesink *f, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(f->fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            f->err = errno;
            return -1;
        }
        if (w == 0) {
            f->err = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int filesink_flush(filesink *f)
{
    if (f->err)
        return -1;
    int rc = write_all(f, f->buf, f->n);
    f->n = 0;
    return rc;
}

static int filesink_write(void *data, const char *buf, size_t len)
{
    filesink *f = data;
    if (f->err)
        return -1;
    if (len > FILESINK_CAP - f->n) {
        if (filesink_flush(f) != 0)
            return -1;
        if (len >= FILESINK_CAP) /* a whole payload: no point copying it */
            return write_all(f, (const uint8_t *)buf, len);
    }
    memcpy(f->buf + f->n, buf, len);
    f->n += len;
    return 0;
}

/* ---- string table: every string stored once, ids in first-use order ---- */

typedef struct strtab {
    const char **str;
    uint32_t *len;
    size_t n, cap;   /* strings interned, room in str/len */
    uint32_t *slots; /* open addressing: id + 1, 0 = empty */
    size_t mask;
} strtab;

static int strtab_init(strtab *t, size_t expected)
{
    size_t slots = 16;
    while (slots < expected * 2)
        slots *= 2;
    t->cap = expected;
    t->str = malloc(expected * sizeof *t->str);
    t->len = malloc(expected * sizeof *t->len);
    t->slots = calloc(slots, sizeof *t->slots);
    t->mask = slots - 1;
    return t->str && t->len && t->slots ? 0 : -1;
}

static void strtab_free(strtab *t)
{
    free(t->str);
    free(t->len);
    free(t->slots);
}

/* The id of `s` (NULL counts as ""); the table was sized for every call. */
static uint32_t strtab_intern(strtab *t, const char *s)
{
    if (!s)
        s = "";
    size_t len = strlen(s);
    uint64_t h = tdm__fnv1a(s, len);
    size_t i = (size_t)(h ^ (h >> 29)) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        uint32_t slot = t->slots[i];
        if (slot == 0)
            break;
        uint32_t id = slot - 1;
        if (t->len[id] == len && memcmp(t->str[id], s, len) == 0)
            return id;
    }
    uint32_t id = (uint32_t)t->n++;
    t->str[id] = s;
    t->len[id] = (uint32_t)len;
    t->slots[i] = id + 1;
    return id;
}

/* ---- records ----------------------------------------------------------- */

static const char *const key_names[] = {
#define XX(name, str) str,
    TDM_FMT_KEY_MAP(XX)
#undef XX
};

typedef struct writer {
    const tdm_snap *snap;
    membuf rec;          /* the payload of the record being built */
    msgpack_packer pk;   /* packs into rec */
    filesink out;
    msgpack_packer fpk;  /* packs envelopes into out */
    strtab strings;
    uint32_t *frame_sids; /* per frame: function, file, module string ids */
    uint32_t *phase_sids;
    uint32_t *annotation_sids;
    ZSTD_CCtx *zctx;     /* compresses events chunks; NULL: written plain */
    membuf zrec;         /* a compressed events payload */
} writer;

static void put_key(writer *w, enum tdm_fmt_key k)
{
    msgpack_pack_str_with_body(&w->pk, key_names[k], strlen(key_names[k]));
}

static void put_str(msgpack_packer *pk, const char *s)
{
    if (!s)
        s = "";
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void put_key_u64(writer *w, enum tdm_fmt_key k, uint64_t v)
{
    put_key(w, k);
    msgpack_pack_uint64(&w->pk, v);
}

static void put_key_i64(writer *w, enum tdm_fmt_key k, int64_t v)
{
    put_key(w, k);
    msgpack_pack_int64(&w->pk, v);
}

static void put_key_str(writer *w, enum tdm_fmt_key k, const char *s)
{
    put_key(w, k);
    put_str(&w->pk, s);
}

/* Starts a table record: {"first": first, "rows": [n rows...]}. */
static void table_begin(writer *w, size_t first, size_t n)
{
    msgpack_pack_map(&w->pk, 2);
    put_key_u64(w, TDM_KEY_FIRST, first);
    put_key(w, TDM_KEY_ROWS);
    msgpack_pack_array(&w->pk, n);
}

/* Sends `len` payload bytes to the file as [type, bin, crc]. */
static tdm_status emit_payload(writer *w, unsigned type, const uint8_t *payload, size_t len)
{
    uint32_t crc = tdm__format_crc32(type, payload, len);
    msgpack_pack_array(&w->fpk, 3);
    msgpack_pack_uint32(&w->fpk, type);
    msgpack_pack_bin(&w->fpk, len);
    msgpack_pack_bin_body(&w->fpk, payload, len);
    msgpack_pack_uint32(&w->fpk, crc);
    return w->out.err ? TDM_IO_ERROR : TDM_OK;
}

/* Sends the record built in w->rec to the file. */
static tdm_status emit(writer *w, unsigned type)
{
    if (w->rec.failed)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_status st = emit_payload(w, type, w->rec.p, w->rec.n);
    w->rec.n = 0;
    return st;
}

/* Sends the events payload built in w->rec, as an events_zstd record
 * when compressing it saves bytes (a chunk of a few events may not) and
 * does not shrink it past what readers accept (TDM_FMT_ZSTD_MAX_RATIO:
 * only a chunk of near-identical events does), else as a plain events
 * record. */
static tdm_status emit_events(writer *w)
{
    if (w->rec.failed)
        return TDM_HOST_OUT_OF_MEMORY;
    if (w->zctx) {
        size_t bound = ZSTD_compressBound(w->rec.n);
        w->zrec.n = 0;
        uint8_t *z = membuf_reserve(&w->zrec, bound);
        size_t zn = z ? ZSTD_compressCCtx(w->zctx, z, bound, w->rec.p, w->rec.n,
                                          TDM_FMT_ZSTD_LEVEL)
                      : (size_t)-1; /* no memory for it: this chunk goes plain */
        w->zrec.failed = 0;
        if (z && !ZSTD_isError(zn) && zn < w->rec.n &&
            w->rec.n / TDM_FMT_ZSTD_MAX_RATIO <= zn) {
            w->rec.n = 0;
            return emit_payload(w, TDM_REC_EVENTS_ZSTD, z, zn);
        }
    }
    return emit(w, TDM_REC_EVENTS);
}

static tdm_status write_header(writer *w)
{
    const tdm_snap_header *h = &w->snap->header;
    int notes = h->notes && h->notes[0];
    msgpack_pack_map(&w->pk, 16 + notes);
    put_key_str(w, TDM_KEY_TOOL_VERSION, h->tool_version);
    put_key_str(w, TDM_KEY_HOST, h->host);
    put_key_i64(w, TDM_KEY_PID, h->pid);
    put_key_i64(w, TDM_KEY_RANK, h->rank);
    put_key_i64(w, TDM_KEY_LOCAL_RANK, h->local_rank);
    put_key_i64(w, TDM_KEY_WORLD_SIZE, h->world_size);
    put_key_u64(w, TDM_KEY_START_TIME_US, h->start_time_us);
    put_key_u64(w, TDM_KEY_DUMP_TIME_US, h->dump_time_us);
    put_key_str(w, TDM_KEY_CONFIG, h->config);
    put_key_str(w, TDM_KEY_METADATA, h->metadata);
    put_key_str(w, TDM_KEY_COMMAND, h->command);
    put_key_u64(w, TDM_KEY_RECORD_MODE, h->record_mode);
    put_key_u64(w, TDM_KEY_CONTEXT_MODE, h->context_mode);
    put_key_u64(w, TDM_KEY_STACKS_MODE, h->stacks_mode);
    put_key_u64(w, TDM_KEY_MAX_ENTRIES, h->max_entries);
    put_key_str(w, TDM_KEY_ALLOC_MODE, h->alloc_mode);
    if (notes) /* format 1.3; absent means none */
        put_key_str(w, TDM_KEY_NOTES, h->notes);
    return emit(w, TDM_REC_HEADER);
}

static tdm_status write_devices(writer *w)
{
    const tdm_snap *s = w->snap;
    tdm_status st = TDM_OK;
    for (size_t at = 0; at < s->device_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->device_count - at < TDM_FMT_CHUNK ? s->device_count - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            const tdm_snap_device *d = &s->devices[i];
            msgpack_pack_array(&w->pk, TDM_DEV_FIELDS);
            msgpack_pack_int64(&w->pk, d->index);
            put_str(&w->pk, d->vendor);
            put_str(&w->pk, d->name);
            msgpack_pack_uint64(&w->pk, d->capacity);
        }
        st = emit(w, TDM_REC_DEVICES);
    }
    return st;
}

/* Interns every string and writes the string table, then the phase table. */
static tdm_status write_strings_and_phases(writer *w)
{
    const tdm_snap *s = w->snap;
    for (size_t i = 0; i < s->frame_count; i++) {
        w->frame_sids[3 * i] = strtab_intern(&w->strings, s->frames[i].function);
        w->frame_sids[3 * i + 1] = strtab_intern(&w->strings, s->frames[i].file);
        w->frame_sids[3 * i + 2] = strtab_intern(&w->strings, s->frames[i].module);
    }
    for (size_t i = 0; i < s->phase_count; i++)
        w->phase_sids[i] = strtab_intern(&w->strings, s->phase_names[i]);
    for (size_t i = 0; i < s->annotation_count; i++)
        w->annotation_sids[i] = strtab_intern(&w->strings, s->annotations[i].text);

    tdm_status st = TDM_OK;
    const strtab *t = &w->strings;
    for (size_t at = 0; at < t->n && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = t->n - at < TDM_FMT_CHUNK ? t->n - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++)
            msgpack_pack_str_with_body(&w->pk, t->str[i], t->len[i]);
        st = emit(w, TDM_REC_STRINGS);
    }
    for (size_t at = 0; at < s->phase_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->phase_count - at < TDM_FMT_CHUNK ? s->phase_count - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++)
            msgpack_pack_uint32(&w->pk, w->phase_sids[i]);
        st = emit(w, TDM_REC_PHASES);
    }
    return st;
}

static tdm_status write_frames_and_stacks(writer *w)
{
    const tdm_snap *s = w->snap;
    tdm_status st = TDM_OK;
    for (size_t at = 0; at < s->frame_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->frame_count - at < TDM_FMT_CHUNK ? s->frame_count - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            msgpack_pack_array(&w->pk, TDM_FRM_FIELDS + 1); /* + kind (1.2) */
            msgpack_pack_uint64(&w->pk, s->frames[i].pc);
            msgpack_pack_uint32(&w->pk, w->frame_sids[3 * i]);
            msgpack_pack_uint32(&w->pk, w->frame_sids[3 * i + 1]);
            msgpack_pack_uint32(&w->pk, s->frames[i].line);
            msgpack_pack_uint32(&w->pk, w->frame_sids[3 * i + 2]);
            msgpack_pack_uint8(&w->pk, s->frames[i].kind);
        }
        st = emit(w, TDM_REC_FRAMES);
    }
    /* Stacks: a chunk ends at TDM_FMT_CHUNK stacks or about 1M frame
     * indices, whichever comes first, so deep stacks keep records small. */
    size_t at = 0;
    while (at < s->stack_count && st == TDM_OK) {
        size_t n = 0, frames = 0;
        while (at + n < s->stack_count && n < TDM_FMT_CHUNK &&
               (n == 0 || frames < ((size_t)1 << 20)))
            frames += s->stacks[at + n++].depth;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            const tdm_snap_stack *k = &s->stacks[i];
            msgpack_pack_array(&w->pk, k->depth);
            for (uint32_t j = 0; j < k->depth; j++)
                msgpack_pack_uint32(&w->pk, k->frames[j]);
        }
        st = emit(w, TDM_REC_STACKS);
        at += n;
    }
    return st;
}

/* The columns of an events chunk, in file order: XX(NAME, key, signed,
 * value of event e after event p).  Deltas run from 0 at the chunk's
 * start (p is a zeroed event for the first), so each chunk decodes alone;
 * they are differences mod 2^64, written signed. */
#define EVENT_COLUMNS(XX)                                                      \
    XX(TIME, TDM_KEY_TIME_NS, 1, e->time_ns - p->time_ns)                      \
    XX(ACTION, TDM_KEY_ACTION, 0, e->action)                                   \
    XX(DEVICE, TDM_KEY_DEVICE, 1, (int64_t)e->device)                          \
    XX(ADDR, TDM_KEY_ADDR, 1, e->addr - p->addr)                               \
    XX(SIZE, TDM_KEY_SIZE, 0, e->size)                                         \
    XX(REQUESTED, TDM_KEY_REQUESTED, 1, e->size - e->requested)                \
    XX(STREAM, TDM_KEY_STREAM, 0, e->stream)                                   \
    XX(STACK, TDM_KEY_STACK, 0, e->stack_id)                                   \
    XX(PHASE, TDM_KEY_PHASE, 0, e->phase)                                      \
    XX(STEP, TDM_KEY_STEP, 1, (uint64_t)e->step - p->step)                     \
    XX(CATEGORY, TDM_KEY_CATEGORY, 0, e->category)

enum {
#define XX(name, key, is_signed, expr) COL_##name,
    EVENT_COLUMNS(XX)
#undef XX
    COLUMNS
};

/* A column is a single integer when every value of the chunk is the same
 * (never time_ns, so a record always spends at least a byte per event),
 * else an array with one integer per event.  One pass over the chunk
 * finds which columns vary (most of a training loop's are constant: one
 * device, stream, phase or category for long stretches); each varying
 * column is then packed in a pass of its own into room for the worst case
 * (format_pack.h), with no call per value. */
static tdm_status write_events(writer *w)
{
    const tdm_snap *s = w->snap;
    static const tdm_event zero;
    tdm_status st = TDM_OK;
    for (size_t at = 0; at < s->event_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->event_count - at < TDM_FMT_CHUNK ? s->event_count - at : TDM_FMT_CHUNK;
        const tdm_event *ev = &s->events[at];
        st = tdm__format_validate_events(s, at, n);
        if (st != TDM_OK)
            break; /* the temporary is removed: no file the reader rejects */
        uint64_t first[COLUMNS], varies[COLUMNS] = {[COL_TIME] = 1};
        {
            const tdm_event *e = &ev[0], *p = &zero;
#define XX(name, key, is_signed, expr) first[COL_##name] = (uint64_t)(expr);
            EVENT_COLUMNS(XX)
#undef XX
        }
        for (size_t i = 1; i < n; i++) {
            const tdm_event *e = &ev[i], *p = &ev[i - 1];
#define XX(name, key, is_signed, expr) varies[COL_##name] |= (uint64_t)(expr) ^ first[COL_##name];
            EVENT_COLUMNS(XX)
#undef XX
        }
        msgpack_pack_map(&w->pk, 13);
        put_key_u64(w, TDM_KEY_FIRST, at);
        put_key_u64(w, TDM_KEY_COUNT, n);
#define XX(name, key, is_signed, expr)                                          \
    do {                                                                       \
        put_key(w, key);                                                       \
        uint8_t *q = membuf_reserve(&w->rec, TDM__PACK_ARRAY_MAX +              \
                                                 n * TDM__PACK_INT_MAX);       \
        if (!q)                                                                \
            break;                                                             \
        if (!varies[COL_##name]) {                                             \
            uint64_t v = first[COL_##name];                                    \
            q = (is_signed) ? tdm__pack_int(q, (int64_t)v) : tdm__pack_uint(q, v); \
        } else {                                                               \
            q = tdm__pack_array_header(q, (uint32_t)n);                        \
            for (size_t i = 0; i < n; i++) {                                   \
                const tdm_event *e = &ev[i], *p = i ? &ev[i - 1] : &zero;      \
                (void)p;                                                       \
                uint64_t v = (uint64_t)(expr);                                 \
                q = (is_signed) ? tdm__pack_int(q, (int64_t)v) : tdm__pack_uint(q, v); \
            }                                                                  \
        }                                                                      \
        w->rec.n = (size_t)(q - w->rec.p);                                     \
    } while (0);
        EVENT_COLUMNS(XX)
#undef XX
        st = emit_events(w);
    }
    return st;
}

static void put_block(writer *w, const tdm_snap_block *b)
{
    msgpack_pack_array(&w->pk, TDM_BLK_FIELDS);
    msgpack_pack_uint64(&w->pk, b->address);
    msgpack_pack_uint64(&w->pk, b->size);
    msgpack_pack_uint64(&w->pk, b->requested_size);
    msgpack_pack_uint64(&w->pk, b->alloc_time_ns);
    msgpack_pack_uint32(&w->pk, b->stack_id);
    msgpack_pack_uint8(&w->pk, b->state);
    msgpack_pack_uint8(&w->pk, b->category);
}

static tdm_status write_segments(writer *w)
{
    const tdm_snap *s = w->snap;
    tdm_status st = TDM_OK;
    size_t at = 0;
    while (at < s->segment_count && st == TDM_OK) {
        size_t n = 0, blocks = 0;
        while (at + n < s->segment_count && n < TDM_FMT_CHUNK &&
               (n == 0 || blocks < TDM_FMT_CHUNK))
            blocks += s->segments[at + n++].block_count;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            const tdm_snap_segment *g = &s->segments[i];
            msgpack_pack_array(&w->pk, TDM_SEG_FIELDS);
            msgpack_pack_int64(&w->pk, g->device);
            msgpack_pack_uint8(&w->pk, g->pool);
            if (g->is_expandable)
                msgpack_pack_true(&w->pk);
            else
                msgpack_pack_false(&w->pk);
            msgpack_pack_uint64(&w->pk, g->address);
            msgpack_pack_uint64(&w->pk, g->total_size);
            msgpack_pack_uint64(&w->pk, g->stream);
            msgpack_pack_uint32(&w->pk, g->stack_id);
            msgpack_pack_array(&w->pk, g->block_count);
            for (uint32_t k = 0; k < g->block_count; k++)
                put_block(w, &s->blocks[g->first_block + k]);
        }
        st = emit(w, TDM_REC_SEGMENTS);
        at += n;
    }
    return st;
}

static void put_stat(writer *w, const tdm_stat *v)
{
    msgpack_pack_array(&w->pk, TDM_FMT_STAT_FIELDS);
    msgpack_pack_int64(&w->pk, v->current);
    msgpack_pack_int64(&w->pk, v->peak);
    msgpack_pack_int64(&w->pk, v->allocated);
    msgpack_pack_int64(&w->pk, v->freed);
}

static tdm_status write_stats_and_end(writer *w)
{
    const tdm_snap *s = w->snap;
    tdm_status st = TDM_OK;
    for (size_t at = 0; at < s->stats_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->stats_count - at < TDM_FMT_CHUNK ? s->stats_count - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            const tdm_snap_device_stats *d = &s->stats[i];
            msgpack_pack_array(&w->pk, TDM_STATS_FIELDS + 1); /* + pool (1.1) */
            msgpack_pack_int64(&w->pk, d->device);
            put_stat(w, &d->stats.allocated_bytes);
            put_stat(w, &d->stats.reserved_bytes);
            put_stat(w, &d->stats.active_bytes);
            put_stat(w, &d->stats.requested_bytes);
            put_stat(w, &d->stats.allocation);
            put_stat(w, &d->stats.segment);
            msgpack_pack_uint64(&w->pk, d->stats.num_alloc_retries);
            msgpack_pack_uint64(&w->pk, d->stats.num_ooms);
            msgpack_pack_uint8(&w->pk, d->pool);
        }
        st = emit(w, TDM_REC_STATS);
    }
    for (size_t at = 0; at < s->imported_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->imported_count - at < TDM_FMT_CHUNK ? s->imported_count - at : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (const tdm_snap_imported *m = &s->imported[at]; m < &s->imported[at + n]; m++) {
            msgpack_pack_array(&w->pk, TDM_IMP_FIELDS);
            msgpack_pack_int64(&w->pk, m->device);
            msgpack_pack_int64(&w->pk, m->source_device);
            msgpack_pack_uint8(&w->pk, m->kind);
            msgpack_pack_uint64(&w->pk, m->address);
            msgpack_pack_uint64(&w->pk, m->size);
            msgpack_pack_uint32(&w->pk, m->stack_id);
            msgpack_pack_uint64(&w->pk, m->map_time_ns);
        }
        st = emit(w, TDM_REC_IMPORTED);
    }
    for (size_t at = 0; at < s->annotation_count && st == TDM_OK; at += TDM_FMT_CHUNK) {
        size_t n = s->annotation_count - at < TDM_FMT_CHUNK ? s->annotation_count - at
                                                            : TDM_FMT_CHUNK;
        table_begin(w, at, n);
        for (size_t i = at; i < at + n; i++) {
            const tdm_snap_annotation *a = &s->annotations[i];
            msgpack_pack_array(&w->pk, TDM_ANN_FIELDS);
            msgpack_pack_uint8(&w->pk, a->kind);
            msgpack_pack_uint64(&w->pk, a->before_event);
            msgpack_pack_uint64(&w->pk, a->time_ns);
            msgpack_pack_int64(&w->pk, a->device);
            msgpack_pack_uint64(&w->pk, a->addr);
            msgpack_pack_uint64(&w->pk, a->size);
            msgpack_pack_uint32(&w->pk, w->annotation_sids[i]);
        }
        st = emit(w, TDM_REC_ANNOTATIONS);
    }
    if (st != TDM_OK)
        return st;
    msgpack_pack_map(&w->pk, 1);
    put_key_u64(w, TDM_KEY_DROPPED_EVENTS, s->dropped_events);
    if ((st = emit(w, TDM_REC_DROPPED)) != TDM_OK)
        return st;
    msgpack_pack_map(&w->pk, 1);
    put_key_u64(w, TDM_KEY_EVENTS, s->event_count);
    return emit(w, TDM_REC_END);
}

static tdm_status write_body(writer *w)
{
    msgpack_pack_array(&w->fpk, 3);
    put_str(&w->fpk, TDM_FMT_MAGIC);
    msgpack_pack_uint32(&w->fpk, TDM_FORMAT_VERSION);
    msgpack_pack_uint32(&w->fpk, TDM_FMT_MINOR);
    tdm_status st = write_header(w);
    if (st == TDM_OK)
        st = write_devices(w);
    if (st == TDM_OK)
        st = write_strings_and_phases(w);
    if (st == TDM_OK)
        st = write_frames_and_stacks(w);
    if (st == TDM_OK)
        st = write_events(w);
    if (st == TDM_OK)
        st = write_segments(w);
    if (st == TDM_OK)
        st = write_stats_and_end(w);
    if (st == TDM_OK && filesink_flush(&w->out) != 0)
        st = TDM_IO_ERROR;
    return st;
}

/* ---- the file: temporary name, fsync, rename (format_file.c) ------------ */

/* Temporaries of killed dumps untouched this long are removed. */
#define STALE_TMP_AGE_S 60

static tdm_status write_file(writer *w, const char *path, int replace)
{
    tdm__out_file o;
    (void)tdm__out_sweep_stale(path, STALE_TMP_AGE_S);
    int e = tdm__out_open(&o, path);
    if (e) {
        errno = e;
        return e == ENOMEM ? TDM_HOST_OUT_OF_MEMORY : TDM_IO_ERROR;
    }
    w->out.fd = o.fd;
    tdm_status st = write_body(w);
    e = w->out.err;
    if (st != TDM_OK) {
        tdm__out_discard(&o);
    } else if ((e = tdm__out_commit(&o, replace)) != 0) {
        st = TDM_IO_ERROR;
    }
    if (st != TDM_OK && e)
        errno = e;
    return st;
}

tdm_status tdm__snap_write_as(const tdm_snap *snap, const char *path, int replace)
{
    if (!snap || !path || !*path)
        return TDM_INVALID_ARGUMENT;
    tdm_status st = tdm__format_validate_tables(snap);
    if (st == TDM_OK)
        st = tdm__format_validate_state(snap);
    if (st != TDM_OK)
        return st;

    writer w = {.snap = snap, .out = {.fd = -1}};
    size_t nstr = 3 * snap->frame_count + snap->phase_count + snap->annotation_count + 1;
    w.out.buf = malloc(FILESINK_CAP);
    w.frame_sids = malloc((3 * snap->frame_count + 1) * sizeof *w.frame_sids);
    w.phase_sids = malloc((snap->phase_count + 1) * sizeof *w.phase_sids);
    w.annotation_sids = malloc((snap->annotation_count + 1) * sizeof *w.annotation_sids);
    if (!w.out.buf || !w.frame_sids || !w.phase_sids || !w.annotation_sids ||
        strtab_init(&w.strings, nstr) != 0) {
        st = TDM_HOST_OUT_OF_MEMORY;
    } else {
        /* Without a context (out of memory) the events go plain: a
         * bigger file, the same history. */
        w.zctx = ZSTD_createCCtx();
        msgpack_packer_init(&w.pk, &w.rec, membuf_write);
        msgpack_packer_init(&w.fpk, &w.out, filesink_write);
        st = write_file(&w, path, replace);
    }
    int e = errno;
    strtab_free(&w.strings);
    free(w.out.buf);
    free(w.frame_sids);
    free(w.phase_sids);
    free(w.annotation_sids);
    free(w.rec.p);
    free(w.zrec.p);
    ZSTD_freeCCtx(w.zctx);
    errno = e;
    return st;
}

tdm_status tdm__snap_write(const tdm_snap *snap, const char *path)
{
    return tdm__snap_write_as(snap, path, 1);
}
