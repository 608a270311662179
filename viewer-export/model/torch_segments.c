/* viewer-export/model/torch_segments.c: is this PyTorch's caching
 * allocator seen from below? (torch_segments.h).  One pass over the
 * snapshot's frame table, which holds exactly the frames of its recorded
 * stacks.  No state, no locks. */
#define _GNU_SOURCE /* strcasestr */
#include "torch_segments.h"
#include "vendor.h"

#include <stdlib.h>
#include <string.h>

/* The cudaMallocAsync backend (CUDACachingAllocator::CudaMallocAsync). */
static const char *const async_names[] = {"15CudaMallocAsync", "::CudaMallocAsync::"};

static int contains_any(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (strstr(s, list[i]))
            return 1;
    return 0;
}

/* Whether `fn` names the scope of a vendor's PyTorch caching allocator
 * (vendors.def), as a mangled name spells it
 * ("_ZN3c104cuda20CUDACachingAllocator6Native...") or a readable one does. */
static int names_allocator(const char *fn)
{
    for (int v = 0; fn && v < TDM_VENDOR_COUNT; v++) {
        const tdm_vendor_info *row = tdm__vendor_info((tdm_vendor)v);
        if (row->torch_allocator &&
            (strstr(fn, row->torch_allocator_mangled) || strstr(fn, row->torch_allocator)))
            return 1;
    }
    return 0;
}

/* A module path's file name. */
static const char *module_base(const char *module)
{
    const char *slash = strrchr(module, '/');
    return slash ? slash + 1 : module;
}

static int library_is_allocators(const char *module)
{
    if (!module || !module[0])
        return 0;
    const char *base = module_base(module);
    /* Libraries that allocate device memory only through the caching
     * allocator (vendors.def's torch_library): "libc10_cuda.so",
     * "libc10_cuda.so.2.5". */
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        const char *lib = tdm__vendor_info((tdm_vendor)v)->torch_library;
        size_t n = lib ? strlen(lib) : 0;
        if (lib && strncmp(base, lib, n) == 0 && (base[n] == 0 || base[n] == '.'))
            return 1;
    }
    return 0;
}

int tdm__torch_frame_kind(const tdm_snap_frame *f)
{
    const char *fn = f->function;
    if (contains_any(fn, async_names, sizeof async_names / sizeof *async_names) &&
        (names_allocator(fn) || library_is_allocators(f->module)))
        return 2;
    if (names_allocator(fn))
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

/* ---- segments outside PyTorch's caching allocator ------------------------ */

struct tdm_foreign_range {
    uint64_t addr, size;
};

int tdm__foreign_segments_init(tdm_foreign_segments *f, const tdm_snap *snap, int device)
{
    *f = (tdm_foreign_segments){.snap = snap, .device = device, .all_nccl = 1};
    f->stack_kind = calloc(snap->stack_count ? snap->stack_count : 1, 1);
    return f->stack_kind ? 0 : -1;
}

void tdm__foreign_segments_free(tdm_foreign_segments *f)
{
    free(f->stack_kind);
    free(f->live);
    *f = (tdm_foreign_segments){0};
}

static int names_nccl(const char *s)
{
    return s && strcasestr(s, "nccl") != NULL;
}

/* Whether a frame is in one of PyTorch's libraries (libtorch*.so,
 * libc10*.so). */
static int in_torch_library(const tdm_snap_frame *fr)
{
    if (!fr->module || !fr->module[0])
        return 0;
    const char *base = module_base(fr->module);
    return strncmp(base, "libtorch", 8) == 0 || strncmp(base, "libc10", 6) == 0;
}

/* 1: PyTorch's caching allocator made the segment: a frame of its stack
 * is the allocator's, or, once the commands have hidden those frames as
 * allocation wrappers (stack_display.h), the innermost frame left is in
 * one of PyTorch's libraries (the allocator's caller: a tensor's empty, a
 * cuBLAS workspace); also when there is no stack to tell.  2: other code
 * (NCCL's buffers: the innermost frame is NCCL's own). */
static int stack_kind(tdm_foreign_segments *f, uint32_t id)
{
    const tdm_snap *s = f->snap;
    if (id == 0 || id >= s->stack_count)
        return 1;
    if (!f->stack_kind[id]) {
        const tdm_snap_stack *st = &s->stacks[id];
        int kind = st->depth && st->frames[0] < s->frame_count &&
                           in_torch_library(&s->frames[st->frames[0]])
                       ? 1
                       : 2;
        for (uint32_t k = 0; k < st->depth && kind == 2; k++)
            if (st->frames[k] < s->frame_count && tdm__torch_frame_kind(&s->frames[st->frames[k]]))
                kind = 1;
        f->stack_kind[id] = (uint8_t)kind;
    }
    return f->stack_kind[id];
}

static int stack_names_nccl(const tdm_snap *s, uint32_t id)
{
    const tdm_snap_stack *st = &s->stacks[id];
    for (uint32_t k = 0; k < st->depth; k++) {
        if (st->frames[k] >= s->frame_count)
            continue;
        const tdm_snap_frame *fr = &s->frames[st->frames[k]];
        if (names_nccl(fr->function) || names_nccl(fr->module))
            return 1;
    }
    return 0;
}

static void foreign_mapped(tdm_foreign_segments *f, const tdm_event *e)
{
    if (f->live_count == f->live_cap) {
        size_t cap = f->live_cap ? 2 * f->live_cap : 8;
        struct tdm_foreign_range *grown = realloc(f->live, cap * sizeof *grown);
        if (!grown)
            return; /* out of host memory: counted as PyTorch's, as before */
        f->live = grown;
        f->live_cap = cap;
    }
    f->live[f->live_count++] = (struct tdm_foreign_range){e->addr, e->size};
    f->count++;
    if (!stack_names_nccl(f->snap, e->stack_id))
        f->all_nccl = 0;
    f->bytes += (int64_t)e->size;
    if (f->bytes > f->peak)
        f->peak = f->bytes;
}

/* A free or unmap inside a foreign range takes its bytes off it. */
static void foreign_released(tdm_foreign_segments *f, const tdm_event *e)
{
    for (size_t i = 0; i < f->live_count; i++) {
        struct tdm_foreign_range *r = &f->live[i];
        if (e->addr < r->addr || e->addr - r->addr >= r->size)
            continue;
        uint64_t gone = e->size < r->size ? e->size : r->size;
        f->bytes -= (int64_t)gone;
        if (e->addr == r->addr) {
            r->addr += gone;
            r->size -= gone;
        } else {
            r->size -= gone; /* a tail, or a hole: the range only shrinks */
        }
        if (r->size == 0)
            f->live[i] = f->live[--f->live_count];
        return;
    }
}

void tdm__foreign_segments_advance(tdm_foreign_segments *f, int64_t seq)
{
    const tdm_snap *s = f->snap;
    for (; seq >= 0 && f->next <= (size_t)seq && f->next < s->event_count; f->next++) {
        const tdm_event *e = &s->events[f->next];
        if (e->device != f->device)
            continue;
        switch (e->action) {
        case TDM_ACTION_SEGMENT_ALLOC:
        case TDM_ACTION_SEGMENT_MAP:
            if (stack_kind(f, e->stack_id) == 2)
                foreign_mapped(f, e);
            break;
        case TDM_ACTION_SEGMENT_FREE:
        case TDM_ACTION_SEGMENT_UNMAP:
            if (f->live_count)
                foreign_released(f, e);
            break;
        default:
            break;
        }
    }
}
