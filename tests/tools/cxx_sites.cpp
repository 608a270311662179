// tests/tools/cxx_sites.cpp: a C++ program whose allocation sites have
// the names C++ and the optimizer give functions, for the readers' tests
// (tests/cli/test_cxx_names.sh): tdm_malloc called from a namespaced
// function template (a mangled name) and from a static helper the
// compiler clones at -O2 (a constant argument and a struct passed by
// reference of which one member is read: .constprop / .isra copies), and
// from a member function always inlined into its caller (an inline frame
// of its own, before the function it was inlined into).
#include <cstdio>
#include <cstdlib>

#include "tidemark.h"

namespace shapes {

template <typename T>
__attribute__((noinline)) void *alloc_tensor(std::size_t elements, int device)
{
    void *p = nullptr;
    if (tdm_malloc(&p, elements * sizeof(T), device, 0) != TDM_OK) {
        std::fprintf(stderr, "cxx_sites: tdm_malloc failed\n");
        std::exit(1);
    }
    return p;
}

} // namespace shapes

struct request {
    std::size_t bytes;
    const char *why; // never read below: IPA-SRA passes `bytes` alone
    int flags;
};

// Static, called with device 0 from every caller, only r.bytes read: gcc
// -O2 makes a copy of it with the device folded in and the struct
// scalarized (pool_alloc.constprop.0.isra.0 or similar).
static __attribute__((noinline)) void *pool_alloc(const request &r, int device)
{
    void *p = nullptr;
    if (tdm_malloc(&p, r.bytes, device, 0) != TDM_OK) {
        std::fprintf(stderr, "cxx_sites: tdm_malloc failed\n");
        std::exit(1);
    }
    return p;
}

namespace arena {

struct buffer {
    void *data;
    // Always inlined into make_buffer: its tdm_malloc call returns into
    // make_buffer's code, where the debug information still names it.
    inline __attribute__((always_inline)) void grow(std::size_t bytes)
    {
        if (tdm_malloc(&data, bytes, 0, 0) != TDM_OK) {
            std::fprintf(stderr, "cxx_sites: tdm_malloc failed\n");
            std::exit(1);
        }
    }
};

} // namespace arena

__attribute__((noinline)) void make_buffer(void **slot)
{
    arena::buffer b;
    b.grow(5u << 20); // 5 MiB
    *slot = b.data;
}

// The callers store what they got (no `return f()`), so that -O2 keeps
// their frames instead of jumping to the allocator (a sibling call).
__attribute__((noinline)) void make_weights(void **slot)
{
    *slot = shapes::alloc_tensor<float>(1 << 20, 0); // 4 MiB
}

__attribute__((noinline)) void make_embeddings(void **slot)
{
    *slot = shapes::alloc_tensor<double>(1 << 18, 0); // 2 MiB
}

__attribute__((noinline)) void make_workspace(void **slot)
{
    request r = {3 << 20, "workspace", 0}; // 3 MiB
    *slot = pool_alloc(r, 0);
}

__attribute__((noinline)) void make_scratch(void **slot)
{
    request r = {1 << 20, "scratch", 1}; // 1 MiB
    *slot = pool_alloc(r, 0);
}

int main()
{
    void *held[5];
    make_weights(&held[0]);
    make_embeddings(&held[1]);
    make_workspace(&held[2]);
    make_scratch(&held[3]);
    make_buffer(&held[4]);
    std::printf("cxx_sites: 5 allocations live\n");
    for (void *p : held)
        tdm_free(p);
    return 0;
}
