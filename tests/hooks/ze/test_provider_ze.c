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
#include <string.h>

#include "fake_ze.h"
#include "provider_common.h"
#include "provider_ze.h"

static void *fake(void)
{
    void *h = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    assert_non_null(h);
    return h;
}

/* The provider over the fake driver, and the fake described in *v for
 * provider_common.h and the tests below. */
static tdm_provider *create_over_fake(provider_test_vendor *v)
{
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_ze_create(NULL, &p), TDM_OK);
    void *h = fake();
    *v = (provider_test_vendor){
        .name = "ze",
        .calls = (fake_ze_calls_fn)dlsym(h, "fake_ze_calls"),
        .used = (fake_ze_used_bytes_fn)dlsym(h, "fake_ze_used_bytes"),
        .fn = {[VENDOR_RESERVE] = "zeVirtualMemReserve",
               [VENDOR_CREATE] = "zePhysicalMemCreate",
               [VENDOR_MAP] = "zeVirtualMemMap",
               /* Level Zero maps with the access given to zeVirtualMemMap:
                * no separate call is counted. */
               [VENDOR_SET_ACCESS] = NULL,
               [VENDOR_UNMAP] = "zeVirtualMemUnmap",
               [VENDOR_RELEASE] = "zePhysicalMemDestroy",
               [VENDOR_ADDRESS_FREE] = "zeVirtualMemFree",
               [VENDOR_PLAIN_ALLOC] = "zeMemAllocDevice"},
        .second_device = true,
    };
    assert_non_null(v->calls);
    assert_non_null(v->used);
    return p;
}

static void test_fake_driver(void **state)
{
    (void)state;
    provider_test_vendor ze;
    tdm_provider *p = create_over_fake(&ze);
    fake_ze_used_bytes_fn used = ze.used;
    fake_ze_calls_fn calls = ze.calls;
    assert_int_equal(calls("zeContextCreate"), 1);
    provider_check_two_fake_devices(p, TDM_VENDOR_ZE, "Fake Level Zero GPU 1");
    size_t fr = 0;
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

/* Expandable segments over Level Zero's virtual memory (physical pages
 * created and destroyed rather than released). */
static void test_expandable_over_provider(void **state)
{
    (void)state;
    provider_test_vendor ze;
    provider_expandable_scenario(create_over_fake(&ze), &ze);
}

/* A device without virtual memory: normal segments, one line. */
static void test_expandable_fallback(void **state)
{
    (void)state;
    provider_test_vendor ze;
    provider_expandable_fallback(create_over_fake(&ze), &ze);
}

/* Set for the run over the real vendor library: a device there is not an
 * error of tidemark's, the test is skipped. */
static int real_library;

static void test_no_driver(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)1;
    tdm_status st = tdm__provider_ze_create(NULL, &p);
    provider_check_not_available(st, p, real_library, TDM__ZE_ERROR_UNINITIALIZED);
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
