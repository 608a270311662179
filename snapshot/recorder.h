/* snapshot/recorder.h: the recording side of tidemark, as the layers above
 * (alloc/, runtime/, hooks/) see it.
 *
 * The hot path is tdm__rec_event(): it stamps the time, the phase, the step
 * and this thread's category tag onto an event and stores it in the ring.
 * It takes no lock, calls no malloc and no stdio.  Everything else here is
 * rare (configure, annotate, dump) and may lock.
 *
 * The allocator's state (segments, blocks, stats) is not owned here: the
 * allocator registers a state source, and the dump calls it to visit that
 * state.  This keeps snapshot/ free of any knowledge of the allocator.
 */
#ifndef TDM_SNAPSHOT_RECORDER_H
#define TDM_SNAPSHOT_RECORDER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "clock.h"
#include "event.h"
#include "ring.h"
#include "snap_model.h"
#include "visibility.h"

/* What every event reads, with relaxed loads: the recording switches, the
 * ring and the phase and step in force.  Written by recorder.c and
 * annotate.c only. */
typedef struct tdm__rec_switches {
    _Atomic int mode;    /* tdm_record_mode */
    _Atomic int context; /* tdm_context_mode */
    _Atomic int stacks;  /* tdm_stacks_mode */
    _Atomic uint32_t phase;   /* current phase id, 0 = none */
    _Atomic uint32_t step;    /* current step, 0 = before the first */
    _Atomic(tdm__ring *) ring; /* NULL when no history is kept (off, state) */
} tdm__rec_switches;
extern tdm__rec_switches tdm__rec TDM__HIDDEN;

static inline int tdm__rec_on(void)
{
    return atomic_load_explicit(&tdm__rec.mode, memory_order_relaxed) !=
           TDM_RECORD_OFF;
}

/* Whether a stack is captured where context `min_context` (a
 * tdm_context_mode) asks for one. */
static inline int tdm__rec_stacks_wanted(int min_context)
{
    return atomic_load_explicit(&tdm__rec.stacks, memory_order_relaxed) !=
               TDM_STACKS_NONE &&
           atomic_load_explicit(&tdm__rec.context, memory_order_relaxed) >=
               min_context &&
           tdm__rec_on();
}

/* Captures the calling thread's stack, dropping `skip` innermost frames
 * of tidemark's (and this function's own). */
uint32_t tdm__rec_capture(unsigned skip);

/* The stack to keep for a new allocation (block state and, with context
 * alloc/all, the alloc event); 0 when the configuration keeps none.
 * `skip` drops that many innermost frames that belong to tidemark.
 * Inline, so that a configuration without stacks costs no call; the
 * capture is called from the caller's own frame either way. */
static inline __attribute__((always_inline)) uint32_t
tdm__rec_alloc_stack(unsigned skip)
{
    return tdm__rec_stacks_wanted(TDM_CONTEXT_STATE) ? tdm__rec_capture(skip) : 0;
}
/* The stack for a free event: captured only with context=all. */
static inline __attribute__((always_inline)) uint32_t
tdm__rec_free_stack(unsigned skip)
{
    return tdm__rec_stacks_wanted(TDM_CONTEXT_ALL) ? tdm__rec_capture(skip) : 0;
}
/* Whether events should carry the allocation's stack (context >= alloc). */
static inline int tdm__rec_events_carry_stacks(void)
{
    return atomic_load_explicit(&tdm__rec.context, memory_order_relaxed) >=
           TDM_CONTEXT_ALLOC;
}

/* The phase and step in force (0 before the first tdm_phase/tdm_step). */
static inline uint32_t tdm__rec_current_phase(void)
{
    return atomic_load_explicit(&tdm__rec.phase, memory_order_relaxed);
}

static inline uint32_t tdm__rec_current_step(void)
{
    return atomic_load_explicit(&tdm__rec.step, memory_order_relaxed);
}

/* Stores one event in the ring, stamped with `time_ns` (the clock now when
 * 0), the phase and the step; nothing when no history is kept.  The body of
 * tdm__rec_event_now, and used inline where an allocation or a free
 * records its one entry: observe and pass-through mode
 * (alloc_internal.h), where a call with nine arguments cost ~1.5 ns of a
 * ~21 ns Level Zero call (bench/hook_overhead), and the cache's allocation
 * and plain free.  Rarer events keep the call (tdm__rec_event). */
static inline __attribute__((always_inline)) void
tdm__rec_event_inline(uint64_t time_ns, uint8_t category, unsigned action, int device,
                      uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream,
                      uint32_t stack_id)
{
    tdm__ring *ring = atomic_load_explicit(&tdm__rec.ring, memory_order_acquire);
    if (__builtin_expect(!ring, 0))
        return;
    tdm__ring_push_words(
        ring, time_ns ? time_ns : tdm__clock_ns(), addr, size, requested, stream,
        tdm__event_word5(stack_id, tdm__rec_current_phase()),
        tdm__event_word6(tdm__rec_current_step(), (int16_t)device, (uint8_t)action, category));
}

void tdm__rec_event_now(unsigned action, int device, uint64_t addr, uint64_t size,
                        uint64_t requested, uint64_t stream, uint32_t stack_id);
/* Records one event now: a tdm_action, or a compound ring entry
 * (TDM__ACTION_SEGMENT_ALLOC_ALLOC, TDM__ACTION_FREE_SEGMENT_FREE).  A no-op
 * when no history is kept (only TDM_RECORD_ALL has a ring): inline, so
 * that an allocator that records nothing makes no call per event. */
static inline void tdm__rec_event(unsigned action, int device, uint64_t addr,
                                  uint64_t size, uint64_t requested, uint64_t stream,
                                  uint32_t stack_id)
{
    if (atomic_load_explicit(&tdm__rec.mode, memory_order_relaxed) == TDM_RECORD_ALL)
        tdm__rec_event_now(action, device, addr, size, requested, stream, stack_id);
}


/* Set at the first tdm_tag_push of any thread: until then no thread has a
 * tag, and an event needs no thread-local lookup (a call through the TLS
 * descriptor of a dlopen()able library, on every event). */
extern _Atomic int tdm__rec_tags_used TDM__HIDDEN;
/* The top of this thread's tag stack, TDM_CATEGORY_UNKNOWN if empty. */
uint8_t tdm__rec_tagged_category(void);

/* This thread's category tag (tdm_tag_push), TDM_CATEGORY_UNKNOWN if none. */
static inline uint8_t tdm__rec_current_category(void)
{
    if (__builtin_expect(!atomic_load_explicit(&tdm__rec_tags_used, memory_order_relaxed), 1))
        return TDM_CATEGORY_UNKNOWN;
    return tdm__rec_tagged_category();
}

/* tdm__rec_event with the event's body inline (tdm__rec_event_inline):
 * for the frees whose one entry is the whole of their recording. */
static inline __attribute__((always_inline)) void
tdm__rec_event_here(unsigned action, int device, uint64_t addr, uint64_t size,
                    uint64_t requested, uint64_t stream, uint32_t stack_id)
{
    if (__builtin_expect(atomic_load_explicit(&tdm__rec.mode, memory_order_relaxed) ==
                             TDM_RECORD_ALL,
                         1))
        tdm__rec_event_inline(0, tdm__rec_current_category(), action, device, addr, size,
                              requested, stream, stack_id);
}

/* ---- allocator state, visited at dump time ---------------------------- */

typedef struct tdm__state_visitor {
    void *ctx;
    void (*device)(void *ctx, const tdm_snap_device *device);
    /* blocks[0..block_count) in address order, tiling the segment;
     * seg->first_block and seg->block_count are ignored. */
    void (*segment)(void *ctx, const tdm_snap_segment *seg,
                    const tdm_snap_block *blocks, size_t block_count);
    /* The device's stats over all pools (tdm_stat_pool 0). */
    void (*stats)(void *ctx, int device, const tdm_stats *stats);
    /* A mapping of memory the process did not allocate (may be NULL). */
    void (*imported)(void *ctx, const tdm_snap_imported *imported);
    /* Called once, before any other callback, while the source holds every
     * lock under which the allocator changes its state and records the
     * matching events: the instant its segments, blocks and stats are
     * copied.  The dump cuts the event ring there (ring_cut.h), so that
     * events and state agree.  It must not lock, allocate or print.  May
     * be NULL. */
    void (*at_cut)(void *ctx);
} tdm__state_visitor;

/* One pool's share of a device's stats (pool TDM_STAT_POOL_SMALL or
 * TDM_STAT_POOL_LARGE), called with the visitor's ctx after its stats()
 * for that device, from the same consistent copy (so small + large = all
 * for what the pools hold).  Kept out of tdm__state_visitor so that
 * visitors that want no pools need not name it. */
typedef void (*tdm__pool_stats_fn)(void *ctx, int device, int pool,
                                   const tdm_stats *stats);

/* Calls the visitor for every device, segment and device's stats, copied
 * at one instant (at_cut) with whatever locks keep the state consistent
 * held meanwhile, the callbacks called after they are released; and, when
 * pool_stats is not NULL and the allocator keeps pools (cache mode),
 * pool_stats for each pool of each device.  Pass-through and observe
 * modes have no pools and never call it. */
typedef void (*tdm__state_source_fn)(const tdm__state_visitor *visitor,
                                     tdm__pool_stats_fn pool_stats);

/* The allocator calls this once at init. */
void tdm__rec_set_state_source(tdm__state_source_fn source);

/* tdm_tag_ptr() asks the allocator to re-tag a live block through this
 * listener; it returns TDM_UNKNOWN_POINTER for memory it does not own. */
typedef tdm_status (*tdm__tag_listener_fn)(const void *ptr, uint8_t category);
void tdm__rec_set_tag_listener(tdm__tag_listener_fn listener);

/* The mode the allocator runs in, for the snapshot header. */
void tdm__rec_set_alloc_mode(const char *mode);
/* Registers, once (also done when the library loads), the fork handlers
 * that hold the recorder's lock across fork(), so that a child never finds
 * it held by a thread it does not have.  The lock is a leaf (taken under
 * other locks, never the other way round), so its prepare handler must
 * run after every other one: code that registers fork handlers of its own
 * calls this first (prepare handlers run in the reverse order of
 * registration). */
void tdm__rec_register_atfork(void);
/* Stops recording (tdm_record_memory_history with TDM_RECORD_OFF, which
 * cannot fail): for the library's own stops, which have no caller to
 * tell. */
void tdm__rec_stop(void);

/* The configuration text (TIDEMARK_CONF) for the snapshot header. */
void tdm__rec_set_config_text(const char *text);

/* What a snapshot says the recording could not see, one bit each; the
 * header's notes carry a line per bit set (dump.c). */
enum tdm__rec_note {
    /* a stream-ordered allocation captured into a CUDA graph: booked once
     * at capture, the graph's memory nodes at launch are not seen */
    TDM__NOTE_GRAPH_MEMORY = 1u << 0,
};
extern _Atomic unsigned tdm__rec_notes TDM__HIDDEN;
/* What the hooks read again just before a snapshot is built, for state
 * they cannot follow event by event (how much a vendor's stream-ordered
 * pool holds after a synchronization they do not hook).  Up to
 * TDM__REC_REFRESH_MAX functions, each added once; run by
 * tdm_dump_snapshot and by the exit and signal dumps (from the program's
 * or the dump thread, never inside an allocation or a signal handler),
 * before any lock of the dump is taken. */
#define TDM__REC_REFRESH_MAX 4
typedef void (*tdm__rec_refresh_fn)(void);
void tdm__rec_add_refresh(tdm__rec_refresh_fn fn);
void tdm__rec_run_refresh(void);

/* Notes `bit` for the snapshot; cheap once set (a load), no lock. */
static inline void tdm__rec_note(unsigned bit)
{
    if (!(atomic_load_explicit(&tdm__rec_notes, memory_order_relaxed) & bit))
        atomic_fetch_or_explicit(&tdm__rec_notes, bit, memory_order_relaxed);
}

/* Copies the ring's events, oldest first, into a malloc'd array.
 * *dropped gets the number of events overwritten since recording began. */
tdm_status tdm__rec_copy_events(tdm_event **events, size_t *count,
                                uint64_t *dropped);

/* Builds the whole in-memory snapshot (events, stacks symbolized, state,
 * stats, header) as tdm_dump_snapshot writes it.  Free with
 * tdm__rec_snapshot_free(). */
tdm_status tdm__rec_build_snapshot(tdm_snap **out);
void tdm__rec_snapshot_free(tdm_snap *snap);
/* 1 when `snap` shows a process that never touched device memory (no
 * event but the dump's own, no segment, block or statistic above zero):
 * its exit dump is not written. */
int tdm__snap_untouched(const tdm_snap *snap);

#endif
