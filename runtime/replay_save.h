/* runtime/replay_save.h: recording a replay (tdm__replay_save) as a .tdm
 * through tidemark's own recorder.  Used by runtime/replay.c only. */
#ifndef TDM_RUNTIME_REPLAY_SAVE_H
#define TDM_RUNTIME_REPLAY_SAVE_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark_private.h"
#include "tidemark.h"

typedef struct tdm__replay_rec {
    const tdm_replay_save *save;
    uint64_t *op_start; /* [n] the recorder's clock when op i began */
    size_t n;
} tdm__replay_rec;

/* Starts recording every event (no stacks) into a ring that holds the
 * whole replay of n ops, with `conf` as the header's configuration. */
tdm_status tdm__replay_rec_begin(tdm__replay_rec *r, const tdm_replay_save *save,
                                 const char *conf, size_t n);
/* Notes that op i begins: its events are those recorded from now until
 * the next op begins. */
void tdm__replay_rec_op(tdm__replay_rec *r, size_t i);
/* Writes the file (events stamped with the ops' recorded times) and stops
 * recording; also, with `write` 0, only stops.  The recording's status. */
tdm_status tdm__replay_rec_end(tdm__replay_rec *r, int write);

#endif
