/* snapshot/ring.c: the bounded event ring (see ring.h).
 *
 * Chunk protocol.  chunk_state[c] = (n << 1) | held, where n is the claim
 * number that last took chunk c; claim n covers event indices
 * [n * chunk, (n + 1) * chunk) and chunk n % chunks.
 *   claim:     n = claims++ (atomic add); CAS chunk_state from "not held"
 *              to (n << 1) | 1; a held chunk is skipped (next n), and so
 *              is one given back late (less than half a lap of claims
 *              before n), up to IDLE_CHUNKS of them per claim (ring.h).
 *   write:     the owner alone: slot seq = 2i+1, release fence, the 7 data
 *              words, seq = 2i+2 (release).  A classic single-writer
 *              seqlock per slot.
 *   give back: given_back += plain events written; chunk_newest_ns
 *              raised to the owner's newest time; chunk_given_at = the
 *              claims so far; chunk_state = n << 1 (release).  When the chunk is full, when its thread ends
 *              (a thread-specific destructor), or in a forked child for
 *              the threads that did not come along.
 *   overwrite: a claim that wins a chunk ever written raises
 *              overwritten_ns to its chunk_newest_ns, then a release
 *              fence, before its first slot store: a reader that sees a
 *              slot rewritten (its seq changed) then sees the raise.
 * The reader accepts slot s for event i only if s.seq == 2i+2 before and
 * after copying the payload.
 *
 * Lock: `live_lock` guards the list of rings not destroyed, which a
 * thread's destructor consults before touching the ring it wrote to.
 * Nothing on the push path locks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ring.h"
#include "ring_cut.h"
#include "spill.h"

_Static_assert(sizeof(tdm__ring_slot) == 64, "a ring slot is one cache line");

__thread tdm__ring_writer tdm__ring_me;

/* Chunks a thread may keep part-used while idle before the ring holds
 * fewer than `capacity` events. */
#define IDLE_CHUNKS 16

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static tdm__ring *live_rings;
static uint64_t last_ring_id;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static _Atomic int exit_key_ok; /* the key exists and is not deleted */

/* Gives back chunk [end - chunk, end) of `ring` with `written` events,
 * the newest of them (and of any older ones left in its slots) no newer
 * than newest_ns.  Only the chunk's holder writes its chunk_newest_ns. */
static void give_back_chunk(tdm__ring *ring, uint64_t end, uint64_t written,
                            uint64_t newest_ns)
{
    uint64_t n = (end >> ring->chunk_shift) - 1, c = n % ring->chunks;
    atomic_fetch_add_explicit(&ring->given_back, written, memory_order_relaxed);
    atomic_store_explicit(&ring->chunk_given_at[c],
                          atomic_load_explicit(&ring->claims, memory_order_relaxed),
                          memory_order_relaxed);
    if (newest_ns > atomic_load_explicit(&ring->chunk_newest_ns[c], memory_order_relaxed))
        atomic_store_explicit(&ring->chunk_newest_ns[c], newest_ns, memory_order_relaxed);
    atomic_store_explicit(&ring->chunk_state[c], n << 1, memory_order_release);
}

/* A thread ends: its chunk goes back, if its ring still exists. */
static void thread_ends(void *unused)
{
    (void)unused;
    tdm__ring_writer *me = &tdm__ring_me;
    if (me->ring_id == 0 || me->next == me->end)
        return;
    pthread_mutex_lock(&live_lock);
    for (tdm__ring *r = live_rings; r; r = r->next_live) {
        if (r->id == me->ring_id) {
            give_back_chunk(r, me->end, me->next - (me->end - r->chunk) + me->extra,
                            me->last_ns);
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
    me->ring_id = 0;
    me->extra = 0;
}

static void make_exit_key(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_ends) == 0;
}

/* The library is unloaded (dlclose by a program that recorded through the
 * API) or the process exits: a thread that ends afterwards must not call
 * thread_ends, which is then unmapped.  Its chunk stays held: the ring is
 * gone with the library anyway. */
__attribute__((destructor)) static void forget_exit_key(void)
{
    if (atomic_exchange(&exit_key_ok, 0))
        pthread_key_delete(exit_key);
}

tdm_status tdm__ring_create(uint64_t capacity, tdm__ring **out)
{
    *out = NULL;
    if (capacity == 0 || capacity > (UINT64_C(1) << 34))
        return TDM_INVALID_ARGUMENT;
    /* Chunks of up to 64 slots, and at least 64 chunks' worth of
     * capacity per chunk size (a small ring gets small chunks). */
    uint64_t chunk = 1;
    unsigned shift = 0;
    while (chunk < 64 && chunk * 2 * 64 <= capacity) {
        chunk *= 2;
        shift++;
    }
    uint64_t chunks = (capacity + chunk - 1) / chunk + IDLE_CHUNKS;
    uint64_t slots = chunks * chunk;
    size_t head = (sizeof(tdm__ring) + 63) & ~(size_t)63;
    /* chunk_state, chunk_newest_ns, then chunk_given_at. */
    size_t state_bytes = ((size_t)chunks * 3 * sizeof(uint64_t) + 63) & ~(size_t)63;
    size_t bytes = head + state_bytes + (size_t)slots * sizeof(tdm__ring_slot);
    bytes = (bytes + 4095) & ~(size_t)4095;
    /* In a spill file, the header and chunk states are reserved now and
     * the slots as chunks are first claimed: a store into a page the file
     * system has no room for would raise SIGBUS, and reserving the whole
     * ring at once would commit its memory (tmpfs) before any event. */
    uint64_t spill_offset = 0;
    void *mem = tdm__spill_map(bytes, head + state_bytes, bytes, &spill_offset);
    if (!mem) {
        spill_offset = 0;
        mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (mem == MAP_FAILED)
        return TDM_HOST_OUT_OF_MEMORY;
    pthread_once(&key_once, make_exit_key);
    tdm__ring *r = mem;
    r->chunk_state = (_Atomic uint64_t *)((char *)mem + head);
    r->chunk_newest_ns = r->chunk_state + chunks;
    r->chunk_given_at = r->chunk_newest_ns + chunks;
    r->slots = (tdm__ring_slot *)((char *)mem + head + state_bytes);
    r->capacity = capacity;
    r->chunk = chunk;
    r->chunk_shift = shift;
    r->chunks = chunks;
    r->map_bytes = bytes;
    r->spill_offset = spill_offset;
    atomic_init(&r->spill_reserved, head + state_bytes);
    r->spill_ahead = spill_offset ? tdm__spill_ahead_add(spill_offset, &r->spill_reserved, bytes)
                                  : -1;
    atomic_init(&r->populated, 0);
    atomic_init(&r->claims, 0);
    atomic_init(&r->given_back, 0);
    atomic_init(&r->refused, 0);
    atomic_init(&r->overwritten_ns, 0);
    pthread_mutex_lock(&live_lock);
    r->id = ++last_ring_id;
    r->next_live = live_rings;
    live_rings = r;
    pthread_mutex_unlock(&live_lock);
    if (spill_offset)
        tdm__spill_publish_ring(spill_offset, spill_offset + head + state_bytes,
                                capacity, slots);
    *out = r;
    return TDM_OK;
}

void tdm__ring_retire(tdm__ring *ring)
{
    if (!ring)
        return;
    /* Only the slots: the header and chunk states stay valid for late
     * writers, whose slot stores then land in fresh zero pages. */
    uintptr_t start = ((uintptr_t)ring->slots + 4095) & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)ring + ring->map_bytes) & ~(uintptr_t)4095;
    atomic_store_explicit(&ring->populated, ring->map_bytes, memory_order_relaxed);
    if (ring->spill_offset) {
        tdm__spill_ahead_remove(ring->spill_ahead);
        ring->spill_ahead = -1;
        tdm__spill_unpublish_ring(ring->spill_offset);
    }
    if (end > start && ring->spill_offset)
        tdm__spill_discard((void *)start, end - start);
    else if (end > start)
        madvise((void *)start, end - start, MADV_DONTNEED);
}

void tdm__ring_destroy(tdm__ring *ring)
{
    if (!ring)
        return;
    pthread_mutex_lock(&live_lock);
    for (tdm__ring **p = &live_rings; *p; p = &(*p)->next_live) {
        if (*p == ring) {
            *p = ring->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
    if (tdm__ring_me.ring_id == ring->id)
        tdm__ring_me.ring_id = 0;
    if (ring->spill_offset)
        tdm__spill_ahead_remove(ring->spill_ahead);
    munmap(ring, ring->map_bytes);
}

/* Whether chunk c's slots are reserved in the spill file (reserving the
 * next 1 MiB or more when they are not).  Until the ring has wrapped the
 * spill is asked to reserve ahead (spill_grow.c), so with a watcher this
 * rarely reserves itself. */
static int spill_room(tdm__ring *ring, uint64_t c)
{
    uint64_t end = (uint64_t)((char *)&ring->slots[(c + 1) << ring->chunk_shift] -
                              (char *)ring);
    uint64_t have = atomic_load_explicit(&ring->spill_reserved, memory_order_acquire);
    if (have < ring->map_bytes && ring->spill_ahead >= 0)
        tdm__spill_ahead_ask(ring->spill_ahead, end);
    if (end <= have)
        return 1;
    return tdm__spill_grow(ring->spill_offset, &ring->spill_reserved, end, ring->map_bytes);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
/* The ring's pages are put in place this many bytes at a time, a step
 * ahead of the chunks claimed on its first lap. */
#define POPULATE_STEP ((uint64_t)256 << 10)

/* Puts the pages of the ring's next step in place before its writers
 * reach them: one madvise(MADV_POPULATE_WRITE) per 256 KiB instead of a
 * page fault per 4 KiB, which in the first lap of a ring cost every 64th
 * event a fault.  Within what the spill file has reserved; without the
 * call (Linux before 5.14) or after any failure the pages come by faults
 * as before.  errno is the caller's again afterwards (this runs inside the
 * program's allocation calls). */
static __attribute__((noinline)) void populate_ahead(tdm__ring *ring, uint64_t c)
{
    uint64_t need = (uint64_t)((char *)&ring->slots[(c + 1) << ring->chunk_shift] -
                               (char *)ring) + POPULATE_STEP;
    uint64_t have = atomic_load_explicit(&ring->populated, memory_order_relaxed);
    int saved = errno;
    while (have < need && have < ring->map_bytes) {
        uint64_t to = have + POPULATE_STEP < ring->map_bytes ? have + POPULATE_STEP
                                                             : ring->map_bytes;
        if (ring->spill_offset &&
            to > atomic_load_explicit(&ring->spill_reserved, memory_order_acquire))
            break; /* not reserved in the file yet: faults, as ever */
        if (!atomic_compare_exchange_weak_explicit(&ring->populated, &have, to,
                                                   memory_order_relaxed, memory_order_relaxed))
            continue; /* another writer took this step; `have` is reread */
        if (madvise((char *)ring + have, to - have, MADV_POPULATE_WRITE) != 0) {
            atomic_store_explicit(&ring->populated, ring->map_bytes, memory_order_relaxed);
            break;
        }
        have = to;
    }
    errno = saved;
}

/* The process's first event: until then it has recorded nothing, and a
 * process that never records (a shell, a helper under the preload) must
 * leave no trace.  The spill file gets its name now (spill.h), then the
 * hook of the layer above runs (autoinit: SIGINT/SIGTERM).  Once, in the
 * thread of that event, before it holds a chunk. */
static _Atomic int first_claimed;
static void (*_Atomic first_event_hook)(void);

void tdm__ring_set_first_event_hook(void (*hook)(void))
{
    atomic_store(&first_event_hook, hook);
}

static __attribute__((noinline)) void first_claim(void)
{
    if (atomic_exchange(&first_claimed, 1))
        return;
    tdm__spill_publish();
    void (*hook)(void) = atomic_load(&first_event_hook);
    if (hook)
        hook();
}

/* The events of a chunk about to be overwritten were all stored by
 * gone_ns: no event newer than that may be lost any more (ring.h). */
static __attribute__((noinline)) void raise_overwritten(tdm__ring *ring, uint64_t gone_ns)
{
    uint64_t h = atomic_load_explicit(&ring->overwritten_ns, memory_order_relaxed);
    while (h < gone_ns &&
           !atomic_compare_exchange_weak_explicit(&ring->overwritten_ns, &h, gone_ns,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
    /* Before any slot store of this claim (see the protocol above). */
    atomic_thread_fence(memory_order_release);
}

int tdm__ring_claim(tdm__ring *ring)
{
    tdm__ring_writer *me = &tdm__ring_me;
    if (me->ring_id == ring->id && me->next != me->end)
        return 1;
    if (__builtin_expect(!atomic_load_explicit(&first_claimed, memory_order_relaxed), 0))
        first_claim();
    if (me->ring_id == 0 && exit_key_ok)
        pthread_setspecific(exit_key, me); /* any non-NULL value */
    /* Each chunk is looked at about once before giving up (a chunk
     * passed over as given back late is looked at again, later). */
    unsigned late_passed = 0;
    for (uint64_t tries = 0; tries < ring->chunks + late_passed; tries++) {
        uint64_t n = atomic_fetch_add_explicit(&ring->claims, 1,
                                               memory_order_relaxed);
        uint64_t c = n % ring->chunks;
        _Atomic uint64_t *state = &ring->chunk_state[c];
        uint64_t s = atomic_load_explicit(state, memory_order_relaxed);
        if (s & 1)
            continue; /* held by a thread that has not filled it */
        uint64_t given_at = atomic_load_explicit(&ring->chunk_given_at[c],
                                                 memory_order_relaxed);
        /* (given_at is 0 only for a chunk never given back: every give-back
         * follows a claim.) */
        if (late_passed < IDLE_CHUNKS && given_at != 0 && n - given_at < ring->chunks / 2) {
            late_passed++;
            continue; /* given back late: its events are among the newest */
        }
        if (!atomic_compare_exchange_strong_explicit(
                state, &s, n << 1 | 1, memory_order_acquire,
                memory_order_relaxed))
            continue;
        if (__builtin_expect(ring->spill_offset != 0, 0) && !spill_room(ring, c)) {
            /* No room in the file: the chunk goes back unwritten and the
             * event is counted as lost, never a SIGBUS. */
            atomic_store_explicit(state, n << 1, memory_order_release);
            return 0;
        }
        uint64_t gone_ns = atomic_load_explicit(&ring->chunk_newest_ns[c], memory_order_relaxed);
        if (gone_ns)
            raise_overwritten(ring, gone_ns);
        if (__builtin_expect(atomic_load_explicit(&ring->populated, memory_order_relaxed) <
                                 ring->map_bytes,
                             0))
            populate_ahead(ring, c);
        if (me->ring_id != ring->id)
            me->last_ns = 0;
        me->ring_id = ring->id;
        me->extra = 0;
        me->next = n << ring->chunk_shift;
        me->end = me->next + ring->chunk;
        me->at = &ring->slots[c << ring->chunk_shift];
        return 1;
    }
    return 0;
}

void tdm__ring_give_back(tdm__ring *ring, uint64_t end)
{
    give_back_chunk(ring, end, ring->chunk + tdm__ring_me.extra, tdm__ring_me.last_ns);
    tdm__ring_me.extra = 0;
}

/* Plain events written so far in held chunk c under claim n (a compound
 * entry counts as its expansion; its action is in word 6, bits 48-55);
 * *newest_ns (optional) gets the newest time in the chunk's slots. */
static uint64_t held_written(tdm__ring *ring, uint64_t c, uint64_t n, uint64_t *newest_ns)
{
    uint64_t first = n << ring->chunk_shift, count = 0;
    for (uint64_t k = 0; k < ring->chunk; k++) {
        tdm__ring_slot *slot = &ring->slots[(c << ring->chunk_shift) + k];
        uint64_t s = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (s >= 2 * first + 2 && (s & 1) == 0) {
            uint64_t w6 = atomic_load_explicit(&slot->w[6], memory_order_relaxed);
            count += tdm__action_expanded_count((unsigned)(w6 >> 48) & 0xff);
        }
        uint64_t t = atomic_load_explicit(&slot->w[0], memory_order_relaxed);
        if (newest_ns && s && t > *newest_ns)
            *newest_ns = t;
    }
    return count;
}

uint64_t tdm__ring_events(tdm__ring *ring)
{
    uint64_t total = atomic_load_explicit(&ring->given_back, memory_order_acquire) +
                     atomic_load_explicit(&ring->refused, memory_order_relaxed);
    uint64_t used = tdm__ring_used_chunks(ring);
    for (uint64_t c = 0; c < used; c++) {
        uint64_t s = atomic_load_explicit(&ring->chunk_state[c], memory_order_acquire);
        if (s & 1)
            total += held_written(ring, c, s >> 1, NULL);
    }
    return total;
}

/* Turns a ring mapped from the parent's spill file into private memory at
 * the same address (threads' writer state points into it): the header and
 * chunk states are kept, the slots start empty. */
static void detach_from_spill(tdm__ring *r)
{
    size_t keep = (size_t)((char *)r->slots - (char *)r);
    void *copy = mmap(NULL, keep, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return;
    memcpy(copy, r, keep);
    size_t bytes = r->map_bytes;
    void *m = mmap(r, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (m != MAP_FAILED) {
        memcpy(r, copy, keep);
        r->spill_offset = 0;
        r->spill_ahead = -1;
    }
    munmap(copy, keep);
}

void tdm__ring_fork_child(tdm__ring *ring)
{
    tdm__spill_fork_child();
    /* The only thread: no lock is held by anyone else. */
    for (tdm__ring *r = live_rings; r; r = r->next_live)
        if (r->spill_offset)
            detach_from_spill(r);
    if (!ring)
        return;
    tdm__ring_writer *me = &tdm__ring_me;
    uint64_t mine = UINT64_MAX;
    if (me->ring_id == ring->id && me->next != me->end)
        mine = ((me->end >> ring->chunk_shift) - 1) % ring->chunks;
    uint64_t used = tdm__ring_used_chunks(ring);
    for (uint64_t c = 0; c < used; c++) {
        uint64_t s = atomic_load_explicit(&ring->chunk_state[c], memory_order_relaxed);
        if ((s & 1) && c != mine) {
            uint64_t n = s >> 1, newest = 0;
            uint64_t written = held_written(ring, c, n, &newest);
            give_back_chunk(ring, (n + 1) << ring->chunk_shift, written, newest);
        }
    }
}

/* One kept entry, for the sort: its time, claim index and place. */
typedef struct ring_key {
    uint64_t time_ns;
    uint64_t index;
    uint64_t at;
} ring_key;

static inline int key_before(const ring_key *x, const ring_key *y)
{
    return x->time_ns < y->time_ns ||
           (x->time_ns == y->time_ns && x->index < y->index);
}

/* Sorts keys[0..n) by (time, index).  A natural merge sort: the slots
 * come in long ordered runs (a chunk holds one thread's events in order,
 * and one thread's chunks follow each other), so a lone writer's ring
 * sorts in one or two passes.  Returns the sorted array: keys or tmp
 * (n each); NULL when out of memory for the run list. */
static ring_key *sort_keys(ring_key *keys, ring_key *tmp, size_t n)
{
    size_t *runs = malloc((n + 1) * sizeof *runs); /* run starts, then n */
    if (!runs)
        return NULL;
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || key_before(&keys[i], &keys[i - 1]))
            runs[r++] = i;
    runs[r] = n;
    ring_key *src = keys, *dst = tmp;
    while (r > 1) {
        size_t out = 0;
        for (size_t k = 0; k < r; k += 2) {
            size_t a = runs[k], mid = runs[k + 1];
            size_t end = k + 2 <= r ? runs[k + 2] : mid;
            size_t b = mid, o = a;
            while (a < mid && b < end)
                dst[o++] = key_before(&src[b], &src[a]) ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < end)
                dst[o++] = src[b++];
            runs[out++] = runs[k];
        }
        runs[out] = n;
        r = out;
        ring_key *t = src;
        src = dst;
        dst = t;
    }
    free(runs);
    return src;
}

/* Reads slot `s` consistently into e: 1, or 0 when it holds no complete
 * event. */
static int read_slot(tdm__ring_slot *s, tdm__ring_entry *e)
{
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq == 0 || (seq & 1))
        return 0;
    for (int k = 0; k < 7; k++)
        e->w[k] = atomic_load_explicit(&s->w[k], TDM_SEQ_DATA_LOAD);
    TDM_SEQ_FENCE_ACQUIRE();
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) != seq)
        return 0;
    e->index = seq / 2 - 1;
    return 1;
}

size_t tdm__ring_read_entries(tdm__ring *ring, const uint64_t *before,
                              tdm__ring_entry *out, size_t room, uint64_t *horizon_ns)
{
    uint64_t slots = tdm__ring_used_chunks(ring) << ring->chunk_shift;
    if (slots > room)
        slots = room; /* chunks first claimed since `room` was sized: later */
    size_t n = 0;
    for (uint64_t p = 0; p < slots; p++)
        if (read_slot(&ring->slots[p], &out[n]) &&
            (!before || out[n].index < before[p >> ring->chunk_shift]))
            n++;
    /* After the slots: a slot seen rewritten was preceded by its raise. */
    *horizon_ns = atomic_load_explicit(&ring->overwritten_ns, memory_order_acquire);
    return n;
}

/* The plain events entry e stands for (its action: w[6]'s byte 6). */
static inline uint64_t entry_plain(const tdm__ring_entry *e)
{
    return tdm__action_expanded_count((unsigned)(e->w[6] >> 48) & 0xff);
}

static inline int entry_before(const tdm__ring_entry *x, const tdm__ring_entry *y)
{
    return x->w[0] < y->w[0] || (x->w[0] == y->w[0] && x->index < y->index);
}

void tdm__ring_entries_order(const tdm__ring *ring, tdm__ring_entry *entries, size_t n,
                             uint64_t horizon_ns, size_t max, tdm__ring_order *o)
{
    *o = (tdm__ring_order){.entries = entries};
    /* The kept entries to the front, counting where the order descends. */
    size_t kept = 0, descents = 0, descent_at = 0;
    uint64_t plain = 0;
    for (size_t i = 0; i < n; i++) {
        if (entries[i].w[0] <= horizon_ns)
            continue;
        if (kept != i)
            entries[kept] = entries[i];
        plain += entry_plain(&entries[kept]);
        if (kept && entry_before(&entries[kept], &entries[kept - 1])) {
            descents++;
            descent_at = kept;
        }
        kept++;
    }
    size_t want = max < ring->capacity ? max : (size_t)ring->capacity;
    size_t first = kept > want ? kept - want : 0;
    o->kept = kept;
    o->count = kept - first;
    o->plain = plain;
    /* One writer's ring is in order, or in order from where it last
     * wrapped (its newest chunks in the first slots): read in place. */
    if (descents == 0 ||
        (descents == 1 && entry_before(&entries[kept - 1], &entries[0]))) {
        size_t oldest = descents ? descent_at : 0;
        for (size_t k = 0; k < first; k++) /* the oldest, left out */
            o->plain -= entry_plain(&entries[(oldest + k) % kept]);
        o->start = (oldest + first) % (kept ? kept : 1);
        return;
    }
    /* Several writers' chunks interleave: sorted through an index. */
    ring_key *keys = malloc(kept * sizeof *keys);
    ring_key *tmp = malloc(kept * sizeof *tmp);
    ring_key *sorted = NULL;
    if (keys && tmp) {
        for (size_t i = 0; i < kept; i++)
            keys[i] = (ring_key){entries[i].w[0], entries[i].index, i};
        sorted = sort_keys(keys, tmp, kept);
    }
    o->at = sorted ? malloc((o->count ? o->count : 1) * sizeof *o->at) : NULL;
    if (o->at) {
        for (size_t k = 0; k < first; k++)
            o->plain -= entry_plain(&entries[sorted[k].at]);
        for (size_t k = 0; k < o->count; k++)
            o->at[k] = (size_t)sorted[first + k].at;
    } else {
        o->count = 0; /* out of host memory: nothing copied */
        o->plain = 0;
    }
    free(keys);
    free(tmp);
}

void tdm__ring_order_free(tdm__ring_order *o)
{
    free(o->at);
    o->at = NULL;
}

size_t tdm__ring_copy(tdm__ring *ring, tdm_event *out, size_t max,
                      uint64_t *lost)
{
    uint64_t stored = tdm__ring_events(ring), copied_plain = 0, horizon = 0;
    uint64_t slots = tdm__ring_used_chunks(ring) << ring->chunk_shift;
    tdm__ring_entry *entries = malloc((size_t)(slots ? slots : 1) * sizeof *entries);
    size_t copied = 0;
    if (entries) {
        size_t n = tdm__ring_read_entries(ring, NULL, entries, (size_t)slots, &horizon);
        tdm__ring_order o;
        tdm__ring_entries_order(ring, entries, n, horizon, max, &o);
        for (size_t k = 0; k < o.count; k++)
            memcpy(&out[copied++], tdm__ring_order_at(&o, k)->w, sizeof entries[0].w);
        copied_plain = o.plain;
        tdm__ring_order_free(&o);
        free(entries);
    }
    /* Out of host memory, nothing is copied and all is counted lost. */
    if (lost)
        *lost = stored > copied_plain ? stored - copied_plain : 0;
    return copied;
}
