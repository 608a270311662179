/* viewer-export/view_data.c: turns a snapshot's model into the compact
 * columns the offline viewer embeds, and writes them as one JSON object
 * (view_data.h describes the columns).
 *
 * Why varints and not per-pixel timelines: the page must zoom from the
 * whole run down to single events, so it needs the events anyway; the
 * cheapest faithful form of them is the allocation table (one row per
 * allocation, not per event) plus the event times, delta-encoded.  A
 * training loop's rows cost ~10 bytes and its times ~2 bytes per event.
 *
 * Invariants: allocation rows are sorted by alloc position (ties in the
 * model's order), so a_seq deltas are never negative; segment rows
 * likewise.  Every column holds exactly its count of varints.
 * No state, no locks.
 */
#include "view_data.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
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

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

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
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        const char **l = realloc(t->list, cap * sizeof *l);
        if (!l)
            return -1;
        t->list = l;
        t->cap = cap;
    }
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
    if (v->count == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        seg_row *r = realloc(v->rows, cap * sizeof *r);
        if (!r)
            return NULL;
        v->rows = r;
        v->cap = cap;
    }
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
        if (put_varint(&c->a_seq, (uint64_t)(a->alloc_seq - prev_seq)) ||
            put_varint(&c->a_life, life) ||
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
                put_svarint(&c->rs[d], p->reserved - val))
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
                            &c->a_life, &c->a_size,  &c->a_cat,   &c->a_stack, &c->a_addr,
                            &c->a_dev,  &c->s_seq,   &c->s_life,  &c->s_size,  &c->s_addr,
                            &c->s_dev,  &c->s_pool,  &c->st,      &c->fr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]->data);
    for (size_t d = 0; c->rs && d < c->device_count; d++)
        free(c->rs[d].data);
    free(c->rs);
    free(c->sizes);
    free(c->strings);
    memset(c, 0, sizeof *c);
}

/* ---- JSON ------------------------------------------------------------------------ */

typedef struct jw {
    FILE *f;
    uint64_t bytes;
    int err;
} jw;

static void jw_raw(jw *w, const char *s, size_t n)
{
    if (n && fwrite(s, 1, n, w->f) != n)
        w->err = 1;
    w->bytes += n;
}

static void jw_lit(jw *w, const char *s) { jw_raw(w, s, strlen(s)); }

__attribute__((format(printf, 2, 3)))
static void jw_fmt(jw *w, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        w->err = 1;
    else
        jw_raw(w, buf, (size_t)n);
}

/* A JSON string.  '<', '>' and '&' are escaped so that no "</script" or
 * "<!--" can appear; bytes >= 0x80 pass through (the page is UTF-8). */
static void jw_str(jw *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    char buf[256];
    size_t n = 0;
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (n + 8 > sizeof buf) {
            jw_raw(w, buf, n);
            n = 0;
        }
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)ch;
        } else if (ch < 0x20 || ch == '<' || ch == '>' || ch == '&' || ch == 0x7f) {
            memcpy(buf + n, "\\u00", 4);
            buf[n + 4] = hex[ch >> 4];
            buf[n + 5] = hex[ch & 15];
            n += 6;
        } else {
            buf[n++] = (char)ch;
        }
    }
    buf[n++] = '"';
    jw_raw(w, buf, n);
}

static void jw_key(jw *w, const char *key, int first)
{
    if (!first)
        jw_lit(w, ",");
    jw_str(w, key);
    jw_lit(w, ":");
}

static void jw_b64(jw *w, const tdm_view_buf *b)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[4096];
    size_t n = 0;
    jw_lit(w, "\"");
    for (size_t i = 0; i < b->len; i += 3) {
        uint32_t v = (uint32_t)b->data[i] << 16;
        if (i + 1 < b->len)
            v |= (uint32_t)b->data[i + 1] << 8;
        if (i + 2 < b->len)
            v |= b->data[i + 2];
        out[n++] = tab[v >> 18];
        out[n++] = tab[(v >> 12) & 63];
        out[n++] = i + 1 < b->len ? tab[(v >> 6) & 63] : '=';
        out[n++] = i + 2 < b->len ? tab[v & 63] : '=';
        if (n + 4 > sizeof out) {
            jw_raw(w, out, n);
            n = 0;
        }
    }
    jw_raw(w, out, n);
    jw_lit(w, "\"");
}

static const char *mode_name(unsigned v, const char *const *names, size_t n)
{
    return v < n ? names[v] : "?";
}

static void write_header(jw *w, const tdm_view_input *in)
{
    static const char *const rec[] = {"off", "state", "all"};
    static const char *const ctx[] = {"none", "state", "alloc", "all"};
    static const char *const stk[] = {"none", "native", "python"};
    const tdm_snap_header *h = &in->snap->header;
    jw_key(w, "header", 0);
    jw_lit(w, "{");
    jw_key(w, "format_version", 1);
    jw_fmt(w, "%" PRIu32, h->format_version);
    jw_key(w, "tool", 0), jw_str(w, h->tool_version);
    jw_key(w, "host", 0), jw_str(w, h->host);
    jw_key(w, "pid", 0), jw_fmt(w, "%" PRId64, h->pid);
    jw_key(w, "rank", 0), jw_fmt(w, "%" PRId32, h->rank);
    jw_key(w, "world_size", 0), jw_fmt(w, "%" PRId32, h->world_size);
    /* µs since the epoch: past 2^53 in ns, so strings. */
    jw_key(w, "start_us", 0), jw_fmt(w, "\"%" PRIu64 "\"", h->start_time_us);
    jw_key(w, "dump_us", 0), jw_fmt(w, "\"%" PRIu64 "\"", h->dump_time_us);
    jw_key(w, "config", 0), jw_str(w, h->config);
    jw_key(w, "metadata", 0), jw_str(w, h->metadata);
    jw_key(w, "command", 0), jw_str(w, h->command);
    jw_key(w, "record", 0), jw_str(w, mode_name(h->record_mode, rec, 3));
    jw_key(w, "context", 0), jw_str(w, mode_name(h->context_mode, ctx, 4));
    jw_key(w, "stacks", 0), jw_str(w, mode_name(h->stacks_mode, stk, 3));
    jw_key(w, "max_entries", 0), jw_fmt(w, "%" PRIu64, h->max_entries);
    jw_key(w, "alloc_mode", 0), jw_str(w, h->alloc_mode);
    jw_lit(w, "}");
}

static void write_stat(jw *w, const char *key, const tdm_stat *s)
{
    jw_key(w, key, 0);
    jw_fmt(w, "[%" PRId64 ",%" PRId64 "]", s->current, s->peak);
}

static void write_devices(jw *w, const tdm_model *m, const tdm_view_columns *c)
{
    jw_key(w, "devices", 0);
    jw_lit(w, "[");
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_model_device *v = &m->devices[d];
        jw_lit(w, d ? ",{" : "{");
        jw_key(w, "ordinal", 1), jw_fmt(w, "%" PRId32, v->ordinal);
        jw_key(w, "vendor", 0), jw_str(w, v->vendor);
        jw_key(w, "name", 0), jw_str(w, v->name);
        jw_key(w, "capacity", 0), jw_fmt(w, "%" PRIu64, v->capacity);
        jw_key(w, "peak", 0), jw_fmt(w, "%" PRId64, v->peak_allocated);
        jw_key(w, "peak_seq", 0), jw_fmt(w, "%" PRId64, v->peak_seq);
        jw_key(w, "peak_step", 0), jw_fmt(w, "%" PRIu32, v->peak_step);
        jw_key(w, "peak_phase", 0), jw_fmt(w, "%" PRIu32, v->peak_phase);
        jw_key(w, "reserved_known", 0), jw_fmt(w, "%d", v->reserved_known);
        jw_key(w, "reserved_at_peak", 0), jw_fmt(w, "%" PRId64, v->reserved_at_peak);
        jw_key(w, "peak_reserved", 0), jw_fmt(w, "%" PRId64, v->peak_reserved);
        jw_key(w, "end_from_state", 0),
            jw_fmt(w, "%d", v->end_source == TDM_MODEL_END_FROM_STATE);
        jw_key(w, "end_allocated", 0), jw_fmt(w, "%" PRId64, v->end_allocated);
        jw_key(w, "end_blocks", 0), jw_fmt(w, "%" PRIu64, v->end_blocks);
        jw_key(w, "end_reserved", 0), jw_fmt(w, "%" PRId64, v->end_reserved);
        jw_key(w, "alloc_events", 0), jw_fmt(w, "%" PRIu64, v->alloc_events);
        jw_key(w, "free_events", 0), jw_fmt(w, "%" PRIu64, v->free_events);
        jw_key(w, "oom_events", 0), jw_fmt(w, "%" PRIu64, v->oom_events);
        jw_key(w, "seeded", 0),
            jw_fmt(w, "%" PRIu64, v->seeded_from_free + v->seeded_from_state);
        jw_key(w, "anomalies", 0), jw_fmt(w, "%" PRIu64, v->anomalies);
        jw_key(w, "stats", 0);
        if (v->stats) {
            jw_lit(w, "{");
            jw_key(w, "allocations", 1);
            jw_fmt(w, "%" PRId64, v->stats->allocation.allocated);
            write_stat(w, "allocated_bytes", &v->stats->allocated_bytes);
            write_stat(w, "reserved_bytes", &v->stats->reserved_bytes);
            write_stat(w, "active_bytes", &v->stats->active_bytes);
            write_stat(w, "requested_bytes", &v->stats->requested_bytes);
            write_stat(w, "allocation", &v->stats->allocation);
            write_stat(w, "segment", &v->stats->segment);
            jw_key(w, "num_ooms", 0), jw_fmt(w, "%" PRIu64, v->stats->num_ooms);
            jw_key(w, "num_alloc_retries", 0),
                jw_fmt(w, "%" PRIu64, v->stats->num_alloc_retries);
            jw_lit(w, "}");
        } else {
            jw_lit(w, "null");
        }
        jw_key(w, "rs", 0), jw_b64(w, &c->rs[d]);
        jw_lit(w, "}");
    }
    jw_lit(w, "]");
}

tdm_status tdm__view_data_write(FILE *out, const tdm_view_input *in, uint64_t *bytes)
{
    const tdm_snap *s = in->snap;
    const tdm_model *m = in->model;
    tdm_view_columns c;
    jw w = {.f = out};
    *bytes = 0;
    if (tdm__view_columns_build(m, in->cats, &c) != TDM_OK)
        return TDM_HOST_OUT_OF_MEMORY;

    const char *base = strrchr(in->path, '/');
    jw_lit(&w, "{");
    jw_key(&w, "data_format", 1), jw_lit(&w, "1");
    jw_key(&w, "file", 0), jw_str(&w, base ? base + 1 : in->path);
    jw_key(&w, "path", 0), jw_str(&w, in->path);
    jw_key(&w, "complete", 0), jw_fmt(&w, "%d", s->complete);
    jw_key(&w, "truncated_at", 0),
        jw_fmt(&w, "%" PRIu64, in->truncated ? in->truncated_at : 0);
    write_header(&w, in);
    jw_key(&w, "events", 0), jw_fmt(&w, "%zu", s->event_count);
    jw_key(&w, "dropped", 0), jw_fmt(&w, "%" PRIu64, s->dropped_events);
    jw_key(&w, "state_known", 0), jw_fmt(&w, "%d", m->state_known);
    jw_key(&w, "t0_ns", 0), jw_fmt(&w, "\"%" PRIu64 "\"", m->window_start_ns);
    /* Offsets are shown from the recording start, as the summary does. */
    uint64_t origin = s->header.start_time_us ? s->header.start_time_us * 1000u
                                              : m->window_start_ns;
    jw_key(&w, "origin_ns", 0),
        jw_fmt(&w, "%" PRId64, s->event_count ? (int64_t)(m->window_start_ns - origin) : 0);
    jw_key(&w, "phase0", 0), jw_fmt(&w, "%" PRIu32, s->event_count ? s->events[0].phase : 0);
    jw_key(&w, "step0", 0), jw_fmt(&w, "%" PRIu32, s->event_count ? s->events[0].step : 0);
    jw_key(&w, "phases", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < s->phase_count; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, s->phase_names[i]);
    }
    jw_lit(&w, "]");
    jw_key(&w, "categories", 0);
    jw_lit(&w, "[");
    for (int i = 0; i < TDM_CATEGORY_COUNT_; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, tdm_category_name((tdm_category)i));
    }
    jw_lit(&w, "]");
    write_devices(&w, m, &c);
    jw_key(&w, "oom", 0);
    jw_lit(&w, "[");
    int first = 1;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (e->action != TDM_ACTION_OOM)
            continue;
        int d = tdm__model_device_index(m, e->device);
        jw_fmt(&w, "%s[%zu,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", i,
               d, e->size, e->requested, e->addr);
        first = 0;
    }
    jw_lit(&w, "]");
    jw_key(&w, "sizes", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < c.size_count; i++)
        jw_fmt(&w, "%s%" PRIu64, i ? "," : "", c.sizes[i]);
    jw_lit(&w, "]");
    jw_key(&w, "strings", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < c.string_count; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, c.strings[i]);
    }
    jw_lit(&w, "]");
    jw_key(&w, "counts", 0);
    jw_fmt(&w, "{\"marks\":%zu,\"allocs\":%zu,\"segments\":%zu,", c.mark_count,
           c.alloc_count, c.segment_count);
    jw_fmt(&w, "\"stacks\":%zu,\"frames\":%zu,\"segment_anomalies\":%" PRIu64 "}",
           c.stack_count, c.frame_count, c.segment_anomalies);
    static const struct {
        const char *key;
        size_t off;
    } cols[] = {
#define COL(name) {#name, offsetof(tdm_view_columns, name)}
        COL(ev_t),   COL(mk_seq),  COL(mk_kind), COL(mk_val),  COL(a_seq),
        COL(a_life), COL(a_size),  COL(a_cat),   COL(a_stack), COL(a_addr),
        COL(a_dev),  COL(s_seq),   COL(s_life),  COL(s_size),  COL(s_addr),
        COL(s_dev),  COL(s_pool),  COL(st),      COL(fr),
#undef COL
    };
    jw_key(&w, "col", 0);
    jw_lit(&w, "{");
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        jw_key(&w, cols[i].key, i == 0);
        jw_b64(&w, (const tdm_view_buf *)((const char *)&c + cols[i].off));
    }
    jw_lit(&w, "}}");
    tdm__view_columns_free(&c);
    *bytes = w.bytes;
    return w.err ? TDM_IO_ERROR : TDM_OK;
}
