/* tests/unit/model_fixtures.h: snapshots built by hand for the tests of
 * the analysis model and the summary printer (test_model.c,
 * test_summary.c), so that every expected number is known: a builder with
 * devices, events one millisecond apart, phases and steps, final-state
 * blocks, and stacks of a tidemark frame and three program frames.
 * Header-only, static functions: each test includes it once. */
#ifndef TDM_TEST_MODEL_FIXTURES_H
#define TDM_TEST_MODEL_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model.h"
#include "snap_model.h"

/* ---- a snapshot builder ------------------------------------------------- */

#define MAXN 256

typedef struct tsnap {
    tdm_snap s;
    tdm_event ev[MAXN];
    tdm_snap_segment seg[MAXN];
    tdm_snap_block blk[MAXN];
    tdm_snap_device dev[8];
    tdm_snap_device_stats stats[8];
    tdm_snap_frame frames[16];
    tdm_snap_stack stacks[8];
    uint32_t stack_frames[8][4];
    const char *phases[4];
    uint64_t now; /* ns; each event advances it by 1 ms */
    uint32_t step, phase;
} tsnap;

static inline tsnap *tsnap_new(void)
{
    tsnap *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->s.header.format_version = TDM_FORMAT_VERSION;
    t->s.header.tool_version = "0.1.0";
    t->s.header.host = "testhost";
    t->s.header.pid = 42;
    t->s.header.rank = -1;
    t->s.header.local_rank = -1;
    t->s.header.start_time_us = 1700000000000000ull;
    t->s.header.dump_time_us = 1700000010000000ull;
    t->s.header.command = "./unit";
    t->s.header.config = "";
    t->s.header.metadata = "";
    t->s.header.record_mode = TDM_RECORD_ALL;
    t->s.header.context_mode = TDM_CONTEXT_ALLOC;
    t->s.header.stacks_mode = TDM_STACKS_NATIVE;
    t->s.header.max_entries = 1000;
    t->s.header.alloc_mode = "passthrough";
    t->s.complete = 1;
    t->now = 1700000000000000000ull + 1000000ull; /* start + 1 ms */
    t->phases[0] = "";
    t->phases[1] = "forward";
    t->phases[2] = "backward";
    t->phases[3] = "optimizer";
    t->s.phase_names = t->phases;
    t->s.phase_count = 4;
    /* Frames: a tidemark frame, then three program frames per stack. */
    t->frames[0] = (tdm_snap_frame){0x1000, "tdm_malloc", "alloc/alloc.c", 10, "libtidemark.so.0",
                                    TDM_FRAME_NATIVE};
    const char *fn[] = {"make_weights", "make_activation", "make_temp", "forward",
                        "train_step", "main"};
    for (int i = 0; i < 6; i++)
        t->frames[1 + i] = (tdm_snap_frame){0x2000 + (uint64_t)i * 16, fn[i],
                                            "/src/examples/train.c", 100u + (unsigned)i, "train",
                                            TDM_FRAME_NATIVE};
    t->s.frames = t->frames;
    t->s.frame_count = 7;
    t->s.stacks = t->stacks;
    t->s.stack_count = 4; /* [0] empty; 1 weights, 2 activation, 3 temp */
    for (int k = 1; k <= 3; k++) {
        t->stack_frames[k][0] = 0;             /* tdm_malloc */
        t->stack_frames[k][1] = (uint32_t)k;   /* make_* */
        t->stack_frames[k][2] = 4;             /* forward */
        t->stack_frames[k][3] = 5;             /* train_step */
        t->stacks[k] = (tdm_snap_stack){4, t->stack_frames[k]};
    }
    t->s.events = t->ev;
    t->s.segments = t->seg;
    t->s.blocks = t->blk;
    t->s.devices = t->dev;
    t->s.stats = t->stats;
    return t;
}

static inline void add_device(tsnap *t, int ordinal, uint64_t capacity)
{
    tdm_snap_device *d = &t->dev[t->s.device_count++];
    d->index = ordinal;
    d->vendor = "sim";
    d->name = ordinal == 0 ? "sim0" : "sim1";
    d->capacity = capacity;
}

static inline size_t ev(tsnap *t, tdm_action action, int device, uint64_t addr,
                 uint64_t size, uint32_t stack)
{
    assert_true(t->s.event_count < MAXN);
    size_t i = t->s.event_count++;
    t->now += 1000000ull;
    t->ev[i] = (tdm_event){.time_ns = t->now, .addr = addr, .size = size,
                           .requested = size, .stack_id = stack, .phase = t->phase,
                           .step = t->step, .device = (int16_t)device,
                           .action = (uint8_t)action};
    return i;
}

/* Pass-through style: each allocation is its own segment, whose size
 * (as segment events carry it) is rounded up to 512 B. */
static inline uint64_t seg_size(uint64_t size) { return (size + 511) & ~(uint64_t)511; }

static inline size_t alloc_pt(tsnap *t, int device, uint64_t addr, uint64_t size, uint32_t stack)
{
    ev(t, TDM_ACTION_SEGMENT_ALLOC, device, addr, seg_size(size), stack);
    return ev(t, TDM_ACTION_ALLOC, device, addr, size, stack);
}

static inline size_t free_pt(tsnap *t, int device, uint64_t addr, uint64_t size)
{
    ev(t, TDM_ACTION_FREE_REQUESTED, device, addr, size, 0);
    size_t i = ev(t, TDM_ACTION_FREE_COMPLETED, device, addr, size, 0);
    ev(t, TDM_ACTION_SEGMENT_FREE, device, addr, seg_size(size), 0);
    return i;
}

static inline void mark_phase(tsnap *t, uint32_t phase)
{
    t->phase = phase;
    ev(t, TDM_ACTION_PHASE, -1, 0, 0, 0);
}

static inline void mark_step(tsnap *t)
{
    t->step++;
    ev(t, TDM_ACTION_STEP, -1, 0, 0, 0);
}

/* A final-state segment holding one block. */
static inline void state_block(tsnap *t, int device, uint64_t addr, uint64_t size,
                        uint64_t requested, tdm_block_state state, uint32_t stack)
{
    size_t b = t->s.block_count++, s = t->s.segment_count++;
    t->blk[b] = (tdm_snap_block){.address = addr, .size = size, .requested_size = requested,
                                 .alloc_time_ns = 1, .stack_id = stack, .state = (uint8_t)state};
    t->seg[s] = (tdm_snap_segment){.device = device, .pool = TDM_POOL_NONE, .address = addr,
                                   .total_size = size, .stack_id = stack,
                                   .first_block = (uint32_t)b, .block_count = 1};
}

static inline tdm_model *build(tsnap *t)
{
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(&t->s, &m), TDM_OK);
    assert_non_null(m);
    return m;
}

static inline void assert_never_negative(const tdm_model *m)
{
    for (size_t d = 0; d < m->device_count; d++)
        for (size_t i = 0; i < m->devices[d].sample_count; i++) {
            assert_true(m->devices[d].samples[i].allocated >= 0);
            assert_true(m->devices[d].samples[i].reserved >= 0);
        }
}

#endif
