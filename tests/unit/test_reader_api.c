/* tests/unit/test_reader_api.c: the snapshot reader's C API
 * (include/tidemark_reader.h, libtidemark_reader.so) on the sample files
 * of tests/data and on bad input: the tables are the file's (counts as
 * the .tdm reader reads them); a missing file, a directory, garbage and a
 * cut file fail with their status and a message naming the byte; a cut
 * file reads with TDM_SNAPSHOT_PARTIAL_OK; bad arguments are refused, not
 * crashed on; a site's text is cut to a short buffer and says how long it
 * is; the bytes per category at the peak add up to the peak; the peak of
 * the stretch from the peak on is the peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "snap_model.h"
#include "tidemark_reader.h"

#define SAMPLE TDM_TEST_DATA_DIR "/sample-v1.3.tdm"

static tdm_snapshot *load_ok(const char *path)
{
    tdm_snapshot *s = NULL;
    char err[512] = "x";
    assert_int_equal(tdm_snapshot_load(path, 0, &s, err, sizeof err), TDM_OK);
    assert_non_null(s);
    assert_string_equal(err, "");
    return s;
}

static void test_tables_are_the_files(void **state)
{
    (void)state;
    tdm_snap *raw = NULL;
    assert_int_equal(tdm__snap_read_file(SAMPLE, 0, &raw, NULL), TDM_OK);
    tdm_snapshot *s = load_ok(SAMPLE);
    tdm_snapshot_info info = {.size = sizeof info};
    assert_int_equal(tdm_snapshot_get_info(s, &info), TDM_OK);
    assert_int_equal(info.event_count, raw->event_count);
    assert_int_equal(info.segment_count, raw->segment_count);
    assert_int_equal(info.block_count, raw->block_count);
    assert_int_equal(info.rank, raw->header.rank);
    assert_true(info.complete);
    assert_false(info.truncated);
    size_t n = 0;
    const tdm_snapshot_event *ev = tdm_snapshot_events(s, &n);
    assert_int_equal(n, raw->event_count);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ev[i].time_ns, raw->events[i].time_ns);
        assert_int_equal(ev[i].size, raw->events[i].size);
        assert_int_equal(ev[i].action, raw->events[i].action);
        assert_int_equal(ev[i].device, raw->events[i].device);
    }
    const tdm_snapshot_segment *seg = tdm_snapshot_segments(s, &n);
    assert_int_equal(n, raw->segment_count);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seg[i].total_size, raw->segments[i].total_size);
    /* a smaller info struct (an older caller) gets what fits */
    tdm_snapshot_info small;
    memset(&small, 0x5a, sizeof small);
    small.size = offsetof(tdm_snapshot_info, tool_version);
    assert_int_equal(tdm_snapshot_get_info(s, &small), TDM_OK);
    assert_int_equal(small.size, offsetof(tdm_snapshot_info, tool_version));
    assert_string_equal(small.host, info.host);
    unsigned char fill;
    memcpy(&fill, (const char *)&small + offsetof(tdm_snapshot_info, pid), 1);
    assert_int_equal(fill, 0x5a);
    assert_string_equal(tdm_snapshot_action_name(0), "alloc");
    assert_string_equal(tdm_snapshot_action_name(250), "?");
    tdm_snapshot_free(s);
    tdm__snap_free(raw);
}

static void test_bad_input(void **state)
{
    (void)state;
    char dir[] = "/tmp/tdm-reader-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[512];
    tdm_snapshot *s = (tdm_snapshot *)1;

    snprintf(path, sizeof path, "%s/none.tdm", dir);
    assert_int_equal(tdm_snapshot_load(path, 0, &s, err, sizeof err), TDM_IO_ERROR);
    assert_null(s);
    assert_non_null(strstr(err, "No such file"));

    assert_int_equal(tdm_snapshot_load(dir, 0, &s, err, sizeof err), TDM_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "a directory"));

    snprintf(path, sizeof path, "%s/garbage.tdm", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("this is not a snapshot at all", f);
    fclose(f);
    assert_int_equal(tdm_snapshot_load(path, 0, &s, err, sizeof err), TDM_FORMAT_ERROR);
    assert_non_null(strstr(err, "at byte 0"));

    /* the sample cut in its middle: truncated, or read up to the cut */
    FILE *in = fopen(SAMPLE, "rb");
    assert_non_null(in);
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf, in);
    fclose(in);
    snprintf(path, sizeof path, "%s/cut.tdm", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(buf, 1, len / 2, f);
    fclose(f);
    assert_int_equal(tdm_snapshot_load(path, 0, &s, err, sizeof err), TDM_TRUNCATED);
    assert_null(s);
    assert_non_null(strstr(err, "is truncated at byte"));
    assert_int_equal(tdm_snapshot_load(path, TDM_SNAPSHOT_PARTIAL_OK, &s, err, sizeof err),
                     TDM_OK);
    tdm_snapshot_info info = {.size = sizeof info};
    assert_int_equal(tdm_snapshot_get_info(s, &info), TDM_OK);
    assert_true(info.truncated);
    assert_true(info.truncated_at > 0 && info.truncated_at <= len / 2);
    tdm_snapshot_free(s);

    /* no buffer for the message is allowed */
    assert_int_equal(tdm_snapshot_load(dir, 0, &s, NULL, 0), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_snapshot_load(NULL, 0, &s, err, sizeof err), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_snapshot_load(SAMPLE, 0, NULL, err, sizeof err), TDM_INVALID_ARGUMENT);

    unlink(path);
    snprintf(path, sizeof path, "%s/garbage.tdm", dir);
    unlink(path);
    rmdir(dir);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    size_t n = 7;
    assert_null(tdm_snapshot_events(NULL, &n));
    assert_int_equal(n, 0);
    tdm_snapshot_free(NULL);
    tdm_snapshot *s = load_ok(SAMPLE);
    tdm_snapshot_peak p;
    assert_int_equal(tdm_snapshot_get_peak(s, 99, &p), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_snapshot_get_peak(NULL, 0, &p), TDM_INVALID_ARGUMENT);
    tdm_snapshot_info info = {.size = 0};
    assert_int_equal(tdm_snapshot_get_info(s, &info), TDM_INVALID_ARGUMENT);
    int64_t seqs[2] = {3, 1}, out[2 * TDM_CATEGORY_COUNT_];
    assert_int_equal(tdm_snapshot_category_bytes(s, 0, seqs, 2, out), TDM_INVALID_ARGUMENT);
    seqs[0] = -2;
    assert_int_equal(tdm_snapshot_category_bytes(s, 0, seqs, 1, out), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm_snapshot_get_peak_since(s, 0, 1 << 20, &p), TDM_INVALID_ARGUMENT);
    tdm_snapshot_site *sites;
    assert_int_equal(tdm_snapshot_sites_at(s, 0, -5, &sites, &n), TDM_INVALID_ARGUMENT);
    char name[16];
    assert_string_equal(tdm_snapshot_phase_name(s, 0, name, sizeof name), "");
    assert_string_equal(tdm_snapshot_phase_name(s, 4000, name, sizeof name), "#4000");
    tdm_snapshot_free(s);
}

static void test_peak_sites_categories(void **state)
{
    (void)state;
    tdm_snapshot *s = load_ok(SAMPLE);
    tdm_snapshot_peak p;
    assert_int_equal(tdm_snapshot_get_peak(s, 0, &p), TDM_OK);
    assert_true(p.history);
    assert_true(p.bytes > 0);
    /* the bytes per category at the peak add up to it */
    int64_t out[TDM_CATEGORY_COUNT_];
    assert_int_equal(tdm_snapshot_category_bytes(s, 0, &p.seq, 1, out), TDM_OK);
    int64_t sum = 0;
    for (int c = 0; c < TDM_CATEGORY_COUNT_; c++)
        sum += out[c];
    assert_int_equal(sum, p.allocated);
    /* the stretch from the peak on peaks at the peak */
    tdm_snapshot_peak q;
    assert_int_equal(tdm_snapshot_get_peak_since(s, 0, p.seq, &q), TDM_OK);
    assert_int_equal(q.bytes, p.bytes);
    assert_int_equal(q.seq, p.seq);
    /* the sites at the peak hold its bytes */
    tdm_snapshot_site *sites;
    size_t n;
    assert_int_equal(tdm_snapshot_sites_at(s, 0, p.seq, &sites, &n), TDM_OK);
    uint64_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += sites[i].live_bytes;
    assert_int_equal(live, (uint64_t)p.allocated);
    assert_true(n > 0);
    /* a site's text, whole and cut short */
    char whole[1024], cut[8];
    size_t need = tdm_snapshot_site_text(s, sites[0].stack_id, 6, whole, sizeof whole);
    assert_int_equal(need, strlen(whole));
    assert_true(need > sizeof cut);
    assert_int_equal(tdm_snapshot_site_text(s, sites[0].stack_id, 6, cut, sizeof cut), need);
    assert_int_equal(strlen(cut), sizeof cut - 1);
    assert_memory_equal(cut, whole, sizeof cut - 1);
    assert_int_equal(tdm_snapshot_site_text(s, sites[0].stack_id, 6, NULL, 0), need);
    tdm_snapshot_site_text(s, 0, 2, whole, sizeof whole);
    assert_string_equal(whole, "(no stack recorded)");
    tdm_snapshot_sites_free(sites);
    tdm_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_are_the_files),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_peak_sites_categories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
