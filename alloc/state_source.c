/* alloc/state_source.c: the state the recorder's dump copies from alloc/:
 * the allocator's (cache or pass-through mode) and observe mode's, at one
 * cut.
 *
 * The allocator copies its state under all its device locks and, at that
 * instant (its at_cut), observe mode copies its own under init_lock and
 * its devices' locks; the dump's at_cut, which marks the event ring, is
 * called from within both.  Lock order: the allocator's device locks,
 * then observe mode's, as the fork handlers take them (alloc.c).  The
 * visitor is then called from the copies, with no lock held; a device
 * both know gets one stats record, the sum of the two copies.
 */
#include "alloc_internal.h"

#include <string.h>

#include "recorder.h"

typedef struct merge_ctx {
    const tdm__state_visitor *out;
    tdm__pool_stats_fn pool_stats; /* the dump's, or NULL */
    uint64_t emitted[2]; /* bit device + 1: described by the allocator */
    tdm__obs_cut *obs;   /* observe mode's copy, taken at the cut */
    int cut;             /* merge_at_cut ran */
} merge_ctx;

static void merge_device(void *ctx, const tdm_snap_device *d)
{
    merge_ctx *m = ctx;
    unsigned bit = (unsigned)(d->index + 1);
    if (bit < 128)
        m->emitted[bit / 64] |= (uint64_t)1 << (bit % 64);
    if (m->out->device)
        m->out->device(m->out->ctx, d);
}

static void merge_segment(void *ctx, const tdm_snap_segment *seg,
                          const tdm_snap_block *blocks, size_t n)
{
    merge_ctx *m = ctx;
    if (m->out->segment)
        m->out->segment(m->out->ctx, seg, blocks, n);
}

static void merge_stats(void *ctx, int device, const tdm_stats *st)
{
    merge_ctx *m = ctx;
    if (!m->out->stats)
        return;
    tdm_stats all = *st, o = {.size = sizeof o};
    if (tdm__obs_cut_stats(m->obs, device, &o))
        tdm__stats_sum(&all, &o);
    m->out->stats(m->out->ctx, device, &all);
}

/* Observe mode keeps no small/large pools, so a pool's stats are the
 * allocator's alone. */
static void merge_pool_stats(void *ctx, int device, int pool, const tdm_stats *st)
{
    merge_ctx *m = ctx;
    m->pool_stats(m->out->ctx, device, pool, st);
}

/* The allocator's locks are held: observe mode copies its state and the
 * dump marks the ring inside. */
static void merge_at_cut(void *ctx)
{
    merge_ctx *m = ctx;
    m->cut = 1;
    m->obs = tdm__obs_cut_take(m->out->at_cut, m->out->ctx);
}

void tdm__alloc_state_source(const tdm__state_visitor *v, tdm__pool_stats_fn pool_stats)
{
    merge_ctx m = {.out = v, .pool_stats = pool_stats};
    if (atomic_load_explicit(&tdm__alloc_g.ready, memory_order_acquire)) {
        tdm__state_visitor w = {&m, merge_device, merge_segment, merge_stats, NULL,
                                merge_at_cut};
        if (tdm__alloc_g.mode == TDM__MODE_CACHE)
            tdm__cache_visit(&w, pool_stats ? merge_pool_stats : NULL);
        else
            tdm__pt_visit(&w);
    }
    if (!m.cut) /* no allocator, or no host memory for its copy */
        m.obs = tdm__obs_cut_take(v->at_cut, v->ctx);
    tdm__obs_cut_visit(m.obs, v, m.emitted);
    tdm__obs_cut_free(m.obs);
}

void tdm__alloc_visit_for_tests(const tdm__state_visitor *v)
{
    tdm__alloc_state_source(v, NULL);
}
