/* tests/unit/test_view_data.c: the data `tidemark view` embeds
 * (viewer-export/view/view_data.h), decoded back and held against the model it
 * came from: event times, phase/step marks, every allocation row, segment
 * intervals (paired, seeded from a free, seeded from the final state,
 * matched to it), reserved timelines, stacks and frames; the JSON's
 * escaping (no '<' can close the page's <script>); the page assembly
 * (markers replaced, nothing but our two scripts); frame kinds (only
 * when some frame is not native); varint edge cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "categories.h"
#include "model.h"
#include "snap_model.h"
#include "view_data.h"

#define MAXN 128

typedef struct tsnap {
    tdm_snap s;
    tdm_event ev[MAXN];
    tdm_snap_segment seg[8];
    tdm_snap_block blk[8];
    tdm_snap_device dev[2];
    tdm_snap_frame frames[4];
    tdm_snap_stack stacks[3];
    uint32_t sf[3][3];
    const char *phases[3];
    uint64_t now;
    uint32_t step, phase;
} tsnap;

static tsnap *tsnap_new(const char *metadata)
{
    tsnap *t = calloc(1, sizeof *t);
    assert_non_null(t);
    tdm_snap_header *h = &t->s.header;
    h->format_version = TDM_FORMAT_VERSION;
    h->tool_version = "0.1.0";
    h->host = "host";
    h->rank = -1;
    h->local_rank = -1;
    h->start_time_us = 1700000000000000ull;
    h->command = "./unit \"quoted\"";
    h->config = "";
    h->metadata = metadata;
    h->record_mode = TDM_RECORD_ALL;
    h->context_mode = TDM_CONTEXT_ALLOC;
    h->stacks_mode = TDM_STACKS_NATIVE;
    h->max_entries = 1000;
    h->alloc_mode = "cache";
    t->s.complete = 1;
    t->now = 1700000000000000000ull + 5000;
    t->phases[0] = "";
    t->phases[1] = "forward";
    t->phases[2] = "backward";
    t->s.phase_names = t->phases;
    t->s.phase_count = 3;
    t->frames[0] = (tdm_snap_frame){0x10, "tdm_malloc", "alloc.c", 1, "libtidemark.so",
                                    TDM_FRAME_NATIVE};
    t->frames[1] = (tdm_snap_frame){0x20, "layer", "/src/net.c", 7, "net", TDM_FRAME_NATIVE};
    t->frames[2] = (tdm_snap_frame){0x30, "main", "/src/net.c", 90, "net", TDM_FRAME_NATIVE};
    t->frames[3] = (tdm_snap_frame){0xffff123456789abcull, "??", "", 0, "weird<mod>",
                                    TDM_FRAME_NATIVE};
    t->s.frames = t->frames;
    t->s.frame_count = 4;
    t->sf[1][0] = 0, t->sf[1][1] = 1, t->sf[1][2] = 2;
    t->sf[2][0] = 3, t->sf[2][1] = 2;
    t->stacks[1] = (tdm_snap_stack){3, t->sf[1]};
    t->stacks[2] = (tdm_snap_stack){2, t->sf[2]};
    t->s.stacks = t->stacks;
    t->s.stack_count = 3;
    t->s.events = t->ev;
    t->s.segments = t->seg;
    t->s.blocks = t->blk;
    t->s.devices = t->dev;
    t->dev[0] = (tdm_snap_device){0, "sim", "sim0", 1ull << 30};
    t->dev[1] = (tdm_snap_device){1, "sim", "sim1", 1ull << 30};
    t->s.device_count = 2;
    return t;
}

static size_t ev(tsnap *t, tdm_action a, int dev, uint64_t addr, uint64_t size, uint32_t stack)
{
    assert_true(t->s.event_count < MAXN);
    size_t i = t->s.event_count++;
    t->now += 1000 + 37 * i; /* uneven gaps */
    t->ev[i] = (tdm_event){.time_ns = t->now, .addr = addr, .size = size, .requested = size,
                           .stack_id = stack, .phase = t->phase, .step = t->step,
                           .device = (int16_t)dev, .action = (uint8_t)a};
    return i;
}

static void mark(tsnap *t, tdm_action a, uint32_t v)
{
    if (a == TDM_ACTION_PHASE)
        t->phase = v;
    else
        t->step = v;
    ev(t, a, 0, 0, 0, 0);
}

/* A history with every case the columns must carry. */
static tsnap *rich_snapshot(void)
{
    tsnap *t = tsnap_new("<script>alert(1)</script> & more");
    const uint64_t S0 = 0x7f0000000000ull, S1 = 0x7f0000400000ull, SOLD = 0x7e0000000000ull;
    mark(t, TDM_ACTION_STEP, 1);
    mark(t, TDM_ACTION_PHASE, 1);
    ev(t, TDM_ACTION_SEGMENT_ALLOC, 0, S0, 4 << 20, 1);     /* kept to the end */
    ev(t, TDM_ACTION_ALLOC, 0, S0, 1000, 1);
    ev(t, TDM_ACTION_ALLOC, 0, S0 + 4096, 1000, 2);
    ev(t, TDM_ACTION_ALLOC, 0, S0 + 8192, 3000, 1);
    ev(t, TDM_ACTION_SEGMENT_ALLOC, 1, S1, 2 << 20, 1);     /* freed in the window */
    ev(t, TDM_ACTION_ALLOC, 1, S1, 512, 1);
    mark(t, TDM_ACTION_PHASE, 2);
    ev(t, TDM_ACTION_FREE_REQUESTED, 0, S0 + 4096, 1000, 2);
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, S0 + 4096, 1000, 2);
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, 0x1234000, 777, 0);  /* alloc before the window */
    ev(t, TDM_ACTION_SEGMENT_FREE, 0, SOLD, 2 << 20, 0);     /* segment before the window */
    ev(t, TDM_ACTION_ALLOC, 0, S0, 2000, 1);                 /* S0 again: replaces */
    ev(t, TDM_ACTION_FREE_COMPLETED, 1, S1, 512, 1);
    ev(t, TDM_ACTION_SEGMENT_FREE, 1, S1, 2 << 20, 1);
    ev(t, TDM_ACTION_OOM, 0, 0, 1 << 30, 1);
    mark(t, TDM_ACTION_STEP, 2);
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, S0 + 8192, 3000, 1);
    /* Final state: S0 (4 MiB, large) with the 2000 B block; a small-pool
     * segment the events never saw, with a block from before the window. */
    t->seg[0] = (tdm_snap_segment){0, TDM_POOL_LARGE, 0, S0, 4 << 20, 0, 1, 0, 2};
    t->blk[0] = (tdm_snap_block){S0, 2048, 2000, 0, 1, TDM_BLOCK_ACTIVE_ALLOCATED, 0};
    t->blk[1] = (tdm_snap_block){S0 + 2048, (4 << 20) - 2048, 0, 0, 0, TDM_BLOCK_INACTIVE, 0};
    t->seg[1] = (tdm_snap_segment){0, TDM_POOL_SMALL, 1, 0x7d0000000000ull, 2 << 20, 0, 2, 2, 1};
    t->blk[2] = (tdm_snap_block){0x7d0000000000ull, 2 << 20, 1 << 20, 1, 2,
                                 TDM_BLOCK_ACTIVE_ALLOCATED, TDM_CATEGORY_PARAMETER};
    t->s.segment_count = 2;
    t->s.block_count = 3;
    return t;
}

typedef struct row {
    int64_t alloc_seq, free_seq, req_seq;
    uint64_t size, addr;
    uint32_t stack, dev;
    uint8_t cat, flags;
} row;

static int row_cmp(const void *pa, const void *pb)
{
    const row *a = pa, *b = pb;
    if (a->alloc_seq != b->alloc_seq)
        return a->alloc_seq < b->alloc_seq ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->dev < b->dev ? -1 : a->dev > b->dev;
}

static uint64_t next(const tdm_view_buf *b, size_t *pos)
{
    uint64_t v = 0;
    assert_true(tdm__view_varint_next(b, pos, &v));
    return v;
}

static void test_columns_match_the_model(void **state)
{
    (void)state;
    tsnap *t = rich_snapshot();
    tdm_model *m;
    uint8_t *cats;
    tdm_view_columns c;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    assert_int_equal(tdm__view_columns_build(m, cats, &c), TDM_OK);

    /* event times, relative to the window start */
    assert_int_equal(c.event_count, t->s.event_count);
    size_t pos = 0;
    uint64_t time = m->window_start_ns;
    for (size_t i = 0; i < t->s.event_count; i++) {
        time += (uint64_t)tdm__view_unzigzag(next(&c.ev_t, &pos));
        assert_int_equal(time, t->ev[i].time_ns);
    }
    assert_int_equal(pos, c.ev_t.len);

    /* marks: 2 steps, 2 phases, in order */
    assert_int_equal(c.mark_count, 4);
    size_t p1 = 0, p2 = 0, p3 = 0;
    int64_t seq = 0;
    size_t seen = 0;
    for (size_t i = 0; i < t->s.event_count; i++) {
        uint8_t a = t->ev[i].action;
        if (a != TDM_ACTION_PHASE && a != TDM_ACTION_STEP)
            continue;
        seq += (int64_t)next(&c.mk_seq, &p1);
        assert_int_equal(seq, (int64_t)i);
        assert_int_equal(next(&c.mk_kind, &p2), a == TDM_ACTION_STEP);
        assert_int_equal(next(&c.mk_val, &p3), a == TDM_ACTION_STEP ? t->ev[i].step : t->ev[i].phase);
        seen++;
    }
    assert_int_equal(seen, 4);

    /* allocation rows: the model's allocations, each exactly once */
    assert_int_equal(c.alloc_count, m->alloc_count);
    row *got = calloc(m->alloc_count, sizeof *got), *want = calloc(m->alloc_count, sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    size_t ps[8] = {0};
    int64_t prev = -1;
    uint64_t addr = 0;
    for (size_t k = 0; k < c.alloc_count; k++) {
        row *r = &got[k];
        r->alloc_seq = prev + (int64_t)next(&c.a_seq, &ps[0]);
        assert_true(r->alloc_seq >= prev);
        prev = r->alloc_seq;
        uint64_t life = next(&c.a_life, &ps[1]);
        r->free_seq = life ? r->alloc_seq + (int64_t)life : TDM_MODEL_SEQ_NEVER;
        uint64_t si = next(&c.a_size, &ps[2]);
        assert_true(si < c.size_count);
        r->size = c.sizes[si];
        uint64_t cf = next(&c.a_cat, &ps[3]);
        r->cat = (uint8_t)(cf & 7);
        r->flags = (uint8_t)(cf >> 3);
        r->stack = (uint32_t)next(&c.a_stack, &ps[4]);
        addr += (uint64_t)tdm__view_unzigzag(next(&c.a_addr, &ps[5]));
        r->addr = addr;
        r->dev = (uint32_t)next(&c.a_dev, &ps[6]); /* two devices: present */
        uint64_t pend = next(&c.a_pend, &ps[7]);
        r->req_seq = pend ? r->alloc_seq + (int64_t)pend - 1 : TDM_MODEL_SEQ_NEVER;
    }
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        want[i] = (row){a->alloc_seq, a->free_seq, a->free_req_seq, a->size, a->addr,
                        a->stack_id, a->device_index, cats[i], a->flags};
    }
    qsort(got, m->alloc_count, sizeof *got, row_cmp);
    qsort(want, m->alloc_count, sizeof *want, row_cmp);
    for (size_t i = 0; i < m->alloc_count; i++) {
        assert_int_equal(got[i].alloc_seq, want[i].alloc_seq);
        assert_int_equal(got[i].free_seq, want[i].free_seq);
        assert_int_equal(got[i].req_seq, want[i].req_seq);
        assert_int_equal(got[i].size, want[i].size);
        assert_int_equal(got[i].addr, want[i].addr);
        assert_int_equal(got[i].stack, want[i].stack);
        assert_int_equal(got[i].dev, want[i].dev);
        assert_int_equal(got[i].cat, want[i].cat);
        assert_int_equal(got[i].flags, want[i].flags);
    }
    /* sizes: 1000 B is the most frequent (two allocations) */
    assert_int_equal(c.sizes[0], 1000);
    free(got);
    free(want);

    /* segments: S0 to the end (large); S1 paired 6..15 on device 1; SOLD
     * seeded -1..12; the small-pool segment seeded from the final state. */
    assert_int_equal(c.segment_count, 4);
    struct { int64_t open, close; uint64_t size, addr, dev, pool; } sg[4];
    size_t q[6] = {0};
    prev = -1;
    addr = 0;
    for (size_t k = 0; k < 4; k++) {
        sg[k].open = prev + (int64_t)next(&c.s_seq, &q[0]);
        prev = sg[k].open;
        uint64_t life = next(&c.s_life, &q[1]);
        sg[k].close = life ? sg[k].open + (int64_t)life : TDM_MODEL_SEQ_NEVER;
        sg[k].size = next(&c.s_size, &q[2]);
        addr += (uint64_t)tdm__view_unzigzag(next(&c.s_addr, &q[3]));
        sg[k].addr = addr;
        sg[k].dev = next(&c.s_dev, &q[4]);
        sg[k].pool = next(&c.s_pool, &q[5]);
    }
    /* sorted by open position, then device, then address */
    assert_int_equal(sg[0].open, -1);
    assert_int_equal(sg[0].addr, 0x7d0000000000ull);
    assert_int_equal(sg[0].close, TDM_MODEL_SEQ_NEVER);
    assert_int_equal(sg[0].pool, TDM_POOL_SMALL | TDM_VIEW_POOL_EXPANDABLE);
    assert_int_equal(sg[1].open, -1);
    assert_int_equal(sg[1].addr, 0x7e0000000000ull);
    assert_int_equal(sg[1].close, 12);
    assert_int_equal(sg[1].pool, TDM_VIEW_POOL_UNKNOWN);
    assert_int_equal(sg[2].open, 2);
    assert_int_equal(sg[2].close, TDM_MODEL_SEQ_NEVER);
    assert_int_equal(sg[2].pool, TDM_POOL_LARGE);
    assert_int_equal(sg[2].size, 4 << 20);
    assert_int_equal(sg[3].open, 6);
    assert_int_equal(sg[3].close, 15);
    assert_int_equal(sg[3].dev, 1);
    assert_int_equal(c.segment_anomalies, 0);

    /* reserved timelines: every change of the model's samples, in order */
    assert_int_equal(c.device_count, m->device_count);
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_model_device *dv = &m->devices[d];
        size_t rp = 0;
        int64_t s = -1, v = 0, last = INT64_MIN;
        for (size_t k = 0; k < dv->sample_count; k++) {
            if (dv->samples[k].reserved == last)
                continue;
            last = dv->samples[k].reserved;
            s += (int64_t)next(&c.rs[d], &rp);
            v += tdm__view_unzigzag(next(&c.rs[d], &rp));
            assert_int_equal(s, dv->samples[k].seq);
            assert_int_equal(v, dv->samples[k].reserved);
        }
        assert_int_equal(rp, c.rs[d].len);
    }

    /* stacks and frames */
    assert_int_equal(c.stack_count, 3);
    size_t sp = 0;
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(next(&c.st, &sp), t->stacks[k].depth);
        for (uint32_t f = 0; f < t->stacks[k].depth; f++)
            assert_int_equal(next(&c.st, &sp), t->stacks[k].frames[f]);
    }
    size_t fp = 0;
    for (size_t f = 0; f < 4; f++) {
        assert_string_equal(c.strings[next(&c.fr, &fp)], t->frames[f].function);
        assert_string_equal(c.strings[next(&c.fr, &fp)], t->frames[f].file);
        assert_int_equal(next(&c.fr, &fp), t->frames[f].line);
        assert_string_equal(c.strings[next(&c.fr, &fp)], t->frames[f].module);
        assert_int_equal(next(&c.fr, &fp), t->frames[f].pc);
    }
    /* "/src/net.c" is stored once */
    size_t net = 0;
    for (size_t i = 0; i < c.string_count; i++)
        net += strcmp(c.strings[i], "/src/net.c") == 0;
    assert_int_equal(net, 1);

    tdm__view_columns_free(&c);
    free(cats);
    tdm__model_free(m);
    free(t);
}

/* Writes to a memory stream; returns the text (free it). */
static char *page_text(const tdm_view_input *in, size_t n, int data_only, uint64_t *bytes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    tdm_status s = data_only ? tdm__view_data_write(f, in, bytes)
                             : tdm__view_page_write(f, in, n, -1, bytes);
    assert_int_equal(s, TDM_OK);
    assert_int_equal(fclose(f), 0);
    if (data_only)
        assert_int_equal(*bytes, len);
    return buf;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void test_json_is_escaped(void **state)
{
    (void)state;
    tsnap *t = rich_snapshot();
    tdm_model *m;
    uint8_t *cats;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    tdm_view_input in = {.path = "/runs/a</script>\"b\".tdm", .snap = &t->s, .model = m,
                         .cats = cats};
    uint64_t bytes;
    char *json = page_text(&in, 1, 1, &bytes);
    assert_null(strchr(json, '<')); /* so no "</script" nor "<!--" */
    assert_non_null(strstr(json, "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e \\u0026 more"));
    assert_non_null(strstr(json, "\"path\":\"/runs/a\\u003c/script\\u003e\\\"b\\\".tdm\""));
    assert_non_null(strstr(json, "\"file\":\"script\\u003e\\\"b\\\".tdm\""));
    assert_non_null(strstr(json, "\"command\":\"./unit \\\"quoted\\\"\""));
    char want[64];
    snprintf(want, sizeof want, "\"peak\":%lld,\"peak_seq\":%lld,",
             (long long)m->devices[0].peak_allocated, (long long)m->devices[0].peak_seq);
    assert_non_null(strstr(json, want));
    assert_non_null(strstr(json, "\"oom\":[[16,0,"));
    assert_non_null(strstr(json, "\"counts\":{\"marks\":4,\"allocs\":"));
    assert_true(json[0] == '{' && json[strlen(json) - 1] == '}');
    free(json);
    free(cats);
    tdm__model_free(m);
    free(t);
}

static void test_page_has_code_and_data(void **state)
{
    (void)state;
    tsnap *t = rich_snapshot();
    tdm_model *m;
    uint8_t *cats;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    tdm_view_input in[2] = {{.path = "a.tdm", .snap = &t->s, .model = m, .cats = cats},
                            {.path = "b.tdm", .snap = &t->s, .model = m, .cats = cats,
                             .truncated = 1, .truncated_at = 99}};
    uint64_t data;
    char *page = page_text(in, 2, 0, &data);
    assert_true(data > 1000);
    assert_null(strstr(page, "@TDM_"));
    assert_int_equal(count(page, "</script"), 2); /* the data's and the code's */
    assert_int_equal(count(page, "<script"), 2);
    assert_int_equal(count(page, "\"data_format\":1"), 2);
    assert_non_null(strstr(page, "\"truncated_at\":99"));
    assert_non_null(strstr(page, "default-src 'none'"));
    assert_non_null(strstr(page, "function tdmMain"));
    assert_non_null(strstr(page, "class DeviceSeries"));
    assert_non_null(strstr(page, ".panel {"));
    assert_null(strstr(page, "http://"));
    assert_null(strstr(page, "https://"));
    free(page);
    free(cats);
    tdm__model_free(m);
    free(t);
}

static void test_empty_snapshot(void **state)
{
    (void)state;
    tsnap *t = tsnap_new("");
    t->s.complete = 0;
    tdm_model *m;
    uint8_t *cats;
    tdm_view_columns c;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    assert_int_equal(tdm__view_columns_build(m, cats, &c), TDM_OK);
    assert_int_equal(c.event_count, 0);
    assert_int_equal(c.alloc_count, 0);
    assert_int_equal(c.segment_count, 0);
    assert_int_equal(c.ev_t.len, 0);
    tdm__view_columns_free(&c);
    tdm_view_input in = {.path = "e.tdm", .snap = &t->s, .model = m, .cats = cats};
    uint64_t bytes;
    char *json = page_text(&in, 1, 1, &bytes);
    assert_non_null(strstr(json, "\"events\":0,"));
    assert_non_null(strstr(json, "\"ev_t\":\"\""));
    free(json);
    free(cats);
    tdm__model_free(m);
    free(t);
}

/* Frame kinds travel in "fk", one varint per frame, only when some frame
 * is not native; a native-only snapshot's column is empty. */
static void test_frame_kinds(void **state)
{
    (void)state;
    tsnap *t = rich_snapshot();
    tdm_model *m;
    uint8_t *cats;
    tdm_view_columns c;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    assert_int_equal(tdm__view_columns_build(m, cats, &c), TDM_OK);
    assert_int_equal(c.fk.len, 0);
    tdm__view_columns_free(&c);
    tdm_view_input in = {.path = "k.tdm", .snap = &t->s, .model = m, .cats = cats};
    uint64_t bytes;
    char *json = page_text(&in, 1, 1, &bytes);
    assert_non_null(strstr(json, "\"fk\":\"\""));
    free(json);

    /* layer inlined into main; a Python frame at the bottom */
    t->frames[1].kind = TDM_FRAME_INLINED;
    t->frames[3] = (tdm_snap_frame){0x40, "Model.forward", "/src/train.py", 19, "<python>",
                                    TDM_FRAME_PYTHON};
    assert_int_equal(tdm__view_columns_build(m, cats, &c), TDM_OK);
    static const uint8_t want[4] = {TDM_FRAME_NATIVE, TDM_FRAME_INLINED, TDM_FRAME_NATIVE,
                                    TDM_FRAME_PYTHON};
    size_t kp = 0;
    for (size_t f = 0; f < 4; f++)
        assert_int_equal(next(&c.fk, &kp), want[f]);
    assert_int_equal(kp, c.fk.len); /* exactly one per frame */
    assert_int_equal(c.frame_count, 4);
    tdm__view_columns_free(&c);
    json = page_text(&in, 1, 1, &bytes);
    assert_non_null(strstr(json, "\"fk\":\"AAEAAg==\"")); /* bytes 0 1 0 2 */
    assert_non_null(strstr(json, "\"/src/train.py\""));
    free(json);
    free(cats);
    tdm__model_free(m);
    free(t);
}

static void test_varints(void **state)
{
    (void)state;
    uint8_t max[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x80};
    tdm_view_buf b = {max, sizeof max, sizeof max};
    size_t pos = 0;
    uint64_t v;
    assert_true(tdm__view_varint_next(&b, &pos, &v));
    assert_true(v == UINT64_MAX);
    assert_int_equal(pos, 10);
    assert_false(tdm__view_varint_next(&b, &pos, &v)); /* 0x80: cut short */
    assert_false(tdm__view_varint_next(&b, &pos, &v)); /* at the end */
    assert_int_equal(tdm__view_unzigzag(0), 0);
    assert_int_equal(tdm__view_unzigzag(1), -1);
    assert_int_equal(tdm__view_unzigzag(2), 1);
    assert_true(tdm__view_unzigzag(UINT64_MAX) == INT64_MIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_match_the_model),
        cmocka_unit_test(test_json_is_escaped),
        cmocka_unit_test(test_page_has_code_and_data),
        cmocka_unit_test(test_empty_snapshot),
        cmocka_unit_test(test_frame_kinds),
        cmocka_unit_test(test_varints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
