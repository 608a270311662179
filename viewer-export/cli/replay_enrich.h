/* viewer-export/cli/replay_enrich.h: a saved replay given the recording's
 * stacks, phases and categories (replay_enrich.c).  Private to cli/.
 * Single-threaded; no state. */
#ifndef TDM_VIEWER_CLI_REPLAY_ENRICH_H
#define TDM_VIEWER_CLI_REPLAY_ENRICH_H

#include <stddef.h>

#include "replay_ops.h"
#include "snap_model.h"

/* Which op caused each event of a saved replay, as the library tells it. */
typedef struct tdm_replay_event_ops {
    size_t *op;   /* [count] */
    size_t count; /* events told */
    size_t cap;
    int failed;   /* out of memory: the file stays as the library wrote it */
} tdm_replay_event_ops;

/* Notes that event `event` came from op `op` (grows m); -1 when out of
 * memory (m->failed set). */
int tdm__replay_event_op_note(tdm_replay_event_ops *m, size_t event, size_t op);

/* Rewrites the saved replay at `path` with the recording `orig`'s stacks,
 * phases, steps, categories, marks and tables, `in` being the request
 * stream replayed (its op_event) and `ops` what the library told.
 * 0, or -1 when it could not (the file is then left as it was). */
int tdm__replay_enrich(const char *path, const tdm_snap *orig, const tdm_replay_input *in,
                       const tdm_replay_event_ops *ops);

#endif
