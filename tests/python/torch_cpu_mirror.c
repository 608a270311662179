/* tests/python/torch_cpu_mirror.c: an LD_PRELOAD library that books every
 * tensor a CPU-only PyTorch makes on tidemark's sim device, so that a torch
 * without CUDA (Debian's python3-torch 1.13) runs the category loops of
 * bench/categories with its tensors recorded by tidemark: their sizes,
 * their lifetimes, the Python frames that made them, the phases torch's
 * hooks mark.
 *
 * PyTorch's CPU allocator (c10::alloc_cpu) takes every tensor's storage
 * from posix_memalign with c10's alignment, 64 bytes, and gives it back
 * with free (bench/traces/capture_shim.c relies on the same).  Once
 * tdm_torch_cpu_mirror_start() was called (bench/categories/oracle.py
 * calls it when the torch it runs has no CUDA), each such block gets an
 * allocation of the same size from tdm_malloc on sim device 0, freed by
 * tdm_free when the block is freed.  The program keeps using its own
 * memory: nothing of the sim device is handed to it.
 *
 *   LD_PRELOAD=.../libtorch_cpu_mirror.so tidemark run -- python3 oracle.py OUT LOOP.py
 *
 * tdm_malloc is looked up in the process (libtidemark, which tidemark run's
 * preload library loads) when mirroring starts; without it nothing is
 * mirrored.  tidemark's own allocations are never mirrored: a thread
 * inside tdm_malloc or tdm_free does not come back here.  The table of
 * live blocks lives in mmap()ed memory (no malloc inside the allocator),
 * open addressing with linear probing, deleted by shifting the run back.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define MIRROR_EXPORT __attribute__((visibility("default")))

/* glibc's own free: free needs no dlsym (which may itself free). */
extern void __libc_free(void *p);

MIRROR_EXPORT int tdm_torch_cpu_mirror_start(void);

typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef int (*tdm_malloc_fn)(void **, size_t, int, uintptr_t);
typedef int (*tdm_free_fn)(void *);

typedef struct slot {
    uintptr_t cpu; /* 0: empty */
    void *sim;
} slot;

#define TABLE_BITS 22 /* 4 Mi slots: far more tensors than a loop keeps alive */
#define TABLE_SLOTS ((size_t)1 << TABLE_BITS)
#define C10_ALIGNMENT 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot *table;
static size_t used;
static tdm_malloc_fn sim_malloc;
static tdm_free_fn sim_free;
static int mirroring;
static __thread int inside; /* this thread is in tdm_malloc or tdm_free */

static size_t slot_of(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> (64 - TABLE_BITS));
}

MIRROR_EXPORT int tdm_torch_cpu_mirror_start(void)
{
    pthread_mutex_lock(&lock);
    if (!table) {
        void *mem = mmap(NULL, TABLE_SLOTS * sizeof(slot), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem != MAP_FAILED)
            table = mem;
    }
    sim_malloc = (tdm_malloc_fn)dlsym(RTLD_DEFAULT, "tdm_malloc");
    sim_free = (tdm_free_fn)dlsym(RTLD_DEFAULT, "tdm_free");
    int ok = table && sim_malloc && sim_free;
    __atomic_store_n(&mirroring, ok, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

static void remember(uintptr_t cpu, void *sim)
{
    pthread_mutex_lock(&lock);
    if (used < TABLE_SLOTS / 2) {
        size_t i = slot_of(cpu);
        while (table[i].cpu)
            i = (i + 1) & (TABLE_SLOTS - 1);
        table[i] = (slot){cpu, sim};
        used++;
        sim = NULL;
    }
    pthread_mutex_unlock(&lock);
    if (sim) { /* full enough that probes would crawl: not mirrored */
        inside = 1;
        sim_free(sim);
        inside = 0;
    }
}

/* The sim allocation mirroring `cpu`, taken out of the table; NULL when
 * the block is not one of the mirrored. */
static void *forget(uintptr_t cpu)
{
    void *sim = NULL;
    pthread_mutex_lock(&lock);
    size_t i = slot_of(cpu);
    while (table[i].cpu && table[i].cpu != cpu)
        i = (i + 1) & (TABLE_SLOTS - 1);
    if (table[i].cpu) {
        sim = table[i].sim;
        table[i].cpu = 0;
        used--;
        size_t hole = i;
        for (size_t j = (i + 1) & (TABLE_SLOTS - 1); table[j].cpu;
             j = (j + 1) & (TABLE_SLOTS - 1)) {
            size_t home = slot_of(table[j].cpu);
            int between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (!between) {
                table[hole] = table[j];
                table[j].cpu = 0;
                hole = j;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return sim;
}

MIRROR_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    /* Threads may race to resolve it; they all store the same pointer. */
    static posix_memalign_fn resolved;
    posix_memalign_fn real = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
        __atomic_store_n(&resolved, real, __ATOMIC_RELEASE);
    }
    if (!real)
        return ENOMEM;
    int rc = real(out, alignment, size);
    if (rc != 0 || !*out || inside || alignment != C10_ALIGNMENT ||
        !__atomic_load_n(&mirroring, __ATOMIC_ACQUIRE))
        return rc; /* the allocator's own result, unchanged */
    void *sim = NULL;
    inside = 1;
    int st = sim_malloc(&sim, size ? size : 1, 0, 0);
    inside = 0;
    if (st == 0 && sim)
        remember((uintptr_t)*out, sim);
    return rc;
}

MIRROR_EXPORT void free(void *p)
{
    if (p && !inside && __atomic_load_n(&mirroring, __ATOMIC_ACQUIRE)) {
        void *sim = forget((uintptr_t)p);
        if (sim) {
            inside = 1;
            sim_free(sim);
            inside = 0;
        }
    }
    __libc_free(p);
}
