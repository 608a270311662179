/* viewer-export/import/import_build.h: builds a tdm_snap in memory from a
 * history read out of another tool's file (the traces CSV, RMM's log), so
 * that an importer only says what happened and the builder makes the
 * snapshot every consumer expects.
 *
 * What the builder adds by itself, at tdm__ibuild_finish():
 *   - the final allocator state: in observe mode (alloc_mode "observe"),
 *     one segment per allocation live at the end, holding one active block
 *     of the allocation's size, in address order;
 *   - per-device stats (tdm_stats) replayed from the events: allocated,
 *     requested, active and reserved bytes and the live counts, current
 *     and peak, and the OOM count;
 *   - the device list, from the ordinals the events used (vendor and name
 *     given at tdm__ibuild_new).
 * Events are kept in the order they are added.  An alloc should come with
 * its segment_alloc and a free_completed with its segment_free, as the
 * recorder does in observe mode; tdm__ibuild_alloc/_free add the pairs.
 *
 * A snapshot from tdm__ibuild_finish owns its memory and is freed with
 * tdm__ibuild_snap_free (NOT tdm__snap_free, which frees only the
 * reader's snapshots).  A builder is used by one thread.
 */
#ifndef TDM_VIEWER_IMPORT_BUILD_H
#define TDM_VIEWER_IMPORT_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

typedef struct tdm_ibuild tdm_ibuild;

/* A builder for a snapshot of `vendor`/`name` devices; `metadata` goes to
 * the header ("imported from rmm log x.csv").  Strings are copied. */
tdm_status tdm__ibuild_new(const char *vendor, const char *name,
                           const char *metadata, tdm_ibuild **out);
/* Drops a builder that will not be finished. */
void tdm__ibuild_abort(tdm_ibuild *b);

/* The phase id of `name`, added on first use; 0 on allocation failure. */
uint32_t tdm__ibuild_phase_id(tdm_ibuild *b, const char *name);

/* Adds one event as given (time, action, device, ... ; step and phase are
 * taken from the builder's current ones when ev->phase/step are 0). */
tdm_status tdm__ibuild_event(tdm_ibuild *b, const tdm_event *ev);
/* segment_alloc + alloc of `size` bytes at `addr` (observe mode). */
tdm_status tdm__ibuild_alloc(tdm_ibuild *b, uint64_t time_ns, int device,
                             uint64_t addr, uint64_t size, uint64_t stream,
                             uint8_t category);
/* free_requested + free_completed + segment_free. */
tdm_status tdm__ibuild_free(tdm_ibuild *b, uint64_t time_ns, int device,
                            uint64_t addr, uint64_t size, uint64_t stream);
/* A phase mark (the phase is in force for the events after it). */
tdm_status tdm__ibuild_phase(tdm_ibuild *b, uint64_t time_ns, const char *name);
/* A step mark: the next step number. */
tdm_status tdm__ibuild_step(tdm_ibuild *b, uint64_t time_ns);

/* Completes the snapshot (see above) and frees the builder, whatever the
 * status.  header.start_time_us is the first event's time. */
tdm_status tdm__ibuild_finish(tdm_ibuild *b, tdm_snap **out);
void tdm__ibuild_snap_free(tdm_snap *snap);

#endif
