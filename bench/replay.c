/* bench/replay.c: replays allocation traces (the CSV files of shared/traces, or any
 * file in that format named on the command line) through
 *   (a) tidemark's caching allocator on the sim device (recording off,
 *       then recording every event without stacks),
 *   (b) the bare sim provider (one device range allocation per request),
 *   (c) glibc malloc and (d) jemalloc (mallocx, a dlopen()ed copy) as host
 *       baselines,
 * and prints ns per alloc+free pair, plus, for tidemark, reserved ÷
 * allocated at the peak.  A last table times pure cache hits (the same
 * size freed and taken again).
 *
 * Memory is never touched: this times the allocators, not page faults.
 * Build with the default RelWithDebInfo (or Release) before reading it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "provider.h"
#include "tidemark.h"

typedef struct op {
    uint32_t id;   /* allocation id, dense from 0 */
    uint8_t free;  /* 1 = free of id, 0 = alloc */
    uint64_t size; /* bytes */
} op;

typedef struct trace {
    char name[256];
    op *ops;
    size_t n, cap;
    uint32_t ids;      /* distinct allocation ids */
    uint64_t *id_size; /* [ids]: bytes of each allocation */
    size_t pairs;      /* allocations (each freed by the replay) */
} trace;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads a trace; file ids are remapped to a dense range. */
static int load(const char *path, trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(t, 0, sizeof *t);
    const char *base = strrchr(path, '/');
    snprintf(t->name, sizeof t->name, "%s", base ? base + 1 : path);
    size_t map_cap = 1 << 16;
    uint32_t *map = calloc(map_cap, sizeof *map); /* file id -> dense id + 1 */
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char action[16];
        unsigned long long tm, id, size;
        if (line[0] == '#' || sscanf(line, "%15[^,],%llu,%llu,%llu", action, &tm, &id, &size) != 4)
            continue;
        int is_free = strcmp(action, "free") == 0;
        if (!is_free && strcmp(action, "alloc") != 0)
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

/* ---- the allocators under test, behind one shape ---- */

typedef struct backend {
    const char *name;
    int (*alloc)(void *ctx, void **p, size_t size);
    void (*free)(void *ctx, void *p, size_t size);
    void *ctx;
} backend;

static int tdm_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    return tdm_malloc(p, size, 0, 0) == TDM_OK ? 0 : -1;
}
static void tdm_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    tdm_free(p);
}
static int prov_a(void *ctx, void **p, size_t size)
{
    tdm_provider *pr = ctx;
    return pr->alloc(pr, 0, size ? size : 1, 0, p) == TDM_OK ? 0 : -1;
}
static void prov_f(void *ctx, void *p, size_t size)
{
    tdm_provider *pr = ctx;
    pr->free(pr, 0, p, size ? size : 1);
}
static int libc_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    *p = malloc(size);
    return *p ? 0 : -1;
}
static void libc_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}
static void *(*je_mallocx)(size_t, int);
static void (*je_sdallocx)(void *, size_t, int);
static int je_a(void *ctx, void **p, size_t size)
{
    (void)ctx;
    *p = je_mallocx(size ? size : 1, 0);
    return *p ? 0 : -1;
}
static void je_f(void *ctx, void *p, size_t size)
{
    (void)ctx;
    je_sdallocx(p, size ? size : 1, 0);
}

/* One pass over the trace; what the trace leaves live is freed at the end
 * so every pass starts from the same state.  Returns seconds, or < 0. */
static double pass(const backend *b, const trace *t, void **slots)
{
    double t0 = now_s();
    for (size_t i = 0; i < t->n; i++) {
        const op *o = &t->ops[i];
        if (o->free) {
            b->free(b->ctx, slots[o->id], o->size);
            slots[o->id] = NULL;
        } else if (b->alloc(b->ctx, &slots[o->id], o->size) != 0) {
            return -1;
        }
    }
    for (size_t i = 0; i < t->ids; i++) {
        if (slots[i]) {
            b->free(b->ctx, slots[i], t->id_size[i]);
            slots[i] = NULL;
        }
    }
    return now_s() - t0;
}

static double ns_per_pair(const backend *b, const trace *t, int reps)
{
    void **slots = calloc(t->ids, sizeof *slots);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double s = pass(b, t, slots);
        if (s < 0) {
            free(slots);
            return -1;
        }
        if (s < best)
            best = s;
    }
    free(slots);
    return best * 1e9 / (double)t->pairs;
}

static void use_cache(int recording)
{
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_capacity = (uint64_t)64 << 30;
    tdm__alloc_configure(&cfg);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.enabled = recording ? TDM_RECORD_ALL : TDM_RECORD_OFF;
    o.stacks = TDM_STACKS_NONE;
    o.context = TDM_CONTEXT_NONE;
    o.max_entries = 1 << 16;
    tdm_record_memory_history(&o);
}

/* Reserved ÷ allocated: peak over peak, and at the moment allocated peaks. */
static void ratios(const trace *t, double *peak_ratio, double *at_peak_ratio)
{
    use_cache(0);
    void **slots = calloc(t->ids, sizeof *slots);
    int64_t best_alloc = 0, reserved_then = 0;
    for (size_t i = 0; i < t->n; i++) {
        const op *o = &t->ops[i];
        if (o->free) {
            tdm_free(slots[o->id]);
            slots[o->id] = NULL;
            continue;
        }
        tdm_malloc(&slots[o->id], o->size, 0, 0);
        tdm_stats s = {.size = sizeof s};
        tdm_memory_stats(0, &s);
        if (s.allocated_bytes.current > best_alloc) {
            best_alloc = s.allocated_bytes.current;
            reserved_then = s.reserved_bytes.current;
        }
    }
    tdm_stats s = {.size = sizeof s};
    tdm_memory_stats(0, &s);
    *peak_ratio = (double)s.reserved_bytes.peak / (double)s.allocated_bytes.peak;
    *at_peak_ratio = (double)reserved_then / (double)best_alloc;
    for (size_t i = 0; i < t->ids; i++)
        if (slots[i])
            tdm_free(slots[i]);
    free(slots);
}

static double hit_loop(size_t size, long iters)
{
    use_cache(0);
    void *p = NULL;
    tdm_malloc(&p, size, 0, 0); /* warm: the segment exists and is cached */
    tdm_free(p);
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        tdm_malloc(&p, size, 0, 0);
        tdm_free(p);
    }
    return (now_s() - t0) * 1e9 / (double)iters;
}

static void load_jemalloc(char **argv)
{
    void *h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL && getenv("TDM_BENCH_REEXEC") == NULL) {
        /* Debian's jemalloc needs 2.6 KB of static TLS, more than glibc
         * keeps for dlopen(); ask for room and start again. */
        setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=16384", 1);
        setenv("TDM_BENCH_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
    }
    if (h != NULL) {
        je_mallocx = (void *(*)(size_t, int))dlsym(h, "mallocx");
        je_sdallocx = (void (*)(void *, size_t, int))dlsym(h, "sdallocx");
    }
}

int main(int argc, char **argv)
{
    load_jemalloc(argv);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    strncat(dir, "/../../shared/traces", sizeof dir - strlen(dir) - 1);
    if (getenv("TDM_TRACES_DIR"))
        snprintf(dir, sizeof dir, "%s", getenv("TDM_TRACES_DIR"));

    trace traces[64];
    int nt = 0;
    if (argc > 1) {
        for (int i = 1; i < argc && nt < 64; i++)
            if (load(argv[i], &traces[nt]) == 0)
                nt++;
            else
                fprintf(stderr, "replay: cannot read a trace from %s\n", argv[i]);
    } else {
        DIR *dp = opendir(dir);
        struct dirent *e;
        while (dp && (e = readdir(dp)) != NULL && nt < 64) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 4, ".csv") != 0)
                continue;
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (load(path, &traces[nt]) == 0)
                nt++;
        }
        if (dp)
            closedir(dp);
    }
    if (nt == 0) {
        fprintf(stderr, "replay: no traces (give files, or set TDM_TRACES_DIR; looked in %s)\n", dir);
        return 2;
    }

    tdm_sim_config sc = {.device_count = 1, .capacity = (uint64_t)64 << 30};
    tdm_provider *prov = NULL;
    if (tdm__provider_sim_create(&sc, &prov) != TDM_OK)
        return 1;
    backend cache = {"tidemark cache", tdm_a, tdm_f, NULL};
    backend bare = {"sim provider", prov_a, prov_f, prov};
    backend libc = {"glibc malloc", libc_a, libc_f, NULL};
    backend je = {"jemalloc", je_a, je_f, NULL};
    const int reps = 20;

    printf("ns per alloc+free pair (best of %d passes; memory never touched)\n\n", reps);
    printf("%-18s %8s %10s %10s %10s %10s %10s %12s %12s\n", "trace", "pairs",
           "cache", "cache+rec", "provider", "glibc", "jemalloc", "res/alloc pk",
           "res/alloc @pk");
    for (int i = 0; i < nt; i++) {
        trace *t = &traces[i];
        use_cache(0);
        double c = ns_per_pair(&cache, t, reps);
        use_cache(1);
        double cr = ns_per_pair(&cache, t, reps);
        use_cache(0);
        double pv = ns_per_pair(&bare, t, reps);
        double lc = ns_per_pair(&libc, t, reps);
        double jm = je_mallocx ? ns_per_pair(&je, t, reps) : -1;
        double r1 = 0, r2 = 0;
        ratios(t, &r1, &r2);
        printf("%-18s %8zu %10.1f %10.1f %10.1f %10.1f ", t->name, t->pairs, c, cr, pv, lc);
        if (jm >= 0)
            printf("%10.1f ", jm);
        else
            printf("%10s ", "n/a");
        printf("%12.3f %12.3f\n", r1, r2);
    }
    printf("\ncache hits (same size freed and taken again), ns per pair\n");
    const size_t sizes[] = {512, 4096, 1 << 20, 8 << 20, 64 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        printf("  %10zu B %8.1f\n", sizes[i], hit_loop(sizes[i], 2000000));
    tdm__alloc_reset_for_tests();
    prov->destroy(prov);
    for (int i = 0; i < nt; i++)
        free(traces[i].ops), free(traces[i].id_size);
    return 0;
}
