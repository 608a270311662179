/* bench/replay.h: what the parts of bench/replay share (see replay.c). */
#ifndef TDM_BENCH_REPLAY_H
#define TDM_BENCH_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct op {
    uint32_t id;   /* allocation id, dense from 0 */
    uint8_t free;  /* 1 = free of id, 0 = alloc */
    uint64_t size; /* bytes */
} op;

typedef struct trace {
    char name[256];
    char path[4096]; /* the file it was read from */
    op *ops;
    size_t n, cap;
    uint32_t ids;      /* distinct allocation ids */
    uint64_t *id_size; /* [ids]: bytes of each allocation */
    size_t pairs;      /* allocations (each freed by the replay) */
} trace;

/* One allocator under test.  `ctx` is the allocator's own (for tidemark:
 * the stream); `before` (may be NULL) runs untimed ahead of each pass, so
 * columns that share one allocator (recording off / on) can be interleaved. */
typedef struct backend {
    const char *name;
    int (*alloc)(void *ctx, void **p, size_t size);
    void (*free)(void *ctx, void *p, size_t size);
    void (*before)(void);
    void *ctx;
    int available; /* 0: library missing at run time, the column says n/a */
    int peer;      /* a host allocator tidemark is compared with */
} backend;

/* replay_peers.c */
enum { COL_CACHE, COL_CACHE_REC, COL_GLIBC, COL_JEMALLOC, COL_MIMALLOC, COL_COUNT };
void peers_prepare_process(char **argv); /* before anything allocates much */
void peers_fill(backend cols[COL_COUNT]);
void use_cache(void);                    /* fresh tidemark cache, recording off */
/* A fresh cache of `devices` sim devices (a free then finds its device by
 * the devices' address spans), recording off. */
void use_cache_devices(int devices);
/* The same with expandable_segments set: the fragmentation policy
 * (docs/allocator.md, "Fragmentation"). */
void use_cache_with(int expandable_segments);
void cache_set_stream_ctx(backend *b, uintptr_t stream);
/* Threads each on a device of their own: what per-stream locks could give
 * (separate pools, locks and block maps, nothing shared), and the
 * same with one lock per call around shared stats, which exact
 * device-wide stats (allocated, active, requested bytes, allocations,
 * their peaks) would need; emulated around the call (ctx = the device). */
enum { DCOL_OWN_DEVICE, DCOL_COUNT };
void device_columns(backend cols[DCOL_COUNT]);
extern const char *peers_policy_text;    /* how requests are treated */

/* replay_run.c */
typedef struct spread {
    double median, min, max; /* ns per alloc+free pair */
    double faults;           /* median minor page faults per pass */
} spread;
double now_s(void);
int load_trace(const char *path, trace *t);
void run_trace_rounds(backend cols[COL_COUNT], const trace *t, int rounds, spread out[COL_COUNT]);
void run_hit_rounds(backend cols[COL_COUNT], size_t size, long iters, int rounds,
                    spread out[COL_COUNT]);
/* Runs `passes` passes of `t` through b (b->before once, first); 0, or -1
 * when an allocation failed.  For replay_count.c's counted runs. */
int run_passes(const backend *b, const trace *t, long passes);
/* replay_count.c: `replay --instructions`, and its counted child. */
int count_instructions(int argc, char **argv);
int count_child(char **argv);
/* The traces named in argv[1..argc), else the default folders'. */
int load_traces(int argc, char **argv, trace *traces, int max);
/* `threads` threads replay `t` at once, each with its own ids; ns per pair
 * per thread = wall time until the slowest thread is done ÷ the trace's
 * pairs (so perfect scaling keeps it flat).  Recording is off. */
/* TCOL_CACHE_SERIAL: the work of N threads on one stream done by one
 * thread, their copies of `t` interleaved in runs of INTERLEAVE_CALLS
 * calls: N threads served one after the other by a lock that costs
 * nothing.  One pool then holds every copy's blocks, which costs each
 * call more than one copy alone does. */
#define INTERLEAVE_CALLS 4096
enum { TCOL_CACHE_SAME, TCOL_CACHE_SERIAL, TCOL_CACHE_STREAMS, TCOL_GLIBC, TCOL_JEMALLOC,
       TCOL_MIMALLOC, TCOL_COUNT };
void run_thread_rounds(backend cols[COL_COUNT], const trace *t, int threads, int rounds,
                       spread out[TCOL_COUNT]);
/* The same for device_columns, thread i on device i. */
void run_device_rounds(backend cols[DCOL_COUNT], const trace *t, int threads, int rounds,
                       spread out[DCOL_COUNT]);

#endif
