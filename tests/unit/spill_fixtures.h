/* tests/unit/spill_fixtures.h: what the spill file's tests share: one
 * spill file, opened in a fresh folder for the whole group
 * (spill_setup / spill_teardown, cmocka group fixtures), and recording
 * into it with a fresh ring of a given size.  Static: each test program
 * includes it once. */
#ifndef TDM_TEST_SPILL_FIXTURES_H
#define TDM_TEST_SPILL_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "spill.h"
#include "tidemark.h"

static char spill_dir[] = "/tmp/tdm-spill-test-XXXXXX";
static char spill_path[256];

/* Records (no stacks) into a fresh ring of max_entries events. */
static inline void spill_record(size_t max_entries)
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = max_entries;
    o.context = TDM_CONTEXT_NONE;
    o.stacks = TDM_STACKS_NONE;
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
}

static inline int spill_setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(spill_dir));
    snprintf(spill_path, sizeof spill_path, "%s/t.spill", spill_dir);
    char why[256] = "";
    assert_int_equal(tdm__spill_open(spill_path, "", "sim", why, sizeof why), TDM_OK);
    return 0;
}

static inline int spill_teardown(void **state)
{
    (void)state;
    unlink(spill_path);
    rmdir(spill_dir);
    return 0;
}

#endif
