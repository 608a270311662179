/* tests/unit/test_format_kinds.c: the frame kind of format 1.2, the
 * imported table of 1.3 and the annotations of 1.4.  Native, inlined and
 * Python frames round-trip; a row without the kind (every 1.0 and 1.1
 * file) reads as a native frame; an unknown kind is refused; imported
 * rows and annotations go through the file as written, and the writer
 * refuses what a reader would reject; the committed sample-v1.2.tdm,
 * sample-v1.3.tdm and sample-v1.4.tdm keep parsing with their known
 * values.
 *
 * `test_format_kinds --write-sample PATH`, `--write-sample-1.3 PATH` and
 * `--write-sample-1.4 PATH` write the sample files (done once for
 * tests/data/sample-v1.2.tdm, sample-v1.3.tdm and sample-v1.4.tdm; see
 * tests/data/README.md). */
#include "format_fixtures.h"

/* The 1.1 sample (per-pool stats) with stacks as a PyTorch program has
 * them: an inline chain (add_bias inlined into relu_inplace, inlined into
 * forward: all three at forward's pc, innermost first, the native frame
 * last), a raw mangled C++ name with its clone suffix, and a Python
 * frame.  tests/data/sample-v1.2.tdm holds it; its values must
 * never change. */
static void build_sample_kinds(fx_snap *f)
{
    fx_build_sample_pools(f);
    tdm_snap *s = &f->s;
    tdm_snap_frame *fr = fx_calloc(8, sizeof *fr);
    memcpy(fr, s->frames, 4 * sizeof *fr);
    fr[4] = (tdm_snap_frame){0x405abc, "add_bias", "examples/layers.h", 12, "train_sim",
                             TDM_FRAME_INLINED};
    fr[5] = (tdm_snap_frame){0x405abc, "relu_inplace", "examples/layers.h", 30, "train_sim",
                             TDM_FRAME_INLINED};
    fr[6] = (tdm_snap_frame){0x7f00000020f0, "_ZN2at6native12_GLOBAL__N_13addEv.isra.0",
                             "aten/src/ATen/native/Add.cpp", 88, "libtorch_cpu.so",
                             TDM_FRAME_NATIVE};
    fr[7] = (tdm_snap_frame){0x1, "Model.forward", "/src/model.py", 41, "<python>",
                             TDM_FRAME_PYTHON};
    free((void *)s->frames);
    s->frames = fr;
    s->frame_count = 8;
    /* Stacks 1..3 as in the 1.0 sample; stack 4: tdm_malloc, the C++
     * frame, add_bias inlined in relu_inplace inlined in forward,
     * train_step, then the Python frame that called into it all. */
    uint32_t *sf = fx_calloc(13, sizeof *sf);
    memcpy(sf, f->stack_frames, 6 * sizeof *sf);
    const uint32_t deep[] = {0, 6, 4, 5, 2, 1, 7};
    memcpy(&sf[6], deep, sizeof deep);
    free(f->stack_frames);
    f->stack_frames = sf;
    tdm_snap_stack *st = fx_calloc(5, sizeof *st);
    st[1] = (tdm_snap_stack){2, &sf[0]};
    st[2] = (tdm_snap_stack){3, &sf[2]};
    st[3] = (tdm_snap_stack){1, &sf[5]};
    st[4] = (tdm_snap_stack){7, &sf[6]};
    free((void *)s->stacks);
    s->stacks = st;
    s->stack_count = 5;
}

static tdm_snap *read_back(const tdm_snap *want)
{
    size_t len;
    uint8_t *bytes = fx_write_bytes(want, &len);
    tdm_snap *got = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact(bytes, len, 0, &got, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    free(bytes);
    return got;
}

static void kinds_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    build_sample_kinds(&f);
    tdm_snap *got = read_back(&f.s);
    fx_expect_same(&f.s, got); /* kinds included */
    assert_int_equal(got->frames[0].kind, TDM_FRAME_NATIVE);
    assert_int_equal(got->frames[4].kind, TDM_FRAME_INLINED);
    assert_int_equal(got->frames[5].kind, TDM_FRAME_INLINED);
    assert_int_equal(got->frames[7].kind, TDM_FRAME_PYTHON);
    /* The name stays as the symbol table had it: mangled, clone suffix. */
    assert_string_equal(got->frames[6].function, "_ZN2at6native12_GLOBAL__N_13addEv.isra.0");
    assert_int_equal(got->stacks[4].depth, 7);
    assert_int_equal(got->frames[got->stacks[4].frames[2]].pc,
                     got->frames[got->stacks[4].frames[4]].pc);
    tdm__snap_free(got);
    /* Every frame of each kind, in a table spanning several records. */
    fx_free(&f);
    fx_build_big(&f, 10, 70000, 5);
    tdm_snap_frame *fr = (tdm_snap_frame *)f.s.frames;
    for (size_t i = 0; i < f.s.frame_count; i++)
        fr[i].kind = (uint8_t)(i % (TDM_FRAME_KIND_MAX + 1));
    got = read_back(&f.s);
    fx_expect_same(&f.s, got);
    tdm__snap_free(got);
    fx_free(&f);
}

/* Files written before 1.2 have no kind: every frame is native. */
static void older_samples_read_as_native_frames(void **state)
{
    (void)state;
    const char *files[] = {TDM_TEST_DATA_DIR "/sample-v1.tdm",
                           TDM_TEST_DATA_DIR "/sample-v1.1.tdm"};
    for (int i = 0; i < 2; i++) {
        tdm_snap *s = NULL;
        tdm_read_error err;
        tdm_status st = tdm__snap_read_file(files[i], 0, &s, &err);
        if (st != TDM_OK)
            fail_msg("%s: %s: %s", files[i], tdm_status_name(st), err.message);
        assert_int_equal(s->frame_count, 4);
        for (size_t k = 0; k < s->frame_count; k++)
            assert_int_equal(s->frames[k].kind, TDM_FRAME_NATIVE);
        assert_string_equal(s->frames[2].function, "forward");
        tdm__snap_free(s);
    }
}

/* A file of one frame row with `fields` elements, the sixth being `kind`. */
static tdm_status read_frame_row(int fields, int64_t kind, tdm_snap **out,
                                 tdm_read_error *err)
{
    fx_file b;
    fx_file_begin(&b, 1, 2);
    fx_emit_header(&b, "kinds");
    msgpack_pack_map(&b.pk, 2);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 2);
    fx_str(&b, ""), fx_str(&b, "f");
    fx_emit(&b, TDM_REC_STRINGS);
    msgpack_pack_map(&b.pk, 2);
    fx_key(&b, "first"), msgpack_pack_uint64(&b.pk, 0);
    fx_key(&b, "rows"), msgpack_pack_array(&b.pk, 1);
    msgpack_pack_array(&b.pk, (size_t)fields);
    msgpack_pack_uint64(&b.pk, 0x1234), msgpack_pack_uint64(&b.pk, 1);
    msgpack_pack_uint64(&b.pk, 0), msgpack_pack_uint64(&b.pk, 7);
    msgpack_pack_uint64(&b.pk, 0);
    for (int i = 5; i < fields; i++)
        msgpack_pack_int64(&b.pk, i == 5 ? kind : 99);
    fx_emit(&b, TDM_REC_FRAMES);
    fx_emit_end(&b, 0);
    tdm_status st = fx_read_exact((uint8_t *)b.file.data, b.file.size, 0, out, err);
    fx_file_free(&b);
    return st;
}

static void kind_column_is_optional_and_checked(void **state)
{
    (void)state;
    const int fields[] = {5, 6, 6, 6, 7};
    const int64_t kind[] = {0, TDM_FRAME_NATIVE, TDM_FRAME_INLINED, TDM_FRAME_PYTHON,
                            TDM_FRAME_INLINED};
    const int64_t want[] = {TDM_FRAME_NATIVE, TDM_FRAME_NATIVE, TDM_FRAME_INLINED,
                            TDM_FRAME_PYTHON, TDM_FRAME_INLINED};
    for (int i = 0; i < 5; i++) {
        tdm_snap *s = NULL;
        tdm_read_error err;
        tdm_status st = read_frame_row(fields[i], kind[i], &s, &err);
        if (st != TDM_OK)
            fail_msg("row %d: %s: %s", i, tdm_status_name(st), err.message);
        assert_int_equal(s->frame_count, 1);
        assert_string_equal(s->frames[0].function, "f");
        assert_int_equal(s->frames[0].line, 7);
        assert_int_equal(s->frames[0].kind, want[i]);
        tdm__snap_free(s);
    }
    const int64_t bad[] = {TDM_FRAME_KIND_MAX + 1, -1, 255};
    for (int i = 0; i < 3; i++) {
        tdm_snap *s = NULL;
        tdm_read_error err;
        assert_int_equal(read_frame_row(6, bad[i], &s, &err), TDM_FORMAT_ERROR);
        assert_null(s);
        assert_non_null(strstr(err.message, "'kind'"));
    }
}

/* tests/data/sample-v1.2.tdm: the sample with frame kinds. */
static void sample_v1_2_file_keeps_parsing(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes;
    tdm_snap *s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.2.tdm", 2, &bytes, &len);
    /* Known values, spelled out (see tests/data/README.md). */
    assert_int_equal(s->frame_count, 8);
    assert_string_equal(s->frames[4].function, "add_bias");
    assert_int_equal(s->frames[4].kind, TDM_FRAME_INLINED);
    assert_int_equal(s->frames[4].pc, 0x405abc);
    assert_int_equal(s->frames[6].kind, TDM_FRAME_NATIVE);
    assert_string_equal(s->frames[7].file, "/src/model.py");
    assert_int_equal(s->frames[7].kind, TDM_FRAME_PYTHON);
    assert_int_equal(s->stack_count, 5);
    assert_int_equal(s->stacks[4].depth, 7);
    assert_int_equal(s->stacks[4].frames[6], 7);
    assert_int_equal(s->stats_count, 4);
    fx_snap f;
    build_sample_kinds(&f);
    fx_expect_same(&f.s, s);
    tdm__snap_free(s);
    fx_expect_writer_bytes(&f.s, 2, bytes, len);
    free(bytes);
    fx_free(&f);
}

/* The 1.3 sample (tests/data/sample-v1.3.tdm): the 1.2 sample with two
 * imported rows and header notes.  The rows live in static storage:
 * fx_free does not free them. */
static tdm_snap_imported sample_imported[2] = {
    {.device = 0, .source_device = 1, .kind = TDM_IMPORT_IPC, .address = 0x7f0000200000,
     .size = 1 << 20, .stack_id = 4, .map_time_ns = 1700000000123456789ull},
    {.device = -1, .source_device = TDM_IMPORT_SOURCE_UNKNOWN, .kind = TDM_IMPORT_PEER_MAPPING,
     .address = 0x10, .size = 2 << 20},
};

static void build_sample_1_3(fx_snap *f)
{
    build_sample_kinds(f);
    f->s.imported = sample_imported;
    f->s.imported_count = 2;
    f->s.header.notes = "stacks: 3 Python frames unreadable";
}

static void fx_free_1_3(fx_snap *f)
{
    f->s.imported = NULL;
    f->s.imported_count = 0;
    f->s.header.notes = NULL;
    fx_free(f);
}

/* tests/data/sample-v1.3.tdm: the sample with imported memory. */
static void sample_v1_3_file_keeps_parsing(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes;
    tdm_snap *s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.3.tdm", 3, &bytes, &len);
    /* Known values, spelled out (see tests/data/README.md). */
    assert_int_equal(s->imported_count, 2);
    assert_int_equal(s->imported[0].kind, TDM_IMPORT_IPC);
    assert_int_equal(s->imported[0].address, 0x7f0000200000);
    assert_int_equal(s->imported[0].size, 1 << 20);
    assert_int_equal(s->imported[0].source_device, 1);
    assert_int_equal(s->imported[1].device, -1);
    assert_int_equal(s->imported[1].kind, TDM_IMPORT_PEER_MAPPING);
    assert_string_equal(s->header.notes, "stacks: 3 Python frames unreadable");
    assert_int_equal(s->frame_count, 8);
    assert_int_equal(s->frames[7].kind, TDM_FRAME_PYTHON);
    fx_snap f;
    build_sample_1_3(&f);
    fx_expect_same(&f.s, s);
    tdm__snap_free(s);
    fx_expect_writer_bytes(&f.s, 3, bytes, len);
    free(bytes);
    fx_free_1_3(&f);
}

/* Format 1.3: the imported table goes through the file as written, and
 * the writer refuses what a reader would reject. */
static void imported_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    build_sample_kinds(&f);
    tdm_snap_imported rows[2] = {
        {.device = 0, .source_device = 1, .kind = TDM_IMPORT_IPC, .address = 0x7f0000200000,
         .size = 1 << 20, .stack_id = 4, .map_time_ns = 1700000000123456789ull},
        {.device = -1, .source_device = TDM_IMPORT_SOURCE_UNKNOWN,
         .kind = TDM_IMPORT_PEER_MAPPING, .address = 0x10, .size = 2 << 20},
    };
    f.s.imported = rows;
    f.s.imported_count = 2;
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact(bytes, len, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    assert_int_equal(s->imported_count, 2);
    assert_memory_equal(&s->imported[0], &rows[0], sizeof rows[0]);
    assert_int_equal(s->imported[1].device, -1);
    assert_int_equal(s->imported[1].source_device, TDM_IMPORT_SOURCE_UNKNOWN);
    assert_int_equal(s->imported[1].kind, TDM_IMPORT_PEER_MAPPING);
    assert_int_equal(s->imported[1].size, 2 << 20);
    tdm__snap_free(s);
    free(bytes);
    rows[1].kind = TDM_IMPORT_KIND_MAX + 1;
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    rows[1].kind = 0;
    rows[1].stack_id = (uint32_t)f.s.stack_count;
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    f.s.imported = NULL;
    f.s.imported_count = 0;
    fx_free(&f);
}

/* The 1.4 sample (tests/data/sample-v1.4.tdm): the 1.3 sample with the
 * annotations an imported PyTorch history keeps, in history order. */
static tdm_snap_annotation sample_annotations[5] = {
    {.before_event = 0, .time_ns = 1700000001000000000ull, .device = 0,
     .kind = TDM_ANNOTATION_USER_METADATA, .text = "step 0"},
    {.before_event = 2, .time_ns = 1700000001000000000ull, .device = 0,
     .kind = TDM_ANNOTATION_START, .text = "forward"},
    {.before_event = 5, .time_ns = 1700000001000001000ull, .device = 0,
     .kind = TDM_ANNOTATION_TENSOR, .addr = 0x7f1200000000, .size = 4096,
     .text = "activation of step 0"},
    {.before_event = 7, .time_ns = 1700000001000002000ull, .device = 0,
     .kind = TDM_ANNOTATION_END, .text = "forward"},
    {.before_event = 15, .time_ns = 1700000001000003200ull, .device = 1,
     .kind = TDM_ANNOTATION_USER_METADATA, .text = ""},
};

static void build_sample_1_4(fx_snap *f)
{
    build_sample_1_3(f);
    f->s.annotations = sample_annotations;
    f->s.annotation_count = 5;
}

static void fx_free_1_4(fx_snap *f)
{
    f->s.annotations = NULL;
    f->s.annotation_count = 0;
    fx_free_1_3(f);
}

static void expect_annotation(const tdm_snap_annotation *got, const tdm_snap_annotation *want)
{
    assert_int_equal(got->before_event, want->before_event);
    assert_int_equal(got->time_ns, want->time_ns);
    assert_int_equal(got->device, want->device);
    assert_int_equal(got->kind, want->kind);
    assert_int_equal(got->addr, want->addr);
    assert_int_equal(got->size, want->size);
    assert_string_equal(got->text, want->text);
}

/* Format 1.4: annotations round-trip; the writer refuses a kind, a
 * device or a place out of range, and rows out of history order. */
static void annotations_round_trip(void **state)
{
    (void)state;
    fx_snap f;
    build_sample_1_4(&f);
    size_t len;
    uint8_t *bytes = fx_write_bytes(&f.s, &len);
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = fx_read_exact(bytes, len, 0, &s, &err);
    if (st != TDM_OK)
        fail_msg("%s: %s", tdm_status_name(st), err.message);
    assert_int_equal(s->annotation_count, 5);
    for (size_t i = 0; i < 5; i++)
        expect_annotation(&s->annotations[i], &sample_annotations[i]);
    tdm__snap_free(s);
    free(bytes);

    tdm_snap_annotation saved = sample_annotations[2];
    sample_annotations[2].kind = TDM_ANNOTATION_KIND_MAX + 1;
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    sample_annotations[2] = saved;
    sample_annotations[2].before_event = 8; /* after the next row's place */
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    sample_annotations[2] = saved;
    sample_annotations[4].before_event = f.s.event_count + 1;
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    sample_annotations[4].before_event = 15;
    sample_annotations[2].text = NULL;
    assert_int_equal(tdm__snap_write(&f.s, "/nonexistent/x.tdm"), TDM_INVALID_ARGUMENT);
    sample_annotations[2] = saved;
    fx_free_1_4(&f);
}

/* tests/data/sample-v1.4.tdm: the sample with annotations; older samples
 * have none. */
static void sample_v1_4_file_keeps_parsing(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes;
    tdm_snap *s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.4.tdm", 4, &bytes, &len);
    assert_int_equal(s->annotation_count, 5);
    assert_int_equal(s->annotations[2].kind, TDM_ANNOTATION_TENSOR);
    assert_int_equal(s->annotations[2].addr, 0x7f1200000000);
    assert_string_equal(s->annotations[2].text, "activation of step 0");
    assert_int_equal(s->annotations[4].device, 1);
    assert_int_equal(s->imported_count, 2);
    fx_snap f;
    build_sample_1_4(&f);
    fx_expect_same(&f.s, s);
    for (size_t i = 0; i < 5; i++)
        expect_annotation(&s->annotations[i], &sample_annotations[i]);
    tdm__snap_free(s);
    fx_expect_writer_bytes(&f.s, 4, bytes, len);
    free(bytes);
    fx_free_1_4(&f);

    s = fx_read_sample(TDM_TEST_DATA_DIR "/sample-v1.3.tdm", 3, &bytes, &len);
    assert_int_equal(s->annotation_count, 0);
    tdm__snap_free(s);
    free(bytes);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-sample-1.4") == 0) {
        fx_snap f;
        build_sample_1_4(&f);
        tdm_status st = tdm__snap_write(&f.s, argv[2]);
        fx_free_1_4(&f);
        fprintf(stderr, "%s: %s\n", argv[2], tdm_status_name(st));
        return st == TDM_OK ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "--write-sample") == 0) {
        fx_snap f;
        build_sample_kinds(&f);
        tdm_status st = tdm__snap_write(&f.s, argv[2]);
        fx_free(&f);
        fprintf(stderr, "%s: %s\n", argv[2], tdm_status_name(st));
        return st == TDM_OK ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "--write-sample-1.3") == 0) {
        fx_snap f;
        build_sample_1_3(&f);
        tdm_status st = tdm__snap_write(&f.s, argv[2]);
        fx_free_1_3(&f);
        fprintf(stderr, "%s: %s\n", argv[2], tdm_status_name(st));
        return st == TDM_OK ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kinds_round_trip),
        cmocka_unit_test(older_samples_read_as_native_frames),
        cmocka_unit_test(kind_column_is_optional_and_checked),
        cmocka_unit_test(sample_v1_2_file_keeps_parsing),
        cmocka_unit_test(imported_round_trip),
        cmocka_unit_test(sample_v1_3_file_keeps_parsing),
        cmocka_unit_test(annotations_round_trip),
        cmocka_unit_test(sample_v1_4_file_keeps_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
