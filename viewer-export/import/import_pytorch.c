/* viewer-export/import/import_pytorch.c: PyTorch memory snapshot pickles → a
 * tdm_snap (import_formats.h; docs/export.md "import").
 *
 * The pickle is parsed by pickle_read.c into a value graph, then walked by
 * the schema of ../shared/reference/pytorch-snapshot-format.md §2:
 *   segments (+ host_segments)     → the final state: segments and blocks,
 *                                    block addresses recomputed from the
 *                                    segment's (as the viewer does)
 *   device_traces[d] (+ host_traces) → events of device d (host: -1); the
 *                                    lists are merged into one history by
 *                                    time_us, each list's own order kept
 *   external_annotations START     → phase marks ("ProfilerStep#N": step
 *                                    marks), merged by time before the
 *                                    events of the same microsecond; an
 *                                    END ends its phase when in force
 *   allocator_settings.tidemark    → the header, when tidemark wrote it
 *   allocator_settings (PyTorch's)  → the rules its blocks were cut by:
 *                                    each tensor event's size becomes
 *                                    its block's (import_pytorch_blocks.h),
 *                                    `requested` keeps the entry's size
 * Trace entry `category` strings become the events' category tags.
 * Frames are interned into frame and stack tables (innermost first, as
 * both formats keep them).  `annotate` entries, each entry's
 * user_metadata (kept as its changes, per list) and every
 * external_annotations entry become the snapshot's annotations (format
 * 1.4), so that an export gives them back.  Entries of actions tidemark
 * has no event for (user_defined, …) are skipped and counted.
 *
 * Schema errors name the byte offset of the offending value and its path
 * ("device_traces[0][12]: 'addr' is str, not int").  The walk follows the
 * schema's fixed depth, so memo cycles in a hostile pickle cannot loop it.
 * import_pytorch_tables.c holds the bookkeeping (memory, interning,
 * typed reads).  No state, no locks.
 */
#define _GNU_SOURCE /* qsort_r */
#include "import_pytorch.h"
#include "import_pytorch_blocks.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- trace entries -------------------------------------------------------- */

static void note_skipped(im *c, const tdm_pkv *action)
{
    c->rep.skipped++;
    char *list = c->rep.skipped_actions;
    size_t used = strlen(list), cap = sizeof c->rep.skipped_actions;
    char name[40];
    tdm__pti_escape(name, sizeof name, action->v.s, action->n < 32 ? action->n : 32);
    if (!name[0]) /* "" (or a NUL first): named so, and never searched for as "" */
        snprintf(name, sizeof name, "''");
    /* Each name once. */
    for (const char *p = list; *p && (p = strstr(p, name)) != NULL; p++)
        if ((p == list || p[-1] == ' ') && (p[strlen(name)] == ',' || !p[strlen(name)]))
            return;
    if (used + strlen(name) + 3 < cap)
        snprintf(list + used, cap - used, "%s%s", used ? ", " : "", name);
}

static uint8_t category_of(const tdm_pkv *v)
{
    if (!v || v->type != TDM_PKV_STR)
        return TDM_CATEGORY_UNKNOWN;
    for (unsigned k = 1; k < TDM_CATEGORY_COUNT_; k++)
        if (tdm__pti_is_str(v, tdm_category_name((tdm_category)k)))
            return (uint8_t)k;
    return TDM_CATEGORY_UNKNOWN; /* incl. the profiler's autograd_detail */
}

static int add_note(im *c, int device, uint8_t kind, uint64_t time_ns, uint64_t addr,
                    uint64_t size, const char *text)
{
    if (tdm__grow_array(&c->notes, &c->cap_notes, c->nnotes + 1, sizeof *c->notes) != 0)
        return tdm__pti_oom(c);
    c->notes[c->nnotes++] = (pending_note){
        .at = c->nevents, .list = c->ndev - 1,
        .a = {.time_ns = time_ns, .device = device, .kind = kind, .addr = addr, .size = size,
              .text = text}};
    return 0;
}

static uint64_t entry_time_ns(uint64_t t)
{
    /* Before 1970 or past year 2500 is not a time stamp. */
    return (int64_t)t > 0 && t < UINT64_C(16725225600000000) ? t * 1000 : 0;
}

/* An entry's user_metadata (absent: ""), interned; NULL on out of memory. */
static const char *metadata_of(im *c, const tdm_pkv *e)
{
    const tdm_pkv *m = tdm__pk_get(e, "user_metadata");
    if (!m || m->type != TDM_PKV_STR)
        return "";
    return m->n ? tdm__pti_intern(c, m->v.s, m->n) : "";
}

/* An `annotate` entry (torch.cuda.memory._annotate_tensor): its text is
 * its user_metadata. */
static int read_annotate(im *c, const tdm_pkv *e, int device, const where_t *w)
{
    uint64_t addr = 0, size = 0, t = 0;
    if (tdm__pti_get_bits(c, e, "addr", 0, w, &addr) < 0 ||
        tdm__pti_get_u64(c, e, "size", 0, w, &size) < 0 ||
        tdm__pti_get_u64(c, e, "time_us", 0, w, &t) < 0)
        return -1;
    const char *text = metadata_of(c, e);
    if (!text)
        return tdm__pti_oom(c);
    return add_note(c, device, TDM_ANNOTATION_TENSOR, entry_time_ns(t), addr, size, text);
}

static int read_entry(im *c, const tdm_pkv *e, int device, const where_t *w)
{
    if (e->type != TDM_PKV_DICT)
        return tdm__pti_fail(c, e, w, "a trace entry is %s, not dict", tdm__pk_type_name(e));
    const tdm_pkv *action;
    if (tdm__pti_get_str(c, e, "action", 1, w, &action) < 0)
        return -1;
    if (tdm__pti_is_str(action, "annotate"))
        return read_annotate(c, e, device, w);
    int a = tdm__action_from_name(action->v.s);
    if (a < 0 || a > TDM_ACTION_SNAPSHOT || memchr(action->v.s, 0, action->n)) {
        note_skipped(c, action);
        return 0;
    }
    tdm_event ev = {.device = (int16_t)device, .action = (uint8_t)a};
    uint64_t t = 0;
    int oom = a == TDM_ACTION_OOM;
    if ((oom ? tdm__pti_get_u64(c, e, "device_free", 0, w, &ev.addr)
             : tdm__pti_get_bits(c, e, "addr", a != TDM_ACTION_SNAPSHOT, w, &ev.addr)) < 0 ||
        tdm__pti_get_u64(c, e, "size", a != TDM_ACTION_SNAPSHOT, w, &ev.size) < 0 ||
        tdm__pti_get_bits(c, e, "stream", 0, w, &ev.stream) < 0 ||
        tdm__pti_get_u64(c, e, "time_us", 0, w, &t) < 0)
        return -1;
    ev.time_ns = entry_time_ns(t);
    ev.requested = ev.size;
    const char *meta = metadata_of(c, e);
    if (!meta)
        return tdm__pti_oom(c);
    if (strcmp(meta, c->meta_now) != 0) {
        if (add_note(c, device, TDM_ANNOTATION_USER_METADATA, ev.time_ns, 0, 0, meta) < 0)
            return -1;
        c->meta_now = meta;
    }
    const tdm_pkv *frames = tdm__pk_get(e, "frames");
    uint32_t sid = tdm__pti_stack_of(c, frames, w);
    if (sid == UINT32_MAX)
        return -1;
    ev.stack_id = sid;
    if (sid && (a == TDM_ACTION_FREE_REQUESTED || a == TDM_ACTION_FREE_COMPLETED))
        c->frames_on_free = 1;
    if (sid && a == TDM_ACTION_ALLOC)
        c->frames_on_alloc = 1;
    if (a <= TDM_ACTION_FREE_COMPLETED)
        ev.category = category_of(tdm__pk_get(e, "category"));
    if (tdm__grow_array(&c->events, &c->cap_events, c->nevents + 1, sizeof *c->events) != 0)
        return tdm__pti_oom(c);
    c->events[c->nevents++] = ev;
    c->rep.entries++;
    return 0;
}

/* One list of entries; each list becomes a run of c->events. */
static int read_trace(im *c, const tdm_pkv *list, int device, const char *name, long i)
{
    where_t w = {name, i, -1};
    if (tdm__grow_array(&c->dev_start, &c->cap_dev, c->ndev + 2, sizeof *c->dev_start) != 0)
        return tdm__pti_oom(c);
    c->dev_start[c->ndev++] = c->nevents;
    c->meta_now = "";
    if (!list || list->type == TDM_PKV_NONE)
        return 0;
    if (!tdm__pk_is_seq(list))
        return tdm__pti_fail(c, list, &w, "is %s, not list", tdm__pk_type_name(list));
    for (uint32_t j = 0; j < list->n; j++) {
        w.j = j;
        if (read_entry(c, list->v.items[j], device, &w) < 0)
            return -1;
    }
    return 0;
}

/* ---- segments ------------------------------------------------------------- */

static int read_segment(im *c, const tdm_pkv *s, long i, const char *name, int passthrough)
{
    where_t w = {name, i, -1};
    if (s->type != TDM_PKV_DICT)
        return tdm__pti_fail(c, s, &w, "a segment is %s, not dict", tdm__pk_type_name(s));
    tdm_snap_segment g = {0};
    int64_t dev = 0;
    const tdm_pkv *type = NULL, *blocks = tdm__pk_get(s, "blocks");
    if (tdm__pti_get_range(c, s, "device", 1, &w, -1, 32767, &dev) < 0 ||
        tdm__pti_get_bits(c, s, "address", 1, &w, &g.address) < 0 ||
        tdm__pti_get_u64(c, s, "total_size", 1, &w, &g.total_size) < 0 ||
        tdm__pti_get_bits(c, s, "stream", 0, &w, &g.stream) < 0 ||
        tdm__pti_get_str(c, s, "segment_type", 0, &w, &type) < 0)
        return -1;
    g.device = (int32_t)dev;
    g.pool = passthrough                       ? TDM_POOL_NONE
             : tdm__pti_is_str(type, "small") ? TDM_POOL_SMALL
                                              : TDM_POOL_LARGE;
    const tdm_pkv *exp = tdm__pk_get(s, "is_expandable");
    g.is_expandable = exp && exp->type == TDM_PKV_BOOL && exp->v.i;
    uint32_t sid = tdm__pti_stack_of(c, tdm__pk_get(s, "frames"), &w);
    if (sid == UINT32_MAX)
        return -1;
    g.stack_id = sid;
    if (!tdm__pk_is_seq(blocks))
        return tdm__pti_fail(c, blocks ? blocks : s, &w, "'blocks' is %s, not list",
                    tdm__pk_type_name(blocks));
    g.first_block = (uint32_t)c->nblocks;
    uint64_t addr = g.address;
    for (uint32_t j = 0; j < blocks->n; j++) {
        const tdm_pkv *b = blocks->v.items[j];
        where_t bw = {"blocks", j, -1};
        if (b->type != TDM_PKV_DICT)
            return tdm__pti_fail(c, b, &w, "block %u is %s, not dict", j, tdm__pk_type_name(b));
        tdm_snap_block blk = {.address = addr};
        const tdm_pkv *state;
        int has_req;
        if (tdm__pti_get_u64(c, b, "size", 1, &bw, &blk.size) < 0 ||
            tdm__pti_get_str(c, b, "state", 1, &bw, &state) < 0 ||
            (has_req = tdm__pti_get_u64(c, b, "requested_size", 0, &bw, &blk.requested_size)) < 0)
            return -1;
        if (tdm__pti_is_str(state, "active_allocated"))
            blk.state = TDM_BLOCK_ACTIVE_ALLOCATED;
        else if (tdm__pti_is_str(state, "active_pending_free") ||
                 tdm__pti_is_str(state, "active_awaiting_free")) /* the docstring's name */
            blk.state = TDM_BLOCK_ACTIVE_PENDING_FREE;
        else if (tdm__pti_is_str(state, "inactive"))
            blk.state = TDM_BLOCK_INACTIVE;
        else
            return tdm__pti_fail(c, state, &w, "block %u: state '%.40s' is not active_allocated, "
                        "active_pending_free or inactive", j, state->v.s);
        if (blk.state == TDM_BLOCK_INACTIVE)
            blk.requested_size = 0;
        else if (!has_req)
            blk.requested_size = blk.size; /* the viewer's legacy rule */
        sid = tdm__pti_stack_of(c, tdm__pk_get(b, "frames"), &w);
        if (sid == UINT32_MAX)
            return -1;
        blk.stack_id = blk.state == TDM_BLOCK_INACTIVE ? 0 : sid;
        if (blk.stack_id)
            c->frames_on_blocks = 1;
        if (tdm__grow_array(&c->blocks, &c->cap_blocks, c->nblocks + 1, sizeof *c->blocks) != 0)
            return tdm__pti_oom(c);
        if (blk.size > UINT64_MAX - addr)
            return tdm__pti_fail(c, b, &w, "block %u ends past the address space", j);
        c->blocks[c->nblocks++] = blk;
        addr += blk.size;
    }
    /* What PyTorch writes tiles each segment exactly; anything else would
     * double count or lose memory in every view. */
    if (addr - g.address != g.total_size)
        return tdm__pti_fail(c, s, &w, "its blocks cover %" PRIu64 " bytes, but total_size is %" PRIu64,
                             addr - g.address, g.total_size);
    g.block_count = (uint32_t)(c->nblocks - g.first_block);
    if (tdm__grow_array(&c->segs, &c->cap_segs, c->nsegs + 1, sizeof *c->segs) != 0)
        return tdm__pti_oom(c);
    c->segs[c->nsegs++] = g;
    c->rep.segments++;
    c->rep.blocks += g.block_count;
    return 0;
}

static int seg_order_cmp(const void *pa, const void *pb, void *segs)
{
    const tdm_snap_segment *a = (const tdm_snap_segment *)segs + *(const uint32_t *)pa;
    const tdm_snap_segment *b = (const tdm_snap_segment *)segs + *(const uint32_t *)pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->address != b->address)
        return a->address < b->address ? -1 : 1;
    return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

/* Segments of one device never share an address: a list that has two
 * over the same memory (a duplicate entry) would count it twice.  The
 * segments c->segs[base..] came from list's items, in order. */
static int check_overlaps(im *c, const tdm_pkv *list, size_t base, const char *name)
{
    size_t n = c->nsegs - base;
    if (n < 2)
        return 0;
    uint32_t *order = malloc(n * sizeof *order);
    if (!order)
        return tdm__pti_oom(c);
    for (size_t k = 0; k < n; k++)
        order[k] = (uint32_t)k;
    qsort_r(order, n, sizeof *order, seg_order_cmp, c->segs + base);
    int rc = 0;
    for (size_t k = 1; k < n && rc == 0; k++) {
        const tdm_snap_segment *prev = &c->segs[base + order[k - 1]];
        const tdm_snap_segment *cur = &c->segs[base + order[k]];
        if (prev->device == cur->device && cur->address - prev->address < prev->total_size) {
            uint32_t later = order[k] > order[k - 1] ? order[k] : order[k - 1];
            uint32_t other = order[k] > order[k - 1] ? order[k - 1] : order[k];
            where_t w = {name, later, -1};
            rc = tdm__pti_fail(c, list->v.items[later], &w,
                               "overlaps segment %u of device %d (address 0x%" PRIx64 ")",
                               other, (int)cur->device, prev->address);
        }
    }
    free(order);
    return rc;
}

static int read_segments(im *c, const tdm_pkv *list, const char *name, int passthrough)
{
    where_t w = {name, -1, -1};
    if (!list || list->type == TDM_PKV_NONE)
        return 0;
    if (!tdm__pk_is_seq(list))
        return tdm__pti_fail(c, list, &w, "is %s, not list", tdm__pk_type_name(list));
    size_t base = c->nsegs;
    for (uint32_t i = 0; i < list->n; i++)
        if (read_segment(c, list->v.items[i], i, name, passthrough) < 0)
            return -1;
    return check_overlaps(c, list, base, name);
}

/* ---- header ----------------------------------------------------------------- */

static const char *opt_text(im *c, const tdm_pkv *d, const char *key, const char *dflt)
{
    const tdm_pkv *v = tdm__pk_get(d, key);
    if (v && v->type == TDM_PKV_STR)
        return tdm__pti_intern(c, v->v.s, v->n);
    return tdm__pti_intern(c, dflt, strlen(dflt));
}

/* tidemark's header field `key` of `d`, else `dflt`; -1 after failing
 * when it is there but no int within [min, max] (a negative rank, a
 * world size of 2**40: "rank out of range at byte N"). */
static int header_int(im *c, const tdm_pkv *d, const where_t *w, const char *key,
                      int64_t min, int64_t max, int64_t dflt, int64_t *out)
{
    *out = dflt;
    return d ? tdm__pti_get_range(c, d, key, 0, w, min, max, out) : 0;
}

static uint8_t mode_of(const tdm_pkv *v, const char *const *names, unsigned n, uint8_t dflt)
{
    for (unsigned k = 0; k < n; k++)
        if (tdm__pti_is_str(v, names[k]))
            return (uint8_t)k;
    return dflt;
}

static int read_header(im *c, const tdm_pkv *settings, const char *source)
{
    static const char *const rec[] = {"off", "state", "all"};
    static const char *const ctxn[] = {"none", "state", "alloc", "all"};
    static const char *const stk[] = {"none", "native", "python", "all"};
    tdm_snap *s = &c->o->snap;
    tdm_snap_header *h = &s->header;
    const tdm_pkv *t = tdm__pk_get(settings, "tidemark");
    if (t && t->type != TDM_PKV_DICT)
        t = NULL;
    c->rep.from_tidemark = t != NULL;
    char meta[320];
    snprintf(meta, sizeof meta, "imported from PyTorch snapshot %s", source ? source : "");
    h->format_version = TDM_FORMAT_VERSION;
    h->tool_version = TDM_VERSION_STRING;
    h->host = opt_text(c, t, "host", "");
    h->command = opt_text(c, t, "command", "");
    h->metadata = opt_text(c, t, "metadata", meta);
    h->alloc_mode = opt_text(c, t, "alloc_mode", "cache");
    /* A PyTorch file has PYTORCH_CUDA_ALLOC_CONF, tidemark's its own. */
    h->config = t ? opt_text(c, t, "config", "")
                  : opt_text(c, settings, "PYTORCH_CUDA_ALLOC_CONF", "");
    const where_t w = {"allocator_settings.tidemark", -1, -1};
    int64_t pid, rank, local_rank, world_size, me, dropped, st, dt;
    if (header_int(c, t, &w, "pid", 0, INT64_MAX, 0, &pid) < 0 ||
        header_int(c, t, &w, "rank", -1, INT32_MAX, -1, &rank) < 0 ||
        header_int(c, t, &w, "local_rank", -1, INT32_MAX, -1, &local_rank) < 0 ||
        header_int(c, t, &w, "world_size", 0, INT32_MAX, 0, &world_size) < 0 ||
        header_int(c, t, &w, "max_entries", 0, INT64_MAX, (int64_t)c->nevents, &me) < 0 ||
        header_int(c, t, &w, "dropped_events", 0, INT64_MAX, 0, &dropped) < 0)
        return -1;
    h->pid = pid;
    h->rank = (int32_t)rank;
    h->local_rank = (int32_t)local_rank;
    h->world_size = (int32_t)world_size;
    /* What PyTorch files say by their content alone. */
    uint8_t ctx_guess = c->frames_on_free ? TDM_CONTEXT_ALL
                        : c->frames_on_alloc ? TDM_CONTEXT_ALLOC
                        : c->frames_on_blocks ? TDM_CONTEXT_STATE : TDM_CONTEXT_NONE;
    h->record_mode = mode_of(tdm__pk_get(t, "record"), rec, 3,
                             c->nevents ? TDM_RECORD_ALL : TDM_RECORD_STATE);
    h->context_mode = mode_of(tdm__pk_get(t, "context"), ctxn, 4, ctx_guess);
    /* PyTorch's stacks="all" gives C++ and Python frames, "python" the
     * Python ones: the frames say which. */
    int py_frames = 0, native_frames = 0;
    for (size_t i = 0; i < c->nframes; i++) {
        if (c->frames[i].kind == TDM_FRAME_PYTHON)
            py_frames = 1;
        else
            native_frames = 1;
    }
    uint8_t stacks_guess = py_frames && native_frames ? TDM_STACKS_ALL
                           : py_frames                ? TDM_STACKS_PYTHON
                           : native_frames            ? TDM_STACKS_NATIVE
                                                      : TDM_STACKS_NONE;
    h->stacks_mode = mode_of(tdm__pk_get(t, "stacks"), stk, 4, stacks_guess);
    h->max_entries = me > 0 ? (uint64_t)me : (uint64_t)c->nevents;
    s->dropped_events = (uint64_t)dropped;
    uint64_t first = 0, last = 0;
    for (size_t i = 0; i < c->nevents; i++) {
        uint64_t tn = c->events[i].time_ns / 1000;
        if (tn && (!first || tn < first))
            first = tn;
        if (tn > last)
            last = tn;
    }
    if (header_int(c, t, &w, "start_time_us", 0, INT64_MAX, (int64_t)first, &st) < 0 ||
        header_int(c, t, &w, "dump_time_us", 0, INT64_MAX, (int64_t)last, &dt) < 0)
        return -1;
    h->start_time_us = (uint64_t)st;
    h->dump_time_us = (uint64_t)dt;
    return c->status == TDM_OK ? 0 : -1;
}

/* Devices: tidemark's own list when it wrote the file, else one per
 * ordinal that has a trace list or a segment. */
static int read_devices(im *c, const tdm_pkv *settings, size_t traces)
{
    tdm_snap *s = &c->o->snap;
    const tdm_pkv *list = tdm__pk_get(tdm__pk_get(settings, "tidemark"), "devices");
    size_t n = 0, cap = 0;
    tdm_snap_device *d = NULL;
    if (tdm__pk_is_seq(list)) {
        for (uint32_t i = 0; i < list->n; i++) {
            const tdm_pkv *e = list->v.items[i];
            const where_t w = {"allocator_settings.tidemark.devices", (long)i, -1};
            int64_t idx = -2, capacity = 0;
            if (e->type != TDM_PKV_DICT) {
                free(d);
                return tdm__pti_fail(c, e, &w, "a device is %s, not dict", tdm__pk_type_name(e));
            }
            if (tdm__pti_get_range(c, e, "index", 1, &w, -1, 32767, &idx) < 0 ||
                header_int(c, e, &w, "capacity", 0, INT64_MAX, 0, &capacity) < 0) {
                free(d);
                return -1;
            }
            if (tdm__grow_array(&d, &cap, n + 1, sizeof *d) != 0) {
                free(d);
                return tdm__pti_oom(c);
            }
            d[n++] = (tdm_snap_device){(int32_t)idx, opt_text(c, e, "vendor", ""),
                                       opt_text(c, e, "name", ""), (uint64_t)capacity};
        }
    } else {
        int32_t max = (int32_t)traces - 1;
        for (size_t i = 0; i < c->nsegs; i++)
            if (c->segs[i].device > max)
                max = c->segs[i].device;
        for (int32_t k = 0; k <= max; k++) {
            if (tdm__grow_array(&d, &cap, n + 1, sizeof *d) != 0) {
                free(d);
                return tdm__pti_oom(c);
            }
            d[n++] = (tdm_snap_device){k, tdm__pti_intern(c, "", 0), tdm__pti_intern(c, "", 0), 0};
        }
    }
    s->devices = d;
    s->device_count = n;
    return c->status == TDM_OK ? 0 : -1;
}

/* ---- the blocks behind PyTorch's tensor events ----------------------------- */

/* The rules of allocator_settings (torch >= 2.1 writes them; the
 * defaults otherwise): max_split_size (-1: none), expandable_segments,
 * roundup_power2_divisions (a dict by interval start in MiB, a list of
 * the intervals, or one number for all). */
static void read_rules(const tdm_pkv *settings, tdm_pt_alloc_rules *r)
{
    memset(r, 0, sizeof *r);
    r->max_split_size = UINT64_MAX;
    const tdm_pkv *v = tdm__pk_get(settings, "max_split_size");
    if (v && v->type == TDM_PKV_INT && !v->big && v->v.i > 0)
        r->max_split_size = (uint64_t)v->v.i;
    v = tdm__pk_get(settings, "expandable_segments");
    r->expandable = v && (v->type == TDM_PKV_BOOL || v->type == TDM_PKV_INT) && v->v.i != 0;
    v = tdm__pk_get(settings, "roundup_power2_divisions");
    uint64_t d;
    if (v && v->type == TDM_PKV_DICT) {
        for (uint32_t k = 0; k < v->n; k++) {
            const tdm_pkv *key = v->v.items[2 * k];
            if (!key || key->type != TDM_PKV_STR || tdm__pk_u64(v->v.items[2 * k + 1], &d) != 0)
                continue;
            uint64_t mib = strtoull(key->v.s, NULL, 10);
            for (unsigned i = 0; i < TDM_PT_DIVISION_INTERVALS; i++)
                if (mib == UINT64_C(1) << i)
                    r->divisions[i] = d;
        }
    } else if (tdm__pk_is_seq(v)) {
        for (uint32_t i = 0; i < v->n && i < TDM_PT_DIVISION_INTERVALS; i++)
            if (tdm__pk_u64(v->v.items[i], &d) == 0)
                r->divisions[i] = d;
    } else if (tdm__pk_u64(v, &d) == 0) {
        for (unsigned i = 0; i < TDM_PT_DIVISION_INTERVALS; i++)
            r->divisions[i] = d;
    }
}

/* Each list's tensor events get their blocks' sizes (a history tidemark
 * wrote says its own sizes already). */
static int block_sizes(im *c, const tdm_pkv *settings)
{
    if (c->rep.from_tidemark)
        return 0;
    tdm_pt_alloc_rules rules;
    read_rules(settings, &rules);
    c->dev_start[c->ndev] = c->nevents;
    for (size_t k = 0; k < c->ndev; k++) {
        size_t n = c->dev_start[k + 1] - c->dev_start[k];
        /* (No events at all: no array to point into.) */
        if (n && tdm__pt_block_sizes(c->events + c->dev_start[k], n, &rules) != 0)
            return tdm__pti_oom(c);
    }
    return 0;
}

/* ---- the history: lists merged by time ------------------------------------- */

/* Events of all lists and the marks, into one sequence: repeatedly the
 * list head with the smallest time (marks first on ties, then the lower
 * list), so every list keeps its own order even where its times do not
 * increase. */
static int merge_history(im *c)
{
    size_t lists = c->ndev;
    c->dev_start[lists] = c->nevents;
    if (c->nmarks) {
        tdm__pti_order_marks(c);
    }
    size_t total = c->nevents + c->nmarks;
    tdm_event *out = malloc((total ? total : 1) * sizeof *out);
    size_t *head = malloc((lists ? lists : 1) * sizeof *head);
    size_t *note = malloc((lists ? lists : 1) * sizeof *note);
    c->annotations = malloc((c->nnotes ? c->nnotes : 1) * sizeof *c->annotations);
    if (!out || !head || !note || !c->annotations) {
        free(out);
        free(head);
        free(note);
        return tdm__pti_oom(c);
    }
    for (size_t k = 0, i = 0; k < lists; k++) {
        head[k] = c->dev_start[k];
        while (i < c->nnotes && c->notes[i].list < k)
            i++;
        note[k] = i; /* notes are in list order */
    }
    /* Lists with no events: their notes go first. */
    for (size_t k = 0; k < lists; k++)
        if (head[k] == c->dev_start[k + 1])
            tdm__pti_place_notes(c, k, &note[k], SIZE_MAX, 0);
    size_t mk = 0, n = 0;
    uint32_t phase = 0, step = 0;
    while (n < total) {
        size_t best = SIZE_MAX;
        uint64_t bt = UINT64_MAX;
        for (size_t k = 0; k < lists; k++)
            if (head[k] < c->dev_start[k + 1] && (best == SIZE_MAX ||
                                                   c->events[head[k]].time_ns < bt)) {
                best = k;
                bt = c->events[head[k]].time_ns;
            }
        if (mk < c->nmarks && (best == SIZE_MAX || c->marks[mk].time_ns <= bt)) {
            const pending_mark *m = &c->marks[mk++];
            tdm_event e = {.time_ns = m->time_ns, .device = -1};
            if (m->is_step) {
                e.action = TDM_ACTION_STEP;
                step = m->value;
            } else {
                e.action = TDM_ACTION_PHASE;
                /* An END ends its phase only while that phase is in
                 * force: a block nested in another leaves the outer's. */
                if (!m->is_end)
                    phase = m->value;
                else if (phase == m->value)
                    phase = 0;
            }
            e.phase = phase;
            e.step = step;
            out[n++] = e;
            continue;
        }
        tdm__pti_place_notes(c, best, &note[best], head[best], n);
        tdm_event e = c->events[head[best]++];
        e.phase = phase;
        e.step = step;
        out[n++] = e;
        if (head[best] == c->dev_start[best + 1])
            tdm__pti_place_notes(c, best, &note[best], SIZE_MAX, n); /* after the list's last */
    }
    free(head);
    free(note);
    free(c->events);
    c->events = out;
    c->nevents = n;
    return tdm__pti_place_external_notes(c);
}

/* ---- entry points ----------------------------------------------------------- */

static int import_root(im *c, const tdm_pkv *root, const char *source)
{
    where_t w = {"snapshot", -1, -1};
    const tdm_pkv *segments = NULL, *traces = NULL, *settings = NULL;
    if (tdm__pk_is_seq(root)) {
        segments = root; /* torch.cuda.memory.memory_snapshot(): segments only */
    } else if (root->type == TDM_PKV_DICT) {
        segments = tdm__pk_get(root, "segments");
        traces = tdm__pk_get(root, "device_traces");
        settings = tdm__pk_get(root, "allocator_settings");
        if (!segments)
            return tdm__pti_fail(c, root, &w, "no 'segments' key: not a PyTorch memory snapshot");
    } else {
        return tdm__pti_fail(c, root, &w, "the pickle holds %s, not a snapshot dict",
                    tdm__pk_type_name(root));
    }
    if (settings && settings->type != TDM_PKV_DICT)
        settings = NULL;
    const tdm_pkv *alloc_mode = tdm__pk_get(tdm__pk_get(settings, "tidemark"), "alloc_mode");
    int passthrough = tdm__pti_is_str(alloc_mode, "passthrough") ||
                      tdm__pti_is_str(alloc_mode, "observe");
    if (read_segments(c, segments, "segments", passthrough) < 0 ||
        read_segments(c, tdm__pk_get(root, "host_segments"), "host_segments", passthrough) < 0)
        return -1;
    size_t ntraces = 0;
    if (traces && traces->type != TDM_PKV_NONE) {
        if (!tdm__pk_is_seq(traces))
            return tdm__pti_fail(c, traces, &(where_t){"device_traces", -1, -1}, "is %s, not list",
                        tdm__pk_type_name(traces));
        if (traces->n > 32768)
            return tdm__pti_fail(c, traces, &(where_t){"device_traces", -1, -1},
                        "%u device lists: more devices than tidemark can name", traces->n);
        ntraces = traces->n;
        for (uint32_t d = 0; d < traces->n; d++)
            if (read_trace(c, traces->v.items[d], (int)d, "device_traces", d) < 0)
                return -1;
    }
    if (root->type == TDM_PKV_DICT &&
        read_trace(c, tdm__pk_get(root, "host_traces"), -1, "host_traces", -1) < 0)
        return -1;
    if (tdm__grow_array(&c->dev_start, &c->cap_dev, c->ndev + 1, sizeof *c->dev_start) != 0)
        return tdm__pti_oom(c);
    if (root->type == TDM_PKV_DICT &&
        tdm__pti_read_annotations(c, tdm__pk_get(root, "external_annotations")) < 0)
        return -1;
    if (read_header(c, settings, source) < 0 || read_devices(c, settings, ntraces) < 0 ||
        block_sizes(c, settings) < 0)
        return -1;
    return merge_history(c);
}

tdm_status tdm__import_pytorch_buffer(const void *data, size_t len, const char *source,
                                      tdm_snap **out, tdm_pt_import_report *report,
                                      char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    tdm_pk_doc *doc = NULL;
    const tdm_pkv *root = NULL;
    tdm_pk_error perr;
    tdm_status s = tdm__pk_parse(data, len, &doc, &root, &perr);
    if (s != TDM_OK) {
        if (err)
            snprintf(err, errlen, "at byte %" PRIu64 ": %s", perr.offset, perr.message);
        return s;
    }
    im c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.errlen = errlen;
    c.status = TDM_OK;
    c.o = calloc(1, sizeof *c.o);
    if (!c.o || tdm__pti_htab_init(&c.str_index) || tdm__pti_htab_init(&c.frame_index) ||
        tdm__pti_htab_init(&c.stack_index) ||
        tdm__grow_array(&c.stacks, &c.cap_stacks, 1, sizeof *c.stacks) ||
        tdm__grow_array(&c.stack_offs, &c.cap_offs, 1, sizeof *c.stack_offs) ||
        tdm__grow_array(&c.phases, &c.cap_phases, 1, sizeof *c.phases)) {
        tdm__pti_oom(&c);
        goto out;
    }
    /* Stack 0 and phase 0 are "none". */
    c.stacks[0] = (tdm_snap_stack){0, NULL};
    c.stack_offs[0] = 0;
    c.nstacks = 1;
    c.phases[0] = "";
    c.nphases = 1;
    if (import_root(&c, root, source) == 0) {
        tdm_snap *snap = &c.o->snap;
        for (size_t i = 1; i < c.nstacks; i++)
            c.stacks[i].frames = c.o->stack_frames + c.stack_offs[i];
        snap->frames = c.frames, snap->frame_count = c.nframes;
        snap->stacks = c.stacks, snap->stack_count = c.nstacks;
        snap->events = c.events, snap->event_count = c.nevents;
        snap->segments = c.segs, snap->segment_count = c.nsegs;
        snap->blocks = c.blocks, snap->block_count = c.nblocks;
        snap->phase_names = c.phases, snap->phase_count = c.nphases;
        snap->annotations = c.annotations, snap->annotation_count = c.nannotations;
        snap->complete = 1;
        c.frames = NULL, c.stacks = NULL, c.events = NULL, c.segs = NULL;
        c.blocks = NULL, c.phases = NULL, c.annotations = NULL;
        *out = snap;
        c.o = NULL;
    }
out:
    s = c.status;
    free(c.frames);
    free(c.stacks);
    free(c.events);
    free(c.segs);
    free(c.blocks);
    free((void *)c.phases);
    free(c.strs);
    free(c.stack_offs);
    free(c.dev_start);
    free(c.marks);
    free(c.notes);
    free(c.ext_notes);
    free(c.annotations);
    tdm__pti_htab_destroy(&c.str_index);
    tdm__pti_htab_destroy(&c.frame_index);
    tdm__pti_htab_destroy(&c.stack_index);
    if (c.o)
        tdm__import_pytorch_free(&c.o->snap);
    tdm__pk_free(doc);
    if (report)
        *report = c.rep;
    return s;
}

int tdm__import_pytorch_sniff(const unsigned char *head, size_t len)
{
    /* PROTO 2..5 opens every pickle PyTorch or tidemark writes. */
    return len >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

tdm_status tdm__import_read_file(const char *path, unsigned char **buf, size_t *len,
                                 char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    const char *why = fd < 0 || fstat(fd, &st) != 0 ? strerror(errno)
                      : !S_ISREG(st.st_mode)        ? "not a regular file"
                                                    : NULL;
    if (why) {
        if (err)
            snprintf(err, errlen, "%s", why);
        if (fd >= 0)
            close(fd);
        return TDM_IO_ERROR;
    }
    size_t want = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(want ? want : 1);
    if (!b) {
        close(fd);
        if (err)
            snprintf(err, errlen, "out of memory reading %zu bytes", want);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    while (got < want) {
        ssize_t r = read(fd, b + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = got;
    return TDM_OK;
}

tdm_status tdm__import_pytorch(const char *path, tdm_snap **out, char *err, size_t errlen)
{
    *out = NULL;
    unsigned char *buf;
    size_t got;
    char why[256];
    tdm_status rs = tdm__import_read_file(path, &buf, &got, why, sizeof why);
    if (rs != TDM_OK) {
        if (err)
            snprintf(err, errlen, rs == TDM_IO_ERROR ? "cannot read %s: %s" : "%.0s%s", path,
                     why);
        return rs;
    }
    tdm_pt_import_report rep;
    const char *base = strrchr(path, '/');
    tdm_status s = tdm__import_pytorch_buffer(buf, got, base ? base + 1 : path, out, &rep,
                                              err, errlen);
    free(buf);
    if (s == TDM_OK && rep.skipped)
        fprintf(stderr, "tidemark import: warning: %s: %" PRIu64 " trace entries of actions "
                        "tidemark does not record were skipped (%s)\n",
                path, rep.skipped, rep.skipped_actions);
    return s;
}
