/* viewer-export/cli/replay_enrich.c: a saved replay (`tidemark replay
 * --save`) given what the recording knew and the replay does not: each
 * event takes the stack, phase, step and category tag of the recorded
 * event its request came from (the library says which, tidemark_private.h's
 * on_event_op), the recording's phase and step marks go back in at their
 * places, and the file carries the recording's frame, stack and phase
 * tables, so that a saved setting reads like the recording in `view`
 * (categories, sites, phase bands), `summary` and `diff`, not as grey
 * "unknown" with no stacks.  The allocator's events, segments, final
 * state and stats stay the replay's own.
 *
 * Invariant: an event keeps its time, action, address and sizes; the
 * file is rewritten only when every event was told its op.
 * Single-threaded; no state beyond the call.
 */
#include "replay_enrich.h"

#include <stdlib.h>
#include <string.h>

int tdm__replay_event_op_note(tdm_replay_event_ops *m, size_t event, size_t op)
{
    if (event >= m->cap) {
        size_t cap = m->cap ? m->cap : 1024;
        while (cap <= event)
            cap *= 2;
        size_t *grown = realloc(m->op, cap * sizeof *grown);
        if (!grown) {
            m->failed = 1;
            return -1;
        }
        m->op = grown;
        m->cap = cap;
    }
    m->op[event] = op;
    if (event + 1 > m->count)
        m->count = event + 1;
    return 0;
}

static int is_mark(const tdm_event *e)
{
    return e->action == TDM_ACTION_PHASE || e->action == TDM_ACTION_STEP;
}

/* A block's stack and category: those of the last allocation at its
 * address (rows sorted by address, then by event order). */
typedef struct addr_row {
    uint64_t addr;
    size_t event;
} addr_row;

static int by_addr(const void *pa, const void *pb)
{
    const addr_row *a = pa, *b = pb;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->event < b->event ? -1 : a->event > b->event;
}

static void tag_blocks(tdm_snap *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->event_count; i++)
        n += s->events[i].action == TDM_ACTION_ALLOC;
    addr_row *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows)
        return; /* the blocks keep no stack: the events have theirs */
    n = 0;
    for (size_t i = 0; i < s->event_count; i++)
        if (s->events[i].action == TDM_ACTION_ALLOC)
            rows[n++] = (addr_row){s->events[i].addr, i};
    qsort(rows, n, sizeof *rows, by_addr);
    for (size_t b = 0; b < s->block_count; b++) {
        tdm_snap_block *blk = &s->blocks[b];
        size_t lo = 0, hi = n; /* the first row past the block's address */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (rows[mid].addr <= blk->address)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0 || rows[lo - 1].addr != blk->address || !blk->requested_size)
            continue;
        const tdm_event *e = &s->events[rows[lo - 1].event];
        blk->stack_id = e->stack_id;
        blk->category = e->category;
    }
    free(rows);
}

int tdm__replay_enrich(const char *path, const tdm_snap *orig, const tdm_replay_input *in,
                       const tdm_replay_event_ops *ops)
{
    tdm_snap *s = NULL;
    tdm_read_error err;
    if (ops->failed || tdm__snap_read_file(path, 0, &s, &err) != TDM_OK)
        return -1;
    if (s->event_count != ops->count) {
        tdm__snap_free(s);
        return -1;
    }
    size_t marks = 0;
    for (size_t i = 0; i < orig->event_count; i++)
        marks += is_mark(&orig->events[i]);
    tdm_event *ev = malloc((s->event_count + marks + 1) * sizeof *ev);
    if (!ev) {
        tdm__snap_free(s);
        return -1;
    }
    size_t n = 0, next_mark = 0;
    for (size_t e = 0; e < s->event_count; e++) {
        size_t op = ops->op[e];
        if (op >= in->op_count)
            continue;
        size_t from = in->op_event[op];
        /* The marks recorded before this request come first. */
        for (; next_mark < from && next_mark < orig->event_count; next_mark++)
            if (is_mark(&orig->events[next_mark]))
                ev[n++] = orig->events[next_mark];
        const tdm_event *o = &orig->events[from];
        ev[n] = s->events[e];
        ev[n].stack_id = o->stack_id;
        ev[n].phase = o->phase;
        ev[n].step = o->step;
        ev[n].category = o->category;
        n++;
    }
    /* The tables the events now point into: the recording's, borrowed for
     * the write (restored before the reader frees its own). */
    tdm_event *own_ev = s->events;
    size_t own_n = s->event_count;
    tdm_snap_frame *own_fr = s->frames;
    size_t own_nfr = s->frame_count;
    tdm_snap_stack *own_st = s->stacks;
    size_t own_nst = s->stack_count;
    const char **own_ph = s->phase_names;
    size_t own_nph = s->phase_count;
    s->events = ev, s->event_count = n;
    s->frames = orig->frames, s->frame_count = orig->frame_count;
    s->stacks = orig->stacks, s->stack_count = orig->stack_count;
    s->phase_names = orig->phase_names, s->phase_count = orig->phase_count;
    s->header.stacks_mode = orig->header.stacks_mode;
    s->header.context_mode = orig->header.context_mode;
    /* The recording's start: every command counts times from it, so the
     * saved run reads the same times as the recording (its events carry
     * the recording's times).  Kept only when no event comes before it. */
    if (orig->header.start_time_us && (n == 0 || orig->header.start_time_us * 1000u <= ev[0].time_ns))
        s->header.start_time_us = orig->header.start_time_us;
    for (size_t g = 0; g < s->segment_count; g++) /* the replay's own ids: none */
        s->segments[g].stack_id = 0;
    tag_blocks(s);
    tdm_status st = tdm__snap_write_as(s, path, 1);
    s->events = own_ev, s->event_count = own_n;
    s->frames = own_fr, s->frame_count = own_nfr;
    s->stacks = own_st, s->stack_count = own_nst;
    s->phase_names = own_ph, s->phase_count = own_nph;
    free(ev);
    tdm__snap_free(s);
    return st == TDM_OK ? 0 : -1;
}
