/* tests/hooks/hip/test_fake_hip_docs.c: the fake libamdhip64 (the .so.6
 * build, tests/fakes/hip) checked against the sentences of AMD's HIP
 * documentation (hip_runtime_api.h) that its comments say it implements,
 * so that the hook tests built on it test against HIP, not against our
 * reading of it.  Run with FAKE_HIP_DEVICES=2.
 */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define hipStreamGetDevice doc_header_hipStreamGetDevice
#include <hip/hip_runtime_api.h>
#undef hipStreamGetDevice

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_hip.h"

hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device);

#define MiB ((size_t)1 << 20)

static int device_of(void *p)
{
    int d = -1;
    assert_int_equal(hipPointerGetAttribute(&d, HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p),
                     hipSuccess);
    return d;
}

/* hipMallocAsync: "The allocation comes from the memory pool associated
 * with the stream's device." */
static void test_malloc_async_on_the_streams_device(void **state)
{
    (void)state;
    hipStream_t s1 = NULL;
    assert_int_equal(hipSetDevice(1), hipSuccess);
    assert_int_equal(hipStreamCreate(&s1), hipSuccess);
    assert_int_equal(hipSetDevice(0), hipSuccess);

    hipDevice_t d = -1;
    assert_int_equal(hipStreamGetDevice(s1, &d), hipSuccess);
    assert_int_equal(d, 1);
    assert_int_equal(hipGetStreamDeviceId(s1), 1);

    size_t used0 = fake_hip_used_bytes(0), used1 = fake_hip_used_bytes(1);
    void *p = NULL;
    assert_int_equal(hipMallocAsync(&p, 4 * MiB, s1), hipSuccess);
    assert_int_equal(device_of(p), 1);
    assert_true(fake_hip_used_bytes(1) > used1);
    assert_int_equal(fake_hip_used_bytes(0), used0);
    assert_int_equal(hipFreeAsync(p, s1), hipSuccess);

    /* The null stream and the per-thread stream: the current device's. */
    assert_int_equal(hipSetDevice(1), hipSuccess);
    void *q = NULL, *r = NULL;
    assert_int_equal(hipMallocAsync(&q, MiB, hipStreamPerThread), hipSuccess);
    assert_int_equal(hipMallocAsync(&r, MiB, NULL), hipSuccess);
    assert_int_equal(device_of(q), 1);
    assert_int_equal(device_of(r), 1);
    assert_int_equal(hipFreeAsync(q, hipStreamPerThread), hipSuccess);
    assert_int_equal(hipFreeAsync(r, NULL), hipSuccess);
    assert_int_equal(hipSetDevice(0), hipSuccess);
    assert_int_equal(hipStreamSynchronize(s1), hipSuccess);
    assert_int_equal(hipStreamDestroy(s1), hipSuccess);
}

/* hipFree: "This API performs an implicit hipDeviceSynchronize() call."
 * So memory hipFree gave back can be reused at once: no work queued
 * before it is still running. */
static void test_free_synchronizes_the_device(void **state)
{
    (void)state;
    hipStream_t s = NULL;
    assert_int_equal(hipStreamCreate(&s), hipSuccess);
    void *p = NULL;
    assert_int_equal(hipMalloc(&p, MiB), hipSuccess);
    fake_hip_stream_enqueue(s);
    fake_hip_stream_enqueue(NULL);
    assert_int_equal(fake_hip_stream_pending(s), 1);
    assert_int_equal(hipFree(p), hipSuccess);
    assert_int_equal(fake_hip_stream_pending(s), 0);
    assert_int_equal(fake_hip_stream_pending(NULL), 0);
    assert_int_equal(hipStreamDestroy(s), hipSuccess);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_async_on_the_streams_device),
        cmocka_unit_test(test_free_synchronizes_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
