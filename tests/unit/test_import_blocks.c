/* tests/unit/test_import_blocks.c: a PyTorch memory history imported (the
 * pickles torch.cuda.memory._snapshot() writes, built here with the
 * pickler) gets each tensor's block, so tidemark's peak allocated is
 * torch.cuda.max_memory_allocated(): requests rounded to 512 B, a block
 * kept whole when splitting would leave too little (large pool: 1 MiB or
 * less; small pool and expandable segments: under 512 B), the free block
 * ending at the next block still held, roundup_power2_divisions, sizes of
 * frees whose alloc the history lacks; and the trace exported again says
 * the bytes asked for, as PyTorch's does.  The first case is what real
 * torch 2.14.1 did on the simulated H100 (allocated_bytes 15,383,040 after
 * the small tensor's free).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pickle_write.h"
#include "pickle_read.h"
#include "import_formats.h"
#include "import_pytorch_blocks.h"
#include "pytorch_fixtures.h"

#define MIB UINT64_C(1048576)
#define BASE UINT64_C(0x200000000000)

typedef struct entry {
    const char *action;
    uint64_t addr, size;
} entry;

/* A snapshot dict as PyTorch writes it: no segments left, one device's
 * trace, allocator_settings with expandable_segments and, when `div` is
 * nonzero, roundup_power2_divisions of `div` for the interval from 8 MiB. */
static unsigned char *history(const entry *e, size_t n, int expandable, int div, size_t *len)
{
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm__pkw_proto(&w, 2);
    tdm_pkw_seq root, segs, traces, dev, ent, set, divs;
    tdm__pkw_dict_begin(&w, &root);
    tdm__pkw_dict_item(&w, &root);
    tdm__pkw_cstr(&w, "segments");
    tdm__pkw_list_begin(&w, &segs);
    tdm__pkw_list_end(&w, &segs);
    tdm__pkw_dict_item(&w, &root);
    tdm__pkw_cstr(&w, "device_traces");
    tdm__pkw_list_begin(&w, &traces);
    tdm__pkw_list_item(&w, &traces);
    tdm__pkw_list_begin(&w, &dev);
    for (size_t i = 0; i < n; i++) {
        tdm__pkw_list_item(&w, &dev);
        tdm__pkw_dict_begin(&w, &ent);
        tdm__pkw_dict_item(&w, &ent);
        tdm__pkw_cstr(&w, "action");
        tdm__pkw_cstr(&w, e[i].action);
        tdm__pkw_dict_item(&w, &ent);
        tdm__pkw_cstr(&w, "addr");
        tdm__pkw_int(&w, (int64_t)e[i].addr);
        tdm__pkw_dict_item(&w, &ent);
        tdm__pkw_cstr(&w, "size");
        tdm__pkw_int(&w, (int64_t)e[i].size);
        tdm__pkw_dict_item(&w, &ent);
        tdm__pkw_cstr(&w, "stream");
        tdm__pkw_int(&w, 0);
        tdm__pkw_dict_item(&w, &ent);
        tdm__pkw_cstr(&w, "time_us");
        tdm__pkw_int(&w, (int64_t)(UINT64_C(1796172077764591) + i));
        tdm__pkw_dict_end(&w, &ent);
    }
    tdm__pkw_list_end(&w, &dev);
    tdm__pkw_list_end(&w, &traces);
    tdm__pkw_dict_item(&w, &root);
    tdm__pkw_cstr(&w, "allocator_settings");
    tdm__pkw_dict_begin(&w, &set);
    tdm__pkw_dict_item(&w, &set);
    tdm__pkw_cstr(&w, "max_split_size");
    tdm__pkw_int(&w, -1);
    tdm__pkw_dict_item(&w, &set);
    tdm__pkw_cstr(&w, "expandable_segments");
    tdm__pkw_bool(&w, expandable);
    tdm__pkw_dict_item(&w, &set);
    tdm__pkw_cstr(&w, "roundup_power2_divisions");
    tdm__pkw_dict_begin(&w, &divs);
    for (unsigned k = 0; k < 16; k++) {
        char key[8];
        snprintf(key, sizeof key, "%u", 1u << k);
        tdm__pkw_dict_item(&w, &divs);
        tdm__pkw_cstr(&w, key);
        tdm__pkw_int(&w, (1u << k) == 8 ? div : 0);
    }
    tdm__pkw_dict_end(&w, &divs);
    tdm__pkw_dict_end(&w, &set);
    tdm__pkw_dict_end(&w, &root);
    tdm__pkw_stop(&w);
    assert_int_equal(tdm__pkw_finish(&w), TDM_OK);
    unsigned char *b = tdm__pkw_take(&w, len);
    tdm__pkw_destroy(&w);
    return b;
}

static tdm_snap *import(const entry *e, size_t n, int expandable, int div)
{
    size_t len;
    unsigned char *b = history(e, n, expandable, div, &len);
    tdm_snap *s = NULL;
    char err[320];
    tdm_status st = tdm__import_pytorch_buffer(b, len, "test", &s, NULL, err, sizeof err);
    if (st != TDM_OK)
        print_error("import: %s\n", err);
    assert_int_equal(st, TDM_OK);
    free(b);
    assert_int_equal(s->event_count, n);
    for (size_t i = 0; i < n; i++) /* one device: the trace's order */
        assert_true(s->events[i].addr == e[i].addr);
    return s;
}

static int64_t peak_allocated(const tdm_snap *s)
{
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(s, &m), TDM_OK);
    int64_t p = m->devices[0].peak_allocated;
    tdm__model_free(m);
    return p;
}

static void sizes_are(const tdm_snap *s, const uint64_t *want)
{
    for (size_t i = 0; i < s->event_count; i++) {
        if (want[i] != s->events[i].size)
            print_error("event %zu (%s): size %llu, want %llu\n", i,
                        tdm__action_name(s->events[i].action),
                        (unsigned long long)s->events[i].size, (unsigned long long)want[i]);
        assert_true(want[i] == s->events[i].size);
    }
}

static void test_torch_small_and_large(void **state)
{
    (void)state;
    const uint64_t S = BASE, L1 = BASE + 2 * MIB, L2 = L1 + 12 * MIB;
    const entry e[] = {
        {"segment_alloc", S, 2 * MIB},     {"alloc", S, 4000},
        {"segment_alloc", L1, 12 * MIB},   {"alloc", L1, 12000000},
        {"segment_alloc", L2, 20 * MIB},   {"alloc", L2, 2800000},
        {"free_requested", S, 4000},       {"free_completed", S, 4000},
        /* All given back, so the (empty) final state agrees. */
        {"free_completed", L1, 12000000},  {"free_completed", L2, 2800000},
        {"segment_free", S, 2 * MIB},      {"segment_free", L1, 12 * MIB},
        {"segment_free", L2, 20 * MIB},
    };
    tdm_snap *s = import(e, sizeof e / sizeof e[0], 0, 0);
    const uint64_t want[] = {2 * MIB, 4096, 12 * MIB, 12 * MIB, 20 * MIB, 2800128, 4096, 4096,
                             12 * MIB, 2800128, 2 * MIB, 12 * MIB, 20 * MIB};
    sizes_are(s, want);
    /* The entries' own sizes stay as what was asked for. */
    assert_int_equal(s->events[1].requested, 4000);
    assert_int_equal(s->events[3].requested, 12000000);
    assert_int_equal(peak_allocated(s), 4096 + 12 * MIB + 2800128);

    /* Exported again, the trace says the bytes asked for, as PyTorch's did. */
    size_t len;
    unsigned char *p = ts_export(s, -1, &len, NULL);
    tdm_pk_doc *doc;
    const tdm_pkv *r;
    tdm_pk_error perr;
    assert_int_equal(tdm__pk_parse(p, len, &doc, &r, &perr), TDM_OK);
    const tdm_pkv *tr = tdm__pk_get(r, "device_traces")->v.items[0];
    uint64_t asked[] = {2 * MIB, 4000, 12 * MIB, 12000000, 20 * MIB, 2800000, 4000, 4000,
                        12000000, 2800000, 2 * MIB, 12 * MIB, 20 * MIB}, got;
    assert_int_equal(tr->n, 13);
    for (uint32_t i = 0; i < tr->n; i++) {
        assert_int_equal(tdm__pk_u64(tdm__pk_get(tr->v.items[i], "size"), &got), 0);
        assert_true(got == asked[i]);
    }
    tdm__pk_free(doc);
    free(p);
    tdm__import_pytorch_free(s);
}

static void test_free_block_ends_at_next_held(void **state)
{
    (void)state;
    const uint64_t B = BASE;
    const entry e[] = {
        {"segment_alloc", B, 20 * MIB},
        {"alloc", B, 8 * MIB},                 /* 12 MiB left: split */
        {"alloc", B + 8 * MIB, 11 * MIB + 600000}, /* ~0.43 MiB left: whole */
        {"free_requested", B, 8 * MIB},
        {"free_completed", B, 8 * MIB},
        {"alloc", B, 7 * MIB + 100},           /* ~1 MiB left before the held one: whole */
        {"free_completed", B + 8 * MIB, 11 * MIB + 600000},
        {"free_completed", B, 7 * MIB + 100},
        {"alloc", B, 7 * MIB + 100},           /* all 20 MiB free again: split */
    };
    tdm_snap *s = import(e, sizeof e / sizeof e[0], 0, 0);
    const uint64_t want[] = {20 * MIB, 8 * MIB, 12 * MIB, 8 * MIB, 8 * MIB,
                             8 * MIB, 12 * MIB, 8 * MIB, 7 * MIB + 512};
    sizes_are(s, want);
    assert_int_equal(peak_allocated(s), 20 * MIB);
    tdm__import_pytorch_free(s);
}

static void test_small_pool_splits_at_512(void **state)
{
    (void)state;
    const uint64_t B = BASE;
    const entry e[] = {
        {"segment_alloc", B, 2 * MIB},
        {"alloc", B, 1 * MIB},                 /* small pool (<= 1 MiB) */
        {"alloc", B + MIB, MIB - 512 - 100},   /* 512 B left: split */
        {"alloc", B + 2 * MIB - 512, 1},       /* the last 512 B */
        {"free_completed", B + 2 * MIB - 512, 1},
        {"free_completed", B + MIB, MIB - 512 - 100},
        {"alloc", B + MIB, MIB - 1000},        /* rounds to MIB - 512 ... */
    };
    tdm_snap *s = import(e, sizeof e / sizeof e[0], 0, 0);
    /* ... so 512 B are left: split again. */
    const uint64_t want[] = {2 * MIB, MIB, MIB - 512, 512, 512, MIB - 512, MIB - 512};
    sizes_are(s, want);
    tdm__import_pytorch_free(s);
}

static void test_expandable_splits_at_512(void **state)
{
    (void)state;
    const uint64_t B = BASE;
    const entry e[] = {
        {"segment_map", B, 6 * MIB},
        {"segment_map", B + 6 * MIB, 6 * MIB}, /* the same segment grown */
        {"alloc", B, 12000000},                /* 582,656 B left: split */
        {"alloc", B + 12000256, 582000},       /* 512 B left: split */
        {"segment_unmap", B + 12000256 + 582144, 512},
    };
    tdm_snap *s = import(e, sizeof e / sizeof e[0], 1, 0);
    const uint64_t want[] = {6 * MIB, 6 * MIB, 12000256, 582144, 512};
    sizes_are(s, want);
    tdm__import_pytorch_free(s);
    /* Without expandable segments the same large request keeps its
     * segment's 582,656 B: the block is all 12 MiB. */
    const entry f[] = {{"segment_alloc", B, 12 * MIB}, {"alloc", B, 12000000}};
    s = import(f, 2, 0, 0);
    assert_true(s->events[1].size == 12 * MIB);
    tdm__import_pytorch_free(s);
}

static void test_roundup_power2_divisions(void **state)
{
    (void)state;
    const uint64_t B = BASE;
    /* 9,000,000 B is in [8 MiB, 16 MiB): four divisions round it to 10 MiB. */
    const entry e[] = {{"segment_alloc", B, 20 * MIB}, {"alloc", B, 9000000},
                       {"free_completed", B + 20 * MIB, 9000000}};
    tdm_snap *s = import(e, sizeof e / sizeof e[0], 0, 4);
    /* A free whose alloc the history lacks: the request rounded. */
    const uint64_t want[] = {20 * MIB, 10 * MIB, 10 * MIB};
    sizes_are(s, want);
    tdm__import_pytorch_free(s);
    tdm_pt_alloc_rules r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tdm__pt_round_size(&r, 1), 512);
    assert_int_equal(tdm__pt_round_size(&r, 9000000), 9000448);
    r.divisions[3] = 4;
    assert_int_equal(tdm__pt_round_size(&r, 8 * MIB), 8 * MIB); /* a power of two stays */
    assert_int_equal(tdm__pt_round_size(&r, 8 * MIB + 1), 10 * MIB);
    assert_int_equal(tdm__pt_round_size(&r, 14 * MIB + 1), 16 * MIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_small_and_large),
        cmocka_unit_test(test_free_block_ends_at_next_held),
        cmocka_unit_test(test_small_pool_splits_at_512),
        cmocka_unit_test(test_expandable_splits_at_512),
        cmocka_unit_test(test_roundup_power2_divisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
