/* tests/unit/format_fixtures.h: snapshots and files for the .tdm format
 * tests (test_format.c, test_format_robust.c): the sample snapshot kept in
 * tests/data/sample-v1.tdm, a large realistic one, a field-by-field
 * comparison, a spec-driven file builder that does not use the writer
 * (so the tests check the writer and reader against docs/format.md, not
 * against each other), and file helpers.  Header-only: each test program
 * includes it once. */
#ifndef TDM_TESTS_FORMAT_FIXTURES_H
#define TDM_TESTS_FORMAT_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>
#include <msgpack.h>

#include "snap_model.h"
#include "format_internal.h"

/* A snapshot built by hand; every array is heap memory owned here. */
typedef struct fx_snap {
    tdm_snap s;
    uint32_t *stack_frames;
    char *names; /* storage for generated strings */
} fx_snap;

static inline void fx_free(fx_snap *f)
{
    free((void *)f->s.devices);
    free((void *)f->s.phase_names);
    free((void *)f->s.frames);
    free((void *)f->s.stacks);
    free((void *)f->s.events);
    free((void *)f->s.segments);
    free((void *)f->s.blocks);
    free((void *)f->s.stats);
    free(f->stack_frames);
    free(f->names);
    memset(f, 0, sizeof *f);
}

static inline void *fx_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    if (!p) /* for the compiler: never returns NULL */
        abort();
    return p;
}

static inline tdm_stat fx_stat(int64_t base)
{
    tdm_stat s = {base, base * 2, base * 3, base * 3 - base};
    return s;
}

/* The sample snapshot: small, every action, every block state, two
 * devices, shared strings.  tests/data/sample-v1.tdm holds it as written
 * by format version 1; its values must never change. */
static inline void fx_build_sample(fx_snap *f)
{
    memset(f, 0, sizeof *f);
    tdm_snap *s = &f->s;
    s->header = (tdm_snap_header){
        .format_version = TDM_FORMAT_VERSION, .tool_version = "0.1.0",
        .host = "sample-host", .pid = 4242, .rank = 1, .local_rank = 1,
        .world_size = 2, .start_time_us = 1700000000000000u,
        .dump_time_us = 1700000005000000u, .config = "record=all,dump=out.tdm",
        .metadata = "job=sample", .command = "./train_sim --steps 2",
        .record_mode = TDM_RECORD_ALL, .context_mode = TDM_CONTEXT_ALL,
        .stacks_mode = TDM_STACKS_NATIVE, .max_entries = 1000, .alloc_mode = "cache",
    };
    tdm_snap_device *dev = fx_calloc(2, sizeof *dev);
    dev[0] = (tdm_snap_device){0, "sim", "sim0", UINT64_C(16) << 30};
    dev[1] = (tdm_snap_device){1, "sim", "sim1", UINT64_C(8) << 30};
    s->devices = dev;
    s->device_count = 2;
    const char **ph = fx_calloc(4, sizeof *ph);
    ph[0] = "";
    ph[1] = "forward";
    ph[2] = "backward";
    ph[3] = "optimizer";
    s->phase_names = ph;
    s->phase_count = 4;
    tdm_snap_frame *fr = fx_calloc(4, sizeof *fr);
    fr[0] = (tdm_snap_frame){0x401234, "tdm_malloc", "alloc/alloc.c", 120, "libtidemark.so",
                             TDM_FRAME_NATIVE};
    fr[1] = (tdm_snap_frame){0x405678, "train_step", "examples/train_sim.c", 42, "train_sim",
                             TDM_FRAME_NATIVE};
    fr[2] = (tdm_snap_frame){0x405abc, "forward", "examples/train_sim.c", 77, "train_sim",
                             TDM_FRAME_NATIVE};
    fr[3] = (tdm_snap_frame){0x7f0000001000, "??", "", 0, "", TDM_FRAME_NATIVE};
    s->frames = fr;
    s->frame_count = 4;
    f->stack_frames = fx_calloc(6, sizeof *f->stack_frames);
    uint32_t *sf = f->stack_frames;
    sf[0] = 0, sf[1] = 1;             /* stack 1: tdm_malloc <- train_step */
    sf[2] = 0, sf[3] = 2, sf[4] = 1;  /* stack 2: tdm_malloc <- forward <- train_step */
    sf[5] = 3;                        /* stack 3: unknown frame */
    tdm_snap_stack *st = fx_calloc(4, sizeof *st);
    st[1] = (tdm_snap_stack){2, &sf[0]};
    st[2] = (tdm_snap_stack){3, &sf[2]};
    st[3] = (tdm_snap_stack){1, &sf[5]};
    s->stacks = st;
    s->stack_count = 4;

    const uint64_t t0 = 1700000001000000000u, base = 0x7f1200000000u;
    tdm_event *e = fx_calloc(16, sizeof *e);
    size_t n = 0;
#define EV(dt, act, dev_, addr_, size_, req, stream_, stack, phase_, step_, cat)        \
    e[n++] = (tdm_event){.time_ns = t0 + (dt), .addr = (addr_), .size = (size_),      \
                         .requested = (req), .stream = (stream_), .stack_id = (stack), \
                         .phase = (phase_), .step = (step_), .device = (dev_),         \
                         .action = TDM_ACTION_##act, .category = (cat)}
    EV(0, SEGMENT_ALLOC, 0, base, 2097152, 2097152, 0, 1, 0, 0, 0);
    EV(150, ALLOC, 0, base, 4096, 4096, 0, 1, 0, 0, TDM_CATEGORY_PARAMETER);
    EV(900, STEP, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    EV(1000, PHASE, 0, 0, 0, 0, 0, 0, 1, 1, 0);
    EV(1200, ALLOC, 0, base + 4096, 8192, 8000, 0, 2, 1, 1, TDM_CATEGORY_ACTIVATION);
    EV(1500, TAG, 0, base + 4096, 0, 0, 0, 0, 1, 1, TDM_CATEGORY_INPUT);
    EV(2000, PHASE, 0, 0, 0, 0, 0, 0, 2, 1, 0);
    EV(2100, FREE_REQUESTED, 0, base + 4096, 8192, 8000, 0, 2, 2, 1, TDM_CATEGORY_INPUT);
    EV(2300, FREE_COMPLETED, 0, base + 4096, 8192, 8000, 0, 2, 2, 1, TDM_CATEGORY_INPUT);
    EV(2500, SEGMENT_MAP, 1, base + (1u << 30), 20971520, 20971520, 7, 3, 2, 1, 0);
    EV(2600, OOM, 1, 1048576, 33554432, 33554000, 7, 3, 2, 1, TDM_CATEGORY_GRADIENT);
    EV(2700, SEGMENT_UNMAP, 1, base + (1u << 30), 2097152, 2097152, 7, 3, 2, 1, 0);
    EV(3000, PHASE, -1, 0, 0, 0, 0, 0, 3, 1, 0);
    EV(3100, SEGMENT_FREE, 0, base + 0x400000, 2097152, 2097152, 0, 0, 3, 1, 0);
    EV(3200, SNAPSHOT, 0, 0, 0, 0, 0, 0, 3, 1, 0);
#undef EV
    s->events = e;
    s->event_count = n;

    tdm_snap_block *b = fx_calloc(4, sizeof *b);
    b[0] = (tdm_snap_block){base, 4096, 4096, t0 + 150, 1, TDM_BLOCK_ACTIVE_ALLOCATED,
                            TDM_CATEGORY_PARAMETER};
    b[1] = (tdm_snap_block){base + 4096, 8192, 8000, t0 + 1200, 2,
                            TDM_BLOCK_ACTIVE_PENDING_FREE, TDM_CATEGORY_INPUT};
    b[2] = (tdm_snap_block){base + 12288, 2097152 - 12288, 0, 0, 0, TDM_BLOCK_INACTIVE, 0};
    b[3] = (tdm_snap_block){base + (1u << 30), 18874368, 18874000, t0 + 2500, 3,
                            TDM_BLOCK_ACTIVE_ALLOCATED, TDM_CATEGORY_GRADIENT};
    s->blocks = b;
    s->block_count = 4;
    tdm_snap_segment *g = fx_calloc(2, sizeof *g);
    g[0] = (tdm_snap_segment){0, TDM_POOL_SMALL, 0, base, 2097152, 0, 1, 0, 3};
    g[1] = (tdm_snap_segment){1, TDM_POOL_LARGE, 1, base + (1u << 30), 18874368, 7, 3, 3, 1};
    s->segments = g;
    s->segment_count = 2;
    tdm_snap_device_stats *ds = fx_calloc(2, sizeof *ds);
    for (int i = 0; i < 2; i++) {
        tdm_stats *x = &ds[i].stats;
        ds[i].device = i;
        x->size = sizeof *x;
        x->allocated_bytes = fx_stat(100 + i);
        x->reserved_bytes = fx_stat(200 + i);
        x->active_bytes = fx_stat(300 + i);
        x->requested_bytes = fx_stat(400 + i);
        x->allocation = fx_stat(5 + i);
        x->segment = fx_stat(1 + i);
        x->num_alloc_retries = 3 + (uint64_t)i;
        x->num_ooms = (uint64_t)i;
    }
    s->stats = ds;
    s->stats_count = 2;
    s->dropped_events = 7;
    s->complete = 1;
}

/* The sample as format 1.1 adds to it: device 0's stats also per pool
 * (small, large; their current values add up to the all-pool row), device
 * 1 all-pool only.  tests/data/sample-v1.1.tdm holds it; its values must
 * never change. */
static inline void fx_build_sample_pools(fx_snap *f)
{
    fx_build_sample(f);
    tdm_snap_device_stats *ds = fx_calloc(4, sizeof *ds);
    ds[0] = f->s.stats[0]; /* device 0, all */
    ds[3] = f->s.stats[1]; /* device 1, all */
    for (int p = 1; p <= 2; p++) {
        tdm_stats *x = &ds[p].stats;
        ds[p].device = 0;
        ds[p].pool = (uint8_t)p;
        x->size = sizeof *x;
        x->allocated_bytes = fx_stat(p == 1 ? 40 : 60);
        x->reserved_bytes = fx_stat(p == 1 ? 50 : 150);
        x->active_bytes = fx_stat(p == 1 ? 100 : 200);
        x->requested_bytes = fx_stat(p == 1 ? 150 : 250);
        x->allocation = fx_stat(p == 1 ? 2 : 3);
        x->segment = fx_stat(p == 1 ? 0 : 1);
        x->num_alloc_retries = 3; /* per device: the same in every pool */
        x->num_ooms = 0;
    }
    free((void *)f->s.stats);
    f->s.stats = ds;
    f->s.stats_count = 4;
}

static inline uint64_t fx_rand(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* A large snapshot shaped like a training run: allocations and their
 * frees interleaved, sizes from 512 B to 64 MiB, ~1 µs apart, phases and
 * steps advancing, a few thousand stacks.  `frames` unique function names
 * make the string table span several records. */
static inline void fx_build_big(fx_snap *f, size_t nevents, size_t nframes, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    tdm_snap *s = &f->s;
    s->header = (tdm_snap_header){
        .format_version = 1, .tool_version = "0.1.0", .host = "big", .pid = 1,
        .rank = -1, .local_rank = -1, .world_size = 0, .config = "", .metadata = "",
        .command = "big", .record_mode = 2, .context_mode = 3, .stacks_mode = 1,
        .max_entries = nevents, .alloc_mode = "cache",
    };
    f->names = fx_calloc(nframes + 1, 16);
    tdm_snap_frame *fr = fx_calloc(nframes, sizeof *fr);
    for (size_t i = 0; i < nframes; i++) {
        char *name = f->names + 16 * i;
        snprintf(name, 16, "fn_%u", (unsigned)i);
        fr[i] = (tdm_snap_frame){0x400000 + 16 * i, name, i % 3 ? "model.c" : "train.c",
                                 (uint32_t)(i % 1000), "train", TDM_FRAME_NATIVE};
    }
    s->frames = fr;
    s->frame_count = nframes;
    size_t nstacks = nframes + 1;
    tdm_snap_stack *st = fx_calloc(nstacks, sizeof *st);
    f->stack_frames = fx_calloc(nstacks * 4, sizeof *f->stack_frames);
    for (size_t i = 1; i < nstacks; i++) {
        uint32_t depth = (uint32_t)(i % 4) + 1;
        uint32_t *sf = &f->stack_frames[4 * i];
        for (uint32_t k = 0; k < depth; k++)
            sf[k] = (uint32_t)((i + 7 * k) % nframes);
        st[i] = (tdm_snap_stack){depth, sf};
    }
    s->stacks = st;
    s->stack_count = nstacks;
    const char **ph = fx_calloc(4, sizeof *ph);
    ph[0] = "", ph[1] = "forward", ph[2] = "backward", ph[3] = "optimizer";
    s->phase_names = ph;
    s->phase_count = 4;
    tdm_snap_device *dev = fx_calloc(1, sizeof *dev);
    dev[0] = (tdm_snap_device){0, "sim", "sim0", UINT64_C(16) << 30};
    s->devices = dev;
    s->device_count = 1;

    tdm_event *e = fx_calloc(nevents, sizeof *e);
    uint64_t live[256] = {0}, live_size[256] = {0};
    uint64_t t = 1700000000000000000u, next_addr = 0x7f0000000000u;
    for (size_t i = 0; i < nevents; i++) {
        uint64_t r = fx_rand(&seed);
        t += 200 + r % 2000;
        unsigned slot = (unsigned)(r >> 16) & 255;
        tdm_event *x = &e[i];
        x->time_ns = t;
        x->step = (uint32_t)(i / 3000);
        x->phase = (uint32_t)(i / 1000 % 3) + 1;
        x->stack_id = (uint32_t)(1 + (r >> 24) % (nstacks - 1 < 3000 ? nstacks - 1 : 3000));
        x->category = (uint8_t)(x->phase == 1 ? TDM_CATEGORY_ACTIVATION : (r >> 40) % 7);
        if (live[slot]) {
            x->action = TDM_ACTION_FREE_COMPLETED;
            x->addr = live[slot];
            x->size = x->requested = live_size[slot];
            live[slot] = 0;
        } else {
            x->action = TDM_ACTION_ALLOC;
            x->size = x->requested = (uint64_t)512 << ((r >> 48) % 18);
            x->addr = live[slot] = next_addr;
            live_size[slot] = x->size;
            next_addr += x->size;
            if (next_addr > 0x7f0400000000u)
                next_addr = 0x7f0000000000u;
        }
    }
    s->events = e;
    s->event_count = nevents;

    /* Segments of 1..8 blocks tiling 2 MiB each: enough to split records. */
    size_t nseg = nevents / 8 + 1, nblk = 0;
    tdm_snap_segment *g = fx_calloc(nseg, sizeof *g);
    tdm_snap_block *b = fx_calloc(nseg * 8, sizeof *b);
    for (size_t i = 0; i < nseg; i++) {
        uint64_t addr = 0x7e0000000000u + (uint64_t)i * 2097152u;
        uint32_t nb = (uint32_t)(i % 8) + 1;
        g[i] = (tdm_snap_segment){0, (uint8_t)(i % 3), (uint8_t)(i % 2), addr, 2097152, i % 5,
                                  (uint32_t)(i % nstacks), (uint32_t)nblk, nb};
        for (uint32_t k = 0; k < nb; k++) {
            uint64_t size = k + 1 < nb ? 4096 : 2097152 - 4096u * (nb - 1);
            b[nblk++] = (tdm_snap_block){addr, size, size - k, t + k, (uint32_t)(k % nstacks),
                                         (uint8_t)(k % 3), (uint8_t)(k % 7)};
            addr += size;
        }
    }
    s->segments = g;
    s->segment_count = nseg;
    s->blocks = b;
    s->block_count = nblk;
    tdm_snap_device_stats *ds = fx_calloc(1, sizeof *ds);
    ds->device = 0;
    ds->stats.size = sizeof ds->stats;
    ds->stats.allocated_bytes = fx_stat(-5);
    ds->stats.num_ooms = UINT64_MAX;
    s->stats = ds;
    s->stats_count = 1;
    s->dropped_events = 123456789;
    s->complete = 1;
}

static inline void fx_expect_stat(const tdm_stat *a, const tdm_stat *b)
{
    assert_int_equal(a->current, b->current);
    assert_int_equal(a->peak, b->peak);
    assert_int_equal(a->allocated, b->allocated);
    assert_int_equal(a->freed, b->freed);
}

static inline void fx_expect_event(const tdm_event *a, const tdm_event *b)
{
    assert_int_equal(a->time_ns, b->time_ns);
    assert_int_equal(a->addr, b->addr);
    assert_int_equal(a->size, b->size);
    assert_int_equal(a->requested, b->requested);
    assert_int_equal(a->stream, b->stream);
    assert_int_equal(a->stack_id, b->stack_id);
    assert_int_equal(a->phase, b->phase);
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->device, b->device);
    assert_int_equal(a->action, b->action);
    assert_int_equal(a->category, b->category);
}

/* Every field of `got` equals `want` (a snapshot read back).  Tables may
 * be empty in `want`, where the reader supplies stack 0 and phase "". */
static inline void fx_expect_same(const tdm_snap *want, const tdm_snap *got)
{
    const tdm_snap_header *a = &want->header, *b = &got->header;
    assert_int_equal(b->format_version, TDM_FORMAT_VERSION);
    assert_string_equal(a->tool_version, b->tool_version);
    assert_string_equal(a->host, b->host);
    assert_int_equal(a->pid, b->pid);
    assert_int_equal(a->rank, b->rank);
    assert_int_equal(a->local_rank, b->local_rank);
    assert_int_equal(a->world_size, b->world_size);
    assert_int_equal(a->start_time_us, b->start_time_us);
    assert_int_equal(a->dump_time_us, b->dump_time_us);
    assert_string_equal(a->config, b->config);
    assert_string_equal(a->metadata, b->metadata);
    assert_string_equal(a->command, b->command);
    assert_int_equal(a->record_mode, b->record_mode);
    assert_int_equal(a->context_mode, b->context_mode);
    assert_int_equal(a->stacks_mode, b->stacks_mode);
    assert_int_equal(a->max_entries, b->max_entries);
    assert_string_equal(a->alloc_mode, b->alloc_mode);

    assert_int_equal(want->device_count, got->device_count);
    for (size_t i = 0; i < want->device_count; i++) {
        assert_int_equal(want->devices[i].index, got->devices[i].index);
        assert_string_equal(want->devices[i].vendor, got->devices[i].vendor);
        assert_string_equal(want->devices[i].name, got->devices[i].name);
        assert_int_equal(want->devices[i].capacity, got->devices[i].capacity);
    }
    assert_int_equal(want->phase_count ? want->phase_count : 1, got->phase_count);
    assert_string_equal(got->phase_names[0], "");
    for (size_t i = 0; i < want->phase_count; i++)
        assert_string_equal(want->phase_names[i] ? want->phase_names[i] : "", got->phase_names[i]);
    assert_int_equal(want->frame_count, got->frame_count);
    for (size_t i = 0; i < want->frame_count; i++) {
        const tdm_snap_frame *x = &want->frames[i], *y = &got->frames[i];
        assert_int_equal(x->pc, y->pc);
        assert_string_equal(x->function, y->function);
        assert_string_equal(x->file, y->file);
        assert_int_equal(x->line, y->line);
        assert_string_equal(x->module, y->module);
        assert_int_equal(x->kind, y->kind);
    }
    assert_int_equal(want->stack_count ? want->stack_count : 1, got->stack_count);
    assert_int_equal(got->stacks[0].depth, 0);
    for (size_t i = 0; i < want->stack_count; i++) {
        assert_int_equal(want->stacks[i].depth, got->stacks[i].depth);
        for (uint32_t k = 0; k < want->stacks[i].depth; k++)
            assert_int_equal(want->stacks[i].frames[k], got->stacks[i].frames[k]);
    }
    assert_int_equal(want->event_count, got->event_count);
    for (size_t i = 0; i < want->event_count; i++)
        fx_expect_event(&want->events[i], &got->events[i]);
    assert_int_equal(want->segment_count, got->segment_count);
    for (size_t i = 0; i < want->segment_count; i++) {
        const tdm_snap_segment *x = &want->segments[i], *y = &got->segments[i];
        assert_int_equal(x->device, y->device);
        assert_int_equal(x->pool, y->pool);
        assert_int_equal(x->is_expandable, y->is_expandable);
        assert_int_equal(x->address, y->address);
        assert_int_equal(x->total_size, y->total_size);
        assert_int_equal(x->stream, y->stream);
        assert_int_equal(x->stack_id, y->stack_id);
        assert_int_equal(x->first_block, y->first_block);
        assert_int_equal(x->block_count, y->block_count);
    }
    assert_int_equal(want->block_count, got->block_count);
    for (size_t i = 0; i < want->block_count; i++) {
        const tdm_snap_block *x = &want->blocks[i], *y = &got->blocks[i];
        assert_int_equal(x->address, y->address);
        assert_int_equal(x->size, y->size);
        assert_int_equal(x->requested_size, y->requested_size);
        assert_int_equal(x->alloc_time_ns, y->alloc_time_ns);
        assert_int_equal(x->stack_id, y->stack_id);
        assert_int_equal(x->state, y->state);
        assert_int_equal(x->category, y->category);
    }
    assert_int_equal(want->stats_count, got->stats_count);
    for (size_t i = 0; i < want->stats_count; i++) {
        const tdm_snap_device_stats *x = &want->stats[i], *y = &got->stats[i];
        assert_int_equal(x->device, y->device);
        assert_int_equal(x->pool, y->pool);
        assert_int_equal(y->stats.size, sizeof(tdm_stats));
        fx_expect_stat(&x->stats.allocated_bytes, &y->stats.allocated_bytes);
        fx_expect_stat(&x->stats.reserved_bytes, &y->stats.reserved_bytes);
        fx_expect_stat(&x->stats.active_bytes, &y->stats.active_bytes);
        fx_expect_stat(&x->stats.requested_bytes, &y->stats.requested_bytes);
        fx_expect_stat(&x->stats.allocation, &y->stats.allocation);
        fx_expect_stat(&x->stats.segment, &y->stats.segment);
        assert_int_equal(x->stats.num_alloc_retries, y->stats.num_alloc_retries);
        assert_int_equal(x->stats.num_ooms, y->stats.num_ooms);
    }
    assert_int_equal(want->dropped_events, got->dropped_events);
}

/* ---- files ----------------------------------------------------------------- */

/* A fresh empty directory under $TMPDIR (or /tmp); caller frees. */
static inline char *fx_tempdir(void)
{
    const char *base = getenv("TMPDIR");
    char *p = fx_calloc(1, 4096);
    snprintf(p, 4096, "%s/tdm-format-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(p));
    return p;
}

static inline size_t fx_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static inline void fx_rm_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        char p[4200];
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static inline uint8_t *fx_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = fx_calloc((size_t)n + 1, 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Writes `s` through tdm__snap_write and returns the file's bytes. */
static inline uint8_t *fx_write_bytes(const tdm_snap *s, size_t *len)
{
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/snap.tdm", dir);
    assert_int_equal(tdm__snap_write(s, path), TDM_OK);
    uint8_t *buf = fx_slurp(path, len);
    fx_rm_dir(dir);
    return buf;
}

/* ---- a file builder that follows docs/format.md, without the writer ---- */

/* Bitwise CRC-32 (zlib's), written from the spec independently of the
 * library's table-driven one. */
static inline uint32_t fx_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

typedef struct fx_file {
    msgpack_sbuffer file, rec;
    msgpack_packer fpk, pk; /* pk packs the record being built */
} fx_file;

static inline void fx_file_begin(fx_file *b, uint64_t major, uint64_t minor)
{
    msgpack_sbuffer_init(&b->file);
    msgpack_sbuffer_init(&b->rec);
    msgpack_packer_init(&b->fpk, &b->file, msgpack_sbuffer_write);
    msgpack_packer_init(&b->pk, &b->rec, msgpack_sbuffer_write);
    msgpack_pack_array(&b->fpk, 3);
    msgpack_pack_str_with_body(&b->fpk, "tidemark", 8);
    msgpack_pack_uint64(&b->fpk, major);
    msgpack_pack_uint64(&b->fpk, minor);
}

static inline void fx_key(fx_file *b, const char *k)
{
    msgpack_pack_str_with_body(&b->pk, k, strlen(k));
}
static inline void fx_str(fx_file *b, const char *s)
{
    msgpack_pack_str_with_body(&b->pk, s, strlen(s));
}

/* Ends the record built in b->rec as [type, bin, crc]. */
static inline void fx_emit(fx_file *b, uint32_t type)
{
    msgpack_pack_array(&b->fpk, 3);
    msgpack_pack_uint32(&b->fpk, type);
    msgpack_pack_bin_with_body(&b->fpk, b->rec.data, b->rec.size);
    msgpack_pack_uint32(&b->fpk, fx_crc32(type, (const uint8_t *)b->rec.data, b->rec.size));
    msgpack_sbuffer_clear(&b->rec);
}

/* A minimal valid header record. */
static inline void fx_emit_header(fx_file *b, const char *host)
{
    static const char *const keys[] = {"tool_version", "config", "metadata", "command",
                                       "alloc_mode"};
    msgpack_pack_map(&b->pk, 16);
    for (int i = 0; i < 5; i++) {
        fx_key(b, keys[i]);
        fx_str(b, i == 0 ? "9.9.9" : "");
    }
    fx_key(b, "host"), fx_str(b, host);
    static const char *const ints[] = {"pid", "rank", "local_rank", "world_size", "start_time_us",
                                       "dump_time_us", "record_mode", "context_mode",
                                       "stacks_mode", "max_entries"};
    for (int i = 0; i < 10; i++) {
        fx_key(b, ints[i]);
        msgpack_pack_int64(&b->pk, i == 1 || i == 2 ? -1 : i >= 6 && i <= 8 ? 1 : i);
    }
    fx_emit(b, TDM_REC_HEADER);
}

static inline void fx_emit_end(fx_file *b, uint64_t events)
{
    msgpack_pack_map(&b->pk, 1);
    fx_key(b, "events");
    msgpack_pack_uint64(&b->pk, events);
    fx_emit(b, TDM_REC_END);
}

static inline void fx_file_free(fx_file *b)
{
    msgpack_sbuffer_destroy(&b->file);
    msgpack_sbuffer_destroy(&b->rec);
}

/* Reads a buffer through an exact-size heap copy, so ASan sees any read
 * past the end. */
static inline tdm_status fx_read_exact(const uint8_t *data, size_t len, int partial_ok,
                                tdm_snap **out, tdm_read_error *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, data, len);
    tdm_status st = tdm__snap_read_buffer(copy, len, partial_ok, out, err);
    free(copy);
    return st;
}

/* A committed sample of format 1.minor (tests/data/): its bytes in
 * *bytes (free them), read exactly; the test fails if it does not read. */
static inline tdm_snap *fx_read_sample(const char *path, unsigned minor, uint8_t **bytes,
                                       size_t *len)
{
    *bytes = fx_slurp(path, len);
    assert_true(*len > 12);
    assert_int_equal((*bytes)[10], 1); /* major */
    assert_int_equal((*bytes)[11], minor);
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact(*bytes, *len, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s: %s", path, tdm_status_name(st), err.message);
    return s;
}

/* While the writer is at format 1.minor, it writes a sample's exact bytes
 * from the snapshot it was made of. */
static inline void fx_expect_writer_bytes(const tdm_snap *made, unsigned minor,
                                          const uint8_t *bytes, size_t len)
{
    if (TDM_FORMAT_VERSION != 1 || TDM_FMT_MINOR != minor)
        return;
    size_t now_len;
    uint8_t *now = fx_write_bytes(made, &now_len);
    assert_int_equal(now_len, len);
    assert_memory_equal(now, bytes, len);
    free(now);
}

/* A record's envelope, found by walking the file as the spec describes. */
typedef struct fx_rec {
    size_t start;       /* first byte of [type, payload, crc] */
    uint32_t type;
    size_t payload;     /* offset of the payload bytes */
    size_t payload_len;
    size_t crc_at;      /* offset of the checksum's msgpack integer */
    size_t crc_width;   /* its bytes after the marker: 0 (fixint), 1, 2 or 4 */
} fx_rec;

static inline size_t fx_records(const uint8_t *p, size_t len, fx_rec *out, size_t max)
{
    size_t n = 0, at = 12; /* 93 a8 "tidemark" 01 00 */
    while (at < len && n < max) {
        fx_rec *r = &out[n++];
        r->start = at;
        assert_int_equal(p[at], 0x93);
        assert_true(p[at + 1] <= 0x7f);
        r->type = p[at + 1];
        uint8_t m = p[at + 2];
        size_t lb = m == 0xc4 ? 1 : m == 0xc5 ? 2 : 4, blen = 0;
        for (size_t i = 0; i < lb; i++)
            blen = blen << 8 | p[at + 3 + i];
        r->payload = at + 3 + lb;
        r->payload_len = blen;
        r->crc_at = r->payload + blen;
        uint8_t c = p[r->crc_at];
        r->crc_width = c <= 0x7f ? 0 : c == 0xcc ? 1 : c == 0xcd ? 2 : 4;
        at = r->crc_at + 1 + r->crc_width;
    }
    return n;
}

/* Rewrites a record's checksum after its payload was changed; returns 0 if
 * the new value does not fit the width the writer chose. */
static inline int fx_fix_crc(uint8_t *p, const fx_rec *r)
{
    uint32_t crc = fx_crc32(r->type, p + r->payload, r->payload_len);
    if (r->crc_width != 4)
        return 0;
    for (int i = 0; i < 4; i++)
        p[r->crc_at + 1 + i] = (uint8_t)(crc >> (24 - 8 * i));
    return 1;
}

#endif
