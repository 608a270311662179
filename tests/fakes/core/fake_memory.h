/* tests/fakes/core/fake_memory.h: the device-memory bookkeeping the fake
 * vendor libraries share (tests/fakes/cuda, hip, ze): which allocations
 * are live (an address or handle, its size, device and kind), how many
 * bytes each device holds against its capacity, the blocks that stand for
 * device memory, and the per-function call counters tests read back.
 *
 * Each fake keeps one fake_memory and says which of its kinds count
 * against a device's capacity; what a kind means, and what an allocation
 * call answers, stays the fake's own (its vendor's documentation).
 *
 * Sizes: nothing fixed.  The registry is an open-addressed hash (linear
 * probing, backward-shift deletion) that doubles at half full.  Lock: one
 * mutex per registry; the block cache has its own.  Linked into each fake
 * (a static library, hidden symbols).
 */
#ifndef TDM_FAKE_MEMORY_H
#define TDM_FAKE_MEMORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_MEM_HIDDEN __attribute__((visibility("hidden")))
#define FAKE_MEM_DEVICES 64

/* One live allocation. */
typedef struct fake_mem {
    uintptr_t key;    /* its address, or a handle; 0 only in an empty slot */
    size_t size;      /* bytes asked for */
    size_t span;      /* bytes the fake took for it (mapped, rounded); 0 */
    size_t alignment; /* bytes it was aligned to; 0 */
    int device;       /* -1: the host */
    int kind;         /* the fake's own kinds, 0..31 */
    void *extra;      /* the fake's own: a pool, an exporter's base */
    void *ctx;        /* the fake's own: the context it was made in */
} fake_mem;

typedef struct fake_memory {
    pthread_mutex_t lock;
    unsigned counted;  /* kinds (1 << kind) a device's capacity holds */
    size_t capacity;   /* bytes per device (set when the fake reads its knobs) */
    fake_mem *slot;    /* NULL until the first allocation */
    size_t cap, live;
    size_t used[FAKE_MEM_DEVICES];
    struct fake_memory *next_table; /* the registries with a table (fake_memory.c) */
} fake_memory;

#define FAKE_MEMORY_INIT(counted_kinds)                                        \
    {.lock = PTHREAD_MUTEX_INITIALIZER, .counted = (counted_kinds)}

enum { FAKE_MEM_OK = 0, FAKE_MEM_OVER_CAPACITY, FAKE_MEM_NO_ROOM };

/* Books `a` (its key not live yet): FAKE_MEM_OVER_CAPACITY when a counted
 * kind would pass its device's capacity, FAKE_MEM_NO_ROOM when the host
 * has no memory for the registry. */
FAKE_MEM_HIDDEN int fake_memory_track(fake_memory *m, const fake_mem *a);
/* Forgets the allocation at `key` if its kind is in `kinds` (1 << kind
 * bits), what it was to *out (may be NULL); 0 when there is none. */
FAKE_MEM_HIDDEN int fake_memory_untrack(fake_memory *m, uintptr_t key, unsigned kinds,
                                        fake_mem *out);
/* The allocation at exactly `key`; 0 when none. */
FAKE_MEM_HIDDEN int fake_memory_get(fake_memory *m, uintptr_t key, fake_mem *out);
/* The allocation whose [key, key + size) holds `addr`, its kind not in
 * `skip` (1 << kind bits: handles, reservations); 0 when none.  A scan:
 * for pointer queries, not for every call. */
FAKE_MEM_HIDDEN int fake_memory_containing(fake_memory *m, uintptr_t addr, unsigned skip,
                                           fake_mem *out);
/* The first allocation `match` says yes to; 0 when none. */
FAKE_MEM_HIDDEN int fake_memory_find(fake_memory *m, int (*match)(const fake_mem *, void *),
                                     void *arg, fake_mem *out);
/* Sets the `extra` of the allocation at `key`; 0 when none. */
FAKE_MEM_HIDDEN int fake_memory_set_extra(fake_memory *m, uintptr_t key, void *extra);
/* Moves `device`'s used bytes by `bytes` (a pool growing or shrinking):
 * FAKE_MEM_OVER_CAPACITY, and nothing moved, past the capacity. */
FAKE_MEM_HIDDEN int fake_memory_used_change(fake_memory *m, int device, long long bytes);
/* Live allocations; bytes `device` holds (0 for a device out of range). */
FAKE_MEM_HIDDEN long fake_memory_live(fake_memory *m);
FAKE_MEM_HIDDEN size_t fake_memory_used(fake_memory *m, int device);

/* The host blocks that stand for device memory, `bytes` (already rounded)
 * at `alignment`: those freed lately are kept for reuse by size and
 * alignment, so that a loop allocating and freeing one size
 * (bench/hook_overhead) costs the same every time, whatever glibc's free
 * would consolidate.  NULL when the host has no memory. */
FAKE_MEM_HIDDEN void *fake_block_get(size_t bytes, size_t alignment);
FAKE_MEM_HIDDEN void fake_block_put(void *p, size_t bytes, size_t alignment);

/* The calls so far of the function named `name`, among `n` names and
 * their counters; -1 for a name not among them.  The failures a test
 * injects, `spec` as FAKE_*_FAIL gives them ("name=code[,name=code]"):
 * codes[i] gets the code of names[i] (untouched for a name not given). */
FAKE_MEM_HIDDEN void fake_fail_codes(const char *spec, const char *const *names, int n,
                                     long long *codes);
FAKE_MEM_HIDDEN long fake_calls_of(const char *const *names, atomic_long *calls, int n,
                                   const char *name);

#endif
