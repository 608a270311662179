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

typedef struct tdm_summary_options {
    unsigned top;       /* sites listed per device (default 10) */
    unsigned frames;    /* frames per site (default 3) */
    int device;         /* only this ordinal; -1 = every device */
    int truncated;      /* the file was cut: say so in the header */
    uint64_t truncated_at; /* byte offset of the cut */
    int exact;          /* --bytes: stats in exact byte counts */
} tdm_summary_options;

/* Prints the summary of one snapshot and its model on `out`. */
tdm_status tdm__summary_print(FILE *out, const char *path, const tdm_snap *snap,
                              const tdm_model *model,
                              const tdm_summary_options *opts);

/* Summarizes the snapshots at `paths`: with two or more readable, a table
 * of one row per rank (host, rank, device, peak, time of peak since the
 * earliest start, step and phase at the peak, live at end, dropped
 * events) and the spread of the peaks (max, min, mean; the rank and top
 * site that set the maximum); with exactly one readable, that file's
 * full summary (tdm__summary_print).  opts->device picks the device of
 * each file (else its highest peak); `exact` prints sizes as byte
 * counts.  Each file is read with `loader`, reduced to its row and freed
 * before the next, so memory stays that of one snapshot.  Returns a
 * TDM_EXIT_* code (diagnostics on stderr, as "tidemark summary: ..."). */
int tdm__summary_ranks(FILE *out, const tdm_rank_paths *paths,
                       const tdm_summary_options *opts, int exact,
                       const tdm_input_loader *loader);

#endif
