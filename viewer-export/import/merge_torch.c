/* viewer-export/import/merge_torch.c: tidemark's snapshot and PyTorch's
 * history of one run into one snapshot (merge_torch.h says what comes
 * from where, and why).
 *
 * PyTorch's memory, for telling which of tidemark's alloc/free events are
 * its segments seen from below: the intervals of its final segments, of
 * its segment events and of its tensors, per device, sorted by start with
 * a running maximum of their ends, so one binary search says whether a
 * range touches any of them.  No state, no locks.
 */
#define _GNU_SOURCE /* asprintf */
#include "merge_torch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct merged {
    tdm_snap snap; /* first: tdm__merge_torch_free casts back */
    uint32_t *stack_frames;
    char *notes;
} merged;

typedef struct span {
    int32_t device;
    uint64_t lo, hi, max_hi; /* max_hi: largest hi of this device's spans so far */
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

static int span_add(spans *s, int32_t device, uint64_t lo, uint64_t size)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        span *g = realloc(s->v, cap * sizeof *g);
        if (!g)
            return -1;
        s->v = g;
        s->cap = cap;
    }
    uint64_t hi = size > UINT64_MAX - lo ? UINT64_MAX : lo + (size ? size : 1);
    s->v[s->n++] = (span){device, lo, hi, hi};
    return 0;
}

static int span_cmp(const void *pa, const void *pb)
{
    const span *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static void spans_index(spans *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, span_cmp);
    for (size_t i = 1; i < s->n; i++)
        if (s->v[i].device == s->v[i - 1].device && s->v[i - 1].max_hi > s->v[i].max_hi)
            s->v[i].max_hi = s->v[i - 1].max_hi;
}

/* Nonzero when [lo, lo+size) on `device` touches a span. */
static int spans_touch(const spans *s, int32_t device, uint64_t lo, uint64_t size)
{
    uint64_t hi = size > UINT64_MAX - lo ? UINT64_MAX : lo + (size ? size : 1);
    /* The last span of `device` starting before hi. */
    size_t a = 0, b = s->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        const span *x = &s->v[m];
        if (x->device < device || (x->device == device && x->lo < hi))
            a = m + 1;
        else
            b = m;
    }
    return a > 0 && s->v[a - 1].device == device && s->v[a - 1].max_hi > lo;
}

static int is_tensor_action(unsigned a)
{
    return a == TDM_ACTION_ALLOC || a == TDM_ACTION_FREE_REQUESTED ||
           a == TDM_ACTION_FREE_COMPLETED;
}

static int is_mark(unsigned a)
{
    return a == TDM_ACTION_PHASE || a == TDM_ACTION_STEP;
}

static int gives_back(unsigned a)
{
    return a == TDM_ACTION_SEGMENT_FREE || a == TDM_ACTION_SEGMENT_UNMAP;
}

static int makes_segment(unsigned a)
{
    return a == TDM_ACTION_SEGMENT_ALLOC || a == TDM_ACTION_SEGMENT_MAP;
}

/* Whether the two events' ranges share a byte. */
static int overlaps(const tdm_event *a, const tdm_event *b)
{
    uint64_t a_hi = a->size > UINT64_MAX - a->addr ? UINT64_MAX : a->addr + a->size;
    uint64_t b_hi = b->size > UINT64_MAX - b->addr ? UINT64_MAX : b->addr + (b->size ? b->size : 1);
    return a->addr < b_hi && b->addr < a_hi;
}

/* PyTorch's memory, as spans. */
static int torch_spans(const tdm_snap *p, spans *s)
{
    for (size_t i = 0; i < p->segment_count; i++)
        if (span_add(s, p->segments[i].device, p->segments[i].address,
                     p->segments[i].total_size) != 0)
            return -1;
    for (size_t i = 0; i < p->event_count; i++) {
        const tdm_event *e = &p->events[i];
        if ((makes_segment(e->action) || is_tensor_action(e->action)) &&
            span_add(s, e->device, e->addr, e->size) != 0)
            return -1;
    }
    spans_index(s);
    return 0;
}

/* What is kept of each side's events. */
typedef struct keep {
    int tdm_marks;        /* tidemark has phase or step marks */
    const uint8_t *torch_oom_dev; /* devices (ordinal + 1, up to 32768) with a torch oom */
} keep;

static int keep_tdm_event(const tdm_event *e, const spans *torch, const keep *k)
{
    if (is_tensor_action(e->action))
        return !spans_touch(torch, e->device, e->addr, e->size);
    if (e->action == TDM_ACTION_OOM && e->device >= -1)
        return !k->torch_oom_dev[e->device + 1];
    return 1;
}

static int keep_torch_event(const tdm_event *e, const keep *k)
{
    return is_tensor_action(e->action) || e->action == TDM_ACTION_OOM ||
           (is_mark(e->action) && !k->tdm_marks);
}

/* The phase table: tidemark's, then PyTorch's names it lacks; map[i] is
 * the merged id of PyTorch's phase i. */
static int merge_phases(const tdm_snap *t, const tdm_snap *p, merged *m, uint32_t *map)
{
    size_t cap = t->phase_count + p->phase_count + 1;
    const char **names = malloc(cap * sizeof *names);
    if (!names)
        return -1;
    size_t n = 0;
    for (; n < t->phase_count; n++)
        names[n] = t->phase_names[n];
    if (n == 0)
        names[n++] = "";
    map[0] = 0;
    for (size_t i = 1; i < p->phase_count; i++) {
        size_t j = 1;
        while (j < n && strcmp(names[j], p->phase_names[i]) != 0)
            j++;
        if (j == n)
            names[n++] = p->phase_names[i];
        map[i] = (uint32_t)j;
    }
    m->snap.phase_names = names;
    m->snap.phase_count = n;
    return 0;
}

/* Frames and stacks: tidemark's as they are, then PyTorch's after them.
 * Returns the merged id of PyTorch's stacks' first (stack 1 maps here). */
static int merge_stacks(const tdm_snap *t, const tdm_snap *p, merged *m, uint32_t *base)
{
    size_t tf = t->frame_count, ts = t->stack_count ? t->stack_count : 1;
    size_t ps = p->stack_count ? p->stack_count - 1 : 0, depth = 0;
    for (size_t i = 1; i < p->stack_count; i++)
        depth += p->stacks[i].depth;
    tdm_snap_frame *frames = malloc((tf + p->frame_count + 1) * sizeof *frames);
    tdm_snap_stack *stacks = malloc((ts + ps) * sizeof *stacks);
    uint32_t *sf = malloc((depth ? depth : 1) * sizeof *sf);
    if (!frames || !stacks || !sf) {
        free(frames);
        free(stacks);
        free(sf);
        return -1;
    }
    if (tf)
        memcpy(frames, t->frames, tf * sizeof *frames);
    if (p->frame_count)
        memcpy(frames + tf, p->frames, p->frame_count * sizeof *frames);
    if (t->stack_count)
        memcpy(stacks, t->stacks, t->stack_count * sizeof *stacks);
    else
        stacks[0] = (tdm_snap_stack){0, NULL};
    size_t at = 0;
    for (size_t i = 1; i < p->stack_count; i++) {
        const tdm_snap_stack *s = &p->stacks[i];
        for (uint32_t d = 0; d < s->depth; d++)
            sf[at + d] = s->frames[d] + (uint32_t)tf;
        stacks[ts + i - 1] = (tdm_snap_stack){s->depth, sf + at};
        at += s->depth;
    }
    m->snap.frames = frames;
    m->snap.frame_count = tf + p->frame_count;
    m->snap.stacks = stacks;
    m->snap.stack_count = ts + ps;
    m->stack_frames = sf;
    *base = (uint32_t)ts;
    return 0;
}

static uint32_t torch_stack(const tdm_snap *p, uint32_t base, uint32_t id)
{
    return id && id < p->stack_count ? base + id - 1 : 0;
}

/* The two histories by time, each side's order kept (merge_torch.h). */
static int merge_events(const tdm_snap *t, const tdm_snap *p, const spans *torch,
                        const keep *k, const uint32_t *phase_map, uint32_t stack_base,
                        merged *m, tdm_merge_torch_report *rep)
{
    tdm_event *out = malloc((t->event_count + p->event_count + 1) * sizeof *out);
    if (!out)
        return -1;
    size_t i = 0, j = 0, n = 0;
    uint32_t phase = 0, step = 0;
    for (;;) {
        while (i < t->event_count && !keep_tdm_event(&t->events[i], torch, k)) {
            i++;
            rep->left_out++;
        }
        while (j < p->event_count && !keep_torch_event(&p->events[j], k))
            j++;
        if (i == t->event_count && j == p->event_count)
            break;
        int from_tdm;
        if (j == p->event_count) {
            from_tdm = 1;
        } else if (i == t->event_count) {
            from_tdm = 0;
        } else {
            const tdm_event *a = &t->events[i], *b = &p->events[j];
            uint64_t ua = a->time_ns / 1000, ub = b->time_ns / 1000;
            from_tdm = ua < ub || (ua == ub && !gives_back(a->action)) ||
                       /* memory the tensor is carved from (its segment,
                        * or an expandable segment's page it reaches
                        * into), a clock skew behind */
                       (b->action == TDM_ACTION_ALLOC && makes_segment(a->action) &&
                        a->device == b->device && overlaps(a, b) &&
                        a->time_ns - b->time_ns <= 1000000);
        }
        tdm_event e;
        if (from_tdm) {
            e = t->events[i++];
            if (k->tdm_marks) {
                phase = e.phase;
                step = e.step;
            } else {
                e.phase = phase;
                e.step = step;
            }
        } else {
            e = p->events[j++];
            if (e.action == TDM_ACTION_PHASE)
                phase = e.phase < p->phase_count ? phase_map[e.phase] : 0;
            else if (e.action == TDM_ACTION_STEP)
                step = e.step;
            else
                rep->tensor_events++;
            e.phase = phase;
            e.step = step;
            e.stack_id = torch_stack(p, stack_base, e.stack_id);
        }
        out[n++] = e;
    }
    if (tdm__merge_torch_join_maps(out, &n, p) != 0) {
        free(out);
        return -1;
    }
    m->snap.events = out;
    m->snap.event_count = n;
    return 0;
}

typedef struct seg_ref {
    int32_t device;
    uint64_t address;
    const tdm_snap_segment *seg;
    int from_torch;
} seg_ref;

static int seg_ref_cmp(const void *pa, const void *pb)
{
    const seg_ref *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->address != b->address)
        return a->address < b->address ? -1 : 1;
    return a->from_torch - b->from_torch;
}

/* The final state: PyTorch's segments (tidemark's stack where tidemark
 * has the same segment), and tidemark's that PyTorch's do not cover. */
static int merge_state(const tdm_snap *t, const tdm_snap *p, uint32_t stack_base, merged *m,
                       tdm_merge_torch_report *rep)
{
    spans pseg = {0};
    for (size_t i = 0; i < p->segment_count; i++)
        if (span_add(&pseg, p->segments[i].device, p->segments[i].address,
                     p->segments[i].total_size) != 0) {
            free(pseg.v);
            return -1;
        }
    spans_index(&pseg);
    size_t nref = 0, nblocks = 0;
    seg_ref *refs = malloc((t->segment_count + p->segment_count + 1) * sizeof *refs);
    if (!refs) {
        free(pseg.v);
        return -1;
    }
    for (size_t i = 0; i < t->segment_count; i++) {
        const tdm_snap_segment *g = &t->segments[i];
        if (!spans_touch(&pseg, g->device, g->address, g->total_size)) {
            refs[nref++] = (seg_ref){g->device, g->address, g, 0};
            nblocks += g->block_count;
        }
    }
    for (size_t i = 0; i < p->segment_count; i++) {
        const tdm_snap_segment *g = &p->segments[i];
        refs[nref++] = (seg_ref){g->device, g->address, g, 1};
        nblocks += g->block_count;
    }
    free(pseg.v);
    if (nref)
        qsort(refs, nref, sizeof *refs, seg_ref_cmp);
    tdm_snap_segment *segs = malloc((nref + 1) * sizeof *segs);
    tdm_snap_block *blocks = malloc((nblocks + 1) * sizeof *blocks);
    if (!segs || !blocks) {
        free(refs);
        free(segs);
        free(blocks);
        return -1;
    }
    size_t nb = 0;
    for (size_t r = 0; r < nref; r++) {
        const tdm_snap *from = refs[r].from_torch ? p : t;
        tdm_snap_segment g = *refs[r].seg;
        if (refs[r].from_torch) {
            rep->torch_segments++;
            g.stack_id = torch_stack(p, stack_base, g.stack_id);
            for (size_t i = 0; i < t->segment_count; i++)
                if (t->segments[i].device == g.device && t->segments[i].address == g.address)
                    g.stack_id = t->segments[i].stack_id;
        }
        uint32_t first = (uint32_t)nb;
        for (uint32_t b = 0; b < refs[r].seg->block_count; b++) {
            size_t at = (size_t)refs[r].seg->first_block + b;
            if (at >= from->block_count)
                break;
            tdm_snap_block blk = from->blocks[at];
            if (refs[r].from_torch)
                blk.stack_id = torch_stack(p, stack_base, blk.stack_id);
            blocks[nb++] = blk;
        }
        g.first_block = first;
        g.block_count = (uint32_t)(nb - first);
        segs[r] = g;
    }
    free(refs);
    m->snap.segments = segs;
    m->snap.segment_count = nref;
    m->snap.blocks = blocks;
    m->snap.block_count = nb;
    return 0;
}

/* Devices and statistics: tidemark's, plus PyTorch's devices it lacks;
 * PyTorch's statistics for the devices it has them for. */
static int merge_devices_stats(const tdm_snap *t, const tdm_snap *p,
                               const tdm_snap_device_stats *stats, size_t nstats, merged *m)
{
    tdm_snap_device *devs = malloc((t->device_count + p->device_count + 1) * sizeof *devs);
    tdm_snap_device_stats *rows = malloc((t->stats_count + nstats + 1) * sizeof *rows);
    if (!devs || !rows) {
        free(devs);
        free(rows);
        return -1;
    }
    size_t nd = 0, nr = 0;
    for (size_t i = 0; i < t->device_count; i++)
        devs[nd++] = t->devices[i];
    for (size_t i = 0; i < p->device_count; i++) {
        size_t j = 0;
        while (j < t->device_count && t->devices[j].index != p->devices[i].index)
            j++;
        if (j == t->device_count)
            devs[nd++] = p->devices[i];
    }
    for (size_t i = 0; i < t->stats_count; i++) {
        size_t j = 0;
        while (j < nstats && stats[j].device != t->stats[i].device)
            j++;
        if (j == nstats)
            rows[nr++] = t->stats[i];
    }
    for (size_t i = 0; i < nstats; i++)
        rows[nr++] = stats[i];
    m->snap.devices = devs;
    m->snap.device_count = nd;
    m->snap.stats = rows;
    m->snap.stats_count = nr;
    return 0;
}

int tdm__merge_torch_done(const tdm_snap *snap)
{
    return snap->header.notes && strstr(snap->header.notes, TDM_MERGE_TORCH_NOTE) != NULL;
}

void tdm__merge_torch_free(tdm_snap *snap)
{
    if (!snap)
        return;
    merged *m = (merged *)snap;
    free(m->snap.devices);
    free((void *)m->snap.phase_names);
    free(m->snap.frames);
    free(m->snap.stacks);
    free(m->stack_frames);
    free(m->snap.events);
    free(m->snap.segments);
    free(m->snap.blocks);
    free(m->snap.stats);
    free(m->notes);
    free(m);
}

/* The tensor allocations PyTorch's ring lost on `device`, as far as its
 * statistics say: the allocations it counted (allocation.all.allocated)
 * less those in the window; 0 when they cannot say. */
static uint64_t ring_lost(const tdm_snap *p, const tdm_snap_device_stats *stats, size_t nstats,
                          int32_t device)
{
    uint64_t in_window = 0;
    for (size_t i = 0; i < p->event_count; i++)
        in_window += p->events[i].device == device && p->events[i].action == TDM_ACTION_ALLOC;
    for (size_t j = 0; j < nstats; j++)
        if (stats[j].device == device && stats[j].pool == TDM_STAT_POOL_ALL) {
            int64_t made = stats[j].stats.allocation.allocated;
            return made > 0 && (uint64_t)made > in_window ? (uint64_t)made - in_window : 0;
        }
    return 0;
}

/* The notes' line for a ring that was full at the end (malloc'd; "" when
 * none was, NULL when out of memory); the allocations lost into *lost. */
static char *ring_note(const tdm_snap *p, const tdm_snap_device_stats *stats, size_t nstats,
                       const tdm_merge_torch_ring *ring, uint64_t *lost)
{
    *lost = 0;
    if (!ring || !ring->nfull)
        return strdup("");
    char *devs = strdup(""), *line = NULL;
    for (size_t i = 0; devs && i < ring->nfull; i++) {
        uint64_t n = ring_lost(p, stats, nstats, ring->full[i]);
        char *more = NULL;
        *lost += n;
        if (asprintf(&more, "%s%s%d", devs, i ? ", " : "", (int)ring->full[i]) < 0)
            more = NULL;
        free(devs);
        devs = more;
    }
    char count[96] = "";
    if (*lost)
        snprintf(count, sizeof count, " (at least %" PRIu64 " tensor allocation%s, by "
                 "torch.cuda.memory_stats)", *lost, *lost == 1 ? "" : "s");
    if (devs && asprintf(&line, "\nPyTorch's memory history filled its ring of %" PRIu64
                         " entries (max_entries) on device%s %s: its oldest tensor events "
                         "are lost%s, so what was allocated before the window (parameters, "
                         "optimizer state) has no history and counts as unknown in "
                         "categories; a larger max_entries keeps more",
                         ring->max_entries, ring->nfull == 1 ? "" : "s", devs, count) < 0)
        line = NULL;
    free(devs);
    return line;
}

int tdm__merge_torch_empty(const tdm_snap *torch)
{
    if (torch->segment_count)
        return 0;
    for (size_t i = 0; i < torch->event_count; i++)
        if (is_tensor_action(torch->events[i].action))
            return 0;
    return 1;
}

/* Why PyTorch's history cannot be merged, or NULL. */
static const char *unmergeable(const tdm_snap *p)
{
    if (tdm__merge_torch_empty(p))
        return "it holds no tensors (no trace entries, no segments)";
    for (size_t i = 0; i < p->event_count; i++)
        if (is_tensor_action(p->events[i].action) && !p->events[i].time_ns)
            return "its trace entries have no time_us (PyTorch before 2.1), so where they "
                   "fall among tidemark's events is unknown";
    return NULL;
}

tdm_status tdm__merge_torch(const tdm_snap *t, const tdm_snap *p,
                            const tdm_snap_device_stats *stats, size_t nstats,
                            const tdm_merge_torch_ring *ring, const char *source,
                            tdm_snap **out, tdm_merge_torch_report *rep, char *err,
                            size_t errlen)
{
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    const char *why = unmergeable(p);
    if (why) {
        snprintf(err, errlen, "%s", why);
        return TDM_FORMAT_ERROR;
    }
    merged *m = calloc(1, sizeof *m);
    uint8_t *oom_dev = calloc(32769, 1);
    uint32_t *phase_map = calloc(p->phase_count + 1, sizeof *phase_map);
    spans torch = {0};
    keep k = {0, oom_dev};
    uint32_t base = 1;
    int ok = m && oom_dev && phase_map && torch_spans(p, &torch) == 0;
    for (size_t i = 0; ok && i < t->event_count; i++)
        if (is_mark(t->events[i].action) || t->events[i].phase || t->events[i].step)
            k.tdm_marks = 1;
    for (size_t i = 0; ok && i < p->event_count; i++)
        if (p->events[i].action == TDM_ACTION_OOM && p->events[i].device >= -1)
            oom_dev[p->events[i].device + 1] = 1;
    ok = ok && merge_phases(t, p, m, phase_map) == 0 && merge_stacks(t, p, m, &base) == 0 &&
         merge_events(t, p, &torch, &k, phase_map, base, m, rep) == 0 &&
         merge_state(t, p, base, m, rep) == 0 &&
         merge_devices_stats(t, p, stats, nstats, m) == 0;
    if (ok) {
        m->snap.header = t->header;
        /* Neither "observe" (tidemark's segments booked as allocations)
         * nor a cache of tidemark's own: PyTorch's caching allocator. */
        m->snap.header.alloc_mode = "torch";
        const char *notes = t->header.notes ? t->header.notes : "";
        uint64_t lost = 0;
        char *full = ring_note(p, stats, nstats, ring, &lost);
        ok = full && asprintf(&m->notes, "%s%s" TDM_MERGE_TORCH_NOTE " (%s), merged by "
                              "tidemark; reserved memory from tidemark's own segment "
                              "events%s", notes, notes[0] ? "\n" : "", source, full) >= 0;
        free(full);
        if (!ok)
            m->notes = NULL;
        m->snap.header.notes = m->notes;
        m->snap.imported = t->imported;
        m->snap.imported_count = t->imported_count;
        /* PyTorch's lost events are the merged history's dropped ones too:
         * summary, view and replay then say the window starts mid-run. */
        m->snap.dropped_events = t->dropped_events + p->dropped_events + lost;
        rep->torch_lost = lost;
        rep->ring_full = ring && ring->nfull > 0;
        m->snap.complete = 1;
        rep->stats_from_torch = nstats > 0;
        rep->marks_from_torch = !k.tdm_marks && p->phase_count > 1;
    }
    free(torch.v);
    free(oom_dev);
    free(phase_map);
    if (!ok) {
        if (m)
            tdm__merge_torch_free(&m->snap);
        snprintf(err, errlen, "out of memory");
        return TDM_HOST_OUT_OF_MEMORY;
    }
    *out = &m->snap;
    return TDM_OK;
}
