/* tests/unit/test_format_robust.c: the .tdm reader on cut and corrupt
 * input.  It must never crash (these run under ASan+UBSan too, each input
 * in an exact-size heap copy); every error names a byte offset inside the
 * file and says why; a cut file is TDM_TRUNCATED at or before the cut, or
 * with partial_ok the whole records before it; any single changed byte is
 * caught (checksums); corrupt payloads with valid checksums are caught by
 * validation; whatever it does return honours the documented invariants;
 * and a lying length never turns into a huge allocation.  A file (or a
 * pipe) with a snapshot's signature and junk after it is refused at the
 * junk, not read whole first. */
#define _GNU_SOURCE /* memmem */
#include "format_fixtures.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

static int error_status(tdm_status st)
{
    return st == TDM_FORMAT_ERROR || st == TDM_TRUNCATED || st == TDM_UNSUPPORTED_VERSION;
}

/* What the reader promises consumers; checked on everything it returns. */
static void expect_invariants(const tdm_snap *s)
{
    assert_true(s->stack_count >= 1 && s->stacks[0].depth == 0);
    assert_true(s->phase_count >= 1 && s->phase_names[0][0] == '\0');
    for (size_t i = 0; i < s->phase_count; i++)
        assert_non_null(s->phase_names[i]);
    for (size_t i = 0; i < s->frame_count; i++)
        assert_true(s->frames[i].function && s->frames[i].file && s->frames[i].module);
    for (size_t i = 0; i < s->stack_count; i++)
        for (uint32_t k = 0; k < s->stacks[i].depth; k++)
            assert_true(s->stacks[i].frames[k] < s->frame_count);
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        assert_true(e->stack_id < s->stack_count && e->phase < s->phase_count);
        assert_true(e->action < TDM_ACTION_COUNT_ && e->category < TDM_CATEGORY_COUNT_);
        assert_true(e->device >= -1);
    }
    size_t next = 0;
    for (size_t i = 0; i < s->segment_count; i++) {
        const tdm_snap_segment *g = &s->segments[i];
        assert_int_equal(g->first_block, next);
        next += g->block_count;
        assert_true(next <= s->block_count && g->stack_id < s->stack_count && g->pool <= 2);
        uint64_t at = g->address;
        for (uint32_t k = 0; k < g->block_count; k++) {
            const tdm_snap_block *b = &s->blocks[g->first_block + k];
            assert_true(b->address == at && b->stack_id < s->stack_count && b->state <= 2);
            at += b->size;
        }
        assert_int_equal(at - g->address, g->total_size);
    }
    assert_true(s->header.host && s->header.command && s->header.config && s->header.metadata &&
                s->header.tool_version && s->header.alloc_mode);
}

/* Reads `len` bytes; on error checks the report, on success the invariants. */
static tdm_status read_checked(const uint8_t *p, size_t len, int partial_ok, tdm_snap **out)
{
    tdm_read_error err;
    tdm_snap *s = (tdm_snap *)1;
    tdm_status st = fx_read_exact(p, len, partial_ok, &s, &err);
    if (st == TDM_OK) {
        expect_invariants(s);
    } else {
        if (!error_status(st) || !strstr(err.message, "byte"))
            fail_msg("unexpected %s: %s", tdm_status_name(st), err.message);
        assert_null(s);
        assert_true(err.offset <= len);
        assert_true(strlen(err.message) > 10);
        assert_non_null(strstr(err.message, "byte"));
    }
    if (out)
        *out = s;
    else if (st == TDM_OK)
        tdm__snap_free(s);
    return st;
}

static void every_cut_is_truncated_or_partial(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[32];
    size_t nrec = fx_records(bytes, len, recs, 32);
    size_t partial_results = 0;
    for (size_t cut = 0; cut < len; cut++) {
        tdm_read_error err;
        tdm_snap *s = (tdm_snap *)1;
        assert_int_equal(fx_read_exact(bytes, cut, 0, &s, &err), TDM_TRUNCATED);
        assert_null(s);
        assert_true(err.offset <= cut);
        assert_true(strstr(err.message, "truncated") || strstr(err.message, "ends"));

        tdm_status st = fx_read_exact(bytes, cut, 1, &s, &err);
        if (cut < recs[1].start) { /* no whole header: nothing to return */
            assert_int_equal(st, TDM_TRUNCATED);
            continue;
        }
        assert_int_equal(st, TDM_OK);
        partial_results++;
        assert_int_equal(s->complete, 0);
        assert_true(err.offset <= cut); /* still says where it was cut */
        expect_invariants(s);
        /* Exactly the whole records before the cut made it in. */
        size_t whole_events = 0;
        for (size_t i = 0; i < nrec; i++)
            if ((recs[i].type == TDM_REC_EVENTS || recs[i].type == TDM_REC_EVENTS_ZSTD) &&
                recs[i].crc_at + 5 <= cut)
                whole_events = f.s.event_count;
        assert_int_equal(s->event_count, whole_events);
        for (size_t i = 0; i < s->event_count; i++)
            fx_expect_event(&f.s.events[i], &s->events[i]);
        assert_string_equal(s->header.host, "sample-host");
        tdm__snap_free(s);
    }
    assert_true(partial_results > len / 2);
    free(bytes);
    fx_free(&f);
}

static void cuts_in_a_large_file_keep_whole_chunks(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_big(&f, 150000, 300, 9);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[64];
    size_t nrec = fx_records(bytes, len, recs, 64);
    size_t events_before = 0;
    for (size_t i = 0; i < nrec; i++) {
        size_t cuts[2] = {recs[i].start, recs[i].payload + recs[i].payload_len / 2};
        for (int c = 0; c < 2; c++) {
            tdm_snap *s;
            tdm_read_error err;
            tdm_status st = fx_read_exact(bytes, cuts[c], 1, &s, &err);
            if (i == 0) {
                assert_int_equal(st, TDM_TRUNCATED);
                continue;
            }
            assert_int_equal(st, TDM_OK);
            assert_int_equal(err.offset, recs[i].start);
            assert_int_equal(s->event_count, events_before);
            if (events_before)
                fx_expect_event(&f.s.events[events_before - 1], &s->events[events_before - 1]);
            tdm__snap_free(s);
        }
        if (recs[i].type == TDM_REC_EVENTS || recs[i].type == TDM_REC_EVENTS_ZSTD)
            events_before += events_before + TDM_FMT_CHUNK <= f.s.event_count
                                 ? TDM_FMT_CHUNK
                                 : f.s.event_count - events_before;
    }
    free(bytes);
    fx_free(&f);
}

static void any_changed_byte_is_caught(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    const uint8_t flips[] = {0x01, 0x80, 0xff, 0x10};
    for (size_t at = 0; at < len; at++)
        for (size_t k = 0; k < sizeof flips; k++) {
            bytes[at] ^= flips[k];
            tdm_snap *s;
            tdm_status st = read_checked(bytes, len, k & 1, &s);
            /* Noticed: an error, or (partial_ok) a result marked incomplete
             * when a record's length now runs past the end.  Byte 11 is the
             * minor version: any unsigned value is fine. */
            if (st == TDM_OK && s->complete && !(at == 11 && bytes[at] <= 0x7f))
                fail_msg("byte %zu ^ 0x%02x was not noticed", at, flips[k]);
            if (st == TDM_OK)
                tdm__snap_free(s);
            bytes[at] ^= flips[k];
        }
    free(bytes);
    fx_free(&f);
}

/* Corrupts payload bytes and then repairs the checksum, so the corruption
 * reaches the record parsers. */
static void corrupt_payloads_with_valid_checksums(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *orig = fx_write_bytes(&f.s, &len);
    fx_rec recs[32];
    size_t nrec = fx_records(orig, len, recs, 32);
    uint8_t *p = fx_calloc(len, 1);
    static const uint8_t special[] = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xc0, 0xc1,
                                      0xc2, 0xc3, 0xcc, 0xcf, 0xd3, 0xdc, 0xdd, 0xde, 0xdf,
                                      0xe0, 0xff};
    uint64_t seed = 20240601;
    size_t ok = 0, errors = 0, skipped = 0;
    for (int trial = 0; trial < 20000; trial++) {
        memcpy(p, orig, len);
        const fx_rec *r = &recs[fx_rand(&seed) % nrec];
        if (r->payload_len == 0)
            continue;
        int changes = 1 + (int)(fx_rand(&seed) % 4);
        for (int c = 0; c < changes; c++) {
            size_t at = r->payload + fx_rand(&seed) % r->payload_len;
            uint64_t how = fx_rand(&seed) % 4;
            if (how == 0)
                p[at] = (uint8_t)fx_rand(&seed);
            else if (how == 1)
                p[at] = special[fx_rand(&seed) % sizeof special];
            else if (how == 2)
                p[at] ^= (uint8_t)(1u << (fx_rand(&seed) % 8));
            else /* a huge length: array32 / map32 / str32 of 0xffffffff */
                for (size_t i = 0; i < 5 && at + i < r->payload + r->payload_len; i++)
                    p[at + i] = i == 0 ? (uint8_t[]){0xdd, 0xdf, 0xdb}[fx_rand(&seed) % 3] : 0xff;
        }
        if (!fx_fix_crc(p, r)) {
            skipped++;
            continue;
        }
        if (read_checked(p, len, (int)(trial & 1), NULL) == TDM_OK)
            ok++;
        else
            errors++;
    }
    print_message("corrupt payloads: %zu errors, %zu read (still valid), %zu skipped\n",
                  errors, ok, skipped);
    assert_true(errors > 10000);
    free(p);
    free(orig);
    fx_free(&f);
}

/* Random msgpack values in well-formed records of every type. */
static void pack_random(msgpack_packer *pk, uint64_t *seed, int depth)
{
    static const char *const keys[] = {"first", "rows", "count", "time_ns", "action", "device",
                                       "addr", "size", "requested", "stream", "stack", "phase",
                                       "step", "category", "events", "dropped_events", "host"};
    switch (fx_rand(seed) % (depth > 2 ? 5 : 8)) {
    case 0: msgpack_pack_uint64(pk, fx_rand(seed) % 5); break;
    case 1: msgpack_pack_int64(pk, (int64_t)fx_rand(seed) >> (fx_rand(seed) % 64)); break;
    case 2: msgpack_pack_str_with_body(pk, "sim", fx_rand(seed) % 4); break;
    case 3: fx_rand(seed) & 1 ? msgpack_pack_nil(pk) : msgpack_pack_true(pk); break;
    case 4: msgpack_pack_double(pk, 1.5); break;
    case 5: {
        size_t n = fx_rand(seed) % 6;
        msgpack_pack_map(pk, n);
        for (size_t i = 0; i < n; i++) {
            const char *k = keys[fx_rand(seed) % (sizeof keys / sizeof keys[0])];
            msgpack_pack_str_with_body(pk, k, strlen(k));
            pack_random(pk, seed, depth + 1);
        }
        break;
    }
    default: {
        size_t n = fx_rand(seed) % 9;
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++)
            pack_random(pk, seed, depth + 1);
    }
    }
}

static void random_records_never_crash(void **state)
{
    (void)state;
    uint64_t seed = 77;
    for (int trial = 0; trial < 5000; trial++) {
        fx_file b;
        fx_file_begin(&b, 1, 0);
        fx_emit_header(&b, "h");
        int nrec = 1 + (int)(fx_rand(&seed) % 6);
        for (int i = 0; i < nrec; i++) {
            uint32_t type = 1 + (uint32_t)(fx_rand(&seed) % TDM_REC_MAX_);
            if (fx_rand(&seed) % 3) { /* a map, as records are */
                size_t n = 1 + fx_rand(&seed) % 4;
                msgpack_pack_map(&b.pk, n);
                for (size_t k = 0; k < n; k++) {
                    static const char *const keys[] = {"first", "rows", "count", "events"};
                    fx_key(&b, keys[fx_rand(&seed) % 4]);
                    if (fx_rand(&seed) & 1)
                        msgpack_pack_uint64(&b.pk, 0);
                    else
                        pack_random(&b.pk, &seed, 1);
                }
            } else {
                pack_random(&b.pk, &seed, 0);
            }
            fx_emit(&b, type);
        }
        if (fx_rand(&seed) & 1)
            fx_emit_end(&b, 0);
        read_checked((uint8_t *)b.file.data, b.file.size, (int)(trial & 1), NULL);
        fx_file_free(&b);
    }
}

static void garbage_never_crashes(void **state)
{
    (void)state;
    uint64_t seed = 5;
    uint8_t buf[512];
    for (int trial = 0; trial < 20000; trial++) {
        size_t len = fx_rand(&seed) % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)fx_rand(&seed);
        /* Mostly behind a valid signature, so the envelope code is hit. */
        if (trial % 4 && len >= 12)
            memcpy(buf, "\x93\xa8tidemark\x01\x00", 12);
        if (trial % 8 == 1 && len >= 14)
            buf[12] = 0x93, buf[13] = (uint8_t)(fx_rand(&seed) % 12);
        assert_true(read_checked(buf, len, (int)(trial & 1), NULL) != TDM_OK);
    }
}

static void lying_lengths_are_refused_not_allocated(void **state)
{
    (void)state;
    /* An events record claiming two billion events in a few bytes. */
    fx_file b;
    fx_file_begin(&b, 1, 0);
    fx_emit_header(&b, "h");
    static const char *const cols[] = {"time_ns", "action", "device", "addr", "size", "requested",
                                       "stream", "stack", "phase", "step", "category"};
    msgpack_pack_map(&b.pk, 13);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "count"), msgpack_pack_uint64(&b.pk, 2000000000);
    for (int i = 0; i < 11; i++)
        fx_key(&b, cols[i]), msgpack_pack_uint64(&b.pk, 0);
    fx_emit(&b, TDM_REC_EVENTS);
    fx_emit_end(&b, 2000000000);
    tdm_snap *s;
    tdm_read_error err;
    assert_int_equal(fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, &s, &err),
                     TDM_FORMAT_ERROR);
    assert_non_null(strstr(err.message, "field 'count'"));
    assert_non_null(strstr(err.message, "events record at byte"));
    fx_file_free(&b);

    /* A strings table whose array header claims 2^32-1 rows. */
    fx_file_begin(&b, 1, 0);
    fx_emit_header(&b, "h");
    msgpack_pack_map(&b.pk, 2);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows");
    msgpack_sbuffer_write(&b.rec, "\xdd\xff\xff\xff\xff\xa1x", 7);
    size_t rows_at = b.file.size + 4 + (b.rec.size - 7); /* 93, type, c4, length */
    fx_emit(&b, TDM_REC_STRINGS);
    fx_emit_end(&b, 0);
    assert_int_equal(fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, &s, &err),
                     TDM_FORMAT_ERROR);
    assert_int_equal(err.offset, rows_at);
    assert_non_null(strstr(err.message, "runs past the end"));
    fx_file_free(&b);
}

static void errors_name_the_field_and_byte(void **state)
{
    (void)state;
    /* An unknown action value, 254, in the second event. */
    static const char *const cols[] = {"device", "addr", "size", "requested", "stream",
                                       "stack", "phase", "step", "category"};
    fx_file b;
    fx_file_begin(&b, 1, 0);
    fx_emit_header(&b, "h");
    msgpack_pack_map(&b.pk, 13);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "count"), msgpack_pack_uint64(&b.pk, 2);
    fx_key(&b, "time_ns"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, 1), msgpack_pack_uint64(&b.pk, 1);
    fx_key(&b, "action"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, 0), msgpack_pack_uint64(&b.pk, 254);
    for (int i = 0; i < 9; i++)
        fx_key(&b, cols[i]), msgpack_pack_uint64(&b.pk, 0);
    size_t events_at = b.file.size;
    fx_emit(&b, TDM_REC_EVENTS);
    fx_emit_end(&b, 2);
    const uint8_t *data = (const uint8_t *)b.file.data;
    const uint8_t *key = memmem(data, b.file.size, "\xa6" "action\x92\x00\xcc\xfe", 11);
    assert_non_null(key);
    size_t action_at = (size_t)(key - data) + 9;
    tdm_snap *s;
    tdm_read_error err;
    assert_int_equal(fx_read_exact(data, b.file.size, 0, &s, &err), TDM_FORMAT_ERROR);
    assert_int_equal(err.offset, action_at);
    char want[160];
    snprintf(want, sizeof want, "bad value for field 'action' at byte %zu", action_at);
    assert_non_null(strstr(err.message, want));
    snprintf(want, sizeof want, "(events record at byte %zu)", events_at);
    assert_non_null(strstr(err.message, want));
    fx_file_free(&b);

    /* A cut inside the events record of a written file names that record. */
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[32];
    size_t nrec = fx_records(bytes, len, recs, 32);
    for (size_t i = 0; i < nrec; i++) {
        if (recs[i].type != TDM_REC_EVENTS && recs[i].type != TDM_REC_FRAMES)
            continue;
        tdm_status want_st = recs[i].type == TDM_REC_EVENTS ? TDM_TRUNCATED : TDM_FORMAT_ERROR;
        if (want_st == TDM_TRUNCATED) {
            assert_int_equal(fx_read_exact(bytes, recs[i].payload + 10, 0, &s, &err), want_st);
            snprintf(want, sizeof want, "(events record at byte %zu)", recs[i].start);
        } else { /* one flipped bit in the frames record */
            bytes[recs[i].payload + 20] ^= 4;
            assert_int_equal(fx_read_exact(bytes, len, 0, &s, &err), want_st);
            bytes[recs[i].payload + 20] ^= 4;
            assert_non_null(strstr(err.message, "checksum mismatch"));
            snprintf(want, sizeof want, "(frames record at byte %zu)", recs[i].start);
        }
        assert_int_equal(err.offset, recs[i].start);
        assert_non_null(strstr(err.message, want));
    }
    free(bytes);
    fx_free(&f);
}

static void trailing_bytes_and_missing_header_are_errors(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    uint8_t *more = fx_calloc(len + 1, 1);
    memcpy(more, bytes, len);
    more[len] = 0x00;
    tdm_snap *s;
    tdm_read_error err;
    assert_int_equal(fx_read_exact(more, len + 1, 1, &s, &err), TDM_FORMAT_ERROR);
    assert_int_equal(err.offset, len);
    assert_non_null(strstr(err.message, "after the end record"));
    /* No header first. */
    fx_file b;
    fx_file_begin(&b, 1, 0);
    fx_emit_end(&b, 0);
    assert_int_equal(fx_read_exact((uint8_t *)b.file.data, b.file.size, 1, &s, &err),
                     TDM_FORMAT_ERROR);
    assert_non_null(strstr(err.message, "header"));
    fx_file_free(&b);
    /* Not a snapshot at all. */
    assert_int_equal(fx_read_exact((const uint8_t *)"PK\x03\x04 zip", 8, 1, &s, &err),
                     TDM_FORMAT_ERROR);
    assert_int_equal(err.offset, 0);
    free(more);
    free(bytes);
    fx_free(&f);
}

/* The signature and version a 1.3 file starts with. */
static const uint8_t good_head[12] = {0x93, 0xa8, 't', 'i', 'd', 'e', 'm', 'a', 'r', 'k', 1, 3};

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void *write_zeros(void *arg)
{
    int fd = *(int *)arg;
    static uint8_t zeros[1 << 16];
    (void)!write(fd, good_head, sizeof good_head);
    /* Stops by itself after 256 MiB (a reader that reads on to the end
     * still ends), or when the reader has gone (EPIPE). */
    for (int i = 0; i < 4096; i++)
        if (write(fd, zeros, sizeof zeros) < 0)
            break;
    close(fd);
    return NULL;
}

static void signature_then_junk_is_refused_at_the_junk(void **state)
{
    (void)state;
    long before = max_rss_kib();
    /* A 1 GiB sparse file: the head, then zeros. */
    char path[] = "/tmp/tdm-junk-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, good_head, sizeof good_head), (ssize_t)sizeof good_head);
    assert_int_equal(ftruncate(fd, (off_t)1 << 30), 0);
    close(fd);
    tdm_snap *s = NULL;
    tdm_read_error err;
    assert_int_equal(tdm__snap_read_file(path, 1, &s, &err), TDM_FORMAT_ERROR);
    unlink(path);
    assert_int_equal(err.offset, 12);
    assert_non_null(strstr(err.message, "expected a record at byte 12"));
    /* The same through a pipe that goes on and on. */
    signal(SIGPIPE, SIG_IGN);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_zeros, &p[1]), 0);
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", p[0]);
    assert_int_equal(tdm__snap_read_file(name, 1, &s, &err), TDM_FORMAT_ERROR);
    assert_int_equal(err.offset, 12);
    close(p[0]);
    pthread_join(t, NULL);
    signal(SIGPIPE, SIG_DFL);
    /* Neither was held in memory whole (read whole: +1 GiB, +256 MiB). */
    long grew = max_rss_kib() - before;
    if (grew > 64 * 1024)
        fail_msg("reading junk after a signature grew the peak RSS by %ld KiB", grew);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cut_is_truncated_or_partial),
        cmocka_unit_test(cuts_in_a_large_file_keep_whole_chunks),
        cmocka_unit_test(any_changed_byte_is_caught),
        cmocka_unit_test(corrupt_payloads_with_valid_checksums),
        cmocka_unit_test(random_records_never_crash),
        cmocka_unit_test(garbage_never_crashes),
        cmocka_unit_test(lying_lengths_are_refused_not_allocated),
        cmocka_unit_test(errors_name_the_field_and_byte),
        cmocka_unit_test(trailing_bytes_and_missing_header_are_errors),
        cmocka_unit_test(signature_then_junk_is_refused_at_the_junk),
    };
    /* TDM_TEST_ONLY=NAME runs one case (tests/CMakeLists.txt: under TSan,
     * the one that starts a thread). */
    const char *only = getenv("TDM_TEST_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
