/* runtime/replay_save.c: `tidemark replay --save`: the replay recorded as a
 * normal .tdm, so that every command reads it (summary, view, diff, gate,
 * replay itself).  Recording goes through the recorder as in any program
 * (events, then the allocator's state and stats at the dump); only the
 * events' times are changed before the file is written: each event takes
 * the recorded time of the op that caused it, so that the replays of one
 * recording under different settings share its time axis and line up
 * side by side in `tidemark view`.
 *
 * Which op caused an event is told by the clock: op i begins at a reading
 * strictly later than every event of op i - 1 (the clock is read until it
 * moves on) and no later than its own events.
 *
 * Lock: none; the caller owns the allocator and the recorder (replay.c).
 */
#include "replay_save.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "recorder.h"
#include "snap_model.h"

tdm_status tdm__replay_rec_begin(tdm__replay_rec *r, const tdm_replay_save *save,
                                 const char *conf, size_t n)
{
    memset(r, 0, sizeof *r);
    r->save = save;
    r->n = n;
    r->op_start = malloc((n ? n : 1) * sizeof *r->op_start);
    if (!r->op_start)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_history_options h;
    tdm_history_options_init(&h);
    h.enabled = TDM_RECORD_ALL;
    h.context = TDM_CONTEXT_NONE;
    h.stacks = TDM_STACKS_NONE;
    /* An op records at most an alloc or a free's two events, and what the
     * allocator does to segments meanwhile: room for all, never a wrap. */
    h.max_entries = 3 * n + 65536;
    h.clear_history = 1;
    tdm__rec_set_config_text(conf ? conf : "");
    tdm_status st = tdm_record_memory_history(&h);
    if (st != TDM_OK) {
        free(r->op_start);
        r->op_start = NULL;
    }
    return st;
}

void tdm__replay_rec_op(tdm__replay_rec *r, size_t i)
{
    uint64_t before = tdm__clock_ns(), now;
    while ((now = tdm__clock_ns()) <= before)
        ;
    r->op_start[i] = now;
}

/* Each event takes the recorded time of its op: the last op that began at
 * or before it (events and op starts are both in time order). */
static void stamp_events(tdm_snap *snap, const uint64_t *op_start, const tdm_replay_save *save,
                         size_t n)
{
    const uint64_t *op_times = save->op_times;
    size_t k = 0;
    for (size_t e = 0; e < snap->event_count && n; e++) {
        while (k + 1 < n && op_start[k + 1] <= snap->events[e].time_ns)
            k++;
        snap->events[e].time_ns = op_times[k];
        if (save->on_event_op)
            save->on_event_op(save->op_ctx, e, k);
    }
    if (n) {
        snap->header.start_time_us = op_times[0] / 1000;
        snap->header.dump_time_us = op_times[n - 1] / 1000;
    }
}

tdm_status tdm__replay_rec_end(tdm__replay_rec *r, int write)
{
    tdm_status st = TDM_OK;
    if (write) {
        tdm_snap *snap = NULL;
        st = tdm__rec_build_snapshot(&snap);
        if (st == TDM_OK) {
            if (r->save->op_times)
                stamp_events(snap, r->op_start, r->save, r->n);
            st = tdm__snap_write_as(snap, r->save->path, r->save->replace);
            tdm__rec_snapshot_free(snap);
        }
    }
    tdm__rec_stop();
    tdm__rec_set_config_text(NULL);
    free(r->op_start);
    r->op_start = NULL;
    return st;
}
