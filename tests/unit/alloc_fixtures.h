/* tests/unit/alloc_fixtures.h: what the caching allocator's tests share:
 * a configuration of the cache mode on the sim device, and the invariant
 * checker run over every device.  Include after cmocka.h and alloc.h. */
#ifndef TDM_TESTS_ALLOC_FIXTURES_H
#define TDM_TESTS_ALLOC_FIXTURES_H

#include <string.h>

/* Fails the test with the checker's message when a device's invariants
 * are broken. */
static inline void tdm_test_check_devices(void)
{
    char msg[256] = "";
    int n = 0;
    assert_int_equal(tdm_device_count(&n), TDM_OK);
    for (int d = 0; d < n; d++)
        if (tdm__alloc_check(d, msg, sizeof msg) != TDM_OK)
            fail_msg("invariant broken on device %d: %s", d, msg);
}

/* mode=cache on sim devices of `capacity` bytes, OOM reports quiet. */
static inline tdm__alloc_config tdm_test_cache_config(size_t capacity)
{
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "cache");
    cfg.device_capacity = capacity;
    cfg.quiet_oom = 1;
    return cfg;
}

#endif
