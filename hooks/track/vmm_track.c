/* hooks/track/vmm_track.c: the virtual-memory handle and mapping
 * tracker of the CUDA and HIP hooks (vmm_track.h).
 *
 * Owns: each tracker's two tables (open addressing on the key, linear
 * probing, deletion by backward shift) and their mmap'd slots.
 * Invariants: a table's count is below half its capacity after every
 * insertion that could grow it; keys are never 0 (0 marks an empty slot).
 * Lock: t->lock around every table access; nothing else is called while
 * it is held but tdm__meta_map / tdm__meta_unmap (mmap, no loader lock).
 */
#include "vmm_track.h"

#include "meta.h"
#include "snap_model.h" /* tdm_import_kind */

#define FIRST_CAP ((size_t)1024) /* 32 KiB of slots */

static size_t home_of(const tdm__vmm_table *tb, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (tb->cap - 1);
}

/* The slot of key, or the empty one where it would go (cap > 0). */
static tdm__vmm_slot *find(const tdm__vmm_table *tb, uint64_t key)
{
    size_t i = home_of(tb, key);
    while (tb->slot[i].key != 0 && tb->slot[i].key != key)
        i = (i + 1) & (tb->cap - 1);
    return &tb->slot[i];
}

static tdm__vmm_slot *lookup(const tdm__vmm_table *tb, uint64_t key)
{
    if (key == 0 || tb->cap == 0)
        return NULL;
    tdm__vmm_slot *s = find(tb, key);
    return s->key == key ? s : NULL;
}

/* Doubles the table (rehashing every entry); 0 when the system refuses. */
static int grow(tdm__vmm_table *tb)
{
    size_t cap = tb->cap ? 2 * tb->cap : FIRST_CAP;
    tdm__vmm_slot *slot = tdm__meta_map(cap * sizeof *slot);
    if (slot == NULL)
        return 0;
    tdm__vmm_table next = {.slot = slot, .cap = cap, .count = tb->count};
    for (size_t i = 0; i < tb->cap; i++)
        if (tb->slot[i].key != 0)
            *find(&next, tb->slot[i].key) = tb->slot[i];
    tdm__meta_unmap(tb->slot, tb->cap * sizeof *tb->slot);
    *tb = next;
    return 1;
}

/* The entry of key, made (zeroed) when absent; NULL only when the table
 * is full and cannot grow. */
static tdm__vmm_slot *put(tdm__vmm_table *tb, uint64_t key)
{
    if (key == 0)
        return NULL;
    tdm__vmm_slot *s = tb->cap ? find(tb, key) : NULL;
    if (s != NULL && s->key == key)
        return s;
    if (2 * (tb->count + 1) > tb->cap) {
        /* A refused growth still leaves a usable table until one slot is left. */
        if (!grow(tb) && (tb->cap == 0 || tb->count + 2 > tb->cap))
            return NULL;
        s = find(tb, key);
    }
    *s = (tdm__vmm_slot){.key = key};
    tb->count++;
    return s;
}

static void erase(tdm__vmm_table *tb, tdm__vmm_slot *s)
{
    size_t mask = tb->cap - 1, hole = (size_t)(s - tb->slot);
    for (size_t j = (hole + 1) & mask; tb->slot[j].key != 0; j = (j + 1) & mask) {
        size_t home = home_of(tb, tb->slot[j].key);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            tb->slot[hole] = tb->slot[j];
            hole = j;
        }
    }
    tb->slot[hole].key = 0;
    tb->count--;
}

void tdm__vmm_created(tdm__vmm_track *t, uint64_t handle, int device, int origin)
{
    pthread_mutex_lock(&t->lock);
    tdm__vmm_slot *s = put(&t->handles, handle);
    if (s != NULL) {
        s->device = device;
        s->origin = origin;
        s->maps = 0;
    }
    pthread_mutex_unlock(&t->lock);
}

void tdm__vmm_released(tdm__vmm_track *t, uint64_t handle)
{
    pthread_mutex_lock(&t->lock);
    tdm__vmm_slot *s = lookup(&t->handles, handle);
    if (s != NULL)
        erase(&t->handles, s);
    pthread_mutex_unlock(&t->lock);
}

int tdm__vmm_device(tdm__vmm_track *t, uint64_t handle)
{
    pthread_mutex_lock(&t->lock);
    tdm__vmm_slot *s = lookup(&t->handles, handle);
    int device = s != NULL ? s->device : -2;
    pthread_mutex_unlock(&t->lock);
    return device;
}

/* A known handle's booking (t->lock held): its mappings before this one. */
static int book_known(tdm__vmm_slot *s, tdm__vmm_booking *b)
{
    b->device = s->device;
    b->kind = s->origin == TDM_VMM_OWN && s->maps == 0 ? TDM_VMM_OWN
              : s->origin == TDM_VMM_OWN               ? TDM_IMPORT_PEER_MAPPING
                                                       : s->origin;
    s->maps++;
    return 1;
}

tdm__vmm_booking tdm__vmm_mapped(tdm__vmm_track *t, uint64_t handle, uint64_t va)
{
    tdm__vmm_booking b = {.device = -1, .kind = TDM_VMM_OWN};
    pthread_mutex_lock(&t->lock);
    tdm__vmm_slot *s = lookup(&t->handles, handle);
    int known = s != NULL && book_known(s, &b);
    tdm__vmm_slot *m = put(&t->mappings, va);
    if (m != NULL)
        m->value = handle;
    pthread_mutex_unlock(&t->lock);
    if (known)
        return b;
    /* Made before tidemark was there: the vendor says where, with no lock
     * held; from now on it counts as the process's own, once. */
    int device = t->ops && t->ops->unseen_device ? t->ops->unseen_device(handle) : -1;
    pthread_mutex_lock(&t->lock);
    s = lookup(&t->handles, handle);
    if (s != NULL) { /* another thread got there meanwhile */
        book_known(s, &b);
    } else {
        b = (tdm__vmm_booking){.device = device, .kind = TDM_VMM_OWN};
        if ((s = put(&t->handles, handle)) != NULL)
            *s = (tdm__vmm_slot){.key = handle, .device = device, .origin = TDM_VMM_OWN,
                                 .maps = 1};
    }
    pthread_mutex_unlock(&t->lock);
    return b;
}

void tdm__vmm_unmapped(tdm__vmm_track *t, uint64_t va)
{
    pthread_mutex_lock(&t->lock);
    tdm__vmm_slot *m = lookup(&t->mappings, va);
    if (m != NULL) {
        tdm__vmm_slot *s = lookup(&t->handles, m->value);
        if (s != NULL && s->maps > 0)
            s->maps--;
        erase(&t->mappings, m);
    }
    pthread_mutex_unlock(&t->lock);
}

void tdm__vmm_counts(tdm__vmm_track *t, size_t *handles, size_t *mappings)
{
    pthread_mutex_lock(&t->lock);
    *handles = t->handles.count;
    *mappings = t->mappings.count;
    pthread_mutex_unlock(&t->lock);
}
