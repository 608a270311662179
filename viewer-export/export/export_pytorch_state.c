/* viewer-export/export/export_pytorch_state.c: what the `pytorch` exporter writes
 * (export_pytorch.h): a well-formed final state, and the events that
 * replay onto it.
 *
 * The replay is the viewer's Allocator State History run ahead of time:
 * start from the final segments and live blocks, walk the events from the
 * newest to the oldest and undo each one; an event whose undo would break
 * the state (an alloc of a block that is not live, a free that re-creates
 * a block outside every segment or over another block, a segment_alloc of
 * a segment that still holds blocks, …) is left out.  What is kept then
 * replays exactly, and every kept alloc is matched (by a kept free or by a
 * block live at the end), whatever the ring dropped or races reordered.
 *
 * Per device it keeps two ordered maps (treaps keyed by address): live
 * segments and live blocks.  Cost O(events × log live), memory O(live +
 * segments).  A device whose history maps and unmaps ranges (expandable
 * segments) keeps its segments instead as the viewer's MemoryView does: a
 * list in signed-address order, each range with its stream, changed by the
 * viewer's own list operations.  There the list order and the streams
 * decide which ranges join (only neighbours of one stream do, and a
 * segment_free re-created above every other segment lands before the last
 * one), and a segment_map whose range no single segment holds makes the
 * viewer throw; such a device costs O(segment events × segments).
 * No state, no locks.
 */
#include "export_pytorch.h"
#include "snap_build.h" /* tdm__grow_array */

#include <stdlib.h>
#include <string.h>

/* ---- ordered map: a treap over a node pool ------------------------------ */

typedef struct onode {
    uint64_t key;  /* address */
    uint64_t size; /* bytes */
    uint32_t left, right, prio;
    uint32_t aux;  /* blocks: FR_PENDING | category << 8 */
} onode;

typedef struct omap {
    onode *n;          /* n[0] is the nil node */
    uint32_t root;
    uint32_t free_list; /* recycled nodes, chained through .left */
    uint32_t used, cap;
    uint32_t rng;
} omap;

static int omap_init(omap *m)
{
    memset(m, 0, sizeof *m);
    m->cap = 64;
    m->n = calloc(m->cap, sizeof *m->n);
    m->used = 1;
    m->rng = 0x9E3779B9u;
    return m->n ? 0 : -1;
}

static void omap_destroy(omap *m)
{
    free(m->n);
    m->n = NULL;
}

static uint32_t omap_new(omap *m, uint64_t key, uint64_t size, uint32_t aux)
{
    uint32_t x;
    if (m->free_list) {
        x = m->free_list;
        m->free_list = m->n[x].left;
    } else {
        if (m->used == m->cap) {
            if (m->cap >= UINT32_MAX / 2)
                return 0;
            onode *g = realloc(m->n, 2 * (size_t)m->cap * sizeof *g);
            if (!g)
                return 0;
            m->n = g;
            m->cap *= 2;
        }
        x = m->used++;
    }
    /* xorshift32: priorities only need to look random. */
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 17;
    m->rng ^= m->rng << 5;
    m->n[x] = (onode){key, size, 0, 0, m->rng, aux};
    return x;
}

/* Splits t into keys < key (*l) and keys >= key (*r). */
static void omap_split(onode *n, uint32_t t, uint64_t key, uint32_t *l, uint32_t *r)
{
    while (t) {
        if (n[t].key < key) {
            *l = t;
            l = &n[t].right;
            t = n[t].right;
        } else {
            *r = t;
            r = &n[t].left;
            t = n[t].left;
        }
    }
    *l = *r = 0;
}

static uint32_t omap_merge(onode *n, uint32_t a, uint32_t b)
{
    uint32_t root = 0, *link = &root;
    while (a && b) {
        if (n[a].prio > n[b].prio) {
            *link = a;
            link = &n[a].right;
            a = n[a].right;
        } else {
            *link = b;
            link = &n[b].left;
            b = n[b].left;
        }
    }
    *link = a ? a : b;
    return root;
}

/* Inserts a key that is not present; 0 on success. */
static int omap_insert(omap *m, uint64_t key, uint64_t size, uint32_t aux)
{
    uint32_t x = omap_new(m, key, size, aux);
    if (!x)
        return -1;
    onode *n = m->n;
    uint32_t *link = &m->root;
    while (*link && n[*link].prio >= n[x].prio)
        link = key < n[*link].key ? &n[*link].left : &n[*link].right;
    omap_split(n, *link, key, &n[x].left, &n[x].right);
    *link = x;
    return 0;
}

static uint32_t omap_find(const omap *m, uint64_t key)
{
    uint32_t t = m->root;
    while (t && m->n[t].key != key)
        t = key < m->n[t].key ? m->n[t].left : m->n[t].right;
    return t;
}

/* The node with the largest key <= key, or 0. */
static uint32_t omap_floor(const omap *m, uint64_t key)
{
    uint32_t t = m->root, best = 0;
    while (t) {
        if (m->n[t].key <= key) {
            best = t;
            t = m->n[t].right;
        } else
            t = m->n[t].left;
    }
    return best;
}

static void omap_erase(omap *m, uint64_t key)
{
    uint32_t *link = &m->root;
    while (*link && m->n[*link].key != key)
        link = key < m->n[*link].key ? &m->n[*link].left : &m->n[*link].right;
    uint32_t x = *link;
    if (!x)
        return;
    *link = omap_merge(m->n, m->n[x].left, m->n[x].right);
    m->n[x].left = m->free_list;
    m->free_list = x;
}

/* Nonzero when some entry overlaps [a, end). */
static int omap_overlaps(const omap *m, uint64_t a, uint64_t end)
{
    uint32_t f = omap_floor(m, end - 1);
    return f && m->n[f].key + m->n[f].size > a;
}

/* ---- the final state ---------------------------------------------------- */

static int seg_cmp(const void *pa, const void *pb)
{
    const tdm_snap_segment *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->address < b->address ? -1 : a->address > b->address;
}

typedef struct blist {
    tdm_snap_block *b;
    size_t n, cap;
} blist;

static int blist_push(blist *l, tdm_snap_block b)
{
    if (tdm__grow_array(&l->b, &l->cap, l->n + 1, sizeof *l->b) != 0)
        return -1;
    l->b[l->n++] = b;
    return 0;
}

/* Appends blocks that tile [seg->address, + total_size) exactly: the given
 * blocks in address order, minus any that overlap or leave the segment,
 * with inactive blocks filling the gaps.  Returns blocks changed, or -1. */
static int64_t tile(blist *out, tdm_snap_segment *seg, const tdm_snap_block *in,
                    size_t count)
{
    int64_t repaired = 0;
    uint64_t cur = seg->address, end = seg->address + seg->total_size;
    seg->first_block = (uint32_t)out->n;
    for (size_t i = 0; i < count; i++) {
        const tdm_snap_block *b = &in[i];
        if (b->size == 0 || b->address < cur || b->address + b->size > end ||
            b->address + b->size < b->address) {
            repaired++;
            continue;
        }
        if (b->address > cur) {
            tdm_snap_block gap = {.address = cur, .size = b->address - cur,
                                  .state = TDM_BLOCK_INACTIVE};
            if (blist_push(out, gap) != 0)
                return -1;
            repaired++;
        }
        tdm_snap_block copy = *b;
        if (copy.state != TDM_BLOCK_INACTIVE && copy.requested_size > copy.size) {
            copy.requested_size = copy.size; /* a request never exceeds its block */
            repaired++;
        }
        if (blist_push(out, copy) != 0)
            return -1;
        cur = b->address + b->size;
    }
    if (cur < end) {
        tdm_snap_block gap = {.address = cur, .size = end - cur,
                              .state = TDM_BLOCK_INACTIVE};
        if (blist_push(out, gap) != 0)
            return -1;
        if (count)
            repaired++;
    }
    seg->block_count = (uint32_t)(out->n - seg->first_block);
    return repaired;
}

/* A range of addresses some block event of the history used. */
typedef struct span {
    int32_t device;
    uint64_t lo, hi; /* [lo, hi) */
} span;

static int span_cmp(const void *pa, const void *pb)
{
    const span *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* A block the history leaves live, and its device. */
typedef struct live_block {
    int32_t device;
    tdm_snap_block b;
} live_block;

static int live_cmp(const void *pa, const void *pb)
{
    const live_block *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->b.address < b->b.address ? -1 : a->b.address > b->b.address;
}

/* No state record (the file was cut): per device, one segment for each
 * run of overlapping or touching address ranges the block events used,
 * holding the allocations the history leaves live.  Every block event
 * then fits inside one segment; segment events cannot be placed and are
 * left out, which is the truth: the file does not say where segments were. */
static int synthesize(const tdm_snap *snap, const tdm_model *model, tdm_pt_state *st,
                      blist *bl)
{
    size_t nsp = 0, nlive = 0;
    span *sp = malloc((snap->event_count ? snap->event_count : 1) * sizeof *sp);
    live_block *live = malloc((model->alloc_count ? model->alloc_count : 1) * sizeof *live);
    tdm_snap_block *mine = malloc((model->alloc_count ? model->alloc_count : 1) * sizeof *mine);
    tdm_snap_segment *segs = NULL;
    int rc = -1;
    if (!sp || !live || !mine)
        goto out;
    for (size_t i = 0; i < snap->event_count; i++) {
        const tdm_event *e = &snap->events[i];
        uint64_t end = e->addr + (e->size ? e->size : 1);
        if (e->action > TDM_ACTION_FREE_COMPLETED || end < e->addr)
            continue;
        sp[nsp++] = (span){e->device, e->addr, end};
    }
    if (nsp)
        qsort(sp, nsp, sizeof *sp, span_cmp);
    size_t nseg = 0;
    for (size_t i = 0; i < nsp; i++) { /* merge runs in place */
        if (nseg && sp[nseg - 1].device == sp[i].device && sp[i].lo <= sp[nseg - 1].hi) {
            if (sp[i].hi > sp[nseg - 1].hi)
                sp[nseg - 1].hi = sp[i].hi;
        } else {
            sp[nseg++] = sp[i];
        }
    }
    for (size_t k = 0; k < model->alloc_count; k++) {
        const tdm_model_alloc *a = &model->allocs[k];
        if (a->free_seq != TDM_MODEL_SEQ_NEVER || a->alloc_seq < 0)
            continue;
        live[nlive++] = (live_block){
            model->devices[a->device_index].ordinal,
            {.address = a->addr, .size = a->size ? a->size : 1, .requested_size = a->size,
             .alloc_time_ns = a->alloc_time_ns, .stack_id = a->stack_id,
             .state = a->flags & TDM_MODEL_FREE_REQUESTED ? TDM_BLOCK_ACTIVE_PENDING_FREE
                                                          : TDM_BLOCK_ACTIVE_ALLOCATED,
             .category = a->category}};
    }
    if (nlive)
        qsort(live, nlive, sizeof *live, live_cmp);
    segs = calloc(nseg ? nseg : 1, sizeof *segs);
    if (!segs)
        goto out;
    /* Both lists are sorted by (device, address): one walk pairs them.
     * Every live block's own alloc event made a span, so each has one. */
    size_t k = 0;
    for (size_t g = 0; g < nseg; g++) {
        live_block start = {sp[g].device, {.address = sp[g].lo}};
        while (k < nlive && live_cmp(&live[k], &start) < 0)
            k++;
        size_t n = 0;
        for (; k < nlive && live[k].device == sp[g].device && live[k].b.address < sp[g].hi; k++)
            mine[n++] = live[k].b;
        segs[g] = (tdm_snap_segment){.device = sp[g].device, .pool = TDM_POOL_LARGE,
                                     .address = sp[g].lo, .total_size = sp[g].hi - sp[g].lo};
        /* Gaps between live allocations are expected here: not repairs. */
        if (tile(bl, &segs[g], mine, n) < 0)
            goto out;
    }
    st->segments = segs;
    st->segment_count = nseg;
    st->synthesized = 1;
    segs = NULL;
    rc = 0;
out:
    free(segs);
    free(sp);
    free(live);
    free(mine);
    return rc;
}

tdm_status tdm__pt_state_build(const tdm_snap *snap, const tdm_model *model,
                               tdm_pt_state *out)
{
    memset(out, 0, sizeof *out);
    blist bl = {0};
    if (!model->state_known) {
        if (synthesize(snap, model, out, &bl) != 0)
            goto oom;
        out->blocks = bl.b;
        out->block_count = bl.n;
        return TDM_OK;
    }
    size_t n = snap->segment_count;
    tdm_snap_segment *segs = malloc((n ? n : 1) * sizeof *segs);
    if (!segs)
        goto oom;
    if (n) {
        memcpy(segs, snap->segments, n * sizeof *segs);
        qsort(segs, n, sizeof *segs, seg_cmp);
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        tdm_snap_segment seg = segs[i];
        /* Never index past what the file gave (a reader hands it over). */
        size_t first = seg.first_block, count = seg.block_count;
        if (first > snap->block_count)
            first = snap->block_count;
        if (count > snap->block_count - first)
            count = snap->block_count - first;
        uint64_t end = seg.address + seg.total_size;
        if (seg.total_size == 0 || end < seg.address ||
            (kept && segs[kept - 1].device == seg.device &&
             segs[kept - 1].address + segs[kept - 1].total_size > seg.address)) {
            out->segments_left_out++;
            continue;
        }
        int64_t r = tile(&bl, &seg, snap->blocks + first, count);
        if (r < 0) {
            free(segs);
            goto oom;
        }
        out->blocks_repaired += (uint64_t)r;
        segs[kept++] = seg;
    }
    out->segments = segs;
    out->segment_count = kept;
    out->blocks = bl.b;
    out->block_count = bl.n;
    return TDM_OK;
oom:
    free(bl.b);
    memset(out, 0, sizeof *out);
    return TDM_HOST_OUT_OF_MEMORY;
}

void tdm__pt_state_free(tdm_pt_state *state)
{
    free(state->segments);
    free(state->blocks);
    memset(state, 0, sizeof *state);
}

/* ---- the replay --------------------------------------------------------- */

#define FR_PENDING 1u /* block: free requested, not yet completed */
#define AUX_CAT(aux) ((uint8_t)((aux) >> 8))

/* A live segment range as MemoryView holds it (expandable devices). */
typedef struct vseg {
    uint64_t addr, size; /* bytes */
    uint64_t stream;
} vseg;

typedef struct dev_maps {
    int32_t ordinal;
    omap segs;   /* unused when `viewer_list` */
    omap blocks;
    int viewer_list; /* the history has segment_map/segment_unmap */
    vseg *vs;        /* the viewer's segment list, in its order */
    size_t nvs, capvs;
} dev_maps;

typedef struct replay {
    dev_maps *d;
    size_t n, cap;
    size_t last;
} replay;

static dev_maps *maps_of(replay *r, int32_t ordinal)
{
    if (r->n && r->d[r->last].ordinal == ordinal)
        return &r->d[r->last];
    for (size_t i = 0; i < r->n; i++)
        if (r->d[i].ordinal == ordinal) {
            r->last = i;
            return &r->d[i];
        }
    if (tdm__grow_array(&r->d, &r->cap, r->n + 1, sizeof *r->d) != 0)
        return NULL;
    dev_maps *m = &r->d[r->n];
    memset(m, 0, sizeof *m);
    m->ordinal = ordinal;
    if (omap_init(&m->segs) != 0)
        return NULL;
    if (omap_init(&m->blocks) != 0) {
        omap_destroy(&m->segs);
        return NULL;
    }
    r->last = r->n++;
    return m;
}

static void replay_destroy(replay *r)
{
    for (size_t i = 0; i < r->n; i++) {
        omap_destroy(&r->d[i].segs);
        omap_destroy(&r->d[i].blocks);
        free(r->d[i].vs);
    }
    free(r->d);
}

/* ---- the viewer's segment list (expandable devices) --------------------
 * MemoryView's simulate_memory() keeps `l_segments`, starts it sorted by
 * address (the pickle's signed int64 values) and, undoing events, calls
 * map_segment / unmap_segment; these mirror them step for step. */

static int vs_insert(dev_maps *m, size_t at, vseg v)
{
    if (tdm__grow_array(&m->vs, &m->capvs, m->nvs + 1, sizeof *m->vs) != 0)
        return -1;
    memmove(&m->vs[at + 1], &m->vs[at], (m->nvs - at) * sizeof *m->vs);
    m->vs[at] = v;
    m->nvs++;
    return 0;
}

static void vs_remove(dev_maps *m, size_t at)
{
    memmove(&m->vs[at], &m->vs[at + 1], (m->nvs - at - 1) * sizeof *m->vs);
    m->nvs--;
}

/* findIndex(e => e.addr > addr), or nvs when none (JS: -1). */
static size_t vs_first_after(const dev_maps *m, uint64_t addr)
{
    size_t i = 0;
    while (i < m->nvs && (int64_t)m->vs[i].addr <= (int64_t)addr)
        i++;
    return i;
}

/* The first range holding [a, end), or nvs. */
static size_t vs_holding(const dev_maps *m, uint64_t a, uint64_t end)
{
    for (size_t i = 0; i < m->nvs; i++)
        if (m->vs[i].addr <= a && end <= m->vs[i].addr + m->vs[i].size)
            return i;
    return m->nvs;
}

static int vs_overlaps(const dev_maps *m, uint64_t a, uint64_t end)
{
    for (size_t i = 0; i < m->nvs; i++)
        if (m->vs[i].addr < end && a < m->vs[i].addr + m->vs[i].size)
            return 1;
    return 0;
}

static int vs_cmp(const void *pa, const void *pb)
{
    const vseg *a = pa, *b = pb;
    return (int64_t)a->addr < (int64_t)b->addr ? -1 : (int64_t)a->addr > (int64_t)b->addr;
}

/* Undoes a segment event on the viewer's list: 1 undone, 0 left out (it
 * would throw or corrupt the picture), -1 on allocation failure. */
static int undo_viewer_segment(dev_maps *m, const tdm_event *e, uint64_t a, uint64_t end)
{
    vseg v = {a, e->size, e->stream};
    size_t i;
    if (!e->size)
        return 0;
    switch (e->action) {
    case TDM_ACTION_SEGMENT_ALLOC: /* unmap_segment(false): drop by address */
        for (i = 0; i < m->nvs && m->vs[i].addr != a; i++)
            ;
        if (i == m->nvs || m->vs[i].size != e->size || omap_overlaps(&m->blocks, a, end))
            return 0;
        vs_remove(m, i);
        return 1;
    case TDM_ACTION_SEGMENT_FREE: /* map_segment(false): no joining */
        if (vs_overlaps(m, a, end))
            return 0;
        i = vs_first_after(m, a);
        /* splice(-1, 0, seg) puts it before the last range, not after. */
        if (i == m->nvs && m->nvs)
            i = m->nvs - 1;
        return vs_insert(m, i, v) ? -1 : 1;
    case TDM_ACTION_SEGMENT_UNMAP: /* map_segment(true): join same-stream neighbours */
        if (vs_overlaps(m, a, end))
            return 0;
        i = vs_first_after(m, a);
        if (vs_insert(m, i, v))
            return -1;
        if (i + 1 < m->nvs && m->vs[i].addr + m->vs[i].size == m->vs[i + 1].addr &&
            m->vs[i].stream == m->vs[i + 1].stream) {
            m->vs[i].size += m->vs[i + 1].size;
            vs_remove(m, i + 1);
        }
        if (i > 0 && m->vs[i - 1].addr + m->vs[i - 1].size == m->vs[i].addr &&
            m->vs[i - 1].stream == m->vs[i].stream) {
            m->vs[i - 1].size += m->vs[i].size;
            vs_remove(m, i);
        }
        return 1;
    case TDM_ACTION_SEGMENT_MAP: { /* unmap_segment(true): carve the range out */
        i = vs_holding(m, a, end);
        if (i == m->nvs || omap_overlaps(&m->blocks, a, end))
            return 0; /* no one range holds it: the viewer would throw */
        vseg *x = &m->vs[i];
        uint64_t x_end = x->addr + x->size;
        if (x->addr == a) {
            x->addr += e->size;
            x->size -= e->size;
            if (!x->size)
                vs_remove(m, i);
        } else if (x_end == end) {
            x->size -= e->size;
        } else {
            /* The part above keeps the event's stream, as in the viewer. */
            x->size = a - x->addr;
            v.addr = end;
            v.size = x_end - end;
            return vs_insert(m, i + 1, v) ? -1 : 1;
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* Undoes one memory event; 1 if it fits the state (and was undone), 0 if
 * it must be left out, -1 on allocation failure. */
static int undo(dev_maps *m, const tdm_event *e, uint8_t *cat)
{
    uint64_t a = e->addr, s = e->size ? e->size : 1, end = a + s;
    uint32_t x;
    if (end < a)
        return 0; /* wraps the address space: nothing real */
    if (m->viewer_list) {
        switch (e->action) {
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_MAP:
        case TDM_ACTION_SEGMENT_UNMAP:
            return undo_viewer_segment(m, e, a, end);
        case TDM_ACTION_FREE_COMPLETED:
            if (omap_overlaps(&m->blocks, a, end) || vs_holding(m, a, end) == m->nvs)
                return 0;
            return omap_insert(&m->blocks, a, s, FR_PENDING | (uint32_t)*cat << 8) ? -1 : 1;
        default:
            break; /* block events: as below */
        }
    }
    switch (e->action) {
    case TDM_ACTION_ALLOC:
        if (!omap_find(&m->blocks, a))
            return 0;
        omap_erase(&m->blocks, a);
        return 1;
    case TDM_ACTION_FREE_COMPLETED:
        /* Re-create the block: free space inside one live segment. */
        if (omap_overlaps(&m->blocks, a, end))
            return 0;
        x = omap_floor(&m->segs, a);
        if (!x || m->segs.n[x].key + m->segs.n[x].size < end)
            return 0;
        return omap_insert(&m->blocks, a, s, FR_PENDING | (uint32_t)*cat << 8) ? -1 : 1;
    case TDM_ACTION_FREE_REQUESTED:
        x = omap_find(&m->blocks, a);
        if (!x || !(m->blocks.n[x].aux & FR_PENDING))
            return 0;
        m->blocks.n[x].aux &= ~FR_PENDING;
        *cat = AUX_CAT(m->blocks.n[x].aux);
        return 1;
    case TDM_ACTION_SEGMENT_ALLOC:
        x = omap_find(&m->segs, a);
        if (!x || m->segs.n[x].size != e->size || omap_overlaps(&m->blocks, a, end))
            return 0;
        omap_erase(&m->segs, a);
        return 1;
    case TDM_ACTION_SEGMENT_FREE:
        if (!e->size || omap_overlaps(&m->segs, a, end))
            return 0;
        return omap_insert(&m->segs, a, e->size, 0) ? -1 : 1;
    default:
        return 0;
    }
}

tdm_status tdm__pt_replay(const tdm_snap *snap, const tdm_model *model,
                          const uint8_t *alloc_cats, const tdm_pt_state *state,
                          uint8_t *keep, uint8_t *cat,
                          uint64_t left_out[TDM_ACTION_COUNT_])
{
    replay r = {0};
    size_t nev = snap->event_count;
    memset(left_out, 0, TDM_ACTION_COUNT_ * sizeof *left_out);
    memset(cat, TDM_CATEGORY_UNKNOWN, nev);

    /* Categories of alloc and free_completed events come straight from
     * the model's allocations; free_requested ones from the replay. */
    for (size_t k = 0; k < model->alloc_count; k++) {
        const tdm_model_alloc *a = &model->allocs[k];
        if (a->alloc_seq >= 0 && (size_t)a->alloc_seq < nev)
            cat[a->alloc_seq] = alloc_cats[k];
        if (a->free_seq != TDM_MODEL_SEQ_NEVER && a->free_seq >= 0 && (size_t)a->free_seq < nev)
            cat[a->free_seq] = alloc_cats[k];
    }

    /* Devices with expandable segments replay on the viewer's list. */
    for (size_t i = 0; i < nev; i++) {
        const tdm_event *e = &snap->events[i];
        if (e->action == TDM_ACTION_SEGMENT_MAP || e->action == TDM_ACTION_SEGMENT_UNMAP) {
            dev_maps *m = maps_of(&r, e->device);
            if (!m)
                goto oom;
            m->viewer_list = 1;
        }
    }
    for (size_t i = 0; i < state->segment_count; i++) {
        const tdm_snap_segment *g = &state->segments[i];
        dev_maps *m = maps_of(&r, g->device);
        if (!m)
            goto oom;
        if (m->viewer_list) {
            vseg v = {g->address, g->total_size, g->stream};
            if (vs_insert(m, m->nvs, v) != 0)
                goto oom;
        } else if (omap_insert(&m->segs, g->address, g->total_size, 0) != 0) {
            goto oom;
        }
        for (uint32_t k = 0; k < g->block_count; k++) {
            const tdm_snap_block *b = &state->blocks[g->first_block + k];
            if (b->state == TDM_BLOCK_INACTIVE)
                continue;
            uint32_t aux = b->state == TDM_BLOCK_ACTIVE_PENDING_FREE ? FR_PENDING : 0;
            if (omap_insert(&m->blocks, b->address, b->size, aux | (uint32_t)b->category << 8))
                goto oom;
        }
    }
    for (size_t i = 0; i < r.n; i++) /* the viewer sorts by the signed value */
        if (r.d[i].nvs > 1)
            qsort(r.d[i].vs, r.d[i].nvs, sizeof *r.d[i].vs, vs_cmp);
    /* Blocks live at the end take the category the model gave them. */
    for (size_t k = 0; k < model->alloc_count; k++) {
        const tdm_model_alloc *a = &model->allocs[k];
        if (!(a->flags & TDM_MODEL_LIVE_AT_END))
            continue;
        dev_maps *m = maps_of(&r, model->devices[a->device_index].ordinal);
        if (!m)
            goto oom;
        uint32_t x = omap_find(&m->blocks, a->addr);
        if (x)
            m->blocks.n[x].aux = (m->blocks.n[x].aux & 0xffu) | (uint32_t)alloc_cats[k] << 8;
    }

    for (size_t i = nev; i-- > 0;) {
        const tdm_event *e = &snap->events[i];
        keep[i] = 0;
        switch (e->action) {
        case TDM_ACTION_OOM:
        case TDM_ACTION_SNAPSHOT:
            keep[i] = 1;
            continue;
        case TDM_ACTION_ALLOC:
        case TDM_ACTION_FREE_REQUESTED:
        case TDM_ACTION_FREE_COMPLETED:
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_MAP:
        case TDM_ACTION_SEGMENT_UNMAP:
            break;
        default:
            continue; /* phase, step, tag: not trace entries */
        }
        dev_maps *m = maps_of(&r, e->device);
        if (!m)
            goto oom;
        int u = undo(m, e, &cat[i]);
        if (u < 0)
            goto oom;
        keep[i] = (uint8_t)u;
        if (!u)
            left_out[e->action]++;
    }
    replay_destroy(&r);
    return TDM_OK;
oom:
    replay_destroy(&r);
    return TDM_HOST_OUT_OF_MEMORY;
}
