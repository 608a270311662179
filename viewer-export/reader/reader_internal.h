/* viewer-export/reader/reader_internal.h: the snapshot a program reads
 * through libtidemark_reader.so (include/tidemark_reader.h): the file's
 * snapshot, its model, the category of each allocation, and the public
 * rows made from them once, at load.
 *
 * reader/ sits beside cli/ over import/ and model/: it may include those
 * and the snapshot reader, never cli/, export/, view/ or gate/.  One lock
 * (tdm__reader_lock) serializes every call that touches the model's
 * process-wide state. */
#ifndef TDM_READER_INTERNAL_H
#define TDM_READER_INTERNAL_H

#include <pthread.h>

#include "tidemark_reader.h"
#include "categories.h"
#include "model.h"
#include "snap_model.h"

struct tdm_snapshot {
    tdm_snap *snap;            /* read or imported (tdm__input_snap_free) */
    tdm_model *model;
    uint8_t *cats;             /* category of model->allocs[i] */
    uint8_t *cat_sources;      /* tdm_category_source of each */
    int truncated;
    uint64_t truncated_at;
    int torch;                 /* tdm__torch_segments_seen */

    tdm_snapshot_event *events;
    tdm_snapshot_segment *segments;
    tdm_snapshot_block *blocks;
    tdm_snapshot_frame *frames;
    tdm_snapshot_stack_frame *stack_frames;
    size_t stack_frame_count;
    tdm_snapshot_device *devices;
    tdm_snapshot_allocation *allocations;
};

extern pthread_mutex_t tdm__reader_lock;

/* Makes the public rows of `s` from its snapshot, model and categories.
 * TDM_HOST_OUT_OF_MEMORY is the only failure (what was made stays for
 * tdm_snapshot_free). */
tdm_status tdm__reader_make_rows(tdm_snapshot *s);

#endif
