/* viewer-export/import/merge_torch.h: one snapshot from tidemark's own
 * recording of a PyTorch program and PyTorch's memory history of the same
 * run (the NAME.torch.pickle python/tidemark_tensors.py writes beside
 * NAME.tdm); docs/categories.md, "One file".
 *
 * What comes from where:
 *   - tensors (alloc, free_requested, free_completed, oom): PyTorch's
 *     history, with its Python stacks and its trace categories;
 *   - segments (segment_alloc/free/map/unmap: reserved memory): tidemark's
 *     hooks, with tidemark's native and Python stacks (an expandable
 *     segment's pages mapped in one go, one driver call each, as the one
 *     event PyTorch booked for them); tidemark's own
 *     alloc/free events over PyTorch's memory (a segment booked as one
 *     allocation under the preload) are left out, so tensors are not
 *     counted twice; its allocations elsewhere (memory PyTorch never
 *     carved: NCCL, a library's own cudaMalloc) stay;
 *   - phase and step marks: tidemark's when it has any, else PyTorch's
 *     external_annotations; every tensor event takes the phase and step
 *     in force where it lands;
 *   - the final state: PyTorch's segments and blocks (it knows how it
 *     carved them), tidemark's segments that PyTorch's do not cover; the
 *     allocator statistics: PyTorch's memory_stats, when the pickle has
 *     them (`tidemark_memory_stats`, written by tidemark_tensors.py), so
 *     the summary's stats line is torch.cuda.max_memory_allocated().
 * Both clocks are the Unix epoch (tidemark: CLOCK_REALTIME in ns;
 * PyTorch >= 2.1: `time_us`, µs), so the events are merged by time, each
 * side's order kept: on the same microsecond tidemark's event goes first,
 * unless it gives memory back (segment_free, segment_unmap), and the
 * memory a tensor reaches into (its segment_alloc, an expandable
 * segment's segment_map) up to 1 ms behind it (clock skew) is taken first.
 * A history without time stamps (PyTorch before 2.1) is refused.
 *
 * No state, no locks.
 */
#ifndef TDM_VIEWER_IMPORT_MERGE_TORCH_H
#define TDM_VIEWER_IMPORT_MERGE_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "snap_model.h"

/* The first line of the header notes a merged snapshot gets; the merge
 * refuses a snapshot whose notes hold it already. */
#define TDM_MERGE_TORCH_NOTE "tensor events from PyTorch's memory history"

typedef struct tdm_merge_torch_report {
    uint64_t tensor_events;  /* events taken from PyTorch's history */
    uint64_t left_out;       /* tidemark's alloc/free events over PyTorch's memory */
    uint64_t torch_segments; /* final-state segments from PyTorch */
    uint64_t torch_lost;     /* tensor allocations PyTorch's full ring lost (a floor) */
    int stats_from_torch;    /* the statistics are PyTorch's */
    int marks_from_torch;    /* tidemark had no marks: PyTorch's were used */
    int ring_full;           /* PyTorch's ring was full on some device */
} tdm_merge_torch_report;

/* PyTorch's history ring as tidemark_tensors.py saw it at exit (the
 * pickle's `tidemark_history`: {"max_entries": N, "full": {device:
 * entries}}).  PyTorch keeps the newest max_entries trace entries and says
 * nothing of the rest, so a ring that holds max_entries at the end has
 * likely lost its oldest: the merge says so in the notes and counts what
 * torch.cuda.memory_stats shows lost as dropped events. */
typedef struct tdm_merge_torch_ring {
    uint64_t max_entries; /* 0: not said (a pickle from elsewhere) */
    int32_t *full;        /* malloc'd: the devices whose ring was full */
    size_t nfull;
} tdm_merge_torch_ring;

/* PyTorch's history read from the pickle at `path`: the imported snapshot
 * (free with tdm__import_pytorch_free), its memory_stats rows (malloc'd,
 * may be none) and its ring (free ring->full).  Errors as the importer's:
 * TDM_IO_ERROR, TDM_FORMAT_ERROR ("at byte N: ..." in err),
 * TDM_HOST_OUT_OF_MEMORY. */
tdm_status tdm__merge_torch_load(const char *path, tdm_snap **torch,
                                 tdm_snap_device_stats **stats, size_t *nstats,
                                 tdm_merge_torch_ring *ring, char *err, size_t errlen);

/* The merged snapshot of `tdm` and `torch` (see above); `source` names the
 * pickle in the notes; `ring` (may be NULL) what PyTorch's ring was.  The
 * result borrows strings from both inputs: free it with
 * tdm__merge_torch_free before them.  TDM_FORMAT_ERROR with err set when
 * the history cannot be merged (no tensors, no time stamps);
 * TDM_HOST_OUT_OF_MEMORY. */
tdm_status tdm__merge_torch(const tdm_snap *tdm, const tdm_snap *torch,
                            const tdm_snap_device_stats *stats, size_t nstats,
                            const tdm_merge_torch_ring *ring, const char *source,
                            tdm_snap **out, tdm_merge_torch_report *report, char *err,
                            size_t errlen);
void tdm__merge_torch_free(tdm_snap *merged);

/* Internal (merge_torch_maps.c): runs of tidemark's segment_map (or
 * segment_unmap) events in `ev`, contiguous and one right after another,
 * that PyTorch's history `torch` booked as one range, joined into one
 * event, in place (*n shrinks).  -1 when out of memory (ev untouched). */
int tdm__merge_torch_join_maps(tdm_event *ev, size_t *n, const tdm_snap *torch);

/* Nonzero when `snap` is the result of a merge already. */
int tdm__merge_torch_done(const tdm_snap *snap);

/* Nonzero when PyTorch's history `torch` (tdm__merge_torch_load) recorded
 * nothing: no tensor event, no segment.  So a run whose PyTorch had its
 * caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1: no history is
 * kept), or made no CUDA tensor. */
int tdm__merge_torch_empty(const tdm_snap *torch);

/* The pickle beside a snapshot: "X.tdm" -> "X.torch.pickle" (other names:
 * NAME.torch.pickle); malloc'd, NULL when out of memory. */
char *tdm__merge_torch_pickle_path(const char *tdm_path);

#endif
