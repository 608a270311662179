/* hooks/track/vmm_track.h: the virtual-memory handles and mappings a
 * vendor's hooks have seen (CUDA's cuMemCreate / cuMemMap, HIP's
 * hipMemCreate / hipMemMap), one tracker per vendor over the same code.
 *
 * A physical allocation handle is remembered with its device (-1 host),
 * its origin (TDM_VMM_OWN: made by this process; else the tdm_import_kind
 * its mappings are booked as) and its live mappings; a mapped address
 * with its handle (an unmap names only the address).  A handle counts
 * once: its first mapping is the process's own memory, every further one
 * (and every mapping of an imported handle) is imported memory.
 *
 * Sizes: nothing fixed.  Both tables are open-addressed hashes that double
 * at half full, so lookups are O(1) on average however many pages are
 * mapped (an H200 with expandable segments maps >80 GiB in 20 MiB pages:
 * about 7000 handles and as many mappings).  Their slots come from
 * tdm__meta_map (mmap), never from the program's malloc.  Only when the
 * system refuses memory is a handle forgotten (it then maps as one made
 * before tidemark was loaded).
 *
 * Per vendor: the operations (tdm__vmm_ops) ask the vendor what tidemark
 * cannot know itself, with no lock held.  Lock: one mutex per tracker
 * around both tables (virtual-memory calls are rare; no vendor call is
 * made while it is held).
 */
#ifndef TDM_HOOKS_TRACK_VMM_TRACK_H
#define TDM_HOOKS_TRACK_VMM_TRACK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define TDM_VMM_HIDDEN __attribute__((visibility("hidden")))

/* A handle's origin: made here (else a tdm_import_kind). */
#define TDM_VMM_OWN (-1)

typedef struct tdm__vmm_ops {
    /* The device (-1 host) of a handle tidemark never saw made: one made
     * before it was loaded. */
    int (*unseen_device)(uint64_t handle);
} tdm__vmm_ops;

typedef struct tdm__vmm_slot {
    uint64_t key; /* 0: empty */
    uint64_t value; /* mappings: the handle */
    int device, origin, maps;
} tdm__vmm_slot;

typedef struct tdm__vmm_table {
    tdm__vmm_slot *slot; /* tdm__meta_map'd; NULL until the first entry */
    size_t cap;          /* a power of two, or 0 */
    size_t count;
} tdm__vmm_table;

typedef struct tdm__vmm_track {
    const tdm__vmm_ops *ops;
    pthread_mutex_t lock;
    tdm__vmm_table handles, mappings;
} tdm__vmm_track;

#define TDM__VMM_TRACK_INIT(ops_ptr) {.ops = (ops_ptr), .lock = PTHREAD_MUTEX_INITIALIZER}

/* How a mapping is booked: kind TDM_VMM_OWN is the process's own memory
 * mapped for the first time, on `device` (segment_map); any other kind is
 * the tdm_import_kind of imported memory whose source is `device`. */
typedef struct tdm__vmm_booking {
    int device;
    int kind;
} tdm__vmm_booking;

/* A handle made (origin TDM_VMM_OWN) or imported (a tdm_import_kind). */
TDM_VMM_HIDDEN void tdm__vmm_created(tdm__vmm_track *t, uint64_t handle, int device,
                                     int origin);
/* A handle released: forgotten (its mappings, if any, stay until unmapped). */
TDM_VMM_HIDDEN void tdm__vmm_released(tdm__vmm_track *t, uint64_t handle);
/* The device of a handle seen made; -2 when unknown. */
TDM_VMM_HIDDEN int tdm__vmm_device(tdm__vmm_track *t, uint64_t handle);
/* A mapping of `handle` at `va` made: how to book it.  A handle never
 * seen made is asked of ops->unseen_device and remembered as the
 * process's own. */
TDM_VMM_HIDDEN tdm__vmm_booking tdm__vmm_mapped(tdm__vmm_track *t, uint64_t handle,
                                                uint64_t va);
/* The mapping at `va` goes: its handle has one mapping fewer. */
TDM_VMM_HIDDEN void tdm__vmm_unmapped(tdm__vmm_track *t, uint64_t va);
/* Handles and mappings remembered now (for tests and the self-check). */
TDM_VMM_HIDDEN void tdm__vmm_counts(tdm__vmm_track *t, size_t *handles, size_t *mappings);

#endif
