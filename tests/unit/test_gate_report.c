/* tests/unit/test_gate_report.c: what the memory gates print and write
 * (viewer-export/gate/gate_text.c, junit.c) for snapshots built by hand
 * (gate_fixtures.h): the failure report's length and content, the verdict
 * first with passes counted, GitHub annotation lines, XML escaping and the
 * JUnit file. */
#include "gate_fixtures.h"

/* ---- reports ------------------------------------------------------------ */

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* noinline: inlined, GCC takes the returned text for a pointer into the
 * local `buf` (-Wdangling-pointer at -O3). */
static __attribute__((noinline)) char *render_failure(const tdm_gate_options *o, const tdm_input *in,
                            const tdm_gate_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tdm__gate_print_failure(f, o, in, r), TDM_OK);
    fclose(f);
    return buf;
}

static void test_failure_report(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    size_t peak = standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 1000;
    o.device = 0;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    char *text = render_failure(&o, &l.in, &rep.results[0]);
    assert_true(count_lines(text) <= 30);
    /* The verdict first: gate, figure, limit, excess; then where. */
    static const char verdict[] = "max-peak FAILED: peak 1.42 KiB > limit 1000 B (450 B, 45.0% "
                                  "over)\n  on         a.tdm, device 0 (sim0)\n";
    assert_true(strncmp(text, verdict, sizeof verdict - 1) == 0);
    assert_non_null(strstr(text, "limit      1000 B"));
    assert_non_null(strstr(text, "peak       1.42 KiB (1450 B), 450 B (45.0%) over"));
    char when[64];
    snprintf(when, sizeof when, "(event %zu), step 2, phase backward", peak);
    assert_non_null(strstr(text, when));
    /* Sites at the peak: weights 1000, activation 400, temporary 50;
     * shown from the program's frames, tidemark's own left out. */
    const char *w = strstr(text, "make_weights (train.c:100)");
    const char *a = strstr(text, "make_activation (train.c:101)");
    const char *tmp = strstr(text, "make_temp (train.c:102)");
    assert_true(w && a && tmp && w < a && a < tmp);
    assert_non_null(strstr(text, "forward (train.c:103)"));
    assert_null(strstr(text, "tdm_malloc"));
    assert_non_null(strstr(text, "69.0%")); /* 1000 of 1450 */
    free(text);

    /* --top 1 --frames 1: one site, one frame. */
    o.top = 1;
    o.frames = 1;
    text = render_failure(&o, &l.in, &rep.results[0]);
    assert_null(strstr(text, "make_activation"));
    assert_null(strstr(text, "forward (train.c"));
    assert_non_null(strstr(text, "... 2 more sites"));
    free(text);
    tdm__gate_report_free(&rep);
    unload(&l);
}

/* The whole report: the first failure in full first, then the other
 * failures one line each, passes only counted. */
static void test_report_verdict_first(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 2000; /* device 0 passes, device 1 fails */
    o.max_leak = 0;    /* fails where anything is live at the end */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    assert_true(rep.failed >= 2);
    assert_true(rep.passed >= 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(tdm__gate_print(f, &o, &l.in, &rep), TDM_OK);
    fclose(f);
    assert_true(strncmp(text, "max-peak FAILED: peak 4.88 KiB > limit 1.95 KiB", 47) == 0);
    assert_non_null(strstr(text, "\n  on         a.tdm, device 1 (sim1)\n"));
    assert_null(strstr(text, "PASS "));
    assert_null(strstr(text, "FAIL  max-peak")); /* the first is the verdict, not a line */
    const char *leak = strstr(text, "\nFAIL  max-leak     a.tdm, device ");
    const char *sites = strstr(text, "make_temp (train.c:102)");
    assert_true(leak && sites && sites < leak);
    assert_int_equal(count_lines(text) - count_lines(strstr(text, "\ngates: ") + 1),
                     count_lines(text) - 1);
    free(text);

    /* Nothing failed: one line per result. */
    o.max_peak = o.max_leak = 1u << 30;
    tdm__gate_report_free(&rep);
    rep = eval(&o, &l.in, 1, NULL);
    f = open_memstream(&text, &len);
    assert_int_equal(tdm__gate_print(f, &o, &l.in, &rep), TDM_OK);
    fclose(f);
    assert_int_equal(count_lines(text), rep.count + 1);
    assert_true(strncmp(text, "PASS  max-peak     a.tdm, device 0 (sim0): ", 43) == 0);
    free(text);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_github_lines(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tdm__github_escape(f, "a%b\r\nc:d,e", 1);
    fputc('|', f);
    tdm__github_escape(f, "a%b\r\nc:d,e", 0);
    fclose(f);
    assert_string_equal(buf, "a%25b%0D%0Ac%3Ad%2Ce|a%25b%0D%0Ac:d,e");
    free(buf);

    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "runs/a,b.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 2000; /* device 0 passes, device 1 fails */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    f = open_memstream(&buf, &len);
    tdm__gate_print_github(f, &l.in, &rep);
    fclose(f);
    assert_int_equal(count_lines(buf), 1);
    static const char want[] = "::error title=tidemark max-peak (device 1)::runs/a,b.tdm: "
                               "peak 4.88 KiB > limit 1.95 KiB";
    assert_true(strncmp(buf, want, sizeof want - 1) == 0);
    assert_non_null(strstr(buf, "step 2, phase forward"));
    assert_non_null(strstr(buf, "top site 4.88 KiB: make_temp (train.c:102)"));
    free(buf);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static char *xml(const char *in, int attribute)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tdm__xml_escape(f, in, attribute);
    fclose(f);
    return buf;
}

static void test_xml_escape(void **state)
{
    (void)state;
    char *s = xml("a&b<c>d\"e'f\tg\nh\ri", 0);
    assert_string_equal(s, "a&amp;b&lt;c&gt;d\"e'f\tg\nh&#13;i");
    free(s);
    s = xml("a&b<c>d\"e'f\tg\nh", 1);
    assert_string_equal(s, "a&amp;b&lt;c&gt;d&quot;e&apos;f&#9;g&#10;h");
    free(s);
    /* Control characters, bad bytes, overlong forms, surrogates and
     * U+FFFE become U+FFFD; real UTF-8 stays. */
    s = xml("x\x01y\x1bz\xff|\xc0\xaf|\xed\xa0\x80|\xef\xbf\xbe|\xc3\xa9\xf0\x9f\x98\x80|\xe2\x82", 0);
    assert_string_equal(s, "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd"
                           "\xef\xbf\xbd|\xc3\xa9\xf0\x9f\x98\x80|\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
}

static void test_junit_file(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "dir/a&<b>.v1.tdm");
    tdm_input in[2] = {l.in, {.path = "gone.tdm", .error = "missing"}};
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 2000;
    o.max_leak = 1u << 20;
    tdm_gate_report rep = eval(&o, in, 2, NULL);
    char path[] = "/tmp/tdm_junit_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tdm__junit_write("test", path, "suite \"q\"", 1.5, &o, in, 2, &rep),
                     TDM_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    assert_true(strncmp(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39) == 0);
    assert_non_null(strstr(text, "<testsuites name=\"tidemark\" tests=\"4\" failures=\"1\" "
                                 "errors=\"2\" skipped=\"0\" time=\"1.500\">"));
    assert_non_null(strstr(text, "<testsuite name=\"suite &quot;q&quot;\" tests=\"4\""));
    assert_non_null(strstr(text, "<testcase classname=\"tidemark.a&amp;&lt;b&gt;_v1\" "
                                 "name=\"max-peak\" file=\"dir/a&amp;&lt;b&gt;.v1.tdm\""));
    assert_non_null(strstr(text, "<failure message=\"device 1: peak 4.88 KiB &gt; limit"));
    assert_non_null(strstr(text, "<error message=\"missing\" type=\"max-leak\">"));
    assert_non_null(strstr(text, "device 0: peak 1.42 KiB &lt;= limit 1.95 KiB"));
    assert_null(strstr(text, "a&<b>")); /* never raw */
    size_t cases = 0;
    for (const char *p = text; (p = strstr(p, "<testcase ")); p++)
        cases++;
    assert_int_equal(cases, 4);
    tdm__gate_report_free(&rep);

    /* A folder that does not exist: TDM_IO_ERROR, nothing left behind. */
    assert_int_equal(tdm__junit_write("test", "/nonexistent-dir/x.xml", "s", 0, &o, in, 2,
                                      &rep),
                     TDM_IO_ERROR);
    unload(&l);
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_verdict_first),
        cmocka_unit_test(test_failure_report),
        cmocka_unit_test(test_github_lines),
        cmocka_unit_test(test_xml_escape),
        cmocka_unit_test(test_junit_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
