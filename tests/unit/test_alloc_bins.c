/* tests/unit/test_alloc_bins.c: the caching allocator's size bins make
 * exactly the choices of the ordered tree they replaced.
 *
 * Every trace of shared/traces and bench/traces and seeded workloads
 * (random; crowding a few bins, lists that become treaps and set blocks
 * aside; blocks set aside outliving the bin's ordered ones; oversize
 * blocks released from full bins) run twice — once through the bins, once with
 * `reference_index` (the one (stream, size, address) tree per pool) —
 * under several settings (default; several streams; max_split_size with
 * garbage collection on a small device, so that oversize release, GC and
 * the out-of-memory retry run; expandable segments; roundup divisions).
 * After every operation both runs must agree on the status, the address
 * handed out (as an offset from the run's first), reserved and allocated
 * bytes and the segment count.
 *
 * Traces: $TDM_TRACES_DIR, else ../shared/traces beside the repository,
 * and the repository's bench/traces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"
#include "cache_internal.h"
#include "trace_fixtures.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

typedef struct request {
    uint32_t id;
    uint8_t kind; /* 0 alloc, 1 free, 2 empty_cache */
    uint64_t size;
} request;

typedef struct workload {
    request *r;
    size_t n, cap;
    uint32_t ids;
} workload;

/* What one operation left behind. */
typedef struct step {
    int status;
    uint64_t offset; /* address handed out - the run's first address */
    int64_t reserved, allocated, segments;
} step;

typedef struct setting {
    const char *name;
    uint64_t capacity;
    int streams; /* requests spread over this many streams */
    uint64_t max_split_size;
    double gc;
    int expandable;
    uint32_t divisions;
} setting;

static void push(workload *w, uint32_t id, uint8_t kind, uint64_t size)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 1024;
        w->r = realloc(w->r, w->cap * sizeof *w->r);
        assert_non_null(w->r);
    }
    w->r[w->n++] = (request){.id = id, .kind = kind, .size = size};
    if (id + 1 > w->ids)
        w->ids = id + 1;
}

/* A trace CSV's alloc and free rows, ids made dense. */
static int load_trace(const char *path, workload *w)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t cap = 1 << 16;
    uint32_t *dense = calloc(cap, sizeof *dense), next = 0;
    assert_non_null(dense);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char action[16];
        unsigned long long id, size;
        if (!tdm_test_trace_row(line, action, &id, &size))
            continue;
        while (id >= cap) {
            dense = realloc(dense, cap * 2 * sizeof *dense);
            assert_non_null(dense);
            memset(dense + cap, 0, cap * sizeof *dense);
            cap *= 2;
        }
        if (strcmp(action, "alloc") == 0) {
            dense[id] = ++next;
            push(w, dense[id] - 1, 0, size);
        } else if (strcmp(action, "free") == 0 && dense[id] != 0) {
            push(w, dense[id] - 1, 1, 0);
            dense[id] = 0;
        }
    }
    fclose(f);
    free(dense);
    return 1;
}

/* Seeded: sizes log-uniform over 1 B .. 256 MiB, frees of random live
 * ids, an empty_cache now and then. */
static void random_workload(workload *w, unsigned seed, size_t ops)
{
    enum { SLOTS = 200 };
    int live[SLOTS] = {0};
    uint32_t id_of[SLOTS], next = 0;
    for (size_t i = 0; i < ops; i++) {
        unsigned k = (unsigned)rand_r(&seed) % SLOTS;
        unsigned r = (unsigned)rand_r(&seed) % 100;
        if (r == 0) {
            push(w, 0, 2, 0);
        } else if (!live[k]) {
            unsigned bits = (unsigned)rand_r(&seed) % 29;
            uint64_t size = ((uint64_t)1 << bits) + (uint64_t)rand_r(&seed) % ((uint64_t)1 << bits);
            id_of[k] = next++;
            push(w, id_of[k], 0, size);
            live[k] = 1;
        } else {
            push(w, id_of[k], 1, 0);
            live[k] = 0;
        }
    }
}

/* Seeded: four sizes only (two small; two large ones that share a bin),
 * up to 1500 live, filled and drained in turns and freed in random order:
 * bins of hundreds of blocks, which turn from lists into treaps and back
 * to lists as they fill and empty (cache_bins.h). */
static void crowded_workload(workload *w, unsigned seed, size_t ops)
{
    enum { SLOTS = 1500 };
    static const uint64_t sizes[] = {512, 1536, MiB + 4096, MiB + 12288};
    int live[SLOTS] = {0};
    uint32_t id_of[SLOTS], next = 0;
    for (size_t i = 0; i < ops; i++) {
        unsigned k = (unsigned)rand_r(&seed) % SLOTS;
        int filling = (i / 4000) % 2 == 0;
        unsigned r = (unsigned)rand_r(&seed) % 100;
        if (r < (filling ? 20u : 80u)) { /* a free, if k is live */
            if (live[k]) {
                push(w, id_of[k], 1, 0);
                live[k] = 0;
            }
        } else if (!live[k]) {
            id_of[k] = next++;
            push(w, id_of[k], 0, sizes[(unsigned)rand_r(&seed) % 4]);
            live[k] = 1;
        }
    }
}

/* Seeded, for a 24 GiB device with max_split_size 40 MiB: rounds of
 * twelve, forty or twenty-four oversize blocks of 512 to 518 MiB
 * (segments of four sizes and one bin: a list, with blocks set aside, or
 * a treap past 32), freed in random order and cached, then a request
 * that only fits once some are released (after forty or twenty-four):
 * which ones, found walking back from the request's place in the order
 * (tdm__bins_find_lt, _prev_in_stream), decides what the next round is
 * handed. */
static const setting oversize_setting = {"max_split_size 40 MiB, 24 GiB device", 24 * GiB, 1,
                                         40 * MiB, 0.0, 0, 0};

static void oversize_workload(workload *w, unsigned seed, int rounds)
{
    enum { MAXN = 40 };
    static const int counts[] = {12, MAXN, 24};
    uint32_t next = 0;
    for (int round = 0; round < rounds; round++) {
        const int N = counts[round % 3];
        uint32_t ids[MAXN];
        for (int k = 0; k < N; k++) {
            ids[k] = next++;
            push(w, ids[k], 0, 512 * MiB + ((unsigned)rand_r(&seed) % 4) * 2 * MiB - 4096);
        }
        for (int k = N; k > 1; k--) {
            int j = (int)((unsigned)rand_r(&seed) % (unsigned)k);
            uint32_t t = ids[j];
            ids[j] = ids[k - 1];
            ids[k - 1] = t;
        }
        for (int k = 0; k < N; k++)
            push(w, ids[k], 1, 0);
        uint32_t big = next++;
        /* Twenty-four blocks leave less than 12 GiB free. */
        uint64_t least = N == 24 ? 12288 : 4096;
        push(w, big, 0, (least + (unsigned)rand_r(&seed) % 4096) * MiB);
        push(w, big, 1, 0);
    }
}

/* Blocks of one small bin freed in rising address order, so that every
 * one after the first three is set aside (a list's insert walks past at
 * most two: cache_bins.h), kept apart by live blocks between them; then
 * the live ones freed from the low end, merging the bin's first blocks
 * away until only the blocks set aside are left in it, and the bin asked
 * for its best fit: rounds of `n` pairs, the bin's size changing. */
static void aside_workload(workload *w, int rounds, int n)
{
    uint32_t next = 0;
    for (int round = 0; round < rounds; round++) {
        uint64_t size = 512 * (uint64_t)(1 + round % 7);
        uint32_t first = next;
        for (int k = 0; k < 2 * n; k++)
            push(w, next++, 0, size);
        for (int k = 0; k < 2 * n; k += 2) /* the even ones, low to high */
            push(w, first + (uint32_t)k, 1, 0);
        for (int k = 1; k < 8; k += 2) /* the odd ones at the low end */
            push(w, first + (uint32_t)k, 1, 0);
        uint32_t again = next++;
        push(w, again, 0, size); /* from the blocks set aside */
        push(w, again, 1, 0);
        for (int k = 9; k < 2 * n; k += 2)
            push(w, first + (uint32_t)k, 1, 0);
    }
}

/* Nonzero: run() checks the allocator's invariants every this many steps
 * (and adds the blocks set aside then to aside_seen: a block that stays
 * aside is counted at each check). */
static size_t check_every;
static uint64_t aside_seen;

/* Blocks device 0's bins hold set aside (cache_bins.h): inserts that
 * would have walked too far into a list's order. */
static uint64_t blocks_aside(void)
{
    tdm__cache_device *d = tdm__alloc_g.cache[0];
    cbins *pools[2] = {&d->small.bins, &d->large.bins};
    uint64_t n = 0;
    for (int p = 0; p < 2; p++)
        for (uint32_t k = 0; k < pools[p]->nstreams; k++)
            for (unsigned i = 0; i < TDM__BINS_N; i++)
                for (const tdm__tnode *t = pools[p]->streams[k]->aside[i]; t != NULL; t = t->right)
                    n++;
    return n;
}

static step *run(const workload *w, const setting *set, int reference)
{
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    cfg.device_capacity = set->capacity;
    cfg.max_split_size = set->max_split_size;
    cfg.garbage_collection_threshold = set->gc;
    cfg.expandable_segments = set->expandable;
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        cfg.roundup_power2_divisions[i] = set->divisions;
    cfg.quiet_oom = 1;
    cfg.reference_index = reference;
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    step *out = calloc(w->n, sizeof *out);
    void **ptr = calloc(w->ids, sizeof *ptr);
    assert_non_null(out);
    assert_non_null(ptr);
    uint64_t first = 0;
    for (size_t i = 0; i < w->n; i++) {
        const request *r = &w->r[i];
        step *s = &out[i];
        if (r->kind == 0) {
            tdm_stream stream = (tdm_stream)(uintptr_t)(r->id % (uint32_t)set->streams);
            s->status = tdm_malloc(&ptr[r->id], r->size, 0, stream);
            if (s->status == TDM_OK) {
                if (first == 0)
                    first = (uint64_t)(uintptr_t)ptr[r->id];
                s->offset = (uint64_t)(uintptr_t)ptr[r->id] - first;
            }
        } else if (r->kind == 1) {
            s->status = ptr[r->id] != NULL ? tdm_free(ptr[r->id]) : TDM_OK;
            ptr[r->id] = NULL;
        } else {
            s->status = tdm_empty_cache(0);
        }
        tdm_stats st = {.size = sizeof st};
        assert_int_equal(tdm_memory_stats(0, &st), TDM_OK);
        s->reserved = st.reserved_bytes.current;
        s->allocated = st.allocated_bytes.current;
        s->segments = st.segment.current;
        char msg[256] = "";
        if (check_every != 0 && i % check_every == 0) {
            if (!reference)
                aside_seen += blocks_aside();
            if (tdm__alloc_check(0, msg, sizeof msg) != TDM_OK)
                fail_msg("%s (%s), step %zu: %s", set->name, reference ? "tree" : "bins", i,
                         msg);
        }
    }
    char msg[256] = "";
    if (tdm__alloc_check(0, msg, sizeof msg) != TDM_OK)
        fail_msg("%s (%s): %s", set->name, reference ? "tree" : "bins", msg);
    free(ptr);
    tdm__alloc_reset_for_tests();
    return out;
}

/* Both indexes, step by step; returns the OOMs seen (to show the
 * settings reach the paths they are meant to). */
static size_t compare(const char *what, const workload *w, const setting *set)
{
    step *bins = run(w, set, 0);
    step *tree = run(w, set, 1);
    size_t ooms = 0;
    for (size_t i = 0; i < w->n; i++) {
        const step *a = &bins[i], *b = &tree[i];
        if (a->status != b->status || a->offset != b->offset || a->reserved != b->reserved ||
            a->allocated != b->allocated || a->segments != b->segments)
            fail_msg("%s, %s, step %zu: bins status %d offset %#llx reserved %lld allocated "
                     "%lld segments %lld; tree status %d offset %#llx reserved %lld "
                     "allocated %lld segments %lld",
                     what, set->name, i, a->status, (unsigned long long)a->offset,
                     (long long)a->reserved, (long long)a->allocated, (long long)a->segments,
                     b->status, (unsigned long long)b->offset, (long long)b->reserved,
                     (long long)b->allocated, (long long)b->segments);
        ooms += a->status == TDM_OUT_OF_MEMORY;
    }
    free(bins);
    free(tree);
    return ooms;
}

static const setting settings[] = {
    {"default", 16 * GiB, 1, 0, 0.0, 0, 0},
    {"3 streams", 16 * GiB, 3, 0, 0.0, 0, 0},
    {"max_split_size 40 MiB, gc 0.5, 1 GiB device", 1 * GiB, 2, 40 * MiB, 0.5, 0, 0},
    {"expandable segments, 2 streams", 16 * GiB, 2, 0, 0.0, 1, 0},
    {"roundup_power2_divisions 4, 512 MiB device", 512 * MiB, 1, 0, 0.0, 0, 4},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static void compare_trace(const char *path, const char *name, void *ctx)
{
    (void)ctx;
    workload w = {0};
    assert_true(load_trace(path, &w));
    assert_true(w.n > 0);
    for (size_t s = 0; s < NSETTINGS; s++)
        compare(name, &w, &settings[s]);
    print_message("%s: %zu operations, the same under %zu settings\n", name, w.n, NSETTINGS);
    free(w.r);
}

/* tdm__alloc_check sees a bin that its bitmap says is empty but that holds
 * a block or a length, in a word of empty bins and in a word with a used
 * bin: the checker every test above leans on can fail. */
static void test_check_finds_broken_bins(void **state)
{
    (void)state;
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    void *keep, *freed, *after;
    assert_int_equal(tdm_malloc(&keep, 4096, 0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&freed, 8192, 0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&after, 4096, 0, 0), TDM_OK); /* 8 KiB stays a block */
    assert_int_equal(tdm_free(freed), TDM_OK);
    char msg[256] = "";
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_OK);
    cbin_stream *s = tdm__alloc_g.cache[0]->small.bins.streams[0];
    unsigned used = TDM__BINS_N;
    for (unsigned i = 0; i < TDM__BINS_N && used == TDM__BINS_N; i++)
        if (s->root[i] != NULL)
            used = i;
    assert_true(used < TDM__BINS_N);
    /* an empty bin beside the used one, and one in a word of empty bins */
    unsigned beside = used + 1, far = (used / 64 + 2) * 64 + 5;
    assert_true(far < TDM__BINS_N && s->bits[far / 64] == 0);
    unsigned bins[2] = {beside, far};
    for (int k = 0; k < 2; k++) {
        unsigned i = bins[k];
        char want[64];
        snprintf(want, sizeof want, "small pool's bin %u:", i);
        s->root[i] = s->root[used];
        assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
        assert_non_null(strstr(msg, want));
        s->root[i] = NULL;
        s->len[i] = 1;
        assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
        assert_non_null(strstr(msg, want));
        s->len[i] = TDM__BIN_ASIDE; /* the flag alone is allowed */
        assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_OK);
        s->len[i] = 0;
    }
    tdm__alloc_reset_for_tests();
}

static void test_traces(void **state)
{
    (void)state;
    char buf[1024];
    int shared = tdm_test_each_trace(tdm_test_shared_traces(buf, sizeof buf), compare_trace, NULL);
    int own = tdm_test_each_trace(tdm_test_own_traces(buf, sizeof buf), compare_trace, NULL);
    assert_true(own > 0); /* the repository's own traces are always there */
    print_message("%d traces\n", (shared > 0 ? shared : 0) + own);
}

/* compare() under each of `n` settings, checking every `every` steps (0:
 * at the end only) and counting the blocks set aside from zero; returns
 * the OOMs seen. */
static size_t compare_under(const char *what, const workload *w, const setting *sets, size_t n,
                            size_t every)
{
    check_every = every;
    aside_seen = 0;
    size_t ooms = 0;
    for (size_t s = 0; s < n; s++)
        ooms += compare(what, w, &sets[s]);
    check_every = 0;
    return ooms;
}

/* The same under every setting of `settings`. */
static size_t compare_settings(const char *what, const workload *w, size_t every)
{
    return compare_under(what, w, settings, NSETTINGS, every);
}

static void test_random(void **state)
{
    (void)state;
    workload w = {0};
    random_workload(&w, 12345, 30000);
    size_t ooms = compare_settings("random", &w, 0);
    print_message("random: %zu operations, %zu out of memory\n", w.n, ooms);
    assert_true(ooms > 0); /* the small devices did run out */
    free(w.r);
}

static void test_crowded(void **state)
{
    (void)state;
    workload w = {0};
    crowded_workload(&w, 777, 40000);
    uint64_t trees = tdm__bins_trees_made;
    compare_settings("crowded", &w, 61);
    assert_true(tdm__bins_trees_made > trees); /* lists did turn into treaps */
    assert_true(aside_seen > 0);               /* and set blocks aside */
    print_message("crowded: %zu operations\n", w.n);
    free(w.r);
}

static void test_aside(void **state)
{
    (void)state;
    workload w = {0};
    aside_workload(&w, 14, 12);
    compare_settings("aside", &w, 1);
    assert_true(aside_seen > 0);
    print_message("aside: %zu operations\n", w.n);
    free(w.r);
}

static void test_oversize(void **state)
{
    (void)state;
    workload w = {0};
    oversize_workload(&w, 4242, 40);
    uint64_t trees = tdm__bins_trees_made;
    size_t ooms = compare_under("oversize", &w, &oversize_setting, 1, 7);
    assert_true(tdm__bins_trees_made > trees); /* the forty did make a treap */
    /* The twelve and the twenty-four were lists with blocks set aside. */
    assert_true(aside_seen > 0);
    print_message("oversize: %zu operations, %zu out of memory\n", w.n, ooms);
    free(w.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_finds_broken_bins),
        cmocka_unit_test(test_traces),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_crowded),
        cmocka_unit_test(test_aside),
        cmocka_unit_test(test_oversize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
