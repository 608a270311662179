/* tests/unit/test_format_pack.c: the writer's own column packer
 * (format/format_pack.h) gives msgpack-c's bytes for every value, at each
 * boundary between two encodings and on either side of it, signed and
 * unsigned, and for array headers of every size class; a file must not
 * depend on which of the two packed a value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <msgpack.h>

#include "format_pack.h"

typedef struct bytes {
    uint8_t p[64];
    size_t n;
} bytes;

static int bytes_write(void *data, const char *buf, size_t len)
{
    bytes *b = data;
    assert_true(b->n + len <= sizeof b->p);
    memcpy(b->p + b->n, buf, len);
    b->n += len;
    return 0;
}

/* msgpack-c's bytes for a value (`theirs`, a call on the packer pk) and
 * ours (`ours`, a call that packs at `got` and returns the end) are the
 * same; `what` names the value in the failure. */
#define SAME_AS_MSGPACK(theirs, ours, ...)                                     \
    do {                                                                       \
        bytes want = {0};                                                      \
        msgpack_packer pk;                                                     \
        msgpack_packer_init(&pk, &want, bytes_write);                          \
        theirs;                                                                \
        uint8_t got[TDM__PACK_INT_MAX + TDM__PACK_ARRAY_MAX];                  \
        size_t len = (size_t)((ours) - got);                                   \
        if (len != want.n || memcmp(got, want.p, len) != 0) {                  \
            char what[64];                                                     \
            snprintf(what, sizeof what, __VA_ARGS__);                          \
            fail_msg("%s: %zu bytes from ours, %zu from msgpack-c, or they differ", what, \
                     len, want.n);                                             \
        }                                                                      \
    } while (0)

static void same_as_msgpack_uint(uint64_t v)
{
    SAME_AS_MSGPACK(msgpack_pack_uint64(&pk, v), tdm__pack_uint(got, v), "uint %llu",
                    (unsigned long long)v);
}

static void same_as_msgpack_int(int64_t v)
{
    SAME_AS_MSGPACK(msgpack_pack_int64(&pk, v), tdm__pack_int(got, v), "int %lld",
                    (long long)v);
}

static void same_as_msgpack_array(uint32_t count)
{
    SAME_AS_MSGPACK(msgpack_pack_array(&pk, count), tdm__pack_array_header(got, count),
                    "array of %u", count);
}

/* Each boundary b and its neighbours b - 1 and b + 1. */
static const uint64_t unsigned_edges[] = {
    0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffffull, 0x100000000ull,
    UINT64_MAX - 1,
};
static const int64_t signed_edges[] = {
    0, -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN, (int64_t)INT32_MIN - 1,
    INT64_MIN + 1, 127, 128, 255, 256, 65535, 65536, INT32_MAX, (int64_t)UINT32_MAX,
    INT64_MAX - 1,
};

static void unsigned_values_match_msgpack_c(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof unsigned_edges / sizeof *unsigned_edges; i++)
        for (int d = -1; d <= 1; d++)
            same_as_msgpack_uint(unsigned_edges[i] + (uint64_t)(int64_t)d);
    for (uint64_t v = 1; v; v <<= 1) /* every power of two */
        same_as_msgpack_uint(v);
}

static void signed_values_match_msgpack_c(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof signed_edges / sizeof *signed_edges; i++)
        for (int d = -1; d <= 1; d++)
            same_as_msgpack_int(signed_edges[i] + d);
    same_as_msgpack_int(INT64_MIN);
    for (int s = 0; s < 63; s++) {
        same_as_msgpack_int((int64_t)1 << s);
        same_as_msgpack_int(-((int64_t)1 << s));
    }
}

static void array_headers_match_msgpack_c(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {0, 1, 15, 16, 17, 65535, 65536, 65537, UINT32_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        same_as_msgpack_array(sizes[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unsigned_values_match_msgpack_c),
        cmocka_unit_test(signed_values_match_msgpack_c),
        cmocka_unit_test(array_headers_match_msgpack_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
