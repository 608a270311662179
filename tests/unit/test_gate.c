/* tests/unit/test_gate.c: memory gates (viewer-export/gate/gate.h) on snapshots
 * built by hand, so every figure is known: each gate passing and failing
 * at its limit, per device and with --device, growth over a baseline
 * (including a device the baseline lacks), figures that cannot be
 * measured, files that could not be read; the failure report's length and
 * content; site keys that match across files whatever the stack ids and
 * addresses; XML and GitHub escaping; the JUnit file; option parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>
#include <cmocka.h>

#include "load.h"
#include "gate.h"
#include "model.h"
#include "snap_model.h"

/* ---- a snapshot builder ------------------------------------------------- */

#define MAXN 256

typedef struct tsnap {
    tdm_snap s;
    tdm_event ev[MAXN];
    tdm_snap_segment seg[16];
    tdm_snap_block blk[16];
    tdm_snap_device dev[4];
    tdm_snap_device_stats stats[4];
    tdm_snap_frame frames[16];
    tdm_snap_stack stacks[16];
    uint32_t stack_frames[16][4];
    const char *phases[4];
    uint64_t now;
    uint32_t step, phase;
    uint64_t pc_base; /* load address: differs between "runs" */
} tsnap;

static const char *const fn_names[] = {"make_weights", "make_activation", "make_temp",
                                       "forward", "train_step", "main"};

/* Stacks 1..3: tdm_malloc, make_*, forward, train_step.  Stacks 4..
 * repeat them in another order when `shuffle` (ids differ, frames not). */
static tsnap *tsnap_new(uint64_t pc_base, int shuffle)
{
    tsnap *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->pc_base = pc_base;
    tdm_snap_header *h = &t->s.header;
    h->format_version = TDM_FORMAT_VERSION;
    h->tool_version = "0.1.0";
    h->host = "testhost";
    h->pid = 42;
    h->rank = h->local_rank = -1;
    h->start_time_us = 1700000000000000ull;
    h->dump_time_us = 1700000010000000ull;
    h->command = "./unit";
    h->config = h->metadata = "";
    h->record_mode = TDM_RECORD_ALL;
    h->max_entries = 1000;
    h->alloc_mode = "passthrough";
    t->s.complete = 1;
    t->now = 1700000000000000000ull + 1000000ull;
    t->phases[0] = "";
    t->phases[1] = "forward";
    t->phases[2] = "backward";
    t->phases[3] = "optimizer";
    t->s.phase_names = t->phases;
    t->s.phase_count = 4;
    t->frames[0] = (tdm_snap_frame){pc_base + 0x10, "tdm_malloc", "alloc/alloc.c", 10,
                                    "/usr/lib/libtidemark.so.0"};
    for (int i = 0; i < 6; i++)
        t->frames[1 + i] = (tdm_snap_frame){pc_base + 0x2000 + (uint64_t)i * 16, fn_names[i],
                                            shuffle ? "/other/build/train.c" : "/src/train.c",
                                            100u + (unsigned)i, "train"};
    t->s.frames = t->frames;
    t->s.frame_count = 7;
    t->s.stacks = t->stacks;
    t->s.stack_count = 4;
    for (int k = 1; k <= 3; k++) {
        int id = shuffle ? 4 - k : k; /* the same sites under other ids */
        t->stack_frames[id][0] = 0;
        t->stack_frames[id][1] = (uint32_t)k;
        t->stack_frames[id][2] = 4;
        t->stack_frames[id][3] = 5;
        t->stacks[id] = (tdm_snap_stack){4, t->stack_frames[id]};
    }
    t->s.events = t->ev;
    t->s.segments = t->seg;
    t->s.blocks = t->blk;
    t->s.devices = t->dev;
    t->s.stats = t->stats;
    return t;
}

static void add_device(tsnap *t, int ordinal)
{
    tdm_snap_device *d = &t->dev[t->s.device_count++];
    d->index = ordinal;
    d->vendor = "sim";
    d->name = ordinal == 0 ? "sim0" : "sim1";
    d->capacity = 1u << 30;
}

static size_t ev(tsnap *t, tdm_action action, int device, uint64_t addr, uint64_t size,
                 uint32_t stack)
{
    assert_true(t->s.event_count < MAXN);
    size_t i = t->s.event_count++;
    t->now += 1000000ull;
    t->ev[i] = (tdm_event){.time_ns = t->now, .addr = addr, .size = size, .requested = size,
                           .stack_id = stack, .phase = t->phase, .step = t->step,
                           .device = (int16_t)device, .action = (uint8_t)action};
    return i;
}

static uint64_t seg_size(uint64_t size) { return (size + 511) & ~(uint64_t)511; }

static size_t alloc_pt(tsnap *t, int device, uint64_t addr, uint64_t size, uint32_t stack)
{
    ev(t, TDM_ACTION_SEGMENT_ALLOC, device, addr, seg_size(size), stack);
    return ev(t, TDM_ACTION_ALLOC, device, addr, size, stack);
}

static void free_pt(tsnap *t, int device, uint64_t addr, uint64_t size)
{
    ev(t, TDM_ACTION_FREE_REQUESTED, device, addr, size, 0);
    ev(t, TDM_ACTION_FREE_COMPLETED, device, addr, size, 0);
    ev(t, TDM_ACTION_SEGMENT_FREE, device, addr, seg_size(size), 0);
}

static void mark(tsnap *t, int step, uint32_t phase)
{
    if (step) {
        t->step++;
        ev(t, TDM_ACTION_STEP, -1, 0, 0, 0);
    }
    t->phase = phase;
    ev(t, TDM_ACTION_PHASE, -1, 0, 0, 0);
}

static void state_block(tsnap *t, int device, uint64_t addr, uint64_t requested,
                        uint32_t stack)
{
    size_t b = t->s.block_count++, s = t->s.segment_count++;
    t->blk[b] = (tdm_snap_block){.address = addr, .size = seg_size(requested),
                                 .requested_size = requested, .alloc_time_ns = 1,
                                 .stack_id = stack, .state = TDM_BLOCK_ACTIVE_ALLOCATED};
    t->seg[s] = (tdm_snap_segment){.device = device, .pool = TDM_POOL_NONE, .address = addr,
                                   .total_size = seg_size(requested), .stack_id = stack,
                                   .first_block = (uint32_t)b, .block_count = 1};
}

/* The standard history.  Device 0: weights 1000 B live to the end (stack
 * 1); step 1 activation 300; step 2 activation 400 + temporary 50 in
 * backward: peak 1450 at the temporary's alloc.  Device 1: one 5000 B
 * allocation in step 2's forward, freed (when dev1).  Returns the peak's event index. */
static size_t standard(tsnap *t, uint64_t scale, int dev1)
{
    add_device(t, 0);
    if (dev1)
        add_device(t, 1);
    alloc_pt(t, 0, 0x10000, 1000 * scale, 1);
    mark(t, 1, 1);
    alloc_pt(t, 0, 0x20000, 300 * scale, 2);
    mark(t, 0, 2);
    free_pt(t, 0, 0x20000, 300 * scale);
    mark(t, 1, 1);
    alloc_pt(t, 0, 0x30000, 400 * scale, 2);
    if (dev1) {
        alloc_pt(t, 1, 0x90000, 5000, 3);
        free_pt(t, 1, 0x90000, 5000);
    }
    mark(t, 0, 2);
    size_t peak = alloc_pt(t, 0, 0x40000, 50 * scale, 3);
    free_pt(t, 0, 0x40000, 50 * scale);
    free_pt(t, 0, 0x30000, 400 * scale);
    state_block(t, 0, 0x10000, 1000 * scale, 1);
    return peak;
}

typedef struct loaded {
    tsnap *t;
    tdm_input in;
} loaded;

static void load(loaded *l, tsnap *t, const char *path)
{
    l->t = t;
    memset(&l->in, 0, sizeof l->in);
    l->in.path = path;
    l->in.snap = &t->s;
    assert_int_equal(tdm__model_build(&t->s, &l->in.model), TDM_OK);
}

static void unload(loaded *l)
{
    tdm__model_free(l->in.model);
    free(l->t);
}

static tdm_gate_report eval(const tdm_gate_options *o, const tdm_input *in, size_t n,
                            const tdm_input *baseline)
{
    tdm_gate_report rep;
    assert_int_equal(tdm__gate_evaluate(o, in, n, baseline, &rep), TDM_OK);
    return rep;
}

static const tdm_gate_result *find(const tdm_gate_report *rep, size_t file, tdm_gate_kind k,
                                   int device)
{
    for (size_t i = 0; i < rep->count; i++)
        if (rep->results[i].file == file && rep->results[i].kind == k &&
            rep->results[i].device == device)
            return &rep->results[i];
    fail_msg("no result for file %zu gate %d device %d", file, (int)k, device);
    return NULL;
}

/* ---- gates -------------------------------------------------------------- */

static void test_max_peak_each_device(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    size_t peak = standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 1450; /* equal passes */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.count, 2);
    const tdm_gate_result *d0 = find(&rep, 0, TDM_GATE_MAX_PEAK, 0);
    const tdm_gate_result *d1 = find(&rep, 0, TDM_GATE_MAX_PEAK, 1);
    assert_int_equal(d0->status, TDM_GATE_PASS);
    assert_int_equal(d0->value, 1450);
    assert_int_equal(d0->at_seq, (int64_t)peak);
    assert_int_equal(d1->status, TDM_GATE_FAIL);
    assert_int_equal(d1->value, 5000);
    assert_int_equal(rep.passed, 1);
    assert_int_equal(rep.failed, 1);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_GATE_FAILED);
    tdm__gate_report_free(&rep);

    o.max_peak = 1449; /* one byte less fails device 0 too */
    o.device = 0;      /* ... and --device 0 leaves device 1 out */
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.count, 1);
    assert_int_equal(rep.results[0].device, 0);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    assert_int_equal(rep.results[0].limit, 1449);
    tdm__gate_report_free(&rep);

    o.max_peak = 5000;
    o.device = -1;
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.failed, 0);
    assert_int_equal(rep.passed, 2);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_max_leak_and_reserved(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "a.tdm");
    const tdm_model_device *m0 = &l.in.model->devices[0];

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_LEAK | 1u << TDM_GATE_MAX_RESERVED;
    o.max_leak = 999;
    o.max_reserved = (uint64_t)m0->peak_reserved;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    const tdm_gate_result *leak0 = find(&rep, 0, TDM_GATE_MAX_LEAK, 0);
    const tdm_gate_result *leak1 = find(&rep, 0, TDM_GATE_MAX_LEAK, 1);
    assert_int_equal(leak0->status, TDM_GATE_FAIL);
    assert_int_equal(leak0->value, 1000);
    assert_true(leak0->at_end);
    assert_int_equal(leak1->status, TDM_GATE_PASS);
    assert_int_equal(leak1->value, 0);
    const tdm_gate_result *res0 = find(&rep, 0, TDM_GATE_MAX_RESERVED, 0);
    assert_int_equal(res0->status, TDM_GATE_PASS);
    /* 1000 + 400 + 50 B in 512 B segments: 1024 + 512 + 512 */
    assert_int_equal(res0->value, 2048);
    assert_int_equal(tdm__model_sample_at(m0, res0->at_seq)->reserved, 2048);
    const tdm_gate_result *res1 = find(&rep, 0, TDM_GATE_MAX_RESERVED, 1);
    assert_int_equal(res1->status, TDM_GATE_FAIL); /* 5120 > 2048 */
    assert_int_equal(res1->value, 5120);
    assert_int_equal(rep.failed, 2);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_growth_over_baseline(void **state)
{
    (void)state;
    loaded base, cur;
    tsnap *b = tsnap_new(0x400000, 0);
    standard(b, 1, 0); /* the baseline never used device 1 */
    load(&base, b, "base.tdm");
    tsnap *c = tsnap_new(0x7f0000, 1);
    standard(c, 2, 1); /* device 0 peak 2900: +100% */
    load(&cur, c, "cur.tdm");

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_GROWTH;
    o.baseline = "base.tdm";
    o.max_growth = 100.0; /* exactly +100%: passes */
    o.device = 0;
    tdm_gate_report rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.count, 1);
    assert_int_equal(rep.results[0].status, TDM_GATE_PASS);
    assert_int_equal(rep.results[0].value, 2900);
    assert_int_equal(rep.results[0].limit, 1450);
    assert_true(fabs(rep.results[0].growth - 100.0) < 1e-9);
    tdm__gate_report_free(&rep);

    o.max_growth = 99.9;
    rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    char head[256];
    tdm__gate_headline(head, sizeof head, &rep.results[0]);
    assert_non_null(strstr(head, "+100.0%"));
    assert_non_null(strstr(head, "limit +99.9%"));
    tdm__gate_report_free(&rep);

    /* Device 1 is new memory: infinite growth fails any limit. */
    o.device = 1;
    o.max_growth = 1e9;
    rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    assert_true(isinf(rep.results[0].growth));
    tdm__gate_report_free(&rep);

    /* A baseline that could not be read cannot pass or fail anything. */
    tdm_input broken = {.path = "gone.tdm", .error = "missing"};
    rep = eval(&o, &cur.in, 1, &broken);
    assert_int_equal(rep.results[0].status, TDM_GATE_ERROR);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_BAD_INPUT);
    tdm__gate_report_free(&rep);
    unload(&base);
    unload(&cur);
}

static void test_missing_device_and_unreadable_file(void **state)
{
    (void)state;
    loaded a, b;
    tsnap *ta = tsnap_new(0x400000, 0);
    standard(ta, 1, 1);
    load(&a, ta, "two.tdm");
    tsnap *tb = tsnap_new(0x400000, 0);
    add_device(tb, 0);
    alloc_pt(tb, 0, 0x1000, 10, 1);
    load(&b, tb, "one.tdm");
    tdm_input in[3] = {a.in, b.in, {.path = "bad.tdm", .error = "corrupt"}};

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = o.max_leak = 1u << 20;
    o.device = 1; /* only two.tdm has it: one.tdm is an error, not a skip */
    tdm_gate_report rep = eval(&o, in, 3, NULL);
    assert_int_equal(rep.count, 6);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_PASS);
    assert_int_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_ERROR);
    assert_string_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, 1)->note, "this file has no such device");
    assert_int_equal(find(&rep, 2, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_ERROR);
    assert_int_equal(rep.skipped, 0);
    assert_int_equal(rep.errors, 4);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_BAD_INPUT);
    tdm__gate_report_free(&rep);
    /* Said as input.h says it (one line on stderr), exit 2; the file that
     * has the device and the unreadable one pass this check. */
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 3), TDM_EXIT_BAD_INPUT);
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 1), TDM_EXIT_OK);
    o.device = -1;
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 3), TDM_EXIT_OK);

    o.device = 7; /* no file has it: a mistake, not a pass */
    rep = eval(&o, in, 2, NULL);
    assert_int_equal(rep.errors, 4);
    assert_int_equal(rep.passed + rep.skipped, 0);
    assert_string_equal(rep.results[0].note, "this file has no such device");
    tdm__gate_report_free(&rep);
    unload(&a);
    unload(&b);
}

/* A file that records no device memory used measures nothing: SKIP, and
 * when nothing at all was measured, exit 5 unless --allow-empty. */
static void test_nothing_measured(void **state)
{
    (void)state;
    loaded used, empty, none;
    tsnap *tu = tsnap_new(0x400000, 0);
    add_device(tu, 0);
    alloc_pt(tu, 0, 0x1000, 10, 1);
    load(&used, tu, "used.tdm");
    tsnap *te = tsnap_new(0x400000, 0);
    add_device(te, 0); /* a device, never allocated on */
    load(&empty, te, "empty.tdm");
    tsnap *tn = tsnap_new(0x400000, 0); /* no device at all */
    load(&none, tn, "none.tdm");
    assert_false(tdm__gate_input_empty(&used.in));
    assert_true(tdm__gate_input_empty(&empty.in));
    assert_true(tdm__gate_input_empty(&none.in));

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = o.max_leak = 1u << 20;
    tdm_input two[2] = {empty.in, none.in};
    tdm_gate_report rep = eval(&o, two, 2, NULL);
    assert_int_equal(rep.count, 4);
    assert_int_equal(rep.skipped, 4);
    assert_string_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, -1)->note,
                        "no device memory used in this file");
    assert_string_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, -1)->note, "this file has no devices");
    assert_true(tdm__gate_nothing_measured(&rep));
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_NOTHING_MEASURED);
    o.allow_empty = 1;
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    o.allow_empty = 0;
    tdm__gate_report_free(&rep);

    /* No file at all measures nothing too. */
    rep = eval(&o, two, 0, NULL);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_NOTHING_MEASURED);
    tdm__gate_report_free(&rep);

    /* One file measured is enough. */
    tdm_input three[3] = {empty.in, used.in, none.in};
    rep = eval(&o, three, 3, NULL);
    assert_int_equal(rep.passed, 2);
    assert_false(tdm__gate_nothing_measured(&rep));
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    tdm__gate_report_free(&rep);

    /* --device 0 on the empty file: it has the device, used none of it. */
    o.device = 0;
    rep = eval(&o, &empty.in, 1, NULL);
    assert_int_equal(rep.skipped, 2);
    tdm__gate_report_free(&rep);

    /* Ranking: 4 > 3 > 2 > 5 > 0. */
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_NOTHING_MEASURED, TDM_EXIT_OK),
                     TDM_EXIT_NOTHING_MEASURED);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_NOTHING_MEASURED, TDM_EXIT_BAD_INPUT),
                     TDM_EXIT_BAD_INPUT);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_GATE_FAILED, TDM_EXIT_NOTHING_MEASURED),
                     TDM_EXIT_GATE_FAILED);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_GATE_FAILED, TDM_EXIT_TOOL_ERROR),
                     TDM_EXIT_TOOL_ERROR);
    unload(&used);
    unload(&empty);
    unload(&none);
}

static void test_state_only_snapshot(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    add_device(t, 0);
    t->s.header.record_mode = TDM_RECORD_STATE;
    state_block(t, 0, 0x10000, 700, 1);
    t->stats[0].device = 0;
    t->stats[0].stats.allocated_bytes.peak = 9000;
    t->stats[0].stats.reserved_bytes.peak = 12000;
    t->s.stats_count = 1;
    load(&l, t, "state.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_RESERVED | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 8999;
    o.max_reserved = 12000;
    o.max_leak = 700;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    const tdm_gate_result *p = find(&rep, 0, TDM_GATE_MAX_PEAK, 0);
    assert_int_equal(p->status, TDM_GATE_FAIL);
    assert_int_equal(p->value, 9000);
    assert_true(p->from_stats);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_RESERVED, 0)->value, 12000);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_LEAK, 0)->value, 700);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_LEAK, 0)->status, TDM_GATE_PASS);
    tdm__gate_report_free(&rep);

    /* Without stats there is no reserved figure: an error, not a pass. */
    t->s.stats_count = 0;
    tdm__model_free(l.in.model);
    assert_int_equal(tdm__model_build(&t->s, &l.in.model), TDM_OK);
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_RESERVED, 0)->status, TDM_GATE_ERROR);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, 0)->value, 700); /* the final state */
    tdm__gate_report_free(&rep);
    unload(&l);
}

/* ---- reports ------------------------------------------------------------ */

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* noinline: inlined, GCC takes the returned text for a pointer into the
 * local `buf` (-Wdangling-pointer at -O3). */
static __attribute__((noinline)) char *render_failure(const tdm_gate_options *o, const tdm_input *in,
                            const tdm_gate_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tdm__gate_print_failure(f, o, in, r), TDM_OK);
    fclose(f);
    return buf;
}

static void test_failure_report(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    size_t peak = standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 1000;
    o.device = 0;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    char *text = render_failure(&o, &l.in, &rep.results[0]);
    assert_true(count_lines(text) <= 30);
    /* The verdict first: gate, figure, limit, excess; then where. */
    static const char verdict[] = "max-peak FAILED: peak 1.42 KiB > limit 1000 B (450 B, 45.0% "
                                  "over)\n  on         a.tdm, device 0 (sim0)\n";
    assert_true(strncmp(text, verdict, sizeof verdict - 1) == 0);
    assert_non_null(strstr(text, "limit      1000 B"));
    assert_non_null(strstr(text, "peak       1.42 KiB (1450 B), 450 B (45.0%) over"));
    char when[64];
    snprintf(when, sizeof when, "(event %zu), step 2, phase backward", peak);
    assert_non_null(strstr(text, when));
    /* Sites at the peak: weights 1000, activation 400, temporary 50;
     * shown from the program's frames, tidemark's own left out. */
    const char *w = strstr(text, "make_weights (train.c:100)");
    const char *a = strstr(text, "make_activation (train.c:101)");
    const char *tmp = strstr(text, "make_temp (train.c:102)");
    assert_true(w && a && tmp && w < a && a < tmp);
    assert_non_null(strstr(text, "forward (train.c:103)"));
    assert_null(strstr(text, "tdm_malloc"));
    assert_non_null(strstr(text, "69.0%")); /* 1000 of 1450 */
    free(text);

    /* --top 1 --frames 1: one site, one frame. */
    o.top = 1;
    o.frames = 1;
    text = render_failure(&o, &l.in, &rep.results[0]);
    assert_null(strstr(text, "make_activation"));
    assert_null(strstr(text, "forward (train.c"));
    assert_non_null(strstr(text, "... 2 more sites"));
    free(text);
    tdm__gate_report_free(&rep);
    unload(&l);
}

/* The whole report: the first failure in full first, then the other
 * failures one line each, passes only counted. */
static void test_report_verdict_first(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 2000; /* device 0 passes, device 1 fails */
    o.max_leak = 0;    /* fails where anything is live at the end */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    assert_true(rep.failed >= 2);
    assert_true(rep.passed >= 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(tdm__gate_print(f, &o, &l.in, &rep), TDM_OK);
    fclose(f);
    assert_true(strncmp(text, "max-peak FAILED: peak 4.88 KiB > limit 1.95 KiB", 47) == 0);
    assert_non_null(strstr(text, "\n  on         a.tdm, device 1 (sim1)\n"));
    assert_null(strstr(text, "PASS "));
    assert_null(strstr(text, "FAIL  max-peak")); /* the first is the verdict, not a line */
    const char *leak = strstr(text, "\nFAIL  max-leak     a.tdm, device ");
    const char *sites = strstr(text, "make_temp (train.c:102)");
    assert_true(leak && sites && sites < leak);
    assert_int_equal(count_lines(text) - count_lines(strstr(text, "\ngates: ") + 1),
                     count_lines(text) - 1);
    free(text);

    /* Nothing failed: one line per result. */
    o.max_peak = o.max_leak = 1u << 30;
    tdm__gate_report_free(&rep);
    rep = eval(&o, &l.in, 1, NULL);
    f = open_memstream(&text, &len);
    assert_int_equal(tdm__gate_print(f, &o, &l.in, &rep), TDM_OK);
    fclose(f);
    assert_int_equal(count_lines(text), rep.count + 1);
    assert_true(strncmp(text, "PASS  max-peak     a.tdm, device 0 (sim0): ", 43) == 0);
    free(text);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_github_lines(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tdm__github_escape(f, "a%b\r\nc:d,e", 1);
    fputc('|', f);
    tdm__github_escape(f, "a%b\r\nc:d,e", 0);
    fclose(f);
    assert_string_equal(buf, "a%25b%0D%0Ac%3Ad%2Ce|a%25b%0D%0Ac:d,e");
    free(buf);

    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "runs/a,b.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 2000; /* device 0 passes, device 1 fails */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    f = open_memstream(&buf, &len);
    tdm__gate_print_github(f, &l.in, &rep);
    fclose(f);
    assert_int_equal(count_lines(buf), 1);
    static const char want[] = "::error title=tidemark max-peak (device 1)::runs/a,b.tdm: "
                               "peak 4.88 KiB > limit 1.95 KiB";
    assert_true(strncmp(buf, want, sizeof want - 1) == 0);
    assert_non_null(strstr(buf, "step 2, phase forward"));
    assert_non_null(strstr(buf, "top site 4.88 KiB: make_temp (train.c:102)"));
    free(buf);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static char *xml(const char *in, int attribute)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tdm__xml_escape(f, in, attribute);
    fclose(f);
    return buf;
}

static void test_xml_escape(void **state)
{
    (void)state;
    char *s = xml("a&b<c>d\"e'f\tg\nh\ri", 0);
    assert_string_equal(s, "a&amp;b&lt;c&gt;d\"e'f\tg\nh&#13;i");
    free(s);
    s = xml("a&b<c>d\"e'f\tg\nh", 1);
    assert_string_equal(s, "a&amp;b&lt;c&gt;d&quot;e&apos;f&#9;g&#10;h");
    free(s);
    /* Control characters, bad bytes, overlong forms, surrogates and
     * U+FFFE become U+FFFD; real UTF-8 stays. */
    s = xml("x\x01y\x1bz\xff|\xc0\xaf|\xed\xa0\x80|\xef\xbf\xbe|\xc3\xa9\xf0\x9f\x98\x80|\xe2\x82", 0);
    assert_string_equal(s, "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd"
                           "\xef\xbf\xbd|\xc3\xa9\xf0\x9f\x98\x80|\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
}

static void test_junit_file(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "dir/a&<b>.v1.tdm");
    tdm_input in[2] = {l.in, {.path = "gone.tdm", .error = "missing"}};
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 2000;
    o.max_leak = 1u << 20;
    tdm_gate_report rep = eval(&o, in, 2, NULL);
    char path[] = "/tmp/tdm_junit_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tdm__junit_write("test", path, "suite \"q\"", 1.5, &o, in, 2, &rep),
                     TDM_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    assert_true(strncmp(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39) == 0);
    assert_non_null(strstr(text, "<testsuites name=\"tidemark\" tests=\"4\" failures=\"1\" "
                                 "errors=\"2\" skipped=\"0\" time=\"1.500\">"));
    assert_non_null(strstr(text, "<testsuite name=\"suite &quot;q&quot;\" tests=\"4\""));
    assert_non_null(strstr(text, "<testcase classname=\"tidemark.a&amp;&lt;b&gt;_v1\" "
                                 "name=\"max-peak\" file=\"dir/a&amp;&lt;b&gt;.v1.tdm\""));
    assert_non_null(strstr(text, "<failure message=\"device 1: peak 4.88 KiB &gt; limit"));
    assert_non_null(strstr(text, "<error message=\"missing\" type=\"max-leak\">"));
    assert_non_null(strstr(text, "device 0: peak 1.42 KiB &lt;= limit 1.95 KiB"));
    assert_null(strstr(text, "a&<b>")); /* never raw */
    size_t cases = 0;
    for (const char *p = text; (p = strstr(p, "<testcase ")); p++)
        cases++;
    assert_int_equal(cases, 4);
    tdm__gate_report_free(&rep);

    /* A folder that does not exist: TDM_IO_ERROR, nothing left behind. */
    assert_int_equal(tdm__junit_write("test", "/nonexistent-dir/x.xml", "s", 0, &o, in, 2,
                                      &rep),
                     TDM_IO_ERROR);
    unload(&l);
}

/* ---- sites -------------------------------------------------------------- */

static void test_site_keys_match_across_files(void **state)
{
    (void)state;
    tsnap *a = tsnap_new(0x400000, 0), *b = tsnap_new(0x7f1234560000ull, 1);
    /* Same frames under other stack ids, load addresses and build paths. */
    for (uint32_t k = 1; k <= 3; k++) {
        char *ka = tdm__site_key(&a->s, k), *kb = tdm__site_key(&b->s, 4 - k);
        assert_non_null(ka);
        assert_non_null(kb);
        assert_string_equal(ka, kb);
        assert_null(strstr(ka, "tdm_malloc"));
        assert_non_null(strstr(ka, fn_names[k - 1]));
        char *other = tdm__site_key(&a->s, k == 3 ? 1 : k + 1);
        assert_string_not_equal(ka, other);
        free(ka);
        free(kb);
        free(other);
    }
    /* A different line is a different site. */
    char *k1 = tdm__site_key(&a->s, 1);
    a->frames[4].line = 999;
    char *k2 = tdm__site_key(&a->s, 1);
    assert_string_not_equal(k1, k2);
    free(k1);
    free(k2);
    /* No stack: the empty key, the same in both. */
    char *e = tdm__site_key(&a->s, 0);
    assert_string_equal(e, "");
    free(e);
    free(a);
    free(b);
}

/* ---- options ------------------------------------------------------------ */

static void test_options(void **state)
{
    (void)state;
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_PEAK, "12GiB", &o), 1);
    assert_int_equal(o.max_peak, 12ull << 30);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_LEAK, "512K", &o), 1);
    assert_int_equal(o.max_leak, 512u << 10);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_RESERVED, "lots", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_RESERVED, "-1", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "2.5%", &o), 1);
    assert_true(fabs(o.max_growth - 2.5) < 1e-12);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "-5", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "ten", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_DEVICE, "x", &o), -1);
    assert_int_equal(tdm__gate_option("t", 'z', NULL, &o), 0);
    /* --max-growth needs --baseline, and the other way round. */
    assert_int_equal(tdm__gate_options_check("t", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_BASELINE, "b.tdm", &o), 1);
    assert_int_equal(tdm__gate_options_check("t", &o), 0);
    tdm_gate_options p;
    tdm__gate_options_init(&p);
    p.baseline = "b.tdm";
    assert_int_equal(tdm__gate_options_check("t", &p), -1);
    assert_string_equal(tdm__gate_kind_name(TDM_GATE_MAX_RESERVED), "max-reserved");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_peak_each_device),
        cmocka_unit_test(test_max_leak_and_reserved),
        cmocka_unit_test(test_growth_over_baseline),
        cmocka_unit_test(test_missing_device_and_unreadable_file),
        cmocka_unit_test(test_state_only_snapshot),
        cmocka_unit_test(test_nothing_measured),
        cmocka_unit_test(test_report_verdict_first),
        cmocka_unit_test(test_failure_report),
        cmocka_unit_test(test_github_lines),
        cmocka_unit_test(test_xml_escape),
        cmocka_unit_test(test_junit_file),
        cmocka_unit_test(test_site_keys_match_across_files),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
