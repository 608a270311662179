/* tests/hooks/ze/test_fake_ze_docs.c: the fake Level Zero driver
 * (tests/fakes/ze), through the real loader, checked against the
 * sentences of the Level Zero specification (ze_api.h) that its comments
 * say it implements: when a free may let memory be used again, and what a
 * command queue's synchronize waits for.  Run with
 * ZE_ENABLE_ALT_DRIVERS=<the fake driver>.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_ze.h"

#define MiB ((size_t)1 << 20)

static ze_context_handle_t ctx;
static ze_device_handle_t dev;
static const ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
static fake_ze_device_use_fn use;
static fake_ze_queue_use_fn queue_use;
static fake_ze_device_finish_fn finish;
static fake_ze_in_use_fn in_use;
static fake_ze_free_violations_fn violations;
static fake_ze_live_allocations_fn live;

static int setup(void **state)
{
    (void)state;
    if (zeInit(0) != ZE_RESULT_SUCCESS)
        return -1;
    ze_driver_handle_t drv;
    uint32_t n = 1;
    if (zeDriverGet(&n, &drv) != ZE_RESULT_SUCCESS || zeDeviceGet(drv, &n, &dev) != ZE_RESULT_SUCCESS)
        return -1;
    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    if (zeContextCreate(drv, &cd, &ctx) != ZE_RESULT_SUCCESS)
        return -1;
    /* The loader opened the driver RTLD_LOCAL: reach it by soname. */
    void *fake = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!fake)
        return -1;
    use = (fake_ze_device_use_fn)dlsym(fake, "fake_ze_device_use");
    queue_use = (fake_ze_queue_use_fn)dlsym(fake, "fake_ze_queue_use");
    finish = (fake_ze_device_finish_fn)dlsym(fake, "fake_ze_device_finish");
    in_use = (fake_ze_in_use_fn)dlsym(fake, "fake_ze_in_use");
    violations = (fake_ze_free_violations_fn)dlsym(fake, "fake_ze_free_violations");
    live = (fake_ze_live_allocations_fn)dlsym(fake, "fake_ze_live_allocations");
    return use && queue_use && finish && in_use && violations && live ? 0 : -1;
}

static void *alloc(void)
{
    void *p = NULL;
    assert_int_equal(zeMemAllocDevice(ctx, &dd, MiB, 0, dev, &p), ZE_RESULT_SUCCESS);
    return p;
}

static ze_result_t free_with(ze_driver_memory_free_policy_ext_flags_t policy, void *p)
{
    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC,
                                    .freePolicy = policy};
    return zeMemFreeExt(ctx, &fd, p);
}

/* zeMemFree: "The application must ensure the device is not currently
 * referencing the memory before it is freed" -- a free that does not is
 * the program's error (and so is zeMemFreeExt's with no policy). */
static void test_free_of_memory_in_use_is_the_programs_error(void **state)
{
    (void)state;
    long before = violations();
    void *p = alloc();
    assert_int_equal(zeMemFree(ctx, p), ZE_RESULT_SUCCESS);
    assert_int_equal(violations(), before);
    p = alloc();
    use(p);
    assert_int_equal(zeMemFree(ctx, p), ZE_RESULT_SUCCESS);
    assert_int_equal(violations(), before + 1);
    p = alloc();
    use(p);
    assert_int_equal(free_with(0, p), ZE_RESULT_SUCCESS);
    assert_int_equal(violations(), before + 2);
    finish();
}

/* BLOCKING_FREE: "blocks until all commands using the memory are complete
 * before freeing" -- on return they are; commands using other memory are
 * not waited for. */
static void test_blocking_free_waits_for_the_commands_using_it(void **state)
{
    (void)state;
    long before = violations();
    void *p = alloc(), *other = alloc();
    use(p);
    use(other);
    long n = live();
    assert_int_equal(free_with(ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE, p),
                     ZE_RESULT_SUCCESS);
    assert_false(in_use(p, MiB));
    assert_true(in_use(other, MiB));
    assert_int_equal(live(), n - 1);
    assert_int_equal(violations(), before); /* no error of the program's */
    finish();
    assert_int_equal(zeMemFree(ctx, other), ZE_RESULT_SUCCESS);
}

/* DEFER_FREE: "schedules the memory to be freed but does not free
 * immediately" -- while a command uses it, no allocation gets it; it is
 * freed once the commands completed. */
static void test_defer_free_keeps_memory_in_use_out_of_reach(void **state)
{
    (void)state;
    long before = violations();
    void *p = alloc();
    use(p);
    long n = live();
    assert_int_equal(free_with(ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE, p),
                     ZE_RESULT_SUCCESS);
    assert_int_equal(live(), n); /* scheduled, not freed */
    void *q = alloc();
    assert_false(in_use(q, MiB));
    finish();
    assert_int_equal(live(), n); /* p freed, q made */
    assert_int_equal(zeMemFree(ctx, q), ZE_RESULT_SUCCESS);
    assert_int_equal(violations(), before);
}

/* zeCommandQueueSynchronize, timeout: "if zero, then immediately returns
 * the status of the command queue; if UINT64_MAX, then function will not
 * return until complete" -- NOT_READY while a command of that queue runs,
 * and after the wait its commands are complete, a DEFER_FREE they held
 * done; another queue's commands are not waited for. */
static void test_queue_synchronize_waits_for_its_commands(void **state)
{
    (void)state;
    ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC};
    ze_command_queue_handle_t q1, q2;
    assert_int_equal(zeCommandQueueCreate(ctx, dev, &qd, &q1), ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandQueueCreate(ctx, dev, &qd, &q2), ZE_RESULT_SUCCESS);
    void *p = alloc(), *other = alloc();
    queue_use(q1, p, MiB);
    queue_use(q2, other, MiB);
    long n = live();
    assert_int_equal(free_with(ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE, p),
                     ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandQueueSynchronize(q1, 0), ZE_RESULT_NOT_READY);
    assert_int_equal(live(), n); /* scheduled, not freed */
    assert_int_equal(zeCommandQueueSynchronize(q1, UINT64_MAX), ZE_RESULT_SUCCESS);
    assert_false(in_use(p, MiB));
    assert_int_equal(live(), n - 1); /* the deferred free done */
    assert_int_equal(zeCommandQueueSynchronize(q1, 0), ZE_RESULT_SUCCESS);
    assert_true(in_use(other, MiB));
    assert_int_equal(zeCommandQueueSynchronize(q2, 0), ZE_RESULT_NOT_READY);
    assert_int_equal(zeCommandQueueSynchronize(q2, UINT64_MAX), ZE_RESULT_SUCCESS);
    assert_int_equal(zeMemFree(ctx, other), ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandQueueDestroy(q1), ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandQueueDestroy(q2), ZE_RESULT_SUCCESS);
}

/* "ZE_RESULT_ERROR_INVALID_ENUMERATION: 0x3 < pMemFreeDesc->freePolicy" */
static void test_unknown_policy(void **state)
{
    (void)state;
    void *p = alloc();
    assert_int_equal(free_with(4, p), ZE_RESULT_ERROR_INVALID_ENUMERATION);
    assert_int_equal(zeMemFree(ctx, p), ZE_RESULT_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_of_memory_in_use_is_the_programs_error),
        cmocka_unit_test(test_blocking_free_waits_for_the_commands_using_it),
        cmocka_unit_test(test_defer_free_keeps_memory_in_use_out_of_reach),
        cmocka_unit_test(test_queue_synchronize_waits_for_its_commands),
        cmocka_unit_test(test_unknown_policy),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
