/* tests/fakes/core/fake_pool.c: a fake pool's bytes (fake_pool.h).
 * Invariant: reserved = used + idle, and the device's used bytes hold the
 * pool's reserve.  Lock: the caller's. */
#include "fake_pool.h"

int fake_pool_bytes_take(fake_memory *m, fake_pool_bytes *p, int device, unsigned long long size)
{
    unsigned long long from_idle = size < p->idle ? size : p->idle;
    unsigned long long grow = size - from_idle;
    if (grow && fake_memory_used_change(m, device, (long long)grow) != FAKE_MEM_OK)
        return FAKE_MEM_OVER_CAPACITY;
    p->idle -= from_idle;
    p->reserved += grow;
    p->used += size;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (p->used > p->used_high)
        p->used_high = p->used;
    return FAKE_MEM_OK;
}

void fake_pool_bytes_back(fake_pool_bytes *p, unsigned long long size)
{
    p->used -= size;
    p->idle += size;
}

void fake_pool_bytes_keep(fake_memory *m, fake_pool_bytes *p, int device, unsigned long long keep)
{
    if (p->reserved <= keep)
        return;
    unsigned long long bytes = p->reserved - keep;
    if (bytes > p->idle)
        bytes = p->idle;
    p->idle -= bytes;
    p->reserved -= bytes;
    fake_memory_used_change(m, device, -(long long)bytes);
}
