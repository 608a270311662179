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
    size_t slot_bytes = (size_t)capacity * sizeof(tdm__ring_slot);
    size_t bytes = sizeof(tdm__ring) + 64 + slot_bytes;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm__ring *r = mem;
    uintptr_t slots = ((uintptr_t)mem + sizeof(tdm__ring) + 63) & ~(uintptr_t)63;
    r->slots = (tdm__ring_slot *)slots;
    r->capacity = capacity;
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

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* How long a writer waits for an older writer still busy in its slot. */
#define TDM_RING_WAIT_SPINS 4096

void tdm__ring_push(tdm__ring *ring, const tdm_event *ev)
{
    uint64_t i = atomic_fetch_add_explicit(&ring->head, 1, memory_order_relaxed);
    tdm__ring_slot *slot = &ring->slots[i % ring->capacity];
    const uint64_t busy = 2 * i + 1, done = 2 * i + 2;
    uint64_t s = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    for (unsigned spins = 0;; spins++) {
        if (s >= busy || spins >= TDM_RING_WAIT_SPINS) {
            /* Lapped by a newer event, or an older writer is stuck. */
            atomic_fetch_add_explicit(&ring->lost, 1, memory_order_relaxed);
            return;
        }
        if (s & 1) { /* an older writer is still in this slot */
            cpu_relax();
            s = atomic_load_explicit(&slot->seq, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&slot->seq, &s, busy,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            break;
    }
    atomic_thread_fence(memory_order_release);
    uint64_t w[7];
    memcpy(w, ev, sizeof w);
    for (int k = 0; k < 7; k++)
        atomic_store_explicit(&slot->w[k], w[k], memory_order_relaxed);
    atomic_store_explicit(&slot->seq, done, memory_order_release);
}

size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t first = head > ring->capacity ? head - ring->capacity : 0;
    size_t n = 0;
    for (uint64_t i = first; i < head && n < max; i++) {
        tdm__ring_slot *slot = &ring->slots[i % ring->capacity];
        uint64_t want = 2 * i + 2;
        if (atomic_load_explicit(&slot->seq, memory_order_acquire) != want)
            continue;
        uint64_t w[7];
        for (int k = 0; k < 7; k++)
            w[k] = atomic_load_explicit(&slot->w[k], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&slot->seq, memory_order_relaxed) != want)
            continue;
        memcpy(&out[n++], w, sizeof w);
    }
    if (lost)
        *lost = head - n;
    return n;
}
