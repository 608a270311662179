/* tests/unit/test_vmm_track.c: the virtual-memory tracker of the CUDA and
 * HIP hooks (hooks/track/vmm_track.c): it holds as many handles and
 * mappings as a program makes (20000 here: more than an H200's expandable
 * segments map), keeps each handle's mapping count through erasures in the
 * middle of probe runs, books a handle once and its further mappings as
 * peer mappings, asks the vendor's operation about a handle it never saw
 * made, and takes nothing from malloc (linked with --wrap=malloc). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "snap_model.h"
#include "vmm_track.h"

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static long mallocs;
void *__wrap_malloc(size_t n)
{
    mallocs++;
    return __real_malloc(n);
}

static int unseen_calls;
static int unseen_device(uint64_t h)
{
    unseen_calls++;
    return (int)(h % 7);
}
static const tdm__vmm_ops ops = {.unseen_device = unseen_device};

enum { N = 20000 };
/* Handles and addresses as drivers give them: close together. */
#define HANDLE(i) (0x7000u + 16u * (uint64_t)(i))
#define VA(i) (0x7f0000000000ull + ((uint64_t)(i) << 21))

static void many_handles_and_mappings(void **state)
{
    (void)state;
    static tdm__vmm_track t = TDM__VMM_TRACK_INIT(&ops);
    long before = mallocs;
    for (int i = 0; i < N; i++)
        tdm__vmm_created(&t, HANDLE(i), i % 3, TDM_VMM_OWN);
    for (int i = 0; i < N; i++) {
        tdm__vmm_booking b = tdm__vmm_mapped(&t, HANDLE(i), VA(i));
        assert_int_equal(b.kind, TDM_VMM_OWN);
        assert_int_equal(b.device, i % 3);
    }
    size_t handles, mappings;
    tdm__vmm_counts(&t, &handles, &mappings);
    assert_int_equal(handles, N);
    assert_int_equal(mappings, N);

    /* Every third mapping goes, then its handle: the rest are still found
     * (backward-shift deletion keeps probe runs whole). */
    for (int i = 0; i < N; i += 3) {
        tdm__vmm_unmapped(&t, VA(i));
        tdm__vmm_released(&t, HANDLE(i));
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(tdm__vmm_device(&t, HANDLE(i)), i % 3 == 0 ? -2 : i % 3);
    /* A second mapping of a live handle is a peer mapping, of its device. */
    for (int i = 1; i < N; i += 3) {
        tdm__vmm_booking b = tdm__vmm_mapped(&t, HANDLE(i), VA(N + i));
        assert_int_equal(b.kind, TDM_IMPORT_PEER_MAPPING);
        assert_int_equal(b.device, i % 3);
    }
    /* Once its first mapping is gone, the next one is its own again. */
    tdm__vmm_unmapped(&t, VA(2));
    tdm__vmm_booking b = tdm__vmm_mapped(&t, HANDLE(2), VA(2));
    assert_int_equal(b.kind, TDM_VMM_OWN);
    assert_int_equal(unseen_calls, 0);
    assert_int_equal(mallocs, before);
}

static void imported_and_unseen_handles(void **state)
{
    (void)state;
    static tdm__vmm_track t = TDM__VMM_TRACK_INIT(&ops);
    long before = mallocs;
    for (int i = 0; i < 5000; i++)
        tdm__vmm_created(&t, HANDLE(i), 0, TDM_VMM_OWN);
    tdm__vmm_created(&t, 0xabc8, 1, TDM_IMPORT_SHAREABLE);
    tdm__vmm_booking b = tdm__vmm_mapped(&t, 0xabc8, VA(1));
    assert_int_equal(b.kind, TDM_IMPORT_SHAREABLE);
    assert_int_equal(b.device, 1);
    b = tdm__vmm_mapped(&t, 0xabc8, VA(2));
    assert_int_equal(b.kind, TDM_IMPORT_SHAREABLE);

    /* Made before tidemark was loaded: the vendor says where; it counts as
     * the process's own once, then as a peer mapping. */
    b = tdm__vmm_mapped(&t, 0x123453, VA(3));
    assert_int_equal(unseen_calls, 1);
    assert_int_equal(b.kind, TDM_VMM_OWN);
    assert_int_equal(b.device, (int)(0x123453 % 7));
    b = tdm__vmm_mapped(&t, 0x123453, VA(4));
    assert_int_equal(unseen_calls, 1);
    assert_int_equal(b.kind, TDM_IMPORT_PEER_MAPPING);
    assert_int_equal(b.device, (int)(0x123453 % 7));
    /* Unmapping an address never mapped changes nothing. */
    size_t handles, mappings;
    tdm__vmm_unmapped(&t, VA(99));
    tdm__vmm_counts(&t, &handles, &mappings);
    assert_int_equal(handles, 5002);
    assert_int_equal(mappings, 4);
    assert_int_equal(mallocs, before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_handles_and_mappings),
        cmocka_unit_test(imported_and_unseen_handles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
