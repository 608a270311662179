/* alloc/ptrmap.h: device pointer -> allocation record, for tdm_free() and
 * tdm_tag_ptr(), which get nothing but the pointer.
 *
 * 64 shards, each an open-addressing table (linear probing, backward-shift
 * deletion) under its own mutex, so threads freeing different pointers
 * rarely meet and no lock is global.  Tables live in mmap'd memory
 * (meta.h) and double when half full.
 */
#ifndef TDM_ALLOC_PTRMAP_H
#define TDM_ALLOC_PTRMAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "tidemark.h"
#include "visibility.h"

/* What tidemark remembers about one live allocation of pass-through or
 * observe mode: the whole of its state.  (Cache mode keeps its blocks in
 * each device's own map, cache_map.c.) */
typedef struct tdm__ptr_rec {
    uint64_t size;          /* bytes handed out (rounded) */
    uint64_t requested;     /* bytes asked for */
    uint64_t stream;        /* stream handle */
    uint64_t alloc_time_ns; /* CLOCK_REALTIME ns; 0 when not recording */
    uint32_t stack_id;      /* interned allocation stack, 0 = none */
    int16_t device;         /* device ordinal */
    uint8_t category;       /* tdm_category */
    uint8_t pad_;
} tdm__ptr_rec;

#define TDM__PTRMAP_SHARDS 64

typedef struct tdm__ptrmap_entry {
    uint64_t key; /* device address; 0 = empty slot */
    tdm__ptr_rec rec;
} tdm__ptrmap_entry;

typedef struct tdm__ptrmap_shard {
    tdm__lock lock;
    tdm__ptrmap_entry *slots; /* [cap], or NULL before first use */
    size_t cap;               /* slots, a power of two */
    size_t count;             /* used slots */
} __attribute__((aligned(64))) tdm__ptrmap_shard;

typedef struct tdm__ptrmap {
    tdm__ptrmap_shard shards[TDM__PTRMAP_SHARDS];
} tdm__ptrmap;

void tdm__ptrmap_init(tdm__ptrmap *m);
/* Frees every table; the map is empty and usable afterwards. */
void tdm__ptrmap_clear(tdm__ptrmap *m);
/* TDM_HOST_OUT_OF_MEMORY when a table cannot grow; TDM_INVALID_ARGUMENT
 * when `key` is already present (the record is left as it was). */
tdm_status tdm__ptrmap_insert(tdm__ptrmap *m, uint64_t key,
                              const tdm__ptr_rec *rec);
/* Removes `key`, copying its record to *out; TDM_UNKNOWN_POINTER if absent. */
tdm_status tdm__ptrmap_remove(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *out);
/* tdm__ptrmap_remove, only when the record is on `device`: otherwise it
 * stays, *out gets a copy and the answer is TDM_INVALID_ARGUMENT (observe
 * mode changes a device's records under that device's lock only). */
tdm_status tdm__ptrmap_remove_on(tdm__ptrmap *m, uint64_t key, int device,
                                 tdm__ptr_rec *out);
/* Copies the record of `key` to *out; TDM_UNKNOWN_POINTER if absent. */
tdm_status tdm__ptrmap_get(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *out);
/* Sets the category of `key`'s record; TDM_UNKNOWN_POINTER if absent. */
tdm_status tdm__ptrmap_set_category(tdm__ptrmap *m, uint64_t key,
                                    uint8_t category);
/* Calls fn for every entry, one shard at a time under that shard's lock;
 * fn must not call back into the map. */
void tdm__ptrmap_each(tdm__ptrmap *m,
                      void (*fn)(void *ctx, uint64_t key,
                                 const tdm__ptr_rec *rec),
                      void *ctx);
size_t tdm__ptrmap_count(tdm__ptrmap *m);

/* ---- the fork gate ----------------------------------------------------------
 * fork() must not happen while another thread is inside a shard (the child
 * would find the lock held forever, the table half changed), yet holding
 * every shard lock across fork() would be hundreds of locks.  Instead the
 * fork handlers (alloc.c) raise tdm__fork_pending and then take and release
 * each shard lock once: a thread that gets a shard lock afterwards sees the
 * flag, lets the lock go and waits for the fork to finish, so no shard lock
 * is held when fork() runs.  Only locks taken with no other allocator lock
 * held may wait at the gate; the handlers hold every lock that could be
 * outside them (device locks) before they raise the flag, so that a thread
 * inside one of those never meets it.
 * One window stays: a thread that was already waiting for a shard lock
 * gets it when the sweep lets it go, and may still hold it, about to see
 * the flag, when fork() runs.  Such a thread has changed nothing, so the
 * child handler makes every gated lock anew (tdm__ptrmap_fork_child).
 * Holding every shard lock across fork() instead would be hundreds of
 * locks at once (more than ThreadSanitizer's deadlock detector takes). */
extern _Atomic int tdm__fork_pending TDM__HIDDEN;
void tdm__fork_gate_slow(tdm__lock *m);
static inline void tdm__gate_lock(tdm__lock *m)
{
    tdm__lock_take(m);
    if (__builtin_expect(atomic_load_explicit(&tdm__fork_pending,
                                              memory_order_relaxed), 0))
        tdm__fork_gate_slow(m);
}
/* Takes and releases every shard lock once (fork handlers, flag raised). */
void tdm__ptrmap_fork_sweep(tdm__ptrmap *m);
/* In the child of a fork: every shard lock made anew (see above). */
void tdm__ptrmap_fork_child(tdm__ptrmap *m);

#endif
