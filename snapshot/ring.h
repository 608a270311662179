/* snapshot/ring.h: the bounded event ring.
 *
 * A fixed array of 64-byte slots in memory from mmap, cut into chunks of
 * `chunk` slots (64 in rings of 4096 events or more, fewer in small ones).
 * A writing thread holds one chunk at a time: it claims the next chunk
 * with one atomic add and one compare-and-swap on the chunk's state, then
 * writes the chunk's slots alone, with plain stores and no atomic
 * read-modify-write at all, and gives the chunk back when it is full (or
 * when the thread ends).  So an event costs a handful of stores, not two
 * contended atomic operations: the recorder's hot path.
 *
 * A chunk still held by a thread is never claimed again: a claim that
 * meets a held chunk (its owner went idle with room left, a lap ago) skips
 * it.  Only its owner ever writes a slot, so a slot can never be torn by
 * two writers.  The ring has room for capacity + 16 chunks (rounded up to
 * whole chunks), so that up to 16 threads idling with a part-used chunk
 * still leave room for the newest `capacity` events.  A thread that ends gives
 * its chunk back; the chunk's next turn starts at its first slot, so a
 * program whose threads each record a few events and end keeps fewer than
 * `capacity` (at worst one event per chunk).
 *
 * Each slot carries a sequence word (2*index+1 while being written,
 * 2*index+2 when complete; index = the event's number in claim order)
 * that lets the reader take a consistent copy while writers keep going.
 * The copy returns the newest `capacity` events in time order (events of
 * one thread keep their order: a thread's time stamps never go backwards
 * in the ring, see tdm__ring_push_words) and counts what it lost.
 *
 * What a copy keeps is a whole stretch of history: every event newer than
 * its oldest one.  Chunks are overwritten in claim order, not time order
 * (a chunk that a slow thread held for long holds events newer than the
 * chunks claimed after it), so a lap can take events from the middle of
 * the history; an allocation whose free was lost then looks live for
 * ever.  So each chunk remembers the newest time ever stored in it
 * (chunk_newest_ns, at give-back), a claim that takes a written chunk
 * raises the ring's `overwritten_ns` to it before writing, and a copy
 * keeps only events newer than `overwritten_ns` as read after its slots:
 * whatever was lost is older than all it keeps.
 *
 * That rule alone lets a chunk held over laps cost most of the history:
 * given back, it holds events as new as the give-back, and its next turn
 * in claim order may come a moment later, after which a copy keeps only
 * what is newer (with nine threads on two cores under a sanitizer, a dump
 * in nine kept under half the ring).  So each chunk also remembers the
 * claim count at its give-back (chunk_given_at), and a claim passes over
 * a chunk given back less than half a lap of claims ago, as over a held
 * one: it is overwritten a lap later, when half a lap of events or more
 * is newer than it.  A claim passes over IDLE_CHUNKS such chunks at most,
 * so the rule never makes an event lost for want of a chunk.
 */
#ifndef TDM_SNAPSHOT_RING_H
#define TDM_SNAPSHOT_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tidemark.h"
#include "event.h"
#include "ring_layout.h" /* tdm__ring, tdm__ring_slot: the memory */
#include "seqlock.h"

/* What this thread holds: events [next, end) of the ring numbered
 * `ring_id` (0: none), the first going to slot `at`, and the time of its
 * newest event there. */
typedef struct tdm__ring_writer {
    uint64_t ring_id;
    uint64_t next, end; /* event indices */
    tdm__ring_slot *at;
    uint64_t last_ns;
    uint64_t extra;     /* plain events beyond one per entry written in the
                         * held chunk (compound entries, event.h) */
    int busy;           /* inside a push (a signal handler's push waits) */
} tdm__ring_writer;
extern __thread tdm__ring_writer tdm__ring_me;

/* `hook` runs once, at the process's first event (in its thread, before
 * the event is stored), after the spill file got its name
 * (tdm__spill_publish).  NULL: none. */
void tdm__ring_set_first_event_hook(void (*hook)(void));

/* Maps a ring of `capacity` (>= 1) events: from the spill file when one
 * is open (spill.h) and has room, else anonymous memory. */
tdm_status tdm__ring_create(uint64_t capacity, tdm__ring **out);
/* Returns the slots' memory to the system but keeps the mapping, so a
 * writer that still holds the pointer writes into harmless zero pages. */
void tdm__ring_retire(tdm__ring *ring);
/* Unmaps the ring; only when no writer can hold it. */
void tdm__ring_destroy(tdm__ring *ring);

/* Claims a chunk for this thread (slow path of the push).  Returns 0 when
 * every chunk is held (the caller counts the event as lost). */
int tdm__ring_claim(tdm__ring *ring);
/* Gives back this thread's full chunk whose entries end before index
 * `end`, counting its plain events (the entries plus me->extra). */
void tdm__ring_give_back(tdm__ring *ring, uint64_t end);

/* Stores one event, given as its 7 words (tdm_event's layout; word 0 is
 * the time), in this thread's chunk.  A time stamp older than the
 * thread's previous event in this ring is raised to it, so each thread's
 * events stay in order when the copy sorts by time (an allocation's event
 * carries the time taken before its pointer-map insert, which may precede
 * an event the same call recorded meanwhile).  Inline: it is the
 * recorder's hot path. */
static inline void tdm__ring_push_words(tdm__ring *ring, uint64_t w0,
                                        uint64_t w1, uint64_t w2, uint64_t w3,
                                        uint64_t w4, uint64_t w5, uint64_t w6)
{
    tdm__ring_writer *me = &tdm__ring_me;
    /* Keeps the address in a register: otherwise the compiler recomputes
     * it after each signal fence below, and in a dynamically loadable
     * library each computation is a TLS-descriptor call. */
    __asm__("" : "+r"(me));
    /* A signal handler recording on a thread it interrupted inside a push
     * (or a claim) would find this thread's chunk half updated: its event
     * is dropped and counted instead. */
    /* Counts are in plain events: a compound entry stands for 2 or 3. */
    unsigned plain = tdm__action_expanded_count((unsigned)(w6 >> 48) & 0xff);
    if (__builtin_expect(me->busy, 0)) {
        atomic_fetch_add_explicit(&ring->refused, plain, memory_order_relaxed);
        return;
    }
    me->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(me->ring_id != ring->id || me->next == me->end, 0)) {
        if (!tdm__ring_claim(ring)) {
            atomic_fetch_add_explicit(&ring->refused, plain, memory_order_relaxed);
            atomic_signal_fence(memory_order_seq_cst);
            me->busy = 0;
            return;
        }
    }
    uint64_t i = me->next, end = me->end;
    tdm__ring_slot *slot = me->at;
    me->next = i + 1;
    me->at = slot + 1;
    if (__builtin_expect(w0 < me->last_ns, 0))
        w0 = me->last_ns;
    me->last_ns = w0;
    me->extra += plain - 1;
    atomic_store_explicit(&slot->seq, 2 * i + 1, memory_order_relaxed);
    TDM_SEQ_FENCE_RELEASE();
    atomic_store_explicit(&slot->w[0], w0, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[1], w1, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[2], w2, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[3], w3, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[4], w4, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[5], w5, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->w[6], w6, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&slot->seq, 2 * i + 2, memory_order_release);
    if (__builtin_expect(i + 1 == end, 0))
        tdm__ring_give_back(ring, end);
    atomic_signal_fence(memory_order_seq_cst);
    me->busy = 0;
}

static inline void tdm__ring_push(tdm__ring *ring, const tdm_event *ev)
{
    uint64_t w[7];
    memcpy(w, ev, sizeof w);
    tdm__ring_push_words(ring, w[0], w[1], w[2], w[3], w[4], w[5], w[6]);
}

/* Words 5 and 6 of a tdm_event (stack_id, phase / step, device, action,
 * category), built in registers: building the struct on the stack and
 * reading it back as words stalls on store forwarding. */
static inline uint64_t tdm__event_word5(uint32_t stack_id, uint32_t phase)
{
    return (uint64_t)stack_id | (uint64_t)phase << 32;
}
static inline uint64_t tdm__event_word6(uint32_t step, int16_t device,
                                        uint8_t action, uint8_t category)
{
    return (uint64_t)step | (uint64_t)(uint16_t)device << 32 |
           (uint64_t)action << 48 | (uint64_t)category << 56;
}

/* Chunks [0, this) are all a reader need look at: claim n takes chunk
 * n % chunks, so until the first lap is done the chunks past the claims
 * made were never written.  Reading them would cost a page fault each
 * (and a file's pages, for a ring in the spill file): a dump would cost
 * what max_entries allows, not what was recorded. */
static inline uint64_t tdm__ring_used_chunks(tdm__ring *ring)
{
    uint64_t claims = atomic_load_explicit(&ring->claims, memory_order_acquire);
    return claims < ring->chunks ? claims : ring->chunks;
}

/* Plain events stored in the ring so far (kept, overwritten or refused):
 * a compound entry counts as the 2 or 3 events a dump expands it into,
 * so that recorded - kept = dropped holds in files of every mode. */
uint64_t tdm__ring_events(tdm__ring *ring);

/* Copies the newest min(capacity, max) kept entries into out[0..), oldest
 * first (by time; events of one time stamp in claim order), none older
 * than an event lost (see above).  Returns how many were copied; *lost
 * (optional) gets every plain event stored but not copied (a compound
 * entry counts as its expansion): overwritten, refused, older than one
 * overwritten, or being rewritten at the time of the copy.  Allocates
 * its copy of the slots: not for the hot path. */
size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost);

/* One complete slot as read: its claim index and the event's words. */
typedef struct tdm__ring_entry {
    uint64_t index;
    uint64_t w[7];
} tdm__ring_entry;

/* Reads every complete slot of the used chunks (the first `room` slots
 * at most) into out[0..room), with `before` (a cut, ring_cut.h; NULL:
 * all) only the entries of index < before[chunk], and then sets
 * *horizon_ns to the ring's overwritten_ns: every entry lost before or
 * during the read is at least that old.  No lock, no allocation. */
size_t tdm__ring_read_entries(tdm__ring *ring, const uint64_t *before,
                              tdm__ring_entry *out, size_t room, uint64_t *horizon_ns);
/* The newest min(capacity, max) of entries[0..n) (as read above) newer
 * than horizon_ns, oldest first (by time; one time stamp in claim order):
 * tdm__ring_order_at(o, k) for k < o->count.  The kept entries are moved
 * to the front of `entries` first, in place.  One writer's entries are in
 * order there, or in order from where the ring last wrapped: they are
 * read in place, nothing sorted or allocated.  Entries of several writers
 * are sorted through an index (o->at), allocated; out of host memory
 * o->count is 0.  tdm__ring_order_free frees the index. */
typedef struct tdm__ring_order {
    const tdm__ring_entry *entries;
    size_t *at;    /* [count]: the places in order, or NULL: ... */
    size_t start;  /* ... entries[(start + k) mod kept] */
    size_t kept;   /* entries newer than the horizon */
    size_t count;  /* of them, the newest min(capacity, max) */
    uint64_t plain; /* the plain events those count entries stand for */
} tdm__ring_order;

void tdm__ring_entries_order(const tdm__ring *ring, tdm__ring_entry *entries, size_t n,
                             uint64_t horizon_ns, size_t max, tdm__ring_order *o);
void tdm__ring_order_free(tdm__ring_order *o);

static inline const tdm__ring_entry *tdm__ring_order_at(const tdm__ring_order *o, size_t k)
{
    if (o->at)
        return &o->entries[o->at[k]];
    size_t i = o->start + k;
    return &o->entries[i < o->kept ? i : i - o->kept];
}

/* In the child of fork(): the chunks that other threads held (they do
 * not exist there) are given back.  Every ring mapped from the parent's
 * spill file first becomes private memory (its header and chunk states
 * copied, its slots empty): the child must never write the parent's file. */
void tdm__ring_fork_child(tdm__ring *ring);

#endif
