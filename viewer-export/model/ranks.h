/* viewer-export/model/ranks.h: the snapshots of a multi-rank job, one file per
 * rank, as `tidemark summary` and `tidemark gate` take them: operands that
 * are files or directories, put in rank order, each named by its rank and
 * host.
 *
 * A directory operand stands for the `*.tdm` files directly inside it
 * (not its subdirectories, not hidden files), in name order.  Snapshots
 * are ordered by the rank in their header (tdm_snap_header.rank); files
 * without a rank (single-process runs) come after every ranked file, and
 * ties keep the order the operands gave.  No state, no locks.
 */
#ifndef TDM_VIEWER_RANKS_H
#define TDM_VIEWER_RANKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snap_model.h"
#include "input.h"

/* Paths expanded from command-line operands. */
typedef struct tdm_rank_paths {
    char **paths; /* malloc'd, each malloc'd */
    size_t count;
} tdm_rank_paths;

/* Expands `args` (files or directories) into out->paths.  A directory that
 * cannot be read, or holds no .tdm file, is reported on stderr ("tidemark
 * CMD: DIR: ...") and contributes nothing.  Returns a TDM_EXIT_* code:
 * OK; BAD_INPUT after such a report (the other paths are still there);
 * TOOL_ERROR when out of memory (out is then empty). */
int tdm__ranks_expand(const char *cmd, char *const *args, size_t n, tdm_rank_paths *out);
void tdm__ranks_paths_free(tdm_rank_paths *p);

/* The sort key of a snapshot header: its rank, or INT64_MAX for a file
 * with none (or no header: NULL). */
int64_t tdm__ranks_key(const tdm_snap_header *h);

/* Puts `inputs` in rank order (see above): a stable sort on
 * tdm__ranks_key, so inputs without a rank (and those that could not be
 * read) keep their order after the ranked ones.  TDM_OK or
 * TDM_HOST_OUT_OF_MEMORY (then the order is unchanged). */
tdm_status tdm__ranks_sort_inputs(tdm_input *inputs, size_t n);

/* "rank 3 on node07" for a snapshot whose header has a rank, else "" (a
 * single-process run needs no label).  Returns buf. */
const char *tdm__ranks_label(char *buf, size_t len, const tdm_snap *snap);

/* Writes a sorted list of distinct non-negative numbers compactly, ranges
 * joined: "0-3,5,8-15".  Returns buf (truncated with "..." if too long). */
const char *tdm__ranks_format_list(char *buf, size_t len, const int32_t *v, size_t n);

#endif
