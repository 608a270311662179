/* bench/replay.c: replays allocation traces (the CSV files of shared/traces,
 * or any file in that format named on the command line) through
 *   - tidemark's caching allocator on the sim device, recording off and
 *     recording every event without stacks, and
 *   - the host allocators it is compared with: glibc malloc, jemalloc and
 *     mimalloc (dlopen()ed; see replay_peers.c for how each is set up so
 *     that none pays for mmap/munmap or purging on the hot path),
 * all in one process, in interleaved rounds (replay_run.c).  It prints, per
 * trace, tidemark's reserved ÷ allocated when allocated peaks under the
 * default rules and under the fragmentation policy (expandable_segments=1,
 * docs/allocator.md; results in docs/allocator-performance.md), ns per
 * alloc+free pair (median, min–max over the rounds), the ratio to the
 * best host allocator and minor page faults per pass; the
 * pure hit path (the same size freed and taken again) for every column;
 * and 1, 2 and 4 threads replaying the same trace at once (each its own
 * ids), tidemark on one stream and on streams 1..N (a shard each), and on
 * devices of their own, each with its ratio to one thread; and the work
 * of N threads on one stream done by one thread (their copies of the
 * trace interleaved), the floor of any lock that serves them in turn.
 *
 * Memory is never touched: this times the allocators, not page faults.
 * Build with the default RelWithDebInfo (or Release) before reading it.
 * Traces: the files named, else TDM_TRACES_DIR's, else those of
 * shared/traces and bench/traces.
 * Environment: TDM_TRACES_DIR (traces), TDM_BENCH_ROUNDS (default 15),
 * TDM_BENCH_HIT_ITERS (pairs per hit sample, default 200000).
 * `replay --instructions [trace.csv ...]` counts instructions per pair
 * instead (replay_count.c): figures the machine's load does not move.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "replay.h"
#include "tidemark.h"

/* Reserved ÷ allocated: peak over peak, and at the moment allocated peaks;
 * under PyTorch's rules (expandable 0) or the fragmentation policy (1). */
static void ratios(const trace *t, int expandable, double *peak_ratio, double *at_peak_ratio)
{
    use_cache_with(expandable);
    void **slots = calloc(t->ids, sizeof *slots);
    int64_t best_alloc = 0, reserved_then = 0;
    for (size_t i = 0; i < t->n; i++) {
        const op *o = &t->ops[i];
        if (o->free) {
            tdm_free(slots[o->id]);
            slots[o->id] = NULL;
            continue;
        }
        if (tdm_malloc(&slots[o->id], o->size, 0, 0) != TDM_OK)
            continue; /* out of device memory: slots[o->id] is NULL */
        tdm_stats s = {.size = sizeof s};
        if (tdm_memory_stats(0, &s) == TDM_OK && s.allocated_bytes.current > best_alloc) {
            best_alloc = s.allocated_bytes.current;
            reserved_then = s.reserved_bytes.current;
        }
    }
    tdm_stats s = {.size = sizeof s};
    if (tdm_memory_stats(0, &s) != TDM_OK) {
        fprintf(stderr, "replay: tdm_memory_stats failed\n");
        exit(1);
    }
    *peak_ratio = (double)s.reserved_bytes.peak / (double)s.allocated_bytes.peak;
    *at_peak_ratio = (double)reserved_then / (double)best_alloc;
    for (size_t i = 0; i < t->ids; i++)
        if (slots[i])
            tdm_free(slots[i]);
    free(slots);
}

/* The best (lowest) median among the host allocators that ran; -1: none. */
static double best_peer(const backend *cols, const spread *s, const int *col_of, int n)
{
    double best = -1;
    for (int i = 0; i < n; i++)
        if (cols[col_of[i]].peer && s[i].median >= 0 && (best < 0 || s[i].median < best))
            best = s[i].median;
    return best;
}

static void print_row(const char *name, const spread *s, double best, int with_faults)
{
    if (s->median < 0) {
        printf("  %-24s %10s\n", name, "n/a");
        return;
    }
    char range[48], ratio[16];
    snprintf(range, sizeof range, "%.1f-%.1f", s->min, s->max);
    if (best > 0)
        snprintf(ratio, sizeof ratio, "%.2fx", s->median / best);
    else
        snprintf(ratio, sizeof ratio, "n/a");
    printf("  %-24s %10.1f %17s %9s", name, s->median, range, ratio);
    if (with_faults)
        printf(" %10.1f", s->faults);
    printf("\n");
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : fallback;
}

static int load_dir(const char *dir, trace *traces, int nt, int max)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL && nt < max) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".csv") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (load_trace(path, &traces[nt]) == 0)
            nt++;
    }
    if (dp)
        closedir(dp);
    return nt;
}

int load_traces(int argc, char **argv, trace *traces, int max)
{
    int nt = 0;
    if (argc > 1) {
        for (int i = 1; i < argc && nt < max; i++)
            if (load_trace(argv[i], &traces[nt]) == 0)
                nt++;
            else
                fprintf(stderr, "replay: cannot read a trace from %s\n", argv[i]);
        return nt;
    }
    if (getenv("TDM_TRACES_DIR")) {
        nt = load_dir(getenv("TDM_TRACES_DIR"), traces, nt, max);
        if (nt == 0)
            fprintf(stderr, "replay: no traces in %s\n", getenv("TDM_TRACES_DIR"));
        return nt;
    }
    /* The real traces beside the checkout, then those captured in bench/traces. */
    char here[1024], dir[1200];
    snprintf(here, sizeof here, "%s", __FILE__);
    char *slash = strrchr(here, '/');
    if (slash)
        *slash = '\0';
    snprintf(dir, sizeof dir, "%s/../../shared/traces", here);
    nt = load_dir(dir, traces, nt, max);
    snprintf(dir, sizeof dir, "%s/traces", here);
    nt = load_dir(dir, traces, nt, max);
    if (nt == 0)
        fprintf(stderr, "replay: no traces (give files, or set TDM_TRACES_DIR; looked in "
                        "%s/../../shared/traces and %s)\n",
                here, dir);
    return nt;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--count-child") == 0)
        return count_child(argv);
    if (argc > 1 && strcmp(argv[1], "--instructions") == 0)
        return count_instructions(argc - 1, argv + 1);
    peers_prepare_process(argv);
    static trace traces[64];
    int nt = load_traces(argc, argv, traces, 64);
    if (nt == 0)
        return 2;
    const int rounds = env_int("TDM_BENCH_ROUNDS", 15);
    const long hit_iters = env_int("TDM_BENCH_HIT_ITERS", 200000);
    backend cols[COL_COUNT];
    peers_fill(cols);
    int all_cols[COL_COUNT];
    for (int c = 0; c < COL_COUNT; c++)
        all_cols[c] = c;

    printf("ns per alloc+free pair: median and min-max of %d interleaved rounds,\n"
           "ratio = median / best host allocator's median.\n%s\n",
           rounds, peers_policy_text);
    printf("\nfragmentation: tidemark's reserved/allocated when allocated peaks\n"
           "  %-24s %10s %24s\n",
           "trace", "default", "expandable_segments=1");
    for (int i = 0; i < nt; i++) {
        double peaks = 0, policy_peaks = 0, at_peak = 0, policy_at_peak = 0;
        ratios(&traces[i], 0, &peaks, &at_peak);
        ratios(&traces[i], 1, &policy_peaks, &policy_at_peak);
        printf("  %-24s %10.3f %24.3f\n", traces[i].name, at_peak, policy_at_peak);
    }

    for (int i = 0; i < nt; i++) {
        trace *t = &traces[i];
        double r1 = 0, r2 = 0;
        ratios(t, 0, &r1, &r2);
        use_cache();
        spread s[COL_COUNT];
        run_trace_rounds(cols, t, rounds, s);
        double best = best_peer(cols, s, all_cols, COL_COUNT);
        printf("\n%s: %zu pairs; tidemark reserved/allocated %.3f at peaks, %.3f when "
               "allocated peaks\n",
               t->name, t->pairs, r1, r2);
        printf("  %-24s %10s %17s %9s %10s\n", "allocator", "median ns", "min-max ns", "ratio",
               "faults/pass");
        for (int c = 0; c < COL_COUNT; c++)
            print_row(cols[c].name, &s[c], best, 1);
    }

    printf("\npure hit path (the same size freed and taken again), ns per pair\n");
    const size_t sizes[] = {512, 4096, 1 << 20, 8 << 20, 64 << 20};
    use_cache();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        spread s[COL_COUNT];
        run_hit_rounds(cols, sizes[i], hit_iters, rounds, s);
        double best = best_peer(cols, s, all_cols, COL_COUNT);
        printf("\n%zu B\n", sizes[i]);
        for (int c = 0; c < COL_COUNT; c++)
            print_row(cols[c].name, &s[c], best, 0);
    }

    printf("\nthreads replaying the same trace at once (each its own ids), recording off;\n"
           "ns per pair per thread = wall time until the last thread ends / pairs;\n"
           "ratio = median / the same column's one-thread median (the columns share\n"
           "one allocator, so with one thread its device already serves two streams);\n"
           "\"same work, one thread\": the N threads' copies of the trace on one stream,\n"
           "interleaved in runs of %d calls by one thread (ratio to one stream's one\n"
           "thread): N threads on one stream served one after the other by a lock\n"
           "that costs nothing (one pool holding N copies' blocks costs each call\n"
           "more than one copy does)\n",
           INTERLEAVE_CALLS);
    static const char *tnames[TCOL_COUNT] = {"tidemark, one stream",
                                             "  same work, one thread",
                                             "tidemark, streams 1..N", "glibc", "jemalloc",
                                             "mimalloc"};
    for (int i = 0; i < nt; i++) {
        spread one[TCOL_COUNT];
        for (int threads = 1; threads <= 4; threads *= 2) {
            use_cache();
            spread s[TCOL_COUNT];
            run_thread_rounds(cols, &traces[i], threads, rounds, s);
            if (threads == 1)
                memcpy(one, s, sizeof one);
            printf("\n%s, %d thread%s\n", traces[i].name, threads, threads > 1 ? "s" : "");
            for (int c = 0; c < TCOL_COUNT; c++)
                if (c != TCOL_CACHE_SERIAL || threads > 1)
                    print_row(tnames[c], &s[c],
                              one[c == TCOL_CACHE_SERIAL ? TCOL_CACHE_SAME : c].median, 0);
        }
    }
    printf("\nthreads each on a device of their own (4 sim devices), recording off: nothing\n"
           "shared (a free finds its device by the devices' address spans), each device\n"
           "serving one stream, as a device with one stream does; the reference for the\n"
           "shards of the rows above; ratio = median / the one-thread median\n");
    backend dcols[DCOL_COUNT];
    device_columns(dcols);
    for (int i = 0; i < nt; i++) {
        use_cache_devices(4);
        spread one[DCOL_COUNT];
        for (int threads = 1; threads <= 4; threads *= 2) {
            spread s[DCOL_COUNT];
            run_device_rounds(dcols, &traces[i], threads, rounds, s);
            if (threads == 1)
                memcpy(one, s, sizeof one);
            printf("\n%s, %d thread%s\n", traces[i].name, threads, threads > 1 ? "s" : "");
            for (int c = 0; c < DCOL_COUNT; c++)
                print_row(dcols[c].name, &s[c], one[c].median, 0);
        }
    }
    tdm__alloc_reset_for_tests();
    for (int i = 0; i < nt; i++)
        free(traces[i].ops), free(traces[i].id_size);
    return 0;
}
