/* tests/unit/test_format_zstd.c: the events_zstd record of format 1.5
 * (docs/format.md §4.7a): the writer compresses an events chunk when that
 * saves bytes and stays within what readers accept, the reader gives back
 * every event, and a damaged or lying frame is an error with a byte
 * offset, never an allocation the file's size does not bound.
 *
 * `test_format_zstd --write-sample-1.5 PATH` writes tests/data/sample-v1.5.tdm
 * (done once for that file; sample_v1_5_file_keeps_parsing reads it).
 */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "format_fixtures.h"

static size_t count_type(const fx_rec *recs, size_t n, uint32_t type)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += recs[i].type == type;
    return k;
}

static void expect_read_back(const tdm_snap *want, const uint8_t *bytes, size_t len)
{
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact(bytes, len, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    fx_expect_same(want, s);
    tdm__snap_free(s);
}

/* 200003 events in four chunks, every one compressed, all read back. */
static void events_are_written_compressed(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_big(&f, 200003, 5000, 42);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[64];
    size_t n = fx_records(bytes, len, recs, 64);
    assert_int_equal(count_type(recs, n, TDM_REC_EVENTS_ZSTD), 4);
    assert_int_equal(count_type(recs, n, TDM_REC_EVENTS), 0);
    assert_int_equal(bytes[11], TDM_FMT_MINOR);
    expect_read_back(&f.s, bytes, len);
    free(bytes);
    fx_free(&f);
}

/* Replaces f's history with `n` copies of one snapshot mark. */
static void same_event_n_times(fx_snap *f, size_t n)
{
    tdm_event *e = fx_calloc(n, sizeof *e);
    for (size_t i = 0; i < n; i++)
        e[i] = (tdm_event){.time_ns = 1700000000000000000ull, .action = TDM_ACTION_SNAPSHOT};
    free((void *)f->s.events);
    f->s.events = e;
    f->s.event_count = n;
    f->s.annotations = NULL;
    f->s.annotation_count = 0;
}

/* A chunk that compression does not shrink (one event), and one it would
 * shrink past TDM_FMT_ZSTD_MAX_RATIO (65536 identical events), are written
 * as plain events records, which every reader reads. */
static void chunks_compression_does_not_suit_stay_plain(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t want[] = {1, 65536};
    for (size_t k = 0; k < 2; k++) {
        same_event_n_times(&f, want[k]);
        size_t len;
        uint8_t *bytes = fx_write_bytes(&f.s, &len);
        fx_rec recs[32];
        size_t n = fx_records(bytes, len, recs, 32);
        assert_int_equal(count_type(recs, n, TDM_REC_EVENTS), 1);
        assert_int_equal(count_type(recs, n, TDM_REC_EVENTS_ZSTD), 0);
        expect_read_back(&f.s, bytes, len);
        free(bytes);
    }
    fx_free(&f);
}

/* An events payload of two events, the second's action `action`. */
static void pack_two_events(fx_file *b, uint64_t action)
{
    static const char *const cols[] = {"device", "addr", "size", "requested", "stream",
                                       "stack", "phase", "step", "category"};
    msgpack_pack_map(&b->pk, 13);
    fx_key(b, "first"), msgpack_pack_uint64(&b->pk, 0);
    fx_key(b, "count"), msgpack_pack_uint64(&b->pk, 2);
    fx_key(b, "time_ns"), msgpack_pack_array(&b->pk, 2);
    msgpack_pack_uint64(&b->pk, 1), msgpack_pack_uint64(&b->pk, 1);
    fx_key(b, "action"), msgpack_pack_array(&b->pk, 2);
    msgpack_pack_uint64(&b->pk, 0), msgpack_pack_uint64(&b->pk, action);
    for (int i = 0; i < 9; i++)
        fx_key(b, cols[i]), msgpack_pack_uint64(&b->pk, 0);
}

/* Replaces the record being built in b->rec by `z`, `zn` bytes. */
static void set_payload(fx_file *b, const void *z, size_t zn)
{
    msgpack_sbuffer_clear(&b->rec);
    msgpack_sbuffer_write(&b->rec, z, zn);
}

/* Compresses the record being built, with or without the frame's size. */
static void compress_payload(fx_file *b, int state_size)
{
    size_t bound = ZSTD_compressBound(b->rec.size);
    void *z = malloc(bound);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    assert_non_null(z);
    assert_non_null(c);
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, state_size)));
    size_t zn;
    if (state_size) {
        zn = ZSTD_compress2(c, z, bound, b->rec.data, b->rec.size);
    } else { /* streamed: the frame cannot say how big it is */
        ZSTD_inBuffer in = {b->rec.data, b->rec.size, 0};
        ZSTD_outBuffer out = {z, bound, 0};
        zn = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
        assert_int_equal(zn, 0);
        zn = out.pos;
    }
    assert_false(ZSTD_isError(zn));
    set_payload(b, z, zn);
    ZSTD_freeCCtx(c);
    free(z);
}

/* Reads b, expecting a format error at `offset` whose message holds
 * `want` and names the events_zstd record at `rec_at`. */
static void expect_error(fx_file *b, uint64_t offset, const char *want, size_t rec_at)
{
    tdm_snap *s = NULL;
    tdm_read_error err;
    assert_int_equal(fx_read_exact((uint8_t *)b->file.data, b->file.size, 0, &s, &err),
                     TDM_FORMAT_ERROR);
    if (!strstr(err.message, want))
        fail_msg("'%s' lacks '%s'", err.message, want);
    char rec[96];
    snprintf(rec, sizeof rec, "(events_zstd record at byte %zu)", rec_at);
    if (!strstr(err.message, rec))
        fail_msg("'%s' lacks '%s'", err.message, rec);
    assert_int_equal(err.offset, offset);
}

/* Each kind of bad frame, from a file built by hand: the error names the
 * record, and the byte where its compressed payload starts. */
static void bad_frames_are_errors_with_offsets(void **state)
{
    (void)state;
    enum { JUNK, NO_SIZE, CUT, BAD_VALUE, RATIO, COUNT };
    for (int k = 0; k < COUNT; k++) {
        fx_file b;
        fx_file_begin(&b, 1, 5);
        fx_emit_header(&b, "h");
        size_t rec_at = b.file.size;
        pack_two_events(&b, k == BAD_VALUE ? 254 : 0);
        if (k == JUNK) {
            set_payload(&b, "not zstd", 8);
        } else if (k == RATIO) { /* 300 KiB of one byte: a frame of ~30 bytes */
            size_t big = 300 << 10;
            char *p = malloc(big);
            assert_non_null(p);
            memset(p, 'x', big);
            set_payload(&b, p, big);
            free(p);
            compress_payload(&b, 1);
        } else {
            compress_payload(&b, k != NO_SIZE);
        }
        if (k == CUT)
            b.rec.size -= 3;
        size_t payload_len = b.rec.size;
        size_t payload_at = b.file.size + 3 + (payload_len <= 0xff ? 1 : 2);
        fx_emit(&b, TDM_REC_EVENTS_ZSTD);
        fx_emit_end(&b, 2);
        char want[200];
        switch (k) {
        case JUNK:
            snprintf(want, sizeof want, "no zstd frame at byte %zu", payload_at);
            break;
        case NO_SIZE:
            snprintf(want, sizeof want, "the zstd frame at byte %zu does not state its size",
                     payload_at);
            break;
        case CUT:
            snprintf(want, sizeof want, "the zstd frame at byte %zu does not decompress",
                     payload_at);
            break;
        case BAD_VALUE: {
            /* where the 254 is in the decompressed payload */
            fx_file p;
            fx_file_begin(&p, 1, 5);
            pack_two_events(&p, 254);
            const uint8_t *hit = memmem(p.rec.data, p.rec.size, "\xa6" "action\x92\x00\xcc\xfe", 11);
            assert_non_null(hit);
            snprintf(want, sizeof want,
                     "bad value for field 'action' at byte %zu of the payload decompressed "
                     "from byte %zu: 254 is out of range",
                     (size_t)(hit - (const uint8_t *)p.rec.data) + 9, payload_at);
            fx_file_free(&p);
            break;
        }
        default:
            snprintf(want, sizeof want, "the zstd frame at byte %zu states %zu bytes", payload_at,
                     (size_t)300 << 10);
            break;
        }
        expect_error(&b, payload_at, want, rec_at);
        fx_file_free(&b);
    }
}

/* A file cut inside an events_zstd record is truncated there, and with
 * partial_ok keeps the chunks before it. */
static void a_cut_compressed_chunk_is_truncation(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_big(&f, 70000, 100, 7);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[32];
    size_t n = fx_records(bytes, len, recs, 32), second = 0, seen = 0;
    for (size_t i = 0; i < n && !second; i++)
        if (recs[i].type == TDM_REC_EVENTS_ZSTD && ++seen == 2)
            second = i;
    assert_true(second > 0);
    tdm_snap *s = NULL;
    tdm_read_error err;
    size_t cut = recs[second].payload + recs[second].payload_len / 2;
    assert_int_equal(fx_read_exact(bytes, cut, 0, &s, &err), TDM_TRUNCATED);
    assert_int_equal(err.offset, recs[second].start);
    assert_int_equal(fx_read_exact(bytes, cut, 1, &s, &err), TDM_OK);
    assert_int_equal(s->event_count, 65536);
    for (size_t i = 0; i < 65536; i++)
        fx_expect_event(&f.s.events[i], &s->events[i]);
    tdm__snap_free(s);
    free(bytes);
    fx_free(&f);
}

/* tests/data/sample-v1.5.tdm: 800 events of fx_build_big's seed 5, in
 * an events_zstd record; the same bytes again from the zstd release that
 * wrote it (another release may compress differently, and still reads). */
#define SAMPLE_1_5_ZSTD 10504
static void build_sample_1_5(fx_snap *f)
{
    fx_build_big(f, 800, 40, 5);
}

static void sample_v1_5_file_keeps_parsing(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes;
    tdm_snap *s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.5.tdm", 5, &bytes, &len);
    fx_rec recs[32];
    size_t n = fx_records(bytes, len, recs, 32);
    assert_int_equal(count_type(recs, n, TDM_REC_EVENTS_ZSTD), 1);
    fx_snap f;
    build_sample_1_5(&f);
    fx_expect_same(&f.s, s);
    tdm__snap_free(s);
    if (ZSTD_versionNumber() == SAMPLE_1_5_ZSTD)
        fx_expect_writer_bytes(&f.s, 5, bytes, len);
    free(bytes);
    fx_free(&f);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-sample-1.5") == 0) {
        fx_snap f;
        build_sample_1_5(&f);
        tdm_status st = tdm__snap_write(&f.s, argv[2]);
        fx_free(&f);
        fprintf(stderr, "%s: %s (zstd %u)\n", argv[2], tdm_status_name(st), ZSTD_versionNumber());
        return st == TDM_OK ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(events_are_written_compressed),
        cmocka_unit_test(chunks_compression_does_not_suit_stay_plain),
        cmocka_unit_test(bad_frames_are_errors_with_offsets),
        cmocka_unit_test(a_cut_compressed_chunk_is_truncation),
        cmocka_unit_test(sample_v1_5_file_keeps_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
