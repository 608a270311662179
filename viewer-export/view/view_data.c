/* viewer-export/view/view_data.c: turns a snapshot's model into the compact
 * columns the offline viewer embeds (view_data.h describes them;
 * view_json.c writes them out with the model's figures).
 *
 * Why varints and not per-pixel timelines: the page must zoom from the
 * whole run down to single events, so it needs the events anyway; the
 * cheapest faithful form of them is the allocation table (one row per
 * allocation, not per event) plus the event times, delta-encoded.  A
 * training loop costs 5-9 bytes per event (docs/viewer.md).
 *
 * Invariants: allocation rows are sorted by alloc position (ties in the
 * model's order), so a_seq deltas are never negative; segment rows
 * likewise.  Every column holds exactly its count of varints.
 * No state, no locks.
 */
#include "view_data.h"
#include "byte_sums.h"
#include "hash.h"
#include "snap_build.h" /* tdm__grow_array */

#include <stdlib.h>
#include <string.h>

/* ---- byte buffers and varints ------------------------------------------- */

static int buf_reserve(tdm_view_buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static int put_varint(tdm_view_buf *b, uint64_t v)
{
    if (buf_reserve(b, 10) != 0)
        return -1;
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
    return 0;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int put_svarint(tdm_view_buf *b, int64_t v)
{
    return put_varint(b, zigzag(v));
}

int tdm__view_varint_next(const tdm_view_buf *b, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *pos < b->len; shift += 7) {
        uint8_t byte = b->data[(*pos)++];
        x |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* ---- strings of the frame table ------------------------------------------ */

typedef struct strtab {
    const char **list; /* index -> string (borrowed) */
    size_t count, cap;
    uint32_t *slots;   /* hash slots: index + 1, 0 = empty */
    size_t mask;
} strtab;

static uint64_t str_hash(const char *s) { return tdm__fnv1a(s, strlen(s)); }

static int strtab_grow(strtab *t)
{
    size_t cap = t->mask ? (t->mask + 1) * 2 : 256;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < t->count; i++) {
        size_t j = str_hash(t->list[i]) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* The index of `s` (NULL counts as ""), adding it on first sight; -1 on
 * allocation failure. */
static int64_t strtab_id(strtab *t, const char *s)
{
    if (!s)
        s = "";
    if ((t->count + 1) * 2 > t->mask + 1 && strtab_grow(t) != 0)
        return -1;
    size_t j = str_hash(s) & t->mask;
    while (t->slots[j]) {
        if (strcmp(t->list[t->slots[j] - 1], s) == 0)
            return t->slots[j] - 1;
        j = (j + 1) & t->mask;
    }
    if (tdm__grow_array(&t->list, &t->cap, t->count + 1, sizeof *t->list) != 0)
        return -1;
    t->list[t->count] = s;
    t->slots[j] = (uint32_t)++t->count;
    return (int64_t)t->count - 1;
}

/* ---- allocation sizes: most frequent first -------------------------------- */

typedef struct size_count {
    uint64_t size;
    uint64_t count;
    uint32_t rank; /* index into the emitted table */
} size_count;

static int u64_cmp(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

static int by_count_desc(const void *pa, const void *pb)
{
    const size_count *a = *(const size_count *const *)pa;
    const size_count *b = *(const size_count *const *)pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

static int size_key_cmp(const void *key, const void *elem)
{
    uint64_t k = *(const uint64_t *)key, s = ((const size_count *)elem)->size;
    return k < s ? -1 : k > s;
}

/* ---- segment intervals ----------------------------------------------------- */

typedef struct seg_event {
    uint64_t addr;
    uint64_t size;
    int64_t seq;
    int32_t device; /* ordinal */
    uint8_t opens;  /* segment_alloc/map = 1, segment_free/unmap = 0 */
} seg_event;

typedef struct seg_row {
    uint64_t addr;
    uint64_t size;
    int64_t open_seq;  /* -1 when seeded */
    int64_t close_seq; /* TDM_MODEL_SEQ_NEVER when open at the dump */
    int32_t device;    /* ordinal */
    uint8_t pool;
} seg_row;

static int seg_event_cmp(const void *pa, const void *pb)
{
    const seg_event *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int seg_row_cmp(const void *pa, const void *pb)
{
    const seg_row *a = pa, *b = pb;
    if (a->open_seq != b->open_seq)
        return a->open_seq < b->open_seq ? -1 : 1;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

typedef struct seg_vec {
    seg_row *rows;
    size_t count, cap;
} seg_vec;

static seg_row *seg_push(seg_vec *v)
{
    if (tdm__grow_array(&v->rows, &v->cap, v->count + 1, sizeof *v->rows) != 0)
        return NULL;
    seg_row *r = &v->rows[v->count++];
    memset(r, 0, sizeof *r);
    r->close_seq = TDM_MODEL_SEQ_NEVER;
    r->pool = TDM_VIEW_POOL_UNKNOWN;
    return r;
}

/* Pairs segment_alloc/map with segment_free/unmap per (device, address),
 * then matches what is still open against the final segments.  Segments
 * older than the window are seeded at -1, as the model seeds blocks. */
static int segment_rows(const tdm_snap *s, int state_known, seg_vec *out,
                        uint64_t *anomalies)
{
    size_t n = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        uint8_t a = s->events[i].action;
        n += a == TDM_ACTION_SEGMENT_ALLOC || a == TDM_ACTION_SEGMENT_FREE ||
             a == TDM_ACTION_SEGMENT_MAP || a == TDM_ACTION_SEGMENT_UNMAP;
    }
    seg_event *ev = malloc((n ? n : 1) * sizeof *ev);
    if (!ev)
        return -1;
    n = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        uint8_t a = e->action;
        if (a != TDM_ACTION_SEGMENT_ALLOC && a != TDM_ACTION_SEGMENT_FREE &&
            a != TDM_ACTION_SEGMENT_MAP && a != TDM_ACTION_SEGMENT_UNMAP)
            continue;
        ev[n++] = (seg_event){e->addr, e->size, (int64_t)i, e->device,
                              a == TDM_ACTION_SEGMENT_ALLOC || a == TDM_ACTION_SEGMENT_MAP};
    }
    qsort(ev, n, sizeof *ev, seg_event_cmp);

    /* open_at[k]: row index of the segment open at the end of group k's
     * events, or SIZE_MAX; groups are runs of equal (device, addr). */
    size_t groups = 0;
    for (size_t i = 0; i < n; i++)
        groups += i == 0 || ev[i].device != ev[i - 1].device || ev[i].addr != ev[i - 1].addr;
    size_t *open_at = malloc((groups ? groups : 1) * sizeof *open_at);
    seg_event *keys = malloc((groups ? groups : 1) * sizeof *keys);
    if (!open_at || !keys)
        goto oom;
    size_t g = 0;
    for (size_t i = 0; i < n; g++) {
        size_t open = SIZE_MAX;
        keys[g] = ev[i];
        keys[g].seq = 0;
        size_t j = i;
        for (; j < n && ev[j].device == ev[i].device && ev[j].addr == ev[i].addr; j++) {
            seg_row *r;
            if (ev[j].opens) {
                if (open != SIZE_MAX) { /* opened twice: the newer wins */
                    out->rows[open].close_seq = ev[j].seq;
                    ++*anomalies;
                }
                if (!(r = seg_push(out)))
                    goto oom;
                r->addr = ev[j].addr;
                r->size = ev[j].size;
                r->open_seq = ev[j].seq;
                r->device = ev[j].device;
                open = out->count - 1;
            } else if (open != SIZE_MAX) {
                out->rows[open].close_seq = ev[j].seq;
                open = SIZE_MAX;
            } else { /* made before the window */
                if (!(r = seg_push(out)))
                    goto oom;
                r->addr = ev[j].addr;
                r->size = ev[j].size;
                r->open_seq = -1;
                r->close_seq = ev[j].seq;
                r->device = ev[j].device;
            }
        }
        open_at[g] = open;
        i = j;
    }

    for (size_t si = 0; si < s->segment_count; si++) {
        const tdm_snap_segment *fs = &s->segments[si];
        seg_event key = {fs->address, 0, 0, fs->device, 0};
        seg_event *hit = groups ? bsearch(&key, keys, groups, sizeof *keys, seg_event_cmp) : NULL;
        size_t open = hit ? open_at[hit - keys] : SIZE_MAX;
        seg_row *r;
        if (open != SIZE_MAX) {
            r = &out->rows[open];
            open_at[hit - keys] = SIZE_MAX; /* matched */
        } else {
            if (!(r = seg_push(out)))
                goto oom;
            r->addr = fs->address;
            r->size = fs->total_size;
            r->open_seq = -1;
            r->device = fs->device;
        }
        r->pool = (uint8_t)((fs->pool <= TDM_POOL_NONE ? fs->pool : TDM_VIEW_POOL_UNKNOWN) |
                            (fs->is_expandable ? TDM_VIEW_POOL_EXPANDABLE : 0));
    }
    if (state_known)
        for (size_t k = 0; k < groups; k++)
            *anomalies += open_at[k] != SIZE_MAX;
    free(open_at);
    free(keys);
    free(ev);
    if (out->count) /* rows is NULL when there are none */
        qsort(out->rows, out->count, sizeof *out->rows, seg_row_cmp);
    return 0;
oom:
    free(open_at);
    free(keys);
    free(ev);
    return -1;
}

/* ---- building the columns ---------------------------------------------------- */

typedef struct sort_ctx_row {
    int64_t seq;
    size_t index;
} sort_row;

static int sort_row_cmp(const void *pa, const void *pb)
{
    const sort_row *a = pa, *b = pb;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int build_allocs(const tdm_model *m, const uint8_t *cats, tdm_view_columns *c)
{
    size_t n = m->alloc_count;
    sort_row *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
    size_count *uniq = NULL;
    size_count **byfreq = NULL;
    int rc = -1;
    if (!order || !sizes)
        goto out;
    for (size_t i = 0; i < n; i++) {
        order[i] = (sort_row){m->allocs[i].alloc_seq, i};
        sizes[i] = m->allocs[i].size;
    }
    qsort(order, n, sizeof *order, sort_row_cmp);
    qsort(sizes, n, sizeof *sizes, u64_cmp);

    size_t nu = 0;
    uniq = malloc((n ? n : 1) * sizeof *uniq);
    if (!uniq)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (nu && uniq[nu - 1].size == sizes[i])
            uniq[nu - 1].count++;
        else
            uniq[nu++] = (size_count){sizes[i], 1, 0};
    }
    byfreq = malloc((nu ? nu : 1) * sizeof *byfreq);
    c->sizes = malloc((nu ? nu : 1) * sizeof *c->sizes);
    if (!byfreq || !c->sizes)
        goto out;
    for (size_t i = 0; i < nu; i++)
        byfreq[i] = &uniq[i];
    qsort(byfreq, nu, sizeof *byfreq, by_count_desc);
    for (size_t i = 0; i < nu; i++) {
        byfreq[i]->rank = (uint32_t)i;
        c->sizes[i] = byfreq[i]->size;
    }
    c->size_count = nu;

    int64_t prev_seq = -1;
    uint64_t prev_addr = 0;
    for (size_t k = 0; k < n; k++) {
        const tdm_model_alloc *a = &m->allocs[order[k].index];
        const size_count *sc = bsearch(&a->size, uniq, nu, sizeof *uniq, size_key_cmp);
        uint8_t cat = cats ? cats[order[k].index] : a->category;
        uint64_t life = a->free_seq == TDM_MODEL_SEQ_NEVER
                            ? 0 : (uint64_t)(a->free_seq - a->alloc_seq);
        /* Where the free was requested, so that the viewer says "free
         * pending" only from there on. */
        uint64_t pend = a->free_req_seq == TDM_MODEL_SEQ_NEVER
                            ? 0 : (uint64_t)(a->free_req_seq - a->alloc_seq) + 1;
        if (put_varint(&c->a_seq, (uint64_t)(a->alloc_seq - prev_seq)) ||
            put_varint(&c->a_life, life) ||
            put_varint(&c->a_pend, pend) ||
            put_varint(&c->a_size, sc ? sc->rank : 0) ||
            put_varint(&c->a_cat, (uint64_t)(cat & 7u) | ((uint64_t)a->flags << 3)) ||
            put_varint(&c->a_stack, a->stack_id) ||
            put_svarint(&c->a_addr, (int64_t)(a->addr - prev_addr)) ||
            (m->device_count > 1 && put_varint(&c->a_dev, a->device_index)))
            goto out;
        prev_seq = a->alloc_seq;
        prev_addr = a->addr;
    }
    c->alloc_count = n;
    rc = 0;
out:
    free(order);
    free(sizes);
    free(uniq);
    free(byfreq);
    return rc;
}

static int build_segments(const tdm_model *m, tdm_view_columns *c)
{
    seg_vec v = {0};
    if (segment_rows(m->snap, m->state_known, &v, &c->segment_anomalies) != 0) {
        free(v.rows);
        return -1;
    }
    /* Without a cache every allocation is its own segment, so segments
     * that only the events saw need no final state to name their pool. */
    const char *mode = m->snap->header.alloc_mode;
    int own = mode && (strcmp(mode, "passthrough") == 0 || strcmp(mode, "observe") == 0);
    int64_t prev_seq = -1;
    uint64_t prev_addr = 0;
    for (size_t i = 0; i < v.count; i++) {
        seg_row *r = &v.rows[i];
        if (own && (r->pool & 3u) == TDM_VIEW_POOL_UNKNOWN)
            r->pool = (uint8_t)((r->pool & ~3u) | TDM_POOL_NONE);
        int d = tdm__model_device_index(m, r->device);
        uint64_t life = r->close_seq == TDM_MODEL_SEQ_NEVER
                            ? 0 : (uint64_t)(r->close_seq - r->open_seq);
        if (put_varint(&c->s_seq, (uint64_t)(r->open_seq - prev_seq)) ||
            put_varint(&c->s_life, life) || put_varint(&c->s_size, r->size) ||
            put_svarint(&c->s_addr, (int64_t)(r->addr - prev_addr)) ||
            put_varint(&c->s_dev, d < 0 ? 0 : (uint64_t)d) ||
            put_varint(&c->s_pool, r->pool)) {
            free(v.rows);
            return -1;
        }
        prev_seq = r->open_seq;
        prev_addr = r->addr;
    }
    c->segment_count = v.count;
    free(v.rows);
    return 0;
}

static int build_events(const tdm_model *m, tdm_view_columns *c)
{
    const tdm_snap *s = m->snap;
    uint64_t prev_t = m->window_start_ns;
    int64_t prev_mark = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (put_svarint(&c->ev_t, (int64_t)(e->time_ns - prev_t)))
            return -1;
        prev_t = e->time_ns;
        if (e->action != TDM_ACTION_PHASE && e->action != TDM_ACTION_STEP)
            continue;
        int step = e->action == TDM_ACTION_STEP;
        if (put_varint(&c->mk_seq, (uint64_t)((int64_t)i - prev_mark)) ||
            put_varint(&c->mk_kind, (uint64_t)step) ||
            put_varint(&c->mk_val, step ? e->step : e->phase))
            return -1;
        prev_mark = (int64_t)i;
        c->mark_count++;
    }
    c->event_count = s->event_count;

    c->device_count = m->device_count;
    c->rs = calloc(m->device_count ? m->device_count : 1, sizeof *c->rs);
    if (!c->rs)
        return -1;
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_model_device *dev = &m->devices[d];
        int64_t seq = -1, val = 0;
        for (size_t k = 0; k < dev->sample_count; k++) {
            const tdm_model_sample *p = &dev->samples[k];
            if (k > 0 && p->reserved == val)
                continue;
            if (put_varint(&c->rs[d], (uint64_t)(p->seq - seq)) ||
                put_svarint(&c->rs[d], tdm__bytes_sub(p->reserved, val)))
                return -1;
            seq = p->seq;
            val = p->reserved;
        }
    }
    return 0;
}

static int build_stacks(const tdm_snap *s, tdm_view_columns *c)
{
    strtab t = {0};
    int rc = -1;
    if (strtab_id(&t, "") != 0)
        goto out;
    for (size_t i = 0; i < s->stack_count; i++) {
        const tdm_snap_stack *st = &s->stacks[i];
        if (put_varint(&c->st, st->depth))
            goto out;
        for (uint32_t k = 0; k < st->depth; k++)
            if (put_varint(&c->st, st->frames[k]))
                goto out;
    }
    c->stack_count = s->stack_count;
    for (size_t i = 0; i < s->frame_count; i++) {
        const tdm_snap_frame *f = &s->frames[i];
        int64_t fn = strtab_id(&t, f->function), file = strtab_id(&t, f->file);
        int64_t mod = strtab_id(&t, f->module);
        if (fn < 0 || file < 0 || mod < 0 || put_varint(&c->fr, (uint64_t)fn) ||
            put_varint(&c->fr, (uint64_t)file) || put_varint(&c->fr, f->line) ||
            put_varint(&c->fr, (uint64_t)mod) || put_varint(&c->fr, f->pc))
            goto out;
    }
    c->frame_count = s->frame_count;
    /* Kinds only when some frame is not native: most snapshots have none. */
    int mixed = 0;
    for (size_t i = 0; i < s->frame_count && !mixed; i++)
        mixed = s->frames[i].kind != TDM_FRAME_NATIVE;
    for (size_t i = 0; mixed && i < s->frame_count; i++)
        if (put_varint(&c->fk, s->frames[i].kind))
            goto out;
    c->strings = t.list;
    c->string_count = t.count;
    t.list = NULL;
    rc = 0;
out:
    free(t.list);
    free(t.slots);
    return rc;
}

tdm_status tdm__view_columns_build(const tdm_model *model, const uint8_t *cats,
                                   tdm_view_columns *out)
{
    memset(out, 0, sizeof *out);
    if (build_events(model, out) || build_allocs(model, cats, out) ||
        build_segments(model, out) || build_stacks(model->snap, out)) {
        tdm__view_columns_free(out);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    return TDM_OK;
}

void tdm__view_columns_free(tdm_view_columns *c)
{
    tdm_view_buf *bufs[] = {&c->ev_t,   &c->mk_seq,  &c->mk_kind, &c->mk_val,  &c->a_seq,
                            &c->a_life, &c->a_pend, &c->a_size,  &c->a_cat,   &c->a_stack, &c->a_addr,
                            &c->a_dev,  &c->s_seq,   &c->s_life,  &c->s_size,  &c->s_addr,
                            &c->s_dev,  &c->s_pool,  &c->st,      &c->fr,     &c->fk};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]->data);
    for (size_t d = 0; c->rs && d < c->device_count; d++)
        free(c->rs[d].data);
    free(c->rs);
    free(c->sizes);
    free(c->strings);
    memset(c, 0, sizeof *c);
}
