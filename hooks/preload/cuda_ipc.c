/* hooks/preload/cuda_ipc.c: which allocations cache mode leaves to the
 * CUDA driver because their memory may be exported over CUDA IPC.
 *
 * An IPC handle (cuIpcGetMemHandle, and cudaIpcGetMemHandle, which
 * reaches it) names the driver allocation that contains the pointer, and
 * the peer's cuIpcOpenMemHandle returns that allocation's base.  A block
 * of one of the cache's segments is not an allocation of its own: the
 * peer would map the segment.  The export comes after the allocation, too
 * late to choose where the block lives, so the allocation is recognised
 * when it is made, by the object that makes it:
 *
 *   - an object that can call the export: its dynamic symbol table
 *     imports cudaIpcGetMemHandle or cuIpcGetMemHandle (elf_imports.c,
 *     read from the loaded image once per object).  A program or library
 *     linked with the shared libcudart that shares its cudaMalloc buffers
 *     is one, and so is PyTorch's libc10_cuda;
 *   - NCCL, always (its legacy P2P transport, active with
 *     NCCL_CUMEM_ENABLE=0: ncclCudaCalloc, then cudaIpcGetMemHandle of
 *     that buffer, opened by the peer with no offset).  NCCL links its own
 *     static cudart, whose calls import nothing;
 *   - what TIDEMARK_CONF's `ipc_libraries` names: any other object with a
 *     static cudart (nvcc's default for programs).  libcudart_static.a is
 *     one object, so every program linked with it carries
 *     cudaIpcGetMemHandle, hidden and in no dynamic table, whether it calls
 *     it or not: nothing in the loaded image tells an exporter apart.
 *
 * What such an object allocates the driver serves, as in observe mode, so
 * its handles name exactly its buffers.  The calling object is found once
 * per call site (cuda_runtime_real.c's table of call sites, one hash probe
 * after that).
 *
 * What is left, a cached block exported by another object than the one
 * that allocated it, or by an object with a static cudart nobody named, is
 * refused at the export when it is not at its segment's base
 * (cuda_pool.c): no handle can name it, and refusing is the one answer
 * that never hands the peer the wrong memory.
 *
 * Owns: nothing but the once-only stderr note.  Lock: none.
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "elf_imports.h"

/* Whether `file`'s name starts with `name` (the first `len` bytes). */
static int starts_with(const char *file, const char *name, size_t len)
{
    return len > 0 && strncmp(file, name, len) == 0;
}

int tdm__cuda_ipc_imports_export(const struct dl_phdr_info *info)
{
    static const char *const exports[] = {"cudaIpcGetMemHandle", "cuIpcGetMemHandle"};
    return tdm__elf_imports_any(info, exports, sizeof exports / sizeof exports[0]);
}

int tdm__cuda_ipc_library(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    if (starts_with(file, "libnccl", strlen("libnccl")))
        return 1;
    /* Items joined by ':', checked by runtime/config.c (none empty). */
    for (const char *item = tdm__autoinit_ipc_libraries(); *item != '\0';) {
        size_t len = strcspn(item, ":");
        if (starts_with(file, item, len))
            return 1;
        item += len + (item[len] == ':');
    }
    return 0;
}

void tdm__cuda_ipc_note(const void *caller)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&said))
        return;
    Dl_info info;
    const char *name = dladdr(caller, &info) && info.dli_fname ? info.dli_fname : "?";
    const char *slash = strrchr(name, '/');
    fprintf(stderr,
            "tidemark: mode=cache: %s exports its CUDA allocations over IPC; the driver "
            "serves what it allocates (observed), so that each IPC handle names its "
            "buffer\n",
            slash ? slash + 1 : name);
}
