/* tests/unit/test_torch_segments.c: a snapshot of PyTorch's caching
 * allocator recorded from below (the preload library in mode=observe) is
 * labelled as segments, not tensors (viewer-export/model/torch_segments.h):
 * which frames count as the caching allocator's, when a snapshot is taken
 * for one (observe mode and such a frame, not the cudaMallocAsync
 * backend, not without stacks), and what the summary, the memory_viz
 * pickle and the viewer's data then say; a train_sim-like recording gets
 * none of it.  Snapshots are built by hand (model_fixtures.h), with frames
 * named as PyTorch's libc10_cuda.so names them. */
#define _GNU_SOURCE /* asprintf */
#include "model_fixtures.h"
#include "categories.h"
#include "export_pytorch.h"
#include "pickle_read.h"
#include "summary.h"
#include "torch_segments.h"
#include "view_data.h"
#include "load.h"
#include "ranks.h"

#include <unistd.h>

#define C10_LIB "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so"
#define C10_MALLOC                                                                 \
    "_ZN3c104cuda20CUDACachingAllocator6Native22DeviceCachingAllocator6mallocEimP11" \
    "CUstream_st"
#define C10_MAP "_ZN3c104cuda20CUDACachingAllocator6Native17ExpandableSegment3mapENS2_8SegmentRangeE"

#define MiB (1ull << 20)

/* PyTorch growing its cache: stack 4 is cudaMalloc called from the caching
 * allocator, stack 5 a cuMemMap of an expandable segment from it.
 * A 20 MiB segment (kept), a 64 MiB mapping (unmapped later), a 2 MiB
 * segment (freed): reserved and allocated both peak after the second
 * segment's alloc (event 5), at 86 and 22 MiB.
 * `torch` 0 names the frames as train_sim's instead. */
static tsnap *torch_run(int torch)
{
    tsnap *t = tsnap_new();
    t->s.header.alloc_mode = "observe";
    t->s.header.config = "mode=observe dump=run.tdm stacks=native";
    add_device(t, 0, 80ull << 30);
    t->frames[7] = (tdm_snap_frame){0x3000, "cudaMalloc", "", 0,
                                    "/usr/lib/libtidemark_preload.so", TDM_FRAME_NATIVE};
    t->frames[8] = (tdm_snap_frame){0x4000, torch ? C10_MALLOC : "sim_grow_pool", "", 0,
                                    torch ? C10_LIB : "train_sim", TDM_FRAME_NATIVE};
    t->frames[9] = (tdm_snap_frame){0x4100, torch ? C10_MAP : "sim_map_pages", "", 0,
                                    torch ? C10_LIB : "train_sim", TDM_FRAME_NATIVE};
    t->s.frame_count = 10;
    uint32_t top[2] = {8, 9};
    for (int k = 0; k < 2; k++) {
        t->stack_frames[4 + k][0] = 7;
        t->stack_frames[4 + k][1] = top[k];
        t->stack_frames[4 + k][2] = 4; /* forward */
        t->stack_frames[4 + k][3] = 5; /* train_step */
        t->stacks[4 + k] = (tdm_snap_stack){4, t->stack_frames[4 + k]};
    }
    t->s.stack_count = 6;

    mark_step(t);                                     /* event 0 */
    alloc_pt(t, 0, 0x10000000, 20 * MiB, 4);          /* 1, 2 */
    ev(t, TDM_ACTION_SEGMENT_MAP, 0, 0x80000000, 64 * MiB, 5); /* 3 */
    alloc_pt(t, 0, 0x20000000, 2 * MiB, 4);           /* 4, 5 (the peak) */
    free_pt(t, 0, 0x20000000, 2 * MiB);               /* 6, 7, 8 */
    ev(t, TDM_ACTION_SEGMENT_UNMAP, 0, 0x80000000, 64 * MiB, 0); /* 9 */
    state_block(t, 0, 0x10000000, 20 * MiB, 20 * MiB, TDM_BLOCK_ACTIVE_ALLOCATED, 4);
    return t;
}

/* ---- which frames are the caching allocator's --------------------------- */

static int kind_of(const char *function, const char *module)
{
    tdm_snap_frame f = {0x1, function, "", 0, module, TDM_FRAME_NATIVE};
    return tdm__torch_frame_kind(&f);
}

static void test_frame_kinds(void **state)
{
    (void)state;
    /* By name, mangled as the file keeps it or readable. */
    assert_int_equal(kind_of(C10_MALLOC, ""), 1);
    assert_int_equal(kind_of("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::"
                             "malloc(signed char, unsigned long, CUstream_st*)", ""), 1);
    assert_int_equal(kind_of("_ZN3c103hip19HIPCachingAllocator6Native22DeviceCachingAllocator"
                             "6mallocEimP12ihipStream_t", "libc10_hip.so"), 1);
    /* By library, when its symbols are stripped. */
    assert_int_equal(kind_of("??", C10_LIB), 1);
    assert_int_equal(kind_of("??", "/x/libc10_cuda.so.2.5"), 1);
    assert_int_equal(kind_of("??", "libc10_hip.so"), 1);
    /* The cudaMallocAsync backend allocates tensors. */
    assert_int_equal(kind_of("_ZN3c104cuda20CUDACachingAllocator15CudaMallocAsync11mallocAsyncEPPvamP11CUstream_st",
                             C10_LIB), 2);
    /* Anything else. */
    assert_int_equal(kind_of("??", "/x/libc10_cuda_extra.so"), 0);
    assert_int_equal(kind_of("??", "/x/libc10.so"), 0);
    assert_int_equal(kind_of("make_weights", "train"), 0);
    assert_int_equal(kind_of("c10::cuda::getCurrentCUDAStream(signed char)", "libtorch_cuda.so"),
                     0);
    assert_int_equal(kind_of(NULL, NULL), 0);
}

/* ---- when a snapshot is one ---------------------------------------------- */

static void test_detection(void **state)
{
    (void)state;
    tsnap *t = torch_run(1);
    assert_true(tdm__torch_segments_seen(&t->s));
    /* Only under the preload's observe mode: cache mode books tidemark's
     * own blocks, pass-through the library API's. */
    t->s.header.alloc_mode = "cache";
    assert_false(tdm__torch_segments_seen(&t->s));
    t->s.header.alloc_mode = "passthrough";
    assert_false(tdm__torch_segments_seen(&t->s));
    t->s.header.alloc_mode = NULL;
    assert_false(tdm__torch_segments_seen(&t->s));
    t->s.header.alloc_mode = "observe";
    /* The cudaMallocAsync backend anywhere: no label. */
    t->frames[9].function =
        "_ZN3c104cuda20CUDACachingAllocator15CudaMallocAsync11mallocAsyncEPPvamP11CUstream_st";
    assert_false(tdm__torch_segments_seen(&t->s));
    free(t);

    /* stacks=none: no frames, no evidence, no guess. */
    t = torch_run(1);
    t->s.header.stacks_mode = TDM_STACKS_NONE;
    t->s.frame_count = 0;
    t->s.stack_count = 1;
    for (size_t i = 0; i < t->s.event_count; i++)
        t->ev[i].stack_id = 0;
    t->blk[0].stack_id = t->seg[0].stack_id = 0;
    assert_false(tdm__torch_segments_seen(&t->s));
    free(t);

    /* A program of its own under observe (train_sim-like frames). */
    t = torch_run(0);
    assert_false(tdm__torch_segments_seen(&t->s));
    free(t);
}

/* ---- the summary ------------------------------------------------------- */

static char *summary_of(tsnap *t)
{
    tdm_model *m = build(t);
    tdm_summary_options o = {.top = 10, .device = -1};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(tdm__summary_print(out, "run.tdm", &t->s, m, &o), TDM_OK);
    fclose(out);
    printf("%s", text);
    tdm__model_free(m);
    return text;
}

static const char *line_starting(const char *text, int line)
{
    for (int i = 1; i < line && text; i++) {
        text = strchr(text, '\n');
        text = text ? text + 1 : NULL;
    }
    assert_non_null(text);
    return text;
}

static void test_summary_says_segments(void **state)
{
    (void)state;
    tsnap *t = torch_run(1);
    char *text = summary_of(t);
    /* The first lines say what the memory is. */
    const char *second = line_starting(text, 2);
    assert_memory_equal(second, "  " TDM_TORCH_SEGMENTS_NOTE "\n",
                        strlen("  " TDM_TORCH_SEGMENTS_NOTE "\n"));
    /* The peak is of reserved memory, mapped pages included: 20 + 64 +
     * 2 MiB once the second cudaMalloc is booked (event 5), in step 1. */
    assert_non_null(strstr(text, "  peak reserved by PyTorch's caching allocator 86.00 MiB "
                                 "(90177536 B), 0.1% of capacity\n"));
    assert_non_null(strstr(text, " (event 5), step 1\n"));
    assert_non_null(strstr(text, "  booked         22.00 MiB as allocations at that moment"));
    assert_null(strstr(text, "peak allocated"));
    assert_non_null(strstr(text, "top segment sites by bytes live at the peak (1 site)"));
    assert_non_null(strstr(text, "    1    22.00 MiB 100.0%      2  _ZN3c104cuda20CUDACachingAllocator"));
    assert_null(strstr(text, "top allocation sites"));
    assert_non_null(strstr(text, "live at end    20.00 MiB (20971520 B) in 1 segment allocation,"));
    free(text);
    free(t);
}

/* NCCL maps its buffers through the driver's virtual-memory calls, from
 * its own library: after PyTorch's peak, 100 MiB of them would make the
 * segments' peak 120 MiB.  PyTorch's own figure stays its allocator's (86
 * MiB at event 5), and NCCL's buffers are the line beside it; their unmap,
 * recorded without a stack, is told apart by address. */
static void test_summary_books_nccl_apart(void **state)
{
    (void)state;
    tsnap *t = torch_run(1);
    t->frames[10] = (tdm_snap_frame){0x5000, "ncclCommInitRank", "", 0,
                                     "/usr/lib/x86_64-linux-gnu/libnccl.so.2", TDM_FRAME_NATIVE};
    t->frames[11] = (tdm_snap_frame){0x5100, "c10d::NCCLComm::create(int, int)", "", 0,
                                     "/opt/torch/lib/libtorch_cuda.so", TDM_FRAME_NATIVE};
    t->s.frame_count = 12;
    t->stack_frames[6][0] = 10;
    t->stack_frames[6][1] = 11;
    t->stack_frames[6][2] = 5; /* train_step */
    t->stacks[6] = (tdm_snap_stack){3, t->stack_frames[6]};
    t->s.stack_count = 7;
    ev(t, TDM_ACTION_SEGMENT_MAP, 0, 0x90000000, 100 * MiB, 6);  /* 10 */
    ev(t, TDM_ACTION_SEGMENT_UNMAP, 0, 0x90000000, 100 * MiB, 0); /* 11 */
    char *text = summary_of(t);
    assert_non_null(strstr(text, "  peak reserved by PyTorch's caching allocator 86.00 MiB "
                                 "(90177536 B), 0.1% of capacity\n"));
    assert_non_null(strstr(text, " (event 5), step 1\n"));
    assert_non_null(strstr(text, "  beside it      NCCL's own buffers: 0 B at that moment, outside "
                                 "PyTorch's caching allocator (1 mapping); highest 100.00 MiB "
                                 "(104857600 B)\n"));
    free(text);

    /* Code other than NCCL is named as such. */
    t->frames[10].function = "my_pool_grow";
    t->frames[10].module = "/opt/app/libmypool.so";
    t->frames[11].function = "main";
    t->frames[11].module = "/opt/app/train";
    text = summary_of(t);
    assert_non_null(strstr(text, "  beside it      device memory of other code: 0 B at that moment"));
    free(text);

    /* PyTorch's own segments are never booked beside it. */
    tsnap *plain = torch_run(1);
    text = summary_of(plain);
    assert_null(strstr(text, "beside it"));
    free(text);
    free(plain);
    free(t);
}

static void test_summary_of_other_programs_unchanged(void **state)
{
    (void)state;
    tsnap *t = torch_run(0);
    char *text = summary_of(t);
    assert_null(strstr(text, "PyTorch"));
    assert_non_null(strstr(text, "  peak allocated 22.00 MiB (23068672 B)"));
    assert_non_null(strstr(text, "  reserved       86.00 MiB at the peak; highest 86.00 MiB\n"));
    assert_non_null(strstr(text, "top allocation sites by bytes live at the peak"));
    assert_non_null(strstr(text, "in 1 allocation,"));
    free(text);
    free(t);
}

/* A job of two ranks, each PyTorch seen from below: the table's peaks are
 * of reserved bytes (86 MiB each, not the 22 MiB booked as allocations),
 * and a line above it says so. */
static void test_rank_table_says_segments(void **state)
{
    (void)state;
    char dir[] = "/tmp/tdm-torch-ranks-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tdm_rank_paths paths = {calloc(2, sizeof(char *)), 2};
    assert_non_null(paths.paths);
    for (int r = 0; r < 2; r++) {
        tsnap *t = torch_run(1);
        t->s.header.rank = r;
        t->s.header.world_size = 2;
        assert_true(asprintf(&paths.paths[r], "%s/rank%d.tdm", dir, r) > 0);
        assert_int_equal(tdm__snap_write(&t->s, paths.paths[r]), TDM_OK);
        free(t);
    }
    tdm_summary_options o = {.top = 10, .device = -1};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(tdm__summary_ranks(out, &paths, &o, 1, &tdm__input_loader), TDM_EXIT_OK);
    fclose(out);
    printf("%s", text);
    assert_non_null(strstr(text, "  segments   2 of the 2 files: " TDM_TORCH_SEGMENTS_NOTE
                                 "; their peaks are of reserved bytes\n"));
    /* 86 MiB, exact: not the 22 MiB (23068672 B) booked as allocations */
    assert_non_null(strstr(text, "  max        90177536  rank 0"));
    assert_non_null(strstr(text, "  min        90177536  rank 0"));
    for (int r = 0; r < 2; r++) {
        unlink(paths.paths[r]);
        free(paths.paths[r]);
    }
    free(paths.paths);
    rmdir(dir);
    free(text);
}

/* ---- the pickle -------------------------------------------------------- */

static unsigned char *pickle_of(tsnap *t, size_t *len)
{
    tdm_model *m = build(t);
    tdm_pkw w;
    assert_int_equal(tdm__pkw_init_mem(&w), TDM_OK);
    assert_int_equal(tdm__pt_write(&w, &t->s, m, -1, NULL), TDM_OK);
    unsigned char *out = tdm__pkw_take(&w, len);
    assert_non_null(out);
    tdm__pkw_destroy(&w);
    tdm__model_free(m);
    return out;
}

/* allocator_settings.tidemark.memory, or NULL. */
static const tdm_pkv *memory_note(const unsigned char *b, size_t len, tdm_pk_doc **doc)
{
    const tdm_pkv *root;
    tdm_pk_error err;
    assert_int_equal(tdm__pk_parse(b, len, doc, &root, &err), TDM_OK);
    assert_non_null(tdm__pk_get(root, "segments"));
    assert_non_null(tdm__pk_get(root, "device_traces"));
    const tdm_pkv *tdm = tdm__pk_get(tdm__pk_get(root, "allocator_settings"), "tidemark");
    assert_non_null(tdm);
    return tdm__pk_get(tdm, "memory");
}

/* CPython's own unpickler reads the file and finds the note where the
 * viewer's Allocator Settings tab shows it (skipped without python3). */
static void python_reads(const unsigned char *b, size_t len, int want_note)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        return;
    char path[] = "/tmp/tdm_torch_segments_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, len), (ssize_t)len);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import pickle,sys; d=pickle.load(open('%s','rb')); "
             "n=d['allocator_settings']['tidemark'].get('memory',''); "
             "assert isinstance(d['segments'],list) and isinstance(d['device_traces'],list); "
             "sys.exit(0 if n.startswith(\\\"PyTorch's caching\\\") == %s else 3)\"",
             path, want_note ? "True" : "False");
    int rc = system(cmd);
    unlink(path);
    assert_int_equal(rc, 0);
}

static void test_pickle_carries_the_note(void **state)
{
    (void)state;
    tsnap *t = torch_run(1);
    size_t len;
    unsigned char *b = pickle_of(t, &len);
    tdm_pk_doc *doc;
    const tdm_pkv *note = memory_note(b, len, &doc);
    assert_non_null(note);
    assert_int_equal(note->type, TDM_PKV_STR);
    assert_string_equal(note->v.s, TDM_TORCH_SEGMENTS_NOTE);
    tdm__pk_free(doc);
    python_reads(b, len, 1);
    free(b);
    free(t);

    t = torch_run(0);
    b = pickle_of(t, &len);
    assert_null(memory_note(b, len, &doc));
    tdm__pk_free(doc);
    python_reads(b, len, 0);
    free(b);
    free(t);
}

/* ---- the viewer's data --------------------------------------------------- */

static char *view_json_of(tsnap *t)
{
    tdm_model *m = build(t);
    uint8_t *cats = NULL;
    assert_int_equal(tdm__categories_infer(m, &cats), TDM_OK);
    tdm_view_input in = {.path = "run.tdm", .snap = &t->s, .model = m, .cats = cats};
    char *text = NULL;
    size_t len = 0;
    uint64_t bytes = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tdm__view_data_write(f, &in, &bytes), TDM_OK);
    fclose(f);
    free(cats);
    tdm__model_free(m);
    return text;
}

static void test_viewer_data_carries_the_note(void **state)
{
    (void)state;
    tsnap *t = torch_run(1);
    char *text = view_json_of(t);
    assert_non_null(strstr(text, "\"memory_note\":\"" TDM_TORCH_SEGMENTS_NOTE "\""));
    free(text);
    free(t);
    t = torch_run(0);
    text = view_json_of(t);
    assert_non_null(strstr(text, "\"memory_note\":\"\""));
    free(text);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_kinds),
        cmocka_unit_test(test_detection),
        cmocka_unit_test(test_summary_says_segments),
        cmocka_unit_test(test_summary_books_nccl_apart),
        cmocka_unit_test(test_summary_of_other_programs_unchanged),
        cmocka_unit_test(test_rank_table_says_segments),
        cmocka_unit_test(test_pickle_carries_the_note),
        cmocka_unit_test(test_viewer_data_carries_the_note),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
