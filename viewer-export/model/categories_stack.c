/* viewer-export/model/categories_stack.c: categories from rules over the
 * frames of an allocation's stack (categories.h, step 2): which rules apply
 * to a snapshot, the first rule matching a stack, and whether the
 * allocation outlives the call the rule matched.
 *
 * "The call" is the matched frame together with every frame outside it
 * (the stack from that frame to the outermost).  It lasts, in event order,
 * from the allocation until the first later alloc event whose stack does
 * not hold those same outer frames: the program has left the call by then.
 * An allocation freed before that is a temporary of the call, unless the
 * free's own stack (context=all) runs outside the outermost frame the rule
 * matches; one that outlives it takes the rule's category.  Only alloc
 * events with a stack bound a call (a free's stack may be its
 * allocation's), and events carry no thread: an alloc on another thread,
 * made while the call runs, ends it early (docs/categories.md, "Limits").
 *
 * One fact of the free comes between the program's rules (--rules, the
 * recording's) and tidemark's defaults: memory whose free's own stack runs
 * through torch's zero_grad is a gradient, wherever it was made, and so is
 * memory FSDP2's foreach_reduce frees that it did not make.  Another
 * comes last, for what neither the rules nor the phases name (categories.c):
 * memory freed as autograd releases a node's saved tensors is an
 * activation.
 *
 * Cost: each frame is matched once per rule; each call's end is found once
 * for all the allocations it makes.  State: the rules file set by the
 * command line, and the recording's rules files already warned about. */
#include "categories.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tidemark's rules for PyTorch, in the rules-file format: cuBLAS and
 * oneDNN workspaces, data loading, optimizer code, autograd's backward, module
 * construction and moves.  The workspaces go first: one is made inside
 * whichever call runs a thread's first matmul (an optimizer's, autograd's
 * engine), and the first rule matching any frame wins. */
static const char default_rules[] =
    "# cuBLAS and cuBLASLt workspaces PyTorch keeps per handle and stream,\n"
    "# by libtorch's frames, or named in PyTorch's history by tidemark_tensors\n"
    "temporary        function=^at::cuda::(getNewWorkspace|setWorkspaceForHandle|"
    "getCUDABlasLtWorkspace)([^A-Za-z0-9_]|$)\n"
    "temporary        function=\"^cuBLAS workspace$\"  file=clearCublasWorkspaces\n"
    "# oneDNN's own buffers (its primitive caches and scratchpads: CPU memory,\n"
    "# and device memory on Intel GPUs), by its C API's frames: its workspace\n"
    "temporary        function=^dnnl_\n"
    "# DataLoader (workers, fetch, collate) and pinned-memory copies: the batch\n"
    "input            file=/torch/utils/data/\n"
    "input            function=(^|[.:])_?pin_memory\n"
    "# optimizers (torch.optim, libtorch's torch::optim): their state\n"
    "optimizer_state  file=/torch/optim/\n"
    "optimizer_state  function=^torch::optim::\n"
    "# backward passes (Tensor.backward, torch.autograd.backward and .grad,\n"
    "# autograd Functions' backward) and autograd's engine: gradients\n"
    "gradient         function=(^|[.])backward$\n"
    "gradient         function=^grad$  file=/torch/autograd/\n"
    "gradient         function=^torch::autograd::(Engine::|backward|grad)\n"
    "# FSDP2 (fully_shard): parameters all-gathered for a layer's forward and\n"
    "# backward are parameters; its reduce-scatter buffers gradients\n"
    "parameter        function=(^|[.])(foreach_all_gather|alloc_all_gather_outputs|"
    "init_all_gather_outputs)$  file=/torch/distributed/fsdp/\n"
    "gradient         function=(^|[.])foreach_reduce$  file=/torch/distributed/fsdp/\n"
    "# DistributedDataParallel's reducer: its gradient buckets, made as DDP is\n"
    "# built and rebuilt before the first forward after the first backward\n"
    "gradient         function=(^|[.])(_ddp_init_helper|_pre_forward)$  "
    "file=/torch/nn/parallel/distributed[.]py$\n"
    "# modules built, moved (.to, .cuda, _apply) or loaded: parameters, buffers\n"
    "parameter        function=(^|[.])(__init__|reset_parameters|_apply|to|to_empty|cuda|"
    "load_state_dict|_load_from_state_dict|register_parameter|register_buffer)$  "
    "file=/torch/nn/modules/\n"
    "parameter        function=^torch::nn::Module::(to|register_parameter|register_buffer)"
    "([^A-Za-z0-9_]|$)\n"
    "parameter        function=^torch::nn::[A-Za-z0-9_]+Impl::(reset|[A-Za-z0-9_]+Impl)"
    "([^A-Za-z0-9_]|$)\n"
    "parameter        function=^torch::(load|jit::load)([^A-Za-z0-9_]|$)\n";

const char *tdm__categories_default_rules(void) { return default_rules; }

/* ---- the rules in force ---------------------------------------------------- */

static struct {
    tdm_category_rules user; /* --rules */
    char *warned;            /* the last recording's rules file warned about */
} state;

int tdm__categories_set_rules_file(const char *path, char *err, size_t err_len)
{
    tdm__category_rules_free(&state.user);
    if (!path)
        return 0;
    return tdm__category_rules_load(&state.user, path, err, err_len);
}

static int append_rules(tdm_category_rules *to, const tdm_category_rules *from)
{
    for (size_t i = 0; i < from->count; i++) {
        /* Recompiled rather than shared: each decision owns its rules. */
        char err[64];
        size_t len = strlen(from->rule[i].text);
        char *line = malloc(len + 2);
        if (!line)
            return -1;
        memcpy(line, from->rule[i].text, len);
        memcpy(line + len, "\n", 2);
        size_t at = to->count;
        int rc = tdm__category_rules_parse(to, line, "", err, sizeof err);
        free(line);
        if (rc != 0)
            return -1;
        char *where = strdup(from->rule[i].where);
        if (!where)
            return -1;
        free(to->rule[at].where);
        to->rule[at].where = where;
    }
    return 0;
}

/* The value of the last `category_rules=` item of a TIDEMARK_CONF text
 * (items split at commas outside [...], blanks trimmed, as the recorder
 * parses them), malloc'd; NULL when there is none (or out of memory). */
static char *conf_rules_path(const char *conf)
{
    static const char key[] = "category_rules";
    char *found = NULL;
    for (const char *p = conf ? conf : ""; *p;) {
        const char *e = p;
        for (int depth = 0; *e && (*e != ',' || depth > 0); e++)
            depth += *e == '[' ? 1 : *e == ']' && depth > 0 ? -1 : 0;
        const char *b = p, *end = e;
        while (b < end && (*b == ' ' || *b == '\t'))
            b++;
        while (end > b && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - b) > sizeof key - 1 && strncmp(b, key, sizeof key - 1) == 0) {
            const char *v = b + sizeof key - 1;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            if (v < end && *v == '=') {
                for (v++; v < end && (*v == ' ' || *v == '\t'); v++)
                    ;
                free(found);
                found = v < end ? strndup(v, (size_t)(end - v)) : NULL;
            }
        }
        p = *e ? e + 1 : e;
    }
    return found;
}

tdm_status tdm__categories_rules_for(const tdm_snap *snap, tdm_category_rules *out)
{
    char err[600];
    memset(out, 0, sizeof *out);
    if (append_rules(out, &state.user) != 0)
        goto oom;
    char *path = conf_rules_path(snap->header.config);
    if (path && tdm__category_rules_load(out, path, err, sizeof err) != 0) {
        if (strstr(err, "out of memory")) {
            free(path);
            goto oom;
        }
        /* Checked when the program started; changed or moved since, or
         * relative to a folder this is not run in.  Said once a file. */
        if (!state.warned || strcmp(state.warned, path) != 0) {
            fprintf(stderr,
                    "tidemark: warning: category_rules=%s of the recording's config: %s; "
                    "its rules are not applied (give them with --rules FILE)\n",
                    path, err);
            free(state.warned);
            state.warned = strdup(path);
        }
    }
    free(path);
    if (tdm__category_rules_parse(out, default_rules, "default rules", err, sizeof err) != 0)
        goto oom; /* the defaults parse: test_category_rules checks them */
    return TDM_OK;
oom:
    tdm__category_rules_free(out);
    return TDM_HOST_OUT_OF_MEMORY;
}

/* ---- matching stacks ------------------------------------------------------- */

typedef struct call_cache {
    const uint32_t *outer; /* the call: the matched frame and those outside it */
    uint32_t len;
    int64_t from, end;     /* allocations made in [from, end) share its end */
    int valid;
} call_cache;

typedef struct matcher {
    const tdm_snap *snap;
    const tdm_category_rules *rules;
    uint8_t *hit;          /* [rule * frame_count + frame]: 0 not yet, 1 no, 2 yes */
    int32_t *stack_rule;   /* per stack id: -2 not yet, -1 none, else the rule */
    uint32_t *stack_at;    /* per stack id: where in the stack it matched */
    int64_t *allocs;       /* positions of alloc events with a stack, ascending */
    size_t alloc_count;
    call_cache *cache;     /* per rule */
} matcher;

static int frame_hits(matcher *m, size_t r, uint32_t f)
{
    uint8_t *h = &m->hit[r * m->snap->frame_count + f];
    if (!*h) {
        const tdm_snap_frame *fr = &m->snap->frames[f];
        *h = tdm__category_rule_matches(&m->rules->rule[r], fr->function, fr->file) ? 2 : 1;
    }
    return *h == 2;
}

/* The first rule that matches a frame of stack `id` (-1: none); *at gets
 * the innermost frame of the stack it matched. */
static int32_t stack_match(matcher *m, uint32_t id, uint32_t *at)
{
    if (m->stack_rule[id] == -2) {
        const tdm_snap_stack *sk = &m->snap->stacks[id];
        m->stack_rule[id] = -1;
        for (size_t r = 0; r < m->rules->count && m->stack_rule[id] < 0; r++)
            for (uint32_t k = 0; k < sk->depth; k++)
                if (sk->frames[k] < m->snap->frame_count && frame_hits(m, r, sk->frames[k])) {
                    m->stack_rule[id] = (int32_t)r;
                    m->stack_at[id] = k;
                    break;
                }
    }
    *at = m->stack_at[id];
    return m->stack_rule[id];
}

/* Nonzero when frames `x` and `y` are the same call site of one function:
 * a Python frame is its function at a line, so it is compared by function
 * and file (the call moves from line to line while it runs). */
static int same_function(const tdm_snap *s, uint32_t x, uint32_t y)
{
    if (x == y)
        return 1;
    if (x >= s->frame_count || y >= s->frame_count)
        return 0;
    const tdm_snap_frame *a = &s->frames[x], *b = &s->frames[y];
    return a->kind == b->kind && strcmp(a->function ? a->function : "",
                                        b->function ? b->function : "") == 0 &&
           strcmp(a->file ? a->file : "", b->file ? b->file : "") == 0 &&
           (a->kind == TDM_FRAME_PYTHON || strcmp(a->module ? a->module : "",
                                                  b->module ? b->module : "") == 0);
}

/* Nonzero when stack `sk` runs inside the call `outer` (`len` frames, the
 * matched one first): the same frames outside the matched one, and there
 * the same function.  A stack deeper than the recorder keeps is cut at its
 * outermost frames (stack.h), and so may be the stack the call came from:
 * where the two differ in depth, the frames they both hold, counted from
 * the matched one outwards, must agree.  Two whole stacks never differ
 * that way (both end at their thread's first frame), so for them this is
 * the comparison from the outermost frame. */
static int in_call(const tdm_snap *s, const tdm_snap_stack *sk, const uint32_t *outer,
                   uint32_t len)
{
    if (sk->depth >= len) {
        const uint32_t *f = sk->frames + (sk->depth - len);
        if ((len <= 1 || memcmp(f + 1, outer + 1, (len - 1) * sizeof *outer) == 0) &&
            same_function(s, f[0], outer[0]))
            return 1;
    }
    for (uint32_t p = 0; p < sk->depth; p++) {
        uint32_t both = sk->depth - p < len ? sk->depth - p : len;
        if (sk->depth - p == len || !same_function(s, sk->frames[p], outer[0]))
            continue; /* the same depth was compared above */
        if (both <= 1 || memcmp(sk->frames + p + 1, outer + 1, (both - 1) * sizeof *outer) == 0)
            return 1;
    }
    return 0;
}

/* The position of the first alloc event after `seq` made outside the call
 * `outer`; INT64_MAX when the window ends first. */
static int64_t call_end(matcher *m, call_cache *c, int64_t seq, const uint32_t *outer,
                        uint32_t len)
{
    if (c->valid && c->len == len && c->from <= seq && seq < c->end &&
        in_call(m->snap, &(tdm_snap_stack){len, c->outer}, outer, len))
        return c->end;
    size_t lo = 0, hi = m->alloc_count; /* first alloc event after seq */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->allocs[mid] <= seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t end = INT64_MAX;
    for (; lo < m->alloc_count; lo++) {
        const tdm_event *ev = &m->snap->events[m->allocs[lo]];
        if (!in_call(m->snap, &m->snap->stacks[ev->stack_id], outer, len)) {
            end = m->allocs[lo];
            break;
        }
    }
    *c = (call_cache){outer, len, seq, end, 1};
    return end;
}

/* Nonzero when the free of `a` has a stack of its own (a recording with
 * context=all gives every free the stack that freed it) and that stack
 * does not run inside the call `outer`: the program had left the call when
 * it freed the memory, even though no allocation outside the call came
 * between (gradients made by autograd's engine and freed by the next
 * zero_grad, with an optimizer step that allocates nothing). */
static int free_runs_outside(const tdm_snap *s, const tdm_model_alloc *a, const uint32_t *outer,
                             uint32_t len)
{
    if (s->header.context_mode != TDM_CONTEXT_ALL)
        return 0;
    /* The request carries the free's stack; free_completed may come later
     * (a stream's use) and, from some recorders, without one. */
    int64_t seq = a->free_req_seq;
    if (seq == TDM_MODEL_SEQ_NEVER || seq <= a->alloc_seq)
        seq = a->free_seq;
    if (seq < 0 || (uint64_t)seq >= s->event_count)
        return 0;
    uint32_t id = s->events[seq].stack_id;
    if (!id || id >= s->stack_count || !s->stacks[id].depth)
        return 0;
    return !in_call(s, &s->stacks[id], outer, len);
}

/* Nonzero when `f` is a zero_grad of torch's optimizers or modules
 * (Python's `Optimizer.zero_grad`, `zero_grad` as PyTorch's history names
 * it, libtorch's `torch::optim::Optimizer::zero_grad`). */
static int is_zero_grad(const tdm_snap_frame *f)
{
    static const char name[] = "zero_grad";
    const char *fn = f->function ? f->function : "", *file = f->file ? f->file : "";
    size_t n = strlen(fn), k = sizeof name - 1;
    if (n < k || strcmp(fn + n - k, name) != 0 || (n > k && fn[n - k - 1] != '.' &&
                                                   fn[n - k - 1] != ':'))
        return 0;
    if (f->kind == TDM_FRAME_PYTHON)
        return strstr(file, "/torch/optim/") || strstr(file, "/torch/nn/modules/");
    return strncmp(fn, "torch::optim::", 14) == 0 || strncmp(fn, "torch::nn::Module::", 19) == 0;
}

/* The first frame for which `is` holds in the stack that freed `a` (its
 * free's own stack: context=all), or UINT32_MAX.  The request carries the
 * free's stack; free_completed may come later (a stream's use) and, from
 * some recorders, without one. */
static uint32_t free_frame(const tdm_snap *s, const tdm_model_alloc *a,
                           int (*is)(const tdm_snap_frame *))
{
    if (s->header.context_mode != TDM_CONTEXT_ALL || a->free_seq == TDM_MODEL_SEQ_NEVER)
        return UINT32_MAX;
    int64_t seq = a->free_req_seq;
    if (seq == TDM_MODEL_SEQ_NEVER || seq <= a->alloc_seq)
        seq = a->free_seq;
    if (seq < 0 || (uint64_t)seq >= s->event_count)
        return UINT32_MAX;
    uint32_t id = s->events[seq].stack_id;
    if (!id || id >= s->stack_count)
        return UINT32_MAX;
    const tdm_snap_stack *sk = &s->stacks[id];
    for (uint32_t k = 0; k < sk->depth; k++)
        if (sk->frames[k] < s->frame_count && is(&s->frames[sk->frames[k]]))
            return sk->frames[k];
    return UINT32_MAX;
}

/* The frame of torch's zero_grad in the stack that freed `a` (its free's
 * own stack: context=all), or UINT32_MAX.  What zero_grad frees is the
 * gradients it drops (set_to_none) or the buffers it replaces: wherever and
 * whenever they were made (autograd's engine, a hook, an optimizer stepped
 * inside backward), they were gradients. */
static uint32_t zero_grad_frame(const tdm_snap *s, const tdm_model_alloc *a)
{
    return a->alloc_seq < 0 ? UINT32_MAX : free_frame(s, a, is_zero_grad);
}

/* Nonzero when `f` is FSDP2's foreach_reduce (torch/distributed/fsdp/),
 * which takes the unsharded gradients autograd computed, copies them into
 * its reduce-scatter input and frees them ("clearing the list frees the
 * gradients", its docstring). */
static int is_fsdp_reduce(const tdm_snap_frame *f)
{
    static const char name[] = "foreach_reduce";
    const char *fn = f->function ? f->function : "", *file = f->file ? f->file : "";
    size_t n = strlen(fn), k = sizeof name - 1;
    return f->kind == TDM_FRAME_PYTHON && strstr(file, "/torch/distributed/fsdp/") && n >= k &&
           strcmp(fn + n - k, name) == 0 && (n == k || fn[n - k - 1] == '.');
}

/* The foreach_reduce frame of the stack that freed `a` when `a` was not
 * made inside a foreach_reduce call (its own scratch), or UINT32_MAX:
 * what it frees of what others made is the gradients it reduced. */
static uint32_t fsdp_reduce_frame(const tdm_snap *s, const tdm_model_alloc *a)
{
    if (a->alloc_seq < 0)
        return UINT32_MAX;
    uint32_t f = free_frame(s, a, is_fsdp_reduce);
    if (f == UINT32_MAX || (a->flags & TDM_MODEL_STACK_OF_FREE))
        return f;
    if (a->stack_id && a->stack_id < s->stack_count) {
        const tdm_snap_stack *sk = &s->stacks[a->stack_id];
        for (uint32_t k = 0; k < sk->depth; k++)
            if (sk->frames[k] < s->frame_count && is_fsdp_reduce(&s->frames[sk->frames[k]]))
                return UINT32_MAX;
    }
    return f;
}

/* Nonzero when `f` is autograd releasing what a node saved for backward:
 * libtorch's `torch::autograd::SavedVariable::reset_data` or a node's
 * `release_variables` (a generated `...Backward0`, a Python Function's
 * PyNode), which the engine calls once the node has run. */
static int is_saved_release(const tdm_snap_frame *f)
{
    static const char ns[] = "torch::autograd::";
    const char *fn = f->function ? f->function : "";
    if (f->kind == TDM_FRAME_PYTHON || strncmp(fn, ns, sizeof ns - 1) != 0)
        return 0;
    size_t n = strcspn(fn, "(");
    static const char *const ends[] = {"SavedVariable::reset_data", "::release_variables"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t k = strlen(ends[i]);
        if (n >= k && strncmp(fn + n - k, ends[i], k) == 0)
            return 1;
    }
    return 0;
}

uint32_t tdm__categories_saved_release_frame(const tdm_snap *s, const tdm_model_alloc *a)
{
    return free_frame(s, a, is_saved_release);
}

/* The number of rules before tidemark's defaults (--rules, the
 * recording's): those win over the lifetime facts below. */
static size_t own_rules(const tdm_category_rules *rules)
{
    size_t n = 0;
    while (n < rules->count && strncmp(rules->rule[n].where, "default rules", 13) != 0)
        n++;
    return n;
}

tdm_status tdm__categories_by_stack(const tdm_model *model, const tdm_category_rules *rules,
                                    uint8_t *cats, tdm_category_reason *why, uint8_t *decided)
{
    const tdm_snap *snap = model->snap;
    if (snap->stack_count <= 1 || !snap->frame_count)
        return TDM_OK;
    matcher m = {.snap = snap, .rules = rules};
    m.hit = calloc(rules->count ? rules->count * snap->frame_count : 1, 1);
    m.stack_rule = malloc(snap->stack_count * sizeof *m.stack_rule);
    m.stack_at = calloc(snap->stack_count, sizeof *m.stack_at);
    m.cache = calloc(rules->count ? rules->count : 1, sizeof *m.cache);
    size_t n = 0;
    for (size_t i = 0; i < snap->event_count; i++)
        n += snap->events[i].action == TDM_ACTION_ALLOC && snap->events[i].stack_id &&
             snap->events[i].stack_id < snap->stack_count;
    m.allocs = malloc((n ? n : 1) * sizeof *m.allocs);
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    if (!m.hit || !m.stack_rule || !m.stack_at || !m.cache || !m.allocs)
        goto out;
    for (size_t i = 0; i < snap->stack_count; i++)
        m.stack_rule[i] = -2;
    for (size_t i = 0; i < snap->event_count; i++)
        if (snap->events[i].action == TDM_ACTION_ALLOC && snap->events[i].stack_id &&
            snap->events[i].stack_id < snap->stack_count)
            m.allocs[m.alloc_count++] = (int64_t)i;

    size_t own = own_rules(rules);
    for (size_t i = 0; i < model->alloc_count; i++) {
        const tdm_model_alloc *a = &model->allocs[i];
        uint32_t at = 0;
        if (decided[i])
            continue;
        /* A stack of the free says where it died, not what made it. */
        int has_stack = a->stack_id && a->stack_id < snap->stack_count &&
                        !(a->flags & TDM_MODEL_STACK_OF_FREE);
        int32_t r = has_stack && rules->count ? stack_match(&m, a->stack_id, &at) : -1;
        uint32_t zg = UINT32_MAX;
        if (r < 0 || (size_t)r >= own) {
            zg = zero_grad_frame(snap, a);
            if (zg == UINT32_MAX)
                zg = fsdp_reduce_frame(snap, a);
        }
        if (zg != UINT32_MAX) {
            cats[i] = TDM_CATEGORY_GRADIENT;
            why[i] = (tdm_category_reason){.source = TDM_CATEGORY_BY_FREE, .frame = zg};
            decided[i] = 1;
            continue;
        }
        if (r < 0)
            continue;
        const tdm_snap_stack *sk = &snap->stacks[a->stack_id];
        uint8_t cat = rules->rule[r].category;
        int died = 0, freed_outside = 0;
        /* Made before the window (seeded): when the call ended is not
         * known, and it lived at least until the window opened. */
        if (cat != TDM_CATEGORY_TEMPORARY && a->alloc_seq >= 0 &&
            a->free_seq != TDM_MODEL_SEQ_NEVER) {
            died = a->free_seq < call_end(&m, &m.cache[r], a->alloc_seq, sk->frames + at,
                                          sk->depth - at);
            if (died) {
                /* Against the outermost frame the rule matches: a local of
                 * _multi_tensor_adam freed as it returns is freed by its
                 * caller, still inside Optimizer.step. */
                uint32_t out = at;
                for (uint32_t k = at + 1; k < sk->depth; k++)
                    if (sk->frames[k] < snap->frame_count && frame_hits(&m, (size_t)r, sk->frames[k]))
                        out = k;
                freed_outside = free_runs_outside(snap, a, sk->frames + out, sk->depth - out);
            }
            died = died && !freed_outside;
        }
        cats[i] = died ? TDM_CATEGORY_TEMPORARY : cat;
        why[i] = (tdm_category_reason){.source = TDM_CATEGORY_BY_STACK, .in_call = (uint8_t)died,
                                       .freed_outside = (uint8_t)freed_outside,
                                       .rule = (uint32_t)r, .frame = sk->frames[at]};
        decided[i] = 1;
    }
    st = TDM_OK;
out:
    free(m.hit);
    free(m.stack_rule);
    free(m.stack_at);
    free(m.cache);
    free(m.allocs);
    return st;
}
