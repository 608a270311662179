/* snapshot/ring.c: the lock-free bounded event ring (see ring.h).
 *
 * The slot protocol is a per-slot seqlock whose sequence numbers are the
 * claim indices themselves.  Writer of event i into slot s:
 *   1. CAS s.seq from an even value older than 2i+2 to 2i+1 (busy);
 *   2. release fence, store the 7 payload words (relaxed atomics);
 *   3. store s.seq = 2i+2 (release).
 * If s.seq already says a newer event (>= 2i+2, or busy for a newer index)
 * the writer was lapped: its event is older than what the slot holds, so it
 * is dropped and counted.  If an older writer is still busy in the slot (the
 * ring wrapped around a preempted writer) the newer one waits a bounded
 * time, then gives up and counts.  The reader accepts slot s for event i only
 * if s.seq == 2i+2 before and after copying the payload.
 */
#include <string.h>
#include <sys/mman.h>

#include "ring.h"

_Static_assert(sizeof(tdm__ring_slot) == 64, "a ring slot is one cache line");

tdm_status tdm__ring_create(uint64_t capacity, tdm__ring **out)
{
    *out = NULL;
    if (capacity == 0 || capacity > (UINT64_C(1) << 34))
        return TDM_INVALID_ARGUMENT;
    uint64_t slots = 1;
    while (slots < capacity)
        slots <<= 1;
    size_t slot_bytes = (size_t)slots * sizeof(tdm__ring_slot);
    size_t bytes = sizeof(tdm__ring) + 64 + slot_bytes;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm__ring *r = mem;
    uintptr_t first = ((uintptr_t)mem + sizeof(tdm__ring) + 63) & ~(uintptr_t)63;
    r->slots = (tdm__ring_slot *)first;
    r->capacity = capacity;
    r->mask = slots - 1;
    r->map_bytes = bytes;
    atomic_init(&r->head, 0);
    atomic_init(&r->lost, 0);
    *out = r;
    return TDM_OK;
}

void tdm__ring_retire(tdm__ring *ring)
{
    if (!ring)
        return;
    /* Only the slots: the header (head, capacity) stays valid for late
     * writers, whose slot stores then land in fresh zero pages. */
    uintptr_t start = ((uintptr_t)ring->slots + 4095) & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)ring + ring->map_bytes) & ~(uintptr_t)4095;
    if (end > start)
        madvise((void *)start, end - start, MADV_DONTNEED);
}

void tdm__ring_destroy(tdm__ring *ring)
{
    if (ring)
        munmap(ring, ring->map_bytes);
}

size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t first = head > ring->capacity ? head - ring->capacity : 0;
    size_t n = 0;
    for (uint64_t i = first; i < head && n < max; i++) {
        tdm__ring_slot *slot = &ring->slots[i & ring->mask];
        uint64_t want = 2 * i + 2;
        if (atomic_load_explicit(&slot->seq, memory_order_acquire) != want)
            continue;
        uint64_t w[7];
        for (int k = 0; k < 7; k++)
            w[k] = atomic_load_explicit(&slot->w[k], TDM_SEQ_DATA_LOAD);
        TDM_SEQ_FENCE_ACQUIRE();
        if (atomic_load_explicit(&slot->seq, memory_order_relaxed) != want)
            continue;
        memcpy(&out[n++], w, sizeof w);
    }
    if (lost)
        *lost = head - n;
    return n;
}
