/* tests/unit/test_perfetto.c: the JSON writer and scanner (viewer-export/
 * json.c), the perfetto exporter (event shapes, counter values, slices,
 * instants, --merge into a profiler trace, several ranks in one trace:
 * one process each on one absolute time axis), the flamegraph, csv and json
 * exporters, and golden files of every one of those formats for the
 * checked-in sample snapshot (tests/data/golden/; TDM_UPDATE_GOLDEN=1
 * rewrites them after an intended change). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "export_formats.h"
#include "import_build.h"
#include "json.h"
#include "model.h"

/* ---- helpers ----------------------------------------------------------- */

/* Runs `fn` into a memory buffer; returns the bytes (NUL-terminated). */
static char *capture(void (*fn)(FILE *, void *), void *arg, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    fn(f, arg);
    assert_int_equal(fclose(f), 0);
    if (len)
        *len = n;
    return buf;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static int valid_json(const char *s, size_t n)
{
    tdm_jr r;
    tdm__jr_init(&r, s, n);
    return tdm__jr_skip(&r) == 0 && tdm__jr_peek(&r) == 0;
}

/* ---- writer --------------------------------------------------------------- */

static void write_sample(FILE *f, void *arg)
{
    (void)arg;
    tdm_jw w;
    assert_int_equal(tdm__jw_init(&w, f), TDM_OK);
    tdm__jw_open(&w, '{');
    tdm__jw_kstr(&w, "s", "a\"b\\c\n\t\x01\x7f\xc3\xa9");
    tdm__jw_ki64(&w, "min", INT64_MIN);
    tdm__jw_ku64(&w, "max", UINT64_MAX);
    tdm__jw_key(&w, "us");
    tdm__jw_open(&w, '[');
    tdm__jw_sep(&w);
    tdm__jw_us(&w, 0);
    tdm__jw_sep(&w);
    tdm__jw_us(&w, 1234567);
    tdm__jw_sep(&w);
    tdm__jw_us(&w, -5);
    tdm__jw_sep(&w);
    tdm__jw_open(&w, '{');
    tdm__jw_close(&w, '}');
    tdm__jw_close(&w, ']');
    tdm__jw_close(&w, '}');
    assert_int_equal(tdm__jw_finish(&w), TDM_OK);
}

static void writer_output(void **state)
{
    (void)state;
    size_t n;
    char *s = capture(write_sample, NULL, &n);
    assert_string_equal(s, "{\"s\":\"a\\\"b\\\\c\\n\\t\\u0001\x7f\xc3\xa9\","
                           "\"min\":-9223372036854775808,"
                           "\"max\":18446744073709551615,"
                           "\"us\":[0.000,1234.567,-0.005,{}]}");
    assert_true(valid_json(s, n));
    free(s);
}

/* A long string crosses the 1 MiB buffer boundary intact. */
static void write_big(FILE *f, void *arg)
{
    const char *big = arg;
    tdm_jw w;
    assert_int_equal(tdm__jw_init(&w, f), TDM_OK);
    tdm__jw_open(&w, '[');
    for (int i = 0; i < 5; i++) {
        tdm__jw_sep(&w);
        tdm__jw_str(&w, big);
    }
    tdm__jw_close(&w, ']');
    assert_int_equal(tdm__jw_finish(&w), TDM_OK);
}

static void writer_large(void **state)
{
    (void)state;
    size_t len = 700000;
    char *big = malloc(len + 1);
    assert_non_null(big);
    for (size_t i = 0; i < len; i++)
        big[i] = (char)('a' + i % 26);
    big[len] = '\0';
    size_t n;
    char *s = capture(write_big, big, &n);
    assert_int_equal(n, 2 + 5 * (len + 2) + 4);
    assert_true(valid_json(s, n));
    assert_memory_equal(s + 2, big, len);
    free(s);
    free(big);
}

static void writer_reports_io_error(void **state)
{
    (void)state;
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        skip();
    tdm_jw w;
    assert_int_equal(tdm__jw_init(&w, f), TDM_OK);
    for (int i = 0; i < 300000; i++)
        tdm__jw_str(&w, "0123456789");
    assert_int_equal(tdm__jw_finish(&w), TDM_IO_ERROR);
    fclose(f);
}

/* ---- reader --------------------------------------------------------------- */

static void reader_accepts_and_rejects(void **state)
{
    (void)state;
    static const char *const good[] = {
        "{}", "[]", "0", "-1.5e+3", "\"\\u00e9\\n\"", "true", "null",
        " { \"a\" : [1, 2, {\"b\": false}], \"c\": \"\" } ",
    };
    static const char *const bad[] = {
        "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "\"abc", "\"\\x\"",
        "01", "1.", "-", "tru", "[1 2]", "{1:2}", "\"a\nb\"", "{} x",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!valid_json(good[i], strlen(good[i])))
            fail_msg("rejected valid JSON: %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (valid_json(bad[i], strlen(bad[i])))
            fail_msg("accepted invalid JSON: %s", bad[i]);
    /* Nesting past the limit is an error, not a crash. */
    size_t deep = 100000;
    char *d = malloc(2 * deep);
    memset(d, '[', deep);
    memset(d + deep, ']', deep);
    assert_false(valid_json(d, 2 * deep));
    free(d);
}

static void reader_walks(void **state)
{
    (void)state;
    const char *doc = "{\"x\": 12, \"y\": [1, -2.5, \"s\"], \"big\": 1234567890123456789}";
    tdm_jr r;
    tdm__jr_init(&r, doc, strlen(doc));
    const char *k;
    size_t kl;
    int seen = 0;
    assert_int_equal(tdm__jr_object_begin(&r), 0);
    while (tdm__jr_object_next(&r, &k, &kl) == 1) {
        double dv;
        int64_t iv;
        int is_int;
        if (tdm__jr_key_is(k, kl, "x")) {
            assert_int_equal(tdm__jr_number(&r, &dv, &iv, &is_int), 0);
            assert_true(is_int);
            assert_int_equal(iv, 12);
            seen |= 1;
        } else if (tdm__jr_key_is(k, kl, "y")) {
            int n = 0;
            assert_int_equal(tdm__jr_array_begin(&r), 0);
            while (tdm__jr_array_next(&r) == 1) {
                assert_int_equal(tdm__jr_skip(&r), 0);
                n++;
            }
            assert_int_equal(n, 3);
            seen |= 2;
        } else {
            assert_true(tdm__jr_key_is(k, kl, "big"));
            assert_int_equal(tdm__jr_number(&r, &dv, &iv, &is_int), 0);
            assert_true(is_int);
            assert_int_equal(iv, 1234567890123456789ll);
            seen |= 4;
        }
    }
    assert_null(r.error);
    assert_int_equal(seen, 7);
}

/* ---- perfetto on a known history ----------------------------------------- */

typedef struct built {
    tdm_snap *snap;
    tdm_model *model;
    tdm_export_context ctx;
} built;

#define T0 1700000000000000000ull

/* init: param 1000; step 1: data batch 100; forward act 300; backward:
 * grad 1000, act freed; OOM; optimizer state 2000 (never freed). */
static void build_history_ex(built *b, uint64_t shift_ns, int32_t rank, const char *host)
{
    tdm_ibuild *ib;
    assert_int_equal(tdm__ibuild_new("cuda", "gpu0", "t", &ib), TDM_OK);
    uint64_t t = T0;
    assert_int_equal(tdm__ibuild_phase(ib, t, "init"), TDM_OK);
    assert_int_equal(tdm__ibuild_alloc(ib, t += 1000, 0, 0x1000, 1000, 0, 0), TDM_OK);
    assert_int_equal(tdm__ibuild_step(ib, t += 1000), TDM_OK);
    assert_int_equal(tdm__ibuild_phase(ib, t += 1000, "data"), TDM_OK);
    assert_int_equal(tdm__ibuild_alloc(ib, t += 1000, 0, 0x2000, 100, 0, 0), TDM_OK);
    assert_int_equal(tdm__ibuild_phase(ib, t += 1000, "forward"), TDM_OK);
    assert_int_equal(tdm__ibuild_alloc(ib, t += 1000, 0, 0x3000, 300, 0, 0), TDM_OK);
    assert_int_equal(tdm__ibuild_phase(ib, t += 1000, "backward"), TDM_OK);
    assert_int_equal(tdm__ibuild_alloc(ib, t += 1000, 0, 0x4000, 1000, 0, 0), TDM_OK);
    assert_int_equal(tdm__ibuild_free(ib, t += 1000, 0, 0x3000, 300, 0), TDM_OK);
    tdm_event oom = {.time_ns = t += 1000, .addr = 5, .size = 1 << 20,
                     .requested = 1000000, .device = 0, .action = TDM_ACTION_OOM};
    assert_int_equal(tdm__ibuild_event(ib, &oom), TDM_OK);
    assert_int_equal(tdm__ibuild_phase(ib, t += 1000, "optimizer"), TDM_OK);
    assert_int_equal(tdm__ibuild_alloc(ib, t += 1000, 0, 0x5000, 2000, 0, 0), TDM_OK);
    assert_int_equal(tdm__ibuild_finish(ib, &b->snap), TDM_OK);
    b->snap->header.pid = 77;
    b->snap->header.rank = rank;
    if (host)
        b->snap->header.host = host;
    for (size_t i = 0; i < b->snap->event_count; i++)
        b->snap->events[i].time_ns += shift_ns;
    assert_int_equal(tdm__model_build(b->snap, &b->model), TDM_OK);
    memset(&b->ctx, 0, sizeof b->ctx);
    b->ctx.input_path = "hist.tdm";
    b->ctx.snap = b->snap;
    b->ctx.model = b->model;
    b->ctx.device = -1;
    b->ctx.quiet = 1;
}

static void build_history(built *b)
{
    build_history_ex(b, 0, -1, NULL);
}

static void unbuild(built *b)
{
    tdm__model_free(b->model);
    tdm__ibuild_snap_free(b->snap);
}

static void run_export(FILE *f, void *arg)
{
    tdm_export_context *ctx = arg;
    assert_int_equal(ctx->format->write(f, ctx), TDM_OK);
}

static char *export_as(tdm_export_context *ctx, const char *format, size_t *n)
{
    ctx->format = tdm__export_format_find(format);
    assert_non_null(ctx->format);
    return capture(run_export, ctx, n);
}

static void perfetto_shapes(void **state)
{
    (void)state;
    built b;
    build_history(&b);
    size_t n;
    char *s = export_as(&b.ctx, "perfetto", &n);
    assert_true(valid_json(s, n));
    if (getenv("TDM_TEST_SHOW"))
        fputs(s, stderr);
    /* 5 allocs + 1 free, each a Kineto [memory] event */
    assert_int_equal(count(s, "\"name\":\"[memory]\""), 6);
    assert_int_equal(count(s, "\"cat\":\"cpu_instant_event\""), 6);
    assert_int_equal(count(s, "\"Device Type\":1"), 6);
    /* the free: negative bytes, totals after it (1000+100+1000) */
    assert_non_null(strstr(s, "\"Total Reserved\":2400,\"Total Allocated\":2100,"
                              "\"Bytes\":-300,\"Addr\":12288,\"Device Id\":0,"
                              "\"Device Type\":1,\"Category\":\"activation\""));
    assert_non_null(strstr(s, "\"Bytes\":2000,\"Addr\":20480,\"Device Id\":0,"
                              "\"Device Type\":1,\"Category\":\"optimizer_state\""));
    /* counters: one initial + one per alloc/free, per kind */
    assert_int_equal(count(s, "\"name\":\"device 0 allocated\""), 7);
    assert_int_equal(count(s, "\"name\":\"device 0 reserved\""), 1 + 6);
    assert_int_equal(count(s, "\"name\":\"device 0 activation\""), 2);
    assert_non_null(strstr(s, "\"name\":\"device 0 parameter\""));
    assert_non_null(strstr(s, "\"name\":\"device 0 gradient\""));
    assert_non_null(strstr(s, "\"name\":\"device 0 input\""));
    /* slices: phases init, data, forward, backward, optimizer; one step */
    assert_int_equal(count(s, "\"ph\":\"X\""), 6);
    assert_non_null(strstr(s, "{\"ph\":\"X\",\"name\":\"forward\",\"pid\":77,"
                              "\"tid\":2000000001,\"ts\":5.000,\"dur\":2.000}"));
    assert_non_null(strstr(s, "{\"ph\":\"X\",\"name\":\"step 1\",\"pid\":77,"
                              "\"tid\":2000000002,\"ts\":2.000,\"dur\":10.000}"));
    /* the OOM instant, process-scoped */
    assert_non_null(strstr(s, "\"name\":\"OOM\",\"pid\":77,\"tid\":2000000003,"
                              "\"ts\":10.000,\"s\":\"p\",\"args\":{\"device\":0,"
                              "\"requested\":1000000"));
    assert_non_null(strstr(s, "\"baseTimeNanoseconds\":1700000000000000000"));
    free(s);

    /* --device that matches nothing: metadata only, still valid */
    b.ctx.device = 3;
    s = export_as(&b.ctx, "perfetto", &n);
    assert_true(valid_json(s, n));
    assert_int_equal(count(s, "[memory]"), 0);
    free(s);
    unbuild(&b);
}

static char *write_temp(const char *text, size_t len)
{
    char *path = strdup("/tmp/tdm_test_pf_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

static void perfetto_merge(void **state)
{
    (void)state;
    built b;
    build_history(&b);
    const char *prof =
        "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n"
        "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 77,"
        " \"tid\": 77, \"ts\": 3.5, \"dur\": 4}\n  ],\n"
        "  \"baseTimeNanoseconds\": 1699999999999000000,\n  \"traceName\": \"x\"\n}\n";
    char *path = write_temp(prof, strlen(prof));
    b.ctx.format = tdm__export_format_find("perfetto");
    b.ctx.option_values[0] = path; /* perfetto's first option: merge */
    assert_string_equal(b.ctx.format->options[0].name, "merge");
    size_t n;
    char *s = capture(run_export, &b.ctx, &n);
    assert_true(valid_json(s, n));
    /* the profiler's bytes, untouched, before and after our events */
    const char *close = strstr(prof, "],");
    size_t head = (size_t)(close - prof);
    assert_memory_equal(s, prof, head);
    assert_string_equal(s + n - strlen(close), close);
    assert_memory_equal(s + head, ",{", 2);
    /* our times are relative to the profiler's base: the first alloc at
     * T0+1µs is 1001 µs after it */
    assert_non_null(strstr(s, "\"name\":\"[memory]\",\"pid\":77,\"tid\":77,\"ts\":1001.000"));
    assert_int_equal(count(s, "process_name"), 0); /* the profiler names it */
    free(s);
    unlink(path);
    free(path);

    /* an empty traceEvents and no base: absolute µs */
    const char *empty = "{\"traceEvents\":[]}";
    path = write_temp(empty, strlen(empty));
    b.ctx.option_values[0] = path;
    s = capture(run_export, &b.ctx, &n);
    assert_true(valid_json(s, n));
    assert_memory_equal(s, "{\"traceEvents\":[{", 17);
    assert_non_null(strstr(s, "\"ts\":1700000000000001.000"));
    free(s);
    unlink(path);
    free(path);

    /* bad inputs: an error, nothing written */
    static const char *const bad[] = {"{\"traceEvents\":[1,]}", "[1,2]",
                                      "{\"other\":[]}", "\x1f\x8b\x08\x00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = write_temp(bad[i], strlen(bad[i]));
        b.ctx.option_values[0] = path;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(tdm__export_perfetto(f, &b.ctx), TDM_FORMAT_ERROR);
        fclose(f);
        assert_int_equal(len, 0);
        free(buf);
        unlink(path);
        free(path);
    }
    /* A trace that cannot be read is bad input, like one that does not parse. */
    b.ctx.option_values[0] = "/nonexistent/trace.json";
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tdm__export_perfetto(f, &b.ctx), TDM_FORMAT_ERROR);
    fclose(f);
    free(buf);
    unbuild(&b);
}

/* ---- several ranks in one trace ------------------------------------------ */

typedef struct ranks_job {
    built *b;
    size_t n;
} ranks_job;

static void run_ranks(FILE *f, void *arg)
{
    ranks_job *j = arg;
    tdm_perfetto_ranks *r;
    assert_int_equal(tdm__export_perfetto_ranks_begin(f, &r), TDM_OK);
    for (size_t i = 0; i < j->n; i++)
        assert_int_equal(tdm__export_perfetto_ranks_add(r, &j->b[i].ctx), TDM_OK);
    assert_int_equal(tdm__export_perfetto_ranks_end(r), TDM_OK);
}

/* The "pid" of the first event in `s` that starts with `prefix`, or -1. */
__attribute__((noinline)) static long pid_after(const char *s, const char *prefix)
{
    const char *p = strstr(s, prefix);
    if (!p || !(p = strstr(p, "\"pid\":")))
        return -1;
    return strtol(p + 6, NULL, 10);
}

/* Rank 1 on host b (started 250 µs after rank 0), rank 0 on host a, a
 * file without a rank, and a second file of rank 0: one process each. */
static void perfetto_ranks(void **state)
{
    (void)state;
    built b[4];
    build_history_ex(&b[0], 250000, 1, "nodeb");
    build_history_ex(&b[1], 0, 0, "nodea");
    build_history_ex(&b[2], 1000000, -1, "nodec");
    build_history_ex(&b[3], 0, 0, "nodea");
    b[0].ctx.input_path = "out/r1.tdm";
    b[1].ctx.input_path = "out/r0.tdm";
    b[2].ctx.input_path = "single.tdm";
    b[3].ctx.input_path = "out/r0-again.tdm";
    for (int i = 0; i < 4; i++)
        b[i].ctx.format = tdm__export_format_find("perfetto");
    ranks_job job = {b, 4};
    size_t n;
    char *s = capture(run_ranks, &job, &n);
    if (getenv("TDM_TEST_SHOW"))
        fputs(s, stderr);
    assert_true(valid_json(s, n));
    /* pid = rank + 1 (Perfetto reserves pid 0), named and sorted by rank */
    assert_non_null(strstr(s, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":2,\"tid\":2,"
                              "\"args\":{\"name\":\"rank 1 (nodeb)\"}}"));
    assert_non_null(strstr(s, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":2,"
                              "\"tid\":2,\"args\":{\"sort_index\":1}}"));
    assert_non_null(strstr(s, "\"pid\":1,\"tid\":1,\"args\":{\"name\":\"rank 0 (nodea)\"}}"));
    /* no rank, and a rank already taken: spare pids far above the ranks */
    assert_non_null(strstr(s, "\"pid\":10000001,\"tid\":10000001,"
                              "\"args\":{\"name\":\"single.tdm (pid 77, nodec)\"}}"));
    assert_non_null(strstr(s, "\"pid\":10000002,\"tid\":10000002,"
                              "\"args\":{\"name\":\"rank 0 (nodea)\"}}"));
    assert_int_equal(count(s, "\"name\":\"process_name\""), 4);
    /* each process its own counters and memory events */
    assert_int_equal(count(s, "\"name\":\"[memory]\""), 4 * 6);
    assert_int_equal(count(s, "\"name\":\"device 0 allocated\""), 4 * 7);
    assert_int_equal(pid_after(s, "{\"ph\":\"C\",\"name\":\"device 0 allocated\""), 2);
    /* one time axis: absolute µs since the epoch; the first alloc (T0 +
     * 1 µs) of rank 1 lies 250 µs after rank 0's, the unranked file's
     * 1000 µs after */
    assert_non_null(strstr(s, "\"name\":\"[memory]\",\"pid\":2,\"tid\":2,"
                              "\"ts\":1700000000000251.000,"));
    assert_non_null(strstr(s, "\"name\":\"[memory]\",\"pid\":1,\"tid\":1,"
                              "\"ts\":1700000000000001.000,"));
    assert_non_null(strstr(s, "\"name\":\"[memory]\",\"pid\":10000001,\"tid\":10000001,"
                              "\"ts\":1700000000001001.000,"));
    assert_non_null(strstr(s, "\"baseTimeNanoseconds\":0"));
    /* track threads: unique over the whole trace (3 per process) */
    for (int k = 0; k < 4; k++) {
        char want[160];
        snprintf(want, sizeof want, "\"tid\":%d,\"args\":{\"name\":\"tidemark phases\"}",
                 2000000001 + 3 * k);
        assert_int_equal(count(s, want), 1);
        snprintf(want, sizeof want, "\"tid\":%d,\"args\":{\"name\":\"tidemark OOM and "
                                    "snapshots\"}", 2000000003 + 3 * k);
        assert_int_equal(count(s, want), 1);
    }
    assert_non_null(strstr(s, "{\"ph\":\"X\",\"name\":\"forward\",\"pid\":2,"
                              "\"tid\":2000000001,\"ts\":1700000000000255.000,\"dur\":2.000}"));
    assert_non_null(strstr(s, "{\"ph\":\"X\",\"name\":\"forward\",\"pid\":1,"
                              "\"tid\":2000000004,\"ts\":1700000000000005.000,\"dur\":2.000}"));
    /* the trailer lists every snapshot */
    assert_non_null(strstr(s, "\"snapshots\":[{\"snapshot\":\"out/r1.tdm\",\"host\":\"nodeb\","
                              "\"rank\":1,\"pid\":2,\"recorded_pid\":77,\"dropped_events\":0}"));
    assert_int_equal(count(s, "\"recorded_pid\":77"), 4);
    free(s);

    /* --merge is one process's: refused, and the sequence fails */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tdm_perfetto_ranks *r;
    assert_int_equal(tdm__export_perfetto_ranks_begin(f, &r), TDM_OK);
    b[0].ctx.option_values[0] = "prof.json";
    assert_int_equal(tdm__export_perfetto_ranks_add(r, &b[0].ctx), TDM_INVALID_ARGUMENT);
    b[0].ctx.option_values[0] = NULL;
    assert_int_equal(tdm__export_perfetto_ranks_add(r, &b[1].ctx), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__export_perfetto_ranks_end(r), TDM_INVALID_ARGUMENT);
    fclose(f);
    free(buf);

    /* no snapshot at all: still a valid, empty trace */
    ranks_job none = {b, 0};
    s = capture(run_ranks, &none, &n);
    assert_true(valid_json(s, n));
    assert_int_equal(count(s, "\"ph\""), 0);
    free(s);
    for (int i = 0; i < 4; i++)
        unbuild(&b[i]);
}

/* ---- the other formats on the same history -------------------------------- */

static void csv_log(void **state)
{
    (void)state;
    built b;
    build_history(&b);
    size_t n;
    char *s = export_as(&b.ctx, "csv", &n);
    /* T0 is 2023-11-14 22:13:20 UTC */
    assert_string_equal(s,
        "Thread,Time,Action,Pointer,Size,Stream\n"
        "77,22:13:20.000001,allocate,0x1000,1000,0\n"
        "77,22:13:20.000004,allocate,0x2000,100,0\n"
        "77,22:13:20.000006,allocate,0x3000,300,0\n"
        "77,22:13:20.000008,allocate,0x4000,1000,0\n"
        "77,22:13:20.000009,free,0x3000,300,0\n"
        "77,22:13:20.000010,allocate failure,(nil),1000000,0\n"
        "77,22:13:20.000012,allocate,0x5000,2000,0\n");
    free(s);
    unbuild(&b);
}

static void flamegraph_without_stacks(void **state)
{
    (void)state;
    built b;
    build_history(&b);
    size_t n;
    char *s = export_as(&b.ctx, "flamegraph", &n);
    /* the peak is the end: 1000 + 100 + 1000 + 2000 */
    assert_string_equal(s, "device 0;[no stack] 4100\n");
    free(s);
    b.ctx.option_values[0] = "7us"; /* --at: after the activation's alloc */
    b.ctx.option_values[1] = "";    /* --by-category */
    s = export_as(&b.ctx, "flamegraph", &n);
    assert_string_equal(s, "device 0;activation;[no stack] 300\n"
                           "device 0;input;[no stack] 100\n"
                           "device 0;parameter;[no stack] 1000\n");
    free(s);
    b.ctx.option_values[0] = "soon";
    b.ctx.format = tdm__export_format_find("flamegraph");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tdm__export_flamegraph(f, &b.ctx), TDM_INVALID_ARGUMENT);
    fclose(f);
    free(buf);
    unbuild(&b);
}

static void json_model(void **state)
{
    (void)state;
    built b;
    build_history(&b);
    size_t n;
    char *s = export_as(&b.ctx, "json", &n);
    assert_true(valid_json(s, n));
    assert_non_null(strstr(s, "\"tidemark_json\":1"));
    assert_non_null(strstr(s, "\"peak_allocated\":4100"));
    assert_non_null(strstr(s, "\"categories_at_peak\":{\"unknown\":0,\"parameter\":1000,"
                              "\"optimizer_state\":2000,\"gradient\":1000,\"activation\":0,"
                              "\"input\":100,\"temporary\":0}"));
    assert_non_null(strstr(s, "\"size\":[1000,100,300,1000,2000]"));
    assert_non_null(strstr(s, "\"category\":[\"parameter\",\"input\",\"activation\","
                              "\"gradient\",\"optimizer_state\"]"));
    assert_non_null(strstr(s, "\"free_seq\":[null,null,"));
    free(s);
    unbuild(&b);
}

/* ---- golden files ----------------------------------------------------------- */

static void golden_files(void **state)
{
    (void)state;
    static const char *const formats[][2] = {
        {"perfetto", "sample-v1.perfetto.json"},
        {"flamegraph", "sample-v1.folded"},
        {"csv", "sample-v1.csv"},
        {"json", "sample-v1.model.json"},
    };
    tdm_snap *snap = NULL;
    tdm_model *m = NULL;
    assert_int_equal(tdm__snap_read_file(TDM_TEST_DATA_DIR "/sample-v1.tdm", 0, &snap, NULL),
                     TDM_OK);
    assert_int_equal(tdm__model_build(snap, &m), TDM_OK);
    int update = getenv("TDM_UPDATE_GOLDEN") != NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        tdm_export_context ctx = {.input_path = "sample-v1.tdm", .snap = snap,
                                  .model = m, .device = -1, .quiet = 1};
        size_t n;
        char *got = export_as(&ctx, formats[i][0], &n);
        char path[1024];
        snprintf(path, sizeof path, "%s/golden/%s", TDM_TEST_DATA_DIR, formats[i][1]);
        if (update) {
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(got, 1, n, f), n);
            fclose(f);
        }
        FILE *f = fopen(path, "rb");
        if (!f)
            fail_msg("missing golden file %s (TDM_UPDATE_GOLDEN=1 writes it)", path);
        char *want = malloc(n + 2);
        size_t wn = fread(want, 1, n + 1, f);
        fclose(f);
        if (wn != n || memcmp(want, got, n) != 0)
            fail_msg("%s differs from %s (%zu vs %zu bytes)", formats[i][0], path, n, wn);
        free(want);
        free(got);
    }
    tdm__model_free(m);
    tdm__snap_free(snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writer_output),
        cmocka_unit_test(writer_large),
        cmocka_unit_test(writer_reports_io_error),
        cmocka_unit_test(reader_accepts_and_rejects),
        cmocka_unit_test(reader_walks),
        cmocka_unit_test(perfetto_shapes),
        cmocka_unit_test(perfetto_merge),
        cmocka_unit_test(perfetto_ranks),
        cmocka_unit_test(csv_log),
        cmocka_unit_test(flamegraph_without_stacks),
        cmocka_unit_test(json_model),
        cmocka_unit_test(golden_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
