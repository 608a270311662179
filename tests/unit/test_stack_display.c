/* tests/unit/test_stack_display.c: stacks as every command shows them
 * (model/names.h, model/stack_display.h): C++ names demangled, clone
 * suffixes dropped, wrappers dropped from the top of stacks (tidemark's,
 * vendors', the program's own, hide= and --hide), stacks that then read
 * the same made one, --focus, --raw-names, --keep-wrappers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model.h"
#include "names.h"
#include "sites.h"
#include "stack_display.h"

static void test_clone_suffixes(void **state)
{
    (void)state;
    assert_int_equal(tdm__name_clone_suffix_start("device_alloc.isra.0"), 12);
    assert_int_equal(tdm__name_clone_suffix_start("f.constprop.0.isra.0"), 1);
    assert_int_equal(tdm__name_clone_suffix_start("f.part.3.cold"), 1);
    assert_int_equal(tdm__name_clone_suffix_start("f.cold"), 1);
    assert_int_equal(tdm__name_clone_suffix_start("f.lto_priv.0"), 1);
    /* not clone suffixes: left alone */
    assert_int_equal(tdm__name_clone_suffix_start("version.2"), 9);
    assert_int_equal(tdm__name_clone_suffix_start("a.b"), 3);
    assert_int_equal(tdm__name_clone_suffix_start("isra.0"), 6);
    assert_int_equal(tdm__name_clone_suffix_start(".isra.0"), 7);
}

static void expect_display(const char *raw, const char *want)
{
    int oom;
    char *got = tdm__name_for_display(raw, &oom);
    assert_false(oom);
    if (!want) {
        assert_null(got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_display_names(void **state)
{
    (void)state;
    expect_display("main", NULL);
    expect_display("device_alloc.isra.0", "device_alloc");
    expect_display("_ZN2ns10make_blockIfEEPvm", "void* ns::make_block<float>(unsigned long)");
    expect_display("_ZN2ns10make_blockIfEEPvm.constprop.0.isra.0",
                   "void* ns::make_block<float>(unsigned long)");
    expect_display("_ZN5Model7forwardEv.cold", "Model::forward()");
    /* "_Z" that is no C++ name: kept, suffix dropped all the same */
    expect_display("_Zebra", NULL);
    expect_display("_Zebra.part.0", "_Zebra");
}

/* ---- a snapshot: allocations through a wrapper ------------------------- */

typedef struct fixture {
    tdm_snap s;
    tdm_snap_frame frames[16];
    tdm_snap_stack stacks[8];
    uint32_t lists[8][6];
    tdm_event ev[16];
    tdm_snap_device dev;
} fixture;

static void frame(fixture *f, uint32_t i, const char *fn, unsigned line)
{
    f->frames[i] = (tdm_snap_frame){.pc = 0x1000 + i * 16, .function = fn,
                                    .file = "/src/app.cc", .line = line,
                                    .module = "/bin/app"};
}

static void stack(fixture *f, uint32_t id, uint32_t depth, const uint32_t *frames)
{
    memcpy(f->lists[id], frames, depth * sizeof *frames);
    f->stacks[id] = (tdm_snap_stack){depth, f->lists[id]};
}

static void alloc_ev(fixture *f, uint64_t addr, uint64_t size, uint32_t stack_id)
{
    size_t i = f->s.event_count++;
    f->ev[i] = (tdm_event){.time_ns = 1000 + i, .addr = addr, .size = size,
                           .requested = size, .stack_id = stack_id, .device = 0,
                           .action = TDM_ACTION_ALLOC};
}

/* Stacks, innermost first:
 *   1: tdm_malloc, alloc_buf.isra.0, ns::Layer::backward()   (mangled)
 *   2: tdm_malloc, alloc_buf,        init_params
 *   3: tdm_malloc, alloc_buf.isra.0 (another pc), ns::Layer::backward()
 *   4: cudaMalloc, alloc_buf, init_params (line 20)
 * 1 and 3 read the same once the clone suffix is gone. */
static fixture *fixture_new(const char *config)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->s.header.config = config;
    f->s.header.alloc_mode = "passthrough";
    f->dev = (tdm_snap_device){.index = 0, .vendor = "sim", .name = "sim0"};
    f->s.devices = &f->dev;
    f->s.device_count = 1;
    frame(f, 0, "tdm_malloc", 1);
    frame(f, 1, "alloc_buf.isra.0", 10);
    frame(f, 2, "_ZN2ns5Layer8backwardEv", 30);
    frame(f, 3, "alloc_buf", 10);
    frame(f, 4, "init_params", 20);
    frame(f, 5, "alloc_buf.isra.0", 10);
    frame(f, 6, "cudaMalloc", 0);
    frame(f, 7, "init_params", 21);
    f->s.frames = f->frames;
    f->s.frame_count = 8;
    stack(f, 1, 3, (uint32_t[]){0, 1, 2});
    stack(f, 2, 3, (uint32_t[]){0, 3, 4});
    stack(f, 3, 3, (uint32_t[]){0, 5, 2});
    stack(f, 4, 3, (uint32_t[]){6, 3, 7});
    f->s.stacks = f->stacks;
    f->s.stack_count = 5;
    f->s.events = f->ev;
    alloc_ev(f, 0x100, 1000, 1);
    alloc_ev(f, 0x200, 2000, 2);
    alloc_ev(f, 0x300, 4000, 3);
    alloc_ev(f, 0x400, 8000, 4);
    f->s.complete = 1;
    return f;
}

static void configure(int raw, int keep, const char *hide, const char *focus)
{
    const char *h[1] = {hide}, *fo[1] = {focus};
    tdm_stack_display_options o = {.raw_names = raw, .keep_wrappers = keep, .hide = h,
                                   .hide_count = hide ? 1 : 0, .focus = fo,
                                   .focus_count = focus ? 1 : 0};
    char err[200];
    assert_int_equal(tdm__stack_display_configure(&o, err, sizeof err), 0);
}

static const char *top_name(const fixture *f, uint32_t stack_id)
{
    const tdm_snap_stack *st = &f->s.stacks[stack_id];
    assert_true(st->depth > 0);
    return f->s.frames[st->frames[0]].function;
}

static fixture *prepared(const char *config)
{
    fixture *f = fixture_new(config);
    assert_int_equal(tdm__stack_display_apply(&f->s), TDM_OK);
    return f;
}

static void release(fixture *f)
{
    tdm__stack_display_forget(&f->s);
    free(f);
}

static void test_wrapper_dropped_and_names_shown(void **state)
{
    (void)state;
    configure(0, 0, NULL, NULL);
    fixture *f = prepared("");
    /* the site names the caller, demangled */
    assert_string_equal(top_name(f, 1), "ns::Layer::backward()");
    assert_string_equal(top_name(f, 2), "init_params");
    assert_string_equal(top_name(f, 4), "init_params"); /* cudaMalloc and wrapper gone */
    assert_int_equal(f->stacks[1].depth, 1);
    /* stack 3 reads as stack 1: its event now names stack 1 */
    assert_int_equal(f->ev[2].stack_id, 1);
    assert_int_equal(f->ev[0].stack_id, 1);
    assert_int_equal(f->ev[1].stack_id, 2);
    /* so they are one site */
    tdm_model *m;
    assert_int_equal(tdm__model_build(&f->s, &m), TDM_OK);
    tdm_model_site *sites;
    size_t n;
    assert_int_equal(tdm__model_sites_at(m, 0, 3, &sites, &n), TDM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(sites[0].stack_id, 4);
    assert_int_equal(sites[1].stack_id, 1);
    assert_int_equal(sites[1].live_bytes, 5000);
    assert_int_equal(sites[1].live_count, 2);
    free(sites);
    tdm__model_free(m);
    release(f);
}

static void test_raw_names_keep_the_file_names(void **state)
{
    (void)state;
    configure(1, 0, NULL, NULL);
    fixture *f = prepared("");
    assert_string_equal(top_name(f, 1), "_ZN2ns5Layer8backwardEv");
    /* the wrapper is found by its plain name all the same */
    assert_string_equal(top_name(f, 2), "init_params");
    /* raw: alloc_buf.isra.0 and alloc_buf stay apart, yet both hidden, so
     * stacks 1 and 3 still read the same */
    assert_int_equal(f->ev[2].stack_id, 1);
    release(f);
}

static void test_keep_wrappers(void **state)
{
    (void)state;
    configure(0, 1, NULL, NULL);
    fixture *f = prepared("");
    assert_string_equal(top_name(f, 1), "alloc_buf");
    assert_string_equal(top_name(f, 4), "cudaMalloc");
    assert_int_equal(f->ev[2].stack_id, 1); /* clones still one function */
    release(f);
}

static void test_single_caller_is_no_wrapper(void **state)
{
    (void)state;
    configure(0, 0, NULL, NULL);
    fixture *f = fixture_new("");
    f->s.event_count = 1; /* only stack 1 allocates */
    assert_int_equal(tdm__stack_display_apply(&f->s), TDM_OK);
    assert_string_equal(top_name(f, 1), "alloc_buf");
    release(f);
}

static void test_hide_from_config_and_option(void **state)
{
    (void)state;
    configure(0, 1, NULL, NULL);
    fixture *f = prepared("dump=x.tdm,hide=^alloc_,max_entries=100");
    assert_string_equal(top_name(f, 2), "init_params");
    assert_string_equal(top_name(f, 4), "cudaMalloc"); /* keep-wrappers: not hidden */
    release(f);
    configure(0, 1, "^(alloc_buf|cudaMalloc)$", NULL);
    f = prepared("");
    assert_string_equal(top_name(f, 4), "init_params");
    release(f);
    /* a stack of nothing but hidden frames keeps them */
    configure(0, 1, ".*", NULL);
    f = prepared("");
    assert_string_equal(top_name(f, 4), "cudaMalloc");
    assert_string_equal(top_name(f, 2), "alloc_buf");
    release(f);
    char **pats;
    assert_int_equal(tdm__stack_display_conf_hides("hide=a,b,dump=x, hide = [c,d] ,hid=e", &pats), 2);
    assert_string_equal(pats[0], "a");
    assert_string_equal(pats[1], "[c,d]");
    free(pats[0]);
    free(pats[1]);
    free(pats);
}

static void test_focus_lists_matching_sites_only(void **state)
{
    (void)state;
    configure(0, 0, NULL, "backward");
    fixture *f = prepared("");
    assert_true(tdm__stack_display_focused(&f->s, 1));
    assert_false(tdm__stack_display_focused(&f->s, 2));
    tdm_model *m;
    assert_int_equal(tdm__model_build(&f->s, &m), TDM_OK);
    assert_int_equal(m->devices[0].peak_allocated, 15000); /* totals: the whole program */
    tdm_model_site *sites;
    size_t n;
    assert_int_equal(tdm__model_sites_at(m, 0, 3, &sites, &n), TDM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(sites[0].stack_id, 1);
    free(sites);
    tdm__model_free(m);
    release(f);
    char err[200];
    const char *bad[] = {"a("};
    tdm_stack_display_options o = {.hide = bad, .hide_count = 1};
    assert_int_equal(tdm__stack_display_configure(&o, err, sizeof err), -1);
    assert_non_null(strstr(err, "--hide 'a('"));
    configure(0, 0, NULL, NULL);
}

/* Python frames (format 1.2): a site is shown, and grouped, from the
 * innermost user Python frame, by its Python frames only; their names
 * are left as they are. */
static void test_python_sites(void **state)
{
    (void)state;
    configure(0, 0, NULL, NULL);
    fixture *f = fixture_new("");
    frame(f, 8, "Cache.part", 5);
    f->frames[8].file = "/home/me/model.py";
    f->frames[8].kind = TDM_FRAME_PYTHON;
    frame(f, 9, "linear", 2200);
    f->frames[9].file = "/usr/lib/python3/dist-packages/torch/nn/functional.py";
    f->frames[9].kind = TDM_FRAME_PYTHON;
    frame(f, 10, "<module>", 40);
    f->frames[10].file = "/home/me/train.py";
    f->frames[10].kind = TDM_FRAME_PYTHON;
    frame(f, 11, "_PyEval_EvalFrameDefault", 0);
    f->s.frame_count = 12;
    /* two stacks through different C++ code, the same Python frames */
    stack(f, 1, 6, (uint32_t[]){0, 1, 9, 8, 11, 10});
    stack(f, 3, 5, (uint32_t[]){0, 4, 9, 8, 10});
    assert_int_equal(tdm__stack_display_apply(&f->s), TDM_OK);
    uint32_t first = tdm__site_first_frame(&f->s, 1);
    const tdm_snap_stack *st = &f->s.stacks[1];
    assert_string_equal(f->s.frames[st->frames[first]].function, "Cache.part");
    uint32_t next = tdm__site_next_frame(&f->s, 1, first);
    assert_string_equal(f->s.frames[st->frames[next]].function, "<module>"); /* no _PyEval */
    assert_int_equal(tdm__stack_display_site(&f->s, 3), 1);
    assert_int_equal(tdm__stack_display_site(&f->s, 2), 2);
    tdm_model *m;
    assert_int_equal(tdm__model_build(&f->s, &m), TDM_OK);
    tdm_model_site *sites;
    size_t n;
    assert_int_equal(tdm__model_sites_at(m, 0, 3, &sites, &n), TDM_OK);
    assert_int_equal(n, 3); /* stacks 1 and 3 one site; 2; 4 */
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (sites[i].stack_id == 1) {
            assert_int_equal(sites[i].live_bytes, 5000);
            found = 1;
        }
    assert_true(found);
    char *key = tdm__site_key(&f->s, 1);
    assert_string_equal(key, "Cache.part@model.py:5;<module>@train.py:40;");
    free(key);
    free(sites);
    tdm__model_free(m);
    release(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_suffixes),
        cmocka_unit_test(test_display_names),
        cmocka_unit_test(test_wrapper_dropped_and_names_shown),
        cmocka_unit_test(test_raw_names_keep_the_file_names),
        cmocka_unit_test(test_keep_wrappers),
        cmocka_unit_test(test_single_caller_is_no_wrapper),
        cmocka_unit_test(test_hide_from_config_and_option),
        cmocka_unit_test(test_focus_lists_matching_sites_only),
        cmocka_unit_test(test_python_sites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
