/* tests/hooks/provider_common.h: what the CUDA, HIP and Level Zero provider
 * tests (tests/hooks/{cuda,hip,ze}/test_provider_*.c) check alike, written
 * once.  Each vendor describes its fake library in a provider_test_vendor:
 * its counters, the names of its virtual memory functions, and a hook for
 * the checks only that vendor has (HIP's current device and last error).
 *
 * Every fake is run with two devices of 64 MiB (FAKE_*_CAPACITY in the
 * tests' CMakeLists.txt); the numbers below follow from that.
 *
 * The including file defines _GNU_SOURCE (dlopen's RTLD_NOLOAD) first.
 */
#ifndef TDM_TESTS_HOOKS_PROVIDER_COMMON_H
#define TDM_TESTS_HOOKS_PROVIDER_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "provider.h"

#define MiB ((size_t)1 << 20)

/* A vendor's functions that the expandable-segment scenarios count. */
enum provider_test_fn {
    VENDOR_RESERVE,      /* reserves the address range */
    VENDOR_CREATE,       /* creates a physical page */
    VENDOR_MAP,          /* maps a page into the range */
    VENDOR_SET_ACCESS,   /* NULL where mapping alone makes a page usable */
    VENDOR_UNMAP,        /* unmaps a page */
    VENDOR_RELEASE,      /* releases a page */
    VENDOR_ADDRESS_FREE, /* frees the address range */
    VENDOR_PLAIN_ALLOC,  /* the ordinary allocation, avoided by expandable segments */
    VENDOR_FN_COUNT
};

typedef struct provider_test_vendor {
    const char *name; /* as tidemark names the vendor in its messages */
    long (*calls)(const char *fn);      /* the fake's count of calls to fn */
    size_t (*used)(int device);         /* bytes the fake has handed out */
    const char *fn[VENDOR_FN_COUNT];    /* by enum provider_test_fn */
    bool second_device;                 /* the scenario also grows device 1 */
    /* Checks that the program's own state (what the vendor keeps per
     * thread) is as the program left it; NULL where there is nothing to
     * check.  Called after every step that could disturb it. */
    void (*check_program_state)(void);
} provider_test_vendor;

static inline void provider_check_program_state(const provider_test_vendor *v)
{
    if (v->check_program_state)
        v->check_program_state();
}

/* The provider over a fake with FAKE_*_DEVICES=2: two devices, named by
 * the fake, each 64 MiB and all of it free. */
static inline void provider_check_two_fake_devices(tdm_provider *p, tdm_vendor vendor,
                                                   const char *device_1_name)
{
    assert_int_equal(p->vendor, vendor);
    assert_int_equal(p->device_count, 2);
    char name[64];
    p->device_name(p, 1, name, sizeof name);
    assert_string_equal(name, device_1_name);
    size_t free_bytes = 0, total = 0;
    assert_int_equal(p->mem_info(p, 1, &free_bytes, &total), TDM_OK);
    assert_int_equal(total, 64 * MiB);
    assert_int_equal(free_bytes, 64 * MiB);
}

/* Creating a provider where the vendor has no device (or no driver) says
 * TDM_NOT_AVAILABLE, hands back no provider and keeps the vendor's code
 * for the hooks.  Over the real vendor library the machine may have a
 * device after all: not an error of tidemark's, so the test is skipped. */
static inline void provider_check_not_available(tdm_status st, tdm_provider *p,
                                                bool over_real_library,
                                                unsigned vendor_error)
{
    if (st == TDM_OK && over_real_library) {
        p->destroy(p);
        skip();
    }
    assert_int_equal(st, TDM_NOT_AVAILABLE);
    assert_null(p);
    assert_int_equal((unsigned)tdm__provider_last_vendor_error(), vendor_error);
}

/* A fresh caching allocator over p with expandable segments; quiet_oom so
 * that the scenario's deliberate out-of-memory prints no report. */
static inline void provider_use_expandable(tdm_provider *p)
{
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    cfg.expandable_segments = 1;
    cfg.quiet_oom = 1;
    tdm__alloc_reset_for_tests();
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    assert_int_equal(tdm__alloc_use_provider(p), TDM_OK);
}

static inline long provider_calls_since(const provider_test_vendor *v,
                                        const long before[VENDOR_FN_COUNT],
                                        enum provider_test_fn fn)
{
    return v->calls(v->fn[fn]) - before[fn];
}

/* Expandable segments over the vendor's virtual memory management: one
 * address range reserved, 20 MiB pages created and mapped as the cache
 * grows, unmapped and released by empty_cache, and the range freed. */
static inline void provider_expandable_scenario(tdm_provider *p, const provider_test_vendor *v)
{
    assert_non_null(p->vmm);
    provider_use_expandable(p);
    long before[VENDOR_FN_COUNT] = {0};
    for (int fn = 0; fn < VENDOR_FN_COUNT; fn++)
        if (v->fn[fn])
            before[fn] = v->calls(v->fn[fn]);
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_int_equal(tdm__alloc_malloc(&a, 30 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(v->used(0), 40 * MiB);
    assert_int_equal(tdm__alloc_malloc(&b, 8 * MiB, 0, 0, 0), TDM_OK); /* the mapped tail */
    assert_ptr_equal(b, (char *)a + 30 * MiB);
    assert_int_equal(provider_calls_since(v, before, VENDOR_RESERVE), 1);
    assert_int_equal(provider_calls_since(v, before, VENDOR_CREATE), 2);
    assert_int_equal(provider_calls_since(v, before, VENDOR_MAP), 2);
    if (v->fn[VENDOR_SET_ACCESS])
        assert_int_equal(provider_calls_since(v, before, VENDOR_SET_ACCESS), 1);
    assert_int_equal(provider_calls_since(v, before, VENDOR_PLAIN_ALLOC), 0);
    /* 64 MiB device: a third page fits, a fourth does not.  The failed page
     * creation must not show in the program's own state (HIP's last error). */
    assert_int_equal(tdm__alloc_malloc(&c, 30 * MiB, 0, 0, 0), TDM_OUT_OF_MEMORY);
    provider_check_program_state(v);
    assert_int_equal(tdm__alloc_malloc(&c, 20 * MiB, 0, 0, 0), TDM_OK);
    assert_int_equal(v->used(0), 60 * MiB);
    if (v->second_device) {
        /* Device 1 gets its own range, and the thread stays on device 0. */
        assert_int_equal(tdm__alloc_malloc(&d, MiB, 1, 0, 0), TDM_OK);
        assert_int_equal(v->used(1), 2 * MiB);
        provider_check_program_state(v);
    }
    char msg[256] = "";
    assert_int_equal(tdm__alloc_check(0, msg, sizeof msg), TDM_OK);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(b, 0), TDM_OK);
    assert_int_equal(tdm__alloc_free(c, 0), TDM_OK);
    if (v->second_device)
        assert_int_equal(tdm__alloc_free(d, 0), TDM_OK);
    assert_int_equal(v->used(0), 60 * MiB); /* freeing keeps the pages */
    /* -1 empties every device; with device 0 alone, empty that one by number. */
    assert_int_equal(tdm_empty_cache(v->second_device ? -1 : 0), TDM_OK);
    assert_int_equal(v->used(0), 0);
    if (v->second_device)
        assert_int_equal(v->used(1), 0);
    /* Device 1's range holds one page. */
    long device_1 = v->second_device ? 1 : 0;
    assert_int_equal(provider_calls_since(v, before, VENDOR_UNMAP), 3 + device_1);
    /* + the page made twice for the OOM */
    assert_int_equal(provider_calls_since(v, before, VENDOR_RELEASE), 3 + 2 + device_1);
    assert_int_equal(provider_calls_since(v, before, VENDOR_ADDRESS_FREE), 1 + device_1);
    provider_check_program_state(v);
    tdm__alloc_reset_for_tests();
}

/* A device without virtual memory management: expandable segments fall
 * back to normal segments (one ordinary allocation, no page created) and
 * say so in exactly one line on stderr. */
static inline void provider_expandable_fallback(tdm_provider *p, const provider_test_vendor *v)
{
    char path[] = "/tmp/tdm_provider_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    /* Captured from the set-up on, so that it too must stay silent. */
    long before = v->calls(v->fn[VENDOR_PLAIN_ALLOC]);
    provider_use_expandable(p);
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
    char expected[256];
    snprintf(expected, sizeof expected,
             "tidemark: expandable_segments=1: %s device 0 has no virtual "
             "memory management; it uses normal segments\n",
             v->name);
    assert_string_equal(text, expected);
    assert_int_equal(v->calls(v->fn[VENDOR_PLAIN_ALLOC]) - before, 1);
    assert_int_equal(v->calls(v->fn[VENDOR_CREATE]), 0);
    provider_check_program_state(v);
    assert_int_equal(tdm__alloc_free(a, 0), TDM_OK);
    tdm__alloc_reset_for_tests();
}

#endif
