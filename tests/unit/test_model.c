/* tests/unit/test_model.c: the analysis model (viewer-export/model/model.h)
 * on snapshots built by hand (model_fixtures.h) so that every expected
 * number is known: peak value, time, step and phase; bytes live at the end;
 * site ranking; partial histories (dropped events) that must not go
 * negative, and whose seeds keep their sites after the ring wrapped;
 * several devices; and a 1M-event history analysed in under a second.
 * The summary printer and the formatters: test_summary.c. */
#include <time.h>

#include "model_fixtures.h"
#include "summary.h"
/* ---- tests --------------------------------------------------------------- */

/* Two steps; the higher peak is in step 2's backward phase. */
static void test_peak_value_time_step_phase(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 1u << 30);
    alloc_pt(t, 0, 0x10000, 1000, 1); /* weights, before step 1 */
    mark_step(t);
    mark_phase(t, 1);
    alloc_pt(t, 0, 0x20000, 300, 2);
    mark_phase(t, 2);
    free_pt(t, 0, 0x20000, 300); /* step 1 peak: 1300 */
    mark_step(t);
    mark_phase(t, 1);
    alloc_pt(t, 0, 0x30000, 400, 2);
    mark_phase(t, 2);
    size_t peak_ev = alloc_pt(t, 0, 0x40000, 50, 3); /* 1450: the peak */
    free_pt(t, 0, 0x40000, 50);
    mark_phase(t, 3);
    alloc_pt(t, 0, 0x50000, 50, 3); /* 1450 again: the first one counts */
    free_pt(t, 0, 0x50000, 50);
    free_pt(t, 0, 0x30000, 400);
    state_block(t, 0, 0x10000, 1024, 1000, TDM_BLOCK_ACTIVE_ALLOCATED, 1);

    tdm_model *m = build(t);
    assert_int_equal(m->device_count, 1);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(d->peak_allocated, 1450);
    assert_int_equal(d->peak_seq, (int64_t)peak_ev);
    assert_int_equal(d->peak_time_ns, t->ev[peak_ev].time_ns);
    assert_int_equal(d->peak_step, 2);
    char buf[16];
    assert_string_equal(tdm__model_phase_name(m, d->peak_phase, buf, sizeof buf), "backward");
    assert_true(d->reserved_known);
    assert_int_equal(d->reserved_at_peak, 2048);
    assert_int_equal(d->end_source, TDM_MODEL_END_FROM_STATE);
    assert_int_equal(d->end_allocated, 1000);
    assert_int_equal(d->end_rounded, 1024);
    assert_int_equal(d->end_blocks, 1);
    assert_int_equal(d->end_reserved, 1024);
    assert_int_equal(d->alloc_events, 5);
    assert_int_equal(d->free_events, 4);
    assert_int_equal(d->anomalies, 0);
    assert_int_equal(d->seeded_from_free + d->seeded_from_state, 0);
    /* Timeline: starts at 0, ends at what is live. */
    assert_int_equal(d->samples[0].seq, -1);
    assert_int_equal(d->samples[0].allocated, 0);
    assert_int_equal(d->samples[d->sample_count - 1].allocated, 1000);
    assert_never_negative(m);
    /* The weights allocation is matched to the final block. */
    assert_true(m->allocs[0].flags & TDM_MODEL_LIVE_AT_END);
    assert_int_equal(m->allocs[0].free_seq, TDM_MODEL_SEQ_NEVER);
    tdm__model_free(m);
    free(t);
}

/* free_requested without free_completed keeps a block allocated. */
static void test_free_requested_still_allocated(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    alloc_pt(t, 0, 0x1000, 500, 1);
    alloc_pt(t, 0, 0x2000, 700, 2);
    size_t req = ev(t, TDM_ACTION_FREE_REQUESTED, 0, 0x2000, 700, 0);
    state_block(t, 0, 0x1000, 512, 500, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    state_block(t, 0, 0x2000, 1024, 700, TDM_BLOCK_ACTIVE_PENDING_FREE, 2);

    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(tdm__model_sample_at(d, (int64_t)req)->allocated, 1200);
    assert_int_equal(d->peak_allocated, 1200);
    assert_int_equal(d->end_allocated, 1200);
    assert_int_equal(d->end_blocks, 2);
    assert_int_equal(d->anomalies, 0);
    assert_true(m->allocs[1].flags & TDM_MODEL_FREE_REQUESTED);
    assert_int_equal(m->allocs[1].free_seq, TDM_MODEL_SEQ_NEVER);
    /* pending from its free_requested on, not from its allocation */
    assert_int_equal(m->allocs[1].free_req_seq, (int64_t)req);
    assert_int_equal(m->allocs[0].free_req_seq, TDM_MODEL_SEQ_NEVER);
    tdm__model_free(m);
    free(t);
}

/* Sites are ranked by bytes live at the peak, not by bytes ever allocated. */
static void test_site_ranking(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    /* Site 3 allocates the most over time, but frees it before the peak. */
    for (int i = 0; i < 4; i++) {
        alloc_pt(t, 0, 0x90000, 10000, 3);
        free_pt(t, 0, 0x90000, 10000);
    }
    alloc_pt(t, 0, 0x1000, 300, 1);
    alloc_pt(t, 0, 0x2000, 250, 1);  /* site 1: 550 in 2 allocations */
    size_t peak = alloc_pt(t, 0, 0x3000, 600, 2); /* site 2: 600 in 1 */
    free_pt(t, 0, 0x3000, 600);
    free_pt(t, 0, 0x2000, 250);
    free_pt(t, 0, 0x1000, 300);

    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(d->peak_allocated, 10000); /* each site-3 block alone */
    /* At the peak of the site 1+2 phase (not the global one). */
    tdm_model_site *sites;
    size_t n;
    assert_int_equal(tdm__model_sites_at(m, 0, (int64_t)peak, &sites, &n), TDM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(sites[0].stack_id, 2);
    assert_int_equal(sites[0].live_bytes, 600);
    assert_int_equal(sites[0].live_count, 1);
    assert_int_equal(sites[1].stack_id, 1);
    assert_int_equal(sites[1].live_bytes, 550);
    assert_int_equal(sites[1].live_count, 2);
    assert_int_equal(sites[2].stack_id, 3);
    assert_int_equal(sites[2].live_bytes, 0);
    assert_int_equal(sites[2].total_bytes, 40000);
    assert_int_equal(sites[2].total_count, 4);
    free(sites);
    /* The live set at that point is exactly those three allocations. */
    size_t *idx, cnt;
    assert_int_equal(tdm__model_live_at(m, 0, (int64_t)peak, &idx, &cnt), TDM_OK);
    assert_int_equal(cnt, 3);
    uint64_t sum = 0;
    for (size_t i = 0; i < cnt; i++)
        sum += m->allocs[idx[i]].size;
    assert_int_equal(sum, 1150);
    assert_int_equal(tdm__model_sample_at(d, (int64_t)peak)->allocated, 1150);
    free(idx);
    tdm__model_free(m);
    free(t);
}

/* The ring dropped the oldest events: frees without allocs, a segment
 * freed without its segment_alloc, and a final block the window never saw
 * allocated.  Totals are seeded, never negative, and end at the state. */
static void test_dropped_history_not_negative(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    t->s.dropped_events = 50;
    /* Allocated before the window: 1000 B at 0xA000 (freed in it) and 700 B
     * at 0xB000 (still live at the end). */
    free_pt(t, 0, 0xA000, 1000);
    alloc_pt(t, 0, 0x1000, 200, 2);
    free_pt(t, 0, 0x1000, 200);
    state_block(t, 0, 0xB000, 768, 700, TDM_BLOCK_ACTIVE_ALLOCATED, 1);

    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_never_negative(m);
    assert_int_equal(d->seeded_from_free, 1);
    assert_int_equal(d->seeded_from_state, 1);
    assert_int_equal(d->samples[0].allocated, 1700);
    assert_int_equal(d->peak_allocated, 1700);
    assert_int_equal(d->peak_seq, -1);
    assert_int_equal(d->end_allocated, 700);
    assert_int_equal(d->samples[d->sample_count - 1].allocated, 700);
    /* Reserved: the segment freed first was older than the window. */
    assert_int_equal(d->samples[d->sample_count - 1].reserved, 768);
    assert_true(d->samples[0].reserved >= 1000);
    assert_int_equal(d->anomalies, 0);
    /* The seeds are live at the window start and at the end respectively. */
    size_t *idx, cnt;
    assert_int_equal(tdm__model_live_at(m, 0, -1, &idx, &cnt), TDM_OK);
    assert_int_equal(cnt, 2);
    free(idx);
    assert_int_equal(tdm__model_live_at(m, 0, tdm__model_end_seq(m), &idx, &cnt), TDM_OK);
    assert_int_equal(cnt, 1);
    assert_int_equal(m->allocs[idx[0]].addr, 0xB000);
    assert_int_equal(m->allocs[idx[0]].stack_id, 1);
    assert_true(m->allocs[idx[0]].flags & TDM_MODEL_SEEDED_FROM_STATE);
    free(idx);
    tdm__model_free(m);
    free(t);
}

/* A file cut before its final state: the end comes from the replay, and a
 * free of an unseen allocation still cannot make it negative. */
static void test_truncated_end_from_replay(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    t->s.complete = 0;
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, 0xF000, 64, 0);
    alloc_pt(t, 0, 0x1000, 100, 1);
    alloc_pt(t, 0, 0x2000, 100, 1);
    free_pt(t, 0, 0x1000, 100);
    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_false(m->state_known);
    assert_int_equal(d->end_source, TDM_MODEL_END_FROM_REPLAY);
    assert_int_equal(d->end_allocated, 100);
    assert_int_equal(d->end_blocks, 1);
    assert_int_equal(d->peak_allocated, 200);
    assert_int_equal(d->samples[0].allocated, 64);
    assert_never_negative(m);
    tdm__model_free(m);
    free(t);
}

/* Two listed devices with interleaved events, and one the header lacks. */
static void test_multiple_devices(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 8u << 20);
    add_device(t, 1, 8u << 20);
    alloc_pt(t, 0, 0x1000, 100, 1);
    size_t p1 = alloc_pt(t, 1, 0x1000, 900, 2); /* same address, other device */
    size_t p0 = alloc_pt(t, 0, 0x2000, 200, 1);
    free_pt(t, 1, 0x1000, 900);
    alloc_pt(t, 1, 0x3000, 10, 3);
    alloc_pt(t, 3, 0x5000, 77, 3);
    free_pt(t, 0, 0x1000, 100);
    state_block(t, 0, 0x2000, 512, 200, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    state_block(t, 1, 0x3000, 512, 10, TDM_BLOCK_ACTIVE_ALLOCATED, 3);
    state_block(t, 3, 0x5000, 512, 77, TDM_BLOCK_ACTIVE_ALLOCATED, 3);
    t->stats[0] = (tdm_snap_device_stats){.device = 1};
    t->stats[0].stats.allocated_bytes.peak = 1024;
    t->s.stats_count = 1;

    tdm_model *m = build(t);
    assert_int_equal(m->device_count, 3);
    int i0 = tdm__model_device_index(m, 0), i1 = tdm__model_device_index(m, 1),
        i3 = tdm__model_device_index(m, 3);
    assert_int_equal(i0, 0);
    assert_int_equal(i1, 1);
    assert_int_equal(i3, 2);
    assert_int_equal(tdm__model_device_index(m, 7), -1);
    assert_int_equal(m->devices[i0].peak_allocated, 300);
    assert_int_equal(m->devices[i0].peak_seq, (int64_t)p0);
    assert_int_equal(m->devices[i1].peak_allocated, 900);
    assert_int_equal(m->devices[i1].peak_seq, (int64_t)p1);
    assert_int_equal(m->devices[i0].end_allocated, 200);
    assert_int_equal(m->devices[i1].end_allocated, 10);
    assert_int_equal(m->devices[i3].end_allocated, 77);
    assert_string_equal(m->devices[i3].vendor, "?");
    assert_null(m->devices[i0].stats);
    assert_non_null(m->devices[i1].stats);
    assert_int_equal(m->devices[i1].stats->allocated_bytes.peak, 1024);
    for (int d = 0; d < 3; d++)
        assert_int_equal(m->devices[d].anomalies, 0);
    tdm__model_free(m);
    free(t);
}

/* context=state: events carry no stacks, the final blocks do. */
static void test_stacks_from_state(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    t->s.header.context_mode = TDM_CONTEXT_STATE;
    alloc_pt(t, 0, 0x1000, 100, 0);
    state_block(t, 0, 0x1000, 512, 100, TDM_BLOCK_ACTIVE_ALLOCATED, 2);
    tdm_model *m = build(t);
    assert_int_equal(m->alloc_count, 1);
    assert_int_equal(m->allocs[0].stack_id, 2);
    assert_false(m->allocs[0].flags & TDM_MODEL_STACK_OF_FREE);
    tdm__model_free(m);
    free(t);
}

/* The index in m->allocs of the allocation at `addr`, which must exist. */
static size_t alloc_at(const tdm_model *m, uint64_t addr)
{
    for (size_t i = 0; i < m->alloc_count; i++)
        if (m->allocs[i].addr == addr)
            return i;
    fail_msg("no allocation at 0x%llx", (unsigned long long)addr);
    return 0;
}

/* A ring that wrapped, as a long run with a small max_entries leaves it:
 * the window opens with memory whose alloc events were dropped.  Every seed
 * keeps a site: those live at the end take their block's stack and
 * category; one freed in the window (not in the final state) takes, with
 * context=all, the stack of its free, flagged as such, and the summary
 * names it by it ("freed at") instead of "(no stack recorded)". */
static void test_wrapped_ring_seeds_keep_sites(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 16ull << 30);
    t->s.header.context_mode = TDM_CONTEXT_ALL;
    t->s.header.max_entries = 12;
    t->s.dropped_events = 1188; /* the window holds 1% of the run */
    /* Stack 4: where the gradients are freed (frame 7, "release_grads"). */
    t->frames[7] = (tdm_snap_frame){0x3000, "release_grads", "/src/examples/train.c", 120,
                                    "train", TDM_FRAME_NATIVE};
    t->s.frame_count = 8;
    t->stack_frames[4][0] = 0; /* tidemark's frame */
    t->stack_frames[4][1] = 7;
    t->stack_frames[4][2] = 5;
    t->stacks[4] = (tdm_snap_stack){3, t->stack_frames[4]};
    t->s.stack_count = 5;

    /* Allocated before the window: gradients (6 MiB, freed in it), weights
     * (3 MiB, live at the end), a buffer whose free is pending at the end. */
    mark_phase(t, 3);
    ev(t, TDM_ACTION_FREE_REQUESTED, 0, 0x70000, 6ull << 20, 4);
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, 0x70000, 6ull << 20, 4);
    ev(t, TDM_ACTION_FREE_REQUESTED, 0, 0xC0000, 1ull << 20, 4);
    alloc_pt(t, 0, 0x90000, 512, 2);
    free_pt(t, 0, 0x90000, 512);
    state_block(t, 0, 0xB0000, 3ull << 20, 3ull << 20, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    t->blk[0].category = TDM_CATEGORY_PARAMETER;
    state_block(t, 0, 0xC0000, 1ull << 20, 1ull << 20, TDM_BLOCK_ACTIVE_PENDING_FREE, 3);
    t->blk[1].category = TDM_CATEGORY_TEMPORARY;

    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(d->peak_seq, -1);
    assert_int_equal(d->peak_allocated, 10ull << 20);
    const tdm_model_alloc *grads = &m->allocs[alloc_at(m, 0x70000)];
    const tdm_model_alloc *weights = &m->allocs[alloc_at(m, 0xB0000)];
    const tdm_model_alloc *pending = &m->allocs[alloc_at(m, 0xC0000)];
    assert_true(grads->flags & TDM_MODEL_SEEDED_FROM_FREE);
    assert_int_equal(grads->stack_id, 4);
    assert_true(grads->flags & TDM_MODEL_STACK_OF_FREE);
    assert_true(weights->flags & TDM_MODEL_SEEDED_FROM_STATE);
    assert_int_equal(weights->stack_id, 1);
    assert_int_equal(weights->category, TDM_CATEGORY_PARAMETER);
    assert_false(weights->flags & TDM_MODEL_STACK_OF_FREE);
    /* Its free_requested carried the free's stack; the block has its own. */
    assert_int_equal(pending->stack_id, 3);
    assert_int_equal(pending->category, TDM_CATEGORY_TEMPORARY);
    assert_false(pending->flags & TDM_MODEL_STACK_OF_FREE);

    /* Every allocation live at the peak and at the end has a site. */
    int64_t at[2] = {d->peak_seq, tdm__model_end_seq(m)};
    for (int k = 0; k < 2; k++) {
        size_t *idx, cnt;
        assert_int_equal(tdm__model_live_at(m, 0, at[k], &idx, &cnt), TDM_OK);
        assert_true(cnt >= 2);
        for (size_t i = 0; i < cnt; i++)
            assert_int_not_equal(m->allocs[idx[i]].stack_id, 0);
        free(idx);
    }
    tdm_model_site *sites;
    size_t n;
    assert_int_equal(tdm__model_sites_at(m, 0, d->peak_seq, &sites, &n), TDM_OK);
    assert_int_equal(n, 4);
    assert_int_equal(sites[0].stack_id, 4);
    assert_int_equal(sites[0].live_bytes, 6ull << 20);
    assert_true(sites[0].stack_of_free);
    for (size_t i = 1; i < n; i++)
        assert_false(sites[i].stack_of_free);
    free(sites);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    tdm_summary_options o = {.top = 10, .device = -1, .verbose = 1};
    assert_int_equal(tdm__summary_print(out, "ring.tdm", &t->s, m, &o), TDM_OK);
    fclose(out);
    printf("%s", text);
    assert_null(strstr(text, "(no stack recorded)"));
    assert_non_null(strstr(text, "freed at release_grads (train.c:120)"));
    assert_non_null(strstr(text, "make_weights (train.c:100)"));
    assert_non_null(strstr(text, "make_temp (train.c:102)"));
    free(text);
    tdm__model_free(m);

    /* context=alloc: a free event carries the allocation's own stack. */
    t->s.header.context_mode = TDM_CONTEXT_ALLOC;
    m = build(t);
    grads = &m->allocs[alloc_at(m, 0x70000)];
    assert_int_equal(grads->stack_id, 4);
    assert_false(grads->flags & TDM_MODEL_STACK_OF_FREE);
    tdm__model_free(m);
    /* context=state: events carry no stack; the freed seed has none. */
    t->s.header.context_mode = TDM_CONTEXT_STATE;
    for (size_t i = 0; i < t->s.event_count; i++)
        t->ev[i].stack_id = 0;
    m = build(t);
    grads = &m->allocs[alloc_at(m, 0x70000)];
    assert_int_equal(grads->stack_id, 0);
    assert_false(grads->flags & TDM_MODEL_STACK_OF_FREE);
    assert_int_equal(m->allocs[alloc_at(m, 0xB0000)].stack_id, 1);
    tdm__model_free(m);
    free(t);
}

/* An address handed out twice without a free in between is counted once. */
static void test_replaced_allocation(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    ev(t, TDM_ACTION_ALLOC, 0, 0x1000, 100, 1);
    ev(t, TDM_ACTION_ALLOC, 0, 0x1000, 40, 2);
    ev(t, TDM_ACTION_FREE_COMPLETED, 0, 0x1000, 40, 0);
    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(d->anomalies, 1);
    assert_int_equal(d->peak_allocated, 100);
    assert_int_equal(d->samples[d->sample_count - 1].allocated, 0);
    assert_true(m->allocs[0].flags & TDM_MODEL_REPLACED);
    assert_never_negative(m);
    tdm__model_free(m);
    free(t);
}

/* record=state: no history at all; the end comes from the blocks. */
static void test_no_history(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    state_block(t, 0, 0x1000, 512, 100, TDM_BLOCK_ACTIVE_ALLOCATED, 1);
    state_block(t, 0, 0x2000, 512, 0, TDM_BLOCK_INACTIVE, 0);
    tdm_model *m = build(t);
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(tdm__model_end_seq(m), -1);
    assert_int_equal(d->end_allocated, 100);
    assert_int_equal(d->end_blocks, 1);
    assert_int_equal(d->end_reserved, 1024);
    assert_int_equal(d->peak_allocated, 100);
    assert_int_equal(tdm__model_seq_at_time(m, 5), -1);
    tdm__model_free(m);
    free(t);
}

static void test_queries(void **state)
{
    (void)state;
    tsnap *t = tsnap_new();
    add_device(t, 0, 0);
    size_t a = alloc_pt(t, 0, 0x1000, 100, 1);
    mark_phase(t, 1);
    size_t f = free_pt(t, 0, 0x1000, 100);
    tdm_model *m = build(t);
    assert_int_equal(tdm__model_seq_at_time(m, 0), -1);
    assert_int_equal(tdm__model_seq_at_time(m, t->ev[a].time_ns), (int64_t)a);
    assert_int_equal(tdm__model_seq_at_time(m, t->ev[a].time_ns + 1), (int64_t)a);
    assert_int_equal(tdm__model_seq_at_time(m, UINT64_MAX), tdm__model_end_seq(m));
    const tdm_model_device *d = &m->devices[0];
    assert_int_equal(tdm__model_sample_at(d, -1)->allocated, 0);
    assert_int_equal(tdm__model_sample_at(d, (int64_t)a)->allocated, 100);
    assert_int_equal(tdm__model_sample_at(d, (int64_t)f - 1)->allocated, 100);
    assert_int_equal(tdm__model_sample_at(d, (int64_t)f)->allocated, 0);
    char buf[16];
    assert_string_equal(tdm__model_phase_name(m, 0, buf, sizeof buf), "");
    assert_string_equal(tdm__model_phase_name(m, 3, buf, sizeof buf), "optimizer");
    assert_string_equal(tdm__model_phase_name(m, 9, buf, sizeof buf), "#9");
    tdm__model_free(m);
    free(t);
}

/* 1M events: 500k alloc/free pairs with up to 4096 live at once, some
 * addresses reused.  Checks the numbers against a direct count.  The time
 * is printed, not asserted: a wall-clock limit fails on a loaded machine,
 * and bench/export measures the model's speed. */
static void test_million_events(void **state)
{
    (void)state;
    enum { N = 1000000, LIVE = 4096 };
    tdm_snap s;
    memset(&s, 0, sizeof s);
    s.complete = 1;
    s.header.context_mode = TDM_CONTEXT_ALLOC;
    s.events = calloc(N, sizeof *s.events);
    uint64_t *slot_size = calloc(LIVE, sizeof *slot_size);
    assert_non_null(s.events);
    assert_non_null(slot_size);
    uint64_t rng = 88172645463325252ull, live = 0, peak = 0;
    size_t n = 0;
    while (n < N) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t k = rng % LIVE;
        uint64_t addr = 0x7f0000000000ull + (uint64_t)k * 0x100000ull;
        tdm_event *e = &s.events[n];
        e->time_ns = 1000 + n;
        e->addr = addr;
        e->device = 0;
        e->stack_id = (uint32_t)(k % 97);
        if (slot_size[k]) {
            e->action = TDM_ACTION_FREE_COMPLETED;
            e->size = slot_size[k];
            live -= slot_size[k];
            slot_size[k] = 0;
        } else {
            e->action = TDM_ACTION_ALLOC;
            e->size = 512 + (rng >> 40) % 65536;
            slot_size[k] = e->size;
            live += e->size;
            if (live > peak)
                peak = live;
        }
        n++;
    }
    s.event_count = n;
    /* Final state: what is still live, as one segment per block. */
    size_t nb = 0;
    for (size_t k = 0; k < LIVE; k++)
        nb += slot_size[k] != 0;
    s.blocks = calloc(nb ? nb : 1, sizeof *s.blocks);
    s.segments = calloc(nb ? nb : 1, sizeof *s.segments);
    nb = 0;
    for (size_t k = 0; k < LIVE; k++) {
        if (!slot_size[k])
            continue;
        uint64_t addr = 0x7f0000000000ull + (uint64_t)k * 0x100000ull;
        s.blocks[nb] = (tdm_snap_block){.address = addr, .size = slot_size[k],
                                        .requested_size = slot_size[k],
                                        .state = TDM_BLOCK_ACTIVE_ALLOCATED};
        s.segments[nb] = (tdm_snap_segment){.device = 0, .address = addr,
                                            .total_size = slot_size[k],
                                            .first_block = (uint32_t)nb, .block_count = 1};
        nb++;
    }
    s.block_count = s.segment_count = nb;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tdm_model *m = NULL;
    assert_int_equal(tdm__model_build(&s, &m), TDM_OK);
    tdm_model_site *sites;
    size_t ns;
    assert_int_equal(tdm__model_sites_at(m, 0, m->devices[0].peak_seq, &sites, &ns), TDM_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("# model of %zu events + sites at the peak: %.3f s\n", n, secs);

    assert_int_equal(m->devices[0].peak_allocated, (int64_t)peak);
    assert_int_equal(m->devices[0].end_allocated, (int64_t)live);
    assert_int_equal(m->devices[0].anomalies, 0);
    assert_int_equal(ns, 97);
    uint64_t sum = 0;
    for (size_t i = 0; i < ns; i++)
        sum += sites[i].live_bytes;
    assert_int_equal(sum, peak);
    free(sites);
    tdm__model_free(m);
    free(s.events);
    free(s.blocks);
    free(s.segments);
    free(slot_size);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peak_value_time_step_phase),
        cmocka_unit_test(test_free_requested_still_allocated),
        cmocka_unit_test(test_site_ranking),
        cmocka_unit_test(test_dropped_history_not_negative),
        cmocka_unit_test(test_truncated_end_from_replay),
        cmocka_unit_test(test_multiple_devices),
        cmocka_unit_test(test_stacks_from_state),
        cmocka_unit_test(test_wrapped_ring_seeds_keep_sites),
        cmocka_unit_test(test_replaced_allocation),
        cmocka_unit_test(test_no_history),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_million_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
