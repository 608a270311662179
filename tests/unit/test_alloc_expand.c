/* tests/unit/test_alloc_expand.c: expandable segments (expandable_segments=1)
 * on the sim device: pages mapped at a segment's tail as it grows,
 * unmapped by empty_cache (not by free), large blocks that do not
 * fragment where normal segments do, the capacity honoured, the
 * segment_map / segment_unmap events and the snapshot's expandable
 * segments, streams, the fallback of a provider without virtual memory
 * management, and random and threaded churn.  tdm__alloc_check runs after
 * every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "cache_internal.h"
#include "provider.h"
#include "recorder.h"
#include "alloc_fixtures.h"

#define MiB ((size_t)1 << 20)

static void check(void)
{
    tdm_test_check_devices();
}

static tdm__alloc_config cfg_of(size_t capacity, int expandable)
{
    tdm__alloc_config cfg = tdm_test_cache_config(capacity);
    cfg.expandable_segments = expandable;
    return cfg;
}

static void use(size_t capacity, int expandable)
{
    tdm__alloc_config cfg = cfg_of(capacity, expandable);
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_init(), TDM_OK);
}

static void record(void)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
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

static tdm_stats stats(void)
{
    tdm_stats s = {.size = sizeof s};
    assert_int_equal(tdm_memory_stats(0, &s), TDM_OK);
    return s;
}

static size_t used_on_device(void)
{
    size_t free_bytes = 0, total = 0;
    assert_int_equal(tdm_mem_get_info(0, &free_bytes, &total), TDM_OK);
    return total - free_bytes;
}

static char *get(size_t size, tdm_stream stream)
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

static void empty(void)
{
    assert_int_equal(tdm_empty_cache(0), TDM_OK);
    check();
}

/* A request that fits no cached block maps just the pages it needs, right
 * after the free tail, so the segment grows in place. */
static void test_grows_at_the_tail(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    char *a = get(30 * MiB, 0);
    assert_int_equal(stats().reserved_bytes.current, 40 * MiB); /* two 20 MiB pages */
    assert_int_equal(used_on_device(), 40 * MiB);
    char *b = get(8 * MiB, 0); /* fits the mapped tail: no new page */
    assert_ptr_equal(b, a + 30 * MiB);
    assert_int_equal(stats().reserved_bytes.current, 40 * MiB);
    char *c = get(15 * MiB, 0); /* 2 MiB left at the tail + one more page */
    assert_ptr_equal(c, a + 38 * MiB);
    assert_int_equal(stats().reserved_bytes.current, 60 * MiB);
    assert_int_equal(stats().segment.current, 1);
    /* The small pool grows in 2 MiB pages, in a segment of its own. */
    char *s1 = get(1000, 0), *s2 = get(MiB, 0);
    assert_ptr_equal(s2, s1 + 1024);
    char *s3 = get(MiB, 0); /* 1 MiB - 1 KiB left: one more 2 MiB page */
    assert_ptr_equal(s3, s2 + MiB);
    tdm_stats small = {.size = sizeof small};
    assert_int_equal(tdm_memory_stats_pool(0, TDM_STAT_POOL_SMALL, &small), TDM_OK);
    assert_int_equal(small.reserved_bytes.current, 4 * MiB);
    assert_int_equal(stats().segment.current, 2);
    put(a);
    put(b);
    put(c);
    put(s1);
    put(s2);
    put(s3);
}

/* Freeing keeps the pages (PyTorch unmaps only when releasing the cache);
 * empty_cache unmaps every whole free page and drops ranges left empty. */
static void test_shrinks_on_empty_cache(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    char *a = get(30 * MiB, 0), *b = get(45 * MiB, 0);
    assert_int_equal(stats().reserved_bytes.current, 80 * MiB);
    put(b);
    assert_int_equal(stats().reserved_bytes.current, 80 * MiB);
    assert_int_equal(used_on_device(), 80 * MiB);
    empty(); /* b's pages past a's last page go: [40 MiB, 80 MiB) */
    assert_int_equal(stats().reserved_bytes.current, 40 * MiB);
    assert_int_equal(used_on_device(), 40 * MiB);
    char *c = get(50 * MiB, 0); /* the free 10 MiB after a, then new pages */
    assert_ptr_equal(c, a + 30 * MiB);
    assert_int_equal(stats().reserved_bytes.current, 80 * MiB);
    put(a);
    empty(); /* a's first page is whole and free; its second holds c */
    assert_int_equal(stats().reserved_bytes.current, 60 * MiB);
    put(c);
    empty();
    assert_int_equal(stats().reserved_bytes.current, 0);
    assert_int_equal(stats().segment.current, 0);
    assert_int_equal(used_on_device(), 0);
}

/* Three 60 MiB blocks, the first and last freed, then 100 MiB on a
 * 200 MiB device: normal segments leave no 100 MiB hole in the device's
 * address space even after releasing the cache; an expandable segment
 * unmaps the free pages and maps them again where they are needed. */
static int fragmented_request(int expandable)
{
    use(200 * MiB, expandable);
    char *a = get(60 * MiB, 0), *b = get(60 * MiB, 0), *c = get(60 * MiB, 0);
    put(a);
    put(c);
    void *p = NULL;
    tdm_status st = tdm_malloc(&p, 100 * MiB, 0, 0);
    check();
    if (st == TDM_OK)
        put(p);
    put(b);
    return st;
}

static void test_large_blocks_do_not_fragment(void **state)
{
    (void)state;
    assert_int_equal(fragmented_request(0), TDM_OUT_OF_MEMORY);
    assert_int_equal(fragmented_request(1), TDM_OK);
    assert_int_equal(stats().num_alloc_retries, 1); /* after unmapping a's and c's pages */
}

static void test_capacity_honoured(void **state)
{
    (void)state;
    use(100 * MiB, 1);
    char *a = get(90 * MiB, 0); /* five 20 MiB pages: the whole device */
    assert_int_equal(used_on_device(), 100 * MiB);
    void *p = NULL;
    assert_int_equal(tdm_malloc(&p, 20 * MiB, 0, 0), TDM_OUT_OF_MEMORY);
    assert_int_equal(tdm_malloc(&p, 1000, 0, 0), TDM_OUT_OF_MEMORY); /* no small page */
    assert_int_equal(tdm_malloc(&p, 200 * MiB, 0, 0), TDM_OUT_OF_MEMORY);
    check();
    assert_int_equal(stats().num_ooms, 3);
    char *b = get(9 * MiB, 0); /* the mapped tail still serves */
    assert_ptr_equal(b, a + 90 * MiB);
    put(a);
    put(b);
    /* The small page fits only once the large pages are unmapped (the
     * retry), and the large range, left with none, goes; a failed mapping
     * of a fresh range keeps no range behind either (the checker). */
    char *s = get(1000, 0);
    assert_int_equal(stats().num_alloc_retries, 4); /* one per OOM above too */
    assert_int_equal(stats().segment.current, 1);
    assert_int_equal(stats().reserved_bytes.current, 2 * MiB);
    put(s);
    char *big = get(95 * MiB, 0); /* needs the small page back */
    assert_int_equal(stats().segment.current, 1);
    assert_int_equal(stats().reserved_bytes.current, 100 * MiB);
    put(big);
}

/* segment_map / segment_unmap events, no segment_alloc; the snapshot
 * shows one expandable segment per run of mapped pages. */
static void test_events_and_snapshot(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    record();
    char *a = get(30 * MiB, 0), *b = get(15 * MiB, 0), *c = get(30 * MiB, 0);
    put(b);
    empty(); /* [30, 45) MiB and [75, 80) MiB are free: no whole page */
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    uint64_t base = (uint64_t)(uintptr_t)a;
    const uint64_t want[][3] = {
        {TDM_ACTION_SEGMENT_MAP, base, 40 * MiB}, {TDM_ACTION_ALLOC, base, 30 * MiB},
        {TDM_ACTION_SEGMENT_MAP, base + 40 * MiB, 20 * MiB},
        {TDM_ACTION_ALLOC, base + 30 * MiB, 15 * MiB},
        {TDM_ACTION_SEGMENT_MAP, base + 60 * MiB, 20 * MiB},
        {TDM_ACTION_ALLOC, base + 45 * MiB, 30 * MiB},
        {TDM_ACTION_FREE_REQUESTED, base + 30 * MiB, 15 * MiB},
        {TDM_ACTION_FREE_COMPLETED, base + 30 * MiB, 15 * MiB}};
    assert_ptr_equal(c, a + 45 * MiB);
    size_t n = 0;
    for (size_t i = 0; i < snap->event_count; i++) {
        const tdm_event *e = &snap->events[i];
        if (e->action == TDM_ACTION_SNAPSHOT)
            continue;
        assert_int_not_equal(e->action, TDM_ACTION_SEGMENT_ALLOC);
        if (n >= sizeof want / sizeof want[0])
            fail_msg("extra event %u at %#llx", e->action, (unsigned long long)e->addr);
        assert_int_equal(e->action, want[n][0]);
        assert_int_equal(e->addr, want[n][1]);
        if (want[n][2])
            assert_int_equal(e->size, want[n][2]);
        n++;
    }
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_int_equal(snap->segment_count, 1);
    assert_int_equal(snap->segments[0].is_expandable, 1);
    assert_int_equal(snap->segments[0].address, base);
    assert_int_equal(snap->segments[0].total_size, 80 * MiB);
    tdm__rec_snapshot_free(snap);
    /* Freed, a joins [30, 45): pages 0 and 1 are whole and free and go;
     * [40, 45) and c's pages stay, one run at base + 40 MiB. */
    put(a);
    empty();
    snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    const tdm_event *last = &snap->events[snap->event_count - 1];
    while (last->action == TDM_ACTION_SNAPSHOT)
        last--;
    assert_int_equal(last->action, TDM_ACTION_SEGMENT_UNMAP);
    assert_int_equal(last->addr, base);
    assert_int_equal(last->size, 40 * MiB);
    assert_int_equal(snap->segment_count, 1);
    assert_int_equal(snap->segments[0].address, base + 40 * MiB);
    assert_int_equal(snap->segments[0].total_size, 40 * MiB);
    tdm__rec_snapshot_free(snap);
    put(c);
}

/* A hole left by unmapping in the middle is mapped again in place. */
static void test_hole_mapped_again(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    char *a = get(20 * MiB, 0), *b = get(20 * MiB, 0), *c = get(20 * MiB, 0);
    put(b);
    empty();
    assert_int_equal(stats().reserved_bytes.current, 40 * MiB);
    char *d = get(20 * MiB, 0);
    assert_ptr_equal(d, a + 20 * MiB);
    assert_int_equal(stats().reserved_bytes.current, 60 * MiB);
    put(a);
    put(c);
    put(d);
    empty();
}

static void test_streams_have_their_own(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    char *a = get(30 * MiB, 1), *b = get(5 * MiB, 2);
    assert_int_equal(stats().segment.current, 2);
    assert_int_equal(stats().reserved_bytes.current, 60 * MiB);
    char *c = get(5 * MiB, 1); /* stream 1's free tail */
    assert_ptr_equal(c, a + 30 * MiB);
    put(a);
    put(b);
    put(c);
}

/* Host-accessible sim memory: mapped pages hold data; a page mapped again
 * after empty_cache reads as zero, one never unmapped keeps its data. */
static void test_host_access(void **state)
{
    (void)state;
    tdm__alloc_config cfg = cfg_of(256 * MiB, 1);
    cfg.host_accessible = 1;
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    char *a = get(25 * MiB, 0), *k = get(10 * MiB, 0);
    memset(a, 0x5a, 25 * MiB);
    assert_int_equal(a[25 * MiB - 1], 0x5a);
    put(a);
    empty(); /* page 0 goes; page 1 holds k */
    assert_int_equal(stats().reserved_bytes.current, 20 * MiB);
    char *b = get(25 * MiB, 0);
    assert_ptr_equal(a, b);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[20 * MiB - 1], 0);
    assert_int_equal(b[20 * MiB], 0x5a);
    put(b);
    put(k);
}

/* ---- a provider without virtual memory management: the fallback -------- */

static tdm_provider *inner;

static tdm_status plain_alloc(tdm_provider *p, int d, size_t s, tdm_stream st, void **o)
{
    (void)p;
    return inner->alloc(inner, d, s, st, o);
}
static tdm_status plain_free(tdm_provider *p, int d, void *ptr, size_t s)
{
    (void)p;
    return inner->free(inner, d, ptr, s);
}
static tdm_status plain_info(tdm_provider *p, int d, size_t *f, size_t *t)
{
    (void)p;
    return inner->mem_info(inner, d, f, t);
}
static void plain_name(tdm_provider *p, int d, char *buf, size_t len)
{
    (void)p;
    inner->device_name(inner, d, buf, len);
}
static void plain_destroy(tdm_provider *p)
{
    inner->destroy(inner);
    free(p);
}

static void test_fallback_line(void **state)
{
    (void)state;
    tdm_sim_config sc = {.device_count = 2, .capacity = 256 * MiB};
    assert_int_equal(tdm__provider_sim_create(&sc, &inner), TDM_OK);
    tdm_provider *p = calloc(1, sizeof *p);
    assert_non_null(p);
    *p = *inner;
    p->alloc = plain_alloc;
    p->free = plain_free;
    p->mem_info = plain_info;
    p->device_name = plain_name;
    p->destroy = plain_destroy;
    p->vmm = NULL;
    tdm__alloc_config cfg = cfg_of(256 * MiB, 1);
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_use_provider(p), TDM_OK);

    char path[] = "/tmp/tdm_expand_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    tdm_status st = tdm__alloc_init();
    char *a = st == TDM_OK ? get(30 * MiB, 0) : NULL;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(st, TDM_OK);
    char text[512] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    assert_true(got > 0);
    text[got] = '\0';
    assert_non_null(strstr(text, "expandable_segments=1: sim device 0 has no virtual memory "
                                 "management; it uses normal segments\n"));
    assert_int_equal(strchr(text, '\n') - text, (long)strlen(text) - 1); /* one line */
    /* Normal segments: 30 MiB is its own segment. */
    assert_int_equal(stats().reserved_bytes.current, 30 * MiB);
    put(a);
}

/* A forked child forgets the parent's segments, expandable ones too, and
 * grows its own. */
static void test_fork_child_forgets(void **state)
{
    (void)state;
    use(1024 * MiB, 1);
    char *a = get(30 * MiB, 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* What the preload's fork handler calls (the sim device itself
         * still counts the parent's pages, so no provider check here). */
        tdm__alloc_forget_inherited();
        void *p = NULL;
        tdm_stats s = {.size = sizeof s}, t = {.size = sizeof t}, u = {.size = sizeof u};
        int ok = tdm_memory_stats(0, &s) == TDM_OK && s.reserved_bytes.current == 0 &&
                 tdm_malloc(&p, 30 * MiB, 0, 0) == TDM_OK && tdm_memory_stats(0, &t) == TDM_OK &&
                 t.reserved_bytes.current == 40 * MiB && t.segment.current == 1 &&
                 tdm_free(p) == TDM_OK && tdm_empty_cache(0) == TDM_OK &&
                 tdm_memory_stats(0, &u) == TDM_OK && u.reserved_bytes.current == 0 &&
                 u.segment.current == 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    put(a);
}

/* ---- churn -------------------------------------------------------------- */

static void test_random_churn(void **state)
{
    (void)state;
    use(512 * MiB, 1);
    unsigned seed = 7;
    void *live[24] = {0};
    for (int i = 0; i < 3000; i++) {
        int k = (int)(rand_r(&seed) % 24);
        if (live[k]) {
            assert_int_equal(tdm_free(live[k]), TDM_OK);
            live[k] = NULL;
        } else {
            size_t sz = ((size_t)1 << (rand_r(&seed) % 26)) + rand_r(&seed) % 4096;
            tdm_status st = tdm_malloc(&live[k], sz, 0, (tdm_stream)(k % 2));
            assert_true(st == TDM_OK || st == TDM_OUT_OF_MEMORY);
        }
        if (i % 97 == 0)
            assert_int_equal(tdm_empty_cache(0), TDM_OK);
        if (i % 7 == 0)
            check();
    }
    for (int k = 0; k < 24; k++)
        if (live[k])
            put(live[k]);
    empty();
    assert_int_equal(stats().reserved_bytes.current, 0);
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *live[16] = {0};
    for (int i = 0; i < 3000; i++) {
        int k = (int)(rand_r(&seed) % 16);
        if (live[k]) {
            if (tdm_free(live[k]) != TDM_OK)
                return (void *)1;
            live[k] = NULL;
        } else {
            size_t sz = ((size_t)1 << (rand_r(&seed) % 25)) + rand_r(&seed) % 4096;
            if (tdm_malloc(&live[k], sz, 0, (tdm_stream)(k % 3)) != TDM_OK)
                return (void *)1;
        }
        if (i % 500 == 0 && tdm_empty_cache(0) != TDM_OK)
            return (void *)1;
    }
    for (int k = 0; k < 16; k++)
        if (live[k] && tdm_free(live[k]) != TDM_OK)
            return (void *)1;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    use(4096 * MiB, 1);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)), 0);
    for (int i = 0; i < 3; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    check();
    empty();
    assert_int_equal(stats().reserved_bytes.current, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_grows_at_the_tail, teardown),
        cmocka_unit_test_teardown(test_shrinks_on_empty_cache, teardown),
        cmocka_unit_test_teardown(test_large_blocks_do_not_fragment, teardown),
        cmocka_unit_test_teardown(test_capacity_honoured, teardown),
        cmocka_unit_test_teardown(test_events_and_snapshot, teardown),
        cmocka_unit_test_teardown(test_hole_mapped_again, teardown),
        cmocka_unit_test_teardown(test_streams_have_their_own, teardown),
        cmocka_unit_test_teardown(test_host_access, teardown),
        cmocka_unit_test_teardown(test_fallback_line, teardown),
        cmocka_unit_test_teardown(test_fork_child_forgets, teardown),
        cmocka_unit_test_teardown(test_random_churn, teardown),
        cmocka_unit_test_teardown(test_threads, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
