/* tests/hooks/infra/fake_hook.c: a test-only interposer of the fake vendor
 * (fake_vendor.h), built with hooks/preload/common.c into
 * libtdmfake_preload.so exactly as the vendor hooks are built into
 * libtidemark_preload.so.  It follows runtime/preload.h to the letter, so
 * the tests of tests/hooks/infra/ exercise the shared machinery (guard,
 * real-symbol lookups, versioned lookups, mode) and both modes end to end
 * without any vendor:
 *   observe  call the vendor, book with tdm__alloc_observe_*; errors pass
 *            through unchanged;
 *   cache    serve from tidemark's caching allocator over a provider made
 *            of the real (un-hooked) vendor functions.
 * Lock: none of its own; the real pointers are resolved once (atomics). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "fake_vendor.h"
#include "preload.h"
#include "provider.h"

typedef fv_result (*malloc_fn)(void **, size_t);
typedef fv_result (*malloc_async_fn)(void **, size_t, fv_stream);
typedef fv_result (*calloc_fn)(void **, size_t, size_t);
typedef fv_result (*free_fn)(void *);
typedef fv_result (*info_fn)(size_t *, size_t *);
typedef fv_result (*range_fn)(void *, size_t);

static struct {
    malloc_fn malloc_v2, malloc_v1;
    malloc_async_fn malloc_async;
    calloc_fn calloc;
    free_fn free;
    info_fn mem_get_info;
    range_fn map, unmap;
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
    real.malloc_v2 = (malloc_fn)tdm__hook_real_versioned("fv_malloc", "FAKEV_2.0");
    real.malloc_v1 = (malloc_fn)tdm__hook_real_versioned("fv_malloc", "FAKEV_1.0");
    real.malloc_async = (malloc_async_fn)tdm__hook_real("fv_malloc_async");
    real.calloc = (calloc_fn)tdm__hook_real("fv_calloc");
    real.free = (free_fn)tdm__hook_real("fv_free");
    real.mem_get_info = (info_fn)tdm__hook_real("fv_mem_get_info");
    real.map = (range_fn)tdm__hook_real("fv_map");
    real.unmap = (range_fn)tdm__hook_real("fv_unmap");
}

static inline void need_real(void)
{
    pthread_once(&real_once, resolve);
}

/* Resolved at load too, before the program can start a thread or fork:
 * ThreadSanitizer's pthread_once is not reset in a child, so a child
 * forked while another thread was resolving would wait for it for good. */
__attribute__((constructor)) static void resolve_at_load(void)
{
    need_real();
}

/* ---- the provider of cache mode: the real vendor functions ---- */

static tdm_status prov_alloc(tdm_provider *p, int device, size_t size,
                             tdm_stream stream, void **out)
{
    fv_result r = real.malloc_async(out, size, (fv_stream)stream);
    return r == FV_SUCCESS ? TDM_OK
           : r == FV_ERROR_OUT_OF_MEMORY ? TDM_OUT_OF_MEMORY : TDM_VENDOR_ERROR;
}

static tdm_status prov_free(tdm_provider *p, int device, void *ptr, size_t size)
{
    return real.free(ptr) == FV_SUCCESS ? TDM_OK : TDM_VENDOR_ERROR;
}

static tdm_status prov_mem_info(tdm_provider *p, int device, size_t *free_bytes,
                                size_t *total_bytes)
{
    return real.mem_get_info(free_bytes, total_bytes) == FV_SUCCESS
               ? TDM_OK : TDM_VENDOR_ERROR;
}

static void prov_name(tdm_provider *p, int device, char *buf, size_t len)
{
    strncpy(buf, "Fake Vendor Device 0", len - 1);
    buf[len - 1] = '\0';
}

static void prov_destroy(tdm_provider *p) { (void)p; }

/* The made-up vendor's devices are described as CUDA's: a snapshot names
 * only the vendors of base/vendors.def. */
static tdm_provider provider = {
    .vendor = TDM_VENDOR_CUDA, .device_count = 1, .alloc = prov_alloc,
    .free = prov_free, .mem_info = prov_mem_info, .device_name = prov_name,
    .destroy = prov_destroy,
};

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static void start_cache(void)
{
    (void)tdm__alloc_use_provider(&provider);
}

/* Described at the first booking; describing twice is harmless.  Not
 * pthread_once: ThreadSanitizer's own pthread_once is not reset in a
 * child, so a child forked while another thread was describing (the first
 * allocation of forkstress) would wait for it for good. */
static _Atomic int described;
static void describe_device(void)
{
    if (atomic_load_explicit(&described, memory_order_acquire))
        return;
    size_t total = 0;
    real.mem_get_info(NULL, &total);
    tdm__alloc_observe_device(0, TDM_VENDOR_CUDA, "Fake Vendor Device 0", total);
    atomic_store_explicit(&described, 1, memory_order_release);
}

/* ---- the hooks ---- */

static fv_result status_to_fv(tdm_status st)
{
    return st == TDM_OK ? FV_SUCCESS
           : st == TDM_OUT_OF_MEMORY ? FV_ERROR_OUT_OF_MEMORY : FV_ERROR_INVALID;
}

/* One allocation hook for every allocating entry point; noinline so that
 * each hook is exactly TDM_HOOK_SKIP frames above the program. */
static __attribute__((noinline)) fv_result
hooked_alloc(void **ptr, size_t size, fv_stream stream,
             fv_result (*call)(void **, size_t, fv_stream, const void *),
             const void *arg);

static fv_result call_v2(void **p, size_t n, fv_stream s, const void *arg)
{
    (void)s;
    (void)arg;
    return real.malloc_v2(p, n);
}

static fv_result call_async(void **p, size_t n, fv_stream s, const void *arg)
{
    (void)arg;
    return real.malloc_async(p, n, s);
}

static fv_result call_calloc(void **p, size_t n, fv_stream s, const void *arg)
{
    (void)s;
    const size_t *count = arg;
    return real.calloc(p, count[0], count[1]);
}

/* The booking around one vendor call.  Frames between the program and
 * tdm__alloc_*: the fv_* hook, hooked_alloc and book. */
#define SKIP 3

static __attribute__((noinline)) fv_result
book(void **ptr, size_t size, fv_stream stream,
     fv_result (*call)(void **, size_t, fv_stream, const void *), const void *arg)
{
    tdm__hook_mode mode = tdm__hook_mode_get();
    if (mode == TDM__HOOK_CACHE && call != call_calloc) {
        pthread_once(&cache_once, start_cache);
        tdm_status st = tdm__alloc_malloc(ptr, size, 0, (tdm_stream)stream, SKIP);
        __asm__ volatile("" ::: "memory");
        return status_to_fv(st);
    }
    fv_result r = call(ptr, size, stream, arg);
    if (mode == TDM__HOOK_OFF) {
        /* nothing to book */
    } else if (r == FV_SUCCESS && *ptr) {
        describe_device();
        tdm__alloc_observe_alloc(0, *ptr, size, (tdm_stream)stream, SKIP);
    } else if (r == FV_ERROR_OUT_OF_MEMORY) {
        size_t free_bytes = 0;
        real.mem_get_info(&free_bytes, NULL);
        tdm__alloc_observe_oom(0, size, free_bytes, (tdm_stream)stream, SKIP);
    }
    __asm__ volatile("" ::: "memory");
    return r;
}

static fv_result hooked_alloc(void **ptr, size_t size, fv_stream stream,
                              fv_result (*call)(void **, size_t, fv_stream,
                                                const void *),
                              const void *arg)
{
    need_real();
    if (!tdm__hook_enter())
        return call(ptr, size, stream, arg);
    fv_result r = book(ptr, size, stream, call, arg);
    tdm__hook_leave();
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result fv_malloc(void **ptr, size_t size)
{
    fv_result r = hooked_alloc(ptr, size, NULL, call_v2, NULL);
    __asm__ volatile("" ::: "memory");
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result
fv_malloc_async(void **ptr, size_t size, fv_stream stream)
{
    fv_result r = hooked_alloc(ptr, size, stream, call_async, NULL);
    __asm__ volatile("" ::: "memory");
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result
fv_calloc(void **ptr, size_t n, size_t size)
{
    size_t count[2] = {n, size};
    fv_result r = hooked_alloc(ptr, n * size, NULL, call_calloc, count);
    __asm__ volatile("" ::: "memory");
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result fv_free(void *ptr)
{
    need_real();
    if (!tdm__hook_enter())
        return real.free(ptr);
    fv_result r;
    tdm__hook_mode mode = tdm__hook_mode_get();
    if (mode == TDM__HOOK_CACHE && tdm__alloc_free(ptr, TDM_HOOK_SKIP) == TDM_OK) {
        r = FV_SUCCESS; /* back in the cache */
    } else {
        /* Booked before the vendor gets the memory back (alloc.h). */
        if (mode != TDM__HOOK_OFF)
            (void)tdm__alloc_observe_free(ptr, 0, TDM_HOOK_SKIP);
        r = real.free(ptr);
    }
    tdm__hook_leave();
    __asm__ volatile("" ::: "memory");
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result fv_map(void *va, size_t size)
{
    need_real();
    if (!tdm__hook_enter())
        return real.map(va, size);
    fv_result r = real.map(va, size);
    if (r == FV_SUCCESS && tdm__hook_mode_get() != TDM__HOOK_OFF)
        tdm__alloc_observe_map(0, va, size, TDM_HOOK_SKIP);
    tdm__hook_leave();
    __asm__ volatile("" ::: "memory");
    return r;
}

TDM_HOOK_API __attribute__((noinline)) fv_result fv_unmap(void *va, size_t size)
{
    need_real();
    if (!tdm__hook_enter())
        return real.unmap(va, size);
    if (tdm__hook_mode_get() != TDM__HOOK_OFF)
        (void)tdm__alloc_observe_unmap(va, size, TDM_HOOK_SKIP);
    fv_result r = real.unmap(va, size);
    tdm__hook_leave();
    __asm__ volatile("" ::: "memory");
    return r;
}

/* What the tests ask of common.c's lookups directly (fake_app selftest):
 * bit 0: the versioned lookups found two different functions;
 * bit 1: the v1 one is the vendor's FAKEV_1.0 variant (it counts v1_calls);
 * bit 2: tdm__hook_real finds the vendor's default version, not this hook;
 * bit 3: the real dlsym on RTLD_DEFAULT finds this hook (it interposes);
 * bit 4: the guard: enter, nested enter refused, leave, enter again;
 * bit 5: a name nobody defines gives NULL. */
/* A nested hook is deeper on the stack than the one that entered. */
static __attribute__((noinline)) int enter_deeper(void)
{
    volatile char pad[64];
    pad[0] = 0;
    int r = tdm__hook_enter();
    __asm__ volatile("" ::: "memory");
    return r + pad[0];
}

TDM_HOOK_API int fvhook_selftest(void);
TDM_HOOK_API int fvhook_selftest(void)
{
    need_real();
    int bits = 0;
    if (real.malloc_v1 && real.malloc_v2 && real.malloc_v1 != real.malloc_v2)
        bits |= 1;
    /* The vendor is never linked: its counters are looked up too. */
    fv_counters (*counters)(void) =
        (fv_counters(*)(void))tdm__hook_real("fv_get_counters");
    fv_counters before = counters();
    void *p = NULL;
    if (real.malloc_v1 && real.malloc_v1(&p, 512) == FV_SUCCESS) {
        if (counters().v1_calls == before.v1_calls + 1)
            bits |= 2;
        real.free(p);
    }
    if (tdm__hook_real("fv_malloc") == (void *)real.malloc_v2)
        bits |= 4;
    if (tdm__hook_real_dlsym(RTLD_DEFAULT, "fv_malloc") == (void *)&fv_malloc)
        bits |= 8;
    if (tdm__hook_enter()) {
        int nested = enter_deeper();
        tdm__hook_leave();
        int again = tdm__hook_enter();
        if (again)
            tdm__hook_leave();
        if (!nested && again)
            bits |= 16;
    }
    if (tdm__hook_real("fv_no_such_function") == NULL)
        bits |= 32;
    return bits;
}
