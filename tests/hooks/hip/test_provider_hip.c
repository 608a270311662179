/* tests/hooks/hip/test_provider_hip.c: the HIP provider (alloc/provider_hip.c)
 * on its own, opening libamdhip64 itself (fns == NULL).
 *
 *   test_provider_hip fake      run with LD_LIBRARY_PATH=<fake dir>,
 *                               FAKE_HIP_DEVICES=2, FAKE_HIP_CAPACITY=64 MiB
 *   test_provider_hip nodevice  the fake with FAKE_HIP_DEVICES=0:
 *                               TDM_NOT_AVAILABLE
 *   test_provider_hip real      the real libamdhip64: TDM_NOT_AVAILABLE on a
 *                               machine without GPU (skipped on one with)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hip.h"
#include "provider.h"
#include "provider_hip.h"

#define MiB ((size_t)1 << 20)

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
    assert_string_equal(p->vendor, "hip");
    assert_int_equal(p->device_count, 2);

    char name[64];
    p->device_name(p, 1, name, sizeof name);
    assert_string_equal(name, "Fake AMD GPU 1");
    size_t fr = 0, total = 0;
    assert_int_equal(p->mem_info(p, 1, &fr, &total), TDM_OK);
    assert_int_equal(total, 64 * MiB);
    assert_int_equal(fr, 64 * MiB);

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

/* Set for the run over the real vendor library: a device there is not an
 * error of tidemark's, the test is skipped. */
static int real_library;

static void test_no_device(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)1;
    tdm_status st = tdm__provider_hip_create(NULL, &p);
    if (st == TDM_OK && real_library) {
        /* This machine has the device the test expects to be missing. */
        p->destroy(p);
        skip();
    }
    assert_int_equal(st, TDM_NOT_AVAILABLE);
    assert_null(p);
    assert_int_equal(tdm__provider_last_vendor_error(), TDM__HIP_ERROR_NO_DEVICE);
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

int main(int argc, char **argv)
{
    const struct CMUnitTest fake[] = {
        cmocka_unit_test(test_fake_device),
        cmocka_unit_test(test_incomplete_table),
    };
    const struct CMUnitTest nodevice[] = {
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_incomplete_table),
    };
    real_library = argc > 1 && strcmp(argv[1], "real") == 0;
    if (argc > 1 && (strcmp(argv[1], "nodevice") == 0 || real_library))
        return cmocka_run_group_tests(nodevice, NULL, NULL);
    return cmocka_run_group_tests(fake, NULL, NULL);
}
