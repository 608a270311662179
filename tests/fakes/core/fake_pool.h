/* tests/fakes/core/fake_pool.h: the bytes of a stream-ordered memory pool
 * as the fake vendor libraries model it (tests/fakes/cuda's cuMemPool*,
 * tests/fakes/hip's hipMemPool*), as both vendors document pools: an
 * allocation takes memory the pool holds idle first and grows the pool
 * (the device's used bytes, fake_memory.h) for the rest; a free gives the
 * memory back to the pool, which keeps it; a synchronization releases
 * what the pool holds beyond its release threshold, a trim what it holds
 * beyond the size asked.  The attributes (reserved and used bytes, their
 * high-water marks) are these fields.
 *
 * Lock: the caller's, the pool's own (each fake has one around its
 * pools); these functions take the registry's lock inside it. */
#ifndef TDM_FAKE_POOL_H
#define TDM_FAKE_POOL_H

#include "fake_memory.h"

typedef struct fake_pool_bytes {
    unsigned long long threshold;          /* the release threshold */
    unsigned long long reserved, used, idle; /* reserved = used + idle */
    unsigned long long reserved_high, used_high;
} fake_pool_bytes;

/* An allocation of `size` from the pool of `device`: FAKE_MEM_OK, or
 * FAKE_MEM_OVER_CAPACITY (nothing changed) when the device cannot grow it. */
FAKE_MEM_HIDDEN int fake_pool_bytes_take(fake_memory *m, fake_pool_bytes *p, int device,
                                   unsigned long long size);
/* `size` freed into the pool (or an allocation undone): idle again. */
FAKE_MEM_HIDDEN void fake_pool_bytes_back(fake_pool_bytes *p, unsigned long long size);
/* Releases idle memory to the device until the pool holds at most `keep`
 * (a trim; a synchronization keeps the threshold), or what is idle. */
FAKE_MEM_HIDDEN void fake_pool_bytes_keep(fake_memory *m, fake_pool_bytes *p, int device,
                                    unsigned long long keep);

#endif
