/* tests/unit/test_pickle.c: the minimal pickler (pickle_write.c) and the
 * pickle reader (pickle_read.c): exact bytes of every integer encoding,
 * strings and UTF-8 repair, batching of large containers, pickles written
 * by CPython (protocols 2, 4, 5: memo, FRAME, BYTEARRAY8), and the
 * reader's and importer's behaviour on malformed input: every prefix of a
 * pickle, seeded random corruption, unsupported opcodes, lying lengths,
 * memo abuse and cycles: never a crash, always an error naming a byte
 * offset.  Run it under ASan to see "never a crash" mean something.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pickle_write.h"
#include "pickle_read.h"
#include "import_formats.h"
#include "pytorch_fixtures.h"

/* Pickles written by CPython 3 pickle.dumps() of
 *   {'segments': [], 'device_traces': [[alloc, free_completed]] (frames
 *    shared through the memo), 'x': (1, 2.5, None, True, False, 2**64-1,
 *    -2**63, 'ééé', ()), 'y': (1,), 'z': (1, 2, 3)}
 * with protocols 2 and 4, and {'b': bytearray(b'xyz')} with protocol 5. */
static const unsigned char cpython_p2[] = {
    0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x08, 0x00, 0x00, 0x00, 0x73, 0x65, 0x67, 0x6d, 0x65,
    0x6e, 0x74, 0x73, 0x71, 0x01, 0x5d, 0x71, 0x02, 0x58, 0x0d, 0x00, 0x00, 0x00, 0x64, 0x65, 0x76,
    0x69, 0x63, 0x65, 0x5f, 0x74, 0x72, 0x61, 0x63, 0x65, 0x73, 0x71, 0x03, 0x5d, 0x71, 0x04, 0x5d,
    0x71, 0x05, 0x28, 0x7d, 0x71, 0x06, 0x28, 0x58, 0x06, 0x00, 0x00, 0x00, 0x61, 0x63, 0x74, 0x69,
    0x6f, 0x6e, 0x71, 0x07, 0x58, 0x05, 0x00, 0x00, 0x00, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x71, 0x08,
    0x58, 0x04, 0x00, 0x00, 0x00, 0x61, 0x64, 0x64, 0x72, 0x71, 0x09, 0x8a, 0x06, 0x00, 0x00, 0x10,
    0x00, 0x00, 0xf8, 0x58, 0x04, 0x00, 0x00, 0x00, 0x73, 0x69, 0x7a, 0x65, 0x71, 0x0a, 0x4d, 0x00,
    0x02, 0x58, 0x06, 0x00, 0x00, 0x00, 0x73, 0x74, 0x72, 0x65, 0x61, 0x6d, 0x71, 0x0b, 0x4b, 0x00,
    0x58, 0x07, 0x00, 0x00, 0x00, 0x74, 0x69, 0x6d, 0x65, 0x5f, 0x75, 0x73, 0x71, 0x0c, 0x8a, 0x07,
    0x00, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x58, 0x06, 0x00, 0x00, 0x00, 0x66, 0x72, 0x61, 0x6d,
    0x65, 0x73, 0x71, 0x0d, 0x5d, 0x71, 0x0e, 0x28, 0x7d, 0x71, 0x0f, 0x28, 0x58, 0x08, 0x00, 0x00,
    0x00, 0x66, 0x69, 0x6c, 0x65, 0x6e, 0x61, 0x6d, 0x65, 0x71, 0x10, 0x58, 0x04, 0x00, 0x00, 0x00,
    0x61, 0x2e, 0x70, 0x79, 0x71, 0x11, 0x58, 0x04, 0x00, 0x00, 0x00, 0x6c, 0x69, 0x6e, 0x65, 0x71,
    0x12, 0x4b, 0x03, 0x58, 0x04, 0x00, 0x00, 0x00, 0x6e, 0x61, 0x6d, 0x65, 0x71, 0x13, 0x58, 0x01,
    0x00, 0x00, 0x00, 0x66, 0x71, 0x14, 0x75, 0x68, 0x0f, 0x65, 0x75, 0x7d, 0x71, 0x15, 0x28, 0x68,
    0x07, 0x58, 0x0e, 0x00, 0x00, 0x00, 0x66, 0x72, 0x65, 0x65, 0x5f, 0x63, 0x6f, 0x6d, 0x70, 0x6c,
    0x65, 0x74, 0x65, 0x64, 0x71, 0x16, 0x68, 0x09, 0x8a, 0x06, 0x00, 0x00, 0x10, 0x00, 0x00, 0xf8,
    0x68, 0x0a, 0x4d, 0x00, 0x02, 0x68, 0x0b, 0x4b, 0x00, 0x68, 0x0c, 0x8a, 0x07, 0x01, 0x40, 0x1e,
    0x18, 0x24, 0x0a, 0x06, 0x68, 0x0d, 0x5d, 0x71, 0x17, 0x68, 0x0f, 0x61, 0x75, 0x65, 0x61, 0x58,
    0x01, 0x00, 0x00, 0x00, 0x78, 0x71, 0x18, 0x28, 0x4b, 0x01, 0x47, 0x40, 0x04, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x4e, 0x88, 0x89, 0x8a, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x8a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x58, 0x06, 0x00, 0x00, 0x00,
    0xc3, 0xa9, 0xc3, 0xa9, 0xc3, 0xa9, 0x71, 0x19, 0x29, 0x74, 0x71, 0x1a, 0x58, 0x01, 0x00, 0x00,
    0x00, 0x79, 0x71, 0x1b, 0x4b, 0x01, 0x85, 0x71, 0x1c, 0x58, 0x01, 0x00, 0x00, 0x00, 0x7a, 0x71,
    0x1d, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x87, 0x71, 0x1e, 0x75, 0x2e,
};

static const unsigned char cpython_p4[] = {
    0x80, 0x04, 0x95, 0x32, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28, 0x8c, 0x08,
    0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x94, 0x5d, 0x94, 0x8c, 0x0d, 0x64, 0x65, 0x76,
    0x69, 0x63, 0x65, 0x5f, 0x74, 0x72, 0x61, 0x63, 0x65, 0x73, 0x94, 0x5d, 0x94, 0x5d, 0x94, 0x28,
    0x7d, 0x94, 0x28, 0x8c, 0x06, 0x61, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x94, 0x8c, 0x05, 0x61, 0x6c,
    0x6c, 0x6f, 0x63, 0x94, 0x8c, 0x04, 0x61, 0x64, 0x64, 0x72, 0x94, 0x8a, 0x06, 0x00, 0x00, 0x10,
    0x00, 0x00, 0xf8, 0x8c, 0x04, 0x73, 0x69, 0x7a, 0x65, 0x94, 0x4d, 0x00, 0x02, 0x8c, 0x06, 0x73,
    0x74, 0x72, 0x65, 0x61, 0x6d, 0x94, 0x4b, 0x00, 0x8c, 0x07, 0x74, 0x69, 0x6d, 0x65, 0x5f, 0x75,
    0x73, 0x94, 0x8a, 0x07, 0x00, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x8c, 0x06, 0x66, 0x72, 0x61,
    0x6d, 0x65, 0x73, 0x94, 0x5d, 0x94, 0x28, 0x7d, 0x94, 0x28, 0x8c, 0x08, 0x66, 0x69, 0x6c, 0x65,
    0x6e, 0x61, 0x6d, 0x65, 0x94, 0x8c, 0x04, 0x61, 0x2e, 0x70, 0x79, 0x94, 0x8c, 0x04, 0x6c, 0x69,
    0x6e, 0x65, 0x94, 0x4b, 0x03, 0x8c, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x94, 0x8c, 0x01, 0x66, 0x94,
    0x75, 0x68, 0x0f, 0x65, 0x75, 0x7d, 0x94, 0x28, 0x68, 0x07, 0x8c, 0x0e, 0x66, 0x72, 0x65, 0x65,
    0x5f, 0x63, 0x6f, 0x6d, 0x70, 0x6c, 0x65, 0x74, 0x65, 0x64, 0x94, 0x68, 0x09, 0x8a, 0x06, 0x00,
    0x00, 0x10, 0x00, 0x00, 0xf8, 0x68, 0x0a, 0x4d, 0x00, 0x02, 0x68, 0x0b, 0x4b, 0x00, 0x68, 0x0c,
    0x8a, 0x07, 0x01, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x68, 0x0d, 0x5d, 0x94, 0x68, 0x0f, 0x61,
    0x75, 0x65, 0x61, 0x8c, 0x01, 0x78, 0x94, 0x28, 0x4b, 0x01, 0x47, 0x40, 0x04, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x4e, 0x88, 0x89, 0x8a, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x8a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x8c, 0x06, 0xc3, 0xa9, 0xc3,
    0xa9, 0xc3, 0xa9, 0x94, 0x29, 0x74, 0x94, 0x8c, 0x01, 0x79, 0x94, 0x4b, 0x01, 0x85, 0x94, 0x8c,
    0x01, 0x7a, 0x94, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x87, 0x94, 0x75, 0x2e,
};

static const unsigned char cpython_bytearray[] = {
    0x80, 0x05, 0x95, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x8c, 0x01, 0x62,
    0x94, 0x96, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x78, 0x79, 0x7a, 0x94, 0x73, 0x2e,
};

/* ---- helpers ------------------------------------------------------------- */

static unsigned char *written(tdm_pkw *w, size_t *len)
{
    unsigned char *b = tdm__pkw_take(w, len);
    assert_non_null(b);
    tdm__pkw_destroy(w);
    return b;
}

static void expect_int_bytes(int64_t v, const unsigned char *want, size_t n)
{
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm__pkw_int(&w, v);
    size_t len;
    unsigned char *b = written(&w, &len);
    if (len != n || memcmp(b, want, n) != 0) {
        print_error("int %lld encoded as", (long long)v);
        for (size_t i = 0; i < len; i++)
            print_error(" %02x", b[i]);
        print_error("\n");
        fail();
    }
    /* And it reads back. */
    unsigned char p[16];
    memcpy(p, want, n);
    p[n] = '.';
    tdm_pk_doc *doc;
    const tdm_pkv *root;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(p, n + 1, &doc, &root, &err), TDM_OK);
    assert_int_equal(root->type, TDM_PKV_INT);
    assert_int_equal(root->big, 0);
    assert_true(root->v.i == v);
    tdm__pk_free(doc);
    free(b);
}

static const tdm_pkv *parse_ok(const void *data, size_t len, tdm_pk_doc **doc)
{
    const tdm_pkv *root;
    tdm_pk_error err;
    tdm_status s = tdm__pk_parse(data, len, doc, &root, &err);
    if (s != TDM_OK)
        print_error("parse failed at byte %llu: %s\n", (unsigned long long)err.offset,
                    err.message);
    assert_int_equal(s, TDM_OK);
    return root;
}

/* ---- writer ---------------------------------------------------------------- */

static void test_int_encodings(void **state)
{
    (void)state;
    expect_int_bytes(0, (const unsigned char[]){'K', 0}, 2);
    expect_int_bytes(255, (const unsigned char[]){'K', 0xff}, 2);
    expect_int_bytes(256, (const unsigned char[]){'M', 0x00, 0x01}, 3);
    expect_int_bytes(65535, (const unsigned char[]){'M', 0xff, 0xff}, 3);
    expect_int_bytes(65536, (const unsigned char[]){'J', 0, 0, 1, 0}, 5);
    expect_int_bytes(-1, (const unsigned char[]){'J', 0xff, 0xff, 0xff, 0xff}, 5);
    expect_int_bytes(INT32_MIN, (const unsigned char[]){'J', 0, 0, 0, 0x80}, 5);
    expect_int_bytes(INT32_MAX, (const unsigned char[]){'J', 0xff, 0xff, 0xff, 0x7f}, 5);
    /* 2^31 needs a zero sign byte: 00 00 00 80 00. */
    expect_int_bytes(INT64_C(2147483648),
                     (const unsigned char[]){0x8a, 5, 0, 0, 0, 0x80, 0}, 7);
    expect_int_bytes(INT64_C(-2147483649),
                     (const unsigned char[]){0x8a, 5, 0xff, 0xff, 0xff, 0x7f, 0xff}, 7);
    expect_int_bytes(INT64_MAX, (const unsigned char[]){0x8a, 8, 0xff, 0xff, 0xff, 0xff,
                                                        0xff, 0xff, 0xff, 0x7f}, 10);
    expect_int_bytes(INT64_MIN, (const unsigned char[]){0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x80},
                     10);
    /* A user-space address: 6 bytes. */
    expect_int_bytes(INT64_C(0x7f0000000000),
                     (const unsigned char[]){0x8a, 6, 0, 0, 0, 0, 0, 0x7f}, 8);
    /* A high-half address written as signed 64-bit: 0xffff800000200000. */
    expect_int_bytes((int64_t)UINT64_C(0xffff800000200000),
                     (const unsigned char[]){0x8a, 6, 0, 0, 0x20, 0, 0, 0x80}, 8);
    /* What CPython writes for time_us 1700000000000000. */
    expect_int_bytes(INT64_C(1700000000000000),
                     (const unsigned char[]){0x8a, 7, 0x00, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06},
                     9);
}

static void test_floats_strings_constants(void **state)
{
    (void)state;
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm__pkw_proto(&w, 4);
    tdm_pkw_seq seq;
    tdm__pkw_list_begin(&w, &seq);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_float(&w, 2.5);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_cstr(&w, "ab");
    char big[300];
    memset(big, 'x', sizeof big);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_str(&w, big, sizeof big);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_none(&w);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_bool(&w, 1);
    tdm__pkw_list_item(&w, &seq);
    tdm__pkw_int(&w, 7);
    tdm__pkw_int(&w, 8);
    tdm__pkw_tuple2(&w);
    tdm__pkw_list_end(&w, &seq);
    tdm__pkw_stop(&w);
    size_t len;
    unsigned char *b = written(&w, &len);
    /* PROTO 4, ], MARK, BINFLOAT 2.5 (big-endian 40 04 00..) */
    const unsigned char head[] = {0x80, 4, ']', '(', 'G', 0x40, 0x04, 0, 0, 0, 0, 0, 0,
                                  0x8c, 2, 'a', 'b', 'X', 0x2c, 0x01, 0, 0};
    assert_memory_equal(b, head, sizeof head);
    tdm_pk_doc *doc;
    const tdm_pkv *r = parse_ok(b, len, &doc);
    assert_int_equal(r->type, TDM_PKV_LIST);
    assert_int_equal(r->n, 6);
    assert_true(r->v.items[0]->type == TDM_PKV_FLOAT && r->v.items[0]->v.f == 2.5);
    assert_int_equal(r->v.items[2]->n, 300);
    assert_int_equal(r->v.items[3]->type, TDM_PKV_NONE);
    assert_true(r->v.items[4]->type == TDM_PKV_BOOL && r->v.items[4]->v.i == 1);
    assert_int_equal(r->v.items[5]->type, TDM_PKV_TUPLE);
    assert_int_equal(r->v.items[5]->v.items[1]->v.i, 8);
    tdm__pk_free(doc);
    free(b);
}

static void test_utf8_repair(void **state)
{
    (void)state;
    assert_true(tdm__pkw_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
    assert_false(tdm__pkw_utf8_valid("\xff", 1));
    assert_false(tdm__pkw_utf8_valid("\xc0\x80", 2));         /* overlong NUL */
    assert_false(tdm__pkw_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
    assert_false(tdm__pkw_utf8_valid("\xe2\x82", 2));         /* cut */
    assert_false(tdm__pkw_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm__pkw_str_utf8(&w, "a\xffz\xe2\x82", 5);
    size_t len;
    unsigned char *b = written(&w, &len);
    /* a, U+FFFD for \xff, z, U+FFFD twice for the cut sequence's 2 bytes */
    const unsigned char want[] = {0x8c, 11, 'a', 0xef, 0xbf, 0xbd, 'z',
                                  0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd};
    assert_int_equal(len, sizeof want);
    assert_memory_equal(b, want, sizeof want);
    free(b);
}

static void test_batches(void **state)
{
    (void)state;
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm__pkw_proto(&w, 4);
    tdm_pkw_seq top, list;
    tdm__pkw_dict_begin(&w, &top);
    for (int k = 0; k < 1500; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        tdm__pkw_dict_item(&w, &top);
        tdm__pkw_cstr(&w, key);
        if (k == 3) {
            tdm__pkw_list_begin(&w, &list);
            for (int i = 0; i < 2500; i++) {
                tdm__pkw_list_item(&w, &list);
                tdm__pkw_int(&w, i);
            }
            tdm__pkw_list_end(&w, &list);
        } else {
            tdm__pkw_int(&w, k);
        }
    }
    tdm__pkw_dict_end(&w, &top);
    tdm__pkw_stop(&w);
    size_t len;
    unsigned char *b = written(&w, &len);
    /* Batches of 1000: the list has 3 MARK … APPENDS, the dict 2 MARK … SETITEMS. */
    size_t appends = 0, setitems = 0;
    for (size_t i = 0; i < len; i++) {
        appends += b[i] == 'e';
        setitems += b[i] == 'u';
    }
    assert_true(appends >= 3 && setitems >= 2); /* byte counts: ints may contain them */
    tdm_pk_doc *doc;
    const tdm_pkv *r = parse_ok(b, len, &doc);
    assert_int_equal(r->type, TDM_PKV_DICT);
    assert_int_equal(r->n, 1500);
    const tdm_pkv *l = tdm__pk_get(r, "k3");
    assert_non_null(l);
    assert_int_equal(l->n, 2500);
    for (uint32_t i = 0; i < l->n; i++)
        assert_int_equal(l->v.items[i]->v.i, i);
    assert_int_equal(tdm__pk_get(r, "k1499")->v.i, 1499);
    assert_null(tdm__pk_get(r, "k1500"));
    tdm__pk_free(doc);
    free(b);
}

/* An empty list or dict is just its opcode (no empty MARK … APPENDS). */
static void test_empty_containers(void **state)
{
    (void)state;
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    tdm_pkw_seq a, b;
    tdm__pkw_list_begin(&w, &a);
    tdm__pkw_list_end(&w, &a);
    tdm__pkw_dict_begin(&w, &b);
    tdm__pkw_dict_end(&w, &b);
    size_t len;
    unsigned char *out = written(&w, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(out, "]}", 2);
    free(out);
}

/* ---- reader: what CPython writes ---------------------------------------------- */

static void check_cpython_doc(const tdm_pkv *r)
{
    assert_int_equal(r->type, TDM_PKV_DICT);
    const tdm_pkv *traces = tdm__pk_get(r, "device_traces");
    assert_non_null(traces);
    assert_int_equal(traces->n, 1);
    const tdm_pkv *t0 = traces->v.items[0];
    assert_int_equal(t0->n, 2);
    uint64_t addr;
    assert_int_equal(tdm__pk_u64(tdm__pk_get(t0->v.items[0], "addr"), &addr), 0);
    assert_true(addr == UINT64_C(0xfffff80000100000));
    const tdm_pkv *frames = tdm__pk_get(t0->v.items[0], "frames");
    assert_int_equal(frames->n, 2);
    /* The memo shares the frame dict: same node twice. */
    assert_ptr_equal(frames->v.items[0], frames->v.items[1]);
    assert_ptr_equal(frames->v.items[0], tdm__pk_get(t0->v.items[1], "frames")->v.items[0]);
    const tdm_pkv *x = tdm__pk_get(r, "x");
    assert_int_equal(x->type, TDM_PKV_TUPLE);
    assert_int_equal(x->n, 9);
    assert_true(x->v.items[1]->v.f == 2.5);
    assert_int_equal(x->v.items[2]->type, TDM_PKV_NONE);
    assert_true(x->v.items[3]->v.i == 1 && x->v.items[4]->v.i == 0);
    assert_int_equal(x->v.items[5]->big, 1); /* 2**64-1: 9-byte LONG1 */
    assert_true(x->v.items[5]->v.u == UINT64_MAX);
    assert_true(x->v.items[6]->v.i == INT64_MIN);
    assert_int_equal(x->v.items[7]->n, 6);
    assert_memory_equal(x->v.items[7]->v.s, "\xc3\xa9\xc3\xa9\xc3\xa9", 6);
    assert_int_equal(x->v.items[8]->type, TDM_PKV_TUPLE);
    assert_int_equal(x->v.items[8]->n, 0);
    assert_int_equal(tdm__pk_get(r, "y")->n, 1);
    assert_int_equal(tdm__pk_get(r, "z")->v.items[2]->v.i, 3);
}

static void test_read_cpython(void **state)
{
    (void)state;
    tdm_pk_doc *doc;
    check_cpython_doc(parse_ok(cpython_p2, sizeof cpython_p2, &doc));
    tdm__pk_free(doc);
    check_cpython_doc(parse_ok(cpython_p4, sizeof cpython_p4, &doc));
    tdm__pk_free(doc);
    const tdm_pkv *r = parse_ok(cpython_bytearray, sizeof cpython_bytearray, &doc);
    const tdm_pkv *b = tdm__pk_get(r, "b");
    assert_int_equal(b->type, TDM_PKV_BYTES);
    assert_int_equal(b->n, 3);
    assert_memory_equal(b->v.s, "xyz", 3);
    tdm__pk_free(doc);
    /* Trailing bytes after STOP (the viewer's base64 padding) are fine. */
    unsigned char padded[sizeof cpython_p4 + 2];
    memcpy(padded, cpython_p4, sizeof cpython_p4);
    padded[sizeof cpython_p4] = padded[sizeof cpython_p4 + 1] = 0;
    check_cpython_doc(parse_ok(padded, sizeof padded, &doc));
    tdm__pk_free(doc);
}

/* The importer takes CPython's pickle of a (tiny) snapshot. */
static void test_import_cpython(void **state)
{
    (void)state;
    tdm_snap *s;
    tdm_pt_import_report rep;
    char err[256];
    assert_int_equal(tdm__import_pytorch_buffer(cpython_p4, sizeof cpython_p4, "t", &s, &rep,
                                                err, sizeof err), TDM_OK);
    assert_int_equal(s->event_count, 2);
    assert_int_equal(s->events[0].action, TDM_ACTION_ALLOC);
    assert_true(s->events[0].addr == UINT64_C(0xfffff80000100000));
    assert_true(s->events[0].time_ns == UINT64_C(1700000000000000000));
    assert_int_equal(s->events[1].action, TDM_ACTION_FREE_COMPLETED);
    assert_int_equal(s->stacks[s->events[0].stack_id].depth, 2);
    assert_int_equal(s->stacks[s->events[1].stack_id].depth, 1);
    /* One distinct frame, interned. */
    assert_int_equal(s->frame_count, 1);
    assert_string_equal(s->frames[0].file, "a.py");
    assert_string_equal(s->frames[0].function, "f");
    assert_int_equal(s->frames[0].line, 3);
    assert_int_equal(rep.from_tidemark, 0);
    assert_int_equal(s->device_count, 1);
    tdm__import_pytorch_free(s);
}

/* ---- reader: errors ---------------------------------------------------------- */

static void expect_error(const void *data, size_t len, tdm_status want, uint64_t at,
                         const char *needle)
{
    tdm_pk_doc *doc = (tdm_pk_doc *)1;
    const tdm_pkv *root = (const tdm_pkv *)1;
    tdm_pk_error err;
    tdm_status s = tdm__pk_parse(data, len, &doc, &root, &err);
    if (s != want || err.offset != at || !strstr(err.message, needle))
        print_error("got status %d at byte %llu: '%s'\n", s, (unsigned long long)err.offset,
                    err.message);
    assert_int_equal(s, want);
    assert_int_equal(err.offset, at);
    assert_non_null(strstr(err.message, needle));
    assert_null(doc);
    assert_null(root);
}

static void test_read_errors(void **state)
{
    (void)state;
    expect_error("\x80\x04" "cos\nsystem\n.", 13, TDM_FORMAT_ERROR, 2, "GLOBAL");
    expect_error("\x80\x04" "]R.", 5, TDM_FORMAT_ERROR, 3, "REDUCE");
    expect_error("\x80\x04" "I12\n.", 7, TDM_FORMAT_ERROR, 2, "'I', INT");
    expect_error("\x80\x04\x93", 3, TDM_FORMAT_ERROR, 2, "STACK_GLOBAL");
    expect_error("\x80\x04\xff", 3, TDM_FORMAT_ERROR, 2, "not a pickle opcode");
    expect_error("\x80\x06}.", 4, TDM_FORMAT_ERROR, 0, "protocol 6");
    expect_error("\x80\x04}", 3, TDM_TRUNCATED, 3, "without STOP");
    expect_error("", 0, TDM_TRUNCATED, 0, "empty");
    expect_error("\x80\x04}K\x01" "e.", 7, TDM_FORMAT_ERROR, 5, "APPENDS");
    expect_error("\x80\x04]K\x01K\x02s.", 9, TDM_FORMAT_ERROR, 7, "SETITEM on a list");
    expect_error("\x80\x04h\x05.", 5, TDM_FORMAT_ERROR, 2, "never stored");
    expect_error("\x80\x04" "a.", 4, TDM_FORMAT_ERROR, 2, "APPEND");
    expect_error("\x80\x04K\x01K\x02.", 7, TDM_FORMAT_ERROR, 6, "2 values");
    expect_error("\x80\x04(K\x01.", 6, TDM_FORMAT_ERROR, 5, "MARK");
    expect_error("\x80\x04" "e.", 4, TDM_FORMAT_ERROR, 2, "without a MARK");
    /* Lengths that lie: nothing is allocated for them. */
    expect_error("\x80\x04X\xff\xff\xff\x7f" "ab.", 10, TDM_TRUNCATED, 2, "BINUNICODE");
    expect_error("\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\x7f.", 12, TDM_TRUNCATED, 2,
                 "BYTEARRAY8");
    expect_error("\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00}.", 13, TDM_TRUNCATED, 2,
                 "FRAME");
    /* A memo index far beyond the input would mean a huge table. */
    expect_error("\x80\x04}r\xff\xff\xff\xff.", 9, TDM_FORMAT_ERROR, 3, "memo index");
    /* LONG1 wider than 64 bits. */
    expect_error("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14,
                 TDM_FORMAT_ERROR, 2, "64 bits");
}

/* A list that holds itself (memo): parsing is fine, the importer's walk
 * by schema does not loop. */
static void test_cycles(void **state)
{
    (void)state;
    const unsigned char self_list[] = {0x80, 4, ']', 'q', 0, 'h', 0, 'a', '.'};
    tdm_pk_doc *doc;
    const tdm_pkv *r = parse_ok(self_list, sizeof self_list, &doc);
    assert_ptr_equal(r->v.items[0], r);
    tdm__pk_free(doc);
    /* {"segments": L, "device_traces": [L]} with L = [L] */
    const unsigned char cyc[] = {0x80, 4, '}', '(', 0x8c, 8, 's', 'e', 'g', 'm', 'e', 'n', 't',
                                 's', ']', 'q', 0, 'h', 0, 'a', 0x8c, 13, 'd', 'e', 'v', 'i',
                                 'c', 'e', '_', 't', 'r', 'a', 'c', 'e', 's', ']', 'h', 0, 'a',
                                 'u', '.'};
    tdm_snap *s = NULL;
    char err[256];
    assert_int_equal(tdm__import_pytorch_buffer(cyc, sizeof cyc, "cyc", &s, NULL, err,
                                                sizeof err), TDM_FORMAT_ERROR);
    assert_null(s);
    assert_non_null(strstr(err, "at byte 14"));
    assert_non_null(strstr(err, "segments[0]"));
}

/* Many references to one value: memory stays proportional to the input,
 * and the shared node is one node. */
static void test_many_references(void **state)
{
    (void)state;
    size_t n = 200000, len = 0;
    unsigned char *p = malloc(16 + 2 * n);
    assert_non_null(p);
    /* ] ( K7 q0 h0 … e . */
    p[len++] = 0x80, p[len++] = 4, p[len++] = ']', p[len++] = '(', p[len++] = 'K';
    p[len++] = 7, p[len++] = 'q', p[len++] = 0;
    for (size_t i = 0; i < n; i++)
        p[len++] = 'h', p[len++] = 0;
    p[len++] = 'e';
    p[len++] = '.';
    tdm_pk_doc *doc;
    const tdm_pkv *root = parse_ok(p, len, &doc);
    assert_int_equal(root->n, n + 1);
    assert_ptr_equal(root->v.items[0], root->v.items[n]);
    tdm__pk_free(doc);
    /* The same references appended to None: an error, found at once. */
    p[2] = 'N';
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(p, len, &doc, &root, &err), TDM_FORMAT_ERROR);
    assert_non_null(strstr(err.message, "APPENDS on a None"));
    free(p);
}

/* ---- fuzz-style: every prefix, seeded corruption --------------------------------- */

/* Messages may quote the pickle's bytes: they must stay printable ASCII
 * (a script reading the tool's stderr as UTF-8 must not choke). */
static void assert_printable(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            fail_msg("byte 0x%02x in message: %s", *p, text);
}

static void import_must_not_crash(const unsigned char *b, size_t len, int must_fail)
{
    tdm_snap *s = NULL;
    char err[320];
    tdm_status st = tdm__import_pytorch_buffer(b, len, "fuzz", &s, NULL, err, sizeof err);
    if (st == TDM_OK) {
        assert_false(must_fail);
        assert_non_null(s);
        /* Whatever was accepted is a well-formed snapshot: the .tdm writer
         * and the model take it. */
        tdm_model *m = NULL;
        assert_int_equal(tdm__model_build(s, &m), TDM_OK);
        tdm__model_free(m);
        char path[256];
        snprintf(path, sizeof path, "%s/tdm-pickle-fuzz-%d.tdm",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
        assert_int_equal(tdm__snap_write(s, path), TDM_OK);
        unlink(path);
        tdm__import_pytorch_free(s);
        return;
    }
    assert_null(s);
    assert_true(st == TDM_FORMAT_ERROR || st == TDM_TRUNCATED);
    assert_non_null(strstr(err, "at byte "));
    assert_printable(err);
    unsigned long long at = strtoull(strstr(err, "at byte ") + 8, NULL, 10);
    assert_true(at <= len);
}

static void test_every_prefix(void **state)
{
    (void)state;
    ts *t = ts_small();
    size_t len;
    unsigned char *b = ts_export(&t->s, -1, &len, NULL);
    for (size_t n = 0; n < len; n++) {
        tdm_pk_doc *doc;
        const tdm_pkv *root;
        tdm_pk_error err;
        tdm_status s = tdm__pk_parse(b, n, &doc, &root, &err);
        assert_int_equal(s, TDM_TRUNCATED); /* our pickles end at STOP, their last byte */
        assert_true(err.offset <= n);
        assert_true(err.message[0] != 0);
        import_must_not_crash(b, n, 1);
    }
    import_must_not_crash(b, len, 0);
    for (size_t n = 0; n < sizeof cpython_p2; n++)
        import_must_not_crash(cpython_p2, n, 1);
    free(b);
    free(t);
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_random_corruption(void **state)
{
    (void)state;
    ts *t = ts_small();
    size_t len;
    unsigned char *b = ts_export(&t->s, -1, &len, NULL);
    unsigned char *m = malloc(len + 64);
    assert_non_null(m);
    static const unsigned char interesting[] = {0x00, 0xff, 0x7f, 0x80, '(', '.', 'e', 'u', 's',
                                                'a', 'h', 'q', 'X', 0x8c, 0x8a, 0x95, ']', '}'};
    size_t accepted = 0;
    for (int round = 0; round < 4000; round++) {
        memcpy(m, b, len);
        size_t n = len;
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(rnd() % n);
            switch (rnd() % 4) {
            case 0:
                m[at] ^= (unsigned char)(1u << (rnd() % 8));
                break;
            case 1:
                m[at] = interesting[rnd() % sizeof interesting];
                break;
            case 2:
                m[at] = (unsigned char)rnd();
                break;
            default:
                n = at + 1; /* cut */
                break;
            }
        }
        tdm_snap *s = NULL;
        char err[320];
        tdm_pt_import_report rep;
        memset(&rep, 0, sizeof rep);
        tdm_status st = tdm__import_pytorch_buffer(m, n, "fuzz", &s, &rep, err, sizeof err);
        if (st == TDM_OK) {
            accepted++;
            assert_printable(rep.skipped_actions);
            tdm_model *model = NULL;
            assert_int_equal(tdm__model_build(s, &model), TDM_OK);
            tdm__model_free(model);
            tdm__import_pytorch_free(s);
        } else {
            assert_true(st == TDM_FORMAT_ERROR || st == TDM_TRUNCATED);
            assert_non_null(strstr(err, "at byte "));
            assert_printable(err);
        }
    }
    /* Bit flips inside sizes and strings keep the pickle valid: both paths
     * were exercised. */
    assert_true(accepted > 0 && accepted < 4000);
    free(m);
    free(b);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_encodings),
        cmocka_unit_test(test_floats_strings_constants),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_empty_containers),
        cmocka_unit_test(test_read_cpython),
        cmocka_unit_test(test_import_cpython),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_cycles),
        cmocka_unit_test(test_many_references),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_random_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
