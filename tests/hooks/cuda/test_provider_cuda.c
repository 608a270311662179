/* tests/hooks/cuda/test_provider_cuda.c: the CUDA provider
 * (alloc/provider_cuda.c), without a GPU.
 *
 *   test_provider_cuda absent   no libcuda.so.1 can be loaded: creating the
 *                               provider says TDM_NOT_AVAILABLE
 *   test_provider_cuda fake     over the fake driver (LD_LIBRARY_PATH has
 *                               tests/fakes/cuda/lib; FAKE_CUDA_DEVICES=2,
 *                               FAKE_CUDA_CAPACITY=64 MiB): devices, names,
 *                               memory, contexts, errors, and the caching
 *                               allocator over it
 *   test_provider_cuda noinit   the fake's cuInit fails (FAKE_CUDA_INIT_RESULT
 *                               =100): TDM_NOT_AVAILABLE, vendor code 100
 *   test_provider_cuda novmm    the fake's devices lack virtual memory
 *                               management (FAKE_CUDA_NO_VMM=1): expandable
 *                               segments fall back, with one line on stderr
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "provider_common.h"
#include "provider_cuda.h"

/* The fake driver, as the provider loaded it. */
static struct {
    void *lib;
    unsigned long long (*used)(int device);
    long (*calls)(const char *name);
    void (*set_oom_above)(unsigned long long bytes);
} fake;

static void load_fake(void)
{
    fake.lib = dlopen("libcuda.so.1", RTLD_NOW);
    assert_non_null(fake.lib);
    fake.used = (unsigned long long (*)(int))dlsym(fake.lib, "fake_cuda_used_bytes");
    fake.calls = (long (*)(const char *))dlsym(fake.lib, "fake_cuda_calls");
    fake.set_oom_above = (void (*)(unsigned long long))dlsym(fake.lib, "fake_cuda_set_oom_above");
    assert_non_null(fake.used);
    assert_non_null(fake.calls);
    assert_non_null(fake.set_oom_above);
}

/* The shared scenarios read bytes as size_t; the fake counts them in
 * unsigned long long. */
static size_t used_bytes(int device)
{
    return (size_t)fake.used(device);
}

/* The provider over the fake driver, and the fake described in *v for
 * provider_common.h. */
static tdm_provider *create_over_fake(provider_test_vendor *v)
{
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_cuda_create(NULL, &p), TDM_OK);
    load_fake();
    *v = (provider_test_vendor){
        .name = "cuda",
        .calls = fake.calls,
        .used = used_bytes,
        .fn = {[VENDOR_RESERVE] = "cuMemAddressReserve",
               [VENDOR_CREATE] = "cuMemCreate",
               [VENDOR_MAP] = "cuMemMap",
               [VENDOR_SET_ACCESS] = "cuMemSetAccess",
               [VENDOR_UNMAP] = "cuMemUnmap",
               [VENDOR_RELEASE] = "cuMemRelease",
               [VENDOR_ADDRESS_FREE] = "cuMemAddressFree",
               [VENDOR_PLAIN_ALLOC] = "cuMemAlloc_v2"},
        /* Device 0 only: empty_cache is also checked for one device. */
        .second_device = false,
    };
    return p;
}

static void test_absent(void **state)
{
    (void)state;
    void *probe = dlopen("libcuda.so.1", RTLD_NOW);
    if (probe) {
        dlclose(probe);
        skip(); /* this machine has a driver */
    }
    tdm_provider *p = (tdm_provider *)0x1;
    assert_int_equal(tdm__provider_cuda_create(NULL, &p), TDM_NOT_AVAILABLE);
    assert_null(p);
    assert_int_equal(tdm__provider_cuda_create(NULL, NULL), TDM_INVALID_ARGUMENT);
}

static void test_devices_and_memory(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_cuda_create(NULL, &p), TDM_OK);
    load_fake();
    provider_check_two_fake_devices(p, TDM_VENDOR_CUDA, "Fake CUDA Device 1");
    size_t fr = 0;

    void *a = NULL, *b = NULL;
    assert_int_equal(p->alloc(p, 1, 3 * MiB, 0, &a), TDM_OK);
    assert_non_null(a);
    assert_int_equal(fake.used(1), 3 * MiB);
    assert_int_equal(fake.used(0), 0);
    assert_int_equal(p->alloc(p, 0, MiB, 0, &b), TDM_OK);
    assert_int_equal(fake.used(0), MiB);
    assert_int_equal(p->mem_info(p, 1, &fr, NULL), TDM_OK);
    assert_int_equal(fr, 61 * MiB);

    /* Past the capacity: out of memory, the driver's code kept. */
    void *c = (void *)0x1;
    assert_int_equal(p->alloc(p, 1, 62 * MiB, 0, &c), TDM_OUT_OF_MEMORY);
    assert_null(c);
    assert_int_equal(tdm__provider_last_vendor_error(), TDM__CU_ERROR_OUT_OF_MEMORY);
    assert_int_equal(p->alloc(p, 2, MiB, 0, &c), TDM_NO_SUCH_DEVICE);
    /* Out of memory on demand (the fake's knob), well under capacity. */
    fake.set_oom_above(2 * MiB);
    assert_int_equal(p->alloc(p, 0, 3 * MiB, 0, &c), TDM_OUT_OF_MEMORY);
    assert_int_equal(tdm__provider_last_vendor_error(), TDM__CU_ERROR_OUT_OF_MEMORY);
    fake.set_oom_above(0);
    assert_int_equal(p->alloc(p, 0, 3 * MiB, 0, &c), TDM_OK);
    assert_int_equal(p->free(p, 0, c, 3 * MiB), TDM_OK);

    /* A bad free is the driver's error, as a vendor error. */
    int x;
    assert_int_equal(p->free(p, 1, &x, 4), TDM_VENDOR_ERROR);
    assert_int_equal(tdm__provider_last_vendor_error(), 1 /* CUDA_ERROR_INVALID_VALUE */);

    assert_int_equal(p->free(p, 1, a, 3 * MiB), TDM_OK);
    assert_int_equal(p->free(p, 0, b, MiB), TDM_OK);
    assert_int_equal(fake.used(0) + fake.used(1), 0);
    p->destroy(p);
}

/* The provider uses each device's primary context and leaves the thread's
 * own context stack as it found it. */
static void test_contexts(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_cuda_create(NULL, &p), TDM_OK);
    load_fake();
    int (*get_current)(void **) = (int (*)(void **))dlsym(fake.lib, "cuCtxGetCurrent");
    int (*set_current)(void *) = (int (*)(void *))dlsym(fake.lib, "cuCtxSetCurrent");
    int (*retain)(void **, int) = (int (*)(void **, int))dlsym(fake.lib, "cuDevicePrimaryCtxRetain");
    int (*ctx_device)(int *) = (int (*)(int *))dlsym(fake.lib, "cuCtxGetDevice");
    void *cur = (void *)0x1;
    assert_int_equal(get_current(&cur), 0);
    assert_null(cur);
    void *d = NULL;
    assert_int_equal(p->alloc(p, 1, MiB, 0, &d), TDM_OK);
    assert_int_equal(get_current(&cur), 0);
    assert_null(cur); /* pushed and popped */

    /* The program's context on device 0 stays current around a device-1
     * allocation. */
    void *ctx0 = NULL;
    assert_int_equal(retain(&ctx0, 0), 0);
    assert_int_equal(set_current(ctx0), 0);
    long pushes = fake.calls("cuCtxPushCurrent_v2");
    void *e = NULL;
    assert_int_equal(p->alloc(p, 1, MiB, 0, &e), TDM_OK);
    assert_int_equal(fake.calls("cuCtxPushCurrent_v2"), pushes + 1);
    int dev = -1;
    assert_int_equal(ctx_device(&dev), 0);
    assert_int_equal(dev, 0);
    /* Same device as the current (primary) context: no push. */
    void *f = NULL;
    assert_int_equal(p->alloc(p, 0, MiB, 0, &f), TDM_OK);
    assert_int_equal(fake.calls("cuCtxPushCurrent_v2"), pushes + 1);
    assert_int_equal(p->free(p, 1, d, MiB), TDM_OK);
    assert_int_equal(p->free(p, 1, e, MiB), TDM_OK);
    assert_int_equal(p->free(p, 0, f, MiB), TDM_OK);
    assert_int_equal(set_current(NULL), 0);
    p->destroy(p);
}

/* A table given by the caller (what hooks pass) is used as is, and an
 * incomplete one is refused. */
static void test_given_table(void **state)
{
    (void)state;
    load_fake();
    static const char *const names[] = {TDM__CUDA_FNS_NAMES};
    void *sym[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_non_null(sym[i] = dlsym(fake.lib, names[i]));
    struct tdm_cuda_fns f;
    memset(&f, 0, sizeof f);
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_cuda_create(&f, &p), TDM_NOT_AVAILABLE);
    f.init = (int (*)(unsigned int))sym[0];
    f.device_get_count = (int (*)(int *))sym[1];
    f.device_get = (int (*)(int *, int))sym[2];
    f.device_get_name = (int (*)(char *, int, int))sym[3];
    f.device_total_mem = (int (*)(size_t *, int))sym[4];
    f.primary_ctx_retain = (int (*)(tdm__cu_context *, int))sym[5];
    f.primary_ctx_release = (int (*)(int))sym[6];
    f.ctx_get_current = (int (*)(tdm__cu_context *))sym[7];
    f.ctx_push = (int (*)(tdm__cu_context))sym[8];
    f.ctx_pop = (int (*)(tdm__cu_context *))sym[9];
    f.mem_alloc = (int (*)(tdm__cu_deviceptr *, size_t))sym[10];
    f.mem_free = (int (*)(tdm__cu_deviceptr))sym[11];
    f.mem_get_info = (int (*)(size_t *, size_t *))sym[12];
    assert_int_equal(tdm__provider_cuda_create(&f, &p), TDM_OK);
    assert_int_equal(p->device_count, 2);
    long before = fake.calls("cuMemAlloc_v2");
    void *d = NULL;
    assert_int_equal(p->alloc(p, 0, 4096, 0, &d), TDM_OK);
    assert_int_equal(fake.calls("cuMemAlloc_v2"), before + 1);
    assert_int_equal(p->free(p, 0, d, 4096), TDM_OK);
    p->destroy(p);
}

/* The caching allocator over the provider: far fewer driver allocations
 * than allocations, and everything back to the driver at the end. */
static void test_cache_over_provider(void **state)
{
    (void)state;
    tdm_provider *p = NULL;
    assert_int_equal(tdm__provider_cuda_create(NULL, &p), TDM_OK);
    load_fake();
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_use_provider(p), TDM_OK);
    long before = fake.calls("cuMemAlloc_v2");
    int n = 0;
    for (int r = 0; r < 20; r++) {
        void *ptr[10];
        for (int i = 0; i < 10; i++, n++)
            assert_int_equal(tdm__alloc_malloc(&ptr[i], 1000 * (size_t)(i + 1), r % 2, 0, 0),
                             TDM_OK);
        for (int i = 0; i < 10; i++)
            assert_int_equal(tdm__alloc_free(ptr[i], 0), TDM_OK);
    }
    long driver = fake.calls("cuMemAlloc_v2") - before;
    assert_true(driver >= 1);
    assert_true(driver < n / 10);
    assert_true(fake.used(0) + fake.used(1) > 0); /* cached */
    tdm__alloc_reset_for_tests();
    assert_int_equal(fake.used(0) + fake.used(1), 0);
}

/* Expandable segments over the driver's virtual memory management. */
static void test_expandable_over_provider(void **state)
{
    (void)state;
    provider_test_vendor cuda;
    provider_expandable_scenario(create_over_fake(&cuda), &cuda);
}

/* A device without virtual memory management: normal segments, one line. */
static void test_expandable_fallback(void **state)
{
    (void)state;
    provider_test_vendor cuda;
    provider_expandable_fallback(create_over_fake(&cuda), &cuda);
}

static void test_init_fails(void **state)
{
    (void)state;
    tdm_provider *p = (tdm_provider *)0x1;
    tdm_status st = tdm__provider_cuda_create(NULL, &p);
    provider_check_not_available(st, p, false, TDM__CU_ERROR_NO_DEVICE);
}

int main(int argc, char **argv)
{
    const char *group = argc > 1 ? argv[1] : "absent";
    if (strcmp(group, "absent") == 0) {
        const struct CMUnitTest t[] = {cmocka_unit_test(test_absent)};
        return cmocka_run_group_tests_name("provider_cuda absent", t, NULL, NULL);
    }
    if (strcmp(group, "fake") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_devices_and_memory),
            cmocka_unit_test(test_contexts),
            cmocka_unit_test(test_given_table),
            cmocka_unit_test(test_cache_over_provider),
            cmocka_unit_test(test_expandable_over_provider),
        };
        return cmocka_run_group_tests_name("provider_cuda fake", t, NULL, NULL);
    }
    if (strcmp(group, "noinit") == 0) {
        const struct CMUnitTest t[] = {cmocka_unit_test(test_init_fails)};
        return cmocka_run_group_tests_name("provider_cuda noinit", t, NULL, NULL);
    }
    if (strcmp(group, "novmm") == 0) {
        const struct CMUnitTest t[] = {cmocka_unit_test(test_expandable_fallback)};
        return cmocka_run_group_tests_name("provider_cuda novmm", t, NULL, NULL);
    }
    return 2;
}
