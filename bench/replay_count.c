/* bench/replay_count.c: `replay --instructions [trace.csv ...]`, the
 * instructions per alloc+free pair of every column of bench/replay on
 * every trace, counted with valgrind's cachegrind (no cache model: only
 * the count), where the timed rows move with the machine's load.
 *
 * Each count is a child, this program again (`--count-child COLUMN PASSES
 * TRACE`) under cachegrind, that sets the column up as the timed bench
 * does and replays PASSES passes of the trace through it.  The count of k
 * passes (enough for 20,000 pairs) is that of a run of 2k less that of a
 * run of k, so what the
 * child does once (start-up, reading the trace, the column's set-up and
 * its first pass's growth) cancels out; per pair = that ÷ (k × pairs).
 * Ratio: to the best host allocator's count on the same trace.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cachegrind.h"
#include "replay.h"

/* k: passes enough for 20,000 pairs, 2 at least. */
static long passes_for(const trace *t)
{
    long k = t->pairs ? (long)(20000 / t->pairs) : 2;
    return k < 2 ? 2 : k;
}

int count_child(char **argv)
{
    int col = atoi(argv[2]);
    long passes = atol(argv[3]);
    peers_prepare_process(argv);
    trace t;
    memset(&t, 0, sizeof t);
    if (col < 0 || col >= COL_COUNT || passes < 1 || load_trace(argv[4], &t) != 0)
        return 2;
    backend cols[COL_COUNT];
    peers_fill(cols);
    if (!cols[col].available)
        return 3;
    use_cache();
    int rc = run_passes(&cols[col], &t, passes) == 0 ? 0 : 1;
    free(t.ops);
    free(t.id_size);
    return rc;
}

/* Instructions cachegrind counted in a child replaying `passes` passes of
 * column `col`; -1 when it could not run (no valgrind, a missing library,
 * a failed pass). */
static double counted(int col, long passes, const char *trace_path)
{
    char c[16], k[32];
    snprintf(c, sizeof c, "%d", col);
    snprintf(k, sizeof k, "%ld", passes);
    const char *args[] = {"--count-child", c, k, trace_path, NULL};
    /* What peers_prepare_process would re-execute for: room for jemalloc's
     * static TLS, given here (valgrind follows no exec). */
    static const char *const env[] = {"GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384",
                                      "TDM_BENCH_REEXEC=1", NULL};
    return cachegrind_count_self(args, env);
}

int count_instructions(int argc, char **argv)
{
    static trace traces[64];
    int nt = load_traces(argc, argv, traces, 64);
    if (nt == 0)
        return 2;
    backend cols[COL_COUNT];
    peers_fill(cols);
    printf("instructions per alloc+free pair (cachegrind: a run of 2k passes less one of k,\n"
           "k passes holding 20,000 pairs or more), ratio = to the best host allocator's\n"
           "count on the same trace\n");
    int failed = 0;
    for (int i = 0; i < nt; i++) {
        const trace *t = &traces[i];
        double per_pair[COL_COUNT], best = -1;
        long k = passes_for(t);
        for (int c = 0; c < COL_COUNT; c++) {
            double one = counted(c, k, t->path), two = one < 0 ? -1 : counted(c, 2 * k, t->path);
            per_pair[c] = one < 0 || two < 0 || !t->pairs
                              ? -1
                              : (two - one) / ((double)k * (double)t->pairs);
            if (cols[c].peer && per_pair[c] > 0 && (best < 0 || per_pair[c] < best))
                best = per_pair[c];
        }
        printf("\n%s: %zu pairs, k = %ld\n  %-24s %14s %9s\n", t->name, t->pairs, k,
               "allocator", "instr/pair", "ratio");
        for (int c = 0; c < COL_COUNT; c++) {
            if (per_pair[c] < 0) {
                printf("  %-24s %14s\n", cols[c].name, "n/a");
                failed += cols[c].available;
                continue;
            }
            if (best > 0)
                printf("  %-24s %14.1f %8.2fx\n", cols[c].name, per_pair[c], per_pair[c] / best);
            else
                printf("  %-24s %14.1f\n", cols[c].name, per_pair[c]);
        }
    }
    for (int i = 0; i < nt; i++)
        free(traces[i].ops), free(traces[i].id_size);
    if (failed)
        fprintf(stderr, "replay --instructions: %d count(s) failed (is valgrind installed?)\n",
                failed);
    return failed ? 1 : 0;
}
