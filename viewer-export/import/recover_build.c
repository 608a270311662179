/* viewer-export/import/recover_build.c: the snapshot `tidemark recover` writes
 * (recover.h).
 *
 * The allocator state is what replaying the kept events gives: segments
 * made (segment_alloc/map) and not given back, and in them the blocks
 * allocated and not freed (free_requested marks one pending); gaps are
 * inactive blocks.  An allocation whose segment event was overwritten
 * gets a segment of its own.  Sizes are the requested ones (the rounded
 * sizes lived in the allocator's memory).  Phase names come from the
 * file's table (older files: "phase N").  No statistics rows: readers replay them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recover.h"

typedef struct owner {
    void **ptrs;
    size_t n, cap;
} owner;

static void *keep(owner *o, void *p)
{
    if (!p)
        return NULL;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        void **grown = realloc(o->ptrs, cap * sizeof *grown);
        if (!grown) {
            free(p);
            return NULL;
        }
        o->ptrs = grown;
        o->cap = cap;
    }
    return o->ptrs[o->n++] = p;
}

static char *keep_str(owner *o, const char *s) { return keep(o, strdup(s ? s : "")); }

typedef struct live {
    int32_t device;
    uint64_t addr, size, stream, time_ns;
    uint32_t stack_id;
    uint8_t category, pending, expandable, used;
} live;

typedef struct live_set {
    live *v;
    size_t n, cap;
} live_set;

static live *live_add(live_set *s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        live *g = realloc(s->v, cap * sizeof *g);
        if (!g)
            return NULL;
        s->v = g;
        s->cap = cap;
    }
    memset(&s->v[s->n], 0, sizeof s->v[0]);
    return &s->v[s->n++];
}

/* The newest entry at (device, addr), or -1.  Linear from the end: the
 * recover path is not hot and recent entries are freed first. */
static long live_find(const live_set *s, int device, uint64_t addr)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i].addr == addr && s->v[i].device == device)
            return (long)i;
    return -1;
}

static void live_del(live_set *s, long i)
{
    s->v[i] = s->v[--s->n];
}

static int cmp_live(const void *a, const void *b)
{
    const live *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static tdm_status replay(const tdm_snap *s, live_set *segs, live_set *blocks)
{
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        live *l;
        long at;
        switch (e->action) {
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_MAP:
        case TDM_ACTION_ALLOC:
            l = live_add(e->action == TDM_ACTION_ALLOC ? blocks : segs);
            if (!l)
                return TDM_HOST_OUT_OF_MEMORY;
            *l = (live){e->device, e->addr, e->size, e->stream, e->time_ns, e->stack_id,
                        e->category, 0, e->action == TDM_ACTION_SEGMENT_MAP, 0};
            break;
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_UNMAP:
            if ((at = live_find(segs, e->device, e->addr)) >= 0)
                live_del(segs, at);
            break;
        case TDM_ACTION_FREE_REQUESTED:
            if ((at = live_find(blocks, e->device, e->addr)) >= 0)
                blocks->v[at].pending = 1;
            break;
        case TDM_ACTION_FREE_COMPLETED:
            if ((at = live_find(blocks, e->device, e->addr)) >= 0)
                live_del(blocks, at);
            break;
        case TDM_ACTION_TAG:
            if ((at = live_find(blocks, e->device, e->addr)) >= 0)
                blocks->v[at].category = e->category;
            break;
        default:
            break;
        }
    }
    return TDM_OK;
}

static tdm_snap_block block_of(const live *b, uint64_t size)
{
    return (tdm_snap_block){b->addr, size, b->size, b->time_ns, b->stack_id,
                            b->pending ? TDM_BLOCK_ACTIVE_PENDING_FREE
                                       : TDM_BLOCK_ACTIVE_ALLOCATED,
                            b->category};
}

/* Segments and their tiling blocks into s, from the replay's survivors. */
static tdm_status build_state(tdm_snap *s, owner *o, live_set *segs, live_set *blocks,
                              uint8_t pool)
{
    if (segs->n)
        qsort(segs->v, segs->n, sizeof *segs->v, cmp_live);
    if (blocks->n)
        qsort(blocks->v, blocks->n, sizeof *blocks->v, cmp_live);
    size_t nseg = segs->n + blocks->n, nblk = 2 * blocks->n + segs->n;
    s->segments = keep(o, calloc(nseg + 1, sizeof *s->segments));
    s->blocks = keep(o, calloc(nblk + 1, sizeof *s->blocks));
    if (!s->segments || !s->blocks)
        return TDM_HOST_OUT_OF_MEMORY;
    size_t b = 0; /* next block of `blocks` (sorted) */
    for (size_t i = 0; i < segs->n; i++) {
        const live *g = &segs->v[i];
        uint64_t end = g->addr + g->size, at = g->addr;
        tdm_snap_segment *seg = &s->segments[s->segment_count++];
        *seg = (tdm_snap_segment){g->device, pool, g->expandable, g->addr, g->size,
                                  g->stream, g->stack_id, (uint32_t)s->block_count, 0};
        while (b < blocks->n && cmp_live(&blocks->v[b], g) < 0)
            b++;
        for (; b < blocks->n && blocks->v[b].device == g->device && blocks->v[b].addr < end; b++) {
            live *k = &blocks->v[b];
            if (k->addr < at)
                continue; /* overlaps the block before: left out */
            if (k->addr > at)
                s->blocks[s->block_count++] = (tdm_snap_block){at, k->addr - at, 0, 0, 0,
                                                               TDM_BLOCK_INACTIVE, 0};
            uint64_t size = k->size && k->size <= end - k->addr ? k->size : end - k->addr;
            s->blocks[s->block_count++] = block_of(k, size);
            k->used = 1;
            at = k->addr + size;
        }
        if (at < end)
            s->blocks[s->block_count++] = (tdm_snap_block){at, end - at, 0, 0, 0,
                                                           TDM_BLOCK_INACTIVE, 0};
        seg->block_count = (uint32_t)(s->block_count - seg->first_block);
    }
    /* Blocks whose segment event is gone: a segment each. */
    for (size_t i = 0; i < blocks->n; i++) {
        const live *k = &blocks->v[i];
        if (k->used || k->size == 0)
            continue;
        s->segments[s->segment_count++] =
            (tdm_snap_segment){k->device, TDM_POOL_NONE, 0, k->addr, k->size, k->stream,
                               k->stack_id, (uint32_t)s->block_count, 1};
        s->blocks[s->block_count++] = block_of(k, k->size);
    }
    return TDM_OK;
}

/* The frames of each distinct pc, as a dump writes them: the functions
 * inlined at it, then the one holding them (a Python frame's pc: one
 * frame); each stack lists the frames of its pcs in order. */
typedef struct pc_frames {
    uint64_t key;   /* pc + 1; 0: empty slot */
    uint32_t first; /* its frames: [first, first + count) */
    uint32_t count;
} pc_frames;

static tdm_status add_frames(tdm_snap_frame **frames, size_t *n, size_t *cap, owner *o,
                             tdm_recover_symbols *sym, uint64_t pc, pc_frames *slot)
{
    const tdm_symbol *sy = NULL;
    tdm_symbol python = {"<python>", "", 0, "<python>", TDM_FRAME_PYTHON};
    /* A Python frame: its code object lived in the process. */
    size_t k = pc >> 63 ? (sy = &python, 1) : tdm__recover_symbolize(sym, pc, &sy);
    if (*n + k > *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c < *n + k)
            c *= 2;
        tdm_snap_frame *g = realloc(*frames, c * sizeof *g);
        if (!g)
            return TDM_HOST_OUT_OF_MEMORY;
        *frames = g;
        *cap = c;
    }
    slot->key = pc + 1;
    slot->first = (uint32_t)*n;
    slot->count = (uint32_t)k;
    for (size_t i = 0; i < k; i++) {
        tdm_snap_frame *f = &(*frames)[(*n)++];
        *f = (tdm_snap_frame){pc, keep_str(o, sy[i].function), keep_str(o, sy[i].file),
                              sy[i].line, keep_str(o, sy[i].module), sy[i].kind};
        if (!f->function || !f->file || !f->module)
            return TDM_HOST_OUT_OF_MEMORY;
    }
    return TDM_OK;
}

static tdm_status build_stacks(tdm_snap *s, owner *o, const tdm_spill_data *d,
                               tdm_recover_symbols *sym)
{
    size_t total = 0;
    for (size_t i = 1; i < d->stack_count; i++)
        total += d->stacks[i].depth;
    s->stacks = keep(o, calloc(d->stack_count ? d->stack_count : 1, sizeof *s->stacks));
    if (!s->stacks)
        return TDM_HOST_OUT_OF_MEMORY;
    s->stack_count = d->stack_count;
    /* pc -> its frames, open addressing over a power of two twice the pcs. */
    size_t cap = 2;
    while (cap < 2 * total)
        cap *= 2;
    pc_frames *map = calloc(cap, sizeof *map);
    tdm_snap_frame *frames = NULL;
    size_t nframes = 0, frames_cap = 0, depth = 0;
    tdm_status st = map ? TDM_OK : TDM_HOST_OUT_OF_MEMORY;
    /* Each pc's frames once; the stacks' depth in frames. */
    for (size_t i = 1; st == TDM_OK && i < d->stack_count; i++)
        for (uint32_t k = 0; st == TDM_OK && k < d->stacks[i].depth; k++) {
            uint64_t pc = d->stacks[i].pcs[k];
            size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
            while (map[h].key && map[h].key != pc + 1)
                h = (h + 1) & (cap - 1);
            if (!map[h].key)
                st = add_frames(&frames, &nframes, &frames_cap, o, sym, pc, &map[h]);
            depth += map[h].count;
        }
    uint32_t *idx = st == TDM_OK ? keep(o, calloc(depth + 1, sizeof *idx)) : NULL;
    if (st == TDM_OK && !idx)
        st = TDM_HOST_OUT_OF_MEMORY;
    size_t used = 0;
    for (size_t i = 1; st == TDM_OK && i < d->stack_count; i++) {
        uint32_t *at = idx + used;
        for (uint32_t k = 0; k < d->stacks[i].depth; k++) {
            uint64_t pc = d->stacks[i].pcs[k];
            size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
            while (map[h].key != pc + 1)
                h = (h + 1) & (cap - 1);
            for (uint32_t f = 0; f < map[h].count; f++)
                idx[used++] = map[h].first + f;
        }
        s->stacks[i] = (tdm_snap_stack){(uint32_t)(idx + used - at), at};
    }
    free(map);
    if (st == TDM_OK) {
        s->frames = keep(o, frames ? frames : calloc(1, sizeof *frames));
        s->frame_count = nframes;
        if (!s->frames)
            st = TDM_HOST_OUT_OF_MEMORY;
    } else {
        free(frames);
    }
    return st;
}

static tdm_status build_header(tdm_snap *s, owner *o, const tdm_spill_data *d,
                               const char *extra_notes)
{
    tdm_snap_header *h = &s->header;
    const tdm_spill_header *sh = &d->header;
    uint64_t last_ns = s->event_count ? s->events[s->event_count - 1].time_ns : 0;
    char when[64] = "none";
    time_t t = (time_t)(last_ns / 1000000000u);
    struct tm tm;
    if (last_ns && gmtime_r(&t, &tm))
        snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (unsigned)(last_ns % 1000000000u / 1000u));
    char notes[1024];
    snprintf(notes, sizeof notes,
             "recovered from spill; partial; last event at %s (%llu ns)%s%s",
             when, (unsigned long long)last_ns, extra_notes && *extra_notes ? "\n" : "",
             extra_notes ? extra_notes : "");
    h->format_version = TDM_FORMAT_VERSION;
    h->tool_version = keep_str(o, TDM_VERSION_STRING);
    h->host = keep_str(o, sh->host);
    h->pid = sh->pid;
    h->rank = h->local_rank = -1;
    h->world_size = 0;
    h->start_time_us = sh->start_time_us;
    h->dump_time_us = last_ns ? last_ns / 1000 : sh->start_time_us;
    h->config = keep_str(o, d->config);
    h->metadata = keep_str(o, "");
    h->notes = keep_str(o, notes);
    h->command = keep_str(o, sh->command);
    h->record_mode = sh->record_mode;
    h->context_mode = sh->context_mode;
    h->stacks_mode = sh->stacks_mode;
    h->max_entries = sh->ring_capacity;
    h->alloc_mode = keep_str(o, sh->alloc_mode[0] ? sh->alloc_mode : "cache");
    if (!h->tool_version || !h->host || !h->config || !h->metadata || !h->notes ||
        !h->command || !h->alloc_mode)
        return TDM_HOST_OUT_OF_MEMORY;
    return TDM_OK;
}

/* Phase names up to the largest id the events use: as the spill file kept
 * them, else (older files, a name unknown or given twice) "phase N";
 * devices from the ordinals the events use. */
static tdm_status build_names(tdm_snap *s, owner *o, const tdm_spill_data *d)
{
    uint32_t max_phase = 0;
    int32_t max_dev = -1;
    for (size_t i = 0; i < s->event_count; i++) {
        if (s->events[i].phase > max_phase)
            max_phase = s->events[i].phase;
        if (s->events[i].device > max_dev)
            max_dev = s->events[i].device;
    }
    s->phase_names = keep(o, calloc((size_t)max_phase + 1, sizeof *s->phase_names));
    s->devices = keep(o, calloc((size_t)max_dev + 2, sizeof *s->devices));
    if (!s->phase_names || !s->devices)
        return TDM_HOST_OUT_OF_MEMORY;
    s->phase_count = (size_t)max_phase + 1;
    s->phase_names[0] = "";
    for (uint32_t p = 1; p <= max_phase; p++) {
        char name[32];
        const char *kept = p < d->phase_count ? d->phase_names[p] : "";
        for (uint32_t q = 1; kept[0] && q < p; q++)
            if (strcmp(s->phase_names[q], kept) == 0)
                kept = ""; /* a torn slot that reads as another's name */
        snprintf(name, sizeof name, "phase %u", p);
        if (!(s->phase_names[p] = keep_str(o, kept[0] ? kept : name)))
            return TDM_HOST_OUT_OF_MEMORY;
    }
    const char *vendor = d->header.device_kind[0] ? d->header.device_kind : "sim";
    for (int32_t dev = 0; dev <= max_dev; dev++) {
        char name[48];
        snprintf(name, sizeof name, "%s%d", vendor, dev);
        s->devices[s->device_count++] =
            (tdm_snap_device){dev, keep_str(o, vendor), keep_str(o, name), 0};
        if (!s->devices[dev].vendor || !s->devices[dev].name)
            return TDM_HOST_OUT_OF_MEMORY;
    }
    return TDM_OK;
}

tdm_status tdm__recover_build(const tdm_spill_data *d, tdm_recover_symbols *sym,
                              const char *extra_notes, tdm_snap **out)
{
    *out = NULL;
    tdm_snap *s = calloc(1, sizeof *s);
    owner *o = calloc(1, sizeof *o);
    if (!s || !o) {
        free(s);
        free(o);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    s->owner_ = o;
    s->complete = 1;
    live_set segs = {0}, blocks = {0};
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    s->events = keep(o, malloc(d->event_count * sizeof *s->events + 1));
    if (!s->events)
        goto out;
    s->event_count = d->event_count;
    if (d->event_count)
        memcpy(s->events, d->events, d->event_count * sizeof *s->events);
    for (size_t i = 0; i < s->event_count; i++)
        if (s->events[i].category >= TDM_CATEGORY_COUNT_)
            s->events[i].category = 0;
    s->dropped_events = d->overwritten;
    uint8_t pool = strcmp(d->header.alloc_mode, "cache") == 0 ? TDM_POOL_LARGE : TDM_POOL_NONE;
    if ((st = build_header(s, o, d, extra_notes)) != TDM_OK ||
        (st = build_names(s, o, d)) != TDM_OK ||
        (st = build_stacks(s, o, d, sym)) != TDM_OK || (st = replay(s, &segs, &blocks)) != TDM_OK ||
        (st = build_state(s, o, &segs, &blocks, pool)) != TDM_OK)
        goto out;
out:
    free(segs.v);
    free(blocks.v);
    if (st != TDM_OK) {
        tdm__recover_snap_free(s);
        return st;
    }
    *out = s;
    return TDM_OK;
}

void tdm__recover_snap_free(tdm_snap *snap)
{
    if (!snap)
        return;
    owner *o = snap->owner_;
    if (o) {
        for (size_t i = 0; i < o->n; i++)
            free(o->ptrs[i]);
        free(o->ptrs);
        free(o);
    }
    free(snap);
}
