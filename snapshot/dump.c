/* snapshot/dump.c: building a snapshot from the live recorder and writing
 * it (tdm_dump_snapshot).
 *
 * A dump is one cut: the allocator copies its state under its own locks
 * and, at that instant, the ring is marked and its entries up to the mark
 * copied (ring_cut.h); they are sorted and built into the snapshot while
 * writers keep going.  It symbolizes
 * every interned stack once per unique address, and hands the result to the
 * .tdm writer.  It allocates freely: it is never on a hot path.  Dumps are
 * serialized by dump_lock so two at once cannot interleave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder_internal.h"
#include "ring_cut.h"
#include "spare_map.h"
#include "procinfo.h"
#include "snap_build.h"
#include "stack.h"
#include "pyframes.h"
#include "symbolize.h"

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;

/* The thread of a dump in progress at fork() does not exist in the child,
 * so nothing the lock guards is in use there: the child starts it afresh
 * (holding it across fork() would stall fork() for a whole dump). */
void tdm__dump_after_fork_child(void)
{
    pthread_mutex_init(&dump_lock, NULL);
}

/* Everything a built snapshot owns besides its arrays. */
typedef struct dump_owner {
    tdm__symbolizer_ref *symref; /* the shared symbolizer (its strings) */
    tdm_symbolizer *symbolizer;  /* used while building the stacks only */
    tdm__str_pool strings; /* copies of visitor strings, header strings */
    uint32_t *stack_frames;
    const char **phase_names;
    size_t events_mapped; /* snap->events is a spare map of this size */
} dump_owner;

typedef struct builder {
    tdm_snap *snap;
    dump_owner *owner;
    size_t device_cap, segment_cap, block_cap, stats_cap, imported_cap;
    int failed;
} builder;

static void visit_device(void *ctx, const tdm_snap_device *d)
{
    builder *b = ctx;
    tdm_snap *s = b->snap;
    if (tdm__grow_array(&s->devices, &b->device_cap, s->device_count + 1,
                        sizeof *s->devices) != 0) {
        b->failed = 1;
        return;
    }
    tdm_snap_device *out = &s->devices[s->device_count];
    *out = *d;
    out->vendor = tdm__str_pool_keep(&b->owner->strings, d->vendor);
    out->name = tdm__str_pool_keep(&b->owner->strings, d->name);
    if (!out->vendor || !out->name)
        b->failed = 1;
    else
        s->device_count++;
}

static void visit_segment(void *ctx, const tdm_snap_segment *seg,
                          const tdm_snap_block *blocks, size_t n)
{
    builder *b = ctx;
    tdm_snap *s = b->snap;
    if (tdm__grow_array(&s->segments, &b->segment_cap, s->segment_count + 1,
                        sizeof *s->segments) != 0 ||
        tdm__grow_array(&s->blocks, &b->block_cap, s->block_count + n,
                        sizeof *s->blocks) != 0) {
        b->failed = 1;
        return;
    }
    tdm_snap_segment *out = &s->segments[s->segment_count++];
    *out = *seg;
    out->first_block = (uint32_t)s->block_count;
    out->block_count = (uint32_t)n;
    memcpy(&s->blocks[s->block_count], blocks, n * sizeof *blocks);
    s->block_count += n;
}

static void visit_imported(void *ctx, const tdm_snap_imported *m)
{
    builder *b = ctx;
    tdm_snap *s = b->snap;
    if (tdm__grow_array(&s->imported, &b->imported_cap, s->imported_count + 1,
                        sizeof *s->imported) != 0) {
        b->failed = 1;
        return;
    }
    s->imported[s->imported_count++] = *m;
}

/* One stats row per (device, pool): pool 0 from .stats, small and large
 * from .pool_stats when the allocator keeps pools. */
static void visit_pool_stats(void *ctx, int device, int pool, const tdm_stats *st)
{
    builder *b = ctx;
    tdm_snap *s = b->snap;
    if (pool < TDM_STAT_POOL_ALL || pool > TDM_STAT_POOL_LARGE)
        return; /* not a pool the format knows: the writer would refuse it */
    if (tdm__grow_array(&s->stats, &b->stats_cap, s->stats_count + 1,
                        sizeof *s->stats) != 0) {
        b->failed = 1;
        return;
    }
    s->stats[s->stats_count].device = device;
    s->stats[s->stats_count].pool = (uint8_t)pool;
    s->stats[s->stats_count].stats = *st;
    s->stats_count++;
}

static void visit_stats(void *ctx, int device, const tdm_stats *st)
{
    visit_pool_stats(ctx, device, TDM_STAT_POOL_ALL, st);
}

/* The events stored before `cut` (taken), oldest first, compound ring
 * entries expanded, straight from the cut's copy into the one array the
 * snapshot keeps: from malloc, or with `spare` a map from spare_map.h (its
 * size in *spare); *dropped gets what was stored before it but is not
 * copied (overwritten, refused, or rewritten by the time of the copy),
 * plus what rings retired earlier had dropped (`carried`). */
static tdm_status copy_events_before(tdm__ring_cut *cut, uint64_t carried,
                                     tdm_event **events, size_t *count,
                                     uint64_t *dropped, size_t *spare)
{
    *events = NULL;
    *count = 0;
    *dropped = carried;
    if (!cut->ring)
        return TDM_OK;
    tdm__ring_order o;
    tdm__ring_cut_order(cut, SIZE_MAX, &o);
    uint64_t plain = o.plain;
    *dropped += cut->stored > plain ? cut->stored - plain : 0;
    size_t bytes = (size_t)(plain ? plain : 1) * sizeof(tdm_event);
    tdm_event *out = spare ? tdm__spare_map_take(bytes, spare, NULL) : malloc(bytes);
    if (!out) {
        tdm__ring_order_free(&o);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    size_t n = 0;
    for (size_t k = 0; k < o.count; k++) {
        tdm_event in;
        memcpy(&in, tdm__ring_order_at(&o, k)->w, sizeof in);
        n += tdm__event_expand(&in, &out[n]);
    }
    tdm__ring_order_free(&o);
    *events = out;
    *count = n;
    return TDM_OK;
}

tdm_status tdm__rec_copy_events(tdm_event **events, size_t *count,
                                uint64_t *dropped)
{
    tdm__ring_cut cut;
    *events = NULL;
    *count = 0;
    *dropped = 0;
    if (tdm__ring_cut_init(&cut, atomic_load(&tdm__rec.ring)) != 0)
        return TDM_HOST_OUT_OF_MEMORY;
    uint64_t carried = atomic_load(&tdm__recorder_state.carried_drops);
    tdm__ring_cut_take(&cut);
    tdm_status st = copy_events_before(&cut, carried, events, count, dropped, NULL);
    tdm__ring_cut_free(&cut);
    return st;
}

/* Where the frames of one captured pcs entry lie in snap->frames: a
 * native frame, or an inline chain ending in one (several frames). */
typedef struct frame_span {
    uint32_t first, count;
} frame_span;

/* Open-addressing map from a captured pcs entry to its frames. */
typedef struct pc_map {
    uintptr_t *keys;
    frame_span *vals;
    size_t mask;
} pc_map;

static int pc_map_init(pc_map *m, size_t expected)
{
    size_t n = 64;
    while (n < expected * 2)
        n *= 2;
    m->keys = calloc(n, sizeof *m->keys);
    m->vals = malloc(n * sizeof *m->vals);
    m->mask = n - 1;
    return m->keys && m->vals;
}

/* Returns a pointer to the value slot for pc; *fresh says whether it was
 * just inserted.  pc 0 is never a key (capture never yields it). */
static frame_span *pc_map_slot(pc_map *m, uintptr_t pc, int *fresh)
{
    size_t i = (pc * UINT64_C(0x9E3779B97F4A7C15)) >> 7 & m->mask;
    while (m->keys[i] && m->keys[i] != pc)
        i = (i + 1) & m->mask;
    *fresh = m->keys[i] == 0;
    m->keys[i] = pc;
    return &m->vals[i];
}

/* The frame table and the stacks' frame index lists as they grow: one
 * captured pc may give several frames, so stacks get deeper than what was
 * captured and neither size is known beforehand. */
typedef struct stacks_builder {
    tdm_snap *snap;
    dump_owner *owner;
    size_t frame_cap;
    size_t index_len, index_cap; /* owner->stack_frames */
} stacks_builder;

static tdm_snap_frame *new_frame(stacks_builder *b)
{
    tdm_snap *s = b->snap;
    if (s->frame_count >= UINT32_MAX ||
        tdm__grow_array(&s->frames, &b->frame_cap, s->frame_count + 1,
                        sizeof *s->frames) != 0)
        return NULL;
    tdm_snap_frame *f = &s->frames[s->frame_count++];
    memset(f, 0, sizeof *f);
    return f;
}

/* A tagged entry of stacks=python/all (pyframes.h): one Python frame,
 * resolved from tidemark's copy of its code object; pc keeps the entry. */
static int frame_of_python(stacks_builder *b, uintptr_t entry, frame_span *out)
{
    tdm__py_symbol py = {"??", "", 0};
    tdm__py_resolve(entry, &py);
    out->first = (uint32_t)b->snap->frame_count;
    out->count = 0;
    tdm_snap_frame *f = new_frame(b);
    if (!f)
        return -1;
    f->pc = entry;
    f->function = tdm__str_pool_keep(&b->owner->strings, py.function);
    f->file = tdm__str_pool_keep(&b->owner->strings, py.file);
    f->line = py.line;
    f->module = "<python>";
    f->kind = TDM_FRAME_PYTHON;
    out->count = 1;
    return f->function && f->file ? 0 : -1;
}

/* ---- one captured entry -> frames -----------------------------------------
 * The single place where an entry of a stack's captured pcs array becomes
 * frames, appended to snap->frames: a return address gives its inline
 * chain, innermost first, then the native function holding it.  Called once
 * per distinct entry; *out says where its frames are.  -1 when out of host
 * memory. */
static int frames_of_pc(stacks_builder *b, uintptr_t pc, frame_span *out)
{
    tdm_symbolizer *sym = b->owner->symbolizer;
    if (tdm__py_is_entry(pc))
        return frame_of_python(b, pc, out);
    static const tdm_symbol unknown = {"??", "", 0, "", TDM_FRAME_NATIVE};
    const tdm_symbol *chain = &unknown;
    size_t n = sym ? tdm__symbolize_frames(sym, pc, &chain) : 1;
    out->first = (uint32_t)b->snap->frame_count;
    out->count = 0;
    for (size_t i = 0; i < n; i++) {
        tdm_snap_frame *f = new_frame(b);
        if (!f)
            return -1;
        f->pc = pc;
        f->function = chain[i].function;
        f->file = chain[i].file;
        f->line = chain[i].line;
        f->module = chain[i].module;
        f->kind = chain[i].kind;
        out->count++;
    }
    return 0;
}

/* Symbolizes every interned stack into snap->frames / snap->stacks. */
static tdm_status build_stacks(tdm_snap *snap, dump_owner *o)
{
    uint32_t nstacks = tdm__stack_count();
    size_t captured = 0;
    for (uint32_t id = 1; id <= nstacks; id++) {
        const uintptr_t *pcs;
        captured += tdm__stack_get(id, &pcs);
    }
    stacks_builder b = {.snap = snap, .owner = o};
    /* Where each stack's list starts in o->stack_frames: pointers are set
     * at the end, once the list no longer moves. */
    size_t *starts = malloc(((size_t)nstacks + 1) * sizeof *starts);
    snap->stacks = calloc((size_t)nstacks + 1, sizeof *snap->stacks);
    pc_map map = {0};
    tdm_status st = TDM_OK;
    if (!starts || !snap->stacks || !pc_map_init(&map, captured) ||
        tdm__grow_array(&o->stack_frames, &b.index_cap, captured + 1,
                        sizeof *o->stack_frames) != 0) {
        st = TDM_HOST_OUT_OF_MEMORY;
        goto out;
    }
    snap->stack_count = (size_t)nstacks + 1;
    if (captured && (o->symref = tdm__symbolizer_acquire()) != NULL)
        o->symbolizer = tdm__symbolizer_of(o->symref);
    for (uint32_t id = 1; id <= nstacks && st == TDM_OK; id++) {
        const uintptr_t *pcs;
        unsigned depth = tdm__stack_get(id, &pcs);
        starts[id] = b.index_len;
        for (unsigned k = 0; k < depth; k++) {
            int fresh;
            frame_span *v = pc_map_slot(&map, pcs[k], &fresh);
            if (fresh && frames_of_pc(&b, pcs[k], v) != 0) {
                v->count = 0; /* the frames made before running out */
                st = TDM_HOST_OUT_OF_MEMORY;
                break;
            }
            if (tdm__grow_array(&o->stack_frames, &b.index_cap,
                                b.index_len + v->count,
                                sizeof *o->stack_frames) != 0) {
                st = TDM_HOST_OUT_OF_MEMORY;
                break;
            }
            for (uint32_t j = 0; j < v->count; j++)
                o->stack_frames[b.index_len++] = v->first + j;
        }
        if (b.index_len - starts[id] > UINT32_MAX)
            st = TDM_HOST_OUT_OF_MEMORY;
        snap->stacks[id].depth = (uint32_t)(b.index_len - starts[id]);
    }
    for (uint32_t id = 1; id <= nstacks && st == TDM_OK; id++)
        snap->stacks[id].frames = o->stack_frames + starts[id];
out:
    if (o->symbolizer != NULL)
        tdm__symbolizer_unlock();
    o->symbolizer = NULL;
    free(starts);
    free(map.keys);
    free(map.vals);
    return st;
}

/* The command line, arguments joined by spaces. */
/* The header's notes for the bits tdm__rec_note set: static text, a line
 * each. */
static const char *notes_text(unsigned bits)
{
    if (bits & TDM__NOTE_GRAPH_MEMORY)
        return "CUDA/HIP graph memory is not covered: stream-ordered allocations "
               "captured into a graph are booked once, when captured; what the "
               "graph's memory nodes hold at each launch is not seen";
    return "";
}

static const char *read_command(dump_owner *o)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t n = 0;
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
    return tdm__str_pool_keep(&o->strings, buf);
}

static tdm_status build_header(tdm_snap *snap, dump_owner *o)
{
    tdm__recorder *r = &tdm__recorder_state;
    tdm_procinfo pi;
    tdm__procinfo_read(&pi);
    tdm_snap_header *h = &snap->header;
    h->format_version = TDM_FORMAT_VERSION;
    h->tool_version = TDM_VERSION_STRING;
    h->host = tdm__str_pool_keep(&o->strings, pi.host);
    h->pid = pi.pid;
    h->rank = pi.rank;
    h->local_rank = pi.local_rank;
    h->world_size = pi.world_size;
    h->dump_time_us = tdm__now_us();
    h->command = read_command(o);

    pthread_mutex_lock(&r->lock);
    h->start_time_us = r->start_time_us;
    h->config = tdm__str_pool_keep(&o->strings, r->config_text);
    h->metadata = tdm__str_pool_keep(&o->strings, r->metadata);
    h->alloc_mode = r->alloc_mode ? r->alloc_mode : "";
    h->notes = notes_text(atomic_load_explicit(&tdm__rec_notes, memory_order_relaxed));
    h->record_mode = (uint8_t)atomic_load(&tdm__rec.mode);
    h->context_mode = (uint8_t)r->opts.context;
    h->stacks_mode = (uint8_t)atomic_load(&tdm__rec.stacks);
    h->max_entries = r->opts.max_entries;
    o->phase_names = malloc(r->phase_count * sizeof *o->phase_names);
    if (o->phase_names) {
        for (uint32_t i = 0; i < r->phase_count; i++)
            o->phase_names[i] = tdm__str_pool_keep(&o->strings, r->phase_names[i]);
        snap->phase_names = o->phase_names;
        snap->phase_count = r->phase_count;
    }
    pthread_mutex_unlock(&r->lock);
    if (!h->host || !h->command || !h->config || !h->metadata || !o->phase_names)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < snap->phase_count; i++)
        if (!snap->phase_names[i])
            return TDM_HOST_OUT_OF_MEMORY;
    return TDM_OK;
}

void tdm__rec_snapshot_free(tdm_snap *snap)
{
    if (!snap)
        return;
    dump_owner *o = snap->owner_;
    if (o) {
        if (o->events_mapped) {
            tdm__spare_map_give(snap->events, o->events_mapped);
            snap->events = NULL;
        }
        tdm__symbolizer_release(o->symref);
        tdm__str_pool_free(&o->strings);
        free(o->stack_frames);
        free(o);
    }
    tdm__snap_free_arrays(snap); /* with o->phase_names, its phase table */
    free(snap);
}

/* The state's visitor ends here at the cut: the ring is marked at the
 * same instant the allocator copies its state. */
typedef struct cut_ctx {
    builder b; /* first: the visit_* callbacks take ctx as their builder */
    tdm__ring_cut ring_cut;
    uint64_t carried; /* drops of retired rings, read at the cut */
} cut_ctx;

static void at_cut(void *ctx)
{
    cut_ctx *c = ctx;
    c->carried = atomic_load(&tdm__recorder_state.carried_drops);
    tdm__ring_cut_take(&c->ring_cut);
}

tdm_status tdm__rec_build_snapshot(tdm_snap **out)
{
    *out = NULL;
    tdm_snap *snap = calloc(1, sizeof *snap);
    dump_owner *o = calloc(1, sizeof *o);
    if (!snap || !o) {
        free(snap);
        free(o);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    snap->owner_ = o;
    tdm__rec_event(TDM_ACTION_SNAPSHOT, -1, 0, 0, 0, 0, 0);

    /* One cut: the allocator copies its state (segments, blocks, stats)
     * with its locks held and marks the ring meanwhile (at_cut); the
     * events are then copied up to that mark, however far the program has
     * gone since.  Events before the header's phase table: a phase named
     * between the two is then in the table, so every event's phase id
     * resolves. */
    cut_ctx c = {.b = {.snap = snap, .owner = o}};
    tdm_status st = TDM_OK;
    if (tdm__ring_cut_init(&c.ring_cut, atomic_load(&tdm__rec.ring)) != 0)
        st = TDM_HOST_OUT_OF_MEMORY;
    if (st == TDM_OK) {
        tdm__state_visitor v = {&c, visit_device, visit_segment, visit_stats,
                                visit_imported, at_cut};
        tdm__state_source_fn source = atomic_load(&tdm__recorder_state.state_source);
        if (source)
            source(&v, visit_pool_stats);
        if (!c.ring_cut.taken) /* no allocator (or one with no state yet) */
            at_cut(&c);
        if (c.b.failed)
            st = TDM_HOST_OUT_OF_MEMORY;
    }
    if (st == TDM_OK)
        st = copy_events_before(&c.ring_cut, c.carried, &snap->events,
                                &snap->event_count, &snap->dropped_events,
                                &o->events_mapped);
    tdm__ring_cut_free(&c.ring_cut);
    if (st == TDM_OK)
        st = build_header(snap, o);
    if (st == TDM_OK)
        st = build_stacks(snap, o);
    if (st != TDM_OK) {
        tdm__rec_snapshot_free(snap);
        return st;
    }
    snap->complete = 1;
    *out = snap;
    return TDM_OK;
}

/* A process that never touched device memory: only the dump's own marker
 * among its events, none overwritten, no segment or block, and no device
 * whose statistics ever rose above zero (an out-of-memory return counts as
 * touching).  Phase and step marks are the program's own record: a
 * snapshot holding them is not untouched. */
int tdm__snap_untouched(const tdm_snap *snap)
{
    if (snap->dropped_events || snap->segment_count || snap->block_count ||
        snap->imported_count)
        return 0;
    for (size_t i = 0; i < snap->event_count; i++)
        if (snap->events[i].action != TDM_ACTION_SNAPSHOT)
            return 0;
    for (size_t i = 0; i < snap->stats_count; i++) {
        const tdm_stats *st = &snap->stats[i].stats;
        if (st->allocated_bytes.peak > 0 || st->reserved_bytes.peak > 0 ||
            st->requested_bytes.peak > 0 || st->allocation.peak > 0 ||
            st->segment.peak > 0 || st->num_ooms || st->num_alloc_retries)
            return 0;
    }
    return 1;
}

tdm_status tdm_dump_snapshot(const char *path)
{
    if (!path || !*path)
        return TDM_INVALID_ARGUMENT;
    tdm__rec_run_refresh(); /* before our lock: the hooks book through alloc/ */
    pthread_mutex_lock(&dump_lock);
    tdm_snap *snap;
    tdm_status st = tdm__rec_build_snapshot(&snap);
    if (st == TDM_OK) {
        st = tdm__snap_write(snap, path);
        tdm__rec_snapshot_free(snap);
    }
    pthread_mutex_unlock(&dump_lock);
    return st;
}
