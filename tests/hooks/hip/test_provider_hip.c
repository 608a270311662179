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

/* Expandable segments over HIP's virtual memory management: one address
 * range reserved, 20 MiB pages created and mapped as the cache grows,
 * unmapped and released by empty_cache, and the range freed; the
 * thread's device and last error stay the program's. */
static void test_expandable_over_provider(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(NULL, &p), TDM_OK);
    assert_non_null(p->vmm);
    load_fake();
    use_expandable(p);
    static const char *const fns[] = {"hipMemAddressReserve", "hipMemCreate", "hipMemMap",
                                      "hipMemSetAccess",      "hipMemUnmap",  "hipMemRelease",
                                      "hipMemAddressFree",    "hipMalloc"};
    long before[8];
    for (int i = 0; i < 8; i++)
        before[i] = fake.calls(fns[i]);
#define CALLS(i) (fake.calls(fns[i]) - before[i])
    void *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(tdm__alloc_malloc(&a, 30 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(fake.used(0), 40 * MiB);
    assert_int_equal(tdm__alloc_malloc(&b, 8 * MiB, 0, 0, 0), TDM_OK); /* the mapped tail */
    assert_ptr_equal(b, (char *)a + 30 * MiB);
    assert_int_equal(CALLS(0), 1);
    assert_int_equal(CALLS(1), 2);
    assert_int_equal(CALLS(2), 2);
    assert_int_equal(CALLS(3), 1);
    assert_int_equal(CALLS(7), 0); /* no hipMalloc */
    /* 64 MiB device: a third page fits, a fourth does not.  The failed
     * hipMemCreate is not left for the program's hipGetLastError. */
    assert_int_equal(tdm__alloc_malloc(&c, 30 * MiB, 0, 0, 0), TDM_OUT_OF_MEMORY);
    assert_int_equal(fake.peek_last_error(), 0);
    assert_int_equal(tdm__alloc_malloc(&c, 20 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(fake.used(0), 60 * MiB);
    /* Device 1 gets its own range; this thread stays on device 0. */
    void *d = NULL;
    assert_int_equal(tdm__alloc_malloc(&d, MiB, 1, 0, 0), TDM_OK);
    assert_int_equal(fake.used(1), 2 * MiB);
    int cur = -1;
    assert_int_equal(fake.get_device(&cur), 0);
    assert_int_equal(cur, 0);
    char msg[256] = "";
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_OK);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(b, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(c, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(d, 0), TDM_OK);
    assert_int_equal(fake.used(0), 60 * MiB); /* freeing keeps the pages */
    assert_int_equal(tdm_empty_cache(-1), TDM_OK);
    assert_int_equal(fake.used(0), 0);
    assert_int_equal(fake.used(1), 0);
    assert_int_equal(CALLS(4), 3 + 1);
    assert_int_equal(CALLS(5), 3 + 2 + 1); /* + the page made twice for the OOM */
    assert_int_equal(CALLS(6), 2);
    assert_int_equal(fake.peek_last_error(), 0);
#undef CALLS
    tdm__alloc_reset_for_tests();
}

/* A device without virtual memory management: normal segments, one line,
 * and the refused granularity query is not the program's last error. */
static void test_expandable_fallback(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_hip_create(NULL, &p), TDM_OK);
    load_fake();
    char path[] = "/tmp/tdm_hip_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    long before = fake.calls("hipMalloc");
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
    assert_string_equal(text, "tidemark: expandable_segments=1: hip device 0 has no virtual "
                              "memory management; it uses normal segments\n");
    assert_int_equal(fake.calls("hipMalloc") - before, 1);
    assert_int_equal(fake.calls("hipMemCreate"), 0);
    assert_int_equal(fake.peek_last_error(), 0);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    tdm__alloc_reset_for_tests();
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
    real_library = argc > 1 && strcmp(argv[1], "real") == 0;
    if (argc > 1 && strcmp(argv[1], "novmm") == 0)
        return cmocka_run_group_tests(novmm, NULL, NULL);
    if (argc > 1 && (strcmp(argv[1], "nodevice") == 0 || real_library))
        return cmocka_run_group_tests(nodevice, NULL, NULL);
    return cmocka_run_group_tests(over_fake, NULL, NULL);
}
