/* viewer-export/import/import_pytorch_blocks.h: the bytes PyTorch's
 * caching allocator held for each tensor of a history it wrote.
 *
 * A trace entry of PyTorch's memory history (alloc, free_requested,
 * free_completed) names the bytes the program asked for, while
 * torch.cuda.max_memory_allocated() counts the blocks that served them:
 * the request rounded (512 B steps, or roundup_power2_divisions), and the
 * whole free block where splitting would leave too little (a 12,000,000 B
 * tensor in a 12 MiB segment holds all 12,582,912 B).  The history does
 * not say the block; its own layout does (import_pytorch_blocks.c).  With
 * each event's size set to its block, tidemark's allocated timeline and
 * peak are PyTorch's allocated_bytes to the byte; `requested` keeps what
 * the entry said (exports write it back, as PyTorch's trace has it).
 * No state, no locks.
 */
#ifndef TDM_VIEWER_IMPORT_PYTORCH_BLOCKS_H
#define TDM_VIEWER_IMPORT_PYTORCH_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"

/* PyTorch's roundup_power2_divisions: one per power-of-two interval from
 * 1 MiB (below: the first), the last for everything from 32 GiB. */
#define TDM_PT_DIVISION_INTERVALS 16

/* The allocator settings a history was recorded under (its
 * allocator_settings; the defaults where it says nothing). */
typedef struct tdm_pt_alloc_rules {
    uint64_t max_split_size; /* UINT64_MAX: no limit (PyTorch's -1) */
    int expandable;          /* expandable_segments:True */
    uint64_t divisions[TDM_PT_DIVISION_INTERVALS]; /* 0 or 1: no rounding up */
} tdm_pt_alloc_rules;

/* The request `size` rounded as the allocator rounds it (round_size). */
uint64_t tdm__pt_round_size(const tdm_pt_alloc_rules *rules, uint64_t size);

/* Sets size to the block's bytes in the alloc, free_requested and
 * free_completed events of one device's history, in its order (their
 * `requested` holds the entry's size).  -1 when out of memory (the events
 * are then partly set), else 0. */
int tdm__pt_block_sizes(tdm_event *events, size_t n, const tdm_pt_alloc_rules *rules);

#endif
