/* tests/unit/test_did_you_mean.c: the "did you mean" helpers of the format
 * library (format/common.h), which TIDEMARK_CONF's key errors use and
 * the command-line tool can use for subcommands and options: the edit
 * distance, and the closest candidate within 2 edits, case aside. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common.h"

static void edit_distance_counts_edits(void **state)
{
    (void)state;
    assert_int_equal(tdm__edit_distance("", ""), 0);
    assert_int_equal(tdm__edit_distance("dump", "dump"), 0);
    assert_int_equal(tdm__edit_distance("", "dump"), 4);
    assert_int_equal(tdm__edit_distance("dump", ""), 4);
    assert_int_equal(tdm__edit_distance("recrod", "record"), 2); /* a swap is 2 */
    assert_int_equal(tdm__edit_distance("mode", "mdoe"), 2);
    assert_int_equal(tdm__edit_distance("dump", "dump_on"), 3);
    assert_int_equal(tdm__edit_distance("kitten", "sitting"), 3);
    assert_int_equal(tdm__edit_distance("flaw", "lawn"), 2);
    /* Exact: case counts. */
    assert_int_equal(tdm__edit_distance("DUMP", "dump"), 4);
    /* Symmetric. */
    assert_int_equal(tdm__edit_distance("sitting", "kitten"), 3);
}

static void edit_distance_of_long_strings_is_unknown(void **state)
{
    (void)state;
    char big[TDM__EDIT_DISTANCE_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(tdm__edit_distance(big, "a"), SIZE_MAX);
    assert_int_equal(tdm__edit_distance("a", big), SIZE_MAX);
    big[TDM__EDIT_DISTANCE_MAX] = '\0'; /* the longest measured */
    assert_int_equal(tdm__edit_distance(big, ""), TDM__EDIT_DISTANCE_MAX);
}

static const char *const keys[] = {"record", "context", "stacks", "max_entries", "dump",
                                   "dump_on", "signal", "device", "mode", "fork", "ranks"};
#define NKEYS (sizeof keys / sizeof keys[0])

static void suggests_within_two_edits(void **state)
{
    (void)state;
    assert_string_equal(tdm__did_you_mean("recrod", keys, NKEYS), "record");
    assert_string_equal(tdm__did_you_mean("mdoe", keys, NKEYS), "mode");
    assert_string_equal(tdm__did_you_mean("dumpon", keys, NKEYS), "dump_on");
    assert_string_equal(tdm__did_you_mean("stack", keys, NKEYS), "stacks");
    /* 3 edits or more: nothing. */
    assert_null(tdm__did_you_mean("colour", keys, NKEYS));
    assert_null(tdm__did_you_mean("rcrdd", keys, NKEYS));
    assert_null(tdm__did_you_mean("", keys, NKEYS));
}

static void case_is_no_edit(void **state)
{
    (void)state;
    assert_string_equal(tdm__did_you_mean("DUMP", keys, NKEYS), "dump");
    assert_string_equal(tdm__did_you_mean("Dump_On", keys, NKEYS), "dump_on");
    assert_string_equal(tdm__did_you_mean("MAX_ENTRIES", keys, NKEYS), "max_entries");
    /* Case and a typo: the typo alone counts. */
    assert_string_equal(tdm__did_you_mean("DUMP_ONN", keys, NKEYS), "dump_on");
    assert_string_equal(tdm__did_you_mean("Recrod", keys, NKEYS), "record");
    /* The word itself is its own closest candidate. */
    assert_string_equal(tdm__did_you_mean("dump", keys, NKEYS), "dump");
}

static void closest_wins_then_first(void **state)
{
    (void)state;
    /* "dum" is 1 from dump, 4 from dump_on. */
    assert_string_equal(tdm__did_you_mean("dum", keys, NKEYS), "dump");
    /* "dump_o" is 1 from dump_on, 2 from dump. */
    assert_string_equal(tdm__did_you_mean("dump_o", keys, NKEYS), "dump_on");
    /* A tie goes to the first candidate. */
    static const char *const ab[] = {"abc", "abd"};
    assert_string_equal(tdm__did_you_mean("abx", ab, 2), "abc");
    static const char *const ba[] = {"abd", "abc"};
    assert_string_equal(tdm__did_you_mean("abx", ba, 2), "abd");
    /* An exact match beats a case-only one. */
    static const char *const cases[] = {"Run", "run"};
    assert_string_equal(tdm__did_you_mean("run", cases, 2), "run");
    assert_string_equal(tdm__did_you_mean("Run", cases, 2), "Run");
}

static void no_candidates(void **state)
{
    (void)state;
    assert_null(tdm__did_you_mean("dump", keys, 0));
    assert_null(tdm__did_you_mean("dump", NULL, 0));
    assert_null(tdm__did_you_mean(NULL, keys, NKEYS));
    static const char *const holes[] = {NULL, "dump", NULL};
    assert_string_equal(tdm__did_you_mean("dupm", holes, 3), "dump");
    /* A word too long to measure matches nothing. */
    char big[TDM__EDIT_DISTANCE_MAX + 8];
    memset(big, 'd', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_null(tdm__did_you_mean(big, keys, NKEYS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_distance_counts_edits),
        cmocka_unit_test(edit_distance_of_long_strings_is_unknown),
        cmocka_unit_test(suggests_within_two_edits),
        cmocka_unit_test(case_is_no_edit),
        cmocka_unit_test(closest_wins_then_first),
        cmocka_unit_test(no_candidates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
