/* tests/unit/test_alloc_cache.c: the caching allocator (mode=cache) against
 * PyTorch's rules (reference/pytorch-snapshot-format.md section 5): the
 * rounding and pool table, split and merge, best fit per stream,
 * max_split_size, garbage_collection_threshold, OOM -> release -> retry
 * -> OOM, empty_cache, record_stream with stream/device sync, per-pool
 * stats, the snapshot state, and threads.  tdm__alloc_check runs after
 * every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>

#include "alloc.h"
#include "cache_internal.h"
#include "recorder.h"
#include "alloc_fixtures.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void check(void)
{
    tdm_test_check_devices();
}

static tdm__alloc_config base_cfg(size_t capacity)
{
    return tdm_test_cache_config(capacity);
}

static void use(tdm__alloc_config cfg)
{
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_init(), TDM_OK);
    assert_string_equal(tdm__alloc_mode_name(), "cache");
}

static int teardown(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__alloc_reset_for_tests();
    return 0;
}

static tdm_stats pool_stats(int pool)
{
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats_pool(0, (tdm_stat_pool)pool, &s), TDM_OK);
    return s;
}

static void *get(size_t size, tdm_stream stream)
{
    void *p = NULL;
    assert_int_equal(tdm_malloc(&p, size, 0, stream), TDM_OK);
    assert_non_null(p);
    check();
    return p;
}

static void put(void *p)
{
    assert_int_equal(tdm_free(p), TDM_OK);
    check();
}

static void test_round_size(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(64 * MiB);
    use(cfg);
    assert_int_equal(tdm__alloc_round_size(0), 512);
    assert_int_equal(tdm__alloc_round_size(1), 512);
    assert_int_equal(tdm__alloc_round_size(512), 512);
    assert_int_equal(tdm__alloc_round_size(513), 1024);
    assert_int_equal(tdm__alloc_round_size(1200), 1536);
    assert_int_equal(tdm__alloc_round_size(MiB + 1), MiB + 512);
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        cfg.roundup_power2_divisions[i] = 4;
    use(cfg);
    /* PyTorch divides only sizes > 512 x divisions: 1200 stays on plain
     * 512-byte rounding (the reference's "1200 -> 1280" example contradicts
     * its own rule; PyTorch's code follows the rule). */
    assert_int_equal(tdm__alloc_round_size(1200), 1536);
    assert_int_equal(tdm__alloc_round_size(4096), 4096); /* powers of two stay */
    assert_int_equal(tdm__alloc_round_size(4500), 5120); /* plain would be 4608 */
    assert_int_equal(tdm__alloc_round_size(2049), 2560);
    assert_int_equal(tdm__alloc_round_size(5 * MiB + 1), 6 * MiB);
    /* Per interval: [1 MiB, 2 MiB) by 8, the rest off. */
    memset(cfg.roundup_power2_divisions, 0, sizeof cfg.roundup_power2_divisions);
    cfg.roundup_power2_divisions[0] = 8;
    use(cfg);
    assert_int_equal(tdm__alloc_round_size(MiB + 1), MiB + 128 * KiB);
    assert_int_equal(tdm__alloc_round_size(2 * MiB + 1), 2 * MiB + 512);
}

/* Requests too large to round or to fit: out of memory, nothing handed
 * out, nothing booked, whether recording or not (the two entry paths). */
static void test_huge_requests(void **state)
{
    (void)state;
    use(base_cfg(64 * MiB));
    static const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 511, SIZE_MAX - 512,
                                   SIZE_MAX - 2 * MiB + 1, SIZE_MAX - 2 * MiB,
                                   SIZE_MAX - 2 * MiB - 512, SIZE_MAX / 2, 65 * MiB};
    for (int rec = 0; rec < 2; rec++) {
        tdm_history_options o;
        tdm_history_options_init(&o);
        o.enabled = rec ? TDM_RECORD_ALL : TDM_RECORD_OFF;
        o.stacks = TDM_STACKS_NONE;
        assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = (void *)&p;
            assert_int_equal(tdm_malloc(&p, sizes[i], 0, 0), TDM_OUT_OF_MEMORY);
            assert_null(p);
            check();
        }
    }
    tdm_stats st = pool_stats(TDM_STAT_POOL_ALL);
    assert_int_equal(st.reserved_bytes.current, 0);
    assert_int_equal(st.allocation.current, 0);
    assert_int_equal(st.num_ooms, 16);
    void *p = get(MiB, 0); /* and the device still serves */
    put(p);
}

/* The reference's pool and segment-size table, row by row. */
static void test_pool_table(void **state)
{
    (void)state;
    use(base_cfg(1024 * MiB));
    const struct {
        size_t request;
        int small;
        size_t block, segment;
    } rows[] = {
        {1, 1, 512, 2 * MiB},
        {1000, 1, 1024, 2 * MiB},
        {MiB, 1, MiB, 2 * MiB},
        {MiB + 1, 0, MiB + 512, 20 * MiB},
        {9 * MiB, 0, 9 * MiB, 20 * MiB},
        {10 * MiB - 512, 0, 10 * MiB - 512, 20 * MiB},
        {10 * MiB, 0, 10 * MiB, 10 * MiB},
        {11 * MiB + 1, 0, 12 * MiB, 12 * MiB},
        {19 * MiB + 512 * KiB, 0, 20 * MiB, 20 * MiB},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tdm_stats before = pool_stats(rows[i].small ? 1 : 2);
        void *p = get(rows[i].request, 0);
        tdm_stats after = pool_stats(rows[i].small ? 1 : 2);
        assert_int_equal(after.segment.current - before.segment.current, 1);
        assert_int_equal(after.reserved_bytes.current - before.reserved_bytes.current,
                         (int64_t)rows[i].segment);
        assert_int_equal(after.allocated_bytes.current - before.allocated_bytes.current,
                         (int64_t)rows[i].block);
        assert_int_equal(after.requested_bytes.current - before.requested_bytes.current,
                         (int64_t)rows[i].request);
        put(p);
        assert_int_equal(tdm_empty_cache(0), TDM_OK);
        check();
        assert_int_equal(pool_stats(0).reserved_bytes.current, 0);
    }
}

static void test_split_merge_best_fit(void **state)
{
    (void)state;
    use(base_cfg(256 * MiB));
    char *a = get(1000, 0), *b = get(1000, 0), *c = get(3000, 0);
    /* Carved one after the other from the same 2 MiB segment. */
    assert_ptr_equal(b, a + 1024);
    assert_ptr_equal(c, b + 1024);
    tdm_stats s = pool_stats(1);
    assert_int_equal(s.segment.current, 1);
    assert_int_equal(s.allocated_bytes.current, 1024 + 1024 + 3072);
    /* Best fit: a freed 1 KiB hole serves a 600-byte request before the
     * big rest of the segment does. */
    put(a);
    char *d = get(600, 0);
    assert_ptr_equal(d, a);
    put(b);
    put(c);
    put(d);
    /* All merged: the segment is one cached block again, and empty_cache
     * gives it back. */
    s = pool_stats(0);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_int_equal(s.active_bytes.current, 0);
    assert_int_equal(s.reserved_bytes.current, 2 * MiB);
    char *e = get(2 * MiB - 512 * KiB, 0); /* large pool: its own segment */
    assert_int_equal(pool_stats(2).segment.current, 1);
    put(e);
    char *f = get(MiB, 0); /* the whole merged small segment is reusable */
    assert_ptr_equal(f, a);
    put(f);
    /* Large pool: 3 MiB out of a 20 MiB segment splits (rest > 1 MiB);
     * 19.5 MiB does not (rest 0.5 MiB) and shows the rounding loss. */
    assert_int_equal(tdm_empty_cache(0), TDM_OK);
    char *g = get(3 * MiB, 0);
    assert_int_equal(pool_stats(2).allocated_bytes.current, 3 * MiB);
    char *h = get(3 * MiB, 0);
    assert_ptr_equal(h, g + 3 * MiB);
    put(g);
    put(h);
    char *i = get(19 * MiB + 512 * KiB, 0);
    tdm_stats li = pool_stats(2);
    assert_int_equal(li.allocated_bytes.current, 20 * MiB);
    assert_int_equal(li.requested_bytes.current, 19 * MiB + 512 * KiB);
    assert_int_equal(li.segment.current, 1);
    put(i);
}

static void test_streams_do_not_share(void **state)
{
    (void)state;
    use(base_cfg(256 * MiB));
    void *a = get(4096, 1);
    put(a);
    void *b = get(4096, 2);
    assert_int_equal(pool_stats(0).segment.current, 2);
    void *c = get(4096, 1);
    assert_ptr_equal(c, a); /* stream 1's cached block */
    put(b);
    put(c);
}

static void test_max_split_size(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(1024 * MiB);
    cfg.max_split_size = 40 * MiB;
    use(cfg);
    char *big = get(50 * MiB, 0);
    put(big);
    /* A request under max_split_size may not take an oversize block. */
    char *small = get(5 * MiB, 0);
    assert_ptr_not_equal(small, big);
    assert_int_equal(pool_stats(2).segment.current, 2);
    /* An oversize request takes one under request + 20 MiB, unsplit. */
    char *o = get(45 * MiB, 0);
    assert_ptr_equal(o, big);
    assert_int_equal(pool_stats(2).allocated_bytes.current, 5 * MiB + 50 * MiB);
    put(o);
    /* ... but not one that is 20 MiB too large. */
    char *o2 = get(30 * MiB + 512, 0);
    (void)o2;
    put(o2);
    char *o3 = get(41 * MiB, 0);
    assert_ptr_equal(o3, big);
    put(o3);
    put(small);
    tdm_stats s = pool_stats(2);
    /* 50 (big) + 20 (for 5 MiB) + 32 (30 MiB + 512 rounded up) MiB cached. */
    assert_int_equal(s.reserved_bytes.current, (50 + 20 + 32) * MiB);
    char *o4 = get(80 * MiB, 0);
    char *o5 = get(49 * MiB, 0); /* 50 MiB block < 49 + 20: taken */
    assert_ptr_equal(o5, big);
    put(o4);
    put(o5);
}

static void test_oom_release_retry(void **state)
{
    (void)state;
    use(base_cfg(64 * MiB));
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    o.stacks = TDM_STACKS_NONE;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = get(15 * MiB, 0); /* >= 10 MiB: three 16 MiB segments */
    for (int i = 0; i < 3; i++)
        put(p[i]);
    tdm_stats s = pool_stats(0);
    assert_int_equal(s.reserved_bytes.current, 48 * MiB);
    /* 30 MiB does not fit beside the cache: the cache is released and the
     * allocation retried. */
    void *q = get(30 * MiB, 0);
    s = pool_stats(0);
    assert_int_equal(s.num_alloc_retries, 1);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(s.reserved_bytes.current, 30 * MiB);
    assert_int_equal(s.segment.freed, 3);
    /* 40 MiB cannot fit even then: out of memory, reported and recorded. */
    void *r = (void *)1;
    assert_int_equal(tdm_malloc(&r, 40 * MiB, 0, 5), TDM_OUT_OF_MEMORY);
    assert_null(r);
    check();
    s = pool_stats(0);
    assert_int_equal(s.num_alloc_retries, 2);
    assert_int_equal(s.num_ooms, 1);
    assert_int_equal(s.reserved_bytes.current, 30 * MiB);
    tdm_event *ev = NULL;
    size_t n = 0;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    assert_true(n > 0);
    assert_int_equal(ev[n - 1].action, TDM_ACTION_OOM);
    assert_int_equal(ev[n - 1].addr, 34 * MiB);
    assert_int_equal(ev[n - 1].size, 40 * MiB);
    assert_int_equal(ev[n - 1].requested, 40 * MiB);
    assert_int_equal(ev[n - 1].stream, 5);
    int seg_frees = 0;
    for (size_t i = 0; i < n; i++)
        seg_frees += ev[i].action == TDM_ACTION_SEGMENT_FREE;
    assert_int_equal(seg_frees, 3);
    free(ev);
    /* The program goes on. */
    put(q);
    void *t = get(60 * MiB, 0);
    put(t);
}

static void test_empty_cache(void **state)
{
    (void)state;
    use(base_cfg(512 * MiB));
    void *keep_small = get(1000, 0);
    void *keep_large = get(5 * MiB, 0);
    void *drop[6];
    for (int i = 0; i < 6; i++)
        drop[i] = get((size_t)(i + 1) * 3 * MiB, (tdm_stream)(i % 2));
    void *drop_small = get(3000, 3);
    for (int i = 0; i < 6; i++)
        put(drop[i]);
    put(drop_small);
    assert_int_equal(tdm_empty_cache(0), TDM_OK);
    check();
    tdm_stats s = pool_stats(0);
    /* Only the two segments with live blocks stay. */
    assert_int_equal(s.segment.current, 2);
    assert_int_equal(s.reserved_bytes.current, 2 * MiB + 20 * MiB);
    size_t f = 0, t = 0;
    assert_int_equal(tdm_mem_get_info(0, &f, &t), TDM_OK);
    assert_int_equal(t - f, 22 * MiB);
    put(keep_small);
    put(keep_large);
    assert_int_equal(tdm_empty_cache(-1), TDM_OK);
    assert_int_equal(pool_stats(0).reserved_bytes.current, 0);
    assert_int_equal(tdm_empty_cache(7), TDM_NO_SUCH_DEVICE);
}

typedef struct state_seen {
    int pending, allocated, inactive, segments;
    int tiled, ordered;
    uint64_t last;
} state_seen;

static void see_segment(void *ctx, const tdm_snap_segment *seg,
                        const tdm_snap_block *b, size_t n)
{
    state_seen *s = ctx;
    s->segments++;
    if (seg->address < s->last)
        s->ordered = 0;
    s->last = seg->address;
    uint64_t at = seg->address;
    for (size_t i = 0; i < n; i++) {
        if (b[i].address != at)
            s->tiled = 0;
        at += b[i].size;
        s->pending += b[i].state == TDM_BLOCK_ACTIVE_PENDING_FREE;
        s->allocated += b[i].state == TDM_BLOCK_ACTIVE_ALLOCATED;
        s->inactive += b[i].state == TDM_BLOCK_INACTIVE;
    }
    if (at != seg->address + seg->total_size)
        s->tiled = 0;
}

static state_seen visit(void)
{
    state_seen s = {.tiled = 1, .ordered = 1};
    tdm__state_visitor v = {.ctx = &s, .segment = see_segment};
    tdm__alloc_visit_for_tests(&v);
    return s;
}

static int count_action(int action, uint64_t addr)
{
    tdm_event *ev = NULL;
    size_t n = 0;
    uint64_t dropped = 0;
    assert_int_equal(tdm__rec_copy_events(&ev, &n, &dropped), TDM_OK);
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += ev[i].action == action && ev[i].addr == addr;
    free(ev);
    return c;
}

static void test_record_stream(void **state)
{
    (void)state;
    use(base_cfg(256 * MiB));
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    o.stacks = TDM_STACKS_NONE;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    char *a = get(4096, 0);
    assert_int_equal(tdm_record_stream(a, 7), TDM_OK);
    assert_int_equal(tdm_record_stream(a, 8), TDM_OK);
    assert_int_equal(tdm_record_stream(a, 0), TDM_OK); /* its own: ignored */
    assert_int_equal(tdm_record_stream(a + 512, 7), TDM_UNKNOWN_POINTER);
    put(a);
    /* Freed but still in use by streams 7 and 8: pending. */
    tdm_stats s = pool_stats(0);
    assert_int_equal(s.allocated_bytes.current, 0);
    assert_int_equal(s.allocation.current, 0);
    assert_int_equal(s.active_bytes.current, 4096);
    assert_int_equal(s.requested_bytes.current, 4096);
    state_seen v = visit();
    assert_int_equal(v.pending, 1);
    assert_true(v.tiled);
    assert_int_equal(count_action(TDM_ACTION_FREE_REQUESTED, (uintptr_t)a), 1);
    assert_int_equal(count_action(TDM_ACTION_FREE_COMPLETED, (uintptr_t)a), 0);
    assert_int_equal(tdm_free(a), TDM_UNKNOWN_POINTER); /* already freed */
    /* Not reused while pending. */
    char *b = get(4096, 0);
    assert_ptr_not_equal(b, a);
    assert_int_equal(tdm_stream_synchronize(9), TDM_OK);
    check();
    assert_int_equal(visit().pending, 1);
    assert_int_equal(tdm_stream_synchronize(7), TDM_OK);
    check();
    assert_int_equal(visit().pending, 1);
    assert_int_equal(tdm_stream_synchronize(8), TDM_OK);
    check();
    assert_int_equal(visit().pending, 0);
    assert_int_equal(count_action(TDM_ACTION_FREE_COMPLETED, (uintptr_t)a), 1);
    s = pool_stats(0);
    assert_int_equal(s.active_bytes.current, 4096);
    assert_int_equal(s.requested_bytes.current, 4096);
    char *c = get(4096, 0);
    assert_ptr_equal(c, a); /* back in the pool */
    /* Device sync completes every pending free at once. */
    for (int i = 0; i < 6; i++)
        assert_int_equal(tdm_record_stream(c, (tdm_stream)(100 + i)), TDM_OK);
    put(c);
    assert_int_equal(visit().pending, 1);
    assert_int_equal(tdm_device_synchronize(0), TDM_OK);
    check();
    assert_int_equal(visit().pending, 0);
    put(b);
    /* empty_cache waits for pending frees first, then gives everything back. */
    char *d = get(4096, 0);
    assert_int_equal(tdm_record_stream(d, 3), TDM_OK);
    put(d);
    assert_int_equal(tdm_empty_cache(0), TDM_OK);
    check();
    assert_int_equal(pool_stats(0).reserved_bytes.current, 0);
}

static void test_garbage_collection(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(200 * MiB);
    cfg.garbage_collection_threshold = 0.5;
    use(cfg);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = get(15 * MiB, 0); /* four 16 MiB segments: 64 MiB */
    void *live = get(40 * MiB, 0);  /* 104 MiB reserved, over the 100 MiB line */
    for (int i = 0; i < 4; i++)
        put(p[i]);
    assert_int_equal(pool_stats(0).reserved_bytes.current, 104 * MiB);
    /* A new segment is needed (stream 1 has no cache): GC first frees aged
     * cached segments until reserved is back under 100 MiB. */
    void *q = get(15 * MiB, 1);
    tdm_stats s = pool_stats(0);
    /* Equal ages: one pass frees all four, as PyTorch's does. */
    assert_int_equal(s.reserved_bytes.current, (int64_t)(40 * MiB + 16 * MiB));
    assert_int_equal(s.segment.freed, 4);
    assert_int_equal(s.num_alloc_retries, 0);
    put(q);
    put(live);
}

/* With a memory fraction set, the threshold is a share of the fraction's
 * limit (PyTorch's allowed_memory_maximum), not of the capacity. */
static void test_garbage_collection_under_a_fraction(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(400 * MiB);
    cfg.garbage_collection_threshold = 0.5;
    use(cfg);
    assert_int_equal(tdm__alloc_set_memory_fraction(0.5, 0), TDM_OK); /* 200 MiB */
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = get(15 * MiB, 0);
    void *live = get(40 * MiB, 0); /* 104 MiB: over 0.5 x 200, far under 0.5 x 400 */
    for (int i = 0; i < 4; i++)
        put(p[i]);
    void *q = get(15 * MiB, 1);
    tdm_stats s = pool_stats(0);
    assert_int_equal(s.reserved_bytes.current, (int64_t)(40 * MiB + 16 * MiB));
    assert_int_equal(s.segment.freed, 4);
    put(q);
    put(live);
}

static void test_snapshot_state(void **state)
{
    (void)state;
    use(base_cfg(256 * MiB));
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    char *a = get(1000, 0), *b = get(2000, 0), *c = get(5 * MiB, 0);
    put(b);
    assert_int_equal(tdm_tag_ptr(a, TDM_CATEGORY_GRADIENT), TDM_OK);
    assert_int_equal(tdm_tag_ptr(b, TDM_CATEGORY_GRADIENT), TDM_UNKNOWN_POINTER);
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    assert_string_equal(snap->header.alloc_mode, "cache");
    assert_int_equal(snap->segment_count, 2);
    size_t small = 0, large = 0, grads = 0, total_blocks = 0;
    for (size_t i = 0; i < snap->segment_count; i++) {
        const tdm_snap_segment *s = &snap->segments[i];
        small += s->pool == TDM_POOL_SMALL;
        large += s->pool == TDM_POOL_LARGE;
        uint64_t at = s->address;
        for (uint32_t k = 0; k < s->block_count; k++) {
            const tdm_snap_block *bl = &snap->blocks[s->first_block + k];
            assert_int_equal(bl->address, at);
            at += bl->size;
            grads += bl->category == TDM_CATEGORY_GRADIENT;
            if (bl->state == TDM_BLOCK_ACTIVE_ALLOCATED)
                assert_int_not_equal(bl->stack_id, 0);
            else
                assert_int_equal(bl->requested_size, 0);
        }
        total_blocks += s->block_count;
        assert_int_equal(at, s->address + s->total_size);
    }
    assert_int_equal(small, 1);
    assert_int_equal(large, 1);
    assert_int_equal(grads, 1);
    /* small: a, freed b merged with the rest; large: c + rest. */
    assert_int_equal(total_blocks, 4);
    tdm__rec_snapshot_free(snap);
    put(a);
    put(c);
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *live[32] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&seed) % 32);
        if (live[k]) {
            if (tdm_free(live[k]) != TDM_OK)
                return (void *)1;
            live[k] = NULL;
        } else {
            size_t sz = (size_t)1 << (rand_r(&seed) % 24);
            sz += (size_t)(rand_r(&seed) % 4096);
            if (tdm_malloc(&live[k], sz, k % 2, (tdm_stream)(k % 3)) != TDM_OK)
                return (void *)1;
        }
    }
    for (int k = 0; k < 32; k++)
        if (live[k] && tdm_free(live[k]) != TDM_OK)
            return (void *)1;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(4096 * MiB);
    cfg.device_count = 2;
    use(cfg);
    pthread_t t[6];
    for (uintptr_t i = 0; i < 6; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < 6; i++) {
        void *ret = (void *)2;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    check();
    for (int d = 0; d < 2; d++) {
        tdm_stats s = {.size = sizeof s};
        assert_int_equal(tdm_memory_stats(d, &s), TDM_OK);
        assert_int_equal(s.allocation.current, 0);
        assert_int_equal(s.allocation.allocated, s.allocation.freed);
        assert_true(s.allocation.allocated > 0);
    }
    assert_int_equal(tdm_empty_cache(-1), TDM_OK);
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(1, &s), TDM_OK);
    assert_int_equal(s.reserved_bytes.current, 0);
}

/* With several devices a freed pointer is routed by the address span of
 * each device's segments, and the device's own map decides.  Where spans
 * overlap (a vendor may interleave its devices' address ranges), the next
 * device whose span covers the pointer is asked: a free, a tag and a
 * record_stream still reach the block on device 1 when device 0's span
 * covers every address, and a pointer nobody holds stays unknown. */
/* The block map under churn: entries taken leave marks behind that puts
 * reuse and rebuilds purge; every lookup, present or absent, stays right
 * against a plain array, and the table stays small. */
static void test_block_map_churn(void **state)
{
    (void)state;
    enum { N = 6000, STEPS = 400000 };
    cblock *blocks = calloc(N, sizeof *blocks);
    int *in = calloc(N, sizeof *in);
    assert_non_null(blocks);
    assert_non_null(in);
    cmap m;
    memset(&m, 0, sizeof m);
    uint64_t x = 88172645463325252ULL;
    size_t live = 0, max_cap = 0;
    for (int i = 0; i < N; i++) /* clustered addresses, as segments give */
        blocks[i].addr = 0x7f0000000000ULL + (uint64_t)(i / 64) * (2u << 20) +
                         (uint64_t)(i % 64) * 512u;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* Live entries swing between a few and a few thousand. */
        size_t want = (size_t)step / 20000 % 2 ? 3000 : 40;
        int k = (int)(x % N);
        if (!in[k] && live < want) {
            assert_int_equal(tdm__cmap_put(&m, &blocks[k]), 1);
            in[k] = 1;
            live++;
        } else if (in[k]) {
            assert_ptr_equal(tdm__cmap_take(&m, blocks[k].addr), &blocks[k]);
            in[k] = 0;
            live--;
        } else {
            assert_null(tdm__cmap_take(&m, blocks[k].addr));
        }
        assert_int_equal(m.count, live);
        assert_true(m.used * 4 <= m.cap);
        if (m.cap > max_cap)
            max_cap = m.cap;
        if (step % 50000 == 0)
            for (int i = 0; i < N; i++)
                assert_ptr_equal(tdm__cmap_get(&m, blocks[i].addr), in[i] ? &blocks[i] : NULL);
    }
    /* Live entries never pass 3000: the table need not pass 8 * 4096. */
    assert_true(max_cap <= 32768);
    assert_null(tdm__cmap_get(&m, TDM__CMAP_GONE));
    assert_null(tdm__cmap_take(&m, TDM__CMAP_GONE));
    tdm__cmap_destroy(&m);
    free(blocks);
    free(in);
}

static void test_devices_with_overlapping_spans(void **state)
{
    (void)state;
    tdm__alloc_config cfg = base_cfg(256 * MiB);
    cfg.device_count = 2;
    use(cfg);
    void *on0 = NULL, *on1 = NULL;
    assert_int_equal(tdm_malloc(&on0, 4096, 0, 0), TDM_OK);
    assert_int_equal(tdm_malloc(&on1, 4096, 1, 0), TDM_OK);
    /* Distinct spans first: each pointer is only in its own device's. */
    assert_true(tdm__cache_may_hold(0, (uintptr_t)on0));
    assert_false(tdm__cache_may_hold(0, (uintptr_t)on1));
    assert_true(tdm__cache_may_hold(1, (uintptr_t)on1));
    tdm__cache_device *d0 = tdm__alloc_g.cache[0];
    atomic_store(&d0->span_lo, 0);
    atomic_store(&d0->span_hi, UINT64_MAX);
    assert_true(tdm__cache_may_hold(0, (uintptr_t)on1));
    assert_int_equal(tdm__cache_device_of((uintptr_t)on1), 1);
    assert_int_equal(tdm_tag_ptr(on1, TDM_CATEGORY_GRADIENT), TDM_OK);
    assert_int_equal(tdm_record_stream(on1, 7), TDM_OK);
    int x;
    assert_int_equal(tdm_free(&x), TDM_UNKNOWN_POINTER);
    assert_int_equal(tdm_free(on1), TDM_OK);
    assert_int_equal(tdm_free(on1), TDM_UNKNOWN_POINTER);
    assert_int_equal(tdm_free(on0), TDM_OK);
    check();
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(1, &s), TDM_OK);
    assert_int_equal(s.allocation.current, 0);
    assert_int_equal(s.allocation.freed, 1);
}

/* The checker itself must notice broken state, or every test above that
 * relies on it proves nothing. */
static void test_checker_catches_corruption(void **state)
{
    (void)state;
    use(base_cfg(256 * MiB));
    char *a = get(1000, 0), *b = get(1000, 0);
    tdm__cache_device *d = tdm__alloc_g.cache[0];
    char msg[256] = "";
    d->stats.st[0][TDM__ST_ALLOCATED_BYTES].current += 512;
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
    assert_non_null(strstr(msg, "stat"));
    d->stats.st[0][TDM__ST_ALLOCATED_BYTES].current -= 512;
    check();
    cblock *blk = tdm__cmap_get(&d->map, (uintptr_t)b);
    assert_non_null(blk);
    /* An allocated block missing from the device's pointer map. */
    assert_ptr_equal(tdm__cmap_take(&d->map, (uintptr_t)b), blk);
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
    assert_non_null(strstr(msg, "pointer map"));
    assert_int_equal(tdm__cmap_put(&d->map, blk), 1);
    check();
    blk->size += 512;
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
    assert_non_null(strstr(msg, "tile"));
    blk->size -= 512;
    blk->state = TDM_BLOCK_INACTIVE; /* inactive but in no pool tree */
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_INTERNAL);
    blk->state = TDM_BLOCK_ACTIVE_ALLOCATED;
    check();
    put(a);
    put(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_round_size, teardown),
        cmocka_unit_test_teardown(test_huge_requests, teardown),
        cmocka_unit_test_teardown(test_pool_table, teardown),
        cmocka_unit_test_teardown(test_split_merge_best_fit, teardown),
        cmocka_unit_test_teardown(test_streams_do_not_share, teardown),
        cmocka_unit_test_teardown(test_max_split_size, teardown),
        cmocka_unit_test_teardown(test_oom_release_retry, teardown),
        cmocka_unit_test_teardown(test_empty_cache, teardown),
        cmocka_unit_test_teardown(test_record_stream, teardown),
        cmocka_unit_test_teardown(test_garbage_collection, teardown),
        cmocka_unit_test_teardown(test_garbage_collection_under_a_fraction, teardown),
        cmocka_unit_test_teardown(test_snapshot_state, teardown),
        cmocka_unit_test_teardown(test_threads, teardown),
        cmocka_unit_test_teardown(test_devices_with_overlapping_spans, teardown),
        cmocka_unit_test(test_block_map_churn),
        cmocka_unit_test_teardown(test_checker_catches_corruption, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
