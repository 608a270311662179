/* alloc/provider_sim.c: the sim device, simulated device memory on the host.
 *
 * Owns, per device: one reserved address range of `capacity` bytes (mmap,
 * MAP_NORESERVE; PROT_NONE unless host_accessible), and the set of free
 * ranges inside it.  Hands out 512-byte aligned ranges, best fit (smallest
 * free range that fits, lowest address among equals), low end first.
 *
 * Invariants: free ranges are disjoint, never adjacent (freeing coalesces
 * with both neighbours), 512-byte aligned, and each sits in both trees
 * (by (size, start) for best fit, by start for neighbours); used bytes =
 * capacity - sum of free range sizes + physical pages made by the virtual
 * memory ops (reservations, outside the range, are listed per device).
 * Freed pages of a host-accessible
 * device are given back with madvise(MADV_DONTNEED), so they read as zero.
 *
 * Lock: one mutex per device around its trees and counters; the provider
 * itself is immutable after creation.  Range records come from a per-device
 * object pool under the same lock, never from the program's malloc.
 */
#include "provider.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "meta.h"
#include "tree.h"

#define SIM_ALIGN ((uint64_t)512)

typedef struct sim_range {
    tdm__tnode by_size; /* key (size, start) */
    tdm__tnode by_addr; /* key start */
    uint64_t start;     /* byte address */
    uint64_t size;      /* bytes, multiple of SIM_ALIGN */
} sim_range;

/* An address range reserved by the virtual memory ops. */
typedef struct sim_reservation {
    struct sim_reservation *next;
    uint64_t start, size;
} sim_reservation;

typedef struct sim_device {
    pthread_mutex_t lock;
    char *base;         /* reserved range */
    uint64_t capacity;  /* bytes */
    uint64_t used;      /* bytes handed out, physical pages included */
    uint64_t handles;   /* physical pages made so far: their ids */
    sim_reservation *reserved;
    tdm__objpool reservations;
    tdm__tree by_size;
    tdm__tree by_addr;
    tdm__objpool ranges; /* sim_range records */
} sim_device;

typedef struct sim_impl {
    tdm_provider pub;
    int host_accessible;
    size_t page;        /* bytes */
    sim_device *devs;   /* [device_count], from tdm__meta_map */
} sim_impl;

static int cmp_size(const tdm__tnode *a, const tdm__tnode *b)
{
    const sim_range *x = TDM__CONTAINER_OF(a, sim_range, by_size);
    const sim_range *y = TDM__CONTAINER_OF(b, sim_range, by_size);
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_addr(const tdm__tnode *a, const tdm__tnode *b)
{
    const sim_range *x = TDM__CONTAINER_OF(a, sim_range, by_addr);
    const sim_range *y = TDM__CONTAINER_OF(b, sim_range, by_addr);
    return x->start < y->start ? -1 : x->start > y->start;
}

static sim_device *sim_dev(tdm_provider *p, int device)
{
    sim_impl *s = p->impl;
    if (device < 0 || device >= p->device_count)
        return NULL;
    return &s->devs[device];
}

static tdm_status sim_alloc(tdm_provider *p, int device, size_t size,
                            tdm_stream stream, void **out)
{
    (void)stream;
    *out = NULL;
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    if (size == 0 || size > d->capacity)
        return size == 0 ? TDM_INVALID_ARGUMENT : TDM_OUT_OF_MEMORY;
    uint64_t need = ((uint64_t)size + SIM_ALIGN - 1) & ~(SIM_ALIGN - 1);

    sim_range probe = {.start = 0, .size = need};
    pthread_mutex_lock(&d->lock);
    tdm__tnode *n = tdm__tree_find_ge(&d->by_size, &probe.by_size);
    /* Physical pages of the virtual memory ops use capacity outside the
     * free ranges. */
    if (n == NULL || need > d->capacity - d->used) {
        pthread_mutex_unlock(&d->lock);
        return TDM_OUT_OF_MEMORY;
    }
    sim_range *r = TDM__CONTAINER_OF(n, sim_range, by_size);
    uint64_t addr = r->start;
    tdm__tree_remove(&d->by_size, &r->by_size);
    if (r->size == need) {
        tdm__tree_remove(&d->by_addr, &r->by_addr);
        tdm__objpool_put(&d->ranges, r);
    } else {
        /* Its place among the disjoint ranges does not change, so the
         * address tree stays ordered without a re-insert. */
        r->start += need;
        r->size -= need;
        tdm__tree_insert(&d->by_size, &r->by_size);
    }
    d->used += need;
    pthread_mutex_unlock(&d->lock);
    *out = (void *)(uintptr_t)addr;
    return TDM_OK;
}

/* Gives the whole pages inside [start, start+size) back to the system. */
static void sim_discard(sim_impl *s, uint64_t start, uint64_t size)
{
    uint64_t lo = (start + s->page - 1) & ~((uint64_t)s->page - 1);
    uint64_t hi = (start + size) & ~((uint64_t)s->page - 1);
    if (hi > lo)
        madvise((void *)(uintptr_t)lo, hi - lo, MADV_DONTNEED);
}

static tdm_status sim_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    sim_impl *s = p->impl;
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    uint64_t start = (uint64_t)(uintptr_t)ptr;
    uint64_t len = ((uint64_t)size + SIM_ALIGN - 1) & ~(SIM_ALIGN - 1);
    uint64_t base = (uint64_t)(uintptr_t)d->base;
    if (size == 0 || start % SIM_ALIGN != 0 || start < base ||
        start - base > d->capacity || len > d->capacity - (start - base))
        return TDM_INVALID_ARGUMENT;

    pthread_mutex_lock(&d->lock);
    sim_range probe = {.start = start, .size = 0};
    tdm__tnode *pn = tdm__tree_find_lt(&d->by_addr, &probe.by_addr);
    tdm__tnode *nn = tdm__tree_find_ge(&d->by_addr, &probe.by_addr);
    sim_range *prev = pn ? TDM__CONTAINER_OF(pn, sim_range, by_addr) : NULL;
    sim_range *next = nn ? TDM__CONTAINER_OF(nn, sim_range, by_addr) : NULL;
    /* A range overlapping free space was never handed out (or is freed
     * twice): refuse it rather than corrupt the free set. */
    if ((prev != NULL && prev->start + prev->size > start) ||
        (next != NULL && next->start < start + len)) {
        pthread_mutex_unlock(&d->lock);
        return TDM_INVALID_ARGUMENT;
    }
    int join_prev = prev != NULL && prev->start + prev->size == start;
    int join_next = next != NULL && next->start == start + len;
    sim_range *r;
    if (join_prev) {
        r = prev;
        tdm__tree_remove(&d->by_size, &r->by_size);
        r->size += len;
        if (join_next) {
            r->size += next->size;
            tdm__tree_remove(&d->by_size, &next->by_size);
            tdm__tree_remove(&d->by_addr, &next->by_addr);
            tdm__objpool_put(&d->ranges, next);
        }
    } else if (join_next) {
        r = next;
        tdm__tree_remove(&d->by_size, &r->by_size);
        r->start = start; /* still between the same neighbours */
        r->size += len;
    } else {
        r = tdm__objpool_get(&d->ranges);
        if (r == NULL) {
            pthread_mutex_unlock(&d->lock);
            return TDM_HOST_OUT_OF_MEMORY;
        }
        r->start = start;
        r->size = len;
        tdm__tree_insert(&d->by_addr, &r->by_addr);
    }
    tdm__tree_insert(&d->by_size, &r->by_size);
    d->used -= len;
    if (s->host_accessible)
        sim_discard(s, r->start, r->size);
    pthread_mutex_unlock(&d->lock);
    return TDM_OK;
}

static tdm_status sim_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                               size_t *total_bytes)
{
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    pthread_mutex_lock(&d->lock);
    uint64_t used = d->used;
    pthread_mutex_unlock(&d->lock);
    if (free_bytes)
        *free_bytes = (size_t)(d->capacity - used);
    if (total_bytes)
        *total_bytes = (size_t)d->capacity;
    return TDM_OK;
}

static void sim_device_name(tdm_provider *p, int device, char *buf, size_t len)
{
    (void)p;
    if (len > 0)
        snprintf(buf, len, "sim%d", device);
}

/* ---- virtual memory ops ----------------------------------------------------
 * A reservation is an address range of its own (PROT_NONE, MAP_NORESERVE),
 * so that its size may exceed the capacity, as a vendor's address space
 * does; physical pages are only counted, and on a host-accessible device
 * mapping makes the range readable and writable. */

#define SIM_GRANULARITY ((uint64_t)2 << 20)

static tdm_status sim_vmm_granularity(tdm_provider *p, int device, size_t *bytes)
{
    if (sim_dev(p, device) == NULL)
        return TDM_NO_SUCH_DEVICE;
    *bytes = (size_t)SIM_GRANULARITY;
    return TDM_OK;
}

static tdm_status sim_vmm_reserve(tdm_provider *p, int device, size_t size, void **base)
{
    sim_device *d = sim_dev(p, device);
    *base = NULL;
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    if (size == 0 || size % SIM_GRANULARITY != 0)
        return TDM_INVALID_ARGUMENT;
    /* Aligned to the granularity: reserve one more granule and trim. */
    size_t span = size + (size_t)SIM_GRANULARITY;
    char *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return TDM_OUT_OF_MEMORY;
    uint64_t lo = ((uint64_t)(uintptr_t)m + SIM_GRANULARITY - 1) & ~(SIM_GRANULARITY - 1);
    char *start = (char *)(uintptr_t)lo;
    if (start > m)
        munmap(m, (size_t)(start - m));
    if (start + size < m + span)
        munmap(start + size, (size_t)(m + span - (start + size)));
    pthread_mutex_lock(&d->lock);
    sim_reservation *r = tdm__objpool_get(&d->reservations);
    if (r != NULL) {
        r->start = lo;
        r->size = size;
        r->next = d->reserved;
        d->reserved = r;
    }
    pthread_mutex_unlock(&d->lock);
    if (r == NULL) {
        munmap(start, size);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    *base = start;
    return TDM_OK;
}

/* Whether [addr, addr+size) lies in one reservation (device lock held). */
static int sim_reserved(const sim_device *d, uint64_t addr, uint64_t size)
{
    for (const sim_reservation *r = d->reserved; r != NULL; r = r->next)
        if (addr >= r->start && size <= r->size && addr - r->start <= r->size - size)
            return 1;
    return 0;
}

static tdm_status sim_vmm_free_range(tdm_provider *p, int device, void *base, size_t size)
{
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    pthread_mutex_lock(&d->lock);
    sim_reservation **at = &d->reserved;
    while (*at && ((*at)->start != (uint64_t)(uintptr_t)base || (*at)->size != size))
        at = &(*at)->next;
    sim_reservation *r = *at;
    if (r != NULL)
        *at = r->next;
    tdm__objpool_put(&d->reservations, r);
    pthread_mutex_unlock(&d->lock);
    if (r == NULL)
        return TDM_INVALID_ARGUMENT;
    munmap(base, size);
    return TDM_OK;
}

static tdm_status sim_vmm_create(tdm_provider *p, int device, size_t size, uint64_t *handle)
{
    sim_device *d = sim_dev(p, device);
    *handle = 0;
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    if (size == 0 || size % SIM_GRANULARITY != 0)
        return TDM_INVALID_ARGUMENT;
    tdm_status st = TDM_OUT_OF_MEMORY;
    pthread_mutex_lock(&d->lock);
    if (size <= d->capacity - d->used) {
        d->used += size;
        *handle = ++d->handles;
        st = TDM_OK;
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

static tdm_status sim_vmm_release(tdm_provider *p, int device, uint64_t handle, size_t size)
{
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    tdm_status st = TDM_INVALID_ARGUMENT;
    pthread_mutex_lock(&d->lock);
    if (handle != 0 && handle <= d->handles && size <= d->used) {
        d->used -= size;
        st = TDM_OK;
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* Checks a range to map, unmap or open; with `prot` >= 0 on a
 * host-accessible device, gives it that protection. */
static tdm_status sim_vmm_range(tdm_provider *p, int device, void *addr, size_t size, int prot)
{
    sim_impl *s = p->impl;
    sim_device *d = sim_dev(p, device);
    if (d == NULL)
        return TDM_NO_SUCH_DEVICE;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    pthread_mutex_lock(&d->lock);
    int ok = size != 0 && a % SIM_GRANULARITY == 0 && size % SIM_GRANULARITY == 0 &&
             sim_reserved(d, a, size);
    pthread_mutex_unlock(&d->lock);
    if (!ok)
        return TDM_INVALID_ARGUMENT;
    if (s->host_accessible && prot >= 0) {
        if (prot == PROT_NONE) /* unmapped pages read as zero once mapped again */
            madvise(addr, size, MADV_DONTNEED);
        mprotect(addr, size, prot);
    }
    return TDM_OK;
}

static tdm_status sim_vmm_map(tdm_provider *p, int device, void *addr, size_t size,
                              uint64_t handle)
{
    return handle == 0 ? TDM_INVALID_ARGUMENT : sim_vmm_range(p, device, addr, size, -1);
}

static tdm_status sim_vmm_set_access(tdm_provider *p, int device, void *addr, size_t size)
{
    return sim_vmm_range(p, device, addr, size, PROT_READ | PROT_WRITE);
}

static tdm_status sim_vmm_unmap(tdm_provider *p, int device, void *addr, size_t size)
{
    return sim_vmm_range(p, device, addr, size, PROT_NONE);
}

static const tdm_vmm_ops sim_vmm = {
    .granularity = sim_vmm_granularity,
    .reserve = sim_vmm_reserve,
    .free_range = sim_vmm_free_range,
    .create = sim_vmm_create,
    .release = sim_vmm_release,
    .map = sim_vmm_map,
    .set_access = sim_vmm_set_access,
    .unmap = sim_vmm_unmap,
};

static void sim_destroy(tdm_provider *p)
{
    sim_impl *s = p->impl;
    for (int i = 0; i < p->device_count; i++) {
        sim_device *d = &s->devs[i];
        if (d->base != NULL)
            munmap(d->base, d->capacity);
        for (sim_reservation *r = d->reserved; r != NULL; r = r->next)
            munmap((void *)(uintptr_t)r->start, r->size);
        tdm__objpool_destroy(&d->reservations);
        tdm__objpool_destroy(&d->ranges);
        pthread_mutex_destroy(&d->lock);
    }
    tdm__meta_unmap(s->devs, sizeof(sim_device) * (size_t)p->device_count);
    tdm__meta_unmap(s, sizeof *s);
}

/* Capacity in whole pages keeps every mapping operation page-exact; 0
 * when it does not fit in a mapping's size. */
static uint64_t whole_pages(uint64_t capacity, size_t page)
{
    if (capacity == 0 || capacity > SIZE_MAX - page)
        return 0;
    return (capacity + page - 1) & ~((uint64_t)page - 1);
}

tdm_status tdm__provider_sim_check(const tdm_sim_config *cfg)
{
    if (cfg == NULL || cfg->device_count < 1 || cfg->device_count > 64)
        return TDM_INVALID_ARGUMENT;
    uint64_t cap = whole_pages(cfg->capacity, (size_t)sysconf(_SC_PAGESIZE));
    if (cap == 0)
        return TDM_BAD_CONFIG;
    /* Every device's range at once, as the provider holds them. */
    void *base[64];
    int n = 0;
    for (; n < cfg->device_count; n++) {
        base[n] = mmap(NULL, cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base[n] == MAP_FAILED)
            break;
    }
    for (int i = 0; i < n; i++)
        munmap(base[i], cap);
    return n == cfg->device_count ? TDM_OK : TDM_HOST_OUT_OF_MEMORY;
}

tdm_status tdm__provider_sim_create(const tdm_sim_config *cfg,
                                    tdm_provider **out)
{
    *out = NULL;
    if (cfg == NULL || cfg->device_count < 1 || cfg->device_count > 64)
        return TDM_INVALID_ARGUMENT;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t cap = whole_pages(cfg->capacity, page);
    if (cap == 0)
        return TDM_INVALID_ARGUMENT;

    sim_impl *s = tdm__meta_map(sizeof *s);
    if (s == NULL)
        return TDM_HOST_OUT_OF_MEMORY;
    s->devs = tdm__meta_map(sizeof(sim_device) * (size_t)cfg->device_count);
    if (s->devs == NULL) {
        tdm__meta_unmap(s, sizeof *s);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    s->host_accessible = cfg->host_accessible;
    s->page = page;
    s->pub.vendor = TDM_VENDOR_SIM;
    s->pub.device_count = cfg->device_count;
    s->pub.alloc = sim_alloc;
    s->pub.free = sim_free;
    s->pub.mem_info = sim_mem_info;
    s->pub.device_name = sim_device_name;
    s->pub.destroy = sim_destroy;
    s->pub.vmm = &sim_vmm;
    s->pub.impl = s;

    int prot = cfg->host_accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
    for (int i = 0; i < cfg->device_count; i++) {
        sim_device *d = &s->devs[i];
        pthread_mutex_init(&d->lock, NULL);
        tdm__tree_init(&d->by_size, cmp_size);
        tdm__tree_init(&d->by_addr, cmp_addr);
        tdm__objpool_init(&d->ranges, sizeof(sim_range));
        tdm__objpool_init(&d->reservations, sizeof(sim_reservation));
        d->capacity = cap;
        void *base = mmap(NULL, cap, prot,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        sim_range *all = base == MAP_FAILED ? NULL : tdm__objpool_get(&d->ranges);
        if (all == NULL) {
            if (base != MAP_FAILED)
                munmap(base, cap);
            s->pub.device_count = i + 1; /* destroy what exists so far */
            d->base = NULL;
            sim_destroy(&s->pub);
            return TDM_HOST_OUT_OF_MEMORY;
        }
        d->base = base;
        all->start = (uint64_t)(uintptr_t)base;
        all->size = cap;
        tdm__tree_insert(&d->by_size, &all->by_size);
        tdm__tree_insert(&d->by_addr, &all->by_addr);
    }
    *out = &s->pub;
    return TDM_OK;
}
