/* tests/unit/test_summary.c: the one-snapshot summary printer
 * (viewer-export/model/summary.h) on snapshots built by hand
 * (model_fixtures.h): the answer first (the peak, then the sites at the
 * peak, then the details), what --verbose adds, sites shown from their
 * first frame outside tidemark, a start the file does not date, a long
 * config cut; and the size/offset/share formatters the tool prints with. */
#include "model_fixtures.h"
#include "format_size.h"
#include "summary.h"

/* The summary of `t` as a malloc'd string (printed too, for the log).
 * Not inlined: GCC 12 at -O3 then took the string for the local that
 * open_memstream wrote its address to (-Wdangling-pointer). */
static __attribute__((noinline)) char *summary_text(tsnap *t, const tdm_model *m, const tdm_summary_options *o)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(tdm__summary_print(out, "x.tdm", &t->s, m, o), TDM_OK);
    fclose(out);
    printf("%s", text);
    return text;
}

/* The 1-based line of the first occurrence of `what`, 0 when absent. */
static int line_of(const char *text, const char *what)
{
    const char *p = strstr(text, what);
    if (!p)
        return 0;
    int line = 1;
    for (const char *q = text; q < p; q++)
        line += *q == '\n';
    return line;
}

static int lines_in(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

/* A run of two steps with a peak in step 2 and a block live at the end. */
static tsnap *two_steps(void)
{
    tsnap *t = tsnap_new();
    add_device(t, 0, 16ull << 30);
    alloc_pt(t, 0, 0x10000, 3ull << 20, 1);
    for (int s = 0; s < 2; s++) {
        mark_step(t);
        mark_phase(t, 1);
        alloc_pt(t, 0, 0x40000, 1ull << 10, 3);
        free_pt(t, 0, 0x40000, 1ull << 10);
        alloc_pt(t, 0, 0x20000, (1ull + (uint64_t)s) << 20, 2); /* events 9-10, 22-23 */
        mark_phase(t, 2);
        free_pt(t, 0, 0x20000, (1ull + (uint64_t)s) << 20);
    }
    state_block(t, 0, 0x10000, 3ull << 20, 3ull << 20, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    t->stats[0] = (tdm_snap_device_stats){.device = 0};
    t->stats[0].stats.allocated_bytes.peak = 5ull << 20;
    t->stats[0].stats.allocation.allocated = 5;
    t->s.stats_count = 1;
    t->s.header.config = "dump=x.tdm";
    return t;
}

/* The answer first: the peak (bytes, share of capacity, when), then the
 * sites at the peak, then live at end and stats, then who and how; the
 * details --verbose adds are left out by default. */
static void test_summary_answer_first(void **state)
{
    (void)state;
    tsnap *t = two_steps();
    tdm_model *m = build(t);
    tdm_summary_options o = {.top = 10, .device = -1};
    char *text = summary_text(t, m, &o);
    assert_int_equal(line_of(text, "device 0 (sim0), capacity 16.00 GiB (17179869184 B)"), 3);
    assert_int_equal(line_of(text, "  peak allocated 5.00 MiB (5242880 B), <0.1% of capacity\n"),
                     4);
    assert_int_equal(line_of(text, "  peak at        +0.025 s (event 23), step 2, phase forward\n"),
                     5);
    int sites = line_of(text, "top allocation sites by bytes live at the peak (2 sites)\n");
    int end = line_of(text, "  live at end    3.00 MiB (3145728 B) in 1 allocation,");
    int stats = line_of(text, "  stats          allocated ");
    int process = line_of(text, "  process    pid 42 on testhost\n");
    int events = line_of(text, "events       ");
    assert_true(sites > 5 && end > sites && stats > end && process > stats && events > process);
    /* Shares: 3 of 5 MiB, 2 of 5 MiB; two frames per site. */
    assert_non_null(strstr(text, "  60.0%      1  make_weights (train.c:100)\n"
                                 "                                  forward (train.c:103)\n"));
    assert_non_null(strstr(text, "  40.0%      1  make_activation (train.c:101)\n"));
    assert_null(strstr(text, "train_step"));
    assert_null(strstr(text, "  file       format"));
    assert_null(strstr(text, " allocations ("));
    assert_null(strstr(text, "live at the end"));
    assert_null(strstr(text, "tdm_malloc"));
    assert_true(lines_in(text) <= 30);
    free(text);

    o.verbose = 1;
    text = summary_text(t, m, &o);
    assert_int_equal(line_of(text, "  peak allocated "), 4);
    assert_non_null(strstr(text, "  file       format 1, written by tidemark 0.1.0\n"));
    assert_non_null(strstr(text, "                 5 allocations (0 live), 0 segments, 0 OOMs"));
    assert_non_null(strstr(text, "top allocation sites by bytes live at the end (1 site)"));
    assert_non_null(strstr(text, "train_step (train.c:104)")); /* more frames */
    free(text);

    /* --frames wins over the default of either. */
    o.frames = 1;
    text = summary_text(t, m, &o);
    assert_null(strstr(text, "forward (train.c:103)"));
    free(text);
    tdm__model_free(m);
    free(t);
}

/* Imported logs give times of day or offsets, not dates: no 1970. */
static void test_summary_start_unknown(void **state)
{
    (void)state;
    tsnap *t = two_steps();
    uint64_t starts[] = {0, 11ull * 3600 * 1000000, 3ull * 86400 * 1000000};
    for (int i = 0; i < 3; i++) {
        t->s.header.start_time_us = starts[i];
        t->s.header.dump_time_us = starts[i] + 5000000;
        tdm_model *m = build(t);
        tdm_summary_options o = {.top = 10, .device = -1};
        char *text = summary_text(t, m, &o);
        assert_non_null(strstr(text, "  started    unknown (the file gives no date)\n"));
        assert_null(strstr(text, "1970"));
        /* Times are then given from the first event. */
        assert_non_null(strstr(text, "history      +0.000 s .. "));
        free(text);
        tdm__model_free(m);
    }
    t->s.header.start_time_us = 1700000000000000ull;
    t->s.header.dump_time_us = 1700000010000000ull;
    tdm_model *m = build(t);
    tdm_summary_options o = {.top = 10, .device = -1};
    char *text = summary_text(t, m, &o);
    assert_non_null(strstr(text, "  started    2023-11-14 22:13:20 UTC; dumped 10.000 s later\n"));
    free(text);
    tdm__model_free(m);
    /* A dump time 2^56 µs after the start (a crafted header, found by
     * fuzz_commands): the span in ns does not fit an int64, and its
     * product overflowed (signed: undefined) into a negative offset. */
    t->s.header.dump_time_us = 1700000000000000ull + 68747679890419616ull;
    m = build(t);
    text = summary_text(t, m, &o);
    /* INT64_MAX ns; before, the wrapped product read -1399804 h, its
     * sign cut off: "dumped 1399804 h 33 min 24 s later". */
    assert_non_null(strstr(text, "  started    2023-11-14 22:13:20 UTC; dumped "
                                 "2562047 h 47 min 16 s later\n"));
    free(text);
    tdm__model_free(m);
    free(t);
}

/* A long config (or metadata) is cut to one line unless verbose. */
static void test_summary_long_config(void **state)
{
    (void)state;
    tsnap *t = two_steps();
    char config[301];
    memset(config, 'k', 300);
    config[300] = '\0';
    t->s.header.config = config;
    tdm_model *m = build(t);
    tdm_summary_options o = {.top = 10, .device = -1};
    char *text = summary_text(t, m, &o);
    assert_non_null(strstr(text, "kkk... (--verbose: all 300 characters)\n"));
    assert_null(strstr(text, config));
    free(text);
    o.verbose = 1;
    text = summary_text(t, m, &o);
    assert_non_null(strstr(text, config));
    free(text);
    tdm__model_free(m);
    free(t);
}

/* The summary printer on a hand-built snapshot: headings, the peak line,
 * and sites shown from their first frame outside tidemark. */
static void test_summary_output(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 16ull << 30);
    alloc_pt(t, 0, 0x10000, 3ull << 20, 1);
    mark_step(t);
    mark_phase(t, 1);
    alloc_pt(t, 0, 0x20000, 1ull << 20, 2);
    free_pt(t, 0, 0x20000, 1ull << 20);
    state_block(t, 0, 0x10000, 3ull << 20, 3ull << 20, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    tdm_model *m = build(t);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    tdm_summary_options o = {.top = 10, .frames = 3, .device = -1};
    assert_int_equal(tdm__summary_print(out, "x.tdm", &t->s, m, &o), TDM_OK);
    fclose(out);
    printf("%s", text);
    assert_non_null(strstr(text, "tidemark summary of x.tdm"));
    assert_non_null(strstr(text, "pid 42 on testhost"));
    assert_non_null(strstr(text, "sim0"));
    assert_non_null(strstr(text, "16.00 GiB (17179869184 B)"));
    assert_non_null(strstr(text, "peak allocated 4.00 MiB (4194304 B)"));
    assert_non_null(strstr(text, "step 1, phase forward"));
    assert_non_null(strstr(text, "live at end    3.00 MiB (3145728 B) in 1 allocation,"));
    assert_non_null(strstr(text, "make_activation (train.c:101)"));
    assert_non_null(strstr(text, "make_weights (train.c:100)"));
    assert_non_null(strstr(text, "train_step (train.c:104)"));
    assert_null(strstr(text, "tdm_malloc")); /* tidemark's own frame is hidden */
    /* Site ranking in the text: weights (3 MiB) before activation (1 MiB). */
    assert_true(strstr(text, "make_weights") < strstr(text, "make_activation"));
    size_t lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    assert_true(lines < 60);
    free(text);
    tdm__model_free(m);
    free(t);
}

static void test_format_helpers(void **state)
{
    (void)state;
    char b[TDM_FMT_LEN];
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, 0), "0 B");
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, 1023), "1023 B");
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, 1024), "1.00 KiB");
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, 1536ull << 20), "1.50 GiB");
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, (1ull << 20) - 1), "1.00 MiB");
    assert_string_equal(tdm__fmt_bytes(b, sizeof b, UINT64_MAX), "16.00 EiB");
    assert_string_equal(tdm__fmt_sbytes(b, sizeof b, -2048), "-2.00 KiB");
    assert_string_equal(tdm__fmt_bytes_exact(b, sizeof b, 512), "512 B");
    assert_string_equal(tdm__fmt_bytes_exact(b, sizeof b, 1536ull << 20),
                        "1.50 GiB (1610612736 B)");
    assert_string_equal(tdm__fmt_offset(b, sizeof b, 12345000000ll), "+12.345 s");
    assert_string_equal(tdm__fmt_offset(b, sizeof b, 123000ll), "+0.000123 s");
    assert_string_equal(tdm__fmt_offset(b, sizeof b, 123456000000ll), "+2 min 03.456 s");
    assert_string_equal(tdm__fmt_offset(b, sizeof b, 3723000000000ll), "+1 h 02 min 03 s");
    assert_string_equal(tdm__fmt_offset(b, sizeof b, -5000000000ll), "-5.000 s");
    assert_string_equal(tdm__fmt_utc(b, sizeof b, 1700000000000000ull), "2023-11-14 22:13:20 UTC");

    uint64_t v;
    assert_int_equal(tdm__parse_size("4096", &v), TDM_OK);
    assert_int_equal(v, 4096);
    assert_int_equal(tdm__parse_size("12GiB", &v), TDM_OK);
    assert_int_equal(v, 12ull << 30);
    assert_int_equal(tdm__parse_size("1.5 g", &v), TDM_OK);
    assert_int_equal(v, 1536ull << 20);
    assert_int_equal(tdm__parse_size("512KB", &v), TDM_OK);
    assert_int_equal(v, 512ull << 10);
    assert_int_equal(tdm__parse_size("-1G", &v), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__parse_size("1.5", &v), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__parse_size("12 parsecs", &v), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__parse_size("", &v), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__parse_size("99999999TiB", &v), TDM_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_output),
        cmocka_unit_test(test_summary_answer_first),
        cmocka_unit_test(test_summary_start_unknown),
        cmocka_unit_test(test_summary_long_config),
        cmocka_unit_test(test_format_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
