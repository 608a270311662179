/* tests/hooks/infra/fake_vendor.c: libtdmfake_vendor.so, a made-up GPU
 * vendor runtime (fake_vendor.h) for testing the preload infrastructure
 * without a real one.
 *
 * Owns: the live allocations (an array of pointer/size pairs; frees of
 * anything else are FV_ERROR_INVALID, as a real runtime's are), the
 * reserved ranges and mappings of the virtual-memory calls, the bytes in
 * use against the capacity (env FAKEV_CAPACITY, default 1 GiB) and the
 * counters tests read.  "Device memory" is host memory from
 * posix_memalign / mmap.
 * Lock: one mutex around everything; this is a test double, not fast.
 * It is held across fork() (pthread_atfork) so that a child forked while
 * another thread was in the runtime can call it, as glibc's malloc can:
 * the fork tests are about tidemark's locks, not this double's. */
#define _GNU_SOURCE
#include "fake_vendor.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_LIVE 65536
#define MAX_RANGES 256

typedef struct range {
    uintptr_t base;
    size_t size;
} range;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static range live[MAX_LIVE];
static size_t live_n;
static range reserves[MAX_RANGES];
static size_t reserves_n;
static range maps[MAX_RANGES];
static size_t maps_n;
static size_t used;     /* bytes allocated or mapped */
static size_t capacity; /* 0 until first read */
static fv_counters counters;
static void (*alloc_cb)(size_t);

static void fork_lock(void) { pthread_mutex_lock(&lock); }
static void fork_unlock(void) { pthread_mutex_unlock(&lock); }

__attribute__((constructor)) static void fake_vendor_init(void)
{
    pthread_atfork(fork_lock, fork_unlock, fork_unlock);
}

static size_t cap_locked(void)
{
    if (capacity == 0) {
        const char *env = getenv("FAKEV_CAPACITY");
        capacity = env && *env ? strtoull(env, NULL, 0) : (size_t)1 << 30;
        if (capacity == 0)
            capacity = (size_t)1 << 30;
    }
    return capacity;
}

static fv_result do_malloc(void **ptr, size_t size, int v1)
{
    if (ptr == NULL)
        return FV_ERROR_INVALID;
    *ptr = NULL;
    if (size == 0)
        return FV_SUCCESS;
    pthread_mutex_lock(&lock);
    if (v1)
        counters.v1_calls++;
    if (size > cap_locked() - used || live_n == MAX_LIVE) {
        pthread_mutex_unlock(&lock);
        return FV_ERROR_OUT_OF_MEMORY;
    }
    void *p = NULL;
    if (posix_memalign(&p, 512, size) != 0) {
        pthread_mutex_unlock(&lock);
        return FV_ERROR_OUT_OF_MEMORY;
    }
    live[live_n++] = (range){(uintptr_t)p, size};
    used += size;
    counters.alloc_calls++;
    counters.live++;
    void (*cb)(size_t) = alloc_cb;
    pthread_mutex_unlock(&lock);
    *ptr = p;
    if (cb)
        cb(size);
    return FV_SUCCESS;
}

/* Two versions of one symbol, as vendor libraries have. */
__attribute__((symver("fv_malloc@FAKEV_1.0"))) fv_result
fv_malloc_v1(void **ptr, size_t size);
fv_result fv_malloc_v1(void **ptr, size_t size)
{
    return do_malloc(ptr, size, 1);
}

__attribute__((symver("fv_malloc@@FAKEV_2.0"))) fv_result
fv_malloc_v2(void **ptr, size_t size);
fv_result fv_malloc_v2(void **ptr, size_t size)
{
    return do_malloc(ptr, size, 0);
}

fv_result fv_malloc_async(void **ptr, size_t size, fv_stream stream)
{
    (void)stream;
    return do_malloc(ptr, size, 0);
}

fv_result fv_calloc(void **ptr, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return FV_ERROR_INVALID;
    /* Through the PLT on purpose: a preloaded hook of fv_malloc_async is
     * called from inside the hook of fv_calloc. */
    fv_result r = fv_malloc_async(ptr, n * size, NULL);
    if (r == FV_SUCCESS && *ptr)
        memset(*ptr, 0, n * size);
    return r;
}

fv_result fv_free(void *ptr)
{
    if (ptr == NULL)
        return FV_SUCCESS;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < live_n; i++) {
        if (live[i].base == (uintptr_t)ptr) {
            used -= live[i].size;
            live[i] = live[--live_n];
            counters.free_calls++;
            counters.live--;
            pthread_mutex_unlock(&lock);
            free(ptr);
            return FV_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return FV_ERROR_INVALID;
}

fv_result fv_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    pthread_mutex_lock(&lock);
    size_t cap = cap_locked();
    if (free_bytes)
        *free_bytes = cap - used;
    if (total_bytes)
        *total_bytes = cap;
    pthread_mutex_unlock(&lock);
    return FV_SUCCESS;
}

fv_result fv_reserve(void **va, size_t size)
{
    if (va == NULL || size == 0)
        return FV_ERROR_INVALID;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return FV_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (reserves_n == MAX_RANGES) {
        pthread_mutex_unlock(&lock);
        munmap(p, size);
        return FV_ERROR_OUT_OF_MEMORY;
    }
    reserves[reserves_n++] = (range){(uintptr_t)p, size};
    pthread_mutex_unlock(&lock);
    *va = p;
    return FV_SUCCESS;
}

fv_result fv_release(void *va, size_t size)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < reserves_n; i++) {
        if (reserves[i].base == (uintptr_t)va && reserves[i].size == size) {
            reserves[i] = reserves[--reserves_n];
            pthread_mutex_unlock(&lock);
            munmap(va, size);
            return FV_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return FV_ERROR_INVALID;
}

fv_result fv_map(void *va, size_t size)
{
    uintptr_t a = (uintptr_t)va;
    pthread_mutex_lock(&lock);
    int inside = 0;
    for (size_t i = 0; i < reserves_n; i++)
        if (a >= reserves[i].base && size <= reserves[i].size &&
            a - reserves[i].base <= reserves[i].size - size)
            inside = 1;
    for (size_t i = 0; i < maps_n && inside; i++)
        if (a < maps[i].base + maps[i].size && maps[i].base < a + size)
            inside = 0; /* overlaps a mapping */
    if (!inside || size == 0 || maps_n == MAX_RANGES) {
        pthread_mutex_unlock(&lock);
        return FV_ERROR_INVALID;
    }
    if (size > cap_locked() - used) {
        pthread_mutex_unlock(&lock);
        return FV_ERROR_OUT_OF_MEMORY;
    }
    maps[maps_n++] = (range){a, size};
    used += size;
    counters.mapped += (long)size;
    pthread_mutex_unlock(&lock);
    mprotect(va, size, PROT_READ | PROT_WRITE);
    return FV_SUCCESS;
}

/* Unmaps every mapping inside [va, va + size); a mapping that sticks out
 * of the range, or a range with none, is FV_ERROR_INVALID. */
fv_result fv_unmap(void *va, size_t size)
{
    uintptr_t a = (uintptr_t)va;
    pthread_mutex_lock(&lock);
    size_t hit = 0;
    for (size_t i = 0; i < maps_n; i++) {
        int overlaps = a < maps[i].base + maps[i].size && maps[i].base < a + size;
        int within = maps[i].base >= a && maps[i].base + maps[i].size <= a + size;
        if (overlaps && !within) {
            pthread_mutex_unlock(&lock);
            return FV_ERROR_INVALID;
        }
        hit += within;
    }
    if (hit == 0) {
        pthread_mutex_unlock(&lock);
        return FV_ERROR_INVALID;
    }
    for (size_t i = 0; i < maps_n;) {
        if (maps[i].base >= a && maps[i].base + maps[i].size <= a + size) {
            used -= maps[i].size;
            counters.mapped -= (long)maps[i].size;
            maps[i] = maps[--maps_n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&lock);
    mprotect(va, size, PROT_NONE);
    return FV_SUCCESS;
}

void fv_set_alloc_callback(void (*cb)(size_t size))
{
    pthread_mutex_lock(&lock);
    alloc_cb = cb;
    pthread_mutex_unlock(&lock);
}

fv_counters fv_get_counters(void)
{
    pthread_mutex_lock(&lock);
    fv_counters c = counters;
    pthread_mutex_unlock(&lock);
    return c;
}
