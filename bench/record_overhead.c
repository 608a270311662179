/* bench/record_overhead.c: what recording costs.
 *
 * Prints a table of
 *   - ns per recorded event with no stack, and with a native stack captured
 *     10, 30 and 60 frames deep (capture + intern + ring write);
 *   - ns per tdm_malloc + tdm_free pair on the sim device with recording
 *     off and on (context=all, native stacks);
 *   - ns per event with 2 threads recording at once;
 *   - ns per read of the recorder's clock (tdm__clock_ns), the floor under
 *     every timed event and hook call on this machine.
 * Targets (DESIGN.md): <= 50 ns per event without stacks, <= 500 ns with a
 * 30-frame native stack; <= 500 ns for the two stacks of a pair 30 frames
 * deep (context=all), over the same pair recorded without stacks.
 * Usage: record_overhead [iterations] [--spill PATH]
 * [--unwinder auto|cfi|libunwind|frame-pointer]
 * or: record_overhead --instructions [n]: each row's instructions per
 * operation under valgrind's cachegrind (a run of 2n less one of n,
 * default n = 20000), which do not move with the machine's load.
 * A second thread stands for the preload's signal watcher in both modes
 * (with --spill it reserves the file's space ahead of the ring, as the
 * watcher does in a recorded program).
 * (--spill: the ring and stacks in a spill file at PATH, docs/spill.md;
 * compare with a run without it).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cachegrind.h"

#include "tidemark.h"
#include "recorder.h"
#include "clock.h"
#include "stack.h"
#include "spill.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long iterations = 2000000;

/* A recorded program under the preload has tidemark's signal watcher (it
 * writes the exit snapshot on SIGINT/SIGTERM), which also reserves the
 * spill file's space ahead of the ring (spill.h).  The bench has the same
 * thread in both modes: a pipe, a byte per wake-up. */
static int watcher_pipe[2] = {-1, -1};

static void wake_watcher(void)
{
    char g = 'g';
    if (write(watcher_pipe[1], &g, 1) < 0) {
        /* full: wake-ups are pending */
    }
}

static void *watcher_main(void *arg)
{
    (void)arg;
    char byte;
    while (read(watcher_pipe[0], &byte, 1) == 1)
        tdm__spill_ahead_work();
    return NULL;
}

static void start(tdm_context_mode context, tdm_stacks_mode stacks)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.context = context;
    o.stacks = stacks;
    o.max_entries = 1u << 20;
    o.clear_history = 1;
    if (tdm_record_memory_history(&o) != TDM_OK) {
        fprintf(stderr, "record_overhead: cannot start recording\n");
        exit(1);
    }
}

static double events_no_stack(long n)
{
    start(TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, (uint64_t)i << 9, 512, 512, 0, 0);
    return (now_ns() - t0) / n;
}

static double clock_reads(long n)
{
    tdm__clock_init();
    volatile uint64_t sink = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        sink += tdm__clock_ns();
    (void)sink;
    return (now_ns() - t0) / n;
}

/* Recurses to `depth` frames, then records n events with stacks there. */
static __attribute__((noinline)) double at_depth(int depth, long n)
{
    if (depth > 1) {
        double r = at_depth(depth - 1, n);
        __asm__ __volatile__("" ::: "memory"); /* keep the frame: no tail call */
        return r;
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint32_t stack = tdm__rec_alloc_stack(0);
        tdm__rec_event(TDM_ACTION_ALLOC, 0, (uint64_t)i << 9, 512, 512, 0, stack);
    }
    return (now_ns() - t0) / n;
}

static double events_with_stack(int depth, long n)
{
    start(TDM_CONTEXT_ALL, TDM_STACKS_NATIVE);
    at_depth(depth, n / 100 + 1); /* warm up: first capture interns */
    return at_depth(depth, n);
}

/* record: 0 off, 1 on with native stacks (context=all), 2 on without
 * stacks. */
static double malloc_free_pairs(int record, long n)
{
    if (record == 1)
        start(TDM_CONTEXT_ALL, TDM_STACKS_NATIVE);
    else if (record == 2)
        start(TDM_CONTEXT_ALL, TDM_STACKS_NONE);
    else if (tdm_record_memory_history(&(tdm_history_options){
                 .size = sizeof(tdm_history_options), .enabled = TDM_RECORD_OFF,
                 .max_entries = 1}) != TDM_OK) {
        fprintf(stderr, "record_overhead: cannot stop recording\n");
        exit(1);
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *p;
        if (tdm_malloc(&p, 4096 + (size_t)(i & 7) * 512, 0, 0) != TDM_OK) {
            fprintf(stderr, "record_overhead: tdm_malloc failed\n");
            exit(1);
        }
        tdm_free(p);
    }
    return (now_ns() - t0) / n;
}

/* Recurses to `depth` frames, then times n recorded tdm_malloc+tdm_free
 * pairs there (context=all: a stack at the alloc and at the free). */
static __attribute__((noinline)) double pairs_at(int depth, long n)
{
    if (depth > 1) {
        double r = pairs_at(depth - 1, n);
        __asm__ __volatile__("" ::: "memory");
        return r;
    }
    return malloc_free_pairs(1, n);
}

static double pairs_with_stack(int depth, long n)
{
    pairs_at(depth, n / 100 + 1); /* warm up: first captures intern */
    return pairs_at(depth, n);
}

static void *thread_events(void *arg)
{
    long n = *(long *)arg;
    for (long i = 0; i < n; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, (uint64_t)i << 9, 512, 512, 0, 0);
    return NULL;
}

static double events_two_threads(long n)
{
    start(TDM_CONTEXT_NONE, TDM_STACKS_NONE);
    pthread_t t[2];
    double t0 = now_ns();
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, thread_events, &n);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return (now_ns() - t0) / n; /* wall time per event per thread */
}

/* ---- --instructions: the rows counted under cachegrind ------------------ */

static double row_event(long n) { return events_no_stack(n); }
static double row_stack10(long n) { return events_with_stack(10, n); }
static double row_stack30(long n) { return events_with_stack(30, n); }
static double row_stack60(long n) { return events_with_stack(60, n); }
static double row_pairs_off(long n) { return malloc_free_pairs(0, n); }
static double row_pairs_no_stacks(long n) { return malloc_free_pairs(2, n); }
static double row_pairs_stacks(long n) { return malloc_free_pairs(1, n); }
static double row_pairs_deep(long n) { return pairs_with_stack(30, n); }
static double row_clock(long n) { return clock_reads(n); }

static const struct count_row {
    const char *name;
    double (*run)(long n);
} count_rows[] = {
    {"event, no stack", row_event},
    {"event + native stack, 10 frames", row_stack10},
    {"event + native stack, 30 frames", row_stack30},
    {"event + native stack, 60 frames", row_stack60},
    {"tdm_malloc+tdm_free, recording off", row_pairs_off},
    {"tdm_malloc+tdm_free, recording on, no stacks", row_pairs_no_stacks},
    {"tdm_malloc+tdm_free, recording on (stacks)", row_pairs_stacks},
    {"tdm_malloc+tdm_free, stacks, 30 frames deep", row_pairs_deep},
    {"clock read", row_clock},
};
enum { ROWS = sizeof count_rows / sizeof count_rows[0], ROW_NO_STACKS = 5, ROW_DEEP = 7 };

/* Instructions cachegrind counts in a child running row `row` n times. */
static double row_count(int row, long n)
{
    char r[16], k[32];
    snprintf(r, sizeof r, "%d", row);
    snprintf(k, sizeof k, "%ld", n);
    const char *args[] = {"--count-row", r, k, NULL};
    return cachegrind_count_self(args, NULL);
}

/* Each row's instructions per operation: the count of 2n operations less
 * that of n (start-up, set-up and warm-up cancel out, but for the warm-up
 * of the stack rows, a hundredth of n); figures the load does not move. */
static int count_table(long n)
{
    printf("tidemark record_overhead --instructions (cachegrind: a run of %ld less one of %ld)\n\n",
           2 * n, n);
    printf("%-44s %12s\n", "what", "instr/op");
    double per_op[ROWS];
    int failed = 0;
    for (int i = 0; i < ROWS; i++) {
        double one = row_count(i, n), two = one < 0 ? -1 : row_count(i, 2 * n);
        per_op[i] = one < 0 || two < 0 ? -1 : (two - one) / (double)n;
        if (per_op[i] < 0) {
            printf("%-44s %12s\n", count_rows[i].name, "failed (valgrind?)");
            failed++;
        } else {
            printf("%-44s %12.1f\n", count_rows[i].name, per_op[i]);
        }
        if (i == ROW_DEEP && per_op[i] >= 0 && per_op[ROW_NO_STACKS] >= 0)
            printf("%-44s %12.1f\n", "  of which the two stacks (over no stacks)",
                   per_op[ROW_DEEP] - per_op[ROW_NO_STACKS]);
    }
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--count-row") == 0) {
        int row = atoi(argv[2]);
        if (row < 0 || row >= ROWS || pipe(watcher_pipe) != 0)
            return 2;
        pthread_t w;
        if (pthread_create(&w, NULL, watcher_main, NULL) != 0)
            return 2;
        count_rows[row].run(atol(argv[3]));
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--instructions") == 0)
        return count_table(argc > 2 ? atol(argv[2]) : 20000);
    const char *spill = NULL, *unwinder = "auto";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--spill") == 0 && i + 1 < argc)
            spill = argv[++i];
        else if (strcmp(argv[i], "--unwinder") == 0 && i + 1 < argc)
            unwinder = argv[++i];
        else
            iterations = atol(argv[i]);
    }
    char why[256];
    if (spill && tdm__spill_open(spill, "", "sim", why, sizeof why) != TDM_OK) {
        fprintf(stderr, "record_overhead: cannot make spill file %s: %s\n", spill, why);
        return 1;
    }
    pthread_t watcher;
    if (pipe(watcher_pipe) != 0 || pthread_create(&watcher, NULL, watcher_main, NULL) != 0) {
        fprintf(stderr, "record_overhead: cannot start the watcher thread\n");
        return 1;
    }
    if (spill)
        tdm__spill_ahead_set_waker(wake_watcher);
    static const struct { const char *name; tdm__unwinder which; } unwinders[] = {
        {"auto", TDM__UNWIND_AUTO}, {"cfi", TDM__UNWIND_CFI},
        {"libunwind", TDM__UNWIND_LIBUNWIND}, {"frame-pointer", TDM__UNWIND_FRAME_POINTER}};
    int known = 0;
    for (size_t i = 0; i < sizeof unwinders / sizeof unwinders[0]; i++) {
        if (strcmp(unwinder, unwinders[i].name) == 0) {
            known = 1;
            if (tdm__stack_set_unwinder(unwinders[i].which) != TDM_OK) {
                fprintf(stderr, "record_overhead: unwinder %s is not available here\n", unwinder);
                return 1;
            }
        }
    }
    if (!known) {
        fprintf(stderr, "record_overhead: --unwinder: auto, cfi, libunwind or frame-pointer\n");
        return 2;
    }
    if (iterations < 1000)
        iterations = 1000;
    long n = iterations;
    printf("tidemark record_overhead (%ld iterations per row, unwinder %s%s%s)\n\n", n,
           unwinder, spill ? ", spill file " : "", spill ? spill : "");
    printf("%-44s %10s %10s\n", "what", "ns/op", "target");
    printf("%-44s %10.1f %10s\n", "event, no stack", events_no_stack(n), "<= 50");
    printf("%-44s %10.1f %10s\n", "event, no stack, 2 threads at once", events_two_threads(n), "");
    printf("%-44s %10.1f %10s\n", "event + native stack, 10 frames", events_with_stack(10, n / 4), "");
    printf("%-44s %10.1f %10s\n", "event + native stack, 30 frames", events_with_stack(30, n / 4), "<= 500");
    printf("%-44s %10.1f %10s\n", "event + native stack, 60 frames", events_with_stack(60, n / 4), "");
    printf("%-44s %10.1f %10s\n", "tdm_malloc+tdm_free, recording off", malloc_free_pairs(0, n / 4), "");
    double no_stacks = malloc_free_pairs(2, n / 4);
    printf("%-44s %10.1f %10s\n", "tdm_malloc+tdm_free, recording on, no stacks", no_stacks, "");
    printf("%-44s %10.1f %10s\n", "tdm_malloc+tdm_free, recording on (stacks)", malloc_free_pairs(1, n / 4), "");
    double deep = pairs_with_stack(30, n / 4);
    printf("%-44s %10.1f %10s\n", "tdm_malloc+tdm_free, stacks, 30 frames deep", deep, "");
    /* The stacks' own cost (context=all: one at the allocation, one at the
     * free), the figure the 500 ns target is about. */
    printf("%-44s %10.1f %10s\n", "  of which the two stacks (over no stacks)", deep - no_stacks,
           "<= 500");
    printf("%-44s %10.1f %10s\n", tdm__clock_uses_tsc() ? "clock read (TSC, interpolated)"
                                                        : "clock read (clock_gettime)",
           clock_reads(n), "");
    if (spill)
        tdm__spill_remove();
    return 0;
}
