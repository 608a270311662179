/* tests/unit/test_category_rules.c: the category-rules file format
 * (format/format_rules.c: rules, comments, quotes, every error with its
 * file:line), tidemark's default rules on the frames PyTorch programs
 * have, and the decision over a hand-built snapshot (categories_stack.c):
 * a tag beats a stack rule, a stack rule beats the phase rules, scratch
 * freed inside the matched call is temporary, a call is one call while a
 * Python frame moves from line to line, memory seeded from the final state
 * keeps its rule's category; a free's own stack ends the call, and what
 * torch's zero_grad frees is a gradient, as is what FSDP2's foreach_reduce
 * frees of what it did not make, and what autograd releases of a node's
 * saved tensors an activation; --rules goes first; --explain's lines; and
 * TIDEMARK_CONF's category_rules key. */
#include "model_fixtures.h"

#include <unistd.h>

#include "categories.h"
#include "config.h"
#include "format_rules.h"

/* ---- the format ------------------------------------------------------------ */

static void parses_rules(void **state)
{
    (void)state;
    tdm_category_rules r = {0};
    char err[256] = "";
    const char *text = "# a comment\n"
                       "\n"
                       "  optimizer_state   file=/torch/optim/   # why: Adam's moments\n"
                       "gradient function=(^|[.])backward$\n"
                       "parameter function=\"^my loader \\\"x\\\"$\" file=\\.py$\n"
                       "temporary\tfunction=#notacomment";
    assert_int_equal(tdm__category_rules_parse(&r, text, "r.txt", err, sizeof err), 0);
    assert_int_equal(r.count, 4);
    assert_int_equal(r.rule[0].category, TDM_CATEGORY_OPTIMIZER_STATE);
    assert_string_equal(r.rule[0].where, "r.txt:3");
    assert_string_equal(r.rule[0].text, "optimizer_state   file=/torch/optim/");
    assert_true(r.rule[0].has_file && !r.rule[0].has_function);
    assert_true(tdm__category_rule_matches(&r.rule[0], "Adam.step",
                                           "/usr/lib/python3/dist-packages/torch/optim/adam.py"));
    assert_false(tdm__category_rule_matches(&r.rule[0], "Adam.step", "/src/optim/adam.py"));
    assert_true(tdm__category_rule_matches(&r.rule[1], "Tensor.backward", "x.py"));
    assert_true(tdm__category_rule_matches(&r.rule[1], "backward", NULL));
    assert_false(tdm__category_rule_matches(&r.rule[1], "backward_hook", "x.py"));
    /* both given: the same frame must match both */
    assert_true(tdm__category_rule_matches(&r.rule[2], "my loader \"x\"", "/a/b.py"));
    assert_false(tdm__category_rule_matches(&r.rule[2], "my loader \"x\"", "/a/b.c"));
    assert_false(tdm__category_rule_matches(&r.rule[2], "other", "/a/b.py"));
    /* '#' inside a value is the value's */
    assert_true(tdm__category_rule_matches(&r.rule[3], "#notacomment", ""));
    assert_string_equal(r.rule[3].where, "r.txt:6");
    tdm__category_rules_free(&r);
}

static void expect_error(const char *text, const char *want)
{
    tdm_category_rules r = {0};
    char err[512] = "";
    assert_int_equal(tdm__category_rules_parse(&r, "gradient file=x\n", "ok.txt", err,
                                               sizeof err), 0);
    assert_int_equal(tdm__category_rules_parse(&r, text, "bad.txt", err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("'%s': error '%s', want '%s'", text, err, want);
    assert_int_equal(r.count, 1); /* what it held before */
    tdm__category_rules_free(&r);
}

static void errors_name_file_and_line(void **state)
{
    (void)state;
    expect_error("# ok\nparamter file=x\n",
                 "bad.txt:2: 'paramter' is not a category (parameter, optimizer_state");
    expect_error("parameter file=x\n\ngradient function=(back\n",
                 "bad.txt:3: function='(back' is not a regular expression:");
    expect_error("gradient\n", "bad.txt:1: a rule needs function=REGEX, file=REGEX or both");
    expect_error("gradient # nothing\n", "bad.txt:1: a rule needs function=REGEX");
    expect_error("gradient func=x\n", "bad.txt:1: 'func=x' is not function=REGEX or file=REGEX");
    expect_error("gradient backward\n",
                 "bad.txt:1: 'backward' is not function=REGEX or file=REGEX");
    expect_error("gradient file=a file=b\n", "bad.txt:1: file= given twice");
    expect_error("gradient function=\"abc\n", "bad.txt:1: a quoted value has no closing '\"'");
    expect_error("gradient function=\"a\"b\n", "bad.txt:1: text right after a closing '\"'");
    expect_error("gradient function=\n", "bad.txt:1: function= is empty");
    expect_error("file=x gradient\n", "bad.txt:1: a rule starts with its category, not 'file=x'");

    tdm_category_rules r = {0};
    char err[512];
    assert_int_equal(tdm__category_rules_load(&r, "/nonexistent/rules.txt", err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/rules.txt: No such file or directory");
}

/* ---- the defaults ---------------------------------------------------------- */

static int default_category(const tdm_category_rules *r, const char *function, const char *file)
{
    for (size_t i = 0; i < r->count; i++)
        if (tdm__category_rule_matches(&r->rule[i], function, file))
            return r->rule[i].category;
    return -1;
}

static void default_rules(void **state)
{
    (void)state;
    tdm_category_rules r = {0};
    char err[256] = "";
    assert_int_equal(tdm__category_rules_parse(&r, tdm__categories_default_rules(), "default rules",
                                               err, sizeof err), 0);
    const char *tp = "/usr/lib/python3/dist-packages/torch/";
    char f[256];
    struct {
        const char *function, *file;
        int cat;
    } cases[] = {
        {"at::cuda::getNewWorkspace()", "", TDM_CATEGORY_TEMPORARY},
        {"at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)", "",
         TDM_CATEGORY_TEMPORARY},
        {"at::cuda::getCUDABlasLtWorkspace()", "", TDM_CATEGORY_TEMPORARY},
        {"cuBLAS workspace", "<released by torch._C._cuda_clearCublasWorkspaces() at exit>",
         TDM_CATEGORY_TEMPORARY},
        {"cuBLAS workspace", "/home/u/model.py", -1}, /* a function of that name elsewhere */
        {"at::cuda::getNewWorkspaceSize()", "", -1},
        {"dnnl_primitive_desc_iterator_create", "", TDM_CATEGORY_TEMPORARY},
        {"dnnl_primitive_create", "", TDM_CATEGORY_TEMPORARY},
        {"at::native::mkldnn_matmul(at::Tensor const&)", "", -1},
        {"Adam.step", "optim/adam.py", TDM_CATEGORY_OPTIMIZER_STATE},
        {"_multi_tensor_adam", "optim/adam.py", TDM_CATEGORY_OPTIMIZER_STATE},
        {"Optimizer.load_state_dict", "optim/optimizer.py", TDM_CATEGORY_OPTIMIZER_STATE},
        {"torch::optim::Adam::step(std::function<at::Tensor ()>)", "", TDM_CATEGORY_OPTIMIZER_STATE},
        {"Tensor.backward", "_tensor.py", TDM_CATEGORY_GRADIENT},
        {"backward", "autograd/__init__.py", TDM_CATEGORY_GRADIENT},
        {"grad", "autograd/__init__.py", TDM_CATEGORY_GRADIENT},
        {"MyFunction.backward", "/home/u/model.py", TDM_CATEGORY_GRADIENT},
        {"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
         "", TDM_CATEGORY_GRADIENT},
        {"Module._apply", "nn/modules/module.py", TDM_CATEGORY_PARAMETER},
        {"Module.to", "nn/modules/module.py", TDM_CATEGORY_PARAMETER},
        {"Module.load_state_dict", "nn/modules/module.py", TDM_CATEGORY_PARAMETER},
        {"Linear.__init__", "nn/modules/linear.py", TDM_CATEGORY_PARAMETER},
        {"_apply", "nn/modules/module.py", TDM_CATEGORY_PARAMETER}, /* Python < 3.11 */
        {"torch::nn::Module::to(c10::Device, bool)", "", TDM_CATEGORY_PARAMETER},
        {"torch::nn::LinearImpl::reset()", "", TDM_CATEGORY_PARAMETER},
        {"_MultiProcessingDataLoaderIter.__next__", "utils/data/dataloader.py", TDM_CATEGORY_INPUT},
        {"_pin_memory_loop", "utils/data/_utils/pin_memory.py", TDM_CATEGORY_INPUT},
        {"at::native::_pin_memory(at::Tensor const&, std::optional<c10::Device>)", "",
         TDM_CATEGORY_INPUT},
        /* the forward pass and everything else: no rule */
        {"Module._call_impl", "nn/modules/module.py", -1},
        {"Linear.forward", "nn/modules/linear.py", -1},
        {"torch::nn::LinearImpl::forward(at::Tensor const&)", "", -1},
        {"train_step", "/home/u/train.py", -1},
        {"DistributedDataParallel.__init__", "nn/parallel/distributed.py", -1},
        {"DistributedDataParallel._ddp_init_helper", "nn/parallel/distributed.py",
         TDM_CATEGORY_GRADIENT},
        {"_pre_forward", "nn/parallel/distributed.py", TDM_CATEGORY_GRADIENT},
        {"_pre_forward", "/home/u/model.py", -1},
        {"DistributedDataParallel.forward", "nn/parallel/distributed.py", -1},
        {"foreach_all_gather", "distributed/fsdp/_fully_shard/_fsdp_collectives.py",
         TDM_CATEGORY_PARAMETER},
        {"FSDPParam.alloc_all_gather_outputs", "distributed/fsdp/_fully_shard/_fsdp_param.py",
         TDM_CATEGORY_PARAMETER},
        {"foreach_reduce", "distributed/fsdp/_fully_shard/_fsdp_collectives.py",
         TDM_CATEGORY_GRADIENT},
        {"foreach_all_gather_copy_out", "distributed/fsdp/_fully_shard/_fsdp_collectives.py", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(f, sizeof f, "%s%s", cases[i].file[0] && cases[i].file[0] != '/' ? tp : "",
                 cases[i].file);
        int got = default_category(&r, cases[i].function, f);
        if (got != cases[i].cat)
            fail_msg("%s (%s): %s, want %s", cases[i].function, f,
                     got < 0 ? "no rule" : tdm_category_name((tdm_category)got),
                     cases[i].cat < 0 ? "no rule" : tdm_category_name((tdm_category)cases[i].cat));
    }
    tdm__category_rules_free(&r);
}

/* ---- the decision ---------------------------------------------------------- */

enum { ST_STATE = 1, ST_SCRATCH, ST_LOADER, ST_PLAIN };

/* Python frames: Adam.step at two lines called from train (line 30), the
 * DataLoader from train (31), train's own allocation (32). */
static tsnap *python_snapshot(void)
{
    tsnap *t = tsnap_new();
    add_device(t, 0, 1 << 30);
    static const char adam[] = "/usr/lib/python3/dist-packages/torch/optim/adam.py";
    static const char dl[] = "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py";
    static const char train[] = "/home/u/train.py";
    t->frames[1] = (tdm_snap_frame){0x11, "Adam.step", adam, 10, "", TDM_FRAME_PYTHON};
    t->frames[2] = (tdm_snap_frame){0x12, "Adam.step", adam, 12, "", TDM_FRAME_PYTHON};
    t->frames[3] = (tdm_snap_frame){0x13, "_DataLoaderIter.__next__", dl, 5, "", TDM_FRAME_PYTHON};
    t->frames[4] = (tdm_snap_frame){0x14, "train", train, 30, "", TDM_FRAME_PYTHON};
    t->frames[5] = (tdm_snap_frame){0x15, "train", train, 31, "", TDM_FRAME_PYTHON};
    t->frames[6] = (tdm_snap_frame){0x16, "train", train, 32, "", TDM_FRAME_PYTHON};
    t->frames[7] = (tdm_snap_frame){0x17, "<module>", train, 40, "", TDM_FRAME_PYTHON};
    t->s.frame_count = 8;
    static const uint32_t fr[][4] = {{0}, {0, 1, 4, 7}, {0, 2, 4, 7}, {0, 3, 5, 7}, {0, 6, 7}};
    for (int k = 1; k <= 4; k++)
        t->stacks[k] = (tdm_snap_stack){k == 4 ? 3 : 4, fr[k]};
    t->s.stack_count = 5;
    return t;
}

typedef struct decided {
    tsnap *t;
    tdm_model *m;
    tdm_category_decision d;
} decided;

static void decide(decided *x)
{
    x->m = build(x->t);
    assert_int_equal(tdm__categories_decide(x->m, &x->d), TDM_OK);
}

static size_t index_of(const decided *x, uint64_t addr)
{
    for (size_t i = 0; i < x->m->alloc_count; i++)
        if (x->m->allocs[i].addr == addr)
            return i;
    fail_msg("no allocation at 0x%llx", (unsigned long long)addr);
    return 0;
}

static void expect(const decided *x, uint64_t addr, int cat, int source, const char *why)
{
    size_t i = index_of(x, addr);
    char buf[1024];
    tdm__categories_explain(x->m, &x->d, i, buf, sizeof buf);
    if (x->d.cats[i] != cat || x->d.why[i].source != source || !strstr(buf, why))
        fail_msg("0x%llx: %s by %d (%s), want %s by %d with '%s'", (unsigned long long)addr,
                 tdm_category_name((tdm_category)x->d.cats[i]), x->d.why[i].source, buf,
                 tdm_category_name((tdm_category)cat), source, why);
}

static void undecide(decided *x)
{
    tdm__categories_decision_free(&x->d);
    tdm__model_free(x->m);
    free(x->t);
}

/* The history: step 1, phase optimizer: Adam's state (kept), its scratch
 * (made at another line of Adam.step, freed in the call), a second state
 * buffer freed only after the program left the call; a batch from the
 * DataLoader; a tagged allocation at Adam.step; train's own buffer; then
 * step 2, forward: the batch freed.  One more state buffer is only in the
 * final state (made before the window). */
static tsnap *history(void)
{
    tsnap *t = python_snapshot();
    mark_step(t);
    mark_phase(t, 3); /* optimizer */
    alloc_pt(t, 0, 0xA000, 400, ST_STATE);
    alloc_pt(t, 0, 0xB000, 80, ST_SCRATCH);
    alloc_pt(t, 0, 0xC000, 100, ST_STATE);
    free_pt(t, 0, 0xB000, 80);
    alloc_pt(t, 0, 0xD000, 300, ST_LOADER);
    free_pt(t, 0, 0xC000, 100);
    size_t e = alloc_pt(t, 0, 0xE000, 64, ST_STATE);
    t->ev[e].category = TDM_CATEGORY_ACTIVATION;
    alloc_pt(t, 0, 0xF000, 50, ST_PLAIN);
    mark_step(t);
    mark_phase(t, 1); /* forward */
    free_pt(t, 0, 0xD000, 300);
    state_block(t, 0, 0xA000, 512, 400, TDM_BLOCK_ACTIVE_ALLOCATED, ST_STATE);
    state_block(t, 0, 0xE000, 512, 64, TDM_BLOCK_ACTIVE_ALLOCATED, ST_STATE);
    state_block(t, 0, 0xF000, 512, 50, TDM_BLOCK_ACTIVE_ALLOCATED, ST_PLAIN);
    state_block(t, 0, 0x9000, 512, 200, TDM_BLOCK_ACTIVE_ALLOCATED, ST_STATE);
    t->blk[1].category = TDM_CATEGORY_ACTIVATION; /* 0xE000 */
    return t;
}

static void tag_then_stack_then_phases(void **state)
{
    (void)state;
    decided x = {history(), NULL, {0}};
    decide(&x);
    expect(&x, 0xA000, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_BY_STACK,
           "optimizer_state: rule default rules:12 `optimizer_state  file=/torch/optim/` "
           "matched frame Adam.step (adam.py:10); never freed");
    expect(&x, 0xB000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
           "matched frame Adam.step (adam.py:12); freed inside that call, so temporary");
    expect(&x, 0xC000, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_BY_STACK, "; outlives that call");
    /* made in the optimizer phase: the phase rules would say optimizer_state */
    expect(&x, 0xD000, TDM_CATEGORY_INPUT, TDM_CATEGORY_BY_STACK,
           "input: rule default rules:9 `input            file=/torch/utils/data/`");
    expect(&x, 0xE000, TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_BY_TAG, "tagged by the program");
    expect(&x, 0xF000, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_BY_PHASES,
           "no stack rule matched; phase rule: made in an optimizer phase and outlives that "
           "phase instance (made in phase optimizer, step 1, never freed)");
    expect(&x, 0x9000, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_BY_STACK,
           "made before the recorded window");
    /* the everyday entry point says the same */
    uint8_t *cats;
    assert_int_equal(tdm__categories_infer(x.m, &cats), TDM_OK);
    assert_memory_equal(cats, x.d.cats, x.m->alloc_count);
    free(cats);
    undecide(&x);
}

static void user_rules_go_first(void **state)
{
    (void)state;
    char path[] = "/tmp/tdm_rules_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "# ours\ntemporary function=__next__$ file=/dataloader\\.py$\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    char err[512];
    assert_int_equal(tdm__categories_set_rules_file(path, err, sizeof err), 0);
    decided x = {history(), NULL, {0}};
    decide(&x);
    char want[256];
    snprintf(want, sizeof want, "temporary: rule %s:2 `temporary function=__next__$", path);
    expect(&x, 0xD000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK, want);
    expect(&x, 0xA000, TDM_CATEGORY_OPTIMIZER_STATE, TDM_CATEGORY_BY_STACK, "default rules:12");
    undecide(&x);

    /* the recording's category_rules= file comes after --rules */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("parameter file=/torch/optim/\n", f);
    fclose(f);
    assert_int_equal(tdm__categories_set_rules_file(NULL, err, sizeof err), 0);
    x = (decided){history(), NULL, {0}};
    char conf[128];
    snprintf(conf, sizeof conf, "stacks=python, category_rules = %s ,dump_on=none", path);
    x.t->s.header.config = conf;
    decide(&x);
    snprintf(want, sizeof want, "parameter: rule %s:1 `parameter file=/torch/optim/`", path);
    expect(&x, 0xA000, TDM_CATEGORY_PARAMETER, TDM_CATEGORY_BY_STACK, want);
    expect(&x, 0xD000, TDM_CATEGORY_INPUT, TDM_CATEGORY_BY_STACK, "default rules:9");
    undecide(&x);
    unlink(path);
    assert_int_equal(tdm__categories_set_rules_file(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file or directory"));
    assert_int_equal(tdm__categories_set_rules_file(NULL, err, sizeof err), 0);
}

/* Native frames, the call ended by an allocation elsewhere: an
 * allocation freed after that is not the call's scratch. */
static void call_ends_at_the_next_allocation_outside(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 1 << 30);
    t->frames[1] = (tdm_snap_frame){0x21, "torch::autograd::Engine::evaluate_function()", "", 0,
                                    "libtorch.so", TDM_FRAME_NATIVE};
    t->frames[2] = (tdm_snap_frame){0x22, "torch::autograd::Engine::thread_main()", "", 0,
                                    "libtorch.so", TDM_FRAME_NATIVE};
    t->frames[3] = (tdm_snap_frame){0x23, "run_model", "/src/run.cc", 9, "run",
                                    TDM_FRAME_NATIVE};
    t->s.frame_count = 4;
    static const uint32_t fr[][4] = {{0}, {0, 1, 2}, {0, 3}};
    t->stacks[1] = (tdm_snap_stack){3, fr[1]};
    t->stacks[2] = (tdm_snap_stack){2, fr[2]};
    t->s.stack_count = 3;
    /* no marks at all: only the stacks can tell */
    alloc_pt(t, 0, 0x1000, 100, 1); /* gradient: freed after run_model allocates */
    alloc_pt(t, 0, 0x2000, 10, 1);  /* scratch of the engine */
    free_pt(t, 0, 0x2000, 10);
    alloc_pt(t, 0, 0x3000, 20, 2);  /* the program, outside the engine */
    free_pt(t, 0, 0x1000, 100);
    alloc_pt(t, 0, 0x4000, 30, 1);  /* engine again, then the window ends */
    free_pt(t, 0, 0x4000, 30);
    decided x = {t, NULL, {0}};
    decide(&x);
    expect(&x, 0x1000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_STACK,
           "matched frame torch::autograd::Engine::evaluate_function() (libtorch.so)");
    expect(&x, 0x1000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_STACK, "outlives that call");
    expect(&x, 0x2000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK, "freed inside that call");
    expect(&x, 0x3000, TDM_CATEGORY_UNKNOWN, TDM_CATEGORY_BY_PHASES,
           "phase rule: no stack rule matched and the snapshot has no phase or step marks");
    expect(&x, 0x4000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK, "freed inside that call");
    undecide(&x);
}

/* A vendor library's own buffer made inside backward (oneDNN's primitive
 * cache of a matmul in AddmmBackward0; on an Intel GPU its scratchpads
 * are device memory) outlives the backward call, but it is the library's
 * workspace, as cuBLAS's is: its own frames decide before autograd's. */
static void library_workspace_in_backward(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 1 << 30);
    t->frames[1] = (tdm_snap_frame){0x51, "??", "", 0, "libdnnl.so.2", TDM_FRAME_NATIVE};
    t->frames[2] = (tdm_snap_frame){0x52, "dnnl_primitive_desc_iterator_create", "", 0,
                                    "libdnnl.so.2", TDM_FRAME_NATIVE};
    t->frames[3] = (tdm_snap_frame){0x53,
                                    "torch::autograd::generated::AddmmBackward0::apply("
                                    "std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                                    "", 0, "libtorch_cpu.so", TDM_FRAME_NATIVE};
    t->frames[4] = (tdm_snap_frame){0x54, "torch::autograd::Engine::thread_main()", "", 0,
                                    "libtorch_cpu.so", TDM_FRAME_NATIVE};
    t->frames[5] = (tdm_snap_frame){0x55, "run_model", "/src/run.cc", 9, "run",
                                    TDM_FRAME_NATIVE};
    t->s.frame_count = 6;
    static const uint32_t fr[][5] = {{0}, {1, 2, 3, 4, 5}, {3, 4, 5}, {5}};
    t->stacks[1] = (tdm_snap_stack){5, fr[1]};
    t->stacks[2] = (tdm_snap_stack){3, fr[2]};
    t->stacks[3] = (tdm_snap_stack){1, fr[3]};
    t->s.stack_count = 4;
    alloc_pt(t, 0, 0x1000, 17864, 1); /* oneDNN's, kept past backward */
    alloc_pt(t, 0, 0x2000, 4096, 2);  /* the weight's gradient */
    alloc_pt(t, 0, 0x3000, 64, 3);    /* the program again: backward is over */
    free_pt(t, 0, 0x1000, 17864);
    decided x = {t, NULL, {0}};
    decide(&x);
    expect(&x, 0x1000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
           "matched frame dnnl_primitive_desc_iterator_create (libdnnl.so.2)");
    expect(&x, 0x2000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_STACK,
           "matched frame torch::autograd::Engine::thread_main() (libtorch_cpu.so)");
    undecide(&x);
}

/* A stack cut at its outermost frames (deeper than the recorder keeps: a
 * scalar's dispatch through libtorch under a Python optimizer step) is
 * still inside the call whose frames it does hold: an optimizer's scratch
 * freed in its step stays temporary when a cut stack allocates in between,
 * and the cut allocation, freed in the step too, is temporary as well. */
static void a_cut_stack_stays_in_its_call(void **state)
{
    (void)state;
    static const char adamw[] = "/usr/lib/python3/dist-packages/torch/optim/adamw.py";
    tsnap *t = tsnap_new();
    add_device(t, 0, 1 << 30);
    t->frames[1] = (tdm_snap_frame){0x41, "_single_tensor_adamw", adamw, 316, "",
                                    TDM_FRAME_PYTHON};
    t->frames[2] = (tdm_snap_frame){0x42, "_single_tensor_adamw", adamw, 317, "",
                                    TDM_FRAME_PYTHON};
    t->frames[3] = (tdm_snap_frame){0x43, "AdamW.step", adamw, 162, "", TDM_FRAME_PYTHON};
    t->frames[4] = (tdm_snap_frame){0x44, "<module>", "/home/u/train.py", 30, "",
                                    TDM_FRAME_PYTHON};
    t->frames[5] = (tdm_snap_frame){0x45, "_start", "", 0, "python3", TDM_FRAME_NATIVE};
    t->s.frame_count = 6;
    static const uint32_t fr[][5] = {{0}, {0, 1, 3, 4, 5}, {0, 2, 3}, {4, 5}};
    t->stacks[1] = (tdm_snap_stack){5, fr[1]}; /* the step's scratch */
    t->stacks[2] = (tdm_snap_stack){3, fr[2]}; /* in the step, cut past AdamW.step */
    t->stacks[3] = (tdm_snap_stack){2, fr[3]}; /* the loop, outside the step */
    t->s.stack_count = 4;
    alloc_pt(t, 0, 0x1000, 4096, 1);
    alloc_pt(t, 0, 0x2000, 8, 2);
    free_pt(t, 0, 0x2000, 8);
    free_pt(t, 0, 0x1000, 4096);
    alloc_pt(t, 0, 0x3000, 64, 3);
    decided x = {t, NULL, {0}};
    decide(&x);
    expect(&x, 0x1000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
           "matched frame _single_tensor_adamw (adamw.py:316); freed inside that call");
    expect(&x, 0x2000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK, "freed inside that call");
    undecide(&x);
}

/* A free with a stack of its own (context=all) says where the program
 * was: gradients made by autograd's engine and freed from the training
 * loop outlived the engine's call even though nothing outside it
 * allocated in between (an optimizer step that allocates nothing); the
 * engine's scratch, freed by the engine, stays temporary; and what
 * torch's zero_grad frees is a gradient wherever it was made, unless a
 * rule of the program's own says otherwise. */
static void frees_with_their_own_stacks(void **state)
{
    (void)state;
    static const char optim[] = "/usr/lib/python3/dist-packages/torch/optim/optimizer.py";
    for (int own_rule = 0; own_rule < 2; own_rule++) {
        char path[] = "/tmp/tdm_rules_XXXXXX";
        char err[512];
        if (own_rule) {
            int fd = mkstemp(path);
            assert_true(fd >= 0);
            const char text[] = "activation function=^hook$\n";
            assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
            close(fd);
            assert_int_equal(tdm__categories_set_rules_file(path, err, sizeof err), 0);
        }
        tsnap *t = tsnap_new();
        add_device(t, 0, 1 << 30);
        t->s.header.context_mode = TDM_CONTEXT_ALL;
        t->frames[1] = (tdm_snap_frame){0x21, "torch::autograd::Engine::evaluate_function()",
                                        "", 0, "libtorch.so", TDM_FRAME_NATIVE};
        t->frames[2] = (tdm_snap_frame){0x22, "torch::autograd::Engine::thread_main()", "", 0,
                                        "libtorch.so", TDM_FRAME_NATIVE};
        t->frames[3] = (tdm_snap_frame){0x23, "<module>", "/home/u/train.py", 9, "",
                                        TDM_FRAME_PYTHON};
        t->frames[4] = (tdm_snap_frame){0x24, "Optimizer.zero_grad", optim, 40, "",
                                        TDM_FRAME_PYTHON};
        t->frames[5] = (tdm_snap_frame){0x25, "hook", "/home/u/train.py", 3, "",
                                        TDM_FRAME_PYTHON};
        t->s.frame_count = 6;
        static const uint32_t fr[][4] = {{0}, {1, 2}, {3}, {4, 3}, {5, 1, 2}};
        t->stacks[1] = (tdm_snap_stack){2, fr[1]}; /* the engine */
        t->stacks[2] = (tdm_snap_stack){1, fr[2]}; /* the loop */
        t->stacks[3] = (tdm_snap_stack){2, fr[3]}; /* zero_grad from the loop */
        t->stacks[4] = (tdm_snap_stack){3, fr[4]}; /* a hook the engine runs */
        t->s.stack_count = 5;
        alloc_pt(t, 0, 0x1000, 100, 1); /* gradient, freed from the loop */
        alloc_pt(t, 0, 0x2000, 10, 1);  /* the engine's scratch */
        t->ev[free_pt(t, 0, 0x2000, 10) - 1].stack_id = 1;
        alloc_pt(t, 0, 0x3000, 200, 4); /* a hook's gradient */
        t->ev[free_pt(t, 0, 0x1000, 100) - 1].stack_id = 2;
        t->ev[free_pt(t, 0, 0x3000, 200) - 1].stack_id = 3;
        alloc_pt(t, 0, 0x4000, 30, 2);
        decided x = {t, NULL, {0}};
        decide(&x);
        expect(&x, 0x1000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_STACK,
               "outlives that call (the stack that freed it runs outside it)");
        expect(&x, 0x2000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
               "freed inside that call, so temporary");
        if (own_rule) {
            char want[256];
            snprintf(want, sizeof want, "activation: rule %s:1 `activation function=^hook$`",
                     path);
            expect(&x, 0x3000, TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_BY_STACK, want);
            unlink(path);
            assert_int_equal(tdm__categories_set_rules_file(NULL, err, sizeof err), 0);
        } else {
            expect(&x, 0x3000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_FREE,
                   "gradient: freed by Optimizer.zero_grad (optimizer.py:40), and what "
                   "zero_grad frees is gradients");
        }
        undecide(&x);
    }
}

/* FSDP2's foreach_reduce frees the unsharded gradients autograd computed
 * once it has copied them into its reduce-scatter input ("clearing the
 * list frees the gradients", as its docstring says): what it frees and did
 * not make is a gradient, even made on autograd's engine thread with no
 * frame in PyTorch's history (Python frames only) and freed inside
 * backward.  Its own scratch (made and freed inside it) stays temporary,
 * its reduce-scatter output, kept past it, a gradient by the rule. */
static void fsdp_reduce_frees_gradients(void **state)
{
    (void)state;
    static const char coll[] = "/venv/lib/python3.11/site-packages/torch/distributed/fsdp/"
                               "_fully_shard/_fsdp_collectives.py";
    static const char group[] = "/venv/lib/python3.11/site-packages/torch/distributed/fsdp/"
                                "_fully_shard/_fsdp_param_group.py";
    tsnap *t = tsnap_new();
    add_device(t, 0, 1 << 30);
    t->s.header.context_mode = TDM_CONTEXT_ALL;
    t->s.header.stacks_mode = TDM_STACKS_PYTHON;
    t->frames[1] = (tdm_snap_frame){0x31, "foreach_reduce", coll, 606, "", TDM_FRAME_PYTHON};
    t->frames[2] = (tdm_snap_frame){0x32, "FSDPParamGroup.post_backward", group, 500, "",
                                    TDM_FRAME_PYTHON};
    t->frames[3] = (tdm_snap_frame){0x33, "chunk_cat", coll, 785, "", TDM_FRAME_PYTHON};
    t->frames[4] = (tdm_snap_frame){0x34, "foreach_reduce", coll, 603, "", TDM_FRAME_PYTHON};
    t->frames[5] = (tdm_snap_frame){0x35, "foreach_reduce", coll, 640, "", TDM_FRAME_PYTHON};
    t->frames[6] = (tdm_snap_frame){0x36, "<module>", "/home/u/train.py", 30, "",
                                    TDM_FRAME_PYTHON};
    t->s.frame_count = 7;
    static const uint32_t fr[][4] = {{0}, {1, 2}, {3, 4, 2}, {5, 2}, {6}};
    t->stacks[1] = (tdm_snap_stack){2, fr[1]}; /* foreach_reduce frees */
    t->stacks[2] = (tdm_snap_stack){3, fr[2]}; /* its copy-in scratch */
    t->stacks[3] = (tdm_snap_stack){2, fr[3]}; /* its reduce-scatter output */
    t->stacks[4] = (tdm_snap_stack){1, fr[4]}; /* the loop */
    t->s.stack_count = 5;
    alloc_pt(t, 0, 0x1000, 4096, 0); /* an unsharded gradient, by the engine */
    alloc_pt(t, 0, 0x2000, 512, 2);
    t->ev[free_pt(t, 0, 0x1000, 4096) - 1].stack_id = 1;
    t->ev[free_pt(t, 0, 0x2000, 512) - 1].stack_id = 1;
    alloc_pt(t, 0, 0x3000, 2048, 3);
    alloc_pt(t, 0, 0x4000, 64, 4);
    t->ev[free_pt(t, 0, 0x3000, 2048) - 1].stack_id = 4;
    decided x = {t, NULL, {0}};
    decide(&x);
    expect(&x, 0x1000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_FREE,
           "gradient: freed by foreach_reduce (_fsdp_collectives.py:606), and what FSDP's "
           "foreach_reduce frees of what it did not make is the gradients it reduced");
    expect(&x, 0x2000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
           "freed inside that call, so temporary");
    expect(&x, 0x3000, TDM_CATEGORY_GRADIENT, TDM_CATEGORY_BY_STACK, "outlives that call");
    undecide(&x);
}

/* Freed as autograd releases what a node saved for backward
 * (torch::autograd::SavedVariable::reset_data under a node's
 * release_variables, in the free's own stack): an activation, the one
 * fact a history without phase marks has of what forward made for
 * backward (a PyTorch snapshot recorded with stacks="all").  It settles
 * only what the rules leave unknown: memory made inside autograd's engine
 * (a checkpointed block recomputed in backward) is decided by the
 * gradient rule, temporary when the engine frees it; with phase marks, a
 * batch made in a data phase and let go by the graph stays input; memory
 * freed from the loop stays unknown without marks. */
static void frees_of_saved_tensors(void **state)
{
    (void)state;
    static const char linear[] = "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py";
    for (int marked = 0; marked < 2; marked++) {
        tsnap *t = tsnap_new();
        add_device(t, 0, 1 << 30);
        t->s.header.context_mode = TDM_CONTEXT_ALL;
        t->s.header.stacks_mode = TDM_STACKS_ALL;
        t->frames[1] = (tdm_snap_frame){0x21, "Linear.forward", linear, 125, "",
                                        TDM_FRAME_PYTHON};
        t->frames[2] = (tdm_snap_frame){0x22, "<module>", "/home/u/train.py", 9, "",
                                        TDM_FRAME_PYTHON};
        t->frames[3] = (tdm_snap_frame){0x23, "torch::autograd::SavedVariable::reset_data()", "",
                                        0, "libtorch_cpu.so", TDM_FRAME_NATIVE};
        t->frames[4] = (tdm_snap_frame){
            0x24, "torch::autograd::generated::AddmmBackward0::release_variables()", "", 0,
            "libtorch_cpu.so", TDM_FRAME_NATIVE};
        t->frames[5] = (tdm_snap_frame){
            0x25,
            "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::"
            "GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, "
            "std::shared_ptr<torch::autograd::ReadyQueue> const&)",
            "", 0, "libtorch_cpu.so", TDM_FRAME_NATIVE};
        t->frames[6] = (tdm_snap_frame){0x26, "torch::autograd::Engine::thread_main()", "", 0,
                                        "libtorch_cpu.so", TDM_FRAME_NATIVE};
        t->s.frame_count = 7;
        static const uint32_t fr[][4] = {{0}, {1, 2}, {2}, {3, 4, 5, 6}, {5, 6}};
        t->stacks[1] = (tdm_snap_stack){2, fr[1]}; /* a module's forward */
        t->stacks[2] = (tdm_snap_stack){1, fr[2]}; /* the loop */
        t->stacks[3] = (tdm_snap_stack){4, fr[3]}; /* a node's saved tensors released */
        t->stacks[4] = (tdm_snap_stack){2, fr[4]}; /* the engine */
        t->s.stack_count = 5;
        if (marked) {
            t->phases[3] = "data"; /* no optimizer here */
            mark_step(t);
            mark_phase(t, 3);
        }
        alloc_pt(t, 0, 0x5000, 64, 2); /* the batch, made by the loop */
        if (marked)
            mark_phase(t, 1);
        alloc_pt(t, 0, 0x1000, 100, 1); /* saved by a node for backward */
        alloc_pt(t, 0, 0x2000, 50, 1);  /* the loss, freed by the loop */
        if (marked)
            mark_phase(t, 2);
        alloc_pt(t, 0, 0x3000, 30, 4); /* recomputed inside the engine */
        t->ev[free_pt(t, 0, 0x3000, 30) - 1].stack_id = 3;
        t->ev[free_pt(t, 0, 0x1000, 100) - 1].stack_id = 3;
        t->ev[free_pt(t, 0, 0x5000, 64) - 1].stack_id = 3;
        if (marked)
            mark_phase(t, 3);
        t->ev[free_pt(t, 0, 0x2000, 50) - 1].stack_id = 2;
        decided x = {t, NULL, {0}};
        decide(&x);
        static const char saved[] =
            "activation: freed by torch::autograd::SavedVariable::reset_data() "
            "(libtorch_cpu.so), as autograd released what a node saved for backward";
        if (marked) {
            expect(&x, 0x1000, TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_BY_PHASES,
                   "made in forward and freed in backward");
            expect(&x, 0x5000, TDM_CATEGORY_INPUT, TDM_CATEGORY_BY_PHASES,
                   "made in a data phase");
        } else {
            expect(&x, 0x1000, TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_BY_FREE, saved);
            expect(&x, 0x5000, TDM_CATEGORY_ACTIVATION, TDM_CATEGORY_BY_FREE, saved);
            expect(&x, 0x2000, TDM_CATEGORY_UNKNOWN, TDM_CATEGORY_BY_PHASES,
                   "no phase or step marks");
        }
        expect(&x, 0x3000, TDM_CATEGORY_TEMPORARY, TDM_CATEGORY_BY_STACK,
               "freed inside that call, so temporary");
        undecide(&x);
    }
}

/* ---- TIDEMARK_CONF=category_rules=FILE ------------------------------------- */

static void config_key_checks_the_file(void **state)
{
    (void)state;
    char path[] = "/tmp/tdm_rules_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char good[] = "gradient function=backward$\n";
    assert_int_equal(write(fd, good, sizeof good - 1), (ssize_t)(sizeof good - 1));
    close(fd);
    tdm__config cfg;
    char err[TDM__CONF_ERR_MAX], text[256];
    snprintf(text, sizeof text, "category_rules=%s", path);
    assert_int_equal(tdm__config_parse(text, &cfg, err, sizeof err), TDM_OK);
    assert_int_equal(cfg.category_rules, 1);
    tdm__config_defaults(&cfg);
    assert_int_equal(cfg.category_rules, 0);

    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("gradient function=backward$\n# then\nactivation file=(\n", f);
    fclose(f);
    assert_int_equal(tdm__config_parse(text, &cfg, err, sizeof err), TDM_BAD_CONFIG);
    char want[256];
    snprintf(want, sizeof want, "%s:3: file='(' is not a regular expression", path);
    if (!strstr(err, want) || !strstr(err, "category_rules"))
        fail_msg("error '%s', want the key and '%s'", err, want);
    unlink(path);
    assert_int_equal(tdm__config_parse(text, &cfg, err, sizeof err), TDM_BAD_CONFIG);
    assert_non_null(strstr(err, "No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_rules),
        cmocka_unit_test(errors_name_file_and_line),
        cmocka_unit_test(default_rules),
        cmocka_unit_test(tag_then_stack_then_phases),
        cmocka_unit_test(user_rules_go_first),
        cmocka_unit_test(call_ends_at_the_next_allocation_outside),
        cmocka_unit_test(a_cut_stack_stays_in_its_call),
        cmocka_unit_test(library_workspace_in_backward),
        cmocka_unit_test(frees_with_their_own_stacks),
        cmocka_unit_test(fsdp_reduce_frees_gradients),
        cmocka_unit_test(frees_of_saved_tensors),
        cmocka_unit_test(config_key_checks_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
