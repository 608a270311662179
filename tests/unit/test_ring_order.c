/* tests/unit/test_ring_order.c: the order a dump reads the cut's entries
 * in (tdm__ring_entries_order): entries at or before the horizon left out
 * and the rest moved to the front; one writer's entries read in place,
 * from the start or from where the ring wrapped, several writers' sorted
 * by (time, claim index); only the newest `max` kept, across the wrap
 * too; and the plain events of what is kept counted with compound
 * entries as their expansions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ring.h"

/* An entry of time t, claim index i and action a (w[6]'s byte 6). */
static tdm__ring_entry entry(uint64_t t, uint64_t i, unsigned a)
{
    tdm__ring_entry e = {.index = i};
    e.w[0] = t;
    e.w[6] = (uint64_t)a << 48;
    return e;
}

static tdm__ring *ring_of(uint64_t capacity)
{
    tdm__ring *r = NULL;
    assert_int_equal(tdm__ring_create(capacity, &r), TDM_OK);
    return r;
}

/* The times of the ordered entries, in order, as a string "t t t". */
static void expect_times(const tdm__ring_order *o, const char *want)
{
    char got[512] = "";
    size_t n = 0;
    for (size_t k = 0; k < o->count; k++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%llu", k ? " " : "",
                              (unsigned long long)tdm__ring_order_at(o, k)->w[0]);
    if (strcmp(got, want) != 0)
        fail_msg("order '%s', want '%s'", got, want);
}

static void one_writer_in_order_is_read_in_place(void **state)
{
    (void)state;
    tdm__ring *r = ring_of(64);
    tdm__ring_entry e[] = {entry(10, 0, TDM_ACTION_ALLOC), entry(20, 1, TDM__ACTION_FREE_FREE),
                           entry(30, 2, TDM__ACTION_FREE_SEGMENT_FREE)};
    tdm__ring_order o;
    tdm__ring_entries_order(r, e, 3, 0, SIZE_MAX, &o);
    assert_null(o.at);
    expect_times(&o, "10 20 30");
    assert_int_equal(o.plain, 1 + 2 + 3);
    tdm__ring_order_free(&o);
    tdm__ring_destroy(r);
}

static void a_wrapped_writer_is_read_from_its_oldest(void **state)
{
    (void)state;
    tdm__ring *r = ring_of(64);
    /* The newest chunk's entries in the first slots, the oldest after. */
    tdm__ring_entry e[] = {entry(50, 4, TDM_ACTION_ALLOC), entry(60, 5, TDM__ACTION_FREE_FREE),
                           entry(5, 0, TDM_ACTION_ALLOC), entry(20, 1, TDM_ACTION_ALLOC),
                           entry(30, 2, TDM__ACTION_FREE_FREE), entry(40, 3, TDM_ACTION_ALLOC)};
    tdm__ring_order o;
    /* The horizon drops time 5: what the ring overwrote is older. */
    tdm__ring_entries_order(r, e, 6, 5, SIZE_MAX, &o);
    assert_null(o.at);
    expect_times(&o, "20 30 40 50 60");
    assert_int_equal(o.plain, 1 + 2 + 1 + 1 + 2);
    tdm__ring_order_free(&o);
    /* The newest 2 only: both past the wrap. */
    tdm__ring_entry f[] = {entry(50, 4, TDM_ACTION_ALLOC), entry(60, 5, TDM__ACTION_FREE_FREE),
                           entry(20, 1, TDM_ACTION_ALLOC), entry(30, 2, TDM__ACTION_FREE_FREE),
                           entry(40, 3, TDM_ACTION_ALLOC)};
    tdm__ring_entries_order(r, f, 5, 0, 2, &o);
    expect_times(&o, "50 60");
    assert_int_equal(o.plain, 1 + 2);
    tdm__ring_order_free(&o);
    /* The newest 4: they run across the wrap. */
    tdm__ring_entries_order(r, f, 5, 0, 4, &o);
    expect_times(&o, "30 40 50 60");
    assert_int_equal(o.plain, 2 + 1 + 1 + 2);
    tdm__ring_order_free(&o);
    tdm__ring_destroy(r);
}

static void several_writers_are_sorted_by_time_then_claim(void **state)
{
    (void)state;
    tdm__ring *r = ring_of(64);
    /* Two threads' chunks interleaved; times 30 twice (claims 3, 1). */
    tdm__ring_entry e[] = {entry(10, 0, TDM_ACTION_ALLOC), entry(30, 3, TDM_ACTION_ALLOC),
                           entry(50, 5, TDM__ACTION_FREE_FREE), entry(20, 2, TDM_ACTION_ALLOC),
                           entry(30, 1, TDM__ACTION_FREE_FREE), entry(40, 4, TDM_ACTION_ALLOC),
                           entry(1, 6, TDM_ACTION_ALLOC)};
    tdm__ring_order o;
    tdm__ring_entries_order(r, e, 7, 1, SIZE_MAX, &o);
    assert_non_null(o.at);
    expect_times(&o, "10 20 30 30 40 50");
    assert_int_equal(tdm__ring_order_at(&o, 2)->index, 1);
    assert_int_equal(tdm__ring_order_at(&o, 3)->index, 3);
    assert_int_equal(o.plain, 1 + 1 + 2 + 1 + 1 + 2);
    tdm__ring_order_free(&o);
    assert_null(o.at);
    /* The newest 3 of them: the claim-1 free at 30 is left out, counted out. */
    tdm__ring_entry f[] = {entry(10, 0, TDM_ACTION_ALLOC), entry(30, 3, TDM_ACTION_ALLOC),
                           entry(50, 5, TDM__ACTION_FREE_FREE), entry(20, 2, TDM_ACTION_ALLOC),
                           entry(30, 1, TDM__ACTION_FREE_FREE), entry(40, 4, TDM_ACTION_ALLOC)};
    tdm__ring_entries_order(r, f, 6, 0, 3, &o);
    expect_times(&o, "30 40 50");
    assert_int_equal(tdm__ring_order_at(&o, 0)->index, 3);
    assert_int_equal(o.plain, 1 + 1 + 2);
    tdm__ring_order_free(&o);
    tdm__ring_destroy(r);
}

static void at_most_the_capacity_and_nothing_of_nothing(void **state)
{
    (void)state;
    tdm__ring *r = ring_of(2);
    tdm__ring_entry e[] = {entry(10, 0, TDM_ACTION_ALLOC), entry(20, 1, TDM_ACTION_ALLOC),
                           entry(30, 2, TDM_ACTION_ALLOC)};
    tdm__ring_order o;
    tdm__ring_entries_order(r, e, 3, 0, SIZE_MAX, &o);
    expect_times(&o, "20 30");
    assert_int_equal(o.plain, 2);
    tdm__ring_order_free(&o);
    tdm__ring_entries_order(r, e, 3, 100, SIZE_MAX, &o); /* all overwritten */
    assert_int_equal(o.count, 0);
    assert_int_equal(o.plain, 0);
    tdm__ring_order_free(&o);
    tdm__ring_entries_order(r, e, 0, 0, SIZE_MAX, &o);
    assert_int_equal(o.count, 0);
    tdm__ring_order_free(&o);
    tdm__ring_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_writer_in_order_is_read_in_place),
        cmocka_unit_test(a_wrapped_writer_is_read_from_its_oldest),
        cmocka_unit_test(several_writers_are_sorted_by_time_then_claim),
        cmocka_unit_test(at_most_the_capacity_and_nothing_of_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
