/* viewer-export/model/categories.h: which kind of memory each allocation is.
 *
 * Categories (tdm_category): PARAMETER, OPTIMIZER_STATE, GRADIENT,
 * ACTIVATION, INPUT, TEMPORARY, UNKNOWN.  One decision, in this order
 * (docs/categories.md argues it):
 *
 *   1. an explicit tag (tdm_tag_push / tdm_tag_ptr, carried in the alloc
 *      event and the final block) wins;
 *   2. else a rule over the allocation's stack (format_rules.h): the first
 *      rule, in order, that matches one of its frames gives the category
 *      when the allocation outlives the matched call, `temporary` when it
 *      is freed inside it (categories_stack.c).  The rules are those of
 *      `--rules FILE` (tdm__categories_set_rules_file), then the file named
 *      by the recording's TIDEMARK_CONF `category_rules=`, then tidemark's
 *      defaults for PyTorch (tdm__categories_default_rules);
 *      Between the program's rules and tidemark's defaults, facts of an
 *      allocation's free: memory freed by torch's zero_grad (the free's
 *      own stack, context=all) is a gradient, and so is memory FSDP2's
 *      foreach_reduce frees that it did not make;
 *   3. else the category is inferred from phase marks and lifetimes
 *      (DESIGN.md "Categories"): memory that outlives the steps is static
 *      (parameters, optimizer state), memory made in forward and freed in
 *      backward is activation, memory made in backward and alive into the
 *      optimizer phase is gradient, memory made and freed inside one phase
 *      is temporary;
 *   4. what is still unknown and was freed as autograd released what a node
 *      saved for backward (the free's own stack runs through
 *      torch::autograd::SavedVariable::reset_data or a node's
 *      release_variables) is an activation: the one lifetime fact of
 *      forward-for-backward a history without phase marks has.
 *
 * Every output that shows categories calls tdm__categories_infer or
 * tdm__categories_decide, so they all agree.  State: the rules file set by
 * the command line, and the recording's rules files already warned about;
 * the tool is single threaded.
 */
#ifndef TDM_VIEWER_CATEGORIES_H
#define TDM_VIEWER_CATEGORIES_H

#include <stddef.h>
#include <stdint.h>

#include "format_rules.h"
#include "model.h"

/* What decided an allocation's category. */
typedef enum tdm_category_source {
    TDM_CATEGORY_BY_TAG = 0,
    TDM_CATEGORY_BY_STACK = 1,  /* a rule over its stack's frames */
    TDM_CATEGORY_BY_PHASES = 2, /* the phase and lifetime rules */
    TDM_CATEGORY_BY_FREE = 3,   /* a fact of its free: freed by torch's zero_grad
                                 * or by FSDP2's foreach_reduce (a gradient), or
                                 * as autograd released a node's saved tensors
                                 * (an activation) */
} tdm_category_source;

/* Which phase and lifetime rule decided (docs/categories.md, "The rules"). */
typedef enum tdm_phase_rule {
    TDM_PHASE_RULE_NO_MARKS = 0,    /* no phase or step marks at all: unknown */
    TDM_PHASE_RULE_SEEDED,          /* made before the window: unknown */
    TDM_PHASE_RULE_SAME_INSTANCE,   /* freed in the phase instance it was made in */
    TDM_PHASE_RULE_INIT_STATIC,     /* made in init, outlives the steps */
    TDM_PHASE_RULE_INIT_FREED,      /* made in init, freed during the steps */
    TDM_PHASE_RULE_DATA,            /* made in a data phase, outlives it */
    TDM_PHASE_RULE_FORWARD_BACKWARD,/* made in forward, freed in backward */
    TDM_PHASE_RULE_BACKWARD,        /* made in backward, outlives it */
    TDM_PHASE_RULE_OPTIMIZER,       /* made in an optimizer phase, outlives it */
    TDM_PHASE_RULE_FREED_IN_STEP,   /* no role rule; freed in its step */
    TDM_PHASE_RULE_OUTLIVES_STEP,   /* no role rule; outlives its step: unknown */
    TDM_PHASE_RULE_INIT_FREED_IN_DATA, /* made in init, freed in a data phase: input */
} tdm_phase_rule;

typedef struct tdm_category_reason {
    uint8_t source;     /* tdm_category_source */
    uint8_t phase_rule; /* BY_PHASES: tdm_phase_rule */
    uint8_t in_call;    /* BY_STACK: freed inside the matched call (temporary) */
    uint8_t freed_outside; /* BY_STACK: freed before any allocation outside the
                            * call, by a free whose own stack runs outside it */
    uint32_t rule;      /* BY_STACK: index into tdm_category_decision.rules */
    uint32_t frame;     /* BY_STACK: the frame (index into snap->frames) it matched;
                         * BY_FREE: the zero_grad, foreach_reduce or
                         * saved-tensor release frame of the free's stack */
} tdm_category_reason;

typedef struct tdm_category_decision {
    uint8_t *cats;              /* cats[i]: category of model->allocs[i] */
    tdm_category_reason *why;   /* why[i]: what decided it */
    tdm_category_rules rules;   /* the stack rules applied, in order */
} tdm_category_decision;

/* One category per allocation: (*cats)[i] is the category of
 * model->allocs[i] (a tdm_category).  *cats is malloc'd; free() it.
 * TDM_HOST_OUT_OF_MEMORY is the only failure. */
tdm_status tdm__categories_infer(const tdm_model *model, uint8_t **cats);

/* The same decision with its reasons; free it with
 * tdm__categories_decision_free.  TDM_HOST_OUT_OF_MEMORY is the only
 * failure. */
tdm_status tdm__categories_decide(const tdm_model *model, tdm_category_decision *d);
void tdm__categories_decision_free(tdm_category_decision *d);

/* One line saying why allocation `i` has its category ("rule
 * rules.txt:2 `gradient function=backward$` matched Tensor.backward
 * (_tensor.py:488); outlives that call").  Returns buf. */
const char *tdm__categories_explain(const tdm_model *model, const tdm_category_decision *d,
                                    size_t i, char *buf, size_t len);

/* Rules read from `path` go before the recording's and the defaults in
 * every decision afterwards (NULL: none).  0, or -1 with `err` naming the
 * file and line of the problem. */
int tdm__categories_set_rules_file(const char *path, char *err, size_t err_len);

/* tidemark's default rules, in the rules-file format (format_rules.h). */
const char *tdm__categories_default_rules(void);

/* ---- for categories.c, from categories_stack.c -------------------------- */

/* The rules that apply to `snap`: --rules, the recording's, the defaults.
 * Prints one warning line (once per file) when the recording names a rules
 * file that cannot be read now.  TDM_HOST_OUT_OF_MEMORY is the only failure. */
tdm_status tdm__categories_rules_for(const tdm_snap *snap, tdm_category_rules *out);

/* Decides by the stack rules what they can: for every untagged allocation
 * whose stack a rule matches, sets cats[i] and why[i] (source BY_STACK)
 * and marks[i] = 1; leaves the others. */
tdm_status tdm__categories_by_stack(const tdm_model *model, const tdm_category_rules *rules,
                                    uint8_t *cats, tdm_category_reason *why, uint8_t *decided);

/* The frame of the free's own stack (context=all) at which autograd
 * released a node's saved tensors (categories.h, step 4), or UINT32_MAX. */
uint32_t tdm__categories_saved_release_frame(const tdm_snap *snap, const tdm_model_alloc *a);

/* out[i][c]: bytes of category c live on device index `dev` just after
 * event seqs[i] (seqs ascending), cats[] being a category per allocation
 * of `model` (tdm__categories_infer).  TDM_HOST_OUT_OF_MEMORY is the only
 * failure. */
tdm_status tdm__categories_bytes_at(const tdm_model *model, const uint8_t *cats, size_t dev,
                                    const int64_t *seqs, size_t n,
                                    int64_t (*out)[TDM_CATEGORY_COUNT_]);

#endif
