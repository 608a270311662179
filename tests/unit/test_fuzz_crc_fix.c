/* tests/unit/test_fuzz_crc_fix.c: the fuzz targets' checksum fix-up
 * (tests/fuzz/tdm_crc_fix.h) lets a mutated payload through to the field
 * decoders.  For every byte of every record payload of
 * tests/data/sample-v1.3.tdm, flipped: read as it is, the file fails its
 * checksum; with the fix-up, never.  And the fix-up of an unmutated file
 * reads to the same snapshot (its event count, its dropped count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "snap_model.h"
#include "../fuzz/tdm_crc_fix.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* Whether reading buf[0..n) (partial) fails on a checksum. */
static int checksum_fails(const uint8_t *buf, size_t n)
{
    tdm_snap *snap = NULL;
    tdm_read_error err = {0};
    tdm__snap_read_buffer(buf, n, 1, &snap, &err);
    if (snap)
        tdm__snap_free(snap);
    return strstr(err.message, "checksum") != NULL;
}

static void fixed_copy_reads_the_same(void **state)
{
    (void)state;
    size_t n, m;
    uint8_t *b = slurp(TDM_TEST_DATA_DIR "/sample-v1.3.tdm", &n);
    uint8_t *f = tdm_fuzz_fix_crcs(b, n, &m);
    assert_non_null(f);
    tdm_snap *a = NULL, *c = NULL;
    tdm_read_error err;
    assert_int_equal(tdm__snap_read_buffer(b, n, 0, &a, &err), TDM_OK);
    assert_int_equal(tdm__snap_read_buffer(f, m, 0, &c, &err), TDM_OK);
    assert_int_equal(a->event_count, c->event_count);
    assert_int_equal(a->dropped_events, c->dropped_events);
    assert_int_equal(a->stack_count, c->stack_count);
    tdm__snap_free(a);
    tdm__snap_free(c);
    free(f);
    free(b);
}

static void mutated_payloads_pass_the_checksum(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = slurp(TDM_TEST_DATA_DIR "/sample-v1.3.tdm", &n);
    /* The payload bytes: walk the records as the fix-up does. */
    const uint8_t *p = b + 10, *end = b + n;
    uint64_t v, type, len;
    int neg;
    assert_int_equal(tdm__fmt_dec_int(&p, end, &v, &neg), TDM_FMT_DEC_OK);
    assert_int_equal(tdm__fmt_dec_int(&p, end, &v, &neg), TDM_FMT_DEC_OK);
    size_t flips = 0, failed_raw = 0, failed_fixed = 0;
    while (p < end && *p == 0x93) {
        p++;
        assert_int_equal(tdm__fmt_dec_int(&p, end, &type, &neg), TDM_FMT_DEC_OK);
        assert_int_equal(tdm__fmt_dec_len(&p, end, 'b', &len), TDM_FMT_DEC_OK);
        for (uint64_t k = 0; k < len; k++) {
            size_t at = (size_t)(p - b) + (size_t)k, m;
            b[at] ^= 0x5a;
            failed_raw += checksum_fails(b, n);
            uint8_t *f = tdm_fuzz_fix_crcs(b, n, &m);
            assert_non_null(f);
            failed_fixed += checksum_fails(f, m);
            free(f);
            b[at] ^= 0x5a;
            flips++;
        }
        p += len;
        assert_int_equal(tdm__fmt_dec_int(&p, end, &v, &neg), TDM_FMT_DEC_OK);
    }
    print_message("%zu payload bytes flipped: %zu failed the checksum as they were, "
                  "%zu after the fix-up\n", flips, failed_raw, failed_fixed);
    assert_true(flips > 100);
    assert_int_equal(failed_raw, flips);
    assert_int_equal(failed_fixed, 0);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_copy_reads_the_same),
        cmocka_unit_test(mutated_payloads_pass_the_checksum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
