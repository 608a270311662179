/* snapshot/annotate.c: the marks a program puts on its timeline: phases,
 * steps and after-the-fact category tags.
 *
 * Phases are process-wide: tdm_phase("forward") on any thread starts the
 * forward phase for every thread's later events.  Phase names are interned
 * once under the recorder lock (a phase change is rare next to allocations)
 * and events carry the small id. */
#include <string.h>

#include "recorder_internal.h"
#include "spill.h"
#include "spill_layout.h"

_Static_assert(TDM_SPILL_PHASE_MAX == TDM_MAX_PHASES, "the spill file keeps every phase");
_Static_assert(TDM_SPILL_PHASE_NAME == TDM_PHASE_NAME_MAX, "and their names whole");

/* The id of `name`, adding it if new; 0 when the table is full.  Caller
 * holds the recorder lock. */
static uint32_t intern_phase(const char *name)
{
    tdm__recorder *r = &tdm__recorder_state;
    char cut[TDM_PHASE_NAME_MAX];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    for (uint32_t i = 1; i < r->phase_count; i++)
        if (strcmp(r->phase_names[i], cut) == 0)
            return i;
    if (r->phase_count >= TDM_MAX_PHASES)
        return 0;
    memcpy(r->phase_names[r->phase_count], cut, sizeof cut);
    return r->phase_count++;
}

tdm_status tdm_phase(const char *name)
{
    if (!name || !*name)
        return TDM_INVALID_ARGUMENT;
    tdm__recorder *r = &tdm__recorder_state;
    pthread_mutex_lock(&r->lock);
    uint32_t id = intern_phase(name);
    char kept[TDM_PHASE_NAME_MAX];
    if (id != 0)
        memcpy(kept, r->phase_names[id], sizeof kept);
    pthread_mutex_unlock(&r->lock);
    if (id == 0)
        return TDM_HOST_OUT_OF_MEMORY;
    /* After the recorder's lock: the spill's is never taken inside it. */
    tdm__spill_note_phase(id, kept);
    atomic_store_explicit(&tdm__rec.phase, id, memory_order_relaxed);
    tdm__rec_event(TDM_ACTION_PHASE, -1, 0, 0, 0, 0, 0);
    return TDM_OK;
}

tdm_status tdm_phase_end(void)
{
    /* Phase id 0 is "no phase", the state before the first mark. */
    atomic_store_explicit(&tdm__rec.phase, 0, memory_order_relaxed);
    tdm__rec_event(TDM_ACTION_PHASE, -1, 0, 0, 0, 0, 0);
    return TDM_OK;
}

tdm_status tdm_step(void)
{
    atomic_fetch_add_explicit(&tdm__rec.step, 1, memory_order_relaxed);
    tdm__rec_event(TDM_ACTION_STEP, -1, 0, 0, 0, 0, 0);
    return TDM_OK;
}

tdm_status tdm_tag_ptr(const void *ptr, tdm_category category)
{
    if (!ptr || (unsigned)category >= TDM_CATEGORY_COUNT_)
        return TDM_INVALID_ARGUMENT;
    tdm__tag_listener_fn listener =
        atomic_load(&tdm__recorder_state.tag_listener);
    if (!listener)
        return TDM_UNKNOWN_POINTER;
    tdm_status st = listener(ptr, (uint8_t)category);
    if (st != TDM_OK)
        return st;
    /* The event carries the new tag in its category field, which
     * tdm__rec_event fills from the thread's tag stack: push it briefly. */
    if (tdm_tag_push(category) == TDM_OK) {
        tdm__rec_event(TDM_ACTION_TAG, -1, (uint64_t)(uintptr_t)ptr, 0, 0, 0, 0);
        tdm_tag_pop();
    }
    return TDM_OK;
}
