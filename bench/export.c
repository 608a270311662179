/* bench/export.c: seconds per million events for every `tidemark export`
 * format, and for importing the pytorch pickle back.
 *
 * It builds a synthetic snapshot in memory (default 1,000,000 events):
 * one device, 64 segments of 32 MiB carved in 512 KiB slots, steps of
 * forward/backward/optimizer phases whose allocations are freed in a
 * shuffled order, 400 distinct frames in 200 stacks of depth 12, and a
 * final state consistent with the history.  Then, for each row of the
 * export table (export_formats.c; new formats are measured without any
 * change here), it times the export into a sink that only counts bytes,
 * best of --repeat runs.  The analysis model is built once, timed on its
 * own row (every export needs it).
 *
 * usage: export [--events N] [--repeat N] [--format NAME]... [--save-pickle PATH]
 * (--save-pickle keeps the pytorch pickle, e.g. for the Python checker).
 * Build RelWithDebInfo or Release before reading numbers.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snap_model.h"
#include "model.h"
#include "export_formats.h"
#include "import_formats.h"
#include "pickle_write.h"
#include "export_pytorch.h"

#define SEGMENTS 64
#define SEG_SIZE (32u << 20)
#define SLOT (512u << 10)
#define SLOTS_PER_SEG (SEG_SIZE / SLOT)
#define NFRAMES 400
#define NSTACKS 200
#define DEPTH 12

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct synth {
    tdm_snap s;
    char names[NFRAMES][48];
    char files[NFRAMES / 10][48];
    uint32_t stack_frames[NSTACKS * DEPTH];
    uint32_t slot_req[SEGMENTS * SLOTS_PER_SEG]; /* requested bytes; 0 = free */
    uint32_t slot_stack[SEGMENTS * SLOTS_PER_SEG];
} synth;

static tdm_event *push(tdm_snap *s, size_t cap, uint64_t *t, tdm_action a, uint64_t addr,
                       uint64_t size, uint32_t stack, uint32_t phase, uint32_t step)
{
    if (s->event_count == cap)
        return NULL;
    tdm_event *e = (tdm_event *)&s->events[s->event_count++];
    *e = (tdm_event){.time_ns = *t, .addr = addr, .size = size, .requested = size,
                     .stack_id = stack, .phase = phase, .step = step,
                     .device = a == TDM_ACTION_PHASE || a == TDM_ACTION_STEP ? -1 : 0,
                     .action = (uint8_t)a};
    *t += 700;
    return e;
}

static synth *build(size_t nev)
{
    synth *y = calloc(1, sizeof *y);
    tdm_snap *s = &y->s;
    static tdm_snap_device dev = {0, "sim", "sim0", UINT64_C(80) << 30};
    static const char *phases[] = {"", "forward", "backward", "optimizer"};
    s->header = (tdm_snap_header){.format_version = TDM_FORMAT_VERSION, .tool_version = "0.1.0",
                                  .host = "bench", .pid = 1, .rank = -1, .local_rank = -1,
                                  .start_time_us = UINT64_C(1700000000000000), .config = "",
                                  .metadata = "", .command = "bench/export",
                                  .record_mode = TDM_RECORD_ALL,
                                  .context_mode = TDM_CONTEXT_ALLOC,
                                  .stacks_mode = TDM_STACKS_NATIVE, .max_entries = nev,
                                  .alloc_mode = "cache"};
    s->devices = &dev;
    s->device_count = 1;
    s->phase_names = phases;
    s->phase_count = 4;
    tdm_snap_frame *fr = calloc(NFRAMES, sizeof *fr);
    for (int i = 0; i < NFRAMES / 10; i++)
        snprintf(y->files[i], sizeof y->files[i], "/src/model/module_%02d.py", i);
    for (int i = 0; i < NFRAMES; i++) {
        snprintf(y->names[i], sizeof y->names[i], "layer_%03d_forward_impl", i);
        fr[i] = (tdm_snap_frame){0x400000 + 64u * i, y->names[i], y->files[i % (NFRAMES / 10)],
                                 (uint32_t)(10 + i), "libmodel.so", TDM_FRAME_NATIVE};
    }
    s->frames = fr;
    s->frame_count = NFRAMES;
    tdm_snap_stack *st = calloc(NSTACKS + 1, sizeof *st);
    for (int k = 0; k < NSTACKS; k++) {
        for (int d = 0; d < DEPTH; d++)
            y->stack_frames[k * DEPTH + d] = (uint32_t)(rnd() % NFRAMES);
        st[k + 1] = (tdm_snap_stack){DEPTH, &y->stack_frames[k * DEPTH]};
    }
    s->stacks = st;
    s->stack_count = NSTACKS + 1;

    size_t cap = nev;
    s->events = calloc(cap, sizeof *s->events);
    const uint64_t base = UINT64_C(0x7f3000000000);
    uint64_t t = s->header.start_time_us * 1000 + 5000;
    for (int g = 0; g < SEGMENTS; g++)
        push(s, cap, &t, TDM_ACTION_SEGMENT_ALLOC, base + (uint64_t)g * SEG_SIZE, SEG_SIZE,
             1 + (uint32_t)(rnd() % NSTACKS), 0, 0);
    /* Free slots, as a stack of indices. */
    size_t nslots = SEGMENTS * SLOTS_PER_SEG, nfree = nslots;
    uint32_t *free_slots = malloc(nslots * sizeof *free_slots);
    uint32_t *live = malloc(nslots * sizeof *live);
    size_t nlive = 0;
    for (size_t i = 0; i < nslots; i++)
        free_slots[i] = (uint32_t)(nslots - 1 - i);
    uint32_t step = 0;
    while (s->event_count + 8 < cap) {
        step++;
        push(s, cap, &t, TDM_ACTION_STEP, 0, 0, 0, 0, step);
        for (uint32_t ph = 1; ph <= 3 && s->event_count + 8 < cap; ph++) {
            push(s, cap, &t, TDM_ACTION_PHASE, 0, 0, 0, ph, step);
            int n = 200 + (int)(rnd() % 200);
            for (int k = 0; k < n && s->event_count + 4 < cap; k++) {
                /* Allocate while there is room and the coin says so; else free. */
                if (nfree && (nlive < 64 || rnd() % 100 < 52)) {
                    uint32_t slot = free_slots[--nfree];
                    uint32_t req = 1 + (uint32_t)(rnd() % SLOT);
                    uint32_t sid = 1 + (uint32_t)(rnd() % NSTACKS);
                    y->slot_req[slot] = req;
                    y->slot_stack[slot] = sid;
                    live[nlive++] = slot;
                    push(s, cap, &t, TDM_ACTION_ALLOC, base + (uint64_t)slot * SLOT, req, sid,
                         ph, step);
                } else if (nlive) {
                    size_t pick = (size_t)(rnd() % nlive);
                    uint32_t slot = live[pick];
                    live[pick] = live[--nlive];
                    uint64_t addr = base + (uint64_t)slot * SLOT;
                    push(s, cap, &t, TDM_ACTION_FREE_REQUESTED, addr, y->slot_req[slot],
                         y->slot_stack[slot], ph, step);
                    push(s, cap, &t, TDM_ACTION_FREE_COMPLETED, addr, y->slot_req[slot],
                         y->slot_stack[slot], ph, step);
                    y->slot_req[slot] = 0;
                    free_slots[nfree++] = slot;
                }
            }
        }
    }
    free(free_slots);
    free(live);
    s->header.dump_time_us = t / 1000;

    /* The final state: live slots are blocks, runs of free slots one
     * inactive block each. */
    tdm_snap_segment *segs = calloc(SEGMENTS, sizeof *segs);
    tdm_snap_block *blk = calloc(nslots, sizeof *blk);
    size_t nb = 0;
    for (int g = 0; g < SEGMENTS; g++) {
        segs[g] = (tdm_snap_segment){.device = 0, .pool = TDM_POOL_LARGE,
                                     .address = base + (uint64_t)g * SEG_SIZE,
                                     .total_size = SEG_SIZE, .stack_id = 1,
                                     .first_block = (uint32_t)nb};
        for (uint32_t k = 0; k < SLOTS_PER_SEG; k++) {
            size_t slot = (size_t)g * SLOTS_PER_SEG + k;
            uint64_t addr = base + (uint64_t)slot * SLOT;
            if (y->slot_req[slot])
                blk[nb++] = (tdm_snap_block){addr, SLOT, y->slot_req[slot], 1,
                                             y->slot_stack[slot], TDM_BLOCK_ACTIVE_ALLOCATED, 0};
            else if (nb > segs[g].first_block && blk[nb - 1].state == TDM_BLOCK_INACTIVE)
                blk[nb - 1].size += SLOT;
            else
                blk[nb++] = (tdm_snap_block){addr, SLOT, 0, 0, 0, TDM_BLOCK_INACTIVE, 0};
        }
        segs[g].block_count = (uint32_t)(nb - segs[g].first_block);
    }
    s->segments = segs;
    s->segment_count = SEGMENTS;
    s->blocks = blk;
    s->block_count = nb;
    s->complete = 1;
    return y;
}

/* A FILE that only counts what is written to it. */
static ssize_t count_write(void *cookie, const char *buf, size_t n)
{
    (void)buf;
    *(uint64_t *)cookie += n;
    return (ssize_t)n;
}

static int wanted(const char *name, char **only, int nonly)
{
    if (!nonly)
        return 1;
    for (int i = 0; i < nonly; i++)
        if (strcmp(only[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    size_t nev = 1000000;
    int repeat = 3, nonly = 0;
    const char *save = NULL;
    char *only[16];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            nev = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc && nonly < 16)
            only[nonly++] = argv[++i];
        else if (strcmp(argv[i], "--save-pickle") == 0 && i + 1 < argc)
            save = argv[++i];
        else {
            fprintf(stderr, "usage: export [--events N] [--repeat N] [--format NAME]... "
                            "[--save-pickle PATH]\n");
            return 1;
        }
    }
    if (nev < 1000 || repeat < 1) {
        fprintf(stderr, "export: need --events >= 1000 and --repeat >= 1\n");
        return 1;
    }
    double t0 = now();
    synth *y = build(nev);
    double t_build = now() - t0;
    tdm_snap *s = &y->s;
    double per = 1e6 / (double)s->event_count;

    printf("bench/export: %zu events (%zu segments, %zu blocks, %zu stacks), built in %.2f s\n",
           s->event_count, s->segment_count, s->block_count, s->stack_count, t_build);
    printf("%-16s %10s %12s %12s %10s\n", "step", "seconds", "s/1M events", "MB written",
           "MB/s");
    tdm_model *m = NULL;
    double best = 1e9;
    for (int r = 0; r < repeat; r++) {
        if (m)
            tdm__model_free(m);
        t0 = now();
        if (tdm__model_build(s, &m) != TDM_OK) {
            fprintf(stderr, "export: model failed\n");
            return 1;
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    printf("%-16s %10.3f %12.3f %12s %10s\n", "model", best, best * per, "-", "-");

    for (size_t f = 0; f < tdm__export_format_count; f++) {
        const tdm_export_format *fmt = &tdm__export_formats[f];
        if (!wanted(fmt->name, only, nonly))
            continue;
        if (!fmt->write) {
            printf("%-16s not built in\n", fmt->name);
            continue;
        }
        tdm_export_context ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.input_path = "synthetic";
        ctx.snap = s;
        ctx.model = m;
        ctx.device = -1;
        ctx.quiet = 1;
        ctx.format = fmt;
        best = 1e9;
        uint64_t bytes = 0;
        tdm_status st = TDM_OK;
        for (int r = 0; r < repeat && st == TDM_OK; r++) {
            uint64_t count = 0;
            cookie_io_functions_t io = {.write = count_write};
            FILE *out = fopencookie(&count, "w", io);
            t0 = now();
            st = fmt->write(out, &ctx);
            fclose(out);
            double dt = now() - t0;
            best = dt < best ? dt : best;
            bytes = count;
        }
        if (st != TDM_OK) {
            printf("%-16s failed: %s\n", fmt->name, tdm_strerror(st));
            continue;
        }
        printf("%-16s %10.3f %12.3f %12.1f %10.0f\n", fmt->name, best, best * per,
               bytes / 1e6, bytes / 1e6 / best);
    }

    if (wanted("import", only, nonly) || wanted("pytorch", only, nonly)) {
        tdm_pkw w;
        tdm__pkw_init_mem(&w);
        tdm__pt_write(&w, s, m, -1, NULL);
        size_t len;
        unsigned char *pk = tdm__pkw_take(&w, &len);
        tdm__pkw_destroy(&w);
        FILE *f = save && pk ? fopen(save, "wb") : NULL;
        if (f) {
            fwrite(pk, 1, len, f);
            fclose(f);
        }
        best = 1e9;
        for (int r = 0; r < repeat && pk; r++) {
            tdm_snap *back = NULL;
            char err[256];
            t0 = now();
            tdm_status st = tdm__import_pytorch_buffer(pk, len, "bench", &back, NULL, err,
                                                       sizeof err);
            double dt = now() - t0;
            if (st != TDM_OK) {
                printf("import pytorch failed: %s\n", err);
                break;
            }
            tdm__import_pytorch_free(back);
            best = dt < best ? dt : best;
        }
        printf("%-16s %10.3f %12.3f %12.1f %10.0f\n", "import pytorch", best, best * per,
               len / 1e6, len / 1e6 / best);
        free(pk);
    }
    tdm__model_free(m);
    return 0;
}
