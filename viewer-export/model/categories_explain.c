/* viewer-export/model/categories_explain.c: one line saying what decided an
 * allocation's category (categories.h): its tag, the rule over its stack
 * and the frame it matched, or the row of the phase and lifetime rules
 * (docs/categories.md) with the phases it was made and freed in.  No
 * state. */
#include "categories.h"
#include "sites.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *phase_at(const tdm_model *m, int64_t seq, char *buf, size_t len)
{
    if (seq < 0 || seq == TDM_MODEL_SEQ_NEVER || (uint64_t)seq >= m->snap->event_count)
        return "";
    const tdm_event *ev = &m->snap->events[seq];
    char name[96];
    const char *ph = tdm__model_phase_name(m, ev->phase, name, sizeof name);
    snprintf(buf, len, "%s%s, step %" PRIu32, ph[0] ? "phase " : "no phase", ph, ev->step);
    return buf;
}

static const char *phase_rule_text(uint8_t rule)
{
    switch ((tdm_phase_rule)rule) {
    case TDM_PHASE_RULE_NO_MARKS:
        return "no stack rule matched and the snapshot has no phase or step marks";
    case TDM_PHASE_RULE_SEEDED:
        return "made before the recorded window opened: the phase it was made in is lost";
    case TDM_PHASE_RULE_SAME_INSTANCE:
        return "made and freed in the same phase instance";
    case TDM_PHASE_RULE_INIT_STATIC:
        return "made during init and outlives the steps";
    case TDM_PHASE_RULE_INIT_FREED:
        return "made during init and freed during the steps";
    case TDM_PHASE_RULE_DATA:
        return "made in a data phase and outlives it";
    case TDM_PHASE_RULE_FORWARD_BACKWARD:
        return "made in forward and freed in backward";
    case TDM_PHASE_RULE_BACKWARD:
        return "made in backward and outlives that phase instance";
    case TDM_PHASE_RULE_OPTIMIZER:
        return "made in an optimizer phase and outlives that phase instance";
    case TDM_PHASE_RULE_FREED_IN_STEP:
        return "no phase rule for where it was made; freed within its step";
    case TDM_PHASE_RULE_OUTLIVES_STEP:
        return "no phase rule for where it was made, and it outlives its step";
    case TDM_PHASE_RULE_INIT_FREED_IN_DATA:
        return "made during init and freed in a data phase (the first batch, let go as the "
               "next is loaded)";
    }
    return "?";
}

const char *tdm__categories_explain(const tdm_model *model, const tdm_category_decision *d,
                                    size_t i, char *buf, size_t len)
{
    const tdm_model_alloc *a = &model->allocs[i];
    const tdm_category_reason *w = &d->why[i];
    const tdm_snap *snap = model->snap;
    const char *cat = tdm_category_name((tdm_category)d->cats[i]);
    if (!len)
        return buf;
    switch (w->source) {
    case TDM_CATEGORY_BY_TAG:
        snprintf(buf, len, "%s: tagged by the program (tdm_tag_push or tdm_tag_ptr)", cat);
        break;
    case TDM_CATEGORY_BY_STACK: {
        const tdm_category_rule *r = w->rule < d->rules.count ? &d->rules.rule[w->rule] : NULL;
        char frame[512] = "?";
        if (w->frame < snap->frame_count)
            tdm__site_format_frame(frame, sizeof frame, &snap->frames[w->frame]);
        snprintf(buf, len, "%s: rule %s `%s` matched frame %s; %s", cat,
                 r ? r->where : "?", r ? r->text : "?", frame,
                 w->in_call ? "freed inside that call, so temporary"
                 : w->freed_outside ? "outlives that call (the stack that freed it runs outside it)"
                 : a->alloc_seq < 0 ? "made before the recorded window"
                 : a->free_seq == TDM_MODEL_SEQ_NEVER ? "never freed"
                                                      : "outlives that call");
        break;
    }
    case TDM_CATEGORY_BY_FREE: {
        char frame[512] = "?";
        if (w->frame < snap->frame_count)
            tdm__site_format_frame(frame, sizeof frame, &snap->frames[w->frame]);
        if (d->cats[i] == TDM_CATEGORY_ACTIVATION)
            snprintf(buf, len,
                     "%s: freed by %s, as autograd released what a node saved for backward "
                     "(no stack or phase rule named it)", cat, frame);
        else if (w->frame < snap->frame_count && snap->frames[w->frame].function &&
                 strstr(snap->frames[w->frame].function, "foreach_reduce"))
            snprintf(buf, len,
                     "%s: freed by %s, and what FSDP's foreach_reduce frees of what it did not "
                     "make is the gradients it reduced", cat, frame);
        else
            snprintf(buf, len, "%s: freed by %s, and what zero_grad frees is gradients", cat,
                     frame);
        break;
    }
    default: {
        char made[160], gone[160];
        const char *pm = phase_at(model, a->alloc_seq, made, sizeof made);
        const char *pg = phase_at(model, a->free_seq, gone, sizeof gone);
        snprintf(buf, len, "%s: %s%s (%s%s%s%s%s%s)", cat,
                 w->source == TDM_CATEGORY_BY_PHASES && snap->stack_count > 1 &&
                         a->stack_id && w->phase_rule != TDM_PHASE_RULE_NO_MARKS
                     ? "no stack rule matched; phase rule: " : "phase rule: ",
                 phase_rule_text(w->phase_rule),
                 pm[0] ? "made in " : "made before the window", pm,
                 a->free_seq == TDM_MODEL_SEQ_NEVER ? ", never freed" : "",
                 a->free_seq != TDM_MODEL_SEQ_NEVER ? ", freed in " : "", pg,
                 "");
        break;
    }
    }
    return buf;
}
