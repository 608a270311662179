/* viewer-export/export/export_pytorch.h: the pieces of the `pytorch` exporter
 * (export_pytorch.c writes, export_pytorch_state.c decides what to write).
 *
 * The exporter writes the final allocator state as PyTorch's `segments`
 * and the event history as `device_traces`.  The viewer's Allocator State
 * History starts from the segments and undoes events backwards, so the two
 * must agree (reference §12 P1).  tdm__pt_state_build() makes the final
 * state well formed (blocks tile their segment, segments do not overlap,
 * or, for a file cut before its state, one synthetic segment per device);
 * tdm__pt_replay() then undoes the history onto it the way the viewer does
 * and marks every event that fits; the others are left out.  docs/export.md
 * states the rule.
 *
 * No state, no locks.
 */
#ifndef TDM_VIEWER_EXPORT_PYTORCH_H
#define TDM_VIEWER_EXPORT_PYTORCH_H

#include <stddef.h>
#include <stdint.h>

#include "snap_model.h"
#include "model.h"
#include "pickle_write.h"

/* The final state as the pickle shows it: segments sorted by (device,
 * address), each tiled exactly by its blocks[first_block ..
 * first_block + block_count). */
typedef struct tdm_pt_state {
    tdm_snap_segment *segments;
    size_t segment_count;
    tdm_snap_block *blocks;
    size_t block_count;
    uint64_t segments_left_out; /* overlapped an earlier segment, or empty */
    uint64_t blocks_repaired;   /* blocks dropped or gaps filled to tile */
    int synthesized;            /* no final state in the file: made up */
} tdm_pt_state;

tdm_status tdm__pt_state_build(const tdm_snap *snap, const tdm_model *model,
                               tdm_pt_state *out);
void tdm__pt_state_free(tdm_pt_state *state);

/* Per event: keep[i] = 1 when events[i] becomes a trace entry.  Memory
 * events (alloc, free_*, segment_*) are kept when they replay backwards
 * onto `state`; oom and snapshot are always kept; phase, step and tag
 * marks never are (they become external_annotations).  cat[i] gets the
 * category of the allocation an alloc/free event belongs to (from
 * alloc_cats, one per model->allocs entry), TDM_CATEGORY_UNKNOWN
 * otherwise.  left_out[a] counts the memory events of action a left out. */
tdm_status tdm__pt_replay(const tdm_snap *snap, const tdm_model *model,
                          const uint8_t *alloc_cats, const tdm_pt_state *state,
                          uint8_t *keep, uint8_t *cat,
                          uint64_t left_out[TDM_ACTION_COUNT_]);

typedef struct tdm_pt_report {
    uint64_t entries;          /* trace entries written (all devices) */
    uint64_t left_out;         /* memory events left out by the replay */
    uint64_t left_out_by_action[TDM_ACTION_COUNT_];
    uint64_t segments_left_out;
    uint64_t blocks_repaired;
    int synthesized_state;
    int added_snapshot_entry;  /* a `snapshot` entry was added (see docs) */
    uint64_t bytes;            /* pickle size */
} tdm_pt_report;

/* Writes the whole pickle (PROTO … STOP) of `snap` to `w`.  device >= 0
 * keeps only that device's segments and trace (the other lists stay
 * empty).  `report` may be NULL. */
tdm_status tdm__pt_write(tdm_pkw *w, const tdm_snap *snap, const tdm_model *model,
                         int device, tdm_pt_report *report);

#endif
