/* tests/unit/test_categories.c: category inference (viewer-export/
 * categories.c) rule by rule, on small histories built with the import
 * builder so every expected category is known; the traces-CSV importer
 * (rows, errors); the RMM-log importer; and the agreement with the
 * ground-truth labels of the real PyTorch traces in ../shared/traces
 * (skipped, with a message, when that folder is not beside the repo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "categories.h"
#include "import_build.h"
#include "import_csv.h"
#include "import_formats.h"
#include "model.h"

/* ---- a history builder over import_build.h -------------------------------- */

typedef struct hist {
    tdm_ibuild *b;
    uint64_t t;          /* ns; every mark or event advances it */
    uint64_t next_addr;
} hist;

static hist *hist_new(void)
{
    hist *h = calloc(1, sizeof *h);
    assert_non_null(h);
    assert_int_equal(tdm__ibuild_new("sim", "sim0", "test", &h->b), TDM_OK);
    h->t = 1000;
    h->next_addr = 0x10000;
    return h;
}

static void phase(hist *h, const char *name)
{
    assert_int_equal(tdm__ibuild_phase(h->b, h->t += 10, name), TDM_OK);
}

static void step(hist *h)
{
    assert_int_equal(tdm__ibuild_step(h->b, h->t += 10), TDM_OK);
}

/* Returns the allocation's address, its handle in the tests. */
static uint64_t alloc_tagged(hist *h, uint64_t size, uint8_t tag)
{
    uint64_t a = h->next_addr;
    h->next_addr += 0x10000;
    assert_int_equal(tdm__ibuild_alloc(h->b, h->t += 10, 0, a, size, 0, tag), TDM_OK);
    return a;
}

static uint64_t alloc(hist *h, uint64_t size) { return alloc_tagged(h, size, 0); }

static void release(hist *h, uint64_t addr, uint64_t size)
{
    assert_int_equal(tdm__ibuild_free(h->b, h->t += 10, 0, addr, size, 0), TDM_OK);
}

typedef struct result {
    tdm_snap *snap;
    tdm_model *m;
    uint8_t *cats;
} result;

static result infer(hist *h)
{
    result r = {0};
    assert_int_equal(tdm__ibuild_finish(h->b, &r.snap), TDM_OK);
    free(h);
    assert_int_equal(tdm__model_build(r.snap, &r.m), TDM_OK);
    assert_int_equal(tdm__categories_infer(r.m, &r.cats), TDM_OK);
    return r;
}

/* The category of the allocation made at `addr` (the newest one there). */
static int cat_of(const result *r, uint64_t addr)
{
    int found = -1;
    for (size_t i = 0; i < r->m->alloc_count; i++)
        if (r->m->allocs[i].addr == addr)
            found = r->cats[i];
    assert_true(found >= 0);
    return found;
}

static void done(result *r)
{
    free(r->cats);
    tdm__model_free(r->m);
    tdm__ibuild_snap_free(r->snap);
}

#define EXPECT(r, addr, CAT) assert_string_equal(                              \
    tdm_category_name((tdm_category)cat_of(&(r), addr)), tdm_category_name(CAT))

/* ---- the rules, one by one -------------------------------------------------- */

/* One training step as train_sim makes it, every rule exercised once. */
static void training_step_rules(void **state)
{
    (void)state;
    hist *h = hist_new();
    phase(h, "init");
    uint64_t weight = alloc(h, 4096);
    uint64_t init_tmp = alloc(h, 64);
    release(h, init_tmp, 64);
    step(h);
    phase(h, "data");
    uint64_t batch = alloc(h, 1024);
    phase(h, "forward");
    uint64_t act = alloc(h, 2048);
    uint64_t workspace = alloc(h, 512);
    release(h, workspace, 512);
    uint64_t loss = alloc(h, 8);
    phase(h, "backward");
    uint64_t grad = alloc(h, 4096);
    uint64_t grad_in = alloc(h, 2048);
    release(h, act, 2048);
    release(h, grad_in, 2048);
    phase(h, "optimizer");
    uint64_t adam = alloc(h, 4096);
    uint64_t update = alloc(h, 4096);
    release(h, update, 4096);
    phase(h, "zero_grad");
    release(h, grad, 4096);
    release(h, loss, 8);
    release(h, batch, 1024);
    phase(h, "end");
    result r = infer(h);
    EXPECT(r, weight, TDM_CATEGORY_PARAMETER);
    EXPECT(r, init_tmp, TDM_CATEGORY_TEMPORARY);
    EXPECT(r, batch, TDM_CATEGORY_INPUT);
    EXPECT(r, act, TDM_CATEGORY_ACTIVATION);
    EXPECT(r, workspace, TDM_CATEGORY_TEMPORARY);
    EXPECT(r, loss, TDM_CATEGORY_TEMPORARY); /* forward, freed in its step, not in backward */
    EXPECT(r, grad, TDM_CATEGORY_GRADIENT);
    EXPECT(r, grad_in, TDM_CATEGORY_TEMPORARY);
    EXPECT(r, adam, TDM_CATEGORY_OPTIMIZER_STATE);
    EXPECT(r, update, TDM_CATEGORY_TEMPORARY);
    done(&r);
}

/* An explicit tag wins over every inference, at alloc or afterwards. */
/* The marks PyTorch programs get (python/tidemark_torch.py): forward,
 * backward, optimizer, then data once the step returns.  The first batch
 * is made before the first step, like the model, and let go in the data
 * phase where the next one is made: input, not a temporary of init; a
 * buffer of init freed in a later forward stays temporary. */
static void first_batch_freed_in_data(void **state)
{
    (void)state;
    hist *h = hist_new();
    uint64_t weight = alloc(h, 1000), batch = alloc(h, 64), setup = alloc(h, 32);
    uint64_t next = 0;
    for (int s = 0; s < 3; s++) {
        step(h);
        phase(h, "forward");
        if (s == 1)
            release(h, setup, 32);
        phase(h, "backward");
        phase(h, "optimizer");
        phase(h, "data");
        release(h, s == 0 ? batch : next, 64);
        next = alloc(h, 64);
    }
    result r = infer(h);
    EXPECT(r, weight, TDM_CATEGORY_PARAMETER);
    EXPECT(r, batch, TDM_CATEGORY_INPUT);
    EXPECT(r, setup, TDM_CATEGORY_TEMPORARY);
    done(&r);
}

static void explicit_tag_wins(void **state)
{
    (void)state;
    hist *h = hist_new();
    phase(h, "init");
    uint64_t tagged = alloc_tagged(h, 100, TDM_CATEGORY_ACTIVATION);
    uint64_t later = alloc(h, 100);
    tdm_event tag = {.time_ns = h->t += 10, .addr = later, .device = 0,
                     .action = TDM_ACTION_TAG, .category = TDM_CATEGORY_INPUT};
    assert_int_equal(tdm__ibuild_event(h->b, &tag), TDM_OK);
    step(h);
    phase(h, "forward");
    uint64_t fwd = alloc_tagged(h, 100, TDM_CATEGORY_GRADIENT);
    phase(h, "backward");
    release(h, fwd, 100);
    result r = infer(h);
    EXPECT(r, tagged, TDM_CATEGORY_ACTIVATION);
    EXPECT(r, later, TDM_CATEGORY_INPUT);
    EXPECT(r, fwd, TDM_CATEGORY_GRADIENT); /* not activation */
    done(&r);
}

/* Without any phase or step mark nothing can be inferred. */
static void no_marks_is_unknown(void **state)
{
    (void)state;
    hist *h = hist_new();
    uint64_t a = alloc(h, 100);
    uint64_t b = alloc(h, 100);
    release(h, b, 100);
    result r = infer(h);
    EXPECT(r, a, TDM_CATEGORY_UNKNOWN);
    EXPECT(r, b, TDM_CATEGORY_UNKNOWN);
    done(&r);
}

/* Memory whose alloc the window never saw has no known birth phase. */
static void seeded_is_unknown(void **state)
{
    (void)state;
    hist *h = hist_new();
    step(h);
    phase(h, "backward");
    release(h, 0xdead0000, 4096); /* freed, never seen allocated */
    uint64_t g = alloc(h, 10);
    phase(h, "optimizer");
    result r = infer(h);
    EXPECT(r, 0xdead0000, TDM_CATEGORY_UNKNOWN);
    EXPECT(r, g, TDM_CATEGORY_GRADIENT); /* never freed: still alive into optimizer */
    done(&r);
}

/* "Outlives the steps": made before step 1, and still live when the last
 * step begins; memory of model building freed during the steps is not a
 * parameter. */
static void parameters_outlive_the_steps(void **state)
{
    (void)state;
    hist *h = hist_new();
    uint64_t prologue = alloc(h, 100); /* no phase yet, before step 1 */
    phase(h, "build_model");           /* a name the rules do not know */
    uint64_t built = alloc(h, 100);
    uint64_t staging = alloc(h, 100);
    uint64_t torn_down = alloc(h, 100);
    step(h);
    phase(h, "forward");
    release(h, staging, 100); /* freed in step 1 of 2 */
    step(h);
    phase(h, "forward");
    phase(h, "teardown");
    release(h, torn_down, 100); /* freed after the loop: still static */
    result r = infer(h);
    EXPECT(r, prologue, TDM_CATEGORY_PARAMETER);
    EXPECT(r, built, TDM_CATEGORY_PARAMETER);
    EXPECT(r, staging, TDM_CATEGORY_TEMPORARY);
    EXPECT(r, torn_down, TDM_CATEGORY_PARAMETER);
    done(&r);
}

/* A phase instance ends at every mark: the same phase name in the next
 * step is another instance. */
static void phase_instances(void **state)
{
    (void)state;
    hist *h = hist_new();
    phase(h, "init");
    step(h);
    phase(h, "data");
    uint64_t kept = alloc(h, 100);   /* freed by the next step's data */
    uint64_t within = alloc(h, 100); /* freed in the same data phase */
    release(h, within, 100);
    step(h);
    phase(h, "data");
    release(h, kept, 100);
    /* Gradient accumulation: forward, backward twice, then optimizer. */
    phase(h, "forward");
    uint64_t act1 = alloc(h, 100);
    phase(h, "backward");
    uint64_t grad = alloc(h, 100);
    release(h, act1, 100);
    phase(h, "forward");
    uint64_t act2 = alloc(h, 100);
    phase(h, "backward");
    release(h, act2, 100);
    phase(h, "optimizer");
    phase(h, "zero_grad");
    release(h, grad, 100);
    result r = infer(h);
    EXPECT(r, kept, TDM_CATEGORY_INPUT);
    EXPECT(r, within, TDM_CATEGORY_TEMPORARY);
    EXPECT(r, act1, TDM_CATEGORY_ACTIVATION);
    EXPECT(r, act2, TDM_CATEGORY_ACTIVATION);
    EXPECT(r, grad, TDM_CATEGORY_GRADIENT);
    done(&r);
}

/* Phase names are read by their words, in any case. */
static void phase_name_words(void **state)
{
    (void)state;
    hist *h = hist_new();
    phase(h, "Setup");
    uint64_t p = alloc(h, 100);
    step(h);
    phase(h, "load_batch");
    uint64_t in = alloc(h, 100);
    phase(h, "model.Forward");
    uint64_t act = alloc(h, 100);
    uint64_t kept = alloc(h, 100); /* forward, outlives the step: no rule */
    phase(h, "bwd");
    uint64_t g = alloc(h, 100);
    release(h, act, 100);
    phase(h, "opt_step");
    uint64_t st = alloc(h, 100);
    phase(h, "ZeroGrad");
    uint64_t zg = alloc(h, 100);
    release(h, g, 100);
    step(h);
    release(h, zg, 100); /* made in zero_grad, freed in the next step */
    release(h, in, 100);
    result r = infer(h);
    EXPECT(r, p, TDM_CATEGORY_PARAMETER);
    EXPECT(r, in, TDM_CATEGORY_INPUT);
    EXPECT(r, act, TDM_CATEGORY_ACTIVATION);
    EXPECT(r, kept, TDM_CATEGORY_UNKNOWN);
    EXPECT(r, g, TDM_CATEGORY_GRADIENT);
    EXPECT(r, st, TDM_CATEGORY_OPTIMIZER_STATE);
    EXPECT(r, zg, TDM_CATEGORY_UNKNOWN);
    done(&r);
}

/* ---- the traces CSV importer ------------------------------------------------ */

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/tdm_test_cat_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void trace_csv_rows(void **state)
{
    (void)state;
    char *path = write_temp("# comment\n"
                            "action,time_ns,id,size,category\n"
                            "phase,0,,,init\n"
                            "alloc,10,7,1000,PARAMETER\n"
                            "phase,20,,,step\n"
                            "phase,21,,,forward\n"
                            "alloc,30,8,600,ACTIVATION\n"
                            "phase,40,,,backward\r\n"
                            "free,50,8,600,\n");
    tdm_trace_alloc *ta = NULL;
    size_t n = 0;
    tdm_trace_csv_options o = {.tag_with_category = 0, .allocs = &ta, .alloc_count = &n};
    tdm_snap *s = NULL;
    char err[256];
    assert_int_equal(tdm__import_trace_csv(path, &o, &s, err, sizeof err), TDM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ta[0].id, 7);
    assert_int_equal(ta[0].truth, TDM_CATEGORY_PARAMETER);
    assert_int_equal(ta[0].free_ns, UINT64_MAX);
    assert_int_equal(ta[1].free_ns, 50);
    assert_true(ta[1].addr >= ta[0].addr + 1000);
    assert_int_equal(ta[0].addr % 512, 0);
    assert_int_equal(ta[1].addr % 512, 0);
    /* phases: "", init, forward, backward; step is a step mark */
    assert_int_equal(s->phase_count, 4);
    assert_string_equal(s->phase_names[3], "backward");
    size_t steps = 0, allocs = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        steps += s->events[i].action == TDM_ACTION_STEP;
        if (s->events[i].action == TDM_ACTION_ALLOC) {
            allocs++;
            assert_int_equal(s->events[i].category, 0); /* labels ignored */
        }
    }
    assert_int_equal(steps, 1);
    assert_int_equal(allocs, 2);
    /* The live allocation is in the final state, as its own segment. */
    assert_int_equal(s->segment_count, 1);
    assert_int_equal(s->blocks[0].requested_size, 1000);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    assert_int_equal(m->devices[0].peak_allocated, 1600);
    assert_int_equal(m->devices[0].anomalies, 0);
    tdm__model_free(m);
    tdm__ibuild_snap_free(s);
    free(ta);

    /* With tag_with_category the labels become tags. */
    o.allocs = NULL;
    o.tag_with_category = 1;
    assert_int_equal(tdm__import_trace_csv(path, &o, &s, err, sizeof err), TDM_OK);
    for (size_t i = 0; i < s->event_count; i++)
        if (s->events[i].action == TDM_ACTION_ALLOC)
            assert_int_not_equal(s->events[i].category, 0);
    tdm__ibuild_snap_free(s);
    unlink(path);
    free(path);
}

static void expect_trace_error(const char *text, const char *want)
{
    char *path = write_temp(text);
    tdm_snap *s = NULL;
    char err[256];
    assert_int_equal(tdm__import_trace_csv(path, NULL, &s, err, sizeof err),
                     TDM_FORMAT_ERROR);
    assert_null(s);
    if (!strstr(err, want))
        fail_msg("error '%s' does not mention '%s'", err, want);
    unlink(path);
    free(path);
}

static void trace_csv_errors(void **state)
{
    (void)state;
    const char *hdr = "action,time_ns,id,size,category\n";
    char buf[256];
    expect_trace_error("", "no header");
    expect_trace_error("action,time,id,size\n", "'time_ns'");
    snprintf(buf, sizeof buf, "%salloc,1,1,10,\nalloc,2,1,10,\n", hdr);
    expect_trace_error(buf, "line 3 (at byte 46): id 1 is allocated again");
    snprintf(buf, sizeof buf, "%sfree,1,9,10,\n", hdr);
    expect_trace_error(buf, "line 2 (at byte 32): free of id 9");
    snprintf(buf, sizeof buf, "%smalloc,1,1,10,\n", hdr);
    expect_trace_error(buf, "unknown action 'malloc'");
    snprintf(buf, sizeof buf, "%salloc,x,1,10,\n", hdr);
    expect_trace_error(buf, "time_ns 'x'");
    snprintf(buf, sizeof buf, "%salloc,1,1,-5,\n", hdr);
    expect_trace_error(buf, "size '-5'");
    snprintf(buf, sizeof buf, "%sphase,1,,,\n", hdr);
    expect_trace_error(buf, "phase row needs its name");
    tdm_snap *s = NULL;
    char err[64];
    assert_int_equal(tdm__import_trace_csv("/nonexistent/x.csv", NULL, &s, err, sizeof err),
                     TDM_IO_ERROR);

    /* A file cut inside its last line is truncated, not malformed; a last
     * line complete but for its newline still reads. */
    char cut_err[256];
    snprintf(buf, sizeof buf, "%salloc,1,1,10,\nalloc,2", hdr);
    char *path = write_temp(buf);
    assert_int_equal(tdm__import_trace_csv(path, NULL, &s, cut_err, sizeof cut_err),
                     TDM_TRUNCATED);
    assert_null(s);
    if (!strstr(cut_err, "line 3 (at byte 46), the last, ends without a newline: "))
        fail_msg("error '%s' does not say the last line is cut", cut_err);
    unlink(path);
    free(path);
    size_t events[2];
    for (int nl = 0; nl < 2; nl++) {
        snprintf(buf, sizeof buf, "%salloc,1,1,10,\nfree,2,1,10,%s", hdr, nl ? "\n" : "");
        path = write_temp(buf);
        assert_int_equal(tdm__import_trace_csv(path, NULL, &s, cut_err, sizeof cut_err),
                         TDM_OK);
        events[nl] = s->event_count;
        tdm__ibuild_snap_free(s);
        unlink(path);
        free(path);
    }
    assert_int_equal(events[0], events[1]);
}

/* ---- the RMM log importer ---------------------------------------------------- */

static void rmm_log(void **state)
{
    (void)state;
    char *path = write_temp("Thread,Time,Action,Pointer,Size,Stream\n"
                            "140,23:59:59.999000,allocate,0x7f0000000000,1024,0\n"
                            "140,23:59:59.999500,allocate,0x7f0000100000,4096,0x5a\n"
                            "140,00:00:00.000100,free,0x7f0000000000,1024,0\n"
                            "140,00:00:00.000200,allocate failure,(nil),99999,0\n");
    tdm_snap *s = NULL;
    char err[256];
    assert_int_equal(tdm__import_rmm_csv(path, &s, err, sizeof err), TDM_OK);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    assert_int_equal(m->device_count, 1);
    assert_int_equal(m->devices[0].peak_allocated, 5120);
    assert_int_equal(m->devices[0].end_allocated, 4096);
    assert_int_equal(m->devices[0].oom_events, 1);
    assert_int_equal(m->devices[0].anomalies, 0);
    /* midnight passed: the free is one day later, not earlier */
    uint64_t t_alloc = 0, t_free = 0, stream = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        if (s->events[i].action == TDM_ACTION_ALLOC && s->events[i].size == 1024)
            t_alloc = s->events[i].time_ns;
        if (s->events[i].action == TDM_ACTION_FREE_COMPLETED)
            t_free = s->events[i].time_ns;
        if (s->events[i].action == TDM_ACTION_ALLOC && s->events[i].size == 4096)
            stream = s->events[i].stream;
    }
    assert_int_equal(t_free - t_alloc, 1100000); /* 1.1 ms */
    assert_int_equal(stream, 0x5a);
    assert_int_equal(s->segment_count, 1);
    assert_int_equal(s->segments[0].address, 0x7f0000100000ull);
    tdm__model_free(m);
    tdm__ibuild_snap_free(s);
    unlink(path);
    free(path);

    path = write_temp("Thread,Time,Action,Pointer,Size,Stream\n"
                      "1,1634567890.123456,allocate,0x10,16,0\n"
                      "1,1634567890.5,resize,0x10,16,0\n");
    assert_int_equal(tdm__import_rmm_csv(path, &s, err, sizeof err), TDM_FORMAT_ERROR);
    assert_non_null(strstr(err, "line 3 (at byte 78): unknown Action 'resize'"));
    unlink(path);
    free(path);
    path = write_temp("Thread,Time,Action,Pointer,Size,Stream\n"
                      "1,1634567890.123456,allocate,0x10,16,0\n"
                      "1,1634567890.5,alloc");
    assert_int_equal(tdm__import_rmm_csv(path, &s, err, sizeof err), TDM_TRUNCATED);
    assert_non_null(strstr(err, "line 3 (at byte 78), the last, ends without a newline: "
                                "Pointer '' is not a hex address"));
    unlink(path);
    free(path);
    path = write_temp("a,b,c\n1,2,3\n");
    assert_int_equal(tdm__import_rmm_csv(path, &s, err, sizeof err), TDM_FORMAT_ERROR);
    assert_non_null(strstr(err, "not an RMM log"));
    unlink(path);
    free(path);
    path = write_temp("Thread,Time,Action,Pointer,Size,Stream\n1,12:00,allocate,0x10,16,0\n");
    assert_int_equal(tdm__import_rmm_csv(path, &s, err, sizeof err), TDM_FORMAT_ERROR);
    assert_non_null(strstr(err, "Time '12:00'"));
    unlink(path);
    free(path);
}

/* Sniffing picks the right importer; every prefix of a valid file either
 * imports or fails with a line number, never crashes or leaks. */
static void sniff_and_truncations(void **state)
{
    (void)state;
    const char *rmm = "Thread,Time,Action,Pointer,Size,Stream\n"
                      "1,10:00:00.000001,allocate,0x7f00,64,0\n"
                      "1,10:00:00.000002,free,0x7f00,64,0\n";
    const char *trace = "# c\naction,time_ns,id,size,category\nphase,0,,,init\n"
                        "alloc,5,1,64,PARAMETER\nfree,9,1,64,\n";
    assert_true(tdm__import_rmm_sniff((const unsigned char *)rmm, strlen(rmm)));
    assert_false(tdm__import_trace_sniff((const unsigned char *)rmm, strlen(rmm)));
    assert_true(tdm__import_trace_sniff((const unsigned char *)trace, strlen(trace)));
    assert_false(tdm__import_rmm_sniff((const unsigned char *)trace, strlen(trace)));
    assert_false(tdm__import_rmm_sniff((const unsigned char *)"Thread,Ti", 9));
    const tdm_import_format *f =
        tdm__import_format_detect((const unsigned char *)rmm, strlen(rmm));
    assert_non_null(f);
    assert_string_equal(f->name, "rmm");
    f = tdm__import_format_detect((const unsigned char *)trace, strlen(trace));
    assert_non_null(f);
    assert_string_equal(f->name, "trace");

    const char *inputs[] = {rmm, trace};
    for (int k = 0; k < 2; k++) {
        size_t len = strlen(inputs[k]);
        for (size_t cut = 0; cut <= len; cut++) {
            char *text = strndup(inputs[k], cut);
            char *path = write_temp(text);
            tdm_snap *s = NULL;
            char err[256] = "";
            tdm_status st = k == 0 ? tdm__import_rmm_csv(path, &s, err, sizeof err)
                                   : tdm__import_trace(path, &s, err, sizeof err);
            if (st == TDM_OK) {
                assert_non_null(s);
                tdm_model *m = NULL;
                assert_int_equal(tdm__model_build(s, &m), TDM_OK);
                tdm__model_free(m);
                tdm__ibuild_snap_free(s);
            } else {
                /* Cut inside a line: truncated; at a line's end: what the
                 * lines left say. */
                int mid_line = cut > 0 && text[cut - 1] != '\n';
                assert_int_equal(st, mid_line ? TDM_TRUNCATED : TDM_FORMAT_ERROR);
                assert_null(s);
                assert_non_null(strstr(err, "line "));
                if (mid_line)
                    assert_non_null(strstr(err, "ends without a newline"));
            }
            unlink(path);
            free(path);
            free(text);
        }
    }
}

/* ---- agreement with real PyTorch traces ---------------------------------- */

/* The agreement of the inferred categories with the trace's labels,
 * weighted by bytes × lifetime; also the worst category (of those holding
 * at least 1% of the weight). */
static void score_trace(const char *name, double *overall, double *worst)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/../../../shared/traces/%s", TDM_TEST_DATA_DIR, name);
    tdm_trace_alloc *ta = NULL;
    size_t n = 0;
    tdm_trace_csv_options o = {.allocs = &ta, .alloc_count = &n};
    tdm_snap *s = NULL;
    char err[256];
    assert_int_equal(tdm__import_trace_csv(path, &o, &s, err, sizeof err), TDM_OK);
    tdm_model *m = NULL;
    uint8_t *cats = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    assert_int_equal(m->alloc_count, n);
    uint64_t end = s->events[s->event_count - 1].time_ns;
    double w_all[TDM_CATEGORY_COUNT_] = {0}, w_ok[TDM_CATEGORY_COUNT_] = {0}, total = 0;
    for (size_t i = 0; i < n; i++) {
        /* model allocs are in file order for a complete history */
        assert_int_equal(m->allocs[i].addr, ta[i].addr);
        uint64_t until = ta[i].free_ns == UINT64_MAX ? end : ta[i].free_ns;
        double w = (double)ta[i].size * (double)(until - ta[i].alloc_ns);
        w_all[ta[i].truth] += w;
        total += w;
        if (cats[i] == ta[i].truth)
            w_ok[ta[i].truth] += w;
    }
    double ok = 0;
    *worst = 100;
    for (int c = 0; c < TDM_CATEGORY_COUNT_; c++) {
        ok += w_ok[c];
        if (w_all[c] >= total / 100 && 100 * w_ok[c] / w_all[c] < *worst)
            *worst = 100 * w_ok[c] / w_all[c];
    }
    *overall = 100 * ok / total;
    printf("  %s: %.2f%% overall, worst large category %.2f%%\n", name, *overall, *worst);
    free(cats);
    free(ta);
    tdm__model_free(m);
    tdm__ibuild_snap_free(s);
}

static void shared_traces_agree(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/../../../shared/traces/mlp.csv", TDM_TEST_DATA_DIR);
    if (access(dir, R_OK) != 0) {
        printf("  SKIPPED: %s not found (CI keeps shared/ beside the repo)\n", dir);
        skip();
    }
    static const char *const traces[] = {"mlp.csv", "transformer.csv"};
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        double overall, worst;
        score_trace(traces[i], &overall, &worst);
        assert_true(overall >= 90.0);
        assert_true(worst >= 90.0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(training_step_rules),
        cmocka_unit_test(first_batch_freed_in_data),
        cmocka_unit_test(explicit_tag_wins),
        cmocka_unit_test(no_marks_is_unknown),
        cmocka_unit_test(seeded_is_unknown),
        cmocka_unit_test(parameters_outlive_the_steps),
        cmocka_unit_test(phase_instances),
        cmocka_unit_test(phase_name_words),
        cmocka_unit_test(trace_csv_rows),
        cmocka_unit_test(trace_csv_errors),
        cmocka_unit_test(rmm_log),
        cmocka_unit_test(sniff_and_truncations),
        cmocka_unit_test(shared_traces_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
