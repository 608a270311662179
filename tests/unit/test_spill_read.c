/* tests/unit/test_spill_read.c: what `tidemark recover` reads of a spill
 * file costs what was recorded, not what max_entries reserved.
 *
 * A ring of ten million entries is a 640 MB region of the spill file,
 * almost all of it holes while a program has recorded little.  The reader
 * looked at every slot (a page fault per 4 KiB) and made a sort key for
 * each: 14.5 s and 6.2 GB to recover 48,000 events at max_entries=1e8,
 * and no recovery at all where that much memory is not there (here: the
 * reader's peak memory, +620 MB before, +0 after).  It now
 * reads the chunks the ring's first lap claimed; a ring that went round
 * is read whole, as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cmocka.h>

#include "format_spill.h"
#include "recorder_internal.h"
#include "ring.h"
#include "spill.h"
#include "tidemark.h"
#include "spill_fixtures.h"

/* The process's peak resident memory, KiB. */
static long peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void reads_only_what_was_recorded(void **state)
{
    (void)state;
    spill_record(10000000);
    tdm__ring *ring = atomic_load(&tdm__rec.ring);
    assert_non_null(ring);
    if (ring->spill_offset == 0)
        skip(); /* no room for the region in the file's file system */
    for (uint64_t i = 0; i < 1000; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * (i + 1), 512, 0, 0, 0);

    tdm_spill_data *d = NULL;
    tdm_read_error err = {0};
    long before = peak_kib();
    assert_int_equal(tdm__spill_read_file(spill_path, &d, &err), TDM_OK);
    long grew = peak_kib() - before;
    assert_int_equal(d->event_count, 1000);
    assert_int_equal(d->events[999].addr, 4096 * 1000);
    tdm__spill_data_free(d);
    /* Reading every slot brought the whole region in: +620 MB. */
    if (grew > 64 * 1024)
        fail_msg("reading a spill of 1000 events in a ring of 1e7 entries took %ld MiB",
                 grew / 1024);
}

static void a_ring_that_went_round_is_read_whole(void **state)
{
    (void)state;
    spill_record(256);
    for (uint64_t i = 0; i < 5000; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * (i + 1), 512, 0, 0, 0);
    tdm_spill_data *d = NULL;
    tdm_read_error err = {0};
    assert_int_equal(tdm__spill_read_file(spill_path, &d, &err), TDM_OK);
    assert_int_equal(d->event_count, 256);
    assert_int_equal(d->events[255].addr, 4096 * 5000);
    tdm__spill_data_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_only_what_was_recorded),
        cmocka_unit_test(a_ring_that_went_round_is_read_whole),
    };
    return cmocka_run_group_tests(tests, spill_setup, spill_teardown);
}
