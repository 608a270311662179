/* alloc/observe_import.c: memory a process maps but did not allocate, or
 * maps a second time: another process's allocation opened by IPC
 * (cuIpcOpenMemHandle, hipIpcOpenMemHandle: NCCL's peer buffers among
 * them), a physical allocation imported from a shareable handle, a
 * multicast object, a further mapping of a physical allocation already
 * counted at its first mapping.
 *
 * None of it is the device's own memory: counting it would book one
 * buffer on every GPU that maps it.  So it has no event and no stats
 * here, only a record per mapping that the dump lists in the snapshot's
 * imported table (format 1.3), with the exporting device where the hooks
 * know it.
 *
 * Owns: the map of live imported mappings, base address -> record, whose
 * fields mean: size = bytes mapped, stream = the source device (as an
 * int64), category = the tdm_import_kind, device = the importing device.
 * Locks: the map's shard locks (ptrmap.h), taken inside an observe device
 * lock (observe.c: the importing device's, or at the unmap the first
 * device seen), so that the dump's cut, which holds every device lock,
 * copies the table at one instant.
 */
#include <string.h>

#include "alloc_internal.h"
#include "recorder.h"

static tdm__ptrmap imports;
static pthread_once_t imports_once = PTHREAD_ONCE_INIT;
static _Atomic int imports_ready;

static void imports_init(void)
{
    tdm__ptrmap_init(&imports);
    atomic_store_explicit(&imports_ready, 1, memory_order_release);
}

__attribute__((noinline)) void
tdm__alloc_observe_import(int device, const void *va, size_t size, int source_device,
                          int kind, unsigned skip)
{
    if (va == NULL || device < -1 || device > TDM__OBS_MAX_DEVICE || kind < 0 ||
        kind > TDM_IMPORT_KIND_MAX)
        return;
    pthread_once(&imports_once, imports_init);
    if (source_device < TDM_IMPORT_SOURCE_UNKNOWN || source_device > INT16_MAX)
        source_device = TDM_IMPORT_SOURCE_UNKNOWN;
    tdm__obs_use_device(device); /* the device is named in the snapshot */
    tdm__ptr_rec rec = {
        .size = size, .requested = size,
        .stream = (uint64_t)(int64_t)source_device,
        .device = (int16_t)device, .category = (uint8_t)kind,
    };
    if (tdm__rec_on()) {
        rec.stack_id = tdm__rec_alloc_stack(skip + 1);
        rec.alloc_time_ns = tdm__alloc_now_ns();
    }
    uint64_t key = (uint64_t)(uintptr_t)va;
    tdm__obs_lock(device);
    if (tdm__ptrmap_insert(&imports, key, &rec) == TDM_INVALID_ARGUMENT) {
        /* Its unmap went by unseen: the newer mapping replaces it. */
        tdm__ptr_rec stale;
        tdm__ptrmap_remove(&imports, key, &stale);
        tdm__ptrmap_insert(&imports, key, &rec);
    }
    tdm__obs_unlock(device);
    __asm__ volatile("" ::: "memory"); /* keep this frame out of tail calls */
}

tdm_status tdm__alloc_observe_unimport(const void *va)
{
    if (va == NULL || !atomic_load_explicit(&imports_ready, memory_order_acquire))
        return TDM_UNKNOWN_POINTER;
    int device = tdm__obs_lock_any();
    if (device == -2)
        return TDM_UNKNOWN_POINTER; /* no device seen: nothing imported */
    tdm__ptr_rec rec;
    tdm_status st = tdm__ptrmap_remove(&imports, (uint64_t)(uintptr_t)va, &rec);
    tdm__obs_unlock(device);
    return st;
}

void tdm__obs_import_collect(tdm__live_list *l)
{
    if (atomic_load_explicit(&imports_ready, memory_order_acquire))
        tdm__live_collect(l, &imports, 0);
}

void tdm__obs_import_visit(const tdm__state_visitor *v, tdm__live_list *l)
{
    if (!v->imported)
        return;
    tdm__live_sort(l);
    for (size_t i = 0; i < l->n; i++) {
        const tdm__ptr_rec *r = &l->items[i].rec;
        tdm_snap_imported m = {
            .device = r->device, .source_device = (int32_t)(int64_t)r->stream,
            .kind = r->category, .address = l->items[i].addr, .size = r->size,
            .stack_id = r->stack_id, .map_time_ns = r->alloc_time_ns,
        };
        v->imported(v->ctx, &m);
    }
}

void tdm__obs_import_forget(void)
{
    if (atomic_load_explicit(&imports_ready, memory_order_acquire))
        tdm__ptrmap_clear(&imports);
}

void tdm__obs_import_fork(int child)
{
    if (!atomic_load_explicit(&imports_ready, memory_order_relaxed))
        return;
    if (child)
        tdm__ptrmap_fork_child(&imports);
    else
        tdm__ptrmap_fork_sweep(&imports);
}
