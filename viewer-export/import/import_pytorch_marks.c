/* viewer-export/import/import_pytorch_marks.c: a PyTorch snapshot's
 * external_annotations as tidemark's phase and step marks: START entries
 * begin a phase ("ProfilerStep#N" marks a step), an END ends the phase in
 * force; put in time order before the history is merged
 * (import_pytorch.c).  Each entry is also kept as it is (stage, name,
 * device, time: the snapshot's annotations, format 1.4), so that an
 * export gives PyTorch's list back; the merge places these and the trace
 * lists' own annotations in the history here. */
#include "import_pytorch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t phase_id(im *c, const char *name, size_t n)
{
    const char *s = tdm__pti_intern(c, name, n);
    if (!s)
        return 0;
    for (size_t i = 1; i < c->nphases; i++) /* few distinct phases */
        if (c->phases[i] == s)
            return (uint32_t)i;
    if (c->nphases >= 65535) /* the recorder's own limit is far lower */
        return 0;
    if (tdm__grow_array(&c->phases, &c->cap_phases, c->nphases + 1, sizeof *c->phases) != 0) {
        tdm__pti_oom(c);
        return 0;
    }
    c->phases[c->nphases] = s;
    return (uint32_t)c->nphases++;
}

/* The entry as PyTorch wrote it, for the export (device: the int there,
 * else 0). */
static int keep_as_is(im *c, const tdm_pkv *a, const tdm_pkv *name, uint64_t time_us,
                      int is_end)
{
    const char *text = tdm__pti_intern(c, name->v.s, name->n);
    if (!text)
        return -1;
    const tdm_pkv *dv = tdm__pk_get(a, "device");
    int32_t device = dv && dv->type == TDM_PKV_INT && !dv->big && dv->v.i >= -1 &&
                             dv->v.i <= 32767
                         ? (int32_t)dv->v.i
                         : 0;
    if (tdm__grow_array(&c->ext_notes, &c->cap_ext_notes, c->next_notes + 1,
                        sizeof *c->ext_notes) != 0)
        return tdm__pti_oom(c);
    c->ext_notes[c->next_notes++] = (pending_note){
        .list = SIZE_MAX,
        .a = {.time_ns = time_us * 1000, .device = device,
              .kind = is_end ? TDM_ANNOTATION_END : TDM_ANNOTATION_START, .text = text}};
    return 0;
}

int tdm__pti_read_annotations(im *c, const tdm_pkv *list)
{
    if (!tdm__pk_is_seq(list))
        return 0; /* optional and ignored by the viewer: never fatal */
    for (uint32_t i = 0; i < list->n; i++) {
        const tdm_pkv *a = list->v.items[i];
        const tdm_pkv *name = tdm__pk_get(a, "name");
        uint64_t t = 0;
        const tdm_pkv *stage = tdm__pk_get(a, "stage");
        int is_end = tdm__pti_is_str(stage, "END");
        if ((!is_end && !tdm__pti_is_str(stage, "START")) || !name ||
            name->type != TDM_PKV_STR ||
            tdm__pk_u64(tdm__pk_get(a, "time_us"), &t) != 0 || (int64_t)t < 0)
            continue;
        if (keep_as_is(c, a, name, t, is_end) < 0)
            return -1;
        pending_mark m = {.time_ns = t * 1000, .order = i, .is_end = (uint8_t)is_end};
        unsigned step;
        char tail;
        char buf[48];
        snprintf(buf, sizeof buf, "%.*s", (int)(name->n < 47 ? name->n : 47), name->v.s);
        if (sscanf(buf, "ProfilerStep#%u%c", &step, &tail) == 1) {
            if (is_end)
                continue; /* a step ends where the next begins */
            m.value = step;
            m.is_step = 1;
        } else if (!(m.value = phase_id(c, name->v.s, name->n))) {
            if (c->status != TDM_OK)
                return -1;
            continue;
        }
        if (tdm__grow_array(&c->marks, &c->cap_marks, c->nmarks + 1, sizeof *c->marks) != 0)
            return tdm__pti_oom(c);
        c->marks[c->nmarks++] = m;
        c->rep.annotations++;
    }
    return 0;
}

static int mark_cmp(const void *pa, const void *pb)
{
    const pending_mark *a = pa, *b = pb;
    if (a->time_ns != b->time_ns)
        return a->time_ns < b->time_ns ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Keeps the END marks that end something: the phase in force, with an
 * event after it and no START at the same moment (which replaces the
 * phase anyway: tidemark's own export writes END then START at each phase
 * change, and one at the end of the history).  Marks sorted by time. */
static void drop_idle_ends(im *c)
{
    uint64_t last = 0;
    for (size_t i = 0; i < c->nevents; i++)
        if (c->events[i].time_ns > last)
            last = c->events[i].time_ns;
    uint32_t phase = 0;
    size_t kept = 0;
    for (size_t i = 0; i < c->nmarks; i++) {
        pending_mark m = c->marks[i];
        if (m.is_end) {
            const pending_mark *next = i + 1 < c->nmarks ? &c->marks[i + 1] : NULL;
            if (phase != m.value || m.time_ns >= last ||
                (next && next->time_ns == m.time_ns && !next->is_step && !next->is_end))
                continue;
            phase = 0;
        } else if (!m.is_step) {
            phase = m.value;
        }
        c->marks[kept++] = m;
    }
    c->nmarks = kept;
}

void tdm__pti_order_marks(im *c)
{
    qsort(c->marks, c->nmarks, sizeof *c->marks, mark_cmp);
    drop_idle_ends(c);
}

/* ---- annotations kept for the round trip (format 1.4) ------------------- */

/* The notes of list k (its run of c->notes) whose place is before the
 * list's event `at` (the list's end: those left), as annotations before
 * merged event n. */
void tdm__pti_place_notes(im *c, size_t k, size_t *cursor, size_t at, size_t n)
{
    while (*cursor < c->nnotes && c->notes[*cursor].list == k && c->notes[*cursor].at <= at) {
        tdm_snap_annotation a = c->notes[(*cursor)++].a;
        a.before_event = n;
        c->annotations[c->nannotations++] = a;
    }
}

/* The external_annotations entries, in their list's order, each placed
 * before the first merged event not older than it (never before the one
 * ahead of it), then both kinds of annotations into one history order. */
int tdm__pti_place_external_notes(im *c)
{
    size_t n = c->nannotations + c->next_notes;
    if (!c->next_notes)
        return 0;
    tdm_snap_annotation *all = malloc(n * sizeof *all);
    if (!all)
        return tdm__pti_oom(c);
    size_t at = 0;
    for (size_t i = 0; i < c->next_notes; i++) {
        while (at < c->nevents && c->events[at].time_ns < c->ext_notes[i].a.time_ns)
            at++;
        c->ext_notes[i].a.before_event = at;
    }
    size_t a = 0, b = 0, k = 0;
    while (a < c->nannotations || b < c->next_notes)
        if (b == c->next_notes ||
            (a < c->nannotations && c->annotations[a].before_event <= c->ext_notes[b].a.before_event))
            all[k++] = c->annotations[a++];
        else
            all[k++] = c->ext_notes[b++].a;
    free(c->annotations);
    c->annotations = all;
    c->nannotations = n;
    return 0;
}
