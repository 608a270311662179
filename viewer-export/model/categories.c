/* viewer-export/model/categories.c: decides the category of every allocation
 * of a model (categories.h): its tag, else a rule over its stack
 * (categories_stack.c), else the phase marks around it and its lifetime,
 * and for what those leave unknown, autograd's release of saved tensors.
 * docs/categories.md explains the rules to users; this file is the one
 * implementation of the phase rules and of the order of the four.
 *
 * What the phase rules look at, per allocation: the role of the phase in force
 * at its alloc and at its free (a phase's role comes from its name: see
 * role_of_name), whether a phase or step mark lies between the two (a
 * "phase instance" ends at every mark), the step at its alloc, and whether
 * it is still live when the last step begins.  Nothing else: no sizes, no
 * stacks, no times, so the rules mean the same on every program.
 *
 * Invariants: the output has exactly model->alloc_count entries, each a
 * valid tdm_category; an explicit tag is never overridden.  Cost
 * O(events + allocations × log marks).  No state, no locks.
 */
#include "categories.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* What a phase is for, as far as the rules care. */
typedef enum role {
    ROLE_OTHER = 0, /* a name the rules do not know */
    ROLE_INIT,      /* building the model, before training */
    ROLE_DATA,      /* loading a batch */
    ROLE_FORWARD,
    ROLE_BACKWARD,
    ROLE_OPTIMIZER,
    ROLE_ZERO_GRAD, /* gradients cleared; known, but no rule of its own */
    ROLE_END,       /* after the training loop */
} role;

/* Words of a phase name and the role each gives.  A name is split into
 * words at every character that is not a letter or digit ("zero_grad" →
 * "zero", "grad"; "forward.1" → "forward", "1"); the first word of the
 * name found here gives the role, except that "zero" followed by "grad"
 * is zero_grad. */
static const struct {
    const char *word;
    role r;
} role_words[] = {
    {"init", ROLE_INIT},         {"initialize", ROLE_INIT},
    {"setup", ROLE_INIT},        {"build", ROLE_INIT},
    {"data", ROLE_DATA},         {"input", ROLE_DATA},
    {"load", ROLE_DATA},         {"batch", ROLE_DATA},
    {"dataloader", ROLE_DATA},   {"forward", ROLE_FORWARD},
    {"fwd", ROLE_FORWARD},       {"backward", ROLE_BACKWARD},
    {"bwd", ROLE_BACKWARD},      {"optimizer", ROLE_OPTIMIZER},
    {"optim", ROLE_OPTIMIZER},   {"opt", ROLE_OPTIMIZER},
    {"update", ROLE_OPTIMIZER},  {"zerograd", ROLE_ZERO_GRAD},
    {"end", ROLE_END},           {"teardown", ROLE_END},
    {"cleanup", ROLE_END},       {"shutdown", ROLE_END},
    {"finish", ROLE_END},        {"exit", ROLE_END},
};

static role role_of_name(const char *name)
{
    char word[32], prev[32] = "";
    if (!name)
        return ROLE_OTHER;
    const char *p = name;
    while (*p) {
        size_t n = 0;
        while (*p && !isalnum((unsigned char)*p))
            p++;
        while (*p && isalnum((unsigned char)*p)) {
            if (n + 1 < sizeof word)
                word[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        word[n] = '\0';
        if (!n)
            break;
        if (strcmp(prev, "zero") == 0 && strcmp(word, "grad") == 0)
            return ROLE_ZERO_GRAD;
        for (size_t i = 0; i < sizeof role_words / sizeof role_words[0]; i++)
            if (strcmp(word, role_words[i].word) == 0)
                return role_words[i].r;
        memcpy(prev, word, n + 1);
    }
    return ROLE_OTHER;
}

typedef struct ctx {
    const tdm_snap *snap;
    uint8_t *roles;       /* per phase id */
    size_t role_count;
    int64_t *marks;       /* positions of phase and step events, ascending */
    size_t mark_count;
    int64_t last_step;    /* position of the last step mark; -1 = none */
} ctx;

static role role_at(const ctx *c, int64_t seq)
{
    uint32_t ph = c->snap->events[seq].phase;
    return ph < c->role_count ? (role)c->roles[ph] : ROLE_OTHER;
}

/* Nonzero when a phase or step mark lies strictly between positions a
 * and b (a < b): the two events are in different phase instances. */
static int mark_between(const ctx *c, int64_t a, int64_t b)
{
    size_t lo = 0, hi = c->mark_count; /* first mark > a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->marks[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->mark_count && c->marks[lo] < b;
}

/* "Outlives the steps": never freed, freed in an end phase, or, when the
 * snapshot has step marks, still live when the last step begins. */
static int is_static(const ctx *c, const tdm_model_alloc *a)
{
    if (a->free_seq == TDM_MODEL_SEQ_NEVER)
        return 1;
    if (role_at(c, a->free_seq) == ROLE_END)
        return 1;
    return c->last_step >= 0 && a->free_seq > c->last_step;
}

static int is_tagged(const tdm_model_alloc *a)
{
    return a->category != TDM_CATEGORY_UNKNOWN && a->category < TDM_CATEGORY_COUNT_;
}

#define DECIDE(rule, cat) return (*why = (rule), (cat))

/* The phase and lifetime rules for an untagged allocation; *why gets the
 * row that decided. */
static uint8_t infer_one(const ctx *c, const tdm_model_alloc *a, uint8_t *why)
{
    if (c->mark_count == 0)
        DECIDE(TDM_PHASE_RULE_NO_MARKS, TDM_CATEGORY_UNKNOWN);
    /* Made before the window opened: the phase it was made in is lost. */
    if (a->alloc_seq < 0)
        DECIDE(TDM_PHASE_RULE_SEEDED, TDM_CATEGORY_UNKNOWN);

    const tdm_event *ev = &c->snap->events[a->alloc_seq];
    role made = role_at(c, a->alloc_seq);
    int freed = a->free_seq != TDM_MODEL_SEQ_NEVER;
    int same_instance = freed && !mark_between(c, a->alloc_seq, a->free_seq);
    role gone = freed ? role_at(c, a->free_seq) : ROLE_END;

    /* Before the first step, no phase at all, or (when the program marks
     * steps) a phase the rules do not know, is still model building. */
    if (made == ROLE_OTHER && ev->step == 0 &&
        (ev->phase == 0 || c->last_step >= 0))
        made = ROLE_INIT;

    if (same_instance)
        DECIDE(TDM_PHASE_RULE_SAME_INSTANCE, TDM_CATEGORY_TEMPORARY);
    switch (made) {
    case ROLE_INIT:
        if (is_static(c, a))
            DECIDE(TDM_PHASE_RULE_INIT_STATIC, TDM_CATEGORY_PARAMETER);
        /* The first batch, made before the first step as the model was,
         * is let go as the next one is loaded. */
        if (gone == ROLE_DATA)
            DECIDE(TDM_PHASE_RULE_INIT_FREED_IN_DATA, TDM_CATEGORY_INPUT);
        DECIDE(TDM_PHASE_RULE_INIT_FREED, TDM_CATEGORY_TEMPORARY);
    case ROLE_DATA:
        DECIDE(TDM_PHASE_RULE_DATA, TDM_CATEGORY_INPUT);
    case ROLE_FORWARD:
        if (gone == ROLE_BACKWARD)
            DECIDE(TDM_PHASE_RULE_FORWARD_BACKWARD, TDM_CATEGORY_ACTIVATION);
        break;
    case ROLE_BACKWARD:
        DECIDE(TDM_PHASE_RULE_BACKWARD, TDM_CATEGORY_GRADIENT);
    case ROLE_OPTIMIZER:
        DECIDE(TDM_PHASE_RULE_OPTIMIZER, TDM_CATEGORY_OPTIMIZER_STATE);
    default:
        break;
    }
    /* No rule for it: a buffer of the step is still temporary when the
     * step frees it; what outlives its step unexplained stays unknown. */
    if (freed && c->snap->events[a->free_seq].step == ev->step)
        DECIDE(TDM_PHASE_RULE_FREED_IN_STEP, TDM_CATEGORY_TEMPORARY);
    DECIDE(TDM_PHASE_RULE_OUTLIVES_STEP, TDM_CATEGORY_UNKNOWN);
}

void tdm__categories_decision_free(tdm_category_decision *d)
{
    free(d->cats);
    free(d->why);
    tdm__category_rules_free(&d->rules);
    memset(d, 0, sizeof *d);
}

tdm_status tdm__categories_decide(const tdm_model *model, tdm_category_decision *d)
{
    const tdm_snap *snap = model->snap;
    ctx c = {.snap = snap, .last_step = -1};
    uint8_t *decided = NULL;
    size_t n_allocs = model->alloc_count ? model->alloc_count : 1;

    memset(d, 0, sizeof *d);
    d->cats = malloc(n_allocs);
    d->why = calloc(n_allocs, sizeof *d->why);
    decided = calloc(n_allocs, 1);
    c.role_count = snap->phase_count;
    c.roles = malloc(c.role_count ? c.role_count : 1);
    size_t n = 0;
    for (size_t i = 0; i < snap->event_count; i++)
        n += snap->events[i].action == TDM_ACTION_PHASE ||
             snap->events[i].action == TDM_ACTION_STEP;
    c.marks = malloc((n ? n : 1) * sizeof *c.marks);
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    if (!d->cats || !d->why || !decided || !c.roles || !c.marks)
        goto out;
    for (size_t i = 0; i < c.role_count; i++)
        c.roles[i] = (uint8_t)(i == 0 ? ROLE_OTHER : role_of_name(snap->phase_names[i]));
    for (size_t i = 0; i < snap->event_count; i++) {
        uint8_t act = snap->events[i].action;
        if (act == TDM_ACTION_STEP)
            c.last_step = (int64_t)i;
        if (act == TDM_ACTION_PHASE || act == TDM_ACTION_STEP)
            c.marks[c.mark_count++] = (int64_t)i;
    }

    /* 1. tags */
    for (size_t i = 0; i < model->alloc_count; i++) {
        const tdm_model_alloc *a = &model->allocs[i];
        if (is_tagged(a)) {
            d->cats[i] = a->category;
            d->why[i].source = TDM_CATEGORY_BY_TAG;
            decided[i] = 1;
        }
    }
    /* 2. rules over stacks */
    if ((st = tdm__categories_rules_for(snap, &d->rules)) != TDM_OK ||
        (st = tdm__categories_by_stack(model, &d->rules, d->cats, d->why, decided)) != TDM_OK)
        goto out;
    /* 3. phases and lifetimes */
    for (size_t i = 0; i < model->alloc_count; i++) {
        if (decided[i])
            continue;
        d->why[i].source = TDM_CATEGORY_BY_PHASES;
        d->cats[i] = infer_one(&c, &model->allocs[i], &d->why[i].phase_rule);
        /* 4. what is left unknown, released by autograd with a node's saved
         * tensors: forward made it for backward.  Last, so that phases
         * still call a batch the graph let go input. */
        uint32_t f;
        if (d->cats[i] == TDM_CATEGORY_UNKNOWN &&
            (f = tdm__categories_saved_release_frame(snap, &model->allocs[i])) != UINT32_MAX) {
            d->cats[i] = TDM_CATEGORY_ACTIVATION;
            d->why[i] = (tdm_category_reason){.source = TDM_CATEGORY_BY_FREE, .frame = f};
        }
    }
    st = TDM_OK;
out:
    free(c.roles);
    free(c.marks);
    free(decided);
    if (st != TDM_OK)
        tdm__categories_decision_free(d);
    return st;
}

tdm_status tdm__categories_infer(const tdm_model *model, uint8_t **cats)
{
    tdm_category_decision d;
    tdm_status st = tdm__categories_decide(model, &d);
    if (st != TDM_OK) {
        *cats = NULL;
        return st;
    }
    *cats = d.cats;
    d.cats = NULL;
    tdm__categories_decision_free(&d);
    return TDM_OK;
}
