/* hooks/preload/hip_pool.c: HIP's stream-ordered memory pools and the
 * memory processes share, as the hooks see them.
 *
 * Pools.  hipMallocAsync takes memory from the device's current pool and
 * hipFreeAsync gives it back to the pool, which keeps it up to its release
 * threshold (PyTorch's backend:cudaMallocAsync, hipified, sets UINT64_MAX:
 * everything) and releases the rest at the next synchronization.  The
 * pool's own counters (hipMemPoolAttrReservedMemCurrent and
 * UsedMemCurrent) say what it holds; the hooks read them after each call
 * that can change them (an async allocation, a free, hipStreamSynchronize,
 * hipDeviceSynchronize, hipMemPoolTrimTo, hipMemPoolDestroy) and book the
 * difference as the device's reserved memory (alloc/observe_pool.c).
 * Reading them is two host-side calls with no device work, made only once
 * a pool was seen in use: a program without stream-ordered allocations
 * pays one atomic load per synchronize.  hipDeviceSetMemPool is watched so
 * that cache mode leaves the program's own pool alone.
 *
 * Shared memory.  A mapping this process did not allocate (an IPC handle
 * opened, a physical allocation imported from a shareable handle) and a
 * further mapping of a physical allocation already counted are booked
 * apart as imported (alloc/observe_import.c), with the exporting device
 * where HIP says it; never on a device's own figures.  The handle tables
 * below say which is which at hipMemMap / hipMemUnmap (hip_hooks.c).
 *
 * Owns: the known pools (a small lock-free table), each device's current
 * pool and whether the program set it; the handle and mapping tables.
 * Locks: none for pools (atomics); one mutex per handle table (virtual
 * memory calls are rare, and no HIP call is made while it is held).
 */
#include "hip_hooks.h"
#include "pool_table.h"

#include <string.h>

#define MAX_DEVICES 64

static tdm__pool_table known;
static _Atomic(void *) current_pool[MAX_DEVICES];
static _Atomic int program_pool[MAX_DEVICES];

int tdm__hip_pool_query(hipMemPool_t pool, uint64_t *reserved, uint64_t *used)
{
    uint64_t r = 0, u = 0;
    if (tdm__hip_real.hipMemPoolGetAttribute == NULL ||
        tdm__hip_real.hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &r) !=
            hipSuccess ||
        tdm__hip_real.hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &u) !=
            hipSuccess)
        return 0;
    *reserved = r;
    *used = u;
    return 1;
}

hipMemPool_t tdm__hip_pool_current(int device)
{
    if (device < 0 || device >= MAX_DEVICES)
        return NULL;
    void *p = atomic_load_explicit(&current_pool[device], memory_order_acquire);
    if (p)
        return p;
    hipMemPool_t pool = NULL;
    if (tdm__hip_real.hipDeviceGetMemPool == NULL ||
        tdm__hip_real.hipDeviceGetMemPool(&pool, device) != hipSuccess)
        return NULL;
    void *expected = NULL; /* a hipDeviceSetMemPool meanwhile wins */
    atomic_compare_exchange_strong(&current_pool[device], &expected, (void *)pool);
    return atomic_load_explicit(&current_pool[device], memory_order_acquire);
}

/* At each dump (not an out-of-memory one): what every known pool holds
 * now, for releases the hooks did not see (event waits, HIP trimming on
 * its own). */
static void book_at_dump(void)
{
    tdm__hip_pool_book_all();
}

void tdm__hip_pool_remember(hipMemPool_t pool, int device)
{
    static _Atomic int asked;
    if (!atomic_load_explicit(&asked, memory_order_relaxed) &&
        !atomic_exchange_explicit(&asked, 1, memory_order_relaxed))
        tdm__alloc_observe_refresh_at_dump(book_at_dump);
    tdm__pool_table_put(&known, (void *)pool, device);
}

int tdm__hip_pool_known(int i, hipMemPool_t *pool, int *device)
{
    void *p;
    if (!tdm__pool_table_at(&known, i, &p, device))
        return 0;
    *pool = p;
    return 1;
}

int tdm__hip_program_pool(int device)
{
    return device >= 0 && device < MAX_DEVICES &&
           atomic_load_explicit(&program_pool[device], memory_order_relaxed);
}

int tdm__hip_pointer_device(const void *p, int otherwise)
{
    int ordinal = -1;
    if (tdm__hip_real.hipPointerGetAttribute == NULL ||
        tdm__hip_real.hipPointerGetAttribute(&ordinal, HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                             (hipDeviceptr_t)p) != hipSuccess ||
        ordinal < 0)
        return otherwise;
    return ordinal;
}

/* ---- pools -------------------------------------------------------------------- */

TDM_HOOK_API hipError_t hipMemPoolTrimTo(hipMemPool_t mem_pool, size_t min_bytes_to_hold)
{
    HOOK_PROLOGUE(hipMemPoolTrimTo, mem_pool, min_bytes_to_hold);
    hipError_t r = CALL_REAL(hipMemPoolTrimTo, mem_pool, min_bytes_to_hold);
    if (r == hipSuccess) {
        int device = tdm__pool_table_device_of(&known, (void *)mem_pool);
        tdm__hip_pool_book(mem_pool, device >= 0 ? device : tdm__hip_current_device());
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipMemPoolDestroy(hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipMemPoolDestroy, mem_pool);
    hipError_t r = CALL_REAL(hipMemPoolDestroy, mem_pool);
    int device = tdm__pool_table_device_of(&known, (void *)mem_pool);
    if (r == hipSuccess && device >= 0) { /* what it held goes with it */
        tdm__pool_table_forget(&known, (void *)mem_pool);
        tdm__alloc_observe_pool(device, (uint64_t)(uintptr_t)mem_pool, 0, 0, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipDeviceSetMemPool(int device, hipMemPool_t mem_pool)
{
    HOOK_PROLOGUE(hipDeviceSetMemPool, device, mem_pool);
    hipError_t r = CALL_REAL(hipDeviceSetMemPool, device, mem_pool);
    if (r == hipSuccess && device >= 0 && device < MAX_DEVICES) {
        hipMemPool_t def = NULL;
        int own = tdm__hip_real.hipDeviceGetDefaultMemPool == NULL ||
                  tdm__hip_real.hipDeviceGetDefaultMemPool(&def, device) != hipSuccess ||
                  def != mem_pool;
        atomic_store_explicit(&current_pool[device], (void *)mem_pool, memory_order_release);
        atomic_store_explicit(&program_pool[device], own, memory_order_relaxed);
    }
    tdm__hook_leave();
    return r;
}

/* A synchronization lets the pools release what exceeds their threshold.
 * Until a pool was seen in use, nothing but one atomic load. */
#define POOLS_SEEN() (tdm__pool_table_any(&known))

TDM_HOOK_API hipError_t hipStreamSynchronize(hipStream_t stream)
{
    resolve();
    if (!POOLS_SEEN())
        return CALL_REAL(hipStreamSynchronize, stream);
    HOOK_PROLOGUE(hipStreamSynchronize, stream);
    hipError_t r = CALL_REAL(hipStreamSynchronize, stream);
    tdm__hip_pool_book_all();
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipDeviceSynchronize(void)
{
    resolve();
    if (!POOLS_SEEN())
        return CALL_REAL(hipDeviceSynchronize);
    HOOK_PROLOGUE(hipDeviceSynchronize);
    hipError_t r = CALL_REAL(hipDeviceSynchronize);
    tdm__hip_pool_book_all();
    tdm__hook_leave();
    return r;
}

/* ---- memory other processes made ---------------------------------------------- */

TDM_HOOK_API hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle,
                                            unsigned int flags)
{
    HOOK_PROLOGUE(hipIpcOpenMemHandle, devPtr, handle, flags);
    hipError_t r = CALL_REAL(hipIpcOpenMemHandle, devPtr, handle, flags);
    if (r == hipSuccess && devPtr != NULL && *devPtr != NULL) {
        hipDeviceptr_t base = NULL;
        size_t size = 0;
        if (tdm__hip_real.hipMemGetAddressRange == NULL ||
            tdm__hip_real.hipMemGetAddressRange(&base, &size, *devPtr) != hipSuccess)
            size = 0;
        tdm__alloc_observe_import(tdm__hip_current_device(), *devPtr, size,
                                  tdm__hip_pointer_device(*devPtr, TDM_IMPORT_SOURCE_UNKNOWN),
                                  TDM_IMPORT_IPC, TDM_HOOK_SKIP);
    }
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API hipError_t hipIpcCloseMemHandle(void *devPtr)
{
    HOOK_PROLOGUE(hipIpcCloseMemHandle, devPtr);
    tdm__alloc_observe_unimport(devPtr);
    hipError_t r = CALL_REAL(hipIpcCloseMemHandle, devPtr);
    tdm__hook_leave();
    return r;
}

/* The imported handle maps as imported memory (hip_hooks.c's hipMemMap),
 * from the device HIP says it lives on. */
TDM_HOOK_API hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                        void *osHandle,
                                                        hipMemAllocationHandleType shHandleType)
{
    HOOK_PROLOGUE(hipMemImportFromShareableHandle, handle, osHandle, shHandleType);
    hipError_t r = CALL_REAL(hipMemImportFromShareableHandle, handle, osHandle, shHandleType);
    if (r == hipSuccess && handle != NULL) {
        hipMemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        int source = TDM_IMPORT_SOURCE_UNKNOWN;
        if (tdm__hip_real.hipMemGetAllocationPropertiesFromHandle &&
            tdm__hip_real.hipMemGetAllocationPropertiesFromHandle(&prop, *handle) == hipSuccess)
            source = prop.location.type == hipMemLocationTypeDevice ? prop.location.id
                                                                    : TDM_IMPORT_SOURCE_UNKNOWN;
        tdm__hip_handle_put(*handle, source, TDM_IMPORT_SHAREABLE);
    }
    tdm__hook_leave();
    return r;
}

/* ---- virtual-memory handles and mappings -----------------------------------------
 * Two tables, open addressing on the key, linear probing, deletion by
 * backward shift: physical handle -> (device, origin, live mappings), and
 * mapped address -> handle (hipMemUnmap names only the address).  A full
 * table forgets (a map then books as one whose handle tidemark never saw
 * made: on the handle's device, as HIP says it). */

#define SLOTS 4096
typedef struct slot {
    uint64_t key; /* 0 = empty */
    uint64_t handle;
    int device, origin, maps;
} slot;
typedef struct table {
    pthread_mutex_t lock;
    slot s[SLOTS];
    int count;
} table;
static table handles = {.lock = PTHREAD_MUTEX_INITIALIZER};
static table mappings = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t home_of(uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 52) & (SLOTS - 1);
}

/* The slot of key (t->lock held), or the empty one where it would go. */
static slot *find(table *t, uint64_t key)
{
    size_t i = home_of(key);
    while (t->s[i].key != 0 && t->s[i].key != key)
        i = (i + 1) & (SLOTS - 1);
    return &t->s[i];
}

/* The slot of key, made when absent (NULL when the table is full). */
static slot *find_or_add(table *t, uint64_t key)
{
    slot *e = find(t, key);
    if (e->key == 0) {
        if (t->count >= SLOTS - 1)
            return NULL;
        t->count++;
        *e = (slot){.key = key};
    }
    return e;
}

static void erase(table *t, slot *e)
{
    size_t hole = (size_t)(e - t->s);
    for (size_t j = (hole + 1) & (SLOTS - 1); t->s[j].key != 0; j = (j + 1) & (SLOTS - 1)) {
        size_t home = home_of(t->s[j].key);
        if (((j - home) & (SLOTS - 1)) >= ((j - hole) & (SLOTS - 1))) {
            t->s[hole] = t->s[j];
            hole = j;
        }
    }
    t->s[hole].key = 0;
    t->count--;
}

static uint64_t key_of(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

void tdm__hip_handle_put(hipMemGenericAllocationHandle_t h, int device, int origin)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&handles.lock);
    slot *e = find_or_add(&handles, key_of(h));
    if (e) {
        e->device = device;
        e->origin = origin;
        e->maps = 0;
    }
    pthread_mutex_unlock(&handles.lock);
}

void tdm__hip_handle_drop(hipMemGenericAllocationHandle_t h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&handles.lock);
    slot *e = find(&handles, key_of(h));
    if (e->key == key_of(h))
        erase(&handles, e);
    pthread_mutex_unlock(&handles.lock);
}

int tdm__hip_handle_map(hipMemGenericAllocationHandle_t h, const void *va, int *device,
                        int *origin)
{
    int prior = -1;
    pthread_mutex_lock(&handles.lock);
    slot *e = find(&handles, key_of(h));
    if (h != NULL && e->key == key_of(h)) {
        prior = e->maps++;
        *device = e->device;
        *origin = e->origin;
    }
    pthread_mutex_unlock(&handles.lock);
    pthread_mutex_lock(&mappings.lock);
    slot *m = va ? find_or_add(&mappings, key_of(va)) : NULL;
    if (m)
        m->handle = key_of(h);
    pthread_mutex_unlock(&mappings.lock);
    return prior;
}

void tdm__hip_handle_unmap(const void *va)
{
    uint64_t h = 0;
    pthread_mutex_lock(&mappings.lock);
    slot *m = find(&mappings, key_of(va));
    if (va != NULL && m->key == key_of(va)) {
        h = m->handle;
        erase(&mappings, m);
    }
    pthread_mutex_unlock(&mappings.lock);
    if (h == 0)
        return;
    pthread_mutex_lock(&handles.lock);
    slot *e = find(&handles, h);
    if (e->key == h && e->maps > 0)
        e->maps--;
    pthread_mutex_unlock(&handles.lock);
}
