/* tests/unit/test_config_alloc.c: the TIDEMARK_CONF keys of issue 4 that
 * reach alloc/ (runtime/config_alloc.c and the `device` kinds): vendor
 * device kinds, and the caching allocator's knobs with PyTorch's values
 * and syntax (max_split_size, roundup_power2_divisions as one number or
 * as a [MiB:N,...,>:N] list whose commas do not end the item,
 * garbage_collection_threshold), checked in the parsed fields and in the
 * allocator's rounding.  Refused values are in test_config.c's table of
 * bad values. */
#include "config_fixtures.h"

static void vendor_device_kinds(void **state)
{
    (void)state;
    parse_ok("device=cuda");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_CUDA);
    parse_ok("device=hip");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_HIP);
    /* Values ignore case, the device kind too. */
    parse_ok("device=CUDA");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_CUDA);
    parse_ok("device=Sim:2x1G");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_SIM);
    assert_int_equal(cfg.alloc.device_count, 2);
    parse_ok("device=ze,device=sim:2x1G");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_SIM);
    assert_int_equal(cfg.alloc.device_count, 2);
    /* The allocator takes every kind it has a provider for. */
    parse_ok("device=cuda");
    assert_int_equal(tdm__alloc_configure(&cfg.alloc), TDM_OK);
    tdm__alloc_reset_for_tests();
}

static void cache_knobs_take_pytorch_values(void **state)
{
    (void)state;
    parse_ok("max_split_size=256MiB");
    assert_int_equal(cfg.alloc.max_split_size, 256u << 20);
    parse_ok("max_split_size=0");
    assert_int_equal(cfg.alloc.max_split_size, 0);

    /* One number: every interval. */
    parse_ok("roundup_power2_divisions=4");
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        assert_int_equal(cfg.alloc.roundup_power2_divisions[i], 4);
    parse_ok("roundup_power2_divisions=4,roundup_power2_divisions=0");
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        assert_int_equal(cfg.alloc.roundup_power2_divisions[i], 0);

    /* PyTorch's list: commas inside [...] do not end the item; the first
     * entry covers the intervals below it, '>' the ones after the last. */
    parse_ok("record=state, roundup_power2_divisions=[256:1, 512:2,1024:4,>:8],"
             "max_entries=7");
    assert_int_equal(cfg.record, TDM_RECORD_STATE);
    assert_int_equal(cfg.max_entries, 7);
    const uint32_t *d = cfg.alloc.roundup_power2_divisions;
    for (int i = 0; i <= 8; i++) /* 1 MiB .. 256 MiB intervals: 1 */
        assert_int_equal(d[i], 1);
    assert_int_equal(d[9], 2);  /* [512 MiB, 1 GiB) */
    assert_int_equal(d[10], 4); /* [1 GiB, 2 GiB) */
    for (int i = 11; i < TDM_ROUNDUP_INTERVALS; i++)
        assert_int_equal(d[i], 8);
    /* Only '>': everything; a key past the table goes to the last one. */
    parse_ok("roundup_power2_divisions=[>:2]");
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        assert_int_equal(d[i], 2);
    parse_ok("roundup_power2_divisions=[1:16,1048576:2]");
    assert_int_equal(d[0], 16);
    assert_int_equal(d[1], 0);
    assert_int_equal(d[TDM_ROUNDUP_INTERVALS - 1], 2);
    /* 0 in an entry turns rounding off there, as PyTorch allows. */
    parse_ok("roundup_power2_divisions=[256:0,512:2,>:0]");
    assert_int_equal(d[8], 0);
    assert_int_equal(d[9], 2);
    assert_int_equal(d[10], 0);

    /* The allocator rounds as configured: 1200 KiB with 4 divisions of
     * [1 MiB, 2 MiB) is 1280 KiB. */
    parse_ok("roundup_power2_divisions=4,alloc_mode=cache");
    assert_int_equal(tdm__alloc_configure(&cfg.alloc), TDM_OK);
    assert_int_equal(tdm__alloc_round_size(1200u << 10), 1280u << 10);
    tdm__alloc_reset_for_tests();

    parse_ok("garbage_collection_threshold=0.8");
    assert_true(cfg.alloc.garbage_collection_threshold > 0.7999999 &&
                cfg.alloc.garbage_collection_threshold < 0.8000001);
    parse_ok("garbage_collection_threshold=0.125");
    assert_true(cfg.alloc.garbage_collection_threshold == 0.125);
    parse_ok("garbage_collection_threshold=0.0");
    assert_true(cfg.alloc.garbage_collection_threshold == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vendor_device_kinds),
        cmocka_unit_test(cache_knobs_take_pytorch_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
