/* tests/unit/test_spill_live.c: reading the spill file of a process that is
 * still recording (format_spill.h, tdm__spill_read_live, for `tidemark
 * top`):
 *   - a quiet file reads as the post-mortem reader reads it (the same
 *     events, stacks and counts), first lap and wrapped ring alike, and
 *     only what was recorded is read: a few MB, not the 640 MB a ring of
 *     1e7 entries reserves;
 *   - a slot rewritten between the reader's reads of it (a writer
 *     emulated under a wrapped pread) is left out and counted as being
 *     written, never read with the words of two events (each event's
 *     address is 4096 times its size, so a mix would show);
 *   - a header whose offsets and sizes lie fails or reads what is there,
 *     never out of bounds.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "format_spill.h"
#include "recorder.h"
#include "recorder_internal.h"
#include "ring.h"
#include "spill.h"
#include "tidemark.h"
#include "spill_fixtures.h"

static void same_as_the_file_reader(void)
{
    tdm_spill_data *a = NULL, *b = NULL;
    tdm_read_error err = {0};
    uint64_t copied = 0;
    assert_int_equal(tdm__spill_read_file(spill_path, &a, &err), TDM_OK);
    assert_int_equal(tdm__spill_read_live(spill_path, &b, &err, &copied), TDM_OK);
    assert_int_equal(a->event_count, b->event_count);
    assert_memory_equal(a->events, b->events, a->event_count * sizeof *a->events);
    assert_int_equal(a->stack_count, b->stack_count);
    assert_int_equal(a->overwritten, b->overwritten);
    assert_int_equal(b->torn_slots, 0);
    assert_int_equal(a->module_count, b->module_count);
    assert_int_equal(a->header.pid, b->header.pid);
    tdm__spill_data_free(a);
    tdm__spill_data_free(b);
    /* The header area (1.1 MB with the module table), the ring's used
     * chunks: far from the ring's 640 MB. */
    if (copied > ((uint64_t)16 << 20))
        fail_msg("read %llu bytes of a spill holding 1000 events", (unsigned long long)copied);
}

static void reads_what_the_file_reader_reads(void **state)
{
    (void)state;
    spill_record(10000000);
    tdm__ring *ring = atomic_load(&tdm__rec.ring);
    assert_non_null(ring);
    if (ring->spill_offset == 0)
        skip(); /* no room for the region in the file's file system */
    for (uint64_t i = 0; i < 1000; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * (i + 1), 512, 0, 0, 0);
    same_as_the_file_reader();
}

static void a_wrapped_ring_reads_the_same(void **state)
{
    (void)state;
    spill_record(256);
    for (uint64_t i = 0; i < 5000; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * (i + 1), 512, 0, 0, 0);
    same_as_the_file_reader();
}

/* A writer rewriting slot 0 while the reader reads its block: pread is
 * wrapped (-Wl,--wrap=pread) so that, between the reader's reads of the
 * ring's first block, the slot is rewritten as the ring's writer would:
 * its sequence word made odd and a new address stored after the first
 * read, the new size and the even word after the second.  The second
 * read's copy then holds the new address with the old size: torn. */
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
static uint64_t meddle_at;  /* the ring's slots' offset; 0: no meddling */
static int meddle_reads;

static void store_word(uint64_t off, uint64_t v)
{
    int fd = open(spill_path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &v, sizeof v, (off_t)off), (ssize_t)sizeof v);
    close(fd);
}

ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off)
{
    ssize_t got = __real_pread(fd, buf, n, off);
    if (!meddle_at || (uint64_t)off != meddle_at)
        return got;
    meddle_reads++;
    /* Slot 0: seq, then the event: time, addr, size, ... */
    if (meddle_reads == 1) {
        store_word(meddle_at, 2 * 9999 + 1);
        store_word(meddle_at + 8 + 8, 4096u * 777);
    } else if (meddle_reads == 2) {
        store_word(meddle_at + 8 + 16, 777);
        store_word(meddle_at, 2 * 9999 + 2);
    }
    return got;
}

static void a_slot_rewritten_while_read_is_left_out(void **state)
{
    (void)state;
    spill_record(4096);
    tdm__ring *ring = atomic_load(&tdm__rec.ring);
    if (!ring || ring->spill_offset == 0)
        skip();
    for (uint64_t i = 1; i <= 100; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * i, i, 0, 0, 0);
    tdm_spill_data *d = NULL;
    tdm_read_error err = {0};
    assert_int_equal(tdm__spill_read_file(spill_path, &d, &err), TDM_OK);
    uint64_t slots_at = d->header.ring_slots_offset;
    assert_int_equal(d->event_count, 100);
    tdm__spill_data_free(d);

    meddle_at = slots_at;
    meddle_reads = 0;
    tdm_status st = tdm__spill_read_live(spill_path, &d, &err, NULL);
    meddle_at = 0;
    assert_int_equal(st, TDM_OK);
    assert_int_equal(meddle_reads, 3); /* the block was read three times */
    for (size_t i = 0; i < d->event_count; i++)
        if (d->events[i].addr != 4096 * d->events[i].size)
            fail_msg("event %zu torn: addr %llu, size %llu", i,
                     (unsigned long long)d->events[i].addr,
                     (unsigned long long)d->events[i].size);
    assert_int_equal(d->torn_slots, 1);
    assert_int_equal(d->event_count, 99);
    tdm__spill_data_free(d);

    /* Read again, quietly: the rewritten slot is whole now, and read. */
    assert_int_equal(tdm__spill_read_live(spill_path, &d, &err, NULL), TDM_OK);
    assert_int_equal(d->torn_slots, 0);
    assert_int_equal(d->event_count, 100);
    tdm__spill_data_free(d);
}

/* A header whose offsets and sizes lie (a corrupt or hostile file) makes
 * the live reader fail or read what is there, never read or write out
 * of bounds (the sanitizer builds run this): every offset and count field
 * set to 0, 1, just past the file, half of 2^64 and 2^64 - 1, in turn. */
static void lying_headers_never_crash(void **state)
{
    (void)state;
    spill_record(4096);
    tdm__ring *ring = atomic_load(&tdm__rec.ring);
    if (!ring || ring->spill_offset == 0)
        skip();
    for (uint64_t i = 1; i <= 100; i++)
        tdm__rec_event(TDM_ACTION_ALLOC, 0, 4096 * i, i, 0, 0, 0);
    char copy[300];
    snprintf(copy, sizeof copy, "%s/lie.spill", spill_dir);
    static const size_t fields[] = {
        offsetof(tdm_spill_header, header_bytes),
        offsetof(tdm_spill_header, ring_offset),
        offsetof(tdm_spill_header, ring_slots_offset),
        offsetof(tdm_spill_header, ring_capacity),
        offsetof(tdm_spill_header, ring_slot_count),
        offsetof(tdm_spill_header, stacks_offset),
        offsetof(tdm_spill_header, stacks_recs_offset),
        offsetof(tdm_spill_header, stacks_frames_offset),
        offsetof(tdm_spill_header, stack_max),
        offsetof(tdm_spill_header, frame_max),
    };
    struct stat st;
    assert_int_equal(stat(spill_path, &st), 0);
    const uint64_t values[] = {0, 1, (uint64_t)st.st_size + 1, (uint64_t)1 << 63, UINT64_MAX};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            /* A fresh copy (sparse: the holes stay holes). */
            char cmd[700];
            snprintf(cmd, sizeof cmd, "cp --sparse=always '%s' '%s'", spill_path, copy);
            assert_int_equal(system(cmd), 0);
            int fd = open(copy, O_WRONLY | O_CLOEXEC);
            assert_true(fd >= 0);
            assert_int_equal(pwrite(fd, &values[v], 8, (off_t)fields[f]), 8);
            close(fd);
            tdm_spill_data *d = NULL;
            tdm_read_error err = {0};
            tdm_status s = tdm__spill_read_live(copy, &d, &err, NULL);
            if (s == TDM_OK)
                assert_true(d->event_count <= 100);
            else
                assert_true(err.message[0] != '\0');
            tdm__spill_data_free(d);
        }
    }
    unlink(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_what_the_file_reader_reads),
        cmocka_unit_test(a_wrapped_ring_reads_the_same),
        cmocka_unit_test(a_slot_rewritten_while_read_is_left_out),
        cmocka_unit_test(lying_headers_never_crash),
    };
    return cmocka_run_group_tests(tests, spill_setup, spill_teardown);
}
