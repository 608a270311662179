/* tests/unit/pytorch_fixtures.h: hand-built snapshots for the pickle and
 * pytorch export/import tests (test_pickle.c, test_pytorch_export.c), and
 * helpers to export them to memory.  Header-only; each test includes it
 * once.
 *
 * The "small" snapshot is the one whose pickle is kept as a golden file
 * (tests/data/golden/pytorch-small.pickle, with its .tdm beside it): one
 * device, a small-pool segment at an ordinary address and a large-pool
 * segment in the high half of the address space (negative as int64), an
 * allocation freed, one live, one whose free is still pending, an OOM, a
 * snapshot mark, phases and a step, and one free_completed that cannot
 * replay (outside every segment) and must be left out.
 */
#ifndef TDM_TESTS_PYTORCH_FIXTURES_H
#define TDM_TESTS_PYTORCH_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "snap_model.h"
#include "model.h"
#include "export_pytorch.h"

typedef struct ts {
    tdm_snap s;
    tdm_snap_device dev[4];
    const char *phases[8];
    tdm_snap_frame frames[16];
    tdm_snap_stack stacks[8];
    uint32_t sf[64];
    size_t nsf;
    tdm_event ev[512];
    tdm_snap_segment seg[16];
    tdm_snap_block blk[64];
    uint64_t t_ns;   /* next event's time */
    uint32_t phase;  /* in force */
    uint32_t step;
} ts;

#define TS_T0 UINT64_C(1700000000000000000) /* ns since the epoch */
#define TS_A UINT64_C(0x7f0000000000)
#define TS_B UINT64_C(0xffff800000200000) /* high half: negative as int64 */

static inline ts *ts_new(void)
{
    ts *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->s.header = (tdm_snap_header){
        .format_version = TDM_FORMAT_VERSION, .tool_version = "0.1.0", .host = "testhost",
        .pid = 4242, .rank = -1, .local_rank = -1, .world_size = 0,
        .start_time_us = TS_T0 / 1000, .dump_time_us = TS_T0 / 1000 + 1000,
        .config = "dump=small.tdm", .metadata = "pytorch export fixture",
        .command = "./small", .record_mode = TDM_RECORD_ALL,
        .context_mode = TDM_CONTEXT_ALLOC, .stacks_mode = TDM_STACKS_NATIVE,
        .max_entries = 1000, .alloc_mode = "cache"};
    t->s.devices = t->dev;
    t->s.phase_names = t->phases;
    t->phases[0] = "";
    t->s.phase_count = 1;
    t->s.frames = t->frames;
    t->s.stacks = t->stacks;
    t->s.stack_count = 1; /* stack 0: none */
    t->s.events = t->ev;
    t->s.segments = t->seg;
    t->s.blocks = t->blk;
    t->s.complete = 1;
    t->t_ns = TS_T0;
    return t;
}

static inline void ts_device(ts *t, int index, const char *name)
{
    t->dev[t->s.device_count++] = (tdm_snap_device){index, "sim", name, UINT64_C(1) << 30};
}

static inline uint32_t ts_frame(ts *t, const char *fn, const char *file, uint32_t line)
{
    uint32_t i = (uint32_t)t->s.frame_count++;
    t->frames[i] = (tdm_snap_frame){0x400000 + 16 * i, fn, file, line, "small", TDM_FRAME_NATIVE};
    return i;
}

/* A stack of `n` frame indices, innermost first. */
static inline uint32_t ts_stack(ts *t, unsigned n, ...)
{
    va_list ap;
    va_start(ap, n);
    uint32_t *f = &t->sf[t->nsf];
    for (unsigned k = 0; k < n; k++)
        t->sf[t->nsf++] = va_arg(ap, uint32_t);
    va_end(ap);
    uint32_t id = (uint32_t)t->s.stack_count++;
    t->stacks[id] = (tdm_snap_stack){n, f};
    return id;
}

static inline size_t ts_ev(ts *t, tdm_action a, int dev, uint64_t addr, uint64_t size,
                           uint32_t stack)
{
    size_t i = t->s.event_count++;
    t->ev[i] = (tdm_event){.time_ns = t->t_ns, .addr = addr, .size = size, .requested = size,
                           .stack_id = stack, .phase = t->phase, .step = t->step,
                           .device = (int16_t)dev, .action = (uint8_t)a};
    t->t_ns += 1500; /* 1.5 µs apart: distinct time_us */
    return i;
}

static inline void ts_phase(ts *t, const char *name)
{
    size_t p = 0;
    for (size_t k = 1; k < t->s.phase_count; k++)
        if (strcmp(t->phases[k], name) == 0)
            p = k;
    if (!p) {
        p = t->s.phase_count++;
        t->phases[p] = name;
    }
    t->phase = (uint32_t)p;
    ts_ev(t, TDM_ACTION_PHASE, -1, 0, 0, 0);
}

static inline void ts_step(ts *t)
{
    t->step++;
    ts_ev(t, TDM_ACTION_STEP, -1, 0, 0, 0);
}

static inline void ts_segment(ts *t, int dev, tdm_pool_kind pool, uint64_t addr,
                              uint64_t size, uint32_t stack)
{
    t->seg[t->s.segment_count++] = (tdm_snap_segment){
        .device = dev, .pool = (uint8_t)pool, .address = addr, .total_size = size,
        .stack_id = stack, .first_block = (uint32_t)t->s.block_count};
}

/* Appends a block to the last segment, right after its previous block. */
static inline void ts_block(ts *t, tdm_block_state state, uint64_t size, uint64_t req,
                            uint32_t stack)
{
    tdm_snap_segment *g = &t->seg[t->s.segment_count - 1];
    uint64_t addr = g->address;
    for (uint32_t k = 0; k < g->block_count; k++)
        addr += t->blk[g->first_block + k].size;
    t->blk[t->s.block_count++] = (tdm_snap_block){
        .address = addr, .size = size, .requested_size = req,
        .alloc_time_ns = state == TDM_BLOCK_INACTIVE ? 0 : TS_T0, .stack_id = stack,
        .state = (uint8_t)state};
    g->block_count++;
}

/* The golden "small" snapshot (see the top of this file). */
static inline ts *ts_small(void)
{
    ts *t = ts_new();
    ts_device(t, 0, "sim0");
    uint32_t fa = ts_frame(t, "alloc_tensor", "src/tensor.c", 12);
    uint32_t ff = ts_frame(t, "forward", "train.py", 42);
    uint32_t fb = ts_frame(t, "backward", "train.py", 57);
    uint32_t fm = ts_frame(t, "main", "train.py", 7);
    uint32_t s_fwd = ts_stack(t, 3, fa, ff, fm);
    uint32_t s_bwd = ts_stack(t, 3, fa, fb, fm);
    uint32_t s_main = ts_stack(t, 1, fm);
    ts_step(t);
    ts_phase(t, "forward");
    ts_ev(t, TDM_ACTION_SEGMENT_ALLOC, 0, TS_A, 2097152, s_fwd);
    ts_ev(t, TDM_ACTION_ALLOC, 0, TS_A, 1000, s_fwd);
    ts_ev(t, TDM_ACTION_SEGMENT_ALLOC, 0, TS_B, 20971520, s_fwd);
    ts_ev(t, TDM_ACTION_ALLOC, 0, TS_B, 5242880, s_fwd);
    ts_phase(t, "backward");
    ts_ev(t, TDM_ACTION_ALLOC, 0, TS_A + 1024, 500, s_bwd);
    ts_ev(t, TDM_ACTION_FREE_REQUESTED, 0, TS_A, 1000, s_fwd);
    ts_ev(t, TDM_ACTION_FREE_COMPLETED, 0, TS_A, 1000, s_fwd);
    /* Cannot replay: no segment holds 0x1000. */
    ts_ev(t, TDM_ACTION_FREE_COMPLETED, 0, 0x1000, 64, s_main);
    ts_ev(t, TDM_ACTION_FREE_REQUESTED, 0, TS_A + 1024, 500, s_bwd);
    ts_ev(t, TDM_ACTION_OOM, 0, 1048576, 1073741824, s_bwd);
    ts_ev(t, TDM_ACTION_SNAPSHOT, -1, 0, 0, 0);
    ts_segment(t, 0, TDM_POOL_SMALL, TS_A, 2097152, s_fwd);
    ts_block(t, TDM_BLOCK_INACTIVE, 1024, 0, 0);
    ts_block(t, TDM_BLOCK_ACTIVE_PENDING_FREE, 512, 500, s_bwd);
    ts_block(t, TDM_BLOCK_INACTIVE, 2097152 - 1536, 0, 0);
    ts_segment(t, 0, TDM_POOL_LARGE, TS_B, 20971520, s_fwd);
    ts_block(t, TDM_BLOCK_ACTIVE_ALLOCATED, 5242880, 5242880, s_fwd);
    ts_block(t, TDM_BLOCK_INACTIVE, 15728640, 0, 0);
    return t;
}

/* Exports `s` to memory; *report gets the exporter's account. */
static inline unsigned char *ts_export(const tdm_snap *s, int device, size_t *len,
                                       tdm_pt_report *report)
{
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm_pt_report rep;
    assert_int_equal(tdm__pt_write(&w, s, m, device, &rep), TDM_OK);
    unsigned char *out = tdm__pkw_take(&w, len);
    assert_non_null(out);
    assert_int_equal(rep.bytes, *len);
    tdm__pkw_destroy(&w);
    tdm__model_free(m);
    if (report)
        *report = rep;
    return out;
}

#endif
