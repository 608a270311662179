/* bench/dump.c: how long tdm_dump_snapshot takes with symbolization.
 *
 * Records N events (default 100,000: alloc+free pairs through tdm_malloc /
 * tdm_free on the sim device, context=all, native stacks) from S distinct
 * call paths (default 50: recursions of 1..S frames), then writes the
 * snapshot to a file R times (default 5) and prints each dump's wall and
 * CPU time and the file's bytes per event, the first apart: it opens the symbolizer (reads the loaded
 * modules' symbol tables) and maps the memory later dumps reuse
 * (snapshot/spare_map.h).  Target: 50 ms per 1M events (5 per 100k).
 *
 * Usage: dump [events] [stacks] [rounds] [dir].  Prints a table; not a
 * test.  Build with the Release build the suite uses.  The dump's fsync
 * is in its time: a dir on tmpfs (/dev/shm) leaves out the disk's.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tidemark.h"

static double clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Recurses `depth` frames, then allocates and frees `pairs` times. */
static __attribute__((noinline)) void pairs_at(int depth, long pairs)
{
    if (depth > 1) {
        pairs_at(depth - 1, pairs);
        __asm__ __volatile__("" ::: "memory");
        return;
    }
    for (long i = 0; i < pairs; i++) {
        void *p;
        if (tdm_malloc(&p, 4096 + (size_t)(i & 15) * 512, 0, 0) != TDM_OK) {
            fprintf(stderr, "dump: tdm_malloc failed\n");
            exit(1);
        }
        tdm_free(p);
    }
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? atol(argv[1]) : 100000;
    int stacks = argc > 2 ? atoi(argv[2]) : 50;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    const char *dir = argc > 4 ? argv[4] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (events < 1000 || stacks < 1 || stacks > 60 || rounds < 1) {
        if (stacks > 60)
            fprintf(stderr, "dump: at most 60 call paths (stacks are 64 frames deep)\n");
        fprintf(stderr, "usage: dump [events >= 1000] [stacks 1..60] [rounds >= 1] [dir]\n");
        return 2;
    }
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.context = TDM_CONTEXT_ALL;
    o.stacks = TDM_STACKS_NATIVE;
    o.max_entries = (size_t)events;
    if (tdm_record_memory_history(&o) != TDM_OK) {
        fprintf(stderr, "dump: cannot start recording\n");
        return 1;
    }
    /* Events are counted as the snapshot will: 3 per pair (alloc,
     * free_requested, free_completed), plus the segment the first
     * allocation maps; the ring keeps them all (a free is one entry). */
    long pairs = events / 3;
    for (int s = 1; s <= stacks; s++)
        pairs_at(s, pairs / stacks + (s <= pairs % stacks));
    char path[4096];
    snprintf(path, sizeof path, "%s/tdm-bench-dump-%d.tdm", dir, (int)getpid());
    printf("bench/dump: %ld events, %d call paths, %d dumps to %s\n\n", events, stacks, rounds,
           dir);
    printf("%-28s %10s %10s %12s %14s %12s\n", "dump", "ms", "CPU ms", "ms/100k ev",
           "target ms/100k", "file B/event");
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        tdm_status st = tdm_dump_snapshot(path);
        double ms = clock_ms(CLOCK_MONOTONIC) - t0;
        double cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (st != TDM_OK) {
            fprintf(stderr, "dump: tdm_dump_snapshot: %s\n", tdm_strerror(st));
            return 1;
        }
        char what[64];
        snprintf(what, sizeof what, r == 0 ? "first (opens symbolizer)" : "again %d", r);
        struct stat sb;
        double per_event = stat(path, &sb) == 0 ? (double)sb.st_size / (double)events : 0;
        printf("%-28s %10.1f %10.1f %12.2f %14s %12.2f\n", what, ms, cpu,
               ms * 1e5 / (double)events, "<= 5", per_event);
        if (r && ms < best)
            best = ms;
    }
    unlink(path);
    return 0;
}
