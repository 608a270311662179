/* tests/unit/gate_fixtures.h: snapshots built by hand for the tests of
 * the memory gates (test_gate.c) and their reports (test_gate_report.c),
 * so that every figure is known: a builder with devices, events, steps and
 * phases, final-state blocks and stacks whose ids and load addresses differ
 * between "runs"; loading one as an input; evaluating gates; finding a
 * result.  Header-only, static functions: each test includes it once. */
#ifndef TDM_TEST_GATE_FIXTURES_H
#define TDM_TEST_GATE_FIXTURES_H

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
                                    "/usr/lib/libtidemark.so.0", TDM_FRAME_NATIVE};
    for (int i = 0; i < 6; i++)
        t->frames[1 + i] = (tdm_snap_frame){pc_base + 0x2000 + (uint64_t)i * 16, fn_names[i],
                                            shuffle ? "/other/build/train.c" : "/src/train.c",
                                            100u + (unsigned)i, "train", TDM_FRAME_NATIVE};
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

__attribute__((unused)) static const tdm_gate_result *find(const tdm_gate_report *rep, size_t file, tdm_gate_kind k,
                                   int device)
{
    for (size_t i = 0; i < rep->count; i++)
        if (rep->results[i].file == file && rep->results[i].kind == k &&
            rep->results[i].device == device)
            return &rep->results[i];
    fail_msg("no result for file %zu gate %d device %d", file, (int)k, device);
    return NULL;
}

#endif
