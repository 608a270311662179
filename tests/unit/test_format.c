/* tests/unit/test_format.c: the .tdm writer and reader: round trips keep
 * every field (small, large multi-chunk, extreme values, empty), unknown
 * records and fields are skipped, newer major versions are refused, failed
 * writes leave nothing behind, the committed sample-v1.tdm keeps parsing
 * with its known values, and 1M events write and read fast and small.
 * Robustness against cut and corrupt input: test_format_robust.c.
 *
 * `test_format --write-sample PATH` writes the sample file (done once for
 * tests/data/sample-v1.tdm; see tests/data/README.md). */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "format_fixtures.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Writes, reads back and compares; returns the file size. */
static size_t round_trip(const tdm_snap *s)
{
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/rt.tdm", dir);
    assert_int_equal(tdm__snap_write(s, path), TDM_OK);
    assert_int_equal(fx_dir_entries(dir), 1); /* no temporary left over */
    tdm_snap *got = NULL;
    tdm_read_error err;
    tdm_status st = tdm__snap_read_file(path, 0, &got, &err);
    if (st != TDM_OK)
        fail_msg("read: %s at %llu: %s", tdm_status_name(st), (unsigned long long)err.offset,
                 err.message);
    assert_int_equal(got->complete, 1);
    fx_expect_same(s, got);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    tdm__snap_free(got);
    fx_rm_dir(dir);
    return (size_t)sb.st_size;
}

static void crc_matches_zlib(void **state)
{
    (void)state;
    assert_int_equal(tdm__format_crc32(0, "123456789", 9), 0xCBF43926u);
    uint8_t buf[4200];
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)fx_rand(&seed);
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n < 80; n++)
            assert_int_equal(tdm__format_crc32(7, buf + off, n), fx_crc32(7, buf + off, n));
    uint32_t whole = tdm__format_crc32(3, buf, sizeof buf);
    assert_int_equal(whole, fx_crc32(3, buf, sizeof buf));
    assert_int_equal(tdm__format_crc32(tdm__format_crc32(3, buf, 1000), buf + 1000, 3200), whole);
}

static void sample_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    round_trip(&f.s);
    fx_free(&f);
}

static void big_round_trip_spans_chunks(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_big(&f, 200003, 70000, 42);
    round_trip(&f.s);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[64];
    size_t n = fx_records(bytes, len, recs, 64);
    size_t per_type[TDM_REC_MAX_ + 1] = {0};
    for (size_t i = 0; i < n; i++)
        per_type[recs[i].type]++;
    assert_int_equal(per_type[TDM_REC_HEADER], 1);
    /* 200003 = 3 * 65536 + 3395; compressed or not (test_format_zstd.c) */
    assert_int_equal(per_type[TDM_REC_EVENTS] + per_type[TDM_REC_EVENTS_ZSTD], 4);
    assert_int_equal(per_type[TDM_REC_STRINGS], 2);
    assert_int_equal(per_type[TDM_REC_FRAMES], 2);
    assert_int_equal(per_type[TDM_REC_STACKS], 2);
    assert_true(per_type[TDM_REC_SEGMENTS] >= 2);
    assert_int_equal(recs[n - 1].type, TDM_REC_END);
    free(bytes);
    fx_free(&f);
}

static void extreme_values_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    tdm_snap *s = &f.s;
    /* String lengths at each msgpack boundary, and bytes that are not ASCII. */
    char *longs = fx_calloc(4, 70001);
    size_t lens[4] = {31, 255, 65535, 70000};
    for (int i = 0; i < 4; i++) {
        memset(longs + 70001 * i, 'a' + i, lens[i]);
        longs[70001 * i + lens[i]] = '\0';
    }
    s->header.host = "h\xc3\xa9te-\xff";
    s->header.config = longs;
    s->header.metadata = longs + 70001;
    s->header.command = longs + 2 * 70001;
    s->header.tool_version = longs + 3 * 70001;
    s->header.pid = INT64_MIN;
    s->header.rank = INT32_MAX;
    s->header.local_rank = -1;
    s->header.world_size = INT32_MAX;
    s->header.start_time_us = UINT64_MAX;
    s->header.max_entries = UINT64_MAX;
    s->header.record_mode = TDM_RECORD_OFF;
    s->header.context_mode = TDM_CONTEXT_NONE;
    s->header.stacks_mode = TDM_STACKS_PYTHON;
    tdm_event *e = (tdm_event *)s->events;
    e[0].time_ns = UINT64_MAX; /* then backwards */
    e[1].time_ns = 0;
    e[2].addr = UINT64_MAX;
    e[3].size = UINT64_MAX;
    e[3].requested = 0;
    e[4].requested = UINT64_MAX; /* more than size */
    e[5].stream = UINT64_MAX;
    e[6].step = UINT32_MAX;
    e[7].step = 0; /* step going down */
    e[8].device = INT16_MAX;
    tdm_snap_device_stats *ds = (tdm_snap_device_stats *)s->stats;
    ds[0].stats.allocated_bytes = (tdm_stat){INT64_MIN, INT64_MAX, -1, 0};
    ds[1].stats.num_ooms = UINT64_MAX;
    ds[1].device = -1;
    round_trip(s);

    /* A chunk where every column but time is constant: scalar columns. */
    for (size_t i = 0; i < s->event_count; i++)
        e[i] = (tdm_event){.time_ns = 5 + i, .addr = 0, .size = 9, .requested = 9,
                           .action = TDM_ACTION_ALLOC, .stack_id = 2, .phase = 1, .step = 3};
    round_trip(s);
    /* Constant deltas are scalars too. */
    for (size_t i = 0; i < s->event_count; i++)
        e[i].addr = 4096 * i;
    round_trip(s);
    free(longs);
    fx_free(&f);
}

static void empty_snapshot_round_trip(void **state)
{
    (void)state;
    tdm_snap s;
    memset(&s, 0, sizeof s); /* NULL strings are written as "" */
    fx_snap want = {0};
    want.s.header = (tdm_snap_header){.tool_version = "", .host = "", .config = "",
                                      .metadata = "", .command = "", .alloc_mode = ""};
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/empty.tdm", dir);
    assert_int_equal(tdm__snap_write(&s, path), TDM_OK);
    tdm_snap *got = NULL;
    assert_int_equal(tdm__snap_read_file(path, 0, &got, NULL), TDM_OK);
    fx_expect_same(&want.s, got);
    assert_int_equal(got->stack_count, 1);
    assert_int_equal(got->phase_count, 1);
    assert_non_null(got->stacks[0].frames);
    assert_int_equal(got->complete, 1);
    tdm__snap_free(got);
    fx_rm_dir(dir);
}

/* Inserts `rec` (a whole record) at byte `at` of a copy of `bytes`. */
static uint8_t *splice(const uint8_t *bytes, size_t len, size_t at, const fx_file *rec,
                       size_t *out_len)
{
    size_t add = rec->file.size;
    uint8_t *p = fx_calloc(len + add, 1);
    memcpy(p, bytes, at);
    memcpy(p + at, rec->file.data, add);
    memcpy(p + at + add, bytes + at, len - at);
    *out_len = len + add;
    return p;
}

static void unknown_records_are_skipped(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    fx_rec recs[32];
    size_t n = fx_records(bytes, len, recs, 32);
    size_t events_at = 0;
    for (size_t i = 0; i < n; i++)
        if (recs[i].type == TDM_REC_EVENTS || recs[i].type == TDM_REC_EVENTS_ZSTD)
            events_at = recs[i].start;
    assert_true(events_at > 0);

    /* Two records of types this reader does not know: one a map, one whose
     * payload is not even msgpack (an unknown record is never parsed). */
    fx_file u;
    fx_file_begin(&u, 1, 0);
    size_t sig = u.file.size;
    msgpack_pack_map(&u.pk, 1);
    fx_key(&u, "future");
    msgpack_pack_array(&u.pk, 2);
    msgpack_pack_double(&u.pk, 2.5);
    msgpack_pack_nil(&u.pk);
    fx_emit(&u, 200);
    msgpack_sbuffer_write(&u.rec, "\xc1\xc1\xc1", 3);
    fx_emit(&u, 201);
    memmove(u.file.data, u.file.data + sig, u.file.size - sig);
    u.file.size -= sig;
    size_t len2;
    uint8_t *with = splice(bytes, len, events_at, &u, &len2);
    tdm_snap *got = NULL;
    tdm_read_error err;
    tdm_status st = tdm__snap_read_buffer(with, len2, 0, &got, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    fx_expect_same(&f.s, got);
    assert_int_equal(got->complete, 1);
    tdm__snap_free(got);
    free(with);
    fx_file_free(&u);
    free(bytes);
    fx_free(&f);
}

/* A file written from docs/format.md by hand, using what a newer minor
 * version may add: extra map keys, extra row elements, unknown records. */
static void newer_minor_version_additions_are_read(void **state)
{
    (void)state;
    fx_file b;
    fx_file_begin(&b, 1, 7);
    fx_emit_header(&b, "future-host");
    msgpack_pack_map(&b.pk, 3); /* devices, with an extra key and row field */
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 1);
    msgpack_pack_array(&b.pk, 5);
    msgpack_pack_int64(&b.pk, 3), fx_str(&b, "cuda"), fx_str(&b, "GPU 3");
    msgpack_pack_uint64(&b.pk, 1000), fx_str(&b, "uuid-1234");
    fx_key(&b, "future_key"), msgpack_pack_map(&b.pk, 1), fx_str(&b, "k"), msgpack_pack_true(&b.pk);
    fx_emit(&b, TDM_REC_DEVICES);
    msgpack_pack_map(&b.pk, 2); /* strings */
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 3);
    fx_str(&b, ""), fx_str(&b, "main"), fx_str(&b, "a.c");
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0); /* keys in any order */
    fx_emit(&b, TDM_REC_STRINGS);
    msgpack_pack_map(&b.pk, 2); /* frames, a row with a field after kind */
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 1);
    msgpack_pack_array(&b.pk, TDM_FRM_FIELDS + 2);
    msgpack_pack_uint64(&b.pk, 0xabc), msgpack_pack_uint64(&b.pk, 1);
    msgpack_pack_uint64(&b.pk, 2), msgpack_pack_uint64(&b.pk, 9);
    msgpack_pack_uint64(&b.pk, 0), msgpack_pack_uint64(&b.pk, TDM_FRAME_INLINED);
    msgpack_pack_array(&b.pk, 0);
    fx_emit(&b, TDM_REC_FRAMES);
    msgpack_sbuffer_write(&b.rec, "\x01\x02", 2); /* an unknown record */
    fx_emit(&b, 77);
    msgpack_pack_map(&b.pk, 2); /* stacks */
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_array(&b.pk, 0);
    msgpack_pack_array(&b.pk, 1), msgpack_pack_uint64(&b.pk, 0);
    fx_emit(&b, TDM_REC_STACKS);
    msgpack_pack_map(&b.pk, 14); /* events: two, and a column from the future */
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "count"), msgpack_pack_uint64(&b.pk, 2);
    fx_key(&b, "time_ns"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, 1000), msgpack_pack_int64(&b.pk, -10);
    fx_key(&b, "action"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, TDM_ACTION_ALLOC),
        msgpack_pack_uint64(&b.pk, TDM_ACTION_FREE_COMPLETED);
    fx_key(&b, "device"), msgpack_pack_int64(&b.pk, 3);
    fx_key(&b, "addr"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, 0x10000), msgpack_pack_int64(&b.pk, 0);
    fx_key(&b, "size"), msgpack_pack_uint64(&b.pk, 512);
    fx_key(&b, "requested"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_int64(&b.pk, 12), msgpack_pack_int64(&b.pk, -8);
    fx_key(&b, "stream"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "future_col"), msgpack_pack_array(&b.pk, 2), fx_str(&b, "x"), fx_str(&b, "y");
    fx_key(&b, "stack"), msgpack_pack_uint64(&b.pk, 1);
    fx_key(&b, "phase"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "step"), msgpack_pack_array(&b.pk, 2);
    msgpack_pack_uint64(&b.pk, 5), msgpack_pack_int64(&b.pk, 1);
    fx_key(&b, "category"), msgpack_pack_uint64(&b.pk, TDM_CATEGORY_GRADIENT);
    fx_emit(&b, TDM_REC_EVENTS);
    fx_emit_end(&b, 2);

    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    assert_string_equal(s->header.host, "future-host");
    assert_string_equal(s->header.tool_version, "9.9.9");
    assert_int_equal(s->header.rank, -1);
    assert_int_equal(s->header.max_entries, 9);
    assert_int_equal(s->device_count, 1);
    assert_int_equal(s->devices[0].index, 3);
    assert_string_equal(s->devices[0].name, "GPU 3");
    assert_int_equal(s->frame_count, 1);
    assert_string_equal(s->frames[0].function, "main");
    assert_string_equal(s->frames[0].file, "a.c");
    assert_string_equal(s->frames[0].module, "");
    assert_int_equal(s->frames[0].line, 9);
    assert_int_equal(s->frames[0].kind, TDM_FRAME_INLINED);
    assert_int_equal(s->stack_count, 2);
    assert_int_equal(s->stacks[1].depth, 1);
    assert_int_equal(s->event_count, 2);
    assert_int_equal(s->events[0].time_ns, 1000);
    assert_int_equal(s->events[1].time_ns, 990);
    assert_int_equal(s->events[1].addr, 0x10000);
    assert_int_equal(s->events[0].requested, 500);
    assert_int_equal(s->events[1].requested, 520);
    assert_int_equal(s->events[1].step, 6);
    assert_int_equal(s->events[1].device, 3);
    assert_int_equal(s->events[1].action, TDM_ACTION_FREE_COMPLETED);
    assert_int_equal(s->events[1].category, TDM_CATEGORY_GRADIENT);
    assert_int_equal(s->phase_count, 1);
    assert_int_equal(s->complete, 1);
    tdm__snap_free(s);
    fx_file_free(&b);
}

static void newer_major_version_is_refused(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    assert_int_equal(bytes[10], TDM_FORMAT_VERSION);
    const uint8_t majors[] = {TDM_FORMAT_VERSION + 1, 0x7f, 0};
    for (size_t i = 0; i < sizeof majors; i++) {
        bytes[10] = majors[i];
        for (int partial = 0; partial < 2; partial++) {
            tdm_snap *s = (tdm_snap *)1;
            tdm_read_error err;
            assert_int_equal(fx_read_exact(bytes, len, partial, &s, &err), TDM_UNSUPPORTED_VERSION);
            assert_null(s);
            assert_int_equal(err.offset, 10);
            assert_non_null(strstr(err.message, "version"));
        }
    }
    /* A major in a wider encoding, and a future minor (accepted). */
    fx_file b;
    fx_file_begin(&b, 300, 0);
    fx_emit_header(&b, "x");
    fx_emit_end(&b, 0);
    tdm_snap *s = NULL;
    assert_int_equal(fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, &s, NULL),
                     TDM_UNSUPPORTED_VERSION);
    fx_file_free(&b);
    fx_file_begin(&b, 1, 999);
    fx_emit_header(&b, "x");
    fx_emit_end(&b, 0);
    assert_int_equal(fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, &s, NULL), TDM_OK);
    assert_int_equal(s->header.format_version, 1);
    tdm__snap_free(s);
    fx_file_free(&b);
    free(bytes);
    fx_free(&f);
}

static void expect_invalid(const tdm_snap *s, const char *what)
{
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/x.tdm", dir);
    if (tdm__snap_write(s, path) != TDM_INVALID_ARGUMENT)
        fail_msg("writer accepted: %s", what);
    assert_int_equal(fx_dir_entries(dir), 0);
    fx_rm_dir(dir);
}

static void writer_refuses_what_the_reader_would(void **state)
{
    (void)state;
    fx_snap f;
#define CASE(what, change)                                                     \
    do {                                                                       \
        fx_build_sample(&f);                                                   \
        tdm_snap *s = &f.s;                                                    \
        tdm_event *e = (tdm_event *)s->events;                                 \
        tdm_snap_block *b = (tdm_snap_block *)s->blocks;                       \
        (void)e, (void)b;                                                      \
        change;                                                                \
        expect_invalid(s, what);                                               \
        fx_free(&f);                                                           \
    } while (0)
    CASE("stack id out of range", e[3].stack_id = 4);
    CASE("phase out of range", e[3].phase = 4);
    CASE("unknown action", e[0].action = TDM_ACTION_COUNT_);
    CASE("unknown category", e[0].category = TDM_CATEGORY_COUNT_);
    CASE("device below -1", e[0].device = -2);
    CASE("stack 0 not empty", ((tdm_snap_stack *)s->stacks)[0] = s->stacks[1]);
    CASE("frame index out of range", f.stack_frames[5] = 4);
    CASE("phase 0 named", ((const char **)s->phase_names)[0] = "x");
    CASE("gap between blocks", b[1].address += 512);
    CASE("blocks not adding up", ((tdm_snap_segment *)s->segments)[1].total_size++);
    CASE("block range past the table", ((tdm_snap_segment *)s->segments)[1].block_count = 2);
    CASE("unknown block state", b[0].state = 3);
    CASE("unknown pool", ((tdm_snap_segment *)s->segments)[0].pool = 3);
    CASE("device listed twice", ((tdm_snap_device *)s->devices)[1].index = 0);
    CASE("unknown frame kind", ((tdm_snap_frame *)s->frames)[1].kind = TDM_FRAME_KIND_MAX + 1);
    CASE("unknown stats pool", ((tdm_snap_device_stats *)s->stats)[1].pool = 3);
    CASE("stats of a device twice", ((tdm_snap_device_stats *)s->stats)[1].device = 0);
    CASE("stats of a pool twice", ((tdm_snap_device_stats *)s->stats)[0].pool = 2;
         ((tdm_snap_device_stats *)s->stats)[1].pool = 2;
         ((tdm_snap_device_stats *)s->stats)[1].device = 0);
    CASE("unknown record mode", s->header.record_mode = 3);
    CASE("rank below -1", s->header.rank = -2);
    CASE("table without array", f.names = (char *)s->frames; s->frames = NULL);
#undef CASE
    fx_build_sample(&f);
    assert_int_equal(tdm__snap_write(NULL, "/tmp/x.tdm"), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__snap_write(&f.s, NULL), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__snap_write(&f.s, ""), TDM_INVALID_ARGUMENT);
    fx_free(&f);
}

static void failed_writes_leave_nothing(void **state)
{
    (void)state;
    fx_snap small, big;
    fx_build_sample(&small);
    fx_build_big(&big, 300000, 1000, 3);
    char *dir = fx_tempdir();
    char path[4200];

    /* A folder that does not exist. */
    snprintf(path, sizeof path, "%s/missing/x.tdm", dir);
    errno = 0;
    assert_int_equal(tdm__snap_write(&small.s, path), TDM_IO_ERROR);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(fx_dir_entries(dir), 0);

    /* The path is a directory: the rename fails, the temporary goes. */
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(tdm__snap_write(&small.s, path), TDM_IO_ERROR);
    assert_int_equal(fx_dir_entries(dir), 1);
    assert_int_equal(fx_dir_entries(path), 0);
    rmdir(path);

    /* The disk fills mid-write (a file size limit): the old file stays. */
    snprintf(path, sizeof path, "%s/keep.tdm", dir);
    assert_int_equal(tdm__snap_write(&small.s, path), TDM_OK);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1 << 20;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tdm_status st = tdm__snap_write(&big.s, path);
    int e = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(st, TDM_IO_ERROR);
    assert_int_equal(e, EFBIG);
    assert_int_equal(fx_dir_entries(dir), 1);
    tdm_snap *got = NULL;
    assert_int_equal(tdm__snap_read_file(path, 0, &got, NULL), TDM_OK);
    fx_expect_same(&small.s, got);
    tdm__snap_free(got);

    /* A folder we may not write to (root ignores the permission bits). */
    if (geteuid() != 0) {
        char ro[4200], inside[4300];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        assert_int_equal(mkdir(ro, 0555), 0);
        snprintf(inside, sizeof inside, "%s/x.tdm", ro);
        assert_int_equal(tdm__snap_write(&small.s, inside), TDM_IO_ERROR);
        assert_int_equal(fx_dir_entries(ro), 0);
        rmdir(ro);
    }
    fx_rm_dir(dir);
    fx_free(&small);
    fx_free(&big);
}

static void write_replaces_an_existing_file(void **state)
{
    (void)state;
    fx_snap small, big;
    fx_build_sample(&small);
    fx_build_big(&big, 1000, 100, 5);
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/x.tdm", dir);
    assert_int_equal(tdm__snap_write(&big.s, path), TDM_OK);
    assert_int_equal(tdm__snap_write(&small.s, path), TDM_OK);
    assert_int_equal(fx_dir_entries(dir), 1);
    tdm_snap *got = NULL;
    assert_int_equal(tdm__snap_read_file(path, 0, &got, NULL), TDM_OK);
    fx_expect_same(&small.s, got);
    tdm__snap_free(got);
    fx_rm_dir(dir);
    fx_free(&small);
    fx_free(&big);
}

static void read_file_errors(void **state)
{
    (void)state;
    tdm_snap *s = (tdm_snap *)1;
    tdm_read_error err;
    assert_int_equal(tdm__snap_read_file("/nonexistent/x.tdm", 0, &s, &err), TDM_IO_ERROR);
    assert_null(s);
    assert_non_null(strstr(err.message, "/nonexistent/x.tdm"));
    assert_non_null(strstr(err.message, strerror(ENOENT)));
    char *dir = fx_tempdir();
    assert_int_equal(tdm__snap_read_file(dir, 0, &s, &err), TDM_IO_ERROR);
    assert_non_null(strstr(err.message, "directory"));
    assert_int_equal(tdm__snap_read_file(dir, 0, NULL, &err), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__snap_read_buffer(NULL, 5, 0, &s, &err), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__snap_read_buffer(NULL, 0, 1, &s, &err), TDM_TRUNCATED);
    assert_null(s);
    tdm__snap_free(NULL);
    fx_rm_dir(dir);
}

static void sample_v1_file_keeps_parsing(void **state)
{
    (void)state;
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = tdm__snap_read_file(TDM_TEST_DATA_DIR "/sample-v1.tdm", 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    /* Known values, spelled out (see tests/data/README.md). */
    assert_int_equal(s->complete, 1);
    assert_int_equal(s->header.format_version, 1);
    assert_string_equal(s->header.host, "sample-host");
    assert_int_equal(s->header.pid, 4242);
    assert_int_equal(s->header.world_size, 2);
    assert_int_equal(s->header.start_time_us, 1700000000000000u);
    assert_string_equal(s->header.alloc_mode, "cache");
    assert_int_equal(s->device_count, 2);
    assert_int_equal(s->devices[1].capacity, UINT64_C(8) << 30);
    assert_int_equal(s->phase_count, 4);
    assert_string_equal(s->phase_names[2], "backward");
    assert_int_equal(s->frame_count, 4);
    assert_string_equal(s->frames[1].function, "train_step");
    assert_int_equal(s->frames[1].line, 42);
    assert_int_equal(s->stack_count, 4);
    assert_int_equal(s->stacks[2].depth, 3);
    assert_int_equal(s->stacks[2].frames[1], 2);
    assert_int_equal(s->event_count, 15);
    assert_int_equal(s->events[10].action, TDM_ACTION_OOM);
    assert_int_equal(s->events[10].size, 33554432);
    assert_int_equal(s->events[10].requested, 33554000);
    assert_int_equal(s->events[12].device, -1);
    assert_int_equal(s->events[14].time_ns, 1700000001000003200u);
    assert_int_equal(s->segment_count, 2);
    assert_int_equal(s->segments[1].is_expandable, 1);
    assert_int_equal(s->blocks[1].state, TDM_BLOCK_ACTIVE_PENDING_FREE);
    assert_int_equal(s->stats[1].stats.num_alloc_retries, 4);
    assert_int_equal(s->stats[0].stats.reserved_bytes.peak, 400);
    assert_int_equal(s->dropped_events, 7);
    /* Written before the pool column (format 1.1): every row is "all". */
    assert_int_equal(s->stats_count, 2);
    assert_int_equal(s->stats[0].pool, TDM_STAT_POOL_ALL);
    assert_int_equal(s->stats[1].pool, TDM_STAT_POOL_ALL);
    /* And every value the generator put in. */
    fx_snap f;
    fx_build_sample(&f);
    fx_expect_same(&f.s, s);
    tdm__snap_free(s);
    /* While the format is 1.0 the writer still produces these exact bytes. */
    if (TDM_FORMAT_VERSION == 1 && TDM_FMT_MINOR == 0) {
        size_t len, want_len;
        uint8_t *now = fx_write_bytes(&f.s, &len);
        uint8_t *want = fx_slurp(TDM_TEST_DATA_DIR "/sample-v1.tdm", &want_len);
        assert_int_equal(len, want_len);
        assert_memory_equal(now, want, len);
        free(now);
        free(want);
    }
    fx_free(&f);
}

/* tests/data/sample-v1.1.tdm: the sample with per-pool stats rows. */
static void sample_v1_1_file_keeps_parsing(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes;
    tdm_snap *s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.1.tdm", 1, &bytes, &len);
    assert_int_equal(s->stats_count, 4);
    assert_int_equal(s->stats[0].device, 0);
    assert_int_equal(s->stats[0].pool, TDM_STAT_POOL_ALL);
    assert_int_equal(s->stats[1].pool, TDM_STAT_POOL_SMALL);
    assert_int_equal(s->stats[1].stats.reserved_bytes.current, 50);
    assert_int_equal(s->stats[2].pool, TDM_STAT_POOL_LARGE);
    assert_int_equal(s->stats[2].stats.reserved_bytes.current, 150);
    assert_int_equal(s->stats[3].device, 1);
    assert_int_equal(s->stats[3].pool, TDM_STAT_POOL_ALL);
    fx_snap f;
    fx_build_sample_pools(&f);
    fx_expect_same(&f.s, s);
    tdm__snap_free(s);
    fx_expect_writer_bytes(&f.s, 1, bytes, len);
    free(bytes);
    fx_free(&f);
}

/* Stats rows per pool keep their pool, in any order, with any device. */
static void pool_stats_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_sample_pools(&f);
    round_trip(&f.s);
    /* Pools before the all row, the host's row, a device with one pool. */
    tdm_snap_device_stats *ds = (tdm_snap_device_stats *)f.s.stats;
    ds[0].pool = TDM_STAT_POOL_LARGE;
    ds[2].pool = TDM_STAT_POOL_ALL;
    ds[3].device = -1;
    ds[3].pool = TDM_STAT_POOL_SMALL;
    ds[3].stats.num_ooms = UINT64_MAX;
    round_trip(&f.s);
    fx_free(&f);
}

/* A stats row of `fields` elements (9: no pool column, 10: with pool, 11:
 * a later minor's field after it) for `device`. */
static void pack_stats_row(fx_file *b, int device, int64_t pool, int fields)
{
    msgpack_pack_array(&b->pk, (size_t)fields);
    msgpack_pack_int64(&b->pk, device);
    for (int k = 0; k < 6; k++) {
        msgpack_pack_array(&b->pk, 4);
        for (int j = 0; j < 4; j++)
            msgpack_pack_int64(&b->pk, 1000 * device + 10 * k + j);
    }
    msgpack_pack_uint64(&b->pk, 7);
    msgpack_pack_uint64(&b->pk, 8);
    if (fields > 9)
        msgpack_pack_int64(&b->pk, pool);
    if (fields > 10)
        fx_str(b, "future");
}

/* Reads a hand-built file whose only table is these stats rows. */
static tdm_status read_stats_rows(const int *device, const int64_t *pool, const int *fields,
                                  size_t n, tdm_snap **out, tdm_read_error *err)
{
    fx_file b;
    fx_file_begin(&b, 1, 0);
    fx_emit_header(&b, "h");
    msgpack_pack_map(&b.pk, 2);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, n);
    for (size_t i = 0; i < n; i++)
        pack_stats_row(&b, device[i], pool[i], fields[i]);
    fx_emit(&b, TDM_REC_STATS);
    fx_emit_end(&b, 0);
    tdm_status st = fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, out, err);
    fx_file_free(&b);
    return st;
}

/* A 1.0 row (no pool column) is the device's all-pool row; a 1.1 row
 * carries its pool; a later field after the pool is skipped; a pool the
 * format does not know is a format error. */
static void stats_pool_column_is_optional(void **state)
{
    (void)state;
    const int device[] = {0, 0, 0, 3};
    const int64_t pool[] = {-1, 2, 1, 0};
    const int fields[] = {9, 10, 11, 10};
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = read_stats_rows(device, pool, fields, 4, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    assert_int_equal(s->stats_count, 4);
    assert_int_equal(s->stats[0].pool, TDM_STAT_POOL_ALL);
    assert_int_equal(s->stats[1].pool, TDM_STAT_POOL_LARGE);
    assert_int_equal(s->stats[2].pool, TDM_STAT_POOL_SMALL);
    assert_int_equal(s->stats[3].pool, TDM_STAT_POOL_ALL);
    assert_int_equal(s->stats[3].device, 3);
    assert_int_equal(s->stats[3].stats.segment.freed, 3053);
    assert_int_equal(s->stats[2].stats.num_ooms, 8);
    tdm__snap_free(s);

    const int64_t bad[] = {3, -1, 255};
    for (int i = 0; i < 3; i++) {
        const int one_device[] = {0}, ten[] = {10};
        s = NULL;
        st = read_stats_rows(one_device, &bad[i], ten, 1, &s, &err);
        assert_int_equal(st, TDM_FORMAT_ERROR);
        assert_null(s);
        assert_non_null(strstr(err.message, "'pool'"));
    }
}

static void one_million_events_fast_and_small(void **state)
{
    (void)state;
    fx_snap f;
    fx_build_big(&f, 1000000, 5000, 11);
    char *dir = fx_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/1m.tdm", dir);
    double t0 = now_ms();
    assert_int_equal(tdm__snap_write(&f.s, path), TDM_OK);
    double t1 = now_ms();
    tdm_snap *got = NULL;
    assert_int_equal(tdm__snap_read_file(path, 0, &got, NULL), TDM_OK);
    double t2 = now_ms();
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    /* Only the events: the file minus one written without them. */
    size_t nev = f.s.event_count;
    f.s.event_count = 0;
    snprintf(path, sizeof path, "%s/0.tdm", dir);
    assert_int_equal(tdm__snap_write(&f.s, path), TDM_OK);
    f.s.event_count = nev;
    struct stat sb0;
    assert_int_equal(stat(path, &sb0), 0);
    double per_event = (double)(sb.st_size - sb0.st_size) / (double)nev;
    print_message("format: %zu events: %.2f bytes/event (file %lld bytes), write %.0f ms, "
                  "read %.0f ms\n", nev, per_event, (long long)sb.st_size, t1 - t0, t2 - t1);
    fx_expect_same(&f.s, got);
    assert_true(per_event < 24.0); /* 56 bytes in memory */
    tdm__snap_free(got);
    fx_rm_dir(dir);
    fx_free(&f);
}

int main(int argc, char **argv)
{
    if (argc == 3 && (strcmp(argv[1], "--write-sample") == 0 ||
                      strcmp(argv[1], "--write-sample-pools") == 0)) {
        fx_snap f;
        if (argv[1][14])
            fx_build_sample_pools(&f);
        else
            fx_build_sample(&f);
        tdm_status st = tdm__snap_write(&f.s, argv[2]);
        fx_free(&f);
        fprintf(stderr, "%s: %s\n", argv[2], tdm_status_name(st));
        return st == TDM_OK ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc_matches_zlib),
        cmocka_unit_test(sample_round_trip),
        cmocka_unit_test(big_round_trip_spans_chunks),
        cmocka_unit_test(extreme_values_round_trip),
        cmocka_unit_test(empty_snapshot_round_trip),
        cmocka_unit_test(unknown_records_are_skipped),
        cmocka_unit_test(newer_minor_version_additions_are_read),
        cmocka_unit_test(newer_major_version_is_refused),
        cmocka_unit_test(writer_refuses_what_the_reader_would),
        cmocka_unit_test(failed_writes_leave_nothing),
        cmocka_unit_test(write_replaces_an_existing_file),
        cmocka_unit_test(read_file_errors),
        cmocka_unit_test(sample_v1_file_keeps_parsing),
        cmocka_unit_test(sample_v1_1_file_keeps_parsing),
        cmocka_unit_test(pool_stats_round_trip),
        cmocka_unit_test(stats_pool_column_is_optional),
        cmocka_unit_test(one_million_events_fast_and_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
