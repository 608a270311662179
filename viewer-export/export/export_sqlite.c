/* viewer-export/export/export_sqlite.c: `tidemark export --format sqlite`,
 * the snapshot and its analysis model as an SQLite database, for people
 * who query a profile with SQL (as they do `nsys export --type sqlite`).
 * docs/export.md "sqlite" is the schema and the queries users run; its
 * version is PRAGMA user_version, raised whenever a column changes
 * meaning or goes away.
 *
 * Built only where libsqlite3 was found (TDM_HAVE_SQLITE); otherwise the
 * format's row has no exporter and the command says so in one line.
 *
 * The database is built in memory (SQLite's memdb), then its bytes are
 * written to the stream the command gave, so it goes through the same
 * temporary-then-rename as every export (never half-written) and `-o -`
 * works too; the cost is host memory about the size of the file.
 *
 * Every allocation row carries the category every other output shows
 * (tdm__categories_infer); so does every event of an allocation and
 * every live block.  Positions (`seq`) are indices into the snapshot's
 * events, -1 the window start, as in the json export.  No state, no locks.
 */
#include "categories.h"
#include "export_formats.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static const char schema[] =
    "PRAGMA user_version = 1;"
    "CREATE TABLE snapshot (path TEXT, format_version INTEGER, tool_version TEXT,"
    " host TEXT, pid INTEGER, rank INTEGER, local_rank INTEGER, world_size INTEGER,"
    " command TEXT, metadata TEXT, notes TEXT, config TEXT, alloc_mode TEXT,"
    " start_time_us INTEGER, dump_time_us INTEGER, max_entries INTEGER,"
    " event_count INTEGER, dropped_events INTEGER, complete INTEGER, state_known INTEGER,"
    " window_start_ns INTEGER, window_end_ns INTEGER, time_origin_ns INTEGER);"
    "CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT UNIQUE);"
    "CREATE TABLE phases (id INTEGER PRIMARY KEY, name TEXT);"
    "CREATE TABLE devices (ordinal INTEGER PRIMARY KEY, vendor TEXT, name TEXT,"
    " capacity INTEGER, peak_allocated INTEGER, peak_seq INTEGER, peak_time_ns INTEGER,"
    " peak_step INTEGER, peak_phase TEXT, reserved_known INTEGER, reserved_at_peak INTEGER,"
    " peak_reserved INTEGER, end_source TEXT, end_allocated INTEGER, end_reserved INTEGER,"
    " end_blocks INTEGER, alloc_events INTEGER, free_events INTEGER, oom_events INTEGER,"
    " seeded_from_free INTEGER, seeded_from_state INTEGER, anomalies INTEGER);"
    "CREATE TABLE frames (id INTEGER PRIMARY KEY, pc INTEGER, function TEXT, file TEXT,"
    " line INTEGER, module TEXT, kind TEXT);"
    "CREATE TABLE stacks (stack_id INTEGER, depth INTEGER, frame_id INTEGER,"
    " PRIMARY KEY (stack_id, depth)) WITHOUT ROWID;"
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, time_ns INTEGER, action TEXT,"
    " device INTEGER, addr INTEGER, size INTEGER, requested INTEGER, stream INTEGER,"
    " stack_id INTEGER, phase_id INTEGER, step INTEGER, tag TEXT, allocation_id INTEGER,"
    " category TEXT);"
    "CREATE TABLE allocations (id INTEGER PRIMARY KEY, device INTEGER, addr INTEGER,"
    " size INTEGER, alloc_seq INTEGER, free_requested_seq INTEGER, free_seq INTEGER,"
    " alloc_time_ns INTEGER, free_time_ns INTEGER, stack_id INTEGER, category TEXT,"
    " tagged INTEGER, stack_of_free INTEGER, flags INTEGER);"
    "CREATE TABLE timeline (device INTEGER, seq INTEGER, time_ns INTEGER,"
    " allocated INTEGER, reserved INTEGER);"
    "CREATE TABLE segments (id INTEGER PRIMARY KEY, device INTEGER, pool TEXT,"
    " expandable INTEGER, address INTEGER, size INTEGER, stream INTEGER, stack_id INTEGER);"
    "CREATE TABLE blocks (id INTEGER PRIMARY KEY, segment_id INTEGER, address INTEGER,"
    " size INTEGER, requested_size INTEGER, alloc_time_ns INTEGER, stack_id INTEGER,"
    " state TEXT, tag TEXT, allocation_id INTEGER, category TEXT);";

/* Made once the tables are full: building an index at the end is faster
 * than keeping it up to date row by row. */
static const char indexes[] =
    "CREATE INDEX allocations_by_time ON allocations (device, alloc_seq, free_seq);"
    "CREATE INDEX allocations_by_stack ON allocations (stack_id);"
    "CREATE VIEW allocations_at_peak AS SELECT a.* FROM allocations a"
    " JOIN devices d ON a.device = d.ordinal"
    " WHERE a.alloc_seq <= d.peak_seq AND (a.free_seq IS NULL OR a.free_seq > d.peak_seq);"
    "CREATE VIEW sites AS SELECT s.stack_id, f.function, f.file, f.line, f.module"
    " FROM stacks s JOIN frames f ON f.id = s.frame_id WHERE s.depth = 0;";

typedef struct sq {
    sqlite3 *db;
    int rc; /* first SQLite failure, SQLITE_OK while none */
} sq;

/* A statement for `sql`, or NULL with sq.rc set. */
static sqlite3_stmt *prepare(sq *q, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (q->rc == SQLITE_OK)
        q->rc = sqlite3_prepare_v2(q->db, sql, -1, &st, NULL);
    return q->rc == SQLITE_OK ? st : NULL;
}

/* Runs the bound row and gets the statement ready for the next. */
static void row(sq *q, sqlite3_stmt *st)
{
    if (q->rc != SQLITE_OK || !st)
        return;
    int r = sqlite3_step(st);
    if (r != SQLITE_DONE)
        q->rc = r;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static void exec(sq *q, const char *sql)
{
    if (q->rc == SQLITE_OK)
        q->rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
}

static void b_i64(sqlite3_stmt *st, int col, int64_t v) { sqlite3_bind_int64(st, col, v); }

/* Bytes and counts: SQLite's integers are signed, so a value past
 * INT64_MAX (a corrupt or hostile size) is kept as a real, whose sums do
 * not overflow, rather than going negative. */
static void b_u64(sqlite3_stmt *st, int col, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        sqlite3_bind_int64(st, col, (int64_t)v);
    else
        sqlite3_bind_double(st, col, (double)v);
}

/* Addresses and program counters are names, not quantities: their 64
 * bits as a signed integer (docs/export.md says how to print them). */
static void b_addr(sqlite3_stmt *st, int col, uint64_t v) { sqlite3_bind_int64(st, col, (int64_t)v); }

static void b_str(sqlite3_stmt *st, int col, const char *s)
{
    if (s)
        sqlite3_bind_text(st, col, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, col);
}

/* A position that may be "never" (still live at the dump): NULL then. */
static void b_seq(sqlite3_stmt *st, int col, int64_t seq)
{
    if (seq == TDM_MODEL_SEQ_NEVER)
        sqlite3_bind_null(st, col);
    else
        sqlite3_bind_int64(st, col, seq);
}

static const char *category_of(uint8_t c) { return tdm_category_name((tdm_category)c); }

static const char *pool_name(uint8_t p)
{
    return p == TDM_POOL_LARGE ? "large" : p == TDM_POOL_SMALL ? "small" : "none";
}

static const char *block_state_name(uint8_t s)
{
    return s == TDM_BLOCK_ACTIVE_ALLOCATED      ? "active_allocated"
           : s == TDM_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free"
                                                : "inactive";
}

static const char *frame_kind_name(uint8_t k)
{
    return k == TDM_FRAME_INLINED ? "inlined" : k == TDM_FRAME_PYTHON ? "python" : "native";
}

typedef struct sqx {
    sq q;
    const tdm_export_context *ctx;
    const tdm_model *m;
    const uint8_t *cats; /* per allocation */
    int *keep;           /* per model device index: exported */
    int64_t *ev_alloc;   /* per event: the allocation it belongs to, or -1 */
} sqx;

static void put_snapshot(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    const tdm_snap_header *h = &s->header;
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO snapshot VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,"
                                      "?,?,?,?,?,?,?,?,?,?)");
    if (!st)
        return;
    int c = 1;
    b_str(st, c++, e->ctx->input_path);
    b_i64(st, c++, h->format_version);
    b_str(st, c++, h->tool_version);
    b_str(st, c++, h->host);
    b_i64(st, c++, h->pid);
    b_i64(st, c++, h->rank);
    b_i64(st, c++, h->local_rank);
    b_i64(st, c++, h->world_size);
    b_str(st, c++, h->command);
    b_str(st, c++, h->metadata);
    b_str(st, c++, h->notes ? h->notes : "");
    b_str(st, c++, h->config);
    b_str(st, c++, h->alloc_mode);
    b_u64(st, c++, h->start_time_us);
    b_u64(st, c++, h->dump_time_us);
    b_u64(st, c++, h->max_entries);
    b_u64(st, c++, s->event_count);
    b_u64(st, c++, s->dropped_events);
    b_i64(st, c++, s->complete != 0);
    b_i64(st, c++, e->m->state_known != 0);
    b_u64(st, c++, e->m->window_start_ns);
    b_u64(st, c++, e->m->window_end_ns);
    b_u64(st, c++, tdm__model_time_origin_ns(e->m));
    row(&e->q, st);
    sqlite3_finalize(st);
}

static void put_names(sqx *e)
{
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO categories VALUES (?,?)");
    for (unsigned k = 0; st && k < TDM_CATEGORY_COUNT_; k++) {
        b_i64(st, 1, k);
        b_str(st, 2, category_of((uint8_t)k));
        row(&e->q, st);
    }
    sqlite3_finalize(st);
    st = prepare(&e->q, "INSERT INTO phases VALUES (?,?)");
    for (size_t i = 0; st && i < e->ctx->snap->phase_count; i++) {
        b_i64(st, 1, (int64_t)i);
        b_str(st, 2, e->ctx->snap->phase_names[i]);
        row(&e->q, st);
    }
    sqlite3_finalize(st);
}

static void put_devices(sqx *e)
{
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO devices VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,"
                                      "?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt *tl = prepare(&e->q, "INSERT INTO timeline VALUES (?,?,?,?,?)");
    for (size_t d = 0; st && tl && d < e->m->device_count; d++) {
        const tdm_model_device *dev = &e->m->devices[d];
        char pbuf[32];
        int c = 1;
        if (!e->keep[d])
            continue;
        b_i64(st, c++, dev->ordinal);
        b_str(st, c++, dev->vendor);
        b_str(st, c++, dev->name);
        b_u64(st, c++, dev->capacity);
        b_i64(st, c++, dev->peak_allocated);
        b_i64(st, c++, dev->peak_seq);
        b_u64(st, c++, dev->peak_time_ns);
        b_i64(st, c++, dev->peak_step);
        b_str(st, c++, tdm__model_phase_name(e->m, dev->peak_phase, pbuf, sizeof pbuf));
        b_i64(st, c++, dev->reserved_known != 0);
        b_i64(st, c++, dev->reserved_at_peak);
        b_i64(st, c++, dev->peak_reserved);
        b_str(st, c++, dev->end_source == TDM_MODEL_END_FROM_STATE ? "state" : "replay");
        b_i64(st, c++, dev->end_allocated);
        b_i64(st, c++, dev->end_reserved);
        b_u64(st, c++, dev->end_blocks);
        b_u64(st, c++, dev->alloc_events);
        b_u64(st, c++, dev->free_events);
        b_u64(st, c++, dev->oom_events);
        b_u64(st, c++, dev->seeded_from_free);
        b_u64(st, c++, dev->seeded_from_state);
        b_u64(st, c++, dev->anomalies);
        row(&e->q, st);
        for (size_t i = 0; i < dev->sample_count && e->q.rc == SQLITE_OK; i++) {
            const tdm_model_sample *sm = &dev->samples[i];
            b_i64(tl, 1, dev->ordinal);
            b_i64(tl, 2, sm->seq);
            b_u64(tl, 3, sm->time_ns);
            b_i64(tl, 4, sm->allocated);
            b_i64(tl, 5, sm->reserved);
            row(&e->q, tl);
        }
    }
    sqlite3_finalize(st);
    sqlite3_finalize(tl);
}

static void put_frames_and_stacks(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO frames VALUES (?,?,?,?,?,?,?)");
    for (size_t i = 0; st && i < s->frame_count && e->q.rc == SQLITE_OK; i++) {
        const tdm_snap_frame *f = &s->frames[i];
        b_i64(st, 1, (int64_t)i);
        b_addr(st, 2, f->pc);
        b_str(st, 3, f->function);
        b_str(st, 4, f->file);
        b_i64(st, 5, f->line);
        b_str(st, 6, f->module);
        b_str(st, 7, frame_kind_name(f->kind));
        row(&e->q, st);
    }
    sqlite3_finalize(st);
    st = prepare(&e->q, "INSERT INTO stacks VALUES (?,?,?)");
    for (size_t i = 0; st && i < s->stack_count && e->q.rc == SQLITE_OK; i++)
        for (uint32_t k = 0; k < s->stacks[i].depth; k++) {
            b_i64(st, 1, (int64_t)i);
            b_i64(st, 2, k);
            b_i64(st, 3, s->stacks[i].frames[k]);
            row(&e->q, st);
        }
    sqlite3_finalize(st);
}

/* Which allocation each alloc / free_requested / free_completed event
 * belongs to, from the model's intervals. */
static void map_events(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    for (size_t i = 0; i < s->event_count; i++)
        e->ev_alloc[i] = -1;
    for (size_t i = 0; i < e->m->alloc_count; i++) {
        const tdm_model_alloc *a = &e->m->allocs[i];
        int64_t at[3] = {a->alloc_seq, a->free_req_seq, a->free_seq};
        uint8_t want[3] = {TDM_ACTION_ALLOC, TDM_ACTION_FREE_REQUESTED,
                           TDM_ACTION_FREE_COMPLETED};
        for (int k = 0; k < 3; k++)
            if (at[k] >= 0 && at[k] != TDM_MODEL_SEQ_NEVER && (size_t)at[k] < s->event_count &&
                s->events[at[k]].action == want[k])
                e->ev_alloc[at[k]] = (int64_t)i;
    }
}

/* Marks belong to the whole process; the rest to their device. */
static int event_kept(const sqx *e, const tdm_event *ev)
{
    if (ev->action == TDM_ACTION_PHASE || ev->action == TDM_ACTION_STEP ||
        ev->action == TDM_ACTION_SNAPSHOT || e->ctx->device < 0)
        return 1;
    int d = tdm__model_device_index(e->m, ev->device);
    return d >= 0 && e->keep[d];
}

static void put_events(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t i = 0; st && i < s->event_count && e->q.rc == SQLITE_OK; i++) {
        const tdm_event *ev = &s->events[i];
        if (!event_kept(e, ev))
            continue;
        const char *action = tdm__action_name(ev->action);
        b_i64(st, 1, (int64_t)i);
        b_u64(st, 2, ev->time_ns);
        b_str(st, 3, action ? action : "?");
        b_i64(st, 4, ev->device);
        b_addr(st, 5, ev->addr);
        b_u64(st, 6, ev->size);
        b_u64(st, 7, ev->requested);
        b_addr(st, 8, ev->stream);
        b_i64(st, 9, ev->stack_id);
        b_i64(st, 10, ev->phase);
        b_i64(st, 11, ev->step);
        b_str(st, 12, category_of(ev->category));
        if (e->ev_alloc[i] >= 0) {
            b_i64(st, 13, e->ev_alloc[i]);
            b_str(st, 14, category_of(e->cats[e->ev_alloc[i]]));
        }
        row(&e->q, st);
    }
    sqlite3_finalize(st);
}

static void put_allocations(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    sqlite3_stmt *st = prepare(&e->q, "INSERT INTO allocations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,"
                                      "?,?)");
    for (size_t i = 0; st && i < e->m->alloc_count && e->q.rc == SQLITE_OK; i++) {
        const tdm_model_alloc *a = &e->m->allocs[i];
        if (!e->keep[a->device_index])
            continue;
        b_i64(st, 1, (int64_t)i);
        b_i64(st, 2, e->m->devices[a->device_index].ordinal);
        b_addr(st, 3, a->addr);
        b_u64(st, 4, a->size);
        b_i64(st, 5, a->alloc_seq);
        b_seq(st, 6, a->free_req_seq);
        b_seq(st, 7, a->free_seq);
        b_u64(st, 8, a->alloc_time_ns);
        if (a->free_seq != TDM_MODEL_SEQ_NEVER && (size_t)a->free_seq < s->event_count)
            b_u64(st, 9, s->events[a->free_seq].time_ns);
        b_i64(st, 10, a->stack_id);
        b_str(st, 11, category_of(e->cats[i]));
        b_i64(st, 12, a->category != TDM_CATEGORY_UNKNOWN);
        b_i64(st, 13, (a->flags & TDM_MODEL_STACK_OF_FREE) != 0);
        b_i64(st, 14, a->flags);
        row(&e->q, st);
    }
    sqlite3_finalize(st);
}

/* The allocations live at the dump, by (device index, address), to name
 * the allocation of each active block. */
typedef struct live_key {
    uint32_t device_index;
    uint64_t addr;
    size_t alloc;
} live_key;

static int live_cmp(const void *pa, const void *pb)
{
    const live_key *a = pa, *b = pb;
    if (a->device_index != b->device_index)
        return a->device_index < b->device_index ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static tdm_status put_segments_and_blocks(sqx *e)
{
    const tdm_snap *s = e->ctx->snap;
    const tdm_model *m = e->m;
    size_t nlive = 0;
    live_key *live = malloc((m->alloc_count + 1) * sizeof *live);
    if (!live)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->alloc_count; i++)
        if (m->allocs[i].flags & TDM_MODEL_LIVE_AT_END)
            live[nlive++] = (live_key){m->allocs[i].device_index, m->allocs[i].addr, i};
    qsort(live, nlive, sizeof *live, live_cmp);

    sqlite3_stmt *sg = prepare(&e->q, "INSERT INTO segments VALUES (?,?,?,?,?,?,?,?)");
    sqlite3_stmt *bl = prepare(&e->q, "INSERT INTO blocks VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t g = 0; sg && bl && g < s->segment_count && e->q.rc == SQLITE_OK; g++) {
        const tdm_snap_segment *seg = &s->segments[g];
        int d = tdm__model_device_index(m, seg->device);
        if (d >= 0 && !e->keep[d])
            continue;
        b_i64(sg, 1, (int64_t)g);
        b_i64(sg, 2, seg->device);
        b_str(sg, 3, pool_name(seg->pool));
        b_i64(sg, 4, seg->is_expandable != 0);
        b_addr(sg, 5, seg->address);
        b_u64(sg, 6, seg->total_size);
        b_addr(sg, 7, seg->stream);
        b_i64(sg, 8, seg->stack_id);
        row(&e->q, sg);
        for (uint32_t k = 0; k < seg->block_count && e->q.rc == SQLITE_OK; k++) {
            size_t bi = (size_t)seg->first_block + k;
            if (bi >= s->block_count)
                break;
            const tdm_snap_block *b = &s->blocks[bi];
            b_i64(bl, 1, (int64_t)bi);
            b_i64(bl, 2, (int64_t)g);
            b_addr(bl, 3, b->address);
            b_u64(bl, 4, b->size);
            b_u64(bl, 5, b->requested_size);
            b_u64(bl, 6, b->alloc_time_ns);
            b_i64(bl, 7, b->stack_id);
            b_str(bl, 8, block_state_name(b->state));
            b_str(bl, 9, category_of(b->category));
            live_key key = {(uint32_t)d, b->address, 0};
            const live_key *hit = d >= 0 && b->state != TDM_BLOCK_INACTIVE
                                      ? bsearch(&key, live, nlive, sizeof *live, live_cmp)
                                      : NULL;
            if (hit) {
                b_i64(bl, 10, (int64_t)hit->alloc);
                b_str(bl, 11, category_of(e->cats[hit->alloc]));
            }
            row(&e->q, bl);
        }
    }
    sqlite3_finalize(sg);
    sqlite3_finalize(bl);
    free(live);
    return TDM_OK;
}

/* The finished database's bytes to `out`. */
static tdm_status serialize(sqx *e, FILE *out)
{
    sqlite3_int64 n = 0;
    unsigned char *copy = NULL;
    unsigned char *p = sqlite3_serialize(e->q.db, "main", &n, SQLITE_SERIALIZE_NOCOPY);
    if (!p)
        p = copy = sqlite3_serialize(e->q.db, "main", &n, 0);
    if (!p)
        return TDM_HOST_OUT_OF_MEMORY;
    size_t w = fwrite(p, 1, (size_t)n, out);
    sqlite3_free(copy);
    return w == (size_t)n ? TDM_OK : TDM_IO_ERROR;
}

tdm_status tdm__export_sqlite(FILE *out, const tdm_export_context *ctx)
{
    const tdm_model *m = ctx->model;
    sqx e = {.ctx = ctx, .m = m};
    uint8_t *cats = NULL;
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    e.keep = calloc(m->device_count + 1, sizeof *e.keep);
    e.ev_alloc = malloc((ctx->snap->event_count + 1) * sizeof *e.ev_alloc);
    if (!e.keep || !e.ev_alloc || tdm__categories_infer(m, &cats) != TDM_OK)
        goto out;
    e.cats = cats;
    for (size_t d = 0; d < m->device_count; d++)
        e.keep[d] = ctx->device < 0 || m->devices[d].ordinal == ctx->device;
    map_events(&e);

    /* A private memdb database: its pages are one buffer that
     * sqlite3_serialize hands back without a copy. */
    e.q.rc = sqlite3_open_v2("file:tidemark-export?vfs=memdb", &e.q.db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                                 SQLITE_OPEN_NOMUTEX, /* one thread: no locking per row */
                             NULL);
    if (e.q.rc == SQLITE_OK) {
        /* memdb stops at 1 GiB unless told otherwise; host memory is the limit. */
        sqlite3_int64 limit = (sqlite3_int64)1 << 46;
        sqlite3_file_control(e.q.db, "main", SQLITE_FCNTL_SIZE_LIMIT, &limit);
    }
    exec(&e.q, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;");
    exec(&e.q, schema);
    put_snapshot(&e);
    put_names(&e);
    put_devices(&e);
    put_frames_and_stacks(&e);
    put_events(&e);
    put_allocations(&e);
    if (e.q.rc == SQLITE_OK && put_segments_and_blocks(&e) != TDM_OK)
        goto out;
    exec(&e.q, indexes);
    exec(&e.q, "COMMIT;");
    if (e.q.rc == SQLITE_OK)
        st = serialize(&e, out);
    else if (e.q.rc == SQLITE_NOMEM || e.q.rc == SQLITE_FULL)
        st = TDM_HOST_OUT_OF_MEMORY;
    else {
        /* The command adds "OUT: internal error"; this line says what failed. */
        fprintf(stderr, "tidemark export: SQLite: %s\n",
                e.q.db ? sqlite3_errmsg(e.q.db) : sqlite3_errstr(e.q.rc));
        st = TDM_INTERNAL;
    }
out:
    if (e.q.db)
        sqlite3_close(e.q.db);
    free(e.ev_alloc);
    free(e.keep);
    free(cats);
    return st;
}
