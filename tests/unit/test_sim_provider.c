/* tests/unit/test_sim_provider.c: the sim device (alloc/provider_sim.c).
 *
 * Alignment, exact capacity accounting, out of memory, reuse and
 * coalescing after free, bad frees, memory that the host cannot touch
 * (a forked child dies with SIGSEGV) unless host_accessible, and threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "provider.h"

#define MiB ((size_t)1 << 20)

static tdm_provider *make(int n, uint64_t cap, int host)
{
    tdm_sim_config cfg = {.device_count = n, .capacity = cap, .host_accessible = host};
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_sim_create(&cfg, &p), TDM_OK);
    assert_non_null(p);
    return p;
}

static size_t free_of(tdm_provider *p, int dev)
{
    size_t f = 0, t = 0;
    assert_int_equal(p->mem_info(p, dev, &f, &t), TDM_OK);
    return f;
}

static void test_names_and_info(void **state)
{
    (void)state;
    tdm_provider *p = make(3, 64 * MiB, 0);
    assert_int_equal(p->vendor, TDM_VENDOR_SIM);
    assert_int_equal(p->device_count, 3);
    char name[16];
    p->device_name(p, 0, name, sizeof name);
    assert_string_equal(name, "sim0");
    p->device_name(p, 2, name, sizeof name);
    assert_string_equal(name, "sim2");
    size_t f = 0, t = 0;
    assert_int_equal(p->mem_info(p, 1, &f, &t), TDM_OK);
    assert_int_equal(t, 64 * MiB);
    assert_int_equal(f, 64 * MiB);
    assert_int_equal(p->mem_info(p, 3, &f, &t), TDM_NO_SUCH_DEVICE);
    void *x = NULL;
    assert_int_equal(p->alloc(p, -1, 512, 0, &x), TDM_NO_SUCH_DEVICE);
    p->destroy(p);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_alignment_and_accounting(void **state)
{
    (void)state;
    tdm_provider *p = make(2, 64 * MiB, 0);
    enum { N = 200 };
    void *ptrs[N];
    size_t sizes[N];
    size_t used = 0;
    for (int i = 0; i < N; i++) {
        sizes[i] = (size_t)(i * 977 % 70000) + 1;
        assert_int_equal(p->alloc(p, 1, sizes[i], 0, &ptrs[i]), TDM_OK);
        assert_int_equal((uintptr_t)ptrs[i] % 512, 0);
        used += (sizes[i] + 511) / 512 * 512;
        assert_int_equal(free_of(p, 1), 64 * MiB - used);
    }
    assert_int_equal(free_of(p, 0), 64 * MiB); /* devices are separate */
    /* No two ranges overlap. */
    uint64_t pairs[N][2];
    for (int i = 0; i < N; i++) {
        pairs[i][0] = (uint64_t)(uintptr_t)ptrs[i];
        pairs[i][1] = pairs[i][0] + (sizes[i] + 511) / 512 * 512;
    }
    qsort(pairs, N, sizeof pairs[0], cmp_u64);
    for (int i = 1; i < N; i++)
        assert_true(pairs[i - 1][1] <= pairs[i][0]);
    for (int i = 0; i < N; i += 2)
        assert_int_equal(p->free(p, 1, ptrs[i], sizes[i]), TDM_OK);
    for (int i = 1; i < N; i += 2)
        assert_int_equal(p->free(p, 1, ptrs[i], sizes[i]), TDM_OK);
    assert_int_equal(free_of(p, 1), 64 * MiB);
    /* Everything coalesced back: the whole capacity is one range again. */
    void *all = NULL;
    assert_int_equal(p->alloc(p, 1, 64 * MiB, 0, &all), TDM_OK);
    assert_int_equal(free_of(p, 1), 0);
    assert_int_equal(p->free(p, 1, all, 64 * MiB), TDM_OK);
    p->destroy(p);
}

static void test_out_of_memory_and_reuse(void **state)
{
    (void)state;
    tdm_provider *p = make(1, 8 * MiB, 0);
    void *a = NULL, *b = NULL, *c = (void *)1;
    assert_int_equal(p->alloc(p, 0, 4 * MiB, 0, &a), TDM_OK);
    assert_int_equal(p->alloc(p, 0, 4 * MiB, 0, &b), TDM_OK);
    assert_int_equal(p->alloc(p, 0, 1, 0, &c), TDM_OUT_OF_MEMORY);
    assert_null(c);
    assert_int_equal(p->alloc(p, 0, 9 * MiB, 0, &c), TDM_OUT_OF_MEMORY);
    assert_int_equal(free_of(p, 0), 0);
    /* Freeing makes room again, and best fit hands back the same place. */
    assert_int_equal(p->free(p, 0, a, 4 * MiB), TDM_OK);
    assert_int_equal(free_of(p, 0), 4 * MiB);
    assert_int_equal(p->alloc(p, 0, 4 * MiB, 0, &c), TDM_OK);
    assert_ptr_equal(c, a);
    /* Fragmented free space: two 1 MiB holes do not make a 2 MiB range. */
    assert_int_equal(p->free(p, 0, c, 4 * MiB), TDM_OK);
    void *q[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(p->alloc(p, 0, MiB, 0, &q[i]), TDM_OK);
    assert_int_equal(p->free(p, 0, q[0], MiB), TDM_OK);
    assert_int_equal(p->free(p, 0, q[2], MiB), TDM_OK);
    assert_int_equal(free_of(p, 0), 2 * MiB);
    assert_int_equal(p->alloc(p, 0, 2 * MiB, 0, &c), TDM_OUT_OF_MEMORY);
    /* Best fit: a 512-byte request takes a 1 MiB hole, the smaller one. */
    assert_int_equal(p->alloc(p, 0, 512, 0, &c), TDM_OK);
    assert_true(c == q[0] || c == q[2]);
    p->destroy(p);
}

static void test_bad_free_changes_nothing(void **state)
{
    (void)state;
    tdm_provider *p = make(1, 8 * MiB, 0);
    void *a = NULL;
    assert_int_equal(p->alloc(p, 0, 4096, 0, &a), TDM_OK);
    size_t before = free_of(p, 0);
    assert_int_equal(p->free(p, 0, (char *)a + 100, 512), TDM_INVALID_ARGUMENT);
    assert_int_equal(p->free(p, 0, (void *)0x1000, 512), TDM_INVALID_ARGUMENT);
    assert_int_equal(p->free(p, 0, a, 4096), TDM_OK);
    /* A second free of the same range overlaps free space: refused. */
    assert_int_equal(p->free(p, 0, a, 4096), TDM_INVALID_ARGUMENT);
    assert_int_equal(free_of(p, 0), before + 4096);
    p->destroy(p);
}

static void test_not_host_accessible(void **state)
{
    (void)state;
    tdm_provider *p = make(1, 8 * MiB, 0);
    void *a = NULL;
    assert_int_equal(p->alloc(p, 0, 4096, 0, &a), TDM_OK);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        *(volatile char *)a = 1; /* must fault */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
    p->destroy(p);
}

static void test_host_accessible(void **state)
{
    (void)state;
    tdm_provider *p = make(1, 8 * MiB, 1);
    unsigned char *a = NULL;
    assert_int_equal(p->alloc(p, 0, 3 * 4096, 0, (void **)&a), TDM_OK);
    for (size_t i = 0; i < 3 * 4096; i++)
        a[i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < 3 * 4096; i++)
        assert_int_equal(a[i], (unsigned char)(i * 7));
    assert_int_equal(p->free(p, 0, a, 3 * 4096), TDM_OK);
    /* Freed pages went back to the system: the same range reads as zero. */
    unsigned char *b = NULL;
    assert_int_equal(p->alloc(p, 0, 3 * 4096, 0, (void **)&b), TDM_OK);
    assert_ptr_equal(a, b);
    for (size_t i = 0; i < 3 * 4096; i++)
        assert_int_equal(b[i], 0);
    p->destroy(p);
}

typedef struct worker {
    tdm_provider *p;
    unsigned seed;
    int failures;
} worker;

static void *churn(void *arg)
{
    worker *w = arg;
    void *live[64] = {0};
    size_t sz[64] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&w->seed) % 64);
        if (live[k]) {
            if (w->p->free(w->p, 0, live[k], sz[k]) != TDM_OK)
                w->failures++;
            live[k] = NULL;
        } else {
            sz[k] = (size_t)(rand_r(&w->seed) % 100000) + 1;
            if (w->p->alloc(w->p, 0, sz[k], 0, &live[k]) != TDM_OK)
                w->failures++;
            else
                memset(live[k], (int)k, sz[k] < 64 ? sz[k] : 64);
        }
    }
    for (int k = 0; k < 64; k++)
        if (live[k] && w->p->free(w->p, 0, live[k], sz[k]) != TDM_OK)
            w->failures++;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    tdm_provider *p = make(1, 256 * MiB, 1);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.p = p, .seed = (unsigned)i + 1, .failures = 0};
        pthread_create(&t[i], NULL, churn, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(free_of(p, 0), 256 * MiB);
    void *all = NULL;
    assert_int_equal(p->alloc(p, 0, 256 * MiB, 0, &all), TDM_OK);
    p->destroy(p);
}

static void test_bad_config(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)1;
    tdm_sim_config cfg = {.device_count = 0, .capacity = MiB};
    assert_int_equal(tdm__provider_sim_create(&cfg, &p), TDM_INVALID_ARGUMENT);
    assert_null(p);
    cfg = (tdm_sim_config){.device_count = 1, .capacity = 0};
    assert_int_equal(tdm__provider_sim_create(&cfg, &p), TDM_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_info),
        cmocka_unit_test(test_alignment_and_accounting),
        cmocka_unit_test(test_out_of_memory_and_reuse),
        cmocka_unit_test(test_bad_free_changes_nothing),
        cmocka_unit_test(test_not_host_accessible),
        cmocka_unit_test(test_host_accessible),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
