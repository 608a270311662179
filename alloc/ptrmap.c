/* alloc/ptrmap.c: the sharded pointer map (see ptrmap.h).
 *
 * Invariants: within a shard, every key sits at or after its home slot
 * with no empty slot between (linear probing, no tombstones: deletion
 * shifts later entries back); count <= cap / 2 after every insert.
 * Lock: each shard's lock (lock.h) guards its table, cap and count; every
 * operation takes it through the fork gate (ptrmap.h).
 */
#include "ptrmap.h"

#include <limits.h>
#include <sched.h>
#include <string.h>

#include "meta.h"

#define FIRST_CAP 256

static uint64_t mix(uint64_t x)
{
    /* Device pointers are 512-byte aligned: drop the dead low bits, then
     * mix so that both shard and slot bits are well spread. */
    x >>= 9;
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    x ^= x >> 33;
    return x;
}

static tdm__ptrmap_shard *shard_of(tdm__ptrmap *m, uint64_t h)
{
    return &m->shards[h & (TDM__PTRMAP_SHARDS - 1)];
}

static size_t home_of(const tdm__ptrmap_shard *s, uint64_t h)
{
    return (size_t)(h >> 6) & (s->cap - 1);
}

void tdm__ptrmap_init(tdm__ptrmap *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++)
        tdm__lock_init(&m->shards[i].lock);
}

void tdm__ptrmap_clear(tdm__ptrmap *m)
{
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++) {
        tdm__ptrmap_shard *s = &m->shards[i];
        tdm__lock_take(&s->lock);
        tdm__meta_unmap(s->slots, s->cap * sizeof(tdm__ptrmap_entry));
        s->slots = NULL;
        s->cap = 0;
        s->count = 0;
        tdm__lock_give(&s->lock);
    }
}

/* Doubles the table (or makes the first one).  Lock held. */
static int grow(tdm__ptrmap_shard *s)
{
    size_t ncap = s->cap ? s->cap * 2 : FIRST_CAP;
    tdm__ptrmap_entry *nslots = tdm__meta_map(ncap * sizeof *nslots);
    if (nslots == NULL)
        return 0;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slots[i].key == 0)
            continue;
        size_t j = (size_t)(mix(s->slots[i].key) >> 6) & (ncap - 1);
        while (nslots[j].key != 0)
            j = (j + 1) & (ncap - 1);
        nslots[j] = s->slots[i];
    }
    tdm__meta_unmap(s->slots, s->cap * sizeof *nslots);
    s->slots = nslots;
    s->cap = ncap;
    return 1;
}

/* Slot index of key, or SIZE_MAX.  Lock held. */
static size_t find(const tdm__ptrmap_shard *s, uint64_t key, uint64_t h)
{
    if (s->cap == 0)
        return SIZE_MAX;
    for (size_t i = home_of(s, h);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i].key == key)
            return i;
        if (s->slots[i].key == 0)
            return SIZE_MAX;
    }
}

tdm_status tdm__ptrmap_insert(tdm__ptrmap *m, uint64_t key,
                              const tdm__ptr_rec *rec)
{
    uint64_t h = mix(key);
    tdm__ptrmap_shard *s = shard_of(m, h);
    tdm__gate_lock(&s->lock);
    if ((s->count + 1) * 2 > s->cap && !grow(s)) {
        tdm__lock_give(&s->lock);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    size_t i = home_of(s, h);
    while (s->slots[i].key != 0) {
        if (s->slots[i].key == key) {
            tdm__lock_give(&s->lock);
            return TDM_INVALID_ARGUMENT;
        }
        i = (i + 1) & (s->cap - 1);
    }
    s->slots[i].key = key;
    s->slots[i].rec = *rec;
    s->count++;
    tdm__lock_give(&s->lock);
    return TDM_OK;
}

/* Removes `key` when its record is on `device` (any device when device
 * is INT_MIN); see tdm__ptrmap_remove_on. */
static tdm_status remove_if(tdm__ptrmap *m, uint64_t key, int device,
                            tdm__ptr_rec *out)
{
    if (key == 0)
        return TDM_UNKNOWN_POINTER;
    uint64_t h = mix(key);
    tdm__ptrmap_shard *s = shard_of(m, h);
    tdm__gate_lock(&s->lock);
    size_t i = find(s, key, h);
    if (i == SIZE_MAX) {
        tdm__lock_give(&s->lock);
        return TDM_UNKNOWN_POINTER;
    }
    if (out)
        *out = s->slots[i].rec;
    if (device != INT_MIN && s->slots[i].rec.device != device) {
        tdm__lock_give(&s->lock);
        return TDM_INVALID_ARGUMENT;
    }
    /* Backward shift: move every later entry of the run whose home is not
     * in (hole, j] into the hole, so lookups never stop early. */
    size_t mask = s->cap - 1, hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j].key != 0; j = (j + 1) & mask) {
        size_t home = (size_t)(mix(s->slots[j].key) >> 6) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole].key = 0;
    s->count--;
    tdm__lock_give(&s->lock);
    return TDM_OK;
}

tdm_status tdm__ptrmap_remove(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *out)
{
    return remove_if(m, key, INT_MIN, out);
}

tdm_status tdm__ptrmap_remove_on(tdm__ptrmap *m, uint64_t key, int device,
                                 tdm__ptr_rec *out)
{
    return remove_if(m, key, device, out);
}

tdm_status tdm__ptrmap_get(tdm__ptrmap *m, uint64_t key, tdm__ptr_rec *out)
{
    if (key == 0)
        return TDM_UNKNOWN_POINTER;
    uint64_t h = mix(key);
    tdm__ptrmap_shard *s = shard_of(m, h);
    tdm__gate_lock(&s->lock);
    size_t i = find(s, key, h);
    if (i != SIZE_MAX && out)
        *out = s->slots[i].rec;
    tdm__lock_give(&s->lock);
    return i == SIZE_MAX ? TDM_UNKNOWN_POINTER : TDM_OK;
}

tdm_status tdm__ptrmap_set_category(tdm__ptrmap *m, uint64_t key,
                                    uint8_t category)
{
    if (key == 0)
        return TDM_UNKNOWN_POINTER;
    uint64_t h = mix(key);
    tdm__ptrmap_shard *s = shard_of(m, h);
    tdm__gate_lock(&s->lock);
    size_t i = find(s, key, h);
    if (i != SIZE_MAX)
        s->slots[i].rec.category = category;
    tdm__lock_give(&s->lock);
    return i == SIZE_MAX ? TDM_UNKNOWN_POINTER : TDM_OK;
}

void tdm__ptrmap_each(tdm__ptrmap *m,
                      void (*fn)(void *ctx, uint64_t key,
                                 const tdm__ptr_rec *rec),
                      void *ctx)
{
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++) {
        tdm__ptrmap_shard *s = &m->shards[i];
        tdm__gate_lock(&s->lock);
        for (size_t j = 0; j < s->cap; j++)
            if (s->slots[j].key != 0)
                fn(ctx, s->slots[j].key, &s->slots[j].rec);
        tdm__lock_give(&s->lock);
    }
}

size_t tdm__ptrmap_count(tdm__ptrmap *m)
{
    size_t n = 0;
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++) {
        tdm__gate_lock(&m->shards[i].lock);
        n += m->shards[i].count;
        tdm__lock_give(&m->shards[i].lock);
    }
    return n;
}

/* ---- the fork gate ---------------------------------------------------------- */

_Atomic int tdm__fork_pending;

void tdm__fork_gate_slow(tdm__lock *m)
{
    while (atomic_load_explicit(&tdm__fork_pending, memory_order_acquire)) {
        tdm__lock_give(m);
        /* A fork takes a millisecond or so: yielding is enough. */
        while (atomic_load_explicit(&tdm__fork_pending, memory_order_acquire))
            sched_yield();
        tdm__lock_take(m);
    }
}

void tdm__ptrmap_fork_sweep(tdm__ptrmap *m)
{
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++) {
        tdm__lock_take(&m->shards[i].lock);
        tdm__lock_give(&m->shards[i].lock);
    }
}

void tdm__ptrmap_fork_child(tdm__ptrmap *m)
{
    for (int i = 0; i < TDM__PTRMAP_SHARDS; i++)
        tdm__lock_init(&m->shards[i].lock);
}
