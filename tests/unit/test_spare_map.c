/* tests/unit/test_spare_map.c: the mappings dumps keep for the next one
 * (snapshot/spare_map.h): a mapping given back is handed out again for a
 * request it covers, the smallest that does; a request none covers gets a
 * new one; at most TDM__SPARE_MAPS are kept, the largest; after release
 * nothing is kept; a reused mapping can be written all over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "spare_map.h"

#define MiB ((size_t)1 << 20)

static void a_given_back_mapping_is_taken_again(void **state)
{
    (void)state;
    size_t got;
    int reused = -1;
    char *a = tdm__spare_map_take(3 * MiB + 1, &got, &reused);
    assert_non_null(a);
    assert_int_equal(reused, 0);
    assert_int_equal(got, 3 * MiB + 4096);
    memset(a, 0xab, got);
    tdm__spare_map_give(a, got);
    size_t again;
    char *b = tdm__spare_map_take(2 * MiB, &again, &reused);
    assert_ptr_equal(b, a);
    assert_int_equal(again, got);
    assert_int_equal(reused, 1);
    memset(b, 0xcd, again); /* lazily freed pages are written as any */
    /* None is left: the next request maps anew. */
    size_t other;
    char *c = tdm__spare_map_take(MiB, &other, &reused);
    assert_true(c != b);
    assert_int_equal(reused, 0);
    tdm__spare_map_give(b, again);
    tdm__spare_map_give(c, other);
    tdm__spare_maps_release();
}

static void the_smallest_that_covers_is_taken_and_the_largest_kept(void **state)
{
    (void)state;
    size_t sizes[] = {1 * MiB, 4 * MiB, 2 * MiB};
    void *m[3];
    size_t got[3];
    for (int i = 0; i < 3; i++)
        m[i] = tdm__spare_map_take(sizes[i], &got[i], NULL);
    for (int i = 0; i < 3; i++)
        tdm__spare_map_give(m[i], got[i]);
    /* Kept: 4 and 2 MiB (the 1 MiB one was the smallest, replaced). */
    size_t n;
    int reused;
    void *x = tdm__spare_map_take(MiB, &n, &reused);
    assert_ptr_equal(x, m[2]);
    assert_int_equal(n, 2 * MiB);
    void *y = tdm__spare_map_take(MiB, &n, &reused);
    assert_ptr_equal(y, m[1]);
    void *z = tdm__spare_map_take(MiB, &n, &reused);
    assert_int_equal(reused, 0);
    tdm__spare_map_give(x, 2 * MiB);
    tdm__spare_map_give(y, 4 * MiB);
    tdm__spare_map_give(z, n);
    tdm__spare_maps_release();
    void *w = tdm__spare_map_take(MiB, &n, &reused);
    assert_int_equal(reused, 0); /* released: nothing kept */
    tdm__spare_map_give(w, n);
    tdm__spare_maps_release();
    tdm__spare_map_give(NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_given_back_mapping_is_taken_again),
        cmocka_unit_test(the_smallest_that_covers_is_taken_and_the_largest_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
