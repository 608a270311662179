/* viewer-export/model/torch_segments.h: whether a snapshot recorded under
 * the preload library shows PyTorch's caching allocator from below: its
 * segments (reserved memory), not its tensors.
 *
 * Under libtidemark_preload.so in mode=observe each cudaMalloc /
 * hipMalloc is booked as an allocation of its own segment.  PyTorch's
 * caching allocator makes those calls only to grow its cache: one call is
 * one of its segments, carved into tensors that tidemark never sees (with
 * expandable_segments:True they are cuMemCreate/cuMemMap page maps, booked
 * as segment_map, and "allocated" stays near zero).  The summary, the
 * memory_viz pickle and the viewer say so when this returns nonzero.
 *
 * The evidence (docs/hooks.md, "PyTorch under the preload"):
 *   - the header's alloc_mode is "observe" (the preload's mode as
 *     TIDEMARK_CONF set it; cache mode books tidemark's own blocks), and
 *   - a recorded stack holds a frame of PyTorch's caching allocator: a
 *     function in c10::cuda::CUDACachingAllocator or
 *     c10::hip::HIPCachingAllocator (raw, mangled "_ZN3c104cuda20CUDA..."
 *     as the file keeps it, or already readable), or any frame in
 *     libc10_cuda.so / libc10_hip.so, whose only device allocations are
 *     the caching allocator's;
 *   - unless a frame is the cudaMallocAsync backend's
 *     (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync): that backend asks
 *     the driver for every tensor, so its allocations are tensors.
 * Without stacks (stacks=none) there is no evidence and nothing is said.
 * No state, no locks. */
#ifndef TDM_VIEWER_TORCH_SEGMENTS_H
#define TDM_VIEWER_TORCH_SEGMENTS_H

#include "snap_model.h"

/* The first line the summary prints, and the note the pickle and the
 * viewer carry, for such a snapshot. */
#define TDM_TORCH_SEGMENTS_NOTE                                                     \
    "PyTorch's caching allocator holds this memory: these are its segments "      \
    "(reserved memory), not tensors; for tensor-level data see docs/hooks.md"

/* Nonzero when `snap` shows PyTorch's caching allocator's segments (see
 * above). */
int tdm__torch_segments_seen(const tdm_snap *snap);

/* Nonzero when one frame (function and module as the snapshot keeps them)
 * is PyTorch's caching allocator's; 2 when it is the cudaMallocAsync
 * backend's.  For the tests. */
int tdm__torch_frame_kind(const tdm_snap_frame *frame);

/* A walk over one device's segment events, in history order, that keeps
 * the bytes of segments made outside PyTorch's caching allocator: those
 * whose segment_alloc or segment_map stack holds no frame of it (NCCL's
 * buffers, which it maps through the driver's virtual-memory calls; a
 * library's own cudaMalloc).  Their frees and unmaps are told apart by
 * address, so a free recorded without a stack still counts.  The summary
 * uses it to report PyTorch's reserved bytes as PyTorch counts them, and
 * the rest beside. */
typedef struct tdm_foreign_segments {
    const tdm_snap *snap;
    int device;
    size_t next;             /* the next event to read */
    int64_t bytes;           /* mapped outside PyTorch's allocator now */
    int64_t peak;            /* the most so far */
    int all_nccl;            /* every such segment's stack names NCCL */
    size_t count;            /* such segments seen */
    struct tdm_foreign_range *live;
    size_t live_count, live_cap;
    uint8_t *stack_kind;     /* per stack: 0 not looked at, 1 PyTorch's, 2 other */
} tdm_foreign_segments;

/* 0, or -1 out of memory. */
int tdm__foreign_segments_init(tdm_foreign_segments *f, const tdm_snap *snap, int device);
/* Reads the events up to and including position `seq` (< event_count). */
void tdm__foreign_segments_advance(tdm_foreign_segments *f, int64_t seq);
void tdm__foreign_segments_free(tdm_foreign_segments *f);

#endif
