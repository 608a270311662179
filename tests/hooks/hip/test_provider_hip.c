/* tests/hooks/hip/test_provider_hip.c: the HIP provider (alloc/provider_hip.c)
 * on its own, opening libamdhip64 itself (fns == NULL).
 *
 *   test_provider_hip fake      run with LD_LIBRARY_PATH=<fake dir>,
 *                               FAKE_HIP_DEVICES=2, FAKE_HIP_CAPACITY=64 MiB
 *   test_provider_hip nodevice  the fake with FAKE_HIP_DEVICES=0:
 *                               TDM_NOT_AVAILABLE
 *   test_provider_hip real      the real libamdhip64: TDM_NOT_AVAILABLE on a
 *                               machine without GPU (skipped on one with)
 *   test_provider_hip novmm     the fake's devices lack virtual memory
 *                               management (FAKE_HIP_NO_VMM=1): expandable
 *                               segments fall back, with one line on stderr
 *   test_provider_hip local EXT the fake libamdhip64.so.6 or .so.7, loaded
 *                               only as the dependency of EXT dlopen'ed
 *                               RTLD_LOCAL (no libamdhip64 on the search
 *                               path but the real ROCm 5 one, if any): the
 *                               provider uses the loaded library
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "fake_hip.h"
#include "provider_common.h"
#include "provider_hip.h"

/* The same libamdhip64 the provider opened (dlopen returns the loaded one). */
static void *lib(void)
{
    void *h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    return h;
}

static void test_fake_device(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(NULL, &p), TDM_OK);
    provider_check_two_fake_devices(p, TDM_VENDOR_HIP, "Fake AMD GPU 1");
    size_t fr = 0;

    /* Allocating on device 1 must not move this thread off device 0. */
    void *h = lib();
    int (*get_device)(int *) = (int (*)(int *))dlsym(h, "hipGetDevice");
    fake_hip_used_bytes_fn used = (fake_hip_used_bytes_fn)dlsym(h, "fake_hip_used_bytes");
    assert_non_null(get_device);
    assert_non_null(used);
    void *ptr = NULL;
    assert_int_equal(p->alloc(p, 1, 4 * MiB, 0, &ptr), TDM_OK);
    assert_non_null(ptr);
    int cur = -1;
    assert_int_equal(get_device(&cur), 0);
    assert_int_equal(cur, 0);
    assert_int_equal(used(1), 4 * MiB);
    assert_int_equal(used(0), 0);
    assert_int_equal(p->mem_info(p, 1, &fr, NULL), TDM_OK);
    assert_int_equal(fr, 60 * MiB);

    /* Out of memory: the status, and HIP's own code for the hook. */
    void *big = (void *)1;
    assert_int_equal(p->alloc(p, 1, 100 * MiB, 0, &big), TDM_OUT_OF_MEMORY);
    assert_null(big);
    assert_int_equal(tdm__provider_last_vendor_error(), TDM__HIP_ERROR_OUT_OF_MEMORY);

    assert_int_equal(p->free(p, 1, ptr, 4 * MiB), TDM_OK);
    assert_int_equal(used(1), 0);
    /* A pointer HIP does not know: a vendor error, kept for the hook. */
    int bogus;
    assert_int_equal(p->free(p, 1, &bogus, 8), TDM_VENDOR_ERROR);
    assert_int_equal(tdm__provider_last_vendor_error(), 1 /* hipErrorInvalidValue */);
    assert_int_equal(p->alloc(p, 2, MiB, 0, &ptr), TDM_NO_SUCH_DEVICE);
    p->destroy(p);
}

/* The fake's counters and HIP's per-thread state, as the provider sees them. */
static struct {
    fake_hip_calls_fn calls;
    fake_hip_used_bytes_fn used;
    int (*get_device)(int *device);
    int (*set_device)(int device);
    int (*peek_last_error)(void);
    int (*get_last_error)(void);
} fake;

static void load_fake(void)
{
    void *h = lib();
    fake.calls = (fake_hip_calls_fn)dlsym(h, "fake_hip_calls");
    fake.used = (fake_hip_used_bytes_fn)dlsym(h, "fake_hip_used_bytes");
    fake.get_device = (int (*)(int *))dlsym(h, "hipGetDevice");
    fake.set_device = (int (*)(int))dlsym(h, "hipSetDevice");
    fake.peek_last_error = (int (*)(void))dlsym(h, "hipPeekAtLastError");
    fake.get_last_error = (int (*)(void))dlsym(h, "hipGetLastError");
    assert_true(fake.calls && fake.used && fake.get_device && fake.set_device &&
                fake.peek_last_error && fake.get_last_error);
    fake.get_last_error(); /* what earlier tests left */
}

/* HIP keeps a current device and a last error per thread, both the
 * program's: the provider must leave this thread on device 0 and must not
 * leave its own failures for hipGetLastError. */
static void check_device_and_last_error_kept(void)
{
    int cur = -1;
    assert_int_equal(fake.get_device(&cur), 0);
    assert_int_equal(cur, 0);
    assert_int_equal(fake.peek_last_error(), 0);
}

/* The provider over the fake, and the fake described in *v for
 * provider_common.h. */
static tdm_provider *create_over_fake(provider_test_vendor *v)
{
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(NULL, &p), TDM_OK);
    load_fake();
    *v = (provider_test_vendor){
        .name = "hip",
        .calls = fake.calls,
        .used = fake.used,
        .fn = {[VENDOR_RESERVE] = "hipMemAddressReserve",
               [VENDOR_CREATE] = "hipMemCreate",
               [VENDOR_MAP] = "hipMemMap",
               [VENDOR_SET_ACCESS] = "hipMemSetAccess",
               [VENDOR_UNMAP] = "hipMemUnmap",
               [VENDOR_RELEASE] = "hipMemRelease",
               [VENDOR_ADDRESS_FREE] = "hipMemAddressFree",
               [VENDOR_PLAIN_ALLOC] = "hipMalloc"},
        .second_device = true,
        .check_program_state = check_device_and_last_error_kept,
    };
    return p;
}

/* Expandable segments over HIP's virtual memory management; the thread's
 * device and last error stay the program's. */
static void test_expandable_over_provider(void **state)
{
    (void)state;
    provider_test_vendor hip;
    provider_expandable_scenario(create_over_fake(&hip), &hip);
}

/* A device without virtual memory management: normal segments, one line,
 * and the refused granularity query is not the program's last error. */
static void test_expandable_fallback(void **state)
{
    (void)state;
    provider_test_vendor hip;
    provider_expandable_fallback(create_over_fake(&hip), &hip);
}

/* Set for the run over the real vendor library: a device there is not an
 * error of tidemark's, the test is skipped. */
static int real_library;

static void test_no_device(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)1;
    tdm_status st = tdm__provider_hip_create(NULL, &p);
    provider_check_not_available(st, p, real_library, TDM__HIP_ERROR_NO_DEVICE);
}

/* A table from the caller that lacks functions is refused, not used. */
static void test_incomplete_table(void **state)
{
    (void)state;
    struct tdm_hip_fns fns;
    memset(&fns, 0, sizeof fns);
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(&fns, &p), TDM_NOT_AVAILABLE);
    assert_null(p);
}

static const char *local_ext;

/* ROCm 6 / 7 in a local scope: the provider finds the loaded object
 * whatever its soname, and does not open another libamdhip64 (the real
 * ROCm 5 one has no device here, nor the same allocations). */
static void test_local_scope(void **state)
{
    (void)state;
    void *ext = dlopen(local_ext, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(ext);
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(NULL, &p), TDM_OK);
    provider_check_two_fake_devices(p, TDM_VENDOR_HIP, "Fake AMD GPU 1");
    long (*live)(void) = (long (*)(void))dlsym(ext, "fake_hip_live_allocations");
    assert_non_null(live);
    long before = live();
    void *ptr = NULL;
    assert_int_equal(p->alloc(p, 1, MiB, 0, &ptr), TDM_OK);
    assert_int_equal(live(), before + 1); /* the loaded library served it */
    p->free(p, 1, ptr, MiB);
    assert_int_equal(live(), before);
    p->destroy(p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest over_fake[] = {
        cmocka_unit_test(test_fake_device),
        cmocka_unit_test(test_incomplete_table),
        cmocka_unit_test(test_expandable_over_provider),
    };
    const struct CMUnitTest novmm[] = {cmocka_unit_test(test_expandable_fallback)};
    const struct CMUnitTest nodevice[] = {
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_incomplete_table),
    };
    const struct CMUnitTest local[] = {cmocka_unit_test(test_local_scope)};
    if (argc > 2 && strcmp(argv[1], "local") == 0) {
        local_ext = argv[2];
        return cmocka_run_group_tests(local, NULL, NULL);
    }
    real_library = argc > 1 && strcmp(argv[1], "real") == 0;
    if (argc > 1 && strcmp(argv[1], "novmm") == 0)
        return cmocka_run_group_tests(novmm, NULL, NULL);
    if (argc > 1 && (strcmp(argv[1], "nodevice") == 0 || real_library))
        return cmocka_run_group_tests(nodevice, NULL, NULL);
    return cmocka_run_group_tests(over_fake, NULL, NULL);
}
