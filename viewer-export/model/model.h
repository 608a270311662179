/* viewer-export/model/model.h: the analysis model of one snapshot, shared by
 * every command and exporter of the `tidemark` tool.
 *
 * model/ is the base of viewer-export/: the in-memory model of a snapshot
 * (this file), categories, ranks, sites, summaries, the way sizes and
 * times are written (format_size.h) and the loaded input (input.h).  It
 * may include only format/'s and base/'s headers (snap_model.h, hash.h)
 * and the public API; every other subfolder (import/, export/, view/, gate/,
 * cli/) includes it, and no sibling of it.
 *
 * tdm__model_build() replays a tdm_snap's events once and keeps, per
 * device, the timeline of allocated and reserved bytes, the peak, and the
 * bytes live at the end; and, for the whole snapshot, one record per
 * allocation (an interval over the event sequence).  Queries on top of it
 * (live set at a point, per-site totals) are O(allocations) scans.
 *
 * Positions.  Events are ordered by their position in snap->events (the
 * ring's order), not by time stamp, as in PyTorch's traces.  A position
 * `seq` means "just after event seq"; seq == -1 is the start of the
 * recorded window, before its first event; tdm__model_end_seq() is the
 * state at the dump.
 *
 * Bytes.  "Allocated" counts the bytes the program asked for (event size,
 * block requested_size), from `alloc` until `free_completed`; a block whose
 * free was requested but not completed is still allocated (active).  The
 * allocator's rounded figures are in the snapshot's tdm_stats.  "Reserved"
 * counts segment bytes: segment_alloc/segment_map add, segment_free/
 * segment_unmap remove.  In pass-through/observe snapshots each allocation
 * is its own segment, so reserved follows allocated closely.
 *
 * A partial history.  The ring keeps only the newest events
 * (dropped_events > 0), and recording may start after memory was already
 * allocated, so a window can open with memory live whose `alloc` it never
 * saw.  The model "seeds" those allocations at the window start (seq -1):
 *   - a free_completed whose alloc is not in the window seeds an allocation
 *     of the freed size, live from -1 to that free;
 *   - an active block of the final allocator state (complete whatever the
 *     ring lost) with no alloc in the window seeds an allocation live over
 *     the whole window.
 * A seed keeps every stack the file has for it: a seed from the final
 * state takes its block's stack and category; a seed from a free takes
 * the free event's stack when that is the allocation's (context=alloc:
 * free events reuse it).  With context=all a free event carries the stack
 * of the free itself and the allocation's stack is in the file nowhere
 * (its alloc fell out of the ring, and a freed block is not in the final
 * state); the seed then takes the free's stack, flagged
 * TDM_MODEL_STACK_OF_FREE, as PyTorch's memory_viz names such a block
 * ("alloc not recorded, stack trace for free"): its site is named by where
 * it was freed, and says so, instead of going unnamed.
 * The baseline (allocated bytes at seq -1) is the sum of the seeds, so the
 * timeline never goes negative and ends exactly at the final state.
 * Reserved bytes are seeded the same way in aggregate: the baseline is the
 * smallest value that keeps the timeline non-negative and, when the final
 * state is known, makes it end at the final segments' total.
 *
 * Bytes live at the end come from the final segments/blocks state when the
 * snapshot has one (it is exact whatever the ring dropped); from the replay
 * otherwise (a file cut before its state record).
 *
 * Inconsistent histories (an alloc at an address that is already live, an
 * allocation open at the end but absent from the final state) are resolved
 * in favour of the newest event and counted in `anomalies`.
 *
 * The model borrows the snapshot: keep the tdm_snap alive while the model
 * is used.  Not thread-safe to build; read-only queries may run in
 * parallel.
 */
#ifndef TDM_VIEWER_MODEL_H
#define TDM_VIEWER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

/* free_seq of an allocation still live at the dump. */
#define TDM_MODEL_SEQ_NEVER INT64_MAX

/* One point of a device's timeline: the values just after event `seq`. */
typedef struct tdm_model_sample {
    int64_t seq;       /* index into snap->events; -1 = window start */
    uint64_t time_ns;  /* that event's time (first event's at seq -1) */
    int64_t allocated; /* bytes allocated (the events' sizes, event.h) */
    int64_t reserved;  /* bytes in segments; see reserved_known */
} tdm_model_sample;

/* tdm_model_alloc.flags */
enum {
    TDM_MODEL_SEEDED_FROM_FREE = 1u << 0,  /* alloc not in window; seen freed */
    TDM_MODEL_SEEDED_FROM_STATE = 1u << 1, /* alloc not in window; in final blocks */
    TDM_MODEL_LIVE_AT_END = 1u << 2,       /* matched a final active block */
    TDM_MODEL_FREE_REQUESTED = 1u << 3,    /* free_requested seen (or pending-free block) */
    TDM_MODEL_REPLACED = 1u << 4,          /* closed by a newer alloc at its address */
    TDM_MODEL_STACK_OF_FREE = 1u << 5,     /* stack_id is its free's: alloc not recorded */
};

/* One allocation, live over [alloc_seq, free_seq) in event positions. */
typedef struct tdm_model_alloc {
    uint64_t addr;
    uint64_t size;          /* its alloc event's size (event.h) */
    uint64_t alloc_time_ns; /* 0 when unknown (seeded from a free) */
    int64_t alloc_seq;      /* event index of the alloc; -1 when seeded */
    int64_t free_seq;       /* event index of free_completed, or TDM_MODEL_SEQ_NEVER */
    int64_t free_req_seq;   /* event index of its free_requested (the free
                             * waits on a stream from there to free_seq);
                             * alloc_seq for a block pending at the dump whose
                             * request the window lacks; TDM_MODEL_SEQ_NEVER
                             * when no free was requested in the window */
    uint32_t stack_id;      /* allocation stack, 0 = none; the free's stack
                             * with TDM_MODEL_STACK_OF_FREE (see above) */
    uint32_t device_index;  /* index into tdm_model.devices */
    uint8_t category;       /* tdm_category */
    uint8_t flags;          /* TDM_MODEL_* */
} tdm_model_alloc;

typedef enum tdm_model_end_source {
    TDM_MODEL_END_FROM_STATE = 0,  /* final segments/blocks: exact */
    TDM_MODEL_END_FROM_REPLAY = 1, /* no final state in the file */
} tdm_model_end_source;

typedef struct tdm_model_device {
    int32_t ordinal;      /* device ordinal as events carry it */
    const char *vendor;   /* from the snapshot; "?" when not listed */
    const char *name;     /* from the snapshot; "" when not listed */
    uint64_t capacity;    /* bytes; 0 when not listed */
    const tdm_stats *stats; /* the snapshot's stats, NULL when absent */

    tdm_model_sample *samples; /* [0] is the window start; one per change */
    size_t sample_count;

    size_t peak_sample;      /* index into samples of the first maximum */
    int64_t peak_allocated;  /* bytes */
    int64_t peak_seq;        /* event position of the peak (-1 = start) */
    uint64_t peak_time_ns;
    uint32_t peak_step;      /* event.step at the peak (0 = before step 1) */
    uint32_t peak_phase;     /* event.phase at the peak; see tdm__model_phase_name */
    int reserved_known;      /* segment events or a final state were seen */
    int64_t reserved_at_peak;   /* bytes reserved at peak_seq */
    int64_t peak_reserved;      /* highest reserved value of the window */

    tdm_model_end_source end_source;
    int64_t end_allocated;   /* bytes live at the dump (requested sizes) */
    uint64_t end_rounded;    /* the same blocks' rounded bytes (state only) */
    uint64_t end_blocks;     /* live allocations at the dump */
    int64_t end_reserved;    /* bytes in segments at the dump */

    uint64_t alloc_events;   /* in the window */
    uint64_t free_events;    /* free_completed in the window */
    uint64_t oom_events;
    uint64_t seeded_from_free;
    uint64_t seeded_from_state;
    uint64_t anomalies;
} tdm_model_device;

typedef struct tdm_model {
    const tdm_snap *snap;          /* borrowed */
    tdm_model_device *devices;     /* snapshot's devices first, then unlisted ones */
    size_t device_count;
    tdm_model_alloc *allocs;       /* in order of discovery (not sorted) */
    size_t alloc_count;
    int state_known;               /* the file had its final state */
    uint64_t window_start_ns;      /* first event's time; 0 without events */
    uint64_t window_end_ns;        /* last event's time; 0 without events */
} tdm_model;

/* Per-site totals at one position: a site is an allocation stack id (or,
 * for allocations whose alloc was not recorded, the stack of their free:
 * a site of its own, stack_of_free set). */
typedef struct tdm_model_site {
    uint32_t stack_id;
    int stack_of_free;    /* stack_id is where these allocations were freed */
    uint64_t live_bytes;  /* requested bytes live at the position */
    uint64_t live_count;  /* allocations live at the position */
    uint64_t total_bytes; /* every allocation of the window at this site */
    uint64_t total_count;
} tdm_model_site;

/* Builds the model.  TDM_HOST_OUT_OF_MEMORY is the only failure. */
tdm_status tdm__model_build(const tdm_snap *snap, tdm_model **out);
void tdm__model_free(tdm_model *model);

/* Times.  Every command writes a moment as an offset from one origin:
 * the recording's start (header.start_time_us) when the file has a real
 * date and no event before it, else the first event (an imported log
 * carries no start).  So summary, categories, gate, the Perfetto export
 * and a folder's summary give the same time for the same peak. */
static inline int tdm__model_start_known(uint64_t start_us)
{
    return start_us >= 365ull * 86400 * 1000000; /* 1971-01-01 */
}
/* The origin, ns since the epoch (0 for a file with neither). */
uint64_t tdm__model_time_origin_ns(const tdm_model *model);
/* What the origin is, for the output: "the recording's start" or "the
 * first event". */
const char *tdm__model_time_origin_name(const tdm_model *model);

/* How every command names a device, in "device 0 (NAME)": its name, else
 * its vendor, else "unnamed" (a PyTorch snapshot names none), so one
 * file's device reads the same in summary, categories, gate and diff. */
const char *tdm__model_device_label(const tdm_model_device *dev);

/* The index in model->devices of `ordinal`, or -1. */
int tdm__model_device_index(const tdm_model *model, int ordinal);
/* The position of the dump: the last event's index (-1 without events). */
int64_t tdm__model_end_seq(const tdm_model *model);
/* The position of the first out-of-memory event of device `di` (an index
 * into model->devices), -1 when its history has none.  The event says
 * what the runtime said: addr = bytes free on the device, size = the
 * request rounded, requested = the bytes asked for (event.h). */
int64_t tdm__model_first_oom(const tdm_model *model, size_t di);
/* The last position whose event time is <= time_ns (-1 if none); assumes
 * event times do not go backwards, which the recorder's clock ensures up
 * to threads racing for ring slots. */
int64_t tdm__model_seq_at_time(const tdm_model *model, uint64_t time_ns);
/* The sample in force at position seq (the last one with sample.seq <= seq). */
const tdm_model_sample *tdm__model_sample_at(const tdm_model_device *dev,
                                             int64_t seq);
/* Nonzero when `a` is live just after event `seq`. */
static inline int tdm__model_alloc_live_at(const tdm_model_alloc *a,
                                           int64_t seq)
{
    return a->alloc_seq <= seq && seq < a->free_seq;
}
/* The allocations of device index `dev` live at `seq`: *idx gets a
 * malloc'd array of indices into model->allocs (free() it). */
tdm_status tdm__model_live_at(const tdm_model *model, size_t dev, int64_t seq,
                              size_t **idx, size_t *count);
/* Per-site totals for device index `dev` at `seq`, sorted by live bytes,
 * then live count, then total bytes (largest first), then stack id.
 * Every site of the window is listed, live or not, except stacks --focus
 * leaves out (stack_display.h).  *sites is malloc'd. */
tdm_status tdm__model_sites_at(const tdm_model *model, size_t dev, int64_t seq,
                               tdm_model_site **sites, size_t *count);
/* The name of a phase id: "" for 0, "#N" for ids the table lacks. */
const char *tdm__model_phase_name(const tdm_model *model, uint32_t phase,
                                  char *buf, size_t len);

#endif
