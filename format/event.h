/* format/event.h: the event record and its vocabulary of actions.
 *
 * One tdm_event describes one thing that happened to device memory.  The
 * actions follow PyTorch's allocator trace vocabulary (so exports to
 * memory_viz are one-to-one) plus tidemark's own annotation marks.
 *
 * Field meanings per action (sizes in bytes):
 *   alloc, free_requested, free_completed:
 *       addr = block address, size = the bytes the allocation holds,
 *       requested = the bytes asked for.  tidemark's own recorder writes
 *       the request as both (rounded sizes live in the allocator state);
 *       a PyTorch history imported gives each tensor its block's bytes
 *       (import_pytorch_blocks.h), what max_memory_allocated() counts
 *   segment_alloc/free/map/unmap: addr = segment base, size = segment bytes
 *   oom:      addr = bytes free on the device, size = request (rounded),
 *             requested = bytes the program asked for
 *   snapshot: addr = 0, size = 0 (a dump was taken here)
 *   phase:    phase = id of the phase that starts here
 *   step:     step = number of the step that starts here
 *   tag:      addr = allocation re-tagged by tdm_tag_ptr, category = new tag
 */
#ifndef TDM_FORMAT_EVENT_H
#define TDM_FORMAT_EVENT_H

#include <stdint.h>

/* XX(NAME, "pytorch_name") -- the order is the on-disk action number. */
#define TDM_ACTION_MAP(XX)                                                     \
    XX(ALLOC, "alloc")                                                         \
    XX(FREE_REQUESTED, "free_requested")                                       \
    XX(FREE_COMPLETED, "free_completed")                                       \
    XX(SEGMENT_ALLOC, "segment_alloc")                                         \
    XX(SEGMENT_FREE, "segment_free")                                           \
    XX(SEGMENT_MAP, "segment_map")                                             \
    XX(SEGMENT_UNMAP, "segment_unmap")                                         \
    XX(OOM, "oom")                                                             \
    XX(SNAPSHOT, "snapshot")                                                   \
    XX(PHASE, "phase")                                                         \
    XX(STEP, "step")                                                           \
    XX(TAG, "tag")

typedef enum tdm_action {
#define TDM__ACTION_ENUM(name, str) TDM_ACTION_##name,
    TDM_ACTION_MAP(TDM__ACTION_ENUM)
#undef TDM__ACTION_ENUM
    TDM_ACTION_COUNT_
} tdm_action;

/* Ring-only compound entries: one ring slot for what a pass-through or
 * observed allocation always records together, to halve the hot path's
 * cost.  The dump expands them into the plain events above (same time,
 * stream, stack, phase, step, category), so files never hold them and
 * max_entries counts ring entries.
 *   SEGMENT_ALLOC_ALLOC: segment_alloc(addr, size, requested)
 *                        + alloc(addr, requested, requested)
 *   FREE_SEGMENT_FREE:   free_requested(addr, requested, requested)
 *                        + free_completed(addr, requested, requested)
 *                        + segment_free(addr, size, requested)
 *   FREE_FREE:           free_requested(addr, requested, requested)
 *                        + free_completed(addr, requested, requested)
 *                        (the caching allocator's free that waits on no
 *                        other stream) */
#define TDM__ACTION_SEGMENT_ALLOC_ALLOC 250
#define TDM__ACTION_FREE_SEGMENT_FREE 251
#define TDM__ACTION_FREE_FREE 252

/* Plain events an entry stands for (1 for plain actions). */
static inline unsigned tdm__action_expanded_count(unsigned action)
{
    return action == TDM__ACTION_SEGMENT_ALLOC_ALLOC || action == TDM__ACTION_FREE_FREE ? 2
         : action == TDM__ACTION_FREE_SEGMENT_FREE ? 3 : 1;
}

/* "alloc", "segment_free", ...; NULL for values out of range. */
const char *tdm__action_name(unsigned action);
/* The action named `name`, or -1. */
int tdm__action_from_name(const char *name);

/* The decoded event (56 bytes; the ring stores it as 7 words plus a
 * sequence word, 64 bytes a slot). */
typedef struct tdm_event {
    uint64_t time_ns;   /* CLOCK_REALTIME, ns since the Unix epoch */
    uint64_t addr;      /* see the table above */
    uint64_t size;      /* bytes */
    uint64_t requested; /* bytes */
    uint64_t stream;    /* stream/queue handle as an integer, 0 default */
    uint32_t stack_id;  /* interned stack, 0 = none */
    uint32_t phase;     /* phase id in force (0 = none) */
    uint32_t step;      /* step number in force (0 = before the first) */
    int16_t device;     /* device ordinal, -1 for host */
    uint8_t action;     /* tdm_action */
    uint8_t category;   /* tdm_category tag in force (0 = unknown) */
} tdm_event;

_Static_assert(sizeof(tdm_event) == 56, "tdm_event must stay 7 words");

/* Writes the plain events of ring entry `in` to out[0..), returning how
 * many (tdm__action_expanded_count).  Inline: a dump expands every entry
 * of the ring. */
static inline unsigned tdm__event_expand(const tdm_event *in, tdm_event *out)
{
    switch (in->action) {
    case TDM__ACTION_SEGMENT_ALLOC_ALLOC:
        out[0] = *in;
        out[0].action = TDM_ACTION_SEGMENT_ALLOC;
        out[1] = *in;
        out[1].action = TDM_ACTION_ALLOC;
        out[1].size = in->requested;
        return 2;
    case TDM__ACTION_FREE_SEGMENT_FREE:
        out[0] = *in;
        out[0].action = TDM_ACTION_FREE_REQUESTED;
        out[0].size = in->requested;
        out[1] = out[0];
        out[1].action = TDM_ACTION_FREE_COMPLETED;
        out[2] = *in;
        out[2].action = TDM_ACTION_SEGMENT_FREE;
        return 3;
    case TDM__ACTION_FREE_FREE:
        out[0] = *in;
        out[0].action = TDM_ACTION_FREE_REQUESTED;
        out[1] = *in;
        out[1].action = TDM_ACTION_FREE_COMPLETED;
        return 2;
    default:
        out[0] = *in;
        return 1;
    }
}

#endif
