/* tests/unit/test_alloc_random.c: the caching allocator under a seeded
 * random workload (100k operations: several streams, sizes from 1 B to
 * 1 GiB, frees, record_stream, syncs, empty_cache, OOMs) and while
 * replaying every real trace in shared/traces, with tdm__alloc_check run
 * after every single operation (every TDM_CHECK_EVERY-th in the sanitizer
 * builds), and a host-side model of what is live.
 *
 * Traces: $TDM_TRACES_DIR, else ../shared/traces beside the repository.
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
#include "alloc_internal.h"
#include "trace_fixtures.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* One thread throughout: ThreadSanitizer has no race to find here, so its
 * build does not run this test (tests/CMakeLists.txt). */

/* TDM_CHECK_EVERY=N checks the whole allocator after every Nth operation
 * instead of every one (and always at the end).  The sanitizer builds set
 * it: their part is the memory errors, which they catch on every
 * operation anyway; the Release build still checks each one, and the
 * checker took 88% of this test's time under ASan. */
static long check_every(void)
{
    static long every;
    if (every == 0) {
        const char *e = getenv("TDM_CHECK_EVERY");
        every = e != NULL && atol(e) > 0 ? atol(e) : 1;
    }
    return every;
}

static void check_all(int devices, long op)
{
    char msg[256] = "";
    for (int d = 0; d < devices; d++)
        if (tdm__alloc_check(d, msg, sizeof msg) != TDM_OK)
            fail_msg("after operation %ld, device %d: %s", op, d, msg);
}

static tdm__alloc_config cfg_of(int devices, size_t capacity)
{
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_count = devices;
    cfg.device_capacity = capacity;
    cfg.quiet_oom = 1;
    return cfg;
}

/* Each stat's peak as PyTorch keeps it: the highest value it had after
 * any operation (within one, each stat only goes up, or down, or down
 * then up: no expandable segments here, whose calls may map pages and
 * give some back), restarting from the current one at a reset.  The
 * device's shards (one per stream here) must report exactly that. */
typedef struct peak_model {
    int64_t peak[2][3][6];
} peak_model;

static tdm_stat *stat_field(tdm_stats *s, int k)
{
    tdm_stat *f[6] = {&s->allocated_bytes, &s->reserved_bytes, &s->active_bytes,
                      &s->requested_bytes, &s->allocation, &s->segment};
    return f[k];
}

static void check_peaks(peak_model *m, int devices, long op, int reset_device)
{
    static const int pools[3] = {TDM_STAT_POOL_ALL, TDM_STAT_POOL_SMALL, TDM_STAT_POOL_LARGE};
    for (int d = 0; d < devices; d++) {
        for (int p = 0; p < 3; p++) {
            tdm_stats s = {.size = sizeof s};
            tdm__cache_stats(d, pools[p], &s);
            for (int k = 0; k < 6; k++) {
                tdm_stat *f = stat_field(&s, k);
                int64_t *want = &m->peak[d][p][k];
                if (d == reset_device || f->current > *want)
                    *want = f->current;
                if (f->peak != *want)
                    fail_msg("after operation %ld, device %d, pool %d, stat %d: peak %lld, "
                             "the values' highest %lld",
                             op, d, p, k, (long long)f->peak, (long long)*want);
            }
        }
    }
}

typedef struct live {
    char *p;
    size_t size;
    int device;
} live;

/* One seeded run of `ops` random operations. */
static void run_workload(const tdm__alloc_config *cfg, unsigned seed, long ops)
{
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(cfg), TDM_OK);
    enum { SLOTS = 96 };
    live slot[SLOTS];
    memset(slot, 0, sizeof slot);
    int64_t requested[2] = {0, 0};
    long ooms = 0, pending_made = 0, allocs = 0;
    peak_model peaks;
    memset(&peaks, 0, sizeof peaks);
    /* Only operations actually made count towards `ops`. */
    for (long op = 0; op < ops;) {
        unsigned r = (unsigned)rand_r(&seed) % 100;
        int k = (int)((unsigned)rand_r(&seed) % SLOTS);
        int reset = -1; /* the device whose peaks this operation resets */
        if (r < 50) {
            if (slot[k].p != NULL)
                continue;
            /* Log-uniform from 1 B to 1 GiB. */
            unsigned bits = (unsigned)rand_r(&seed) % 31;
            size_t size = ((size_t)1 << bits) +
                          (bits ? (size_t)rand_r(&seed) % ((size_t)1 << bits) : 0);
            if (size > GiB)
                size = GiB;
            if (rand_r(&seed) % 8 == 0)
                size = 1 + (size_t)rand_r(&seed) % 512;
            int dev = cfg->device_count > 1 ? k % 2 : 0;
            tdm_stream stream = (tdm_stream)(rand_r(&seed) % 4);
            void *p = NULL;
            tdm_status st = tdm_malloc(&p, size, dev, stream);
            if (st == TDM_OUT_OF_MEMORY) {
                assert_null(p);
                ooms++;
            } else {
                assert_int_equal(st, TDM_OK);
                assert_int_equal((uintptr_t)p % 512, 0);
                slot[k] = (live){.p = p, .size = size, .device = dev};
                requested[dev] += (int64_t)size;
                allocs++;
            }
        } else if (r < 85) {
            if (slot[k].p == NULL)
                continue;
            assert_int_equal(tdm_free(slot[k].p), TDM_OK);
            requested[slot[k].device] -= (int64_t)slot[k].size;
            slot[k].p = NULL;
        } else if (r < 92) {
            if (slot[k].p == NULL)
                continue;
            assert_int_equal(tdm_record_stream(slot[k].p, (tdm_stream)(rand_r(&seed) % 6)),
                             TDM_OK);
            pending_made++;
        } else if (r < 97) {
            assert_int_equal(tdm_stream_synchronize((tdm_stream)(rand_r(&seed) % 6)), TDM_OK);
        } else if (r < 98) {
            assert_int_equal(tdm_device_synchronize(-1), TDM_OK);
        } else if (r < 99) {
            assert_int_equal(tdm_empty_cache(rand_r(&seed) % 2 ? -1 : 0), TDM_OK);
        } else {
            assert_int_equal(tdm_reset_peak_stats(0), TDM_OK);
            reset = 0;
        }
        op++;
        if (op % check_every() == 0)
            check_all(cfg->device_count, op);
        check_peaks(&peaks, cfg->device_count, op, reset);
        /* The stats agree with the host's own count of live allocations
         * (pending frees aside, which still count as requested). */
        for (int d = 0; d < cfg->device_count; d++) {
            tdm_stats s = {.size = sizeof s};
            assert_int_equal(tdm_memory_stats(d, &s), TDM_OK);
            assert_true(s.requested_bytes.current >= requested[d]);
            assert_true(s.reserved_bytes.current >= s.active_bytes.current);
            assert_true(s.active_bytes.current >= s.allocated_bytes.current);
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].p != NULL)
            assert_int_equal(tdm_free(slot[k].p), TDM_OK);
    assert_int_equal(tdm_device_synchronize(-1), TDM_OK);
    check_all(cfg->device_count, ops);
    for (int d = 0; d < cfg->device_count; d++) {
        tdm_stats s = {.size = sizeof s};
        assert_int_equal(tdm_memory_stats(d, &s), TDM_OK);
        assert_int_equal(s.allocated_bytes.current, 0);
        assert_int_equal(s.active_bytes.current, 0);
        assert_int_equal(s.requested_bytes.current, 0);
    }
    assert_int_equal(tdm_empty_cache(-1), TDM_OK);
    check_all(cfg->device_count, ops);
    for (int d = 0; d < cfg->device_count; d++) {
        size_t f = 0, t = 0;
        assert_int_equal(tdm_mem_get_info(d, &f, &t), TDM_OK);
        assert_int_equal(f, t);
    }
    print_message("%ld operations: %ld allocations, %ld OOMs, %ld record_stream\n",
                  ops, allocs, ooms, pending_made);
    /* The workload did reach the paths it is meant to reach. */
    assert_true(ooms > 0);
    assert_true(pending_made > 0);
    tdm__alloc_reset_for_tests();
}

static void test_random_default(void **state)
{
    (void)state;
    tdm__alloc_config cfg = cfg_of(1, 8 * GiB);
    run_workload(&cfg, 12345, 100000);
}

static void test_random_knobs(void **state)
{
    (void)state;
    tdm__alloc_config cfg = cfg_of(2, 6 * GiB);
    cfg.max_split_size = 64 * MiB;
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        cfg.roundup_power2_divisions[i] = i < 4 ? 4 : 8;
    cfg.garbage_collection_threshold = 0.6;
    run_workload(&cfg, 777, 30000);
    cfg.max_split_size = 0;
    cfg.garbage_collection_threshold = 0.0;
    run_workload(&cfg, 4242, 20000);
}

/* ---- trace replay ----------------------------------------------------------- */

static size_t replay(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t cap = 1 << 14, ops = 0;
    void **by_id = calloc(cap, sizeof *by_id);
    assert_non_null(by_id);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char action[16];
        unsigned long long id, size;
        if (!tdm_test_trace_row(line, action, &id, &size))
            continue; /* comments, the header, phase rows */
        if (id >= cap) {
            size_t ncap = cap;
            while (id >= ncap)
                ncap *= 2;
            by_id = realloc(by_id, ncap * sizeof *by_id);
            assert_non_null(by_id);
            memset(by_id + cap, 0, (ncap - cap) * sizeof *by_id);
            cap = ncap;
        }
        if (strcmp(action, "alloc") == 0) {
            assert_int_equal(tdm_malloc(&by_id[id], (size_t)size, 0, 0), TDM_OK);
        } else if (strcmp(action, "free") == 0) {
            assert_non_null(by_id[id]);
            assert_int_equal(tdm_free(by_id[id]), TDM_OK);
            by_id[id] = NULL;
        } else {
            continue;
        }
        if (ops % check_every() == 0)
            check_all(1, (long)ops);
        ops++;
    }
    fclose(f);
    for (size_t i = 0; i < cap; i++)
        if (by_id[i])
            assert_int_equal(tdm_free(by_id[i]), TDM_OK);
    free(by_id);
    check_all(1, (long)ops);
    return ops;
}

static void replay_one(const char *path, const char *name, void *ctx)
{
    (void)ctx;
    tdm__alloc_config cfg = cfg_of(1, 16 * GiB);
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    size_t ops = replay(path);
    assert_true(ops > 0);
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    assert_int_equal(s.allocated_bytes.current, 0);
    print_message("%s: %zu operations, peak reserved / peak allocated = %.3f\n", name, ops,
                  (double)s.reserved_bytes.peak / (double)s.allocated_bytes.peak);
    tdm__alloc_reset_for_tests();
}

static void test_replay_traces(void **state)
{
    (void)state;
    char buf[1024];
    const char *dir = tdm_test_shared_traces(buf, sizeof buf);
    int traces = tdm_test_each_trace(dir, replay_one, NULL);
    if (traces < 0) {
        print_message("no traces at %s: skipped\n", dir);
        skip();
    }
    assert_true(traces > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_default),
        cmocka_unit_test(test_random_knobs),
        cmocka_unit_test(test_replay_traces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
