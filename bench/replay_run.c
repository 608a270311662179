/* bench/replay_run.c: loading traces and timing the columns of
 * bench/replay.  Columns are run in interleaved rounds (A B C D, A B C D,
 * ...) after one untimed warm-up round, so a slow phase of the shared
 * machine hits every column alike; each result is the median of the
 * rounds with their min and max. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "replay.h"

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Reads a trace; file ids are remapped to a dense range. */
int load_trace(const char *path, trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(t, 0, sizeof *t);
    const char *base = strrchr(path, '/');
    snprintf(t->name, sizeof t->name, "%s", base ? base + 1 : path);
    snprintf(t->path, sizeof t->path, "%s", path);
    size_t map_cap = 1 << 16;
    uint32_t *map = calloc(map_cap, sizeof *map); /* file id -> dense id + 1 */
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char action[16];
        unsigned long long tm, id, size = 0;
        /* A free may leave its size empty (bench/sweep's `free,TIME,ID,,,`):
         * it is the size its allocation had. */
        int fields = line[0] == '#' ? 0
                     : sscanf(line, "%15[^,],%llu,%llu,%llu", action, &tm, &id, &size);
        if (fields < 3)
            continue;
        int is_free = strcmp(action, "free") == 0;
        if (!is_free && (fields < 4 || strcmp(action, "alloc") != 0))
            continue;
        while (id >= map_cap) {
            map = realloc(map, map_cap * 2 * sizeof *map);
            memset(map + map_cap, 0, map_cap * sizeof *map);
            map_cap *= 2;
        }
        if (!is_free) {
            map[id] = ++t->ids;
            t->pairs++;
            t->id_size = realloc(t->id_size, t->ids * sizeof *t->id_size);
            t->id_size[t->ids - 1] = size;
        } else if (map[id] == 0) {
            continue; /* a free of something the trace never allocated */
        } else if (fields < 4) {
            size = t->id_size[map[id] - 1];
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 4096;
            t->ops = realloc(t->ops, t->cap * sizeof *t->ops);
        }
        t->ops[t->n++] = (op){.id = map[id] - 1, .free = (uint8_t)is_free, .size = size};
    }
    free(map);
    fclose(f);
    return t->n ? 0 : -1;
}

/* One call of a trace: its free, or its malloc (-1 when that failed). */
static inline int replay_op(const backend *b, const op *o, void **slots)
{
    if (o->free) {
        b->free(b->ctx, slots[o->id], o->size);
        slots[o->id] = NULL;
        return 0;
    }
    return b->alloc(b->ctx, &slots[o->id], o->size) != 0 ? -1 : 0;
}

/* Frees what a pass of the trace left live. */
static void free_live(const backend *b, const trace *t, void **slots)
{
    for (size_t i = 0; i < t->ids; i++) {
        if (slots[i]) {
            b->free(b->ctx, slots[i], t->id_size[i]);
            slots[i] = NULL;
        }
    }
}

/* One pass over the trace; what the trace leaves live is freed at the end
 * so every pass starts from the same state.  Returns seconds, or < 0. */
static double pass(const backend *b, const trace *t, void **slots)
{
    double t0 = now_s();
    for (size_t i = 0; i < t->n; i++)
        if (replay_op(b, &t->ops[i], slots) < 0)
            return -1;
    free_live(b, t, slots);
    return now_s() - t0;
}

int run_passes(const backend *b, const trace *t, long passes)
{
    void **slots = calloc(t->ids ? t->ids : 1, sizeof *slots);
    if (!slots)
        return -1;
    if (b->before)
        b->before();
    int rc = 0;
    for (long k = 0; k < passes && rc == 0; k++)
        rc = pass(b, t, slots) < 0 ? -1 : 0;
    free(slots);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* samples[col * rounds + r]; a negative sample (a failed pass) or a column
 * that did not run gives median -1 ("n/a"). */
static void summarize(const double *samples, const double *faults, int cols, int rounds, spread *out)
{
    for (int c = 0; c < cols; c++) {
        const double *v = samples + (size_t)c * (size_t)rounds;
        spread s = {.median = -1, .min = -1, .max = -1, .faults = 0};
        int ok = rounds > 0;
        for (int r = 0; r < rounds; r++)
            ok = ok && v[r] >= 0;
        if (ok) {
            s.median = median_of(v, rounds);
            s.min = s.max = v[0];
            for (int r = 1; r < rounds; r++) {
                s.min = v[r] < s.min ? v[r] : s.min;
                s.max = v[r] > s.max ? v[r] : s.max;
            }
            if (faults)
                s.faults = median_of(faults + (size_t)c * (size_t)rounds, rounds);
        }
        out[c] = s;
    }
}

/* Passes per sample, so that one sample of a short trace is not a few
 * microseconds of timer noise. */
static int reps_for(const trace *t)
{
    return t->pairs >= 20000 ? 1 : (int)(20000 / (t->pairs ? t->pairs : 1));
}

/* The same for a team of threads, whose samples are longer: a sample of
 * about a millisecond (ResNet's one pass) swung with the threads' wake-up
 * and a moment of the machine's, 1.2x to 2x between runs on a two-core
 * machine. */
static int team_reps_for(const trace *t)
{
    return t->pairs >= 100000 ? 1 : (int)(100000 / (t->pairs ? t->pairs : 1));
}

void run_trace_rounds(backend cols[COL_COUNT], const trace *t, int rounds, spread out[COL_COUNT])
{
    const int reps = reps_for(t);
    void **slots = calloc(t->ids, sizeof *slots);
    double *ns = malloc(sizeof(double) * COL_COUNT * (size_t)rounds);
    double *flt = malloc(sizeof(double) * COL_COUNT * (size_t)rounds);
    for (size_t i = 0; i < (size_t)COL_COUNT * (size_t)rounds; i++)
        ns[i] = -1, flt[i] = 0;
    for (int r = -1; r < rounds; r++) { /* round -1 warms every column up */
        for (int c = 0; c < COL_COUNT; c++) {
            if (!cols[c].available)
                continue;
            if (cols[c].before)
                cols[c].before();
            long f0 = minor_faults();
            double s = 0;
            for (int k = 0; k < reps && s >= 0; k++) {
                double one = pass(&cols[c], t, slots);
                s = one < 0 ? -1 : s + one;
            }
            long f1 = minor_faults();
            if (r >= 0) {
                ns[c * rounds + r] = s < 0 ? -1 : s * 1e9 / ((double)t->pairs * reps);
                flt[c * rounds + r] = (double)(f1 - f0) / reps;
            }
        }
    }
    if (cols[COL_CACHE].before)
        cols[COL_CACHE].before(); /* leave recording off */
    summarize(ns, flt, COL_COUNT, rounds, out);
    free(ns);
    free(flt);
    free(slots);
}

void run_hit_rounds(backend cols[COL_COUNT], size_t size, long iters, int rounds,
                    spread out[COL_COUNT])
{
    double *ns = malloc(sizeof(double) * COL_COUNT * (size_t)rounds);
    for (size_t i = 0; i < (size_t)COL_COUNT * (size_t)rounds; i++)
        ns[i] = -1;
    for (int r = -1; r < rounds; r++) {
        for (int c = 0; c < COL_COUNT; c++) {
            const backend *b = &cols[c];
            if (!b->available)
                continue;
            if (b->before)
                b->before();
            void *p = NULL;
            if (b->alloc(b->ctx, &p, size) != 0)
                continue;
            b->free(b->ctx, p, size); /* now cached: the loop only hits */
            double t0 = now_s();
            long i = 0;
            for (; i < iters; i++) {
                if (b->alloc(b->ctx, &p, size) != 0)
                    break;
                b->free(b->ctx, p, size);
            }
            if (r >= 0 && i == iters)
                ns[c * rounds + r] = (now_s() - t0) * 1e9 / (double)iters;
        }
    }
    if (cols[COL_CACHE].before)
        cols[COL_CACHE].before();
    summarize(ns, NULL, COL_COUNT, rounds, out);
    free(ns);
}

/* ---- one stream's work, one thread ---- */

/* One copy's place in the replay of interleaved copies. */
typedef struct copy_cursor {
    void **slots;
    size_t i;  /* next op */
    int rep;   /* passes done */
} copy_cursor;

/* Up to `calls` of the copy's calls; at the end of a pass, what the trace
 * left live is freed, as pass() does.  Returns -1 when a malloc failed. */
static int copy_steps(const backend *b, const trace *t, copy_cursor *c, int reps, size_t calls)
{
    for (; calls > 0 && c->rep < reps; calls--) {
        if (replay_op(b, &t->ops[c->i], c->slots) < 0)
            return -1;
        if (++c->i < t->n)
            continue;
        c->i = 0;
        c->rep++;
        free_live(b, t, c->slots);
    }
    return 0;
}

/* The copies of a trace, each its own ids, interleaved in runs of
 * INTERLEAVE_CALLS calls by one thread.  Returns -1 when a malloc failed. */
static int interleave(const backend *b, const trace *t, copy_cursor *cur, int copies, int reps)
{
    for (int k = 0; k < copies; k++)
        cur[k].i = 0, cur[k].rep = 0;
    for (int busy = 1; busy;) {
        busy = 0;
        for (int k = 0; k < copies; k++) {
            if (copy_steps(b, t, &cur[k], reps, INTERLEAVE_CALLS) < 0)
                return -1;
            busy |= cur[k].rep < reps;
        }
    }
    return 0;
}

/* ---- threads ---- */

typedef struct worker {
    pthread_t tid;
    int index;
    struct team *team;
    void **slots;
    int failed;
    double start, end; /* seconds, taken by the worker itself */
} worker;

/* What each thread of a pass gets of its own besides its ids; SERIAL:
 * thread 0 does every thread's work (interleave), the others nothing. */
enum { SHARE_ALL, OWN_STREAM, OWN_DEVICE, SERIAL };

typedef struct team {
    pthread_barrier_t start, done;
    const trace *t;
    const backend *job; /* NULL: quit */
    int own;            /* SHARE_ALL, OWN_STREAM (stream i + 1), OWN_DEVICE (device i), SERIAL */
    int reps;
    int threads;
    worker w[4];
    copy_cursor cur[4]; /* SERIAL's copies (thread 0's) */
} team;

static void *worker_main(void *arg)
{
    worker *w = arg;
    team *tm = w->team;
    for (;;) {
        pthread_barrier_wait(&tm->start);
        if (tm->job == NULL)
            return NULL;
        backend b = *tm->job;
        if (tm->own == OWN_STREAM)
            cache_set_stream_ctx(&b, (uintptr_t)w->index + 1);
        else if (tm->own == OWN_DEVICE)
            b.ctx = (void *)(uintptr_t)w->index;
        w->start = now_s();
        if (tm->own != SERIAL)
            for (int k = 0; k < tm->reps; k++)
                if (pass(&b, tm->t, w->slots) < 0)
                    w->failed = 1;
        if (tm->own == SERIAL && w->index == 0)
            w->failed = interleave(&b, tm->t, tm->cur, tm->threads, tm->reps) < 0;
        w->end = now_s();
        pthread_barrier_wait(&tm->done);
    }
}

static double team_pass(team *tm, int threads, const backend *b, int own)
{
    tm->job = b;
    tm->own = own;
    for (int i = 0; i < threads; i++)
        tm->w[i].failed = 0;
    pthread_barrier_wait(&tm->start);
    pthread_barrier_wait(&tm->done);
    /* From the first worker's start to the last one's end: the main thread
     * may be descheduled on a small machine, so its own clock would lie. */
    double first = tm->w[0].start, last = tm->w[0].end;
    for (int i = 0; i < threads; i++) {
        if (tm->w[i].failed)
            return -1;
        first = tm->w[i].start < first ? tm->w[i].start : first;
        last = tm->w[i].end > last ? tm->w[i].end : last;
    }
    return last - first;
}

/* `ncols` columns, column c run with cols[c] and each thread's own[c]. */
static void run_team_rounds(const backend *cols, const int *own, int ncols, const trace *t,
                            int threads, int rounds, spread *out)
{
    if (threads > 4)
        threads = 4;
    team tm;
    memset(&tm, 0, sizeof tm);
    tm.t = t;
    tm.reps = team_reps_for(t);
    tm.threads = threads;
    for (int i = 0; i < threads; i++)
        tm.cur[i].slots = calloc(t->ids, sizeof(void *));
    pthread_barrier_init(&tm.start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&tm.done, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        tm.w[i] = (worker){.index = i, .team = &tm, .slots = calloc(t->ids, sizeof(void *))};
        pthread_create(&tm.w[i].tid, NULL, worker_main, &tm.w[i]);
    }
    double *ns = malloc(sizeof(double) * (size_t)ncols * (size_t)rounds);
    for (size_t i = 0; i < (size_t)ncols * (size_t)rounds; i++)
        ns[i] = -1;
    for (int r = -1; r < rounds; r++) {
        for (int c = 0; c < ncols; c++) {
            if (!cols[c].available)
                continue;
            double s = team_pass(&tm, threads, &cols[c], own[c]);
            if (r >= 0)
                ns[c * rounds + r] = s < 0 ? -1 : s * 1e9 / ((double)t->pairs * tm.reps);
        }
    }
    tm.job = NULL;
    pthread_barrier_wait(&tm.start);
    for (int i = 0; i < threads; i++) {
        pthread_join(tm.w[i].tid, NULL);
        free(tm.w[i].slots);
        free(tm.cur[i].slots);
    }
    pthread_barrier_destroy(&tm.start);
    pthread_barrier_destroy(&tm.done);
    summarize(ns, NULL, ncols, rounds, out);
    free(ns);
}

void run_thread_rounds(backend cols[COL_COUNT], const trace *t, int threads, int rounds,
                       spread out[TCOL_COUNT])
{
    static const int col_of[TCOL_COUNT] = {COL_CACHE, COL_CACHE, COL_CACHE, COL_GLIBC,
                                           COL_JEMALLOC, COL_MIMALLOC};
    static const int own[TCOL_COUNT] = {SHARE_ALL, SERIAL, OWN_STREAM,
                                        SHARE_ALL, SHARE_ALL, SHARE_ALL};
    backend tcols[TCOL_COUNT];
    for (int c = 0; c < TCOL_COUNT; c++)
        tcols[c] = cols[col_of[c]];
    if (cols[COL_CACHE].before)
        cols[COL_CACHE].before();
    run_team_rounds(tcols, own, TCOL_COUNT, t, threads, rounds, out);
}

void run_device_rounds(backend cols[DCOL_COUNT], const trace *t, int threads, int rounds,
                       spread out[DCOL_COUNT])
{
    static const int own[DCOL_COUNT] = {OWN_DEVICE};
    run_team_rounds(cols, own, DCOL_COUNT, t, threads, rounds, out);
}
