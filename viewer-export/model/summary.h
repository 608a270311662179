/* viewer-export/model/summary.h: the one-screen account of snapshots
 * that `tidemark summary` prints: one snapshot's full summary (summary.c)
 * and the table of a multi-rank job's snapshots, one row per rank, with
 * the spread of their peaks (summary_ranks.c).  Both take their figures
 * from the analysis model; they write on the FILE they are given,
 * diagnostics on stderr.  No state, no locks. */
#ifndef TDM_VIEWER_SUMMARY_H
#define TDM_VIEWER_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "input.h"
#include "ranks.h"

/* The rank table lists every rank up to this many ranks; a bigger job gets
 * the 10 highest peaks and the 3 lowest (--all: every rank). */
#define TDM_SUMMARY_RANKS_ALL_UP_TO 16
#define TDM_SUMMARY_RANKS_HIGHEST 10
#define TDM_SUMMARY_RANKS_LOWEST 3

typedef struct tdm_summary_options {
    unsigned top;       /* sites listed per device (default 10) */
    unsigned frames;    /* frames per site; 0: 2 in a summary (6 with
                         * verbose), 3 for the top site of a rank table */
    int device;         /* only this ordinal; -1 = every device */
    int truncated;      /* the file was cut: say so in the header */
    uint64_t truncated_at; /* byte offset of the cut */
    int exact;          /* --bytes: stats in exact byte counts */
    int verbose;        /* --verbose: what the one-screen default leaves out */
    int all;            /* --all: every rank's row, however many */
} tdm_summary_options;

/* Nonzero when a header's recording start (µs since the epoch) is a real
 * date: importers of logs that give no date (RMM's times of day, trace
 * CSV offsets) leave a time in the first days of 1970, or 0. */
static inline int tdm__summary_start_known(uint64_t start_us)
{
    return tdm__model_start_known(start_us);
}

/* The peak the summary reports for a device: of allocated bytes; or, for
 * PyTorch's caching allocator seen from below (torch_segments.h: `torch`
 * nonzero), of reserved bytes, since its tensors are not in the file and,
 * with expandable segments, its memory is mapped pages that no allocation
 * holds.  Whoever shows a peak (the summary, the Python reader) takes it
 * from here, so they agree. */
typedef struct tdm_summary_peak {
    int reserved;      /* the peak of reserved bytes */
    int64_t bytes;     /* the peak's value */
    int64_t allocated; /* allocated bytes at that moment */
    int64_t seq;       /* event position (-1 = the window's start) */
    uint64_t time_ns;
    uint32_t step, phase;
    /* Of a reserved peak: segments outside PyTorch's caching allocator
     * (NCCL's buffers; torch_segments.h), left out of `bytes`. */
    int64_t foreign_at_peak, foreign_peak;
    size_t foreign_count;
    int foreign_nccl;
} tdm_summary_peak;

tdm_summary_peak tdm__summary_peak_of(const tdm_snap *s, const tdm_model_device *d, int torch);

/* Prints the summary of one snapshot and its model on `out`: the answer
 * first (per device: the peak, how much of what capacity and when; the
 * top allocation sites at the peak with short stacks), then the details
 * (bytes live at the end, the allocator's stats; who recorded it, how,
 * and how much history the ring kept).  The demo's fits in 40 lines;
 * opts->verbose adds what that leaves out (the file's format, the full
 * config, the allocator's pools, more frames, the sites live at the
 * end). */
tdm_status tdm__summary_print(FILE *out, const char *path, const tdm_snap *snap,
                              const tdm_model *model,
                              const tdm_summary_options *opts);

/* Summarizes the snapshots at `paths`: with two or more readable, a table
 * of one row per rank (host, rank, device, peak, time of peak since the
 * earliest start, step and phase at the peak, live at end, dropped
 * events) and the spread of the peaks (max, min, mean; the rank and top
 * site that set the maximum).  Past TDM_SUMMARY_RANKS_ALL_UP_TO readable
 * files, unless opts->all, the table has only the ranks of the highest
 * and the lowest peaks, and the spread adds the median and how many
 * ranks share the max and the min.  With exactly one readable, that file's
 * full summary (tdm__summary_print).  opts->device picks the device of
 * each file (else its highest peak); `exact` prints sizes as byte
 * counts.  Each file is read with `loader`, reduced to its row and freed
 * before the next, so memory stays that of one snapshot.  Returns a
 * TDM_EXIT_* code (diagnostics on stderr, as "tidemark summary: ..."). */
int tdm__summary_ranks(FILE *out, const tdm_rank_paths *paths,
                       const tdm_summary_options *opts, int exact,
                       const tdm_input_loader *loader);

#endif
