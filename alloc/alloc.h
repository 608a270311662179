/* alloc/alloc.h: the allocator layer as runtime/, the interposers and
 * the public API see it.
 *
 * alloc/ serves device memory from a provider (the sim device here; cuda,
 * hip and ze later) and tells the recorder what happened.  It owns the
 * per-device state (segments, blocks, stats) and hands it to the dump
 * through the recorder's state-source interface.
 *
 * Configuration happens once, before the first allocation: runtime/ calls
 * tdm__alloc_configure() from TIDEMARK_CONF at load time; a program that
 * never configures gets the defaults on its first tdm_malloc().
 */
#ifndef TDM_ALLOC_ALLOC_H
#define TDM_ALLOC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "vendor.h"

/* Power-of-two intervals of roundup_power2_divisions: [1 MiB, 2 MiB), ...,
 * [32 GiB, 64 GiB) and above; sizes under 1 MiB use interval 0. */
#define TDM_ROUNDUP_INTERVALS 16

struct tdm_provider;

typedef struct tdm__alloc_config {
    tdm_vendor device_kind;   /* TDM_VENDOR_SIM (default) */
    int device_count;         /* sim: number of devices (default 1) */
    uint64_t device_capacity; /* sim: bytes per device (default 16 GiB) */
    int host_accessible;      /* sim: nonzero maps memory read/write */
    /* How tdm_malloc serves memory: "cache" (default; PyTorch's caching
     * allocator) or "passthrough" (each allocation its own segment). */
    char mode[16];
    /* cache mode, with PyTorch's meanings (docs/allocator.md): */
    uint64_t max_split_size;  /* bytes; blocks this large are never split;
                                 0 = no limit (default) */
    uint32_t roundup_power2_divisions[TDM_ROUNDUP_INTERVALS]; /* 0/1 = off */
    double garbage_collection_threshold; /* fraction of capacity, 0 = off */
    /* Nonzero: segments are expandable (PyTorch's expandable_segments:
     * an address range reserved once per stream and pool, physical pages
     * mapped in as needed); a provider without virtual memory management
     * falls back to normal segments, with one line on stderr. */
    int expandable_segments;
    /* Called after an allocation fails for good (no allocator lock held),
     * e.g. to write a snapshot when dump_on includes oom.  May be NULL. */
    void (*on_oom)(int device, size_t requested);
    int quiet_oom;            /* nonzero: no OOM line on stderr */
    /* Tests only: cached blocks kept in one ordered tree per pool (the
     * former index) instead of size bins; every choice must be the same
     * (tests/unit/test_alloc_bins.c replays traces through both). */
    int reference_index;
} tdm__alloc_config;

void tdm__alloc_config_defaults(tdm__alloc_config *cfg);

/* Sets the configuration.  TDM_BAD_CONFIG once devices are in use (the
 * first configuration stays); TDM_NOT_AVAILABLE for an unknown kind. */
tdm_status tdm__alloc_configure(const tdm__alloc_config *cfg);
/* What tdm__alloc_configure checks of `cfg` itself, changing nothing:
 * its status for `cfg` while no device is in use. */
tdm_status tdm__alloc_config_check(const tdm__alloc_config *cfg);

/* Creates the devices now (with the configuration in force) instead of at
 * the first tdm_malloc, so a snapshot lists them even before any
 * allocation. */
TDM_API tdm_status tdm__alloc_init(void);

/* The allocator-layer entry points under tdm_malloc / tdm_free, for hooks
 * that serve vendor calls.  `skip` is the number of the caller's own
 * frames (tidemark frames above this call) to leave out of stacks. */
TDM_API tdm_status tdm__alloc_malloc(void **ptr, size_t size, int device,
                                     tdm_stream stream, unsigned skip);
TDM_API tdm_status tdm__alloc_free(void *ptr, unsigned skip);
/* A stream-ordered free (cudaFreeAsync, hipFreeAsync): in cache mode the
 * block is handed out again only once the work queued on `stream` before
 * this call has completed (at once when `stream` is the block's own). */
TDM_API tdm_status tdm__alloc_free_on_stream(void *ptr, tdm_stream stream, unsigned skip);
/* A synchronous free (cudaFree, hipFree): in cache mode over a device
 * with streams, first waits for all work queued on the block's device, as
 * the vendor's free does — except during a graph capture, where waiting
 * is illegal (the block is then freed on its own stream). */
TDM_API tdm_status tdm__alloc_free_synchronized(void *ptr, unsigned skip);
/* The bytes allocated and reserved now on `device` (tdm_memory_stats'
 * allocated_bytes.current and reserved_bytes.current), for a caller that
 * reads them after every allocation (replay's peak tracking): in cache
 * mode two sums over the shards instead of the whole stats. */
tdm_status tdm__alloc_current_bytes(int device, int64_t *allocated, int64_t *reserved);
/* Whether ptr lies inside device memory tidemark's cache holds (a segment
 * it took from the provider), live block or not.  A hook that serves the
 * vendor's calls from the cache must not pass the free of such a pointer
 * on to the vendor when tdm__alloc_free did not know it (a double free, or
 * a pointer into a block): the vendor would free the cache's segment, or
 * report an error tidemark should give itself.  0 in pass-through mode. */
TDM_API int tdm__alloc_owns(const void *ptr);
/* The device whose cache segment holds ptr; -1 when none does. */
TDM_API int tdm__alloc_owner_device(const void *ptr);
/* Cache mode: up to max addresses of `device`'s blocks the program holds
 * (walks every segment: for a vendor reset that destroys them, not for
 * hot paths); 0 in other modes. */
TDM_API size_t tdm__alloc_live_blocks(int device, uint64_t *out, size_t max);

/* The vendor allocation that holds live block ptr (an address tidemark
 * handed out): its base and size, what an IPC handle of ptr names
 * (cudaIpcGetMemHandle exports the whole allocation, and the peer maps it
 * at its base).  In cache mode the block's segment; in pass-through mode
 * the block itself.  A block of an expandable segment lies in no one
 * allocation: the block itself.  TDM_UNKNOWN_POINTER for anything else. */
TDM_API tdm_status tdm__alloc_base_of(const void *ptr, void **base, size_t *size);

/* "cache" or "passthrough": the mode in force (after init). */
TDM_API const char *tdm__alloc_mode_name(void);

/* Checks every invariant of the caching allocator on `device` (blocks tile
 * each segment exactly, free neighbours merged, pool trees hold exactly
 * the free blocks, stats equal the sums over blocks).  TDM_OK, or
 * TDM_INTERNAL with a description of the first violation in msg. */
tdm_status tdm__alloc_check(int device, char *msg, size_t msg_len);

/* PyTorch's round_size for the configuration in force (tests, bench). */
size_t tdm__alloc_round_size(size_t size);

/* round_size without roundup_power2_divisions: 512-byte multiples, at
 * least 512; 0 when the size cannot be rounded (the caller reports out of
 * memory).  Inline and without a branch on the size: the cache rounds
 * every request, and which side of 512 bytes a request falls was a
 * mispredicted branch in one of three. */
static inline size_t tdm__alloc_round_plain(size_t size)
{
    const size_t min_block = 512;
    if (__builtin_expect(size > SIZE_MAX - min_block, 0))
        return 0;
    size_t r = (size + min_block - 1) & ~(min_block - 1);
    return r < min_block ? min_block : r;
}

/* Calls the state source the allocator gave the recorder, as a dump does
 * (tests). */
struct tdm__state_visitor;
void tdm__alloc_visit_for_tests(const struct tdm__state_visitor *v);

/* ---- observe mode: the program's own vendor allocations, seen by hooks ----
 * The vendor served the memory; tidemark only books it: each allocation is
 * its own segment holding one block (segment_alloc + alloc, then
 * free_requested + free_completed + segment_free), with stats and state as
 * in pass-through mode.  `skip` counts the hook's own frames to leave out
 * of stacks.  Implemented in alloc/observe.c.
 *
 * Call tdm__alloc_observe_free / _unmap BEFORE the vendor's free / unmap
 * (and book nothing more if that then fails only when the pointer was
 * unknown): once the vendor has the memory back, another thread may get
 * the same address and book it first.
 *
 * TDM_API on a tdm__ name: exported from libtidemark.so for
 * libtidemark_preload.so (which links it); not part of the public API. */

/* Describes device `device` of a vendor for snapshots (TDM_VENDOR_CUDA,
 * "NVIDIA H100 80GB HBM3", capacity in bytes).  Later calls update it. */
TDM_API void tdm__alloc_observe_device(int device, tdm_vendor vendor,
                                       const char *name, uint64_t capacity);
/* A stream-ordered allocation made while its stream was being captured
 * into a CUDA/HIP graph: the snapshot will say that graph memory is not
 * covered (what the graph's memory nodes hold at launch is not seen). */
TDM_API void tdm__alloc_observe_graph_capture(void);
/* Asks that fn run just before each snapshot is built (not the
 * out-of-memory ones), to book again what it cannot follow event by event
 * (tdm__rec_add_refresh).  Each fn once; up to 4. */
TDM_API void tdm__alloc_observe_refresh_at_dump(void (*fn)(void));
/* A vendor allocation that succeeded. */
TDM_API void tdm__alloc_observe_alloc(int device, const void *ptr,
                                      size_t size, tdm_stream stream,
                                      unsigned skip);
/* A vendor free.  TDM_UNKNOWN_POINTER (and nothing recorded) for memory
 * observe_alloc never saw. */
TDM_API tdm_status tdm__alloc_observe_free(const void *ptr, tdm_stream stream,
                                           unsigned skip);
/* A vendor allocation that failed for lack of memory: an `oom` event. */
/* The vendor destroyed every allocation of `device` (a context reset):
 * each one observed and still live is booked as freed. */
TDM_API void tdm__alloc_observe_reset_device(int device, unsigned skip);
TDM_API void tdm__alloc_observe_oom(int device, size_t size,
                                    size_t free_bytes, tdm_stream stream,
                                    unsigned skip);
/* Virtual memory: physical memory mapped at [va, va+size) (segment_map),
 * and unmapped (segment_unmap). */
TDM_API void tdm__alloc_observe_map(int device, const void *va, size_t size,
                                    unsigned skip);
TDM_API tdm_status tdm__alloc_observe_unmap(const void *va, size_t size,
                                            unsigned skip);

/* A stream-ordered memory pool (cudaMallocAsync's, hipMallocAsync's) of
 * `device`, known by `pool` (its handle), as its own counters say now:
 * `reserved` bytes held from the device, `used` of them handed out.  The
 * pool's allocations are booked one by one (observe_alloc); what it holds
 * beyond them, reserved - used, is booked as reserved memory of the device
 * (segment_map / segment_unmap of the change; at the dump, one expandable
 * segment at the pool's handle holding one inactive block), under the
 * device's observe lock; when threads race, the last answer counts. */
TDM_API void tdm__alloc_observe_pool(int device, uint64_t pool, uint64_t reserved,
                                     uint64_t used, unsigned skip);

/* Memory mapped into `device`'s address space that this process did not
 * allocate, or that it counts elsewhere (tdm_import_kind in snap_model.h):
 * kept apart, never in any device's stats or events, and listed in the
 * snapshot's imported table.  `source_device` is the exporting device
 * (-1 host, -2 unknown). */
TDM_API void tdm__alloc_observe_import(int device, const void *va, size_t size,
                                       int source_device, int kind, unsigned skip);
/* Its unmap: the mapping based at `va`; TDM_UNKNOWN_POINTER if none. */
TDM_API tdm_status tdm__alloc_observe_unimport(const void *va);

/* ---- cache mode over a vendor ----
 * Hooks that serve a vendor's allocations from the caching allocator give
 * it the vendor provider (made with the real, un-hooked vendor functions)
 * before the first allocation.  TDM_BAD_CONFIG once devices exist. */
TDM_API tdm_status tdm__alloc_use_provider(struct tdm_provider *provider);

/* If the allocator has not started and its device kind is the default
 * sim, serve from vendor `kind` (not sim) when that vendor's
 * library is there with at least one device; otherwise nothing changes.
 * The PyTorch entry points call it: torch needs real device memory.
 * TDM_OK either way. */
tdm_status tdm__alloc_prefer_vendor(tdm_vendor kind);

/* Caps the bytes the allocator may take from `device`'s provider at
 * fraction x its total (torch.cuda.set_per_process_memory_fraction);
 * 1.0 lifts the cap.  Past it, allocations fail as out of memory after
 * the cache was freed and retried. */
tdm_status tdm__alloc_set_memory_fraction(double fraction, int device);

/* Tears everything down (tests only): frees every segment back to the
 * provider and forgets the configuration. */
void tdm__alloc_reset_for_tests(void);

/* Registers, once (the library also does it when it loads), the fork
 * handlers that keep tidemark's locks safe across fork(): the recorder's,
 * the stack capture's and the allocator's.  Code with a child handler of
 * its own that uses tidemark calls this before registering it, so that
 * its handler runs after theirs in the child (runtime/autoinit.c). */
void tdm__alloc_register_atfork(void);

/* In a forked child that records on (fork=follow), before it allocates:
 * forgets every allocation, segment and stat inherited from the parent,
 * in every mode, so that the child's snapshot shows only its own.  The
 * parent's device memory is forgotten, never freed or handed out again;
 * a free of a parent's pointer is then an unknown pointer (alloc/forget.c).
 * Call it with no other thread in the process (a fork child handler). */
void tdm__alloc_forget_inherited(void);

#endif
