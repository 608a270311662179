/* viewer-export/model/torch_segments.c: is this PyTorch's caching
 * allocator seen from below? (torch_segments.h).  One pass over the
 * snapshot's frame table, which holds exactly the frames of its recorded
 * stacks.  No state, no locks. */
#include "torch_segments.h"

#include <string.h>

/* Namespaces of PyTorch's caching allocators, as a mangled name spells
 * them ("_ZN3c104cuda20CUDACachingAllocator6Native...") and as a readable
 * one does. */
static const char *const allocator_names[] = {
    "3c104cuda20CUDACachingAllocator", "c10::cuda::CUDACachingAllocator::",
    "3c103hip19HIPCachingAllocator",   "c10::hip::HIPCachingAllocator::",
};

/* The cudaMallocAsync backend (CUDACachingAllocator::CudaMallocAsync). */
static const char *const async_names[] = {"15CudaMallocAsync", "::CudaMallocAsync::"};

/* Libraries that allocate device memory only through the caching
 * allocator: their base name up to ".so". */
static const char *const allocator_libraries[] = {"libc10_cuda.so", "libc10_hip.so"};

static int contains_any(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (strstr(s, list[i]))
            return 1;
    return 0;
}

static int library_is_allocators(const char *module)
{
    if (!module || !module[0])
        return 0;
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    for (size_t i = 0; i < sizeof allocator_libraries / sizeof *allocator_libraries; i++) {
        size_t n = strlen(allocator_libraries[i]);
        /* "libc10_cuda.so", "libc10_cuda.so.2.5" */
        if (strncmp(base, allocator_libraries[i], n) == 0 && (base[n] == 0 || base[n] == '.'))
            return 1;
    }
    return 0;
}

int tdm__torch_frame_kind(const tdm_snap_frame *f)
{
    const char *fn = f->function;
    if (contains_any(fn, async_names, sizeof async_names / sizeof *async_names) &&
        (contains_any(fn, allocator_names, sizeof allocator_names / sizeof *allocator_names) ||
         library_is_allocators(f->module)))
        return 2;
    if (contains_any(fn, allocator_names, sizeof allocator_names / sizeof *allocator_names))
        return 1;
    return library_is_allocators(f->module);
}

int tdm__torch_segments_seen(const tdm_snap *snap)
{
    const char *mode = snap->header.alloc_mode;
    if (!mode || strcmp(mode, "observe") != 0)
        return 0;
    int seen = 0;
    for (size_t i = 0; i < snap->frame_count; i++) {
        int k = tdm__torch_frame_kind(&snap->frames[i]);
        if (k == 2)
            return 0; /* the async backend: its allocations are tensors */
        seen |= k;
    }
    return seen;
}
