/* tests/unit/test_gate.c: memory gates (viewer-export/gate/gate.h) on snapshots
 * built by hand (gate_fixtures.h), so every figure is known: each gate
 * passing and failing at its limit, per device and with --device, growth
 * over a baseline (including a device the baseline lacks), figures that
 * cannot be measured, nothing measured, files that could not be read;
 * site keys that match across files whatever the stack ids and addresses;
 * option parsing.  The reports are test_gate_report.c's. */
#include "gate_fixtures.h"

/* ---- gates -------------------------------------------------------------- */

static void test_max_peak_each_device(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    size_t peak = standard(t, 1, 1);
    load(&l, t, "a.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK;
    o.max_peak = 1450; /* equal passes */
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.count, 2);
    const tdm_gate_result *d0 = find(&rep, 0, TDM_GATE_MAX_PEAK, 0);
    const tdm_gate_result *d1 = find(&rep, 0, TDM_GATE_MAX_PEAK, 1);
    assert_int_equal(d0->status, TDM_GATE_PASS);
    assert_int_equal(d0->value, 1450);
    assert_int_equal(d0->at_seq, (int64_t)peak);
    assert_int_equal(d1->status, TDM_GATE_FAIL);
    assert_int_equal(d1->value, 5000);
    assert_int_equal(rep.passed, 1);
    assert_int_equal(rep.failed, 1);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_GATE_FAILED);
    tdm__gate_report_free(&rep);

    o.max_peak = 1449; /* one byte less fails device 0 too */
    o.device = 0;      /* ... and --device 0 leaves device 1 out */
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.count, 1);
    assert_int_equal(rep.results[0].device, 0);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    assert_int_equal(rep.results[0].limit, 1449);
    tdm__gate_report_free(&rep);

    o.max_peak = 5000;
    o.device = -1;
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(rep.failed, 0);
    assert_int_equal(rep.passed, 2);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_max_leak_and_reserved(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    standard(t, 1, 1);
    load(&l, t, "a.tdm");
    const tdm_model_device *m0 = &l.in.model->devices[0];

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_LEAK | 1u << TDM_GATE_MAX_RESERVED;
    o.max_leak = 999;
    o.max_reserved = (uint64_t)m0->peak_reserved;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    const tdm_gate_result *leak0 = find(&rep, 0, TDM_GATE_MAX_LEAK, 0);
    const tdm_gate_result *leak1 = find(&rep, 0, TDM_GATE_MAX_LEAK, 1);
    assert_int_equal(leak0->status, TDM_GATE_FAIL);
    assert_int_equal(leak0->value, 1000);
    assert_true(leak0->at_end);
    assert_int_equal(leak1->status, TDM_GATE_PASS);
    assert_int_equal(leak1->value, 0);
    const tdm_gate_result *res0 = find(&rep, 0, TDM_GATE_MAX_RESERVED, 0);
    assert_int_equal(res0->status, TDM_GATE_PASS);
    /* 1000 + 400 + 50 B in 512 B segments: 1024 + 512 + 512 */
    assert_int_equal(res0->value, 2048);
    assert_int_equal(tdm__model_sample_at(m0, res0->at_seq)->reserved, 2048);
    const tdm_gate_result *res1 = find(&rep, 0, TDM_GATE_MAX_RESERVED, 1);
    assert_int_equal(res1->status, TDM_GATE_FAIL); /* 5120 > 2048 */
    assert_int_equal(res1->value, 5120);
    assert_int_equal(rep.failed, 2);
    tdm__gate_report_free(&rep);
    unload(&l);
}

static void test_growth_over_baseline(void **state)
{
    (void)state;
    loaded base, cur;
    tsnap *b = tsnap_new(0x400000, 0);
    standard(b, 1, 0); /* the baseline never used device 1 */
    load(&base, b, "base.tdm");
    tsnap *c = tsnap_new(0x7f0000, 1);
    standard(c, 2, 1); /* device 0 peak 2900: +100% */
    load(&cur, c, "cur.tdm");

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_GROWTH;
    o.baseline = "base.tdm";
    o.max_growth = 100.0; /* exactly +100%: passes */
    o.device = 0;
    tdm_gate_report rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.count, 1);
    assert_int_equal(rep.results[0].status, TDM_GATE_PASS);
    assert_int_equal(rep.results[0].value, 2900);
    assert_int_equal(rep.results[0].limit, 1450);
    assert_true(fabs(rep.results[0].growth - 100.0) < 1e-9);
    tdm__gate_report_free(&rep);

    o.max_growth = 99.9;
    rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    char head[256];
    tdm__gate_headline(head, sizeof head, &rep.results[0]);
    assert_non_null(strstr(head, "+100.0%"));
    assert_non_null(strstr(head, "limit +99.9%"));
    tdm__gate_report_free(&rep);

    /* Device 1 is new memory: infinite growth fails any limit. */
    o.device = 1;
    o.max_growth = 1e9;
    rep = eval(&o, &cur.in, 1, &base.in);
    assert_int_equal(rep.results[0].status, TDM_GATE_FAIL);
    assert_true(isinf(rep.results[0].growth));
    tdm__gate_report_free(&rep);

    /* A baseline that could not be read cannot pass or fail anything. */
    tdm_input broken = {.path = "gone.tdm", .error = "missing"};
    rep = eval(&o, &cur.in, 1, &broken);
    assert_int_equal(rep.results[0].status, TDM_GATE_ERROR);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_BAD_INPUT);
    tdm__gate_report_free(&rep);
    unload(&base);
    unload(&cur);
}

static void test_missing_device_and_unreadable_file(void **state)
{
    (void)state;
    loaded a, b;
    tsnap *ta = tsnap_new(0x400000, 0);
    standard(ta, 1, 1);
    load(&a, ta, "two.tdm");
    tsnap *tb = tsnap_new(0x400000, 0);
    add_device(tb, 0);
    alloc_pt(tb, 0, 0x1000, 10, 1);
    load(&b, tb, "one.tdm");
    tdm_input in[3] = {a.in, b.in, {.path = "bad.tdm", .error = "corrupt"}};

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = o.max_leak = 1u << 20;
    o.device = 1; /* only two.tdm has it: one.tdm is an error, not a skip */
    tdm_gate_report rep = eval(&o, in, 3, NULL);
    assert_int_equal(rep.count, 6);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_PASS);
    assert_int_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_ERROR);
    assert_string_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, 1)->note, "this file has no such device");
    assert_int_equal(find(&rep, 2, TDM_GATE_MAX_PEAK, 1)->status, TDM_GATE_ERROR);
    assert_int_equal(rep.skipped, 0);
    assert_int_equal(rep.errors, 4);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_BAD_INPUT);
    tdm__gate_report_free(&rep);
    /* Said as input.h says it (one line on stderr), exit 2; the file that
     * has the device and the unreadable one pass this check. */
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 3), TDM_EXIT_BAD_INPUT);
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 1), TDM_EXIT_OK);
    o.device = -1;
    assert_int_equal(tdm__gate_check_devices("test", &o, in, 3), TDM_EXIT_OK);

    o.device = 7; /* no file has it: a mistake, not a pass */
    rep = eval(&o, in, 2, NULL);
    assert_int_equal(rep.errors, 4);
    assert_int_equal(rep.passed + rep.skipped, 0);
    assert_string_equal(rep.results[0].note, "this file has no such device");
    tdm__gate_report_free(&rep);
    unload(&a);
    unload(&b);
}

/* A file that records no device memory used measures nothing: SKIP, and
 * when nothing at all was measured, exit 5 unless --allow-empty. */
static void test_nothing_measured(void **state)
{
    (void)state;
    loaded used, empty, none;
    tsnap *tu = tsnap_new(0x400000, 0);
    add_device(tu, 0);
    alloc_pt(tu, 0, 0x1000, 10, 1);
    load(&used, tu, "used.tdm");
    tsnap *te = tsnap_new(0x400000, 0);
    add_device(te, 0); /* a device, never allocated on */
    load(&empty, te, "empty.tdm");
    tsnap *tn = tsnap_new(0x400000, 0); /* no device at all */
    load(&none, tn, "none.tdm");
    assert_false(tdm__gate_input_empty(&used.in));
    assert_true(tdm__gate_input_empty(&empty.in));
    assert_true(tdm__gate_input_empty(&none.in));

    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = o.max_leak = 1u << 20;
    tdm_input two[2] = {empty.in, none.in};
    tdm_gate_report rep = eval(&o, two, 2, NULL);
    assert_int_equal(rep.count, 4);
    assert_int_equal(rep.skipped, 4);
    assert_string_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, -1)->note,
                        "no device memory used in this file");
    assert_string_equal(find(&rep, 1, TDM_GATE_MAX_PEAK, -1)->note, "this file has no devices");
    assert_true(tdm__gate_nothing_measured(&rep));
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_NOTHING_MEASURED);
    o.allow_empty = 1;
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    o.allow_empty = 0;
    tdm__gate_report_free(&rep);

    /* No file at all measures nothing too. */
    rep = eval(&o, two, 0, NULL);
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_NOTHING_MEASURED);
    tdm__gate_report_free(&rep);

    /* One file measured is enough. */
    tdm_input three[3] = {empty.in, used.in, none.in};
    rep = eval(&o, three, 3, NULL);
    assert_int_equal(rep.passed, 2);
    assert_false(tdm__gate_nothing_measured(&rep));
    assert_int_equal(tdm__gate_exit_code(&o, &rep), TDM_EXIT_OK);
    tdm__gate_report_free(&rep);

    /* --device 0 on the empty file: it has the device, used none of it. */
    o.device = 0;
    rep = eval(&o, &empty.in, 1, NULL);
    assert_int_equal(rep.skipped, 2);
    tdm__gate_report_free(&rep);

    /* Ranking: 4 > 3 > 2 > 5 > 0. */
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_NOTHING_MEASURED, TDM_EXIT_OK),
                     TDM_EXIT_NOTHING_MEASURED);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_NOTHING_MEASURED, TDM_EXIT_BAD_INPUT),
                     TDM_EXIT_BAD_INPUT);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_GATE_FAILED, TDM_EXIT_NOTHING_MEASURED),
                     TDM_EXIT_GATE_FAILED);
    assert_int_equal(tdm__gate_exit_worse(TDM_EXIT_GATE_FAILED, TDM_EXIT_TOOL_ERROR),
                     TDM_EXIT_TOOL_ERROR);
    unload(&used);
    unload(&empty);
    unload(&none);
}

static void test_state_only_snapshot(void **state)
{
    (void)state;
    loaded l;
    tsnap *t = tsnap_new(0x400000, 0);
    add_device(t, 0);
    t->s.header.record_mode = TDM_RECORD_STATE;
    state_block(t, 0, 0x10000, 700, 1);
    t->stats[0].device = 0;
    t->stats[0].stats.allocated_bytes.peak = 9000;
    t->stats[0].stats.reserved_bytes.peak = 12000;
    t->s.stats_count = 1;
    load(&l, t, "state.tdm");
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    o.enabled = 1u << TDM_GATE_MAX_PEAK | 1u << TDM_GATE_MAX_RESERVED | 1u << TDM_GATE_MAX_LEAK;
    o.max_peak = 8999;
    o.max_reserved = 12000;
    o.max_leak = 700;
    tdm_gate_report rep = eval(&o, &l.in, 1, NULL);
    const tdm_gate_result *p = find(&rep, 0, TDM_GATE_MAX_PEAK, 0);
    assert_int_equal(p->status, TDM_GATE_FAIL);
    assert_int_equal(p->value, 9000);
    assert_true(p->from_stats);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_RESERVED, 0)->value, 12000);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_LEAK, 0)->value, 700);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_LEAK, 0)->status, TDM_GATE_PASS);
    tdm__gate_report_free(&rep);

    /* Without stats there is no reserved figure: an error, not a pass. */
    t->s.stats_count = 0;
    tdm__model_free(l.in.model);
    assert_int_equal(tdm__model_build(&t->s, &l.in.model), TDM_OK);
    rep = eval(&o, &l.in, 1, NULL);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_RESERVED, 0)->status, TDM_GATE_ERROR);
    assert_int_equal(find(&rep, 0, TDM_GATE_MAX_PEAK, 0)->value, 700); /* the final state */
    tdm__gate_report_free(&rep);
    unload(&l);
}

/* ---- sites -------------------------------------------------------------- */

static void test_site_keys_match_across_files(void **state)
{
    (void)state;
    tsnap *a = tsnap_new(0x400000, 0), *b = tsnap_new(0x7f1234560000ull, 1);
    /* Same frames under other stack ids, load addresses and build paths. */
    for (uint32_t k = 1; k <= 3; k++) {
        char *ka = tdm__site_key(&a->s, k), *kb = tdm__site_key(&b->s, 4 - k);
        assert_non_null(ka);
        assert_non_null(kb);
        assert_string_equal(ka, kb);
        assert_null(strstr(ka, "tdm_malloc"));
        assert_non_null(strstr(ka, fn_names[k - 1]));
        char *other = tdm__site_key(&a->s, k == 3 ? 1 : k + 1);
        assert_string_not_equal(ka, other);
        free(ka);
        free(kb);
        free(other);
    }
    /* A different line is a different site. */
    char *k1 = tdm__site_key(&a->s, 1);
    a->frames[4].line = 999;
    char *k2 = tdm__site_key(&a->s, 1);
    assert_string_not_equal(k1, k2);
    free(k1);
    free(k2);
    /* No stack: the empty key, the same in both. */
    char *e = tdm__site_key(&a->s, 0);
    assert_string_equal(e, "");
    free(e);
    free(a);
    free(b);
}

/* ---- options ------------------------------------------------------------ */

static void test_options(void **state)
{
    (void)state;
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_PEAK, "12GiB", &o), 1);
    assert_int_equal(o.max_peak, 12ull << 30);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_LEAK, "512K", &o), 1);
    assert_int_equal(o.max_leak, 512u << 10);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_RESERVED, "lots", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_RESERVED, "-1", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "2.5%", &o), 1);
    assert_true(fabs(o.max_growth - 2.5) < 1e-12);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "-5", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_MAX_GROWTH, "ten", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_DEVICE, "x", &o), -1);
    assert_int_equal(tdm__gate_option("t", 'z', NULL, &o), 0);
    /* --max-growth needs --baseline, and the other way round. */
    assert_int_equal(tdm__gate_options_check("t", &o), -1);
    assert_int_equal(tdm__gate_option("t", TDM_GATE_OPT_BASELINE, "b.tdm", &o), 1);
    assert_int_equal(tdm__gate_options_check("t", &o), 0);
    tdm_gate_options p;
    tdm__gate_options_init(&p);
    p.baseline = "b.tdm";
    assert_int_equal(tdm__gate_options_check("t", &p), -1);
    assert_string_equal(tdm__gate_kind_name(TDM_GATE_MAX_RESERVED), "max-reserved");
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_peak_each_device),
        cmocka_unit_test(test_max_leak_and_reserved),
        cmocka_unit_test(test_growth_over_baseline),
        cmocka_unit_test(test_missing_device_and_unreadable_file),
        cmocka_unit_test(test_state_only_snapshot),
        cmocka_unit_test(test_nothing_measured),
        cmocka_unit_test(test_site_keys_match_across_files),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
