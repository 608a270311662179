/* viewer-export/model/replay_ops.h: what `tidemark replay` takes from a
 * recording: its request stream on one device, its recorded settings,
 * and its segment timeline (to check that a replay reproduces it).  Read
 * from the snapshot alone; the replay itself is the command's. */
#ifndef TDM_VIEWER_MODEL_REPLAY_OPS_H
#define TDM_VIEWER_MODEL_REPLAY_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark_private.h"
#include "snap_model.h"

typedef struct tdm_replay_seg_event {
    uint64_t size;
    int freed;
} tdm_replay_seg_event;

typedef struct tdm_replay_input {
    int device;
    tdm_replay_op *ops;
    uint64_t *op_times;            /* [op_count] each op's recorded time (ns) */
    size_t *op_event;              /* [op_count] the snapshot event it comes from */
    size_t op_count;
    uint64_t ids;                  /* allocation ids used */
    size_t allocs;                 /* allocation requests */
    size_t unmatched_frees;        /* frees of blocks allocated before the window */
    tdm_replay_seg_event *segs;    /* the recording's segment timeline */
    size_t seg_count;
    uint64_t recorded_peak_reserved; /* from the snapshot's stats, 0 if none */
    uint64_t capacity;             /* the device's, 0 when unknown */
    char *recorded_conf;           /* the recording's allocator settings */
} tdm_replay_input;

/* Builds the request stream of `device` (-1: the device with the most
 * allocations).  Allocations use their requested bytes; a block is freed
 * when its free completed.  0, or -1 when out of memory. */
int tdm__replay_input_build(const tdm_snap *snap, int device, tdm_replay_input *in);
void tdm__replay_input_free(tdm_replay_input *in);

/* The allocator keys replay changes. */
int tdm__replay_key_allowed(const char *key, size_t len);
/* Appends to `out` (NUL-terminated, `cap` bytes) the items of TIDEMARK_CONF
 * text `conf` whose keys replay changes, comma-separated; PyTorch's
 * KEY:VALUE items (an imported snapshot's PYTORCH_CUDA_ALLOC_CONF:
 * expandable_segments, max_split_size_mb, roundup_power2_divisions,
 * garbage_collection_threshold) in tidemark's words. */
void tdm__replay_conf_pick(const char *conf, char *out, size_t cap);
/* The next item of a TIDEMARK_CONF-style list at *p (K=V, commas inside
 * [...] kept): its first non-blank character, its end in *end; *p moves
 * past it and its comma.  NULL at the end of the list. */
const char *tdm__replay_conf_item(const char **p, const char **end);

#endif
