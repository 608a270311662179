/* tests/unit/config_fixtures.h: what the TIDEMARK_CONF tests share
 * (test_config.c, test_config_alloc.c, test_config_load.c): the parsed
 * configuration, the error line, and the two checks every key test is made
 * of.  Header-only: each test program includes it once. */
#ifndef TDM_TESTS_CONFIG_FIXTURES_H
#define TDM_TESTS_CONFIG_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"

static tdm__config cfg; /* 4 KiB+: not on the stack of every test */
static char err[TDM__CONF_ERR_MAX];

/* Parses text that must be accepted, with no error line. */
static __attribute__((unused)) void parse_ok(const char *text)
{
    tdm_status st = tdm__config_parse(text, &cfg, err, sizeof err);
    if (st != TDM_OK)
        fail_msg("'%s' should parse, got: %s", text ? text : "(null)", err);
    assert_string_equal(err, "");
}

/* Parses text that must be refused and checks the shape of the one line:
 * prefix, no newline, the key and the value named, "recording is off". */
static __attribute__((unused)) void parse_bad(const char *text,
                                              const char *must_contain1,
                                              const char *must_contain2)
{
    tdm_status st = tdm__config_parse(text, &cfg, err, sizeof err);
    if (st != TDM_BAD_CONFIG)
        fail_msg("'%s' should be refused", text);
    assert_non_null(strstr(err, "tidemark: TIDEMARK_CONF: "));
    assert_ptr_equal(strstr(err, "tidemark: TIDEMARK_CONF: "), err);
    assert_null(strchr(err, '\n'));
    const char *tail = "; recording is off";
    assert_true(strlen(err) > strlen(tail));
    assert_string_equal(err + strlen(err) - strlen(tail), tail);
    if (must_contain1 && !strstr(err, must_contain1))
        fail_msg("'%s': message lacks '%s': %s", text, must_contain1, err);
    if (must_contain2 && !strstr(err, must_contain2))
        fail_msg("'%s': message lacks '%s': %s", text, must_contain2, err);
}

#endif
