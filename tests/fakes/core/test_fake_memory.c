/* tests/fakes/core/test_fake_memory.c: the fakes' shared device-memory core
 * (fake_memory.c, fake_pool.c) against a plain model: thousands of
 * allocations made and freed in a scrambled order (the registry grows past
 * its first table and deletes inside probe runs), each one found again by
 * its key and by an address inside it, the device's bytes and the live
 * count exact after every step, capacity refused and kept, and a pool's
 * bytes through take, give back and keep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fake_memory.h"
#include "fake_pool.h"

#define N 5000
enum { K_DEV = 0, K_HOST = 1, K_HANDLE = 2 };

static void registry_matches_a_model(void **state)
{
    (void)state;
    static fake_memory m = FAKE_MEMORY_INIT(1u << K_DEV);
    m.capacity = (size_t)1 << 40;
    static uintptr_t key[N];
    static size_t size[N];
    static int live[N];
    size_t used = 0;
    long n_live = 0;
    unsigned seed = 12345;
    for (int i = 0; i < N; i++) {
        key[i] = 0x10000000u + (uintptr_t)i * 0x10000; /* 64 KiB apart */
        size[i] = 1 + (size_t)(rand_r(&seed) % 0x8000);
        int kind = i % 3 == 0 ? K_HOST : K_DEV;
        fake_mem a = {.key = key[i], .size = size[i], .device = 1, .kind = kind};
        assert_int_equal(fake_memory_track(&m, &a), FAKE_MEM_OK);
        live[i] = 1;
        n_live++;
        used += kind == K_DEV ? size[i] : 0;
        /* free one of the earlier ones now and then, out of order */
        if (i > 10 && rand_r(&seed) % 3 == 0) {
            int j = rand_r(&seed) % i;
            int was = live[j];
            fake_mem out;
            int kj = j % 3 == 0 ? K_HOST : K_DEV;
            assert_int_equal(fake_memory_untrack(&m, key[j], 1u << kj, &out), was);
            if (was) {
                assert_int_equal(out.size, size[j]);
                live[j] = 0;
                n_live--;
                used -= kj == K_DEV ? size[j] : 0;
            }
        }
        assert_int_equal(fake_memory_live(&m), n_live);
        assert_int_equal(fake_memory_used(&m, 1), used);
    }
    for (int i = 0; i < N; i++) {
        fake_mem a;
        assert_int_equal(fake_memory_get(&m, key[i], &a), live[i]);
        assert_int_equal(fake_memory_containing(&m, key[i] + size[i] / 2, 0, &a), live[i]);
        if (live[i])
            assert_int_equal(a.key, key[i]);
        /* the wrong kind is not freed */
        int other = i % 3 == 0 ? K_DEV : K_HOST;
        assert_int_equal(fake_memory_untrack(&m, key[i], 1u << other, NULL), 0);
    }
    assert_int_equal(fake_memory_containing(&m, key[0] + 0x9000, 0, &(fake_mem){0}), 0);
}

static void capacity_is_kept(void **state)
{
    (void)state;
    static fake_memory m = FAKE_MEMORY_INIT(1u << K_DEV);
    m.capacity = 1000;
    fake_mem a = {.key = 0x1000, .size = 600, .device = 0, .kind = K_DEV};
    assert_int_equal(fake_memory_track(&m, &a), FAKE_MEM_OK);
    fake_mem b = {.key = 0x2000, .size = 500, .device = 0, .kind = K_DEV};
    assert_int_equal(fake_memory_track(&m, &b), FAKE_MEM_OVER_CAPACITY);
    b.device = 1; /* another device has its own */
    assert_int_equal(fake_memory_track(&m, &b), FAKE_MEM_OK);
    fake_mem h = {.key = 0x3000, .size = 5000, .device = 0, .kind = K_HANDLE};
    assert_int_equal(fake_memory_track(&m, &h), FAKE_MEM_OK); /* not a counted kind */
    assert_int_equal(fake_memory_used(&m, 0), 600);
    assert_int_equal(fake_memory_used_change(&m, 0, 401), FAKE_MEM_OVER_CAPACITY);
    assert_int_equal(fake_memory_used_change(&m, 0, 400), FAKE_MEM_OK);
    assert_int_equal(fake_memory_used(&m, 0), 1000);
    assert_int_equal(fake_memory_set_extra(&m, 0x1000, &m), 1);
    fake_mem out;
    assert_int_equal(fake_memory_untrack(&m, 0x1000, 1u << K_DEV, &out), 1);
    assert_ptr_equal(out.extra, &m);
    assert_int_equal(fake_memory_used(&m, 0), 400);
    /* the containing scan passes over the kinds it is told to */
    assert_int_equal(fake_memory_containing(&m, 0x3010, 1u << K_HANDLE, &out), 0);
    assert_int_equal(fake_memory_containing(&m, 0x3010, 0, &out), 1);
}

static void pool_bytes(void **state)
{
    (void)state;
    static fake_memory m = FAKE_MEMORY_INIT(1u << K_DEV);
    m.capacity = 1000;
    fake_pool_bytes p = {0};
    assert_int_equal(fake_pool_bytes_take(&m, &p, 0, 300), FAKE_MEM_OK);
    assert_int_equal(fake_memory_used(&m, 0), 300); /* the pool grew */
    fake_pool_bytes_back(&p, 300);
    assert_int_equal(p.idle, 300);
    assert_int_equal(fake_pool_bytes_take(&m, &p, 0, 200), FAKE_MEM_OK); /* from idle */
    assert_int_equal(fake_memory_used(&m, 0), 300);
    assert_int_equal(p.used, 200);
    assert_int_equal(fake_pool_bytes_take(&m, &p, 0, 900), FAKE_MEM_OVER_CAPACITY); /* 800 more */
    assert_int_equal(p.used, 200); /* nothing changed */
    assert_int_equal(p.used_high, 300);
    fake_pool_bytes_keep(&m, &p, 0, 0); /* only what is idle goes */
    assert_int_equal(p.reserved, 200);
    assert_int_equal(fake_memory_used(&m, 0), 200);
    fake_pool_bytes_back(&p, 200);
    fake_pool_bytes_keep(&m, &p, 0, 50);
    assert_int_equal(p.reserved, 50);
    assert_int_equal(p.reserved_high, 300);
    assert_int_equal(fake_memory_used(&m, 0), 50);
}

static void failures_by_name(void **state)
{
    (void)state;
    static const char *const names[] = {"zeMemAllocDevice", "zeMemAllocHost", "zeMemFree"};
    long long codes[3] = {0};
    fake_fail_codes("zeMemAllocHost=0x70000002,zeMemFree=-3,nosuch=9", names, 3, codes);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], 0x70000002);
    assert_int_equal(codes[2], -3);
    fake_fail_codes(NULL, names, 3, codes); /* unset: nothing */
    assert_int_equal(codes[1], 0x70000002);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry_matches_a_model),
        cmocka_unit_test(capacity_is_kept),
        cmocka_unit_test(pool_bytes),
        cmocka_unit_test(failures_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
