/* simcuda/core/memory.c: simulated device memory.
 *
 * Each device owns an arena of host address space, reserved PROT_NONE with
 * MAP_NORESERVE (four times its capacity, so first fit never fails for want
 * of address space before capacity is reached), at a fixed address when
 * the kernel grants it, so device pointers are the same run after run.
 * An allocation is carved by first fit: 2 MiB-aligned and rounded to 2 MiB
 * from 2 MiB up (the driver's large pages), 4 KiB pages below; its pages
 * are made read-write (so they read as zeros until written) and, when
 * freed, given back (MADV_DONTNEED) and made PROT_NONE again.  What counts
 * against capacity is the sum of live allocations and of physical
 * allocations made through the virtual-memory calls; past capacity the
 * answer is CUDA_ERROR_OUT_OF_MEMORY.
 * The virtual-memory calls: an address reservation is its own PROT_NONE
 * mapping; a physical allocation is accounting only; mapping one into a
 * reservation makes that range read-write, unmapping gives it back.  A
 * physical allocation released while mapped is freed at its last unmap, as
 * the driver does.
 * Lock: one mutex over all of it (allocations are the caching allocator's
 * segments, not its blocks: rare).
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* An allocation (handle: the size asked for), a reservation or a mapping
 * (handle: the physical allocation mapped). */
struct range { uintptr_t base; size_t size; uint64_t handle; int dev; };

struct vec { struct range *v; size_t n, cap; };

struct arena {
  uintptr_t base;
  size_t size;
  size_t used;        /* bytes counted against capacity */
  struct vec allocs;  /* sorted by base */
};

struct phys { size_t size; int dev; int live; int released; int maps; };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct arena g_arena[SIMCUDA_MAX_DEVICES];
static struct vec g_reservations;  /* VMM address reservations */
static struct vec g_mappings;      /* VMM mappings, sorted by base */
static struct phys *g_phys;
static size_t g_nphys, g_capphys;

static int vec_insert(struct vec *v, size_t at, struct range r) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    struct range *nv = realloc(v->v, cap * sizeof *nv);
    if (!nv)
      return -1;
    v->v = nv;
    v->cap = cap;
  }
  memmove(v->v + at + 1, v->v + at, (v->n - at) * sizeof *v->v);
  v->v[at] = r;
  v->n++;
  return 0;
}

static void vec_remove(struct vec *v, size_t at) {
  memmove(v->v + at, v->v + at + 1, (v->n - at - 1) * sizeof *v->v);
  v->n--;
}

/* The index of the first range whose base is > p. */
static size_t vec_upper(const struct vec *v, uintptr_t p) {
  size_t lo = 0, hi = v->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v->v[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int vec_find(const struct vec *v, uintptr_t p) {
  size_t i = vec_upper(v, p);
  if (i == 0)
    return -1;
  const struct range *r = &v->v[i - 1];
  return p - r->base < r->size ? (int)(i - 1) : -1;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Reserve [size] bytes of PROT_NONE address space aligned to align, at hint
 * if the kernel allows. */
static void *reserve(size_t size, size_t align, void *hint) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (hint) {
    void *p = mmap(hint, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == hint)
      return p;
    if (p != MAP_FAILED)
      munmap(p, size);  /* an old kernel took the hint as a hint */
  }
  size_t total = size + align;
  char *p = mmap(NULL, total, PROT_NONE, flags, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  uintptr_t a = round_up((uintptr_t)p, align);
  if (a > (uintptr_t)p)
    munmap(p, a - (uintptr_t)p);
  size_t tail = (uintptr_t)p + total - (a + size);
  if (tail)
    munmap((void *)(a + size), tail);
  return (void *)a;
}

static struct arena *arena_of(int dev) {
  struct arena *a = &g_arena[dev];
  if (a->base)
    return a;
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev);
  size_t size = round_up((size_t)d->p.total_mem * 4, SIMCUDA_GRANULARITY);
  /* Device i at 32 TiB + i * (its arena rounded to 1 TiB); under
   * ThreadSanitizer, whose shadow memory owns that range, where the kernel
   * puts it. */
  size_t stride = round_up(size, (size_t)1 << 40);
  void *hint = (void *)(((uintptr_t)32 << 40) + (uintptr_t)dev * stride);
#if defined(__SANITIZE_THREAD__)
  hint = NULL;
#endif
  void *p = reserve(size, SIMCUDA_GRANULARITY, hint);
  if (!p)
    return NULL;
  a->base = (uintptr_t)p;
  a->size = size;
  return a;
}

static size_t footprint(size_t size) {
  return size >= SIMCUDA_GRANULARITY ? round_up(size, SIMCUDA_GRANULARITY) : round_up(size, 4096);
}

static void give_back(uintptr_t base, size_t size) {
  madvise((void *)base, size, MADV_DONTNEED);
  mprotect((void *)base, size, PROT_NONE);
}

CUresult tdm__simcuda_mem_alloc(int dev, size_t size, void **out) {
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev);
  if (!d)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  if (size == 0) {
    *out = NULL;
    return CUDA_SUCCESS;
  }
  size_t fp = footprint(size);
  size_t align = fp >= SIMCUDA_GRANULARITY ? SIMCUDA_GRANULARITY : 4096;
  pthread_mutex_lock(&g_mu);
  struct arena *a = arena_of(dev);
  if (!a || fp > d->p.total_mem - a->used) {
    pthread_mutex_unlock(&g_mu);
    tdm__simcuda_trace("oom %d %zu", dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* First fit over the gaps between live allocations. */
  uintptr_t at = a->base;
  size_t i;
  for (i = 0; i < a->allocs.n; i++) {
    uintptr_t cand = round_up(at, align);
    if (cand + fp <= a->allocs.v[i].base)
      break;
    at = a->allocs.v[i].base + a->allocs.v[i].size;
  }
  uintptr_t p = round_up(at, align);
  if (p + fp > a->base + a->size ||
      vec_insert(&a->allocs, i, (struct range){p, fp, size, dev}) ||
      mprotect((void *)p, fp, PROT_READ | PROT_WRITE)) {
    if (i < a->allocs.n && a->allocs.v[i].base == p)
      vec_remove(&a->allocs, i);
    pthread_mutex_unlock(&g_mu);
    tdm__simcuda_trace("oom %d %zu", dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->used += fp;
  pthread_mutex_unlock(&g_mu);
  tdm__simcuda_trace("malloc %d 0x%lx %zu", dev, (unsigned long)p, size);
  *out = (void *)p;
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_mem_free(void *ptr) {
  if (!ptr)
    return CUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  for (int dev = 0; dev < SIMCUDA_MAX_DEVICES; dev++) {
    struct arena *a = &g_arena[dev];
    if (!a->base || (uintptr_t)ptr - a->base >= a->size)
      continue;
    int i = vec_find(&a->allocs, (uintptr_t)ptr);
    if (i < 0 || a->allocs.v[i].base != (uintptr_t)ptr)
      break;
    struct range r = a->allocs.v[i];
    vec_remove(&a->allocs, (size_t)i);
    a->used -= r.size;
    give_back(r.base, r.size);
    pthread_mutex_unlock(&g_mu);
    tdm__simcuda_trace("free %d 0x%lx %zu", dev, (unsigned long)r.base, (size_t)r.handle);
    return CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&g_mu);
  return CUDA_ERROR_INVALID_VALUE;
}

void tdm__simcuda_mem_free_all(int dev) {
  if (dev < 0 || dev >= SIMCUDA_MAX_DEVICES)
    return;
  pthread_mutex_lock(&g_mu);
  struct arena *a = &g_arena[dev];
  while (a->allocs.n) {
    struct range r = a->allocs.v[--a->allocs.n];
    a->used -= r.size;
    give_back(r.base, r.size);
    tdm__simcuda_trace("free %d 0x%lx %zu", dev, (unsigned long)r.base, (size_t)r.handle);
  }
  pthread_mutex_unlock(&g_mu);
}

CUresult tdm__simcuda_mem_info(int dev, size_t *free_b, size_t *total_b) {
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev);
  if (!d)
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&g_mu);
  size_t used = g_arena[dev].used;
  pthread_mutex_unlock(&g_mu);
  if (free_b)
    *free_b = (size_t)d->p.total_mem - used;
  if (total_b)
    *total_b = (size_t)d->p.total_mem;
  return CUDA_SUCCESS;
}

int tdm__simcuda_mem_lookup(const void *ptr, void **base, size_t *size) {
  int dev = -1;
  pthread_mutex_lock(&g_mu);
  for (int d = 0; d < SIMCUDA_MAX_DEVICES && dev < 0; d++) {
    struct arena *a = &g_arena[d];
    if (!a->base || (uintptr_t)ptr - a->base >= a->size)
      continue;
    int i = vec_find(&a->allocs, (uintptr_t)ptr);
    if (i >= 0) {
      dev = d;
      if (base)
        *base = (void *)a->allocs.v[i].base;
      if (size)
        *size = a->allocs.v[i].size;
    }
  }
  if (dev < 0) {
    int i = vec_find(&g_mappings, (uintptr_t)ptr);
    if (i >= 0) {
      dev = g_mappings.v[i].dev;
      if (base)
        *base = (void *)g_mappings.v[i].base;
      if (size)
        *size = g_mappings.v[i].size;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return dev;
}

/* ---- virtual memory management ------------------------------------------ */

CUresult tdm__simcuda_va_reserve(size_t size, size_t align, void *hint, void **out) {
  if (!out || !size || size % SIMCUDA_GRANULARITY)
    return CUDA_ERROR_INVALID_VALUE;
  if (align < SIMCUDA_GRANULARITY)
    align = SIMCUDA_GRANULARITY;
  void *p = reserve(size, align, hint);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_mu);
  size_t i = vec_upper(&g_reservations, (uintptr_t)p);
  int bad = vec_insert(&g_reservations, i, (struct range){(uintptr_t)p, size, 0, -1});
  pthread_mutex_unlock(&g_mu);
  if (bad) {
    munmap(p, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  tdm__simcuda_trace("reserve 0x%lx %zu", (unsigned long)p, size);
  *out = p;
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_va_free(void *ptr, size_t size) {
  pthread_mutex_lock(&g_mu);
  int i = vec_find(&g_reservations, (uintptr_t)ptr);
  if (i < 0 || g_reservations.v[i].base != (uintptr_t)ptr || g_reservations.v[i].size != size) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  vec_remove(&g_reservations, (size_t)i);
  pthread_mutex_unlock(&g_mu);
  munmap(ptr, size);
  tdm__simcuda_trace("unreserve 0x%lx %zu", (unsigned long)ptr, size);
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_phys_create(int dev, size_t size, uint64_t *handle) {
  const struct tdm__simcuda_device *d = tdm__simcuda_device(dev);
  if (!d)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!handle || !size || size % SIMCUDA_GRANULARITY)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  struct arena *a = arena_of(dev);
  if (!a || size > d->p.total_mem - a->used) {
    pthread_mutex_unlock(&g_mu);
    tdm__simcuda_trace("oom %d %zu", dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (g_nphys == g_capphys) {
    size_t cap = g_capphys ? g_capphys * 2 : 256;
    struct phys *np = realloc(g_phys, cap * sizeof *np);
    if (!np) {
      pthread_mutex_unlock(&g_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_phys = np;
    g_capphys = cap;
  }
  g_phys[g_nphys] = (struct phys){size, dev, 1, 0, 0};
  *handle = ++g_nphys;  /* handles are 1-based indices; 0 is no handle */
  a->used += size;
  pthread_mutex_unlock(&g_mu);
  tdm__simcuda_trace("create %d %llu %zu", dev, (unsigned long long)*handle, size);
  return CUDA_SUCCESS;
}

static struct phys *phys_of(uint64_t handle) {
  return handle && handle <= g_nphys && g_phys[handle - 1].live ? &g_phys[handle - 1] : NULL;
}

static void phys_maybe_free(uint64_t handle) {
  struct phys *ph = &g_phys[handle - 1];
  if (ph->released && ph->maps == 0) {
    ph->live = 0;
    g_arena[ph->dev].used -= ph->size;
  }
}

CUresult tdm__simcuda_phys_release(uint64_t handle) {
  pthread_mutex_lock(&g_mu);
  struct phys *ph = phys_of(handle);
  if (!ph || ph->released) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  int dev = ph->dev;
  size_t size = ph->size;
  ph->released = 1;
  phys_maybe_free(handle);
  pthread_mutex_unlock(&g_mu);
  tdm__simcuda_trace("release %d %llu %zu", dev, (unsigned long long)handle, size);
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_phys_props(uint64_t handle, int *dev, size_t *size) {
  pthread_mutex_lock(&g_mu);
  struct phys *ph = phys_of(handle);
  if (ph) {
    if (dev)
      *dev = ph->dev;
    if (size)
      *size = ph->size;
  }
  pthread_mutex_unlock(&g_mu);
  return ph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult tdm__simcuda_phys_map(void *ptr, size_t size, size_t offset, uint64_t handle) {
  uintptr_t p = (uintptr_t)ptr;
  if (!size || size % SIMCUDA_GRANULARITY || p % SIMCUDA_GRANULARITY)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  struct phys *ph = phys_of(handle);
  int r = vec_find(&g_reservations, p);
  CUresult err = CUDA_SUCCESS;
  if (!ph || ph->released || offset + size > ph->size || r < 0 ||
      p + size > g_reservations.v[r].base + g_reservations.v[r].size)
    err = CUDA_ERROR_INVALID_VALUE;
  size_t i = vec_upper(&g_mappings, p);
  if (!err && ((i > 0 && g_mappings.v[i - 1].base + g_mappings.v[i - 1].size > p) ||
               (i < g_mappings.n && g_mappings.v[i].base < p + size)))
    err = CUDA_ERROR_INVALID_VALUE;  /* already mapped */
  if (!err && (vec_insert(&g_mappings, i, (struct range){p, size, handle, ph->dev}) ||
               mprotect(ptr, size, PROT_READ | PROT_WRITE)))
    err = CUDA_ERROR_OUT_OF_MEMORY;
  int dev = ph ? ph->dev : -1;
  if (!err)
    ph->maps++;
  pthread_mutex_unlock(&g_mu);
  if (!err)
    tdm__simcuda_trace("map %d 0x%lx %zu %llu", dev, (unsigned long)p, size,
                       (unsigned long long)handle);
  return err;
}

CUresult tdm__simcuda_phys_unmap(void *ptr, size_t size) {
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&g_mu);
  /* The range must be covered by whole mappings, as the driver demands. */
  size_t i = vec_upper(&g_mappings, p);
  if (i == 0 || g_mappings.v[i - 1].base != p) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  i--;
  uintptr_t end = p + size, at = p;
  size_t j = i;
  while (j < g_mappings.n && g_mappings.v[j].base == at && at < end)
    at += g_mappings.v[j++].size;
  if (at != end) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  int dev = g_mappings.v[i].dev;
  while (j-- > i) {
    uint64_t h = g_mappings.v[i].handle;
    vec_remove(&g_mappings, i);
    g_phys[h - 1].maps--;
    phys_maybe_free(h);
  }
  give_back(p, size);
  pthread_mutex_unlock(&g_mu);
  tdm__simcuda_trace("unmap %d 0x%lx %zu", dev, (unsigned long)p, size);
  return CUDA_SUCCESS;
}
