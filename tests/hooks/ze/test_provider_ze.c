/* tests/hooks/ze/test_provider_ze.c: the Level Zero provider
 * (alloc/provider_ze.c) on its own: it opens the real loader itself
 * (fns == NULL), takes the first driver and makes its own context.
 *
 *   test_provider_ze fake      ZE_ENABLE_ALT_DRIVERS=<fake driver>,
 *                              FAKE_ZE_DEVICES=2, FAKE_ZE_CAPACITY=64 MiB
 *   test_provider_ze real      the real loader with no driver: not available
 *                              (skipped on a machine that has one)
 *   test_provider_ze novmm     the fake driver without virtual memory
 *                              (FAKE_ZE_NO_VMM=1): expandable segments fall
 *                              back, with one line on stderr
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "fake_ze.h"
#include "provider.h"
#include "provider_ze.h"

#define MiB ((size_t)1 << 20)

static void *fake(void)
{
    void *h = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    assert_non_null(h);
    return h;
}

static void test_fake_driver(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_ze_create(NULL, &p), TDM_OK);
    assert_string_equal(p->vendor, "ze");
    assert_int_equal(p->device_count, 2);
    char name[64];
    p->device_name(p, 1, name, sizeof name);
    assert_string_equal(name, "Fake Level Zero GPU 1");

    void *h = fake();
    fake_ze_used_bytes_fn used = (fake_ze_used_bytes_fn)dlsym(h, "fake_ze_used_bytes");
    fake_ze_calls_fn calls = (fake_ze_calls_fn)dlsym(h, "fake_ze_calls");
    assert_non_null(used);
    assert_non_null(calls);
    assert_int_equal(calls("zeContextCreate"), 1);

    size_t fr = 0, total = 0;
    assert_int_equal(p->mem_info(p, 1, &fr, &total), TDM_OK);
    assert_int_equal(total, 64 * MiB);
    assert_int_equal(fr, 64 * MiB);
    void *ptr = NULL;
    assert_int_equal(p->alloc(p, 1, 4 * MiB, 0, &ptr), TDM_OK);
    assert_non_null(ptr);
    assert_int_equal(used(1), 4 * MiB);
    assert_int_equal(used(0), 0);
    /* Free bytes come from Sysman (zesMemoryGetState), which the fake
     * driver answers from its own books. */
    long states = calls("zesMemoryGetState");
    assert_int_equal(p->mem_info(p, 1, &fr, NULL), TDM_OK);
    assert_int_equal(fr, 60 * MiB);
    assert_int_equal(calls("zesMemoryGetState"), states + 1);

    void *big = (void *)1;
    assert_int_equal(p->alloc(p, 1, 100 * MiB, 0, &big), TDM_OUT_OF_MEMORY);
    assert_null(big);
    assert_int_equal((unsigned)tdm__provider_last_vendor_error(),
                     (unsigned)TDM__ZE_ERROR_OUT_OF_DEVICE_MEMORY);

    assert_int_equal(p->free(p, 1, ptr, 4 * MiB), TDM_OK);
    assert_int_equal(used(1), 0);
    assert_int_equal(p->alloc(p, 2, MiB, 0, &ptr), TDM_NO_SUCH_DEVICE);
    /* The provider's own context goes with it. */
    p->destroy(p);
    assert_int_equal(calls("zeContextDestroy"), 1);
}

static void use_expandable(tdm_provider *p)
{
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    cfg.expandable_segments = 1;
    cfg.quiet_oom = 1;
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_use_provider(p), TDM_OK);
}

/* Expandable segments over Level Zero's virtual memory: one address range
 * reserved, 20 MiB physical pages created and mapped as the cache grows,
 * unmapped and destroyed by empty_cache, and the range freed. */
static void test_expandable_over_provider(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_ze_create(NULL, &p), TDM_OK);
    assert_non_null(p->vmm);
    void *h = fake();
    fake_ze_used_bytes_fn used = (fake_ze_used_bytes_fn)dlsym(h, "fake_ze_used_bytes");
    fake_ze_calls_fn calls = (fake_ze_calls_fn)dlsym(h, "fake_ze_calls");
    assert_true(used && calls);
    use_expandable(p);
    static const char *const fns[] = {"zeVirtualMemReserve", "zePhysicalMemCreate",
                                      "zeVirtualMemMap",     "zeMemAllocDevice",
                                      "zeVirtualMemUnmap",   "zePhysicalMemDestroy",
                                      "zeVirtualMemFree"};
    long before[7];
    for (int i = 0; i < 7; i++)
        before[i] = calls(fns[i]);
#define CALLS(i) (calls(fns[i]) - before[i])
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_int_equal(tdm__alloc_malloc(&a, 30 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(used(0), 40 * MiB);
    assert_int_equal(tdm__alloc_malloc(&b, 8 * MiB, 0, 0, 0), TDM_OK); /* the mapped tail */
    assert_ptr_equal(b, (char *)a + 30 * MiB);
    assert_int_equal(CALLS(0), 1);
    assert_int_equal(CALLS(1), 2);
    assert_int_equal(CALLS(2), 2);
    assert_int_equal(CALLS(3), 0); /* no zeMemAllocDevice */
    /* 64 MiB device: a third page fits, a fourth does not. */
    assert_int_equal(tdm__alloc_malloc(&c, 30 * MiB, 0, 0, 0), TDM_OUT_OF_MEMORY);
    assert_int_equal(tdm__alloc_malloc(&c, 20 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(used(0), 60 * MiB);
    assert_int_equal(tdm__alloc_malloc(&d, MiB, 1, 0, 0), TDM_OK); /* device 1's own range */
    assert_int_equal(used(1), 2 * MiB);
    char msg[256] = "";
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_OK);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(b, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(c, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(d, 0), TDM_OK);
    assert_int_equal(used(0), 60 * MiB); /* freeing keeps the pages */
    assert_int_equal(tdm_empty_cache(-1), TDM_OK);
    assert_int_equal(used(0), 0);
    assert_int_equal(used(1), 0);
    assert_int_equal(CALLS(4), 3 + 1);
    assert_int_equal(CALLS(5), 3 + 2 + 1); /* + the page made twice for the OOM */
    assert_int_equal(CALLS(6), 2);
#undef CALLS
    tdm__alloc_reset_for_tests();
}

/* A device without virtual memory: normal segments, one line. */
static void test_expandable_fallback(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_ze_create(NULL, &p), TDM_OK);
    void *h = fake();
    fake_ze_calls_fn calls = (fake_ze_calls_fn)dlsym(h, "fake_ze_calls");
    assert_non_null(calls);
    char path[] = "/tmp/tdm_ze_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    long allocs = calls("zeMemAllocDevice");
    use_expandable(p);
    void *a = NULL;
    tdm_status st = tdm__alloc_malloc(&a, 30 * MiB, 0, 0, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[512] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    assert_int_equal(st, TDM_OK);
    assert_true(got > 0);
    text[got] = '\0';
    assert_string_equal(text, "tidemark: expandable_segments=1: ze device 0 has no virtual "
                              "memory management; it uses normal segments\n");
    assert_int_equal(calls("zeMemAllocDevice") - allocs, 1);
    assert_int_equal(calls("zePhysicalMemCreate"), 0);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    tdm__alloc_reset_for_tests();
}

/* Set for the run over the real vendor library: a device there is not an
 * error of tidemark's, the test is skipped. */
static int real_library;

static void test_no_driver(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)1;
    tdm_status st = tdm__provider_ze_create(NULL, &p);
    if (st == TDM_OK && real_library) {
        /* This machine has the device the test expects to be missing. */
        p->destroy(p);
        skip();
    }
    assert_int_equal(st, TDM_NOT_AVAILABLE);
    assert_null(p);
    assert_int_equal((unsigned)tdm__provider_last_vendor_error(),
                     (unsigned)TDM__ZE_ERROR_UNINITIALIZED);
}

static void test_incomplete_table(void **state)
{
    (void)state;
    struct tdm_ze_fns fns;
    memset(&fns, 0, sizeof fns);
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_ze_create(&fns, &p), TDM_NOT_AVAILABLE);
    assert_null(p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest with_fake[] = {
        cmocka_unit_test(test_fake_driver),
        cmocka_unit_test(test_incomplete_table),
        cmocka_unit_test(test_expandable_over_provider),
    };
    const struct CMUnitTest novmm[] = {cmocka_unit_test(test_expandable_fallback)};
    const struct CMUnitTest without[] = {
        cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_incomplete_table),
    };
    real_library = argc > 1 && strcmp(argv[1], "real") == 0;
    if (argc > 1 && strcmp(argv[1], "novmm") == 0)
        return cmocka_run_group_tests(novmm, NULL, NULL);
    if (argc > 1 && (strcmp(argv[1], "nodriver") == 0 || real_library))
        return cmocka_run_group_tests(without, NULL, NULL);
    return cmocka_run_group_tests(with_fake, NULL, NULL);
}
