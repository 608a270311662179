/* tests/fakes/core/fake_memory.c: the fakes' shared device-memory
 * bookkeeping (fake_memory.h).  Invariants: used[d] is the sum of the
 * sizes of the live allocations of a counted kind on device d, plus what
 * fake_memory_used_change moved; every live key is in the probe run that
 * starts at its home slot.  Lock: the registry's mutex around its table
 * and counts; reuse_lock around the block cache. */
#include "fake_memory.h"

#include <stdlib.h>
#include <string.h>

static size_t home(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

static int counts(const fake_memory *m, int kind, int device)
{
    return device >= 0 && device < FAKE_MEM_DEVICES && (m->counted & (1u << kind));
}

/* Puts `a` in the first free slot of its probe run (lock held). */
static void place(fake_mem *slot, size_t cap, const fake_mem *a)
{
    size_t i = home(a->key, cap);
    while (slot[i].key)
        i = (i + 1) & (cap - 1);
    slot[i] = *a;
}

/* The registries that have a table, for the unload: a runtime that
 * unloads the fake driver at exit (NVIDIA's libcudart does) leaves no
 * pointer to an empty table in memory, which LeakSanitizer reports. */
static fake_memory *with_table;
static pthread_mutex_t with_table_lock = PTHREAD_MUTEX_INITIALIZER;

/* The list is taken whole first: room() takes with_table_lock under a
 * registry's lock, so this never holds both. */
__attribute__((destructor)) static void free_tables(void)
{
    pthread_mutex_lock(&with_table_lock);
    fake_memory *m = with_table;
    with_table = NULL;
    pthread_mutex_unlock(&with_table_lock);
    while (m) {
        fake_memory *next = m->next_table;
        pthread_mutex_lock(&m->lock);
        /* With live allocations the table stays: it is what holds them
         * (a program that exits with memory it never freed). */
        if (m->live == 0) {
            free(m->slot);
            m->slot = NULL;
            m->cap = 0;
        }
        pthread_mutex_unlock(&m->lock);
        m = next;
    }
}

/* Room for one more entry: the table doubled at half full (lock held). */
static int room(fake_memory *m)
{
    if (m->cap && 2 * (m->live + 1) <= m->cap)
        return 1;
    size_t cap = m->cap ? 2 * m->cap : 1024;
    fake_mem *g = calloc(cap, sizeof *g);
    if (g == NULL)
        return 0;
    if (m->cap == 0) {
        pthread_mutex_lock(&with_table_lock);
        m->next_table = with_table;
        with_table = m;
        pthread_mutex_unlock(&with_table_lock);
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].key)
            place(g, cap, &m->slot[i]);
    free(m->slot);
    m->slot = g;
    m->cap = cap;
    return 1;
}

/* The slot of `key`, or cap when it is not live (lock held). */
static size_t slot_of(const fake_memory *m, uintptr_t key)
{
    for (size_t i = m->cap ? home(key, m->cap) : 0; m->cap && m->slot[i].key;
         i = (i + 1) & (m->cap - 1))
        if (m->slot[i].key == key)
            return i;
    return m->cap;
}

/* Empties slot i, moving later entries of the same probe run back so that
 * no lookup stops early (lock held). */
static void erase_at(fake_memory *m, size_t i)
{
    for (size_t j = i;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->slot[j].key)
            break;
        size_t k = home(m->slot[j].key, m->cap);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        m->slot[i] = m->slot[j];
        i = j;
    }
    m->slot[i].key = 0;
}

/* The entry at exactly `key`: copied to *out (when not NULL), its extra
 * set (when `set`); 0 when none. */
static int fake_memory_set_extra_or_get(fake_memory *m, uintptr_t key, fake_mem *out,
                                        void *extra, int set)
{
    pthread_mutex_lock(&m->lock);
    size_t i = key ? slot_of(m, key) : m->cap;
    int found = i < m->cap;
    if (found && set)
        m->slot[i].extra = extra;
    if (found && out)
        *out = m->slot[i];
    pthread_mutex_unlock(&m->lock);
    return found;
}

int fake_memory_track(fake_memory *m, const fake_mem *a)
{
    int r = FAKE_MEM_OK;
    pthread_mutex_lock(&m->lock);
    if (counts(m, a->kind, a->device) && a->size > m->capacity - m->used[a->device]) {
        r = FAKE_MEM_OVER_CAPACITY;
    } else if (!room(m)) {
        r = FAKE_MEM_NO_ROOM;
    } else {
        place(m->slot, m->cap, a);
        m->live++;
        if (counts(m, a->kind, a->device))
            m->used[a->device] += a->size;
    }
    pthread_mutex_unlock(&m->lock);
    return r;
}

int fake_memory_untrack(fake_memory *m, uintptr_t key, unsigned kinds, fake_mem *out)
{
    int found = 0;
    pthread_mutex_lock(&m->lock);
    size_t i = key ? slot_of(m, key) : m->cap;
    if (i < m->cap && (kinds & (1u << m->slot[i].kind))) {
        fake_mem a = m->slot[i];
        if (out)
            *out = a;
        if (counts(m, a.kind, a.device))
            m->used[a.device] -= a.size;
        erase_at(m, i);
        m->live--;
        found = 1;
    }
    pthread_mutex_unlock(&m->lock);
    return found;
}

int fake_memory_get(fake_memory *m, uintptr_t key, fake_mem *out)
{
    return fake_memory_set_extra_or_get(m, key, out, NULL, 0);
}

int fake_memory_containing(fake_memory *m, uintptr_t addr, unsigned skip, fake_mem *out)
{
    int found = 0;
    pthread_mutex_lock(&m->lock);
    size_t i = addr ? slot_of(m, addr) : m->cap;
    if (i < m->cap && !(skip & (1u << m->slot[i].kind))) {
        *out = m->slot[i];
        found = 1;
    }
    for (i = 0; i < m->cap && !found; i++) {
        const fake_mem *a = &m->slot[i];
        if (a->key && !(skip & (1u << a->kind)) && addr >= a->key && addr - a->key < a->size) {
            *out = *a;
            found = 1;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return found;
}

int fake_memory_find(fake_memory *m, int (*match)(const fake_mem *, void *), void *arg,
                     fake_mem *out)
{
    int found = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->cap && !found; i++)
        if (m->slot[i].key && match(&m->slot[i], arg)) {
            *out = m->slot[i];
            found = 1;
        }
    pthread_mutex_unlock(&m->lock);
    return found;
}

int fake_memory_set_extra(fake_memory *m, uintptr_t key, void *extra)
{
    return fake_memory_set_extra_or_get(m, key, NULL, extra, 1);
}

int fake_memory_used_change(fake_memory *m, int device, long long bytes)
{
    if (device < 0 || device >= FAKE_MEM_DEVICES)
        return FAKE_MEM_OK;
    int r = FAKE_MEM_OK;
    pthread_mutex_lock(&m->lock);
    if (bytes > 0 && (size_t)bytes > m->capacity - m->used[device])
        r = FAKE_MEM_OVER_CAPACITY;
    else
        m->used[device] += (size_t)bytes;
    pthread_mutex_unlock(&m->lock);
    return r;
}

long fake_memory_live(fake_memory *m)
{
    pthread_mutex_lock(&m->lock);
    long n = (long)m->live;
    pthread_mutex_unlock(&m->lock);
    return n;
}

size_t fake_memory_used(fake_memory *m, int device)
{
    if (device < 0 || device >= FAKE_MEM_DEVICES)
        return 0;
    pthread_mutex_lock(&m->lock);
    size_t n = m->used[device];
    pthread_mutex_unlock(&m->lock);
    return n;
}

/* ---- blocks ---------------------------------------------------------------- */

#define REUSE_SLOTS 32
static struct {
    void *p;
    size_t bytes, alignment;
} reuse[REUSE_SLOTS];
static int n_reuse;
static pthread_mutex_t reuse_lock = PTHREAD_MUTEX_INITIALIZER;

void *fake_block_get(size_t bytes, size_t alignment)
{
    void *p = NULL;
    pthread_mutex_lock(&reuse_lock);
    for (int i = n_reuse - 1; i >= 0; i--)
        if (reuse[i].bytes == bytes && reuse[i].alignment == alignment) {
            p = reuse[i].p;
            reuse[i] = reuse[--n_reuse];
            break;
        }
    pthread_mutex_unlock(&reuse_lock);
    return p ? p : aligned_alloc(alignment, bytes);
}

void fake_block_put(void *p, size_t bytes, size_t alignment)
{
    pthread_mutex_lock(&reuse_lock);
    if (n_reuse < REUSE_SLOTS) {
        reuse[n_reuse].p = p;
        reuse[n_reuse].bytes = bytes;
        reuse[n_reuse].alignment = alignment;
        n_reuse++;
        p = NULL;
    }
    pthread_mutex_unlock(&reuse_lock);
    free(p);
}

/* ---- call counters --------------------------------------------------------- */

long fake_calls_of(const char *const *names, atomic_long *calls, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return atomic_load(&calls[i]);
    return -1;
}

void fake_fail_codes(const char *spec, const char *const *names, int n, long long *codes)
{
    for (const char *s = spec; s && *s;) {
        const char *eq = strchr(s, '=');
        if (!eq)
            break;
        size_t len = (size_t)(eq - s);
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) == len && strncmp(names[i], s, len) == 0)
                codes[i] = strtoll(eq + 1, NULL, 0);
        s = strchr(eq, ',');
        if (s)
            s++;
    }
}
