/* tests/unit/test_pytorch_export.c: the `pytorch` exporter and importer
 * (export_pytorch*.c, import_pytorch*.c): the golden pickle of a small
 * hand-built snapshot, its structure read back, the replay rule that
 * leaves out events the final state contradicts (and nothing else: every
 * suffix of a consistent history, i.e. any number of events dropped by the
 * ring, replays whole), expandable segments replayed on the viewer's own
 * segment list, a snapshot cut before its state, an empty one,
 * --device, host memory, and round trips .tdm → pickle → .tdm of the small
 * snapshot and of one recorded live through the API.
 *
 * TDM_UPDATE_GOLDEN=1 rewrites tests/data/golden/pytorch-small.{pickle,tdm}
 * (then look at the diff before committing it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pickle_read.h"
#include "import_formats.h"
#include "recorder.h"
#include "pytorch_fixtures.h"

#define GOLDEN_PICKLE TDM_TEST_DATA_DIR "/golden/pytorch-small.pickle"
#define GOLDEN_TDM TDM_TEST_DATA_DIR "/golden/pytorch-small.tdm"

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(b);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* ---- golden file and structure ----------------------------------------------- */

static void test_golden_small(void **state)
{
    (void)state;
    ts *t = ts_small();
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(&t->s, -1, &len, &rep);
    if (getenv("TDM_UPDATE_GOLDEN") && *getenv("TDM_UPDATE_GOLDEN")) {
        FILE *f = fopen(GOLDEN_PICKLE, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, len, f), len);
        fclose(f);
        assert_int_equal(tdm__snap_write(&t->s, GOLDEN_TDM), TDM_OK);
    }
    size_t glen = 0;
    unsigned char *g = read_all(GOLDEN_PICKLE, &glen);
    assert_non_null(g);
    if (glen != len || memcmp(g, b, len) != 0) {
        size_t i = 0;
        while (i < len && i < glen && g[i] == b[i])
            i++;
        print_error("pickle differs from %s at byte %zu (%zu vs %zu bytes); rerun with "
                    "TDM_UPDATE_GOLDEN=1 if the change is intended\n", GOLDEN_PICKLE, i, len,
                    glen);
        fail();
    }
    /* The committed .tdm is this snapshot: the CLI test exports it. */
    tdm_snap *s = NULL;
    assert_int_equal(tdm__snap_read_file(GOLDEN_TDM, 0, &s, NULL), TDM_OK);
    size_t len2;
    unsigned char *b2 = ts_export(s, -1, &len2, NULL);
    assert_int_equal(len2, len);
    assert_memory_equal(b2, b, len);
    tdm__snap_free(s);
    free(b2);
    free(g);
    free(b);
    free(t);
}

static const tdm_pkv *item(const tdm_pkv *seq, uint32_t i)
{
    assert_true(tdm__pk_is_seq(seq));
    assert_true(i < seq->n);
    return seq->v.items[i];
}

static int64_t int_of(const tdm_pkv *dict, const char *key)
{
    const tdm_pkv *v = tdm__pk_get(dict, key);
    assert_non_null(v);
    assert_int_equal(v->type, TDM_PKV_INT);
    return v->v.i;
}

static int str_is(const tdm_pkv *dict, const char *key, const char *want)
{
    const tdm_pkv *v = tdm__pk_get(dict, key);
    return v && v->type == TDM_PKV_STR && strcmp(v->v.s, want) == 0;
}

static void test_small_structure(void **state)
{
    (void)state;
    ts *t = ts_small();
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(&t->s, -1, &len, &rep);
    assert_int_equal(rep.left_out, 1);
    assert_int_equal(rep.left_out_by_action[TDM_ACTION_FREE_COMPLETED], 1);
    assert_int_equal(rep.added_snapshot_entry, 0);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);

    const tdm_pkv *segs = tdm__pk_get(r, "segments");
    assert_int_equal(segs->n, 2);
    const tdm_pkv *g0 = item(segs, 0), *g1 = item(segs, 1);
    assert_true(int_of(g0, "address") == (int64_t)TS_A);
    /* High-half addresses are negative 64-bit ints, not 9-byte LONG1s. */
    assert_true(int_of(g1, "address") == (int64_t)TS_B);
    assert_true(int_of(g1, "address") < 0);
    assert_true(str_is(g0, "segment_type", "small") && str_is(g1, "segment_type", "large"));
    assert_int_equal(int_of(g0, "active_size"), 512);
    assert_int_equal(int_of(g0, "requested_size"), 500);
    assert_int_equal(int_of(g0, "allocated_size"), 0);
    assert_int_equal(int_of(g1, "allocated_size"), 5242880);
    const tdm_pkv *blocks = tdm__pk_get(g0, "blocks");
    assert_int_equal(blocks->n, 3);
    assert_true(str_is(item(blocks, 1), "state", "active_pending_free"));
    assert_true(int_of(item(blocks, 1), "address") == (int64_t)(TS_A + 1024));
    /* Frames innermost first. */
    const tdm_pkv *fr = tdm__pk_get(item(blocks, 1), "frames");
    assert_int_equal(fr->n, 3);
    assert_true(str_is(item(fr, 0), "name", "alloc_tensor"));
    assert_true(str_is(item(fr, 1), "name", "backward"));
    assert_true(str_is(item(fr, 2), "name", "main"));
    assert_true(str_is(item(fr, 1), "filename", "train.py"));
    assert_int_equal(int_of(item(fr, 1), "line"), 57);

    const tdm_pkv *traces = tdm__pk_get(r, "device_traces");
    assert_int_equal(traces->n, 1);
    const tdm_pkv *tr = item(traces, 0);
    static const char *const actions[] = {"segment_alloc", "alloc", "segment_alloc", "alloc",
                                          "alloc", "free_requested", "free_completed",
                                          "free_requested", "oom", "snapshot"};
    assert_int_equal(tr->n, 10);
    int unknown = 0;
    for (uint32_t i = 0; i < tr->n; i++) {
        assert_true(str_is(item(tr, i), "action", actions[i]));
        assert_non_null(tdm__pk_get(item(tr, i), "category"));
        unknown += str_is(item(tr, i), "category", "unknown");
    }
    assert_true(unknown >= 1);
    assert_true(int_of(item(tr, 2), "addr") == (int64_t)TS_B);
    assert_true(int_of(item(tr, 0), "time_us") == (int64_t)(TS_T0 / 1000 + 3));
    const tdm_pkv *oom = item(tr, 8);
    assert_null(tdm__pk_get(oom, "addr"));
    assert_int_equal(int_of(oom, "device_free"), 1048576);
    assert_int_equal(int_of(item(tr, 1), "size"), 1000); /* requested, not rounded */

    const tdm_pkv *ann = tdm__pk_get(r, "external_annotations");
    assert_true(str_is(item(ann, 0), "name", "ProfilerStep#1"));
    assert_true(str_is(item(ann, 0), "stage", "START"));
    assert_true(str_is(item(ann, 1), "name", "forward"));
    const tdm_pkv *tdmh = tdm__pk_get(tdm__pk_get(r, "allocator_settings"), "tidemark");
    assert_true(str_is(tdmh, "host", "testhost"));
    assert_int_equal(int_of(tdmh, "events_left_out"), 1);
    assert_null(tdm__pk_get(r, "host_segments"));
    tdm__pk_free(doc);
    free(b);
    free(t);
}

/* ---- the replay rule ------------------------------------------------------------ */

/* Exports and returns the report; checks the kept history replays (the
 * exporter's own replay runs again over what it kept: nothing more may
 * be left out). */
static tdm_pt_report export_report(const tdm_snap *s)
{
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(s, -1, &len, &rep);
    free(b);
    return rep;
}

static void test_suffixes_replay_whole(void **state)
{
    (void)state;
    /* A consistent history: the small one without its bad event. */
    ts *t = ts_small();
    for (size_t i = 0; i < t->s.event_count; i++)
        if (t->ev[i].addr == 0x1000) {
            memmove(&t->ev[i], &t->ev[i + 1], (t->s.event_count - i - 1) * sizeof t->ev[0]);
            t->s.event_count--;
        }
    size_t n = t->s.event_count;
    tdm_event *all = t->s.events;
    for (size_t k = 0; k <= n; k++) {
        /* The ring dropped the first k events. */
        t->s.events = all + k;
        t->s.event_count = n - k;
        t->s.dropped_events = k;
        tdm_pt_report rep = export_report(&t->s);
        if (rep.left_out)
            print_error("dropping %zu events made %llu more left out\n", k,
                        (unsigned long long)rep.left_out);
        assert_int_equal(rep.left_out, 0);
    }
    t->s.events = all;
    t->s.event_count = n;
    free(t);
}

static void test_left_out_rules(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    uint64_t A = TS_A;
    size_t e_seg = ts_ev(t, TDM_ACTION_SEGMENT_ALLOC, 0, A, 4096, 0);
    size_t e_a1 = ts_ev(t, TDM_ACTION_ALLOC, 0, A, 512, 0);
    /* A second alloc at A: the final state holds one block, so only the
     * newest alloc can be undone onto it. */
    size_t e_a2 = ts_ev(t, TDM_ACTION_ALLOC, 0, A, 512, 0);
    /* An alloc whose block is gone at the end and never freed. */
    size_t e_a3 = ts_ev(t, TDM_ACTION_ALLOC, 0, A + 1024, 512, 0);
    /* free_requested of a block that is allocated (not pending) at the end. */
    size_t e_fr = ts_ev(t, TDM_ACTION_FREE_REQUESTED, 0, A, 512, 0);
    /* A free re-creating a block over a live one. */
    size_t e_fc = ts_ev(t, TDM_ACTION_FREE_COMPLETED, 0, A + 256, 512, 0);
    /* A segment freed that overlaps the live one. */
    size_t e_sf = ts_ev(t, TDM_ACTION_SEGMENT_FREE, 0, A + 2048, 4096, 0);
    /* A segment freed elsewhere: fine, it existed before. */
    size_t e_sf2 = ts_ev(t, TDM_ACTION_SEGMENT_FREE, 0, A + 65536, 4096, 0);
    ts_segment(t, 0, TDM_POOL_SMALL, A, 4096, 0);
    ts_block(t, TDM_BLOCK_ACTIVE_ALLOCATED, 512, 512, 0);
    ts_block(t, TDM_BLOCK_INACTIVE, 4096 - 512, 0, 0);

    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    tdm_pt_state st;
    assert_int_equal(tdm__pt_state_build(&t->s, m, &st), TDM_OK);
    uint8_t keep[16], cat[16], cats[16] = {0};
    uint64_t left[TDM_ACTION_COUNT_];
    assert_true(m->alloc_count <= 16);
    assert_int_equal(tdm__pt_replay(&t->s, m, cats, &st, keep, cat, left), TDM_OK);
    assert_int_equal(keep[e_sf2], 1);
    assert_int_equal(keep[e_sf], 0);
    assert_int_equal(keep[e_fc], 0);
    assert_int_equal(keep[e_fr], 0);
    assert_int_equal(keep[e_a3], 0);
    assert_int_equal(keep[e_a2], 1);
    assert_int_equal(keep[e_a1], 0);
    /* Undone: the block at A; the segment is then empty and goes too. */
    assert_int_equal(keep[e_seg], 1);
    assert_int_equal(left[TDM_ACTION_ALLOC], 2);
    assert_int_equal(left[TDM_ACTION_SEGMENT_FREE], 1);
    tdm__pt_state_free(&st);
    tdm__model_free(m);
    free(t);
}

/* Blocks that do not tile their segment, and overlapping segments, are
 * repaired so that the pickle's state is well formed. */
static void test_state_repair(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    ts_segment(t, 0, TDM_POOL_LARGE, TS_A, 8192, 0);
    ts_block(t, TDM_BLOCK_ACTIVE_ALLOCATED, 1024, 1000, 0);
    t->blk[t->s.block_count - 1].address += 512; /* a gap before it */
    ts_block(t, TDM_BLOCK_ACTIVE_ALLOCATED, 1 << 20, 1, 0); /* runs past the end */
    ts_segment(t, 0, TDM_POOL_LARGE, TS_A + 4096, 8192, 0); /* overlaps the first */
    ts_block(t, TDM_BLOCK_INACTIVE, 8192, 0, 0);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    tdm_pt_state st;
    assert_int_equal(tdm__pt_state_build(&t->s, m, &st), TDM_OK);
    assert_int_equal(st.segment_count, 1);
    assert_int_equal(st.segments_left_out, 1);
    assert_true(st.blocks_repaired >= 2);
    const tdm_snap_segment *g = &st.segments[0];
    uint64_t addr = g->address;
    for (uint32_t k = 0; k < g->block_count; k++) {
        assert_true(st.blocks[g->first_block + k].address == addr);
        addr += st.blocks[g->first_block + k].size;
    }
    assert_true(addr == g->address + g->total_size);
    assert_int_equal(g->block_count, 3); /* gap, the 1 KiB block, the rest */
    tdm__pt_state_free(&st);
    tdm__model_free(m);
    free(t);
}

/* A file cut before its state: one synthetic segment, segment events out. */
static void test_no_final_state(void **state)
{
    (void)state;
    ts *t = ts_small();
    t->s.segment_count = 0;
    t->s.block_count = 0;
    t->s.complete = 0;
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(&t->s, -1, &len, &rep);
    assert_int_equal(rep.synthesized_state, 1);
    assert_int_equal(rep.left_out_by_action[TDM_ACTION_SEGMENT_ALLOC], 2);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);
    /* One segment per run of addresses the block events used: 0x1000,
     * A (the 1000 B allocation), A + 1024 (the 500 B one), B (unsigned
     * order: B's negative int64 comes last). */
    const tdm_pkv *segs = tdm__pk_get(r, "segments");
    assert_int_equal(segs->n, 4);
    assert_true(int_of(item(segs, 0), "address") == 0x1000);
    assert_int_equal(int_of(item(segs, 0), "total_size"), 64);
    assert_true(int_of(item(segs, 1), "address") == (int64_t)TS_A);
    assert_int_equal(int_of(item(segs, 1), "total_size"), 1000);
    assert_int_equal(int_of(item(segs, 1), "active_size"), 0);
    assert_true(int_of(item(segs, 2), "address") == (int64_t)(TS_A + 1024));
    assert_int_equal(int_of(item(segs, 2), "active_size"), 500); /* pending free */
    assert_int_equal(int_of(item(segs, 2), "allocated_size"), 0);
    assert_true(int_of(item(segs, 3), "address") == (int64_t)TS_B);
    assert_int_equal(int_of(item(segs, 3), "allocated_size"), 5242880);
    tdm__pk_free(doc);
    free(b);
    free(t);
}

static void test_empty_snapshot(void **state)
{
    (void)state;
    ts *t = ts_new();
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(&t->s, -1, &len, &rep);
    assert_int_equal(rep.added_snapshot_entry, 1);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);
    const tdm_pkv *traces = tdm__pk_get(r, "device_traces");
    assert_int_equal(traces->n, 1);
    assert_int_equal(item(traces, 0)->n, 1);
    assert_true(str_is(item(item(traces, 0), 0), "action", "snapshot"));
    assert_true(str_is(item(item(traces, 0), 0), "category", "unknown"));
    tdm__pk_free(doc);
    free(b);
    free(t);
}

/* All categories known and no segment event: a snapshot entry brings the
 * "unknown" old viewers need. */
static void test_unknown_category_guaranteed(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    size_t e = ts_ev(t, TDM_ACTION_ALLOC, 0, TS_A, 100, 0);
    t->ev[e].category = TDM_CATEGORY_PARAMETER;
    ts_segment(t, 0, TDM_POOL_SMALL, TS_A, 2097152, 0);
    ts_block(t, TDM_BLOCK_ACTIVE_ALLOCATED, 512, 100, 0);
    t->blk[0].category = TDM_CATEGORY_PARAMETER;
    ts_block(t, TDM_BLOCK_INACTIVE, 2097152 - 512, 0, 0);
    size_t len;
    tdm_pt_report rep;
    unsigned char *b = ts_export(&t->s, -1, &len, &rep);
    assert_int_equal(rep.added_snapshot_entry, 1);
    assert_int_equal(rep.entries, 2);
    free(b);
    free(t);
}

static size_t count_bytes(const unsigned char *b, size_t len, const char *what)
{
    size_t n = 0, k = strlen(what);
    for (size_t i = 0; i + k <= len; i++)
        n += memcmp(b + i, what, k) == 0;
    return n;
}

/* Each distinct frames list is written once and then fetched from the
 * memo: also for two stack ids whose frames read the same. */
static void test_frames_memoized(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    uint32_t fa = ts_frame(t, "forward", "memo_a.c", 10);
    uint32_t fb = ts_frame(t, "main", "memo_b.c", 20);
    uint32_t s1 = ts_stack(t, 2, fa, fb);
    uint32_t s2 = ts_stack(t, 2, fa, fb); /* same frames, another id */
    uint32_t s3 = ts_stack(t, 1, fb);
    const uint32_t stacks[3] = {s1, s2, s3};
    for (int i = 0; i < 30; i++) {
        uint64_t addr = TS_A + (uint64_t)i * 512;
        ts_ev(t, TDM_ACTION_ALLOC, 0, addr, 512, stacks[i % 3]);
        ts_ev(t, TDM_ACTION_FREE_REQUESTED, 0, addr, 512, stacks[i % 3]);
        ts_ev(t, TDM_ACTION_FREE_COMPLETED, 0, addr, 512, stacks[i % 3]);
    }
    ts_segment(t, 0, TDM_POOL_SMALL, TS_A, 2097152, 0);
    ts_block(t, TDM_BLOCK_INACTIVE, 2097152, 0, 0);
    size_t len;
    unsigned char *b = ts_export(&t->s, -1, &len, NULL);
    /* memo_a.c is in one list ([a, b]); memo_b.c in two ([a, b] and [b]). */
    assert_int_equal(count_bytes(b, len, "memo_a.c"), 1);
    assert_int_equal(count_bytes(b, len, "memo_b.c"), 2);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);
    const tdm_pkv *tr = item(tdm__pk_get(r, "device_traces"), 0);
    assert_int_equal(tr->n, 90);
    for (uint32_t i = 0; i < tr->n; i++) {
        const tdm_pkv *fr = tdm__pk_get(item(tr, i), "frames");
        unsigned want = (i / 3) % 3 == 2 ? 1 : 2;
        assert_int_equal(fr->n, want);
        assert_true(str_is(item(fr, want - 1), "filename", "memo_b.c"));
        assert_int_equal(int_of(item(fr, 0), "line"), want == 2 ? 10 : 20);
    }
    tdm__pk_free(doc);
    free(b);
    free(t);
}

/* ---- expandable segments: the viewer's own segment list ----------------
 * MemoryView joins an unmapped range back only to neighbours of the same
 * stream, keeps its list in the order its splice() calls leave it, and
 * throws when it undoes a segment_map whose range no one segment holds.
 * Histories that are consistent but trip it must lose that segment_map;
 * the same histories without the trip keep every event. */

#define MIB UINT64_C(1048576)

static size_t ev_on(ts *t, tdm_action a, uint64_t addr, uint64_t size, uint64_t stream)
{
    size_t i = ts_ev(t, a, 0, addr, size, 0);
    t->ev[i].stream = stream;
    return i;
}

/* One expandable 20 MiB segment at `base` (stream `stream`), empty. */
static void expandable_state(ts *t, uint64_t base, uint64_t stream)
{
    ts_segment(t, 0, TDM_POOL_LARGE, base, 20 * MIB, 0);
    t->seg[t->s.segment_count - 1].is_expandable = 1;
    t->seg[t->s.segment_count - 1].stream = stream;
    ts_block(t, TDM_BLOCK_INACTIVE, 20 * MIB, 0, 0);
}

static void replay_keep(ts *t, uint8_t *keep, uint64_t *left)
{
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    tdm_pt_state st;
    assert_int_equal(tdm__pt_state_build(&t->s, m, &st), TDM_OK);
    uint8_t cat[16], cats[16] = {0};
    assert_true(t->s.event_count <= 16 && m->alloc_count <= 16);
    assert_int_equal(tdm__pt_replay(&t->s, m, cats, &st, keep, cat, left), TDM_OK);
    tdm__pt_state_free(&st);
    tdm__model_free(m);
}

/* 40 MiB mapped at once on stream S; its upper half unmapped, the unmap
 * recorded on `unmap_stream`.  Undone, the half joins back only when the
 * streams agree. */
static void test_unmap_joins_same_stream_only(void **state)
{
    (void)state;
    const uint64_t S = UINT64_C(0x55d5c0a0b0d0);
    for (int same = 0; same <= 1; same++) {
        ts *t = ts_new();
        ts_device(t, 0, "sim0");
        size_t e_map = ev_on(t, TDM_ACTION_SEGMENT_MAP, TS_A, 40 * MIB, S);
        size_t e_unmap = ev_on(t, TDM_ACTION_SEGMENT_UNMAP, TS_A + 20 * MIB, 20 * MIB,
                               same ? S : 0);
        expandable_state(t, TS_A, S);
        uint8_t keep[16];
        uint64_t left[TDM_ACTION_COUNT_];
        replay_keep(t, keep, left);
        assert_int_equal(keep[e_unmap], 1);
        assert_int_equal(keep[e_map], same);
        assert_int_equal(left[TDM_ACTION_SEGMENT_MAP], !same);
        free(t);
    }
}

/* A segment freed above every other one is put back by the viewer before
 * the last range (splice(-1, 0, seg)), so an unmapped range just above
 * that range is not joined to it and the 40 MiB map cannot be undone.
 * Freed below instead, the list stays sorted and everything replays. */
static void test_segment_free_above_all(void **state)
{
    (void)state;
    for (int above = 0; above <= 1; above++) {
        ts *t = ts_new();
        ts_device(t, 0, "sim0");
        uint64_t base = TS_A + 1024 * MIB;
        uint64_t y = above ? base + 100 * MIB : base - 100 * MIB;
        size_t e_map = ev_on(t, TDM_ACTION_SEGMENT_MAP, base, 40 * MIB, 0);
        size_t e_salloc = ev_on(t, TDM_ACTION_SEGMENT_ALLOC, y, 2 * MIB, 0);
        size_t e_unmap = ev_on(t, TDM_ACTION_SEGMENT_UNMAP, base + 20 * MIB, 20 * MIB, 0);
        size_t e_sfree = ev_on(t, TDM_ACTION_SEGMENT_FREE, y, 2 * MIB, 0);
        expandable_state(t, base, 0);
        uint8_t keep[16];
        uint64_t left[TDM_ACTION_COUNT_];
        replay_keep(t, keep, left);
        assert_int_equal(keep[e_sfree], 1);
        assert_int_equal(keep[e_unmap], 1);
        assert_int_equal(keep[e_salloc], 1);
        assert_int_equal(keep[e_map], !above);
        free(t);
    }
}

/* The viewer orders its list by the pickle's signed addresses: a high-half
 * segment (negative) comes before a low one, and an unmapped range just
 * above it joins it.  (Ordered as unsigned, the join would be missed.) */
static void test_viewer_list_signed_order(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    size_t e_map = ev_on(t, TDM_ACTION_SEGMENT_MAP, TS_B, 40 * MIB, 0);
    size_t e_unmap = ev_on(t, TDM_ACTION_SEGMENT_UNMAP, TS_B + 20 * MIB, 20 * MIB, 0);
    expandable_state(t, TS_A, 0);
    expandable_state(t, TS_B, 0);
    uint8_t keep[16];
    uint64_t left[TDM_ACTION_COUNT_];
    replay_keep(t, keep, left);
    assert_int_equal(keep[e_unmap], 1);
    assert_int_equal(keep[e_map], 1);
    free(t);
}

static void test_devices_and_host(void **state)
{
    (void)state;
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    ts_device(t, 2, "sim2");
    ts_ev(t, TDM_ACTION_SEGMENT_ALLOC, 2, TS_A, 4096, 0);
    ts_ev(t, TDM_ACTION_SEGMENT_ALLOC, -1, TS_B, 4096, 0);
    ts_ev(t, TDM_ACTION_SNAPSHOT, -1, 0, 0, 0);
    ts_segment(t, 2, TDM_POOL_NONE, TS_A, 4096, 0);
    ts_block(t, TDM_BLOCK_INACTIVE, 4096, 0, 0);
    ts_segment(t, -1, TDM_POOL_NONE, TS_B, 4096, 0);
    ts_block(t, TDM_BLOCK_INACTIVE, 4096, 0, 0);
    size_t len;
    unsigned char *b = ts_export(&t->s, -1, &len, NULL);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);
    const tdm_pkv *traces = tdm__pk_get(r, "device_traces");
    assert_int_equal(traces->n, 3); /* one list per ordinal 0..2 */
    /* The process-wide snapshot mark is on every device's list. */
    assert_int_equal(item(traces, 0)->n, 1);
    assert_int_equal(item(traces, 1)->n, 1);
    assert_int_equal(item(traces, 2)->n, 2);
    assert_int_equal(tdm__pk_get(r, "segments")->n, 1);
    assert_int_equal(tdm__pk_get(r, "host_segments")->n, 1);
    assert_int_equal(tdm__pk_get(r, "host_traces")->n, 1);
    tdm__pk_free(doc);
    free(b);
    /* --device 2: only its segment and list; the lists before it empty. */
    b = ts_export(&t->s, 2, &len, NULL);
    assert_int_equal(tdm__pk_parse(b, len, &doc, &r, &err), TDM_OK);
    traces = tdm__pk_get(r, "device_traces");
    assert_int_equal(traces->n, 3);
    assert_int_equal(item(traces, 0)->n, 0);
    assert_int_equal(item(traces, 2)->n, 2);
    assert_null(tdm__pk_get(r, "host_segments"));
    tdm__pk_free(doc);
    free(b);
    free(t);
}

/* ---- round trips ---------------------------------------------------------------- */

static int is_mark(const tdm_event *e)
{
    return e->action == TDM_ACTION_PHASE || e->action == TDM_ACTION_STEP ||
           e->action == TDM_ACTION_TAG;
}

static void same_stack(const tdm_snap *a, uint32_t sa, const tdm_snap *b, uint32_t sb)
{
    assert_int_equal(a->stacks[sa].depth, b->stacks[sb].depth);
    for (uint32_t k = 0; k < a->stacks[sa].depth; k++) {
        const tdm_snap_frame *fa = &a->frames[a->stacks[sa].frames[k]];
        const tdm_snap_frame *fb = &b->frames[b->stacks[sb].frames[k]];
        const char *file = fa->file && fa->file[0]       ? fa->file
                           : fa->module && fa->module[0] ? fa->module
                                                         : "??";
        assert_string_equal(fa->function && fa->function[0] ? fa->function : "??",
                            fb->function);
        assert_string_equal(file, fb->file);
        assert_int_equal(fa->line, fb->line);
    }
}

/* .tdm → pickle → .tdm keeps the memory events (except those the export
 * left out), their sizes, addresses, streams, devices, times (to the µs)
 * and frames, the marks, the final state and the header. */
static void check_roundtrip(const tdm_snap *a, uint64_t expect_left_out)
{
    size_t len;
    tdm_pt_report rep;
    unsigned char *p = ts_export(a, -1, &len, &rep);
    assert_int_equal(rep.left_out, expect_left_out);
    tdm_snap *b = NULL;
    tdm_pt_import_report irep;
    char err[320];
    tdm_status s = tdm__import_pytorch_buffer(p, len, "rt", &b, &irep, err, sizeof err);
    if (s != TDM_OK)
        print_error("import: %s\n", err);
    assert_int_equal(s, TDM_OK);
    assert_int_equal(irep.from_tidemark, 1);
    assert_int_equal(irep.skipped, 0);
    size_t j = 0, marks_a = 0, marks_b = 0;
    for (size_t i = 0; i < b->event_count; i++)
        marks_b += is_mark(&b->events[i]);
    for (size_t i = 0; i < a->event_count; i++) {
        const tdm_event *ea = &a->events[i];
        if (ea->action == TDM_ACTION_PHASE || ea->action == TDM_ACTION_STEP) {
            marks_a++;
            continue;
        }
        if (ea->action == TDM_ACTION_TAG || ea->addr == 0x1000) /* not exported */
            continue;
        while (j < b->event_count && is_mark(&b->events[j]))
            j++;
        assert_true(j < b->event_count);
        const tdm_event *eb = &b->events[j++];
        assert_int_equal(eb->action, ea->action);
        /* A process-wide snapshot mark goes on every device's list (one here). */
        if (ea->action == TDM_ACTION_SNAPSHOT && ea->device < 0)
            assert_true(eb->device >= 0);
        else
            assert_int_equal(eb->device, ea->device);
        assert_true(eb->addr == ea->addr);
        assert_true(eb->size == ea->size);
        assert_true(eb->stream == ea->stream);
        assert_true(eb->time_ns == ea->time_ns / 1000 * 1000);
        same_stack(a, ea->stack_id, b, eb->stack_id);
    }
    while (j < b->event_count && is_mark(&b->events[j]))
        j++;
    assert_int_equal(j, b->event_count);
    assert_int_equal(marks_a, marks_b);
    assert_int_equal(b->phase_count, a->phase_count);
    for (size_t k = 1; k < a->phase_count; k++)
        assert_string_equal(a->phase_names[k], b->phase_names[k]);
    assert_int_equal(b->segment_count, a->segment_count);
    for (size_t k = 0; k < a->segment_count; k++) {
        const tdm_snap_segment *ga = &a->segments[k], *gb = &b->segments[k];
        assert_true(ga->address == gb->address && ga->total_size == gb->total_size);
        assert_int_equal(ga->device, gb->device);
        assert_int_equal(ga->block_count, gb->block_count);
        assert_int_equal(ga->pool == TDM_POOL_NONE ? TDM_POOL_NONE : ga->pool, gb->pool);
        same_stack(a, ga->stack_id, b, gb->stack_id);
        for (uint32_t q = 0; q < ga->block_count; q++) {
            const tdm_snap_block *ba = &a->blocks[ga->first_block + q];
            const tdm_snap_block *bb = &b->blocks[gb->first_block + q];
            assert_true(ba->address == bb->address && ba->size == bb->size);
            assert_int_equal(ba->state, bb->state);
            if (ba->state != TDM_BLOCK_INACTIVE) {
                assert_true(ba->requested_size == bb->requested_size);
                same_stack(a, ba->stack_id, b, bb->stack_id);
            }
        }
    }
    assert_string_equal(a->header.host, b->header.host);
    assert_string_equal(a->header.command, b->header.command);
    assert_string_equal(a->header.config, b->header.config);
    assert_string_equal(a->header.alloc_mode, b->header.alloc_mode);
    assert_int_equal(a->header.pid, b->header.pid);
    assert_int_equal(a->header.context_mode, b->header.context_mode);
    assert_true(a->dropped_events == b->dropped_events);
    assert_int_equal(a->device_count, b->device_count);
    /* And the second export is the first, byte for byte (when nothing was
     * left out: events_left_out is in the header it writes). */
    size_t len2;
    tdm_pt_report rep2;
    unsigned char *p2 = ts_export(b, -1, &len2, &rep2);
    assert_int_equal(rep2.left_out, 0);
    if (!expect_left_out) {
        assert_int_equal(len2, len);
        assert_memory_equal(p2, p, len);
    }
    free(p2);
    tdm__import_pytorch_free(b);
    free(p);
}

static void test_roundtrip_small(void **state)
{
    (void)state;
    ts *t = ts_small();
    check_roundtrip(&t->s, 1);
    free(t);
}

/* A snapshot recorded through the API on the sim device. */
static void test_roundtrip_recorded(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    void *keep[40] = {0};
    assert_int_equal(tdm_phase("init"), TDM_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(tdm_malloc(&keep[i], 4096u << i, 0, 0), TDM_OK);
    for (int step = 0; step < 3; step++) {
        assert_int_equal(tdm_step(), TDM_OK);
        assert_int_equal(tdm_phase("forward"), TDM_OK);
        void *act[10];
        for (int i = 0; i < 10; i++)
            assert_int_equal(tdm_malloc(&act[i], 1000 + 70000u * i, 0, 0), TDM_OK);
        assert_int_equal(tdm_phase("backward"), TDM_OK);
        for (int i = 9; i >= 0; i--)
            assert_int_equal(tdm_free(act[i]), TDM_OK);
    }
    tdm_snap *s = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&s), TDM_OK);
    assert_true(s->event_count > 60);
    check_roundtrip(s, 0);
    tdm__rec_snapshot_free(s);
    for (int i = 0; i < 10; i++)
        tdm_free(keep[i]);
    tdm_history_options_init(&o);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_small),
        cmocka_unit_test(test_small_structure),
        cmocka_unit_test(test_suffixes_replay_whole),
        cmocka_unit_test(test_left_out_rules),
        cmocka_unit_test(test_state_repair),
        cmocka_unit_test(test_no_final_state),
        cmocka_unit_test(test_empty_snapshot),
        cmocka_unit_test(test_unknown_category_guaranteed),
        cmocka_unit_test(test_frames_memoized),
        cmocka_unit_test(test_unmap_joins_same_stream_only),
        cmocka_unit_test(test_segment_free_above_all),
        cmocka_unit_test(test_viewer_list_signed_order),
        cmocka_unit_test(test_devices_and_host),
        cmocka_unit_test(test_roundtrip_small),
        cmocka_unit_test(test_roundtrip_recorded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
