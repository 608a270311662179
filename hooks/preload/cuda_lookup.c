/* hooks/preload/cuda_lookup.c: how CUDA programs reach the driver, and
 * how tidemark gets in between: dlsym, cuGetProcAddress(_v2), and the
 * real functions behind every wrapper.
 *
 * libcudart (shared, or linked statically into the program as nvcc does
 * by default) never calls exported driver symbols: it dlopens
 * libcuda.so.1, looks up "cuGetProcAddress_v2" with dlsym, asks it for
 * "cuGetProcAddress" itself, then for every entry point by base name +
 * version (+ CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for _ptsz
 * twins).  PyTorch reaches cuMemCreate & co. the same way through
 * cudaGetDriverEntryPoint*.  So:
 *   - dlsym is interposed; a lookup of either resolver (on any handle but
 *     RTLD_NEXT) returns our resolver, and a lookup of a hooked entry point
 *     by its exported name ("cuMemAlloc_v2" on the libcuda handle, as
 *     numba and XLA's driver stubs do) returns our wrapper of what libc
 *     found.  Every other lookup is a tail jump
 *     into libc's dlsym (an assembly trampoline on x86-64), so libc still
 *     sees the program's return address: RTLD_NEXT and the caller's local
 *     scope keep working for everyone else (sanitizers, other preloads);
 *   - our resolvers call the driver's, then tdm__cuda_wrap() replaces the
 *     pointer by our wrapper of exactly the variant the driver chose, by
 *     (base name, version, flags), and hands "cuGetProcAddress" back as
 *     ourselves so later lookups come here too;
 *   - a pointer into this library is never wrapped (a driver not linked
 *     -Bsymbolic may hand back our own exported symbol: wrapping it would
 *     make the wrapper call itself);
 *   - a version newer than the headers tidemark was built with is wrapped
 *     only when the driver gives the same function for our version (a
 *     newer variant with another prototype is left alone).
 * With TIDEMARK_CONF off, nothing is wrapped.
 *
 * Real functions: one slot per variant (tdm__cuda_real_fn), filled by the
 * first route that finds the driver's function; otherwise, once, from the
 * exported symbols of libcuda.so.1 (RTLD_NEXT, or the handle of the
 * loaded library).  Lock: none; slots are atomics, set once (compare and
 * swap from NULL).
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include <dlfcn.h>
#include <string.h>

#undef cuGetProcAddress

_Atomic(void *) tdm__cuda_real_fn[TDM__CV_COUNT];

void tdm__cuda_set_real(int v, void *fn)
{
    void *expected = NULL;
    if (fn && !tdm__cuda_is_ours(fn))
        atomic_compare_exchange_strong(&tdm__cuda_real_fn[v], &expected, fn);
}

int tdm__cuda_is_ours(const void *p)
{
    static _Atomic(void *) self_base;
    Dl_info info;
    void *base = atomic_load_explicit(&self_base, memory_order_relaxed);
    if (base == NULL) {
        if (!dladdr((void *)tdm__cuda_is_ours, &info))
            return 0;
        base = info.dli_fbase;
        atomic_store_explicit(&self_base, base, memory_order_relaxed);
    }
    return dladdr(p, &info) && info.dli_fbase == base;
}

/* ---- real functions from libcuda's exported symbols -------------------- */

TDM_CUDA_HIDDEN void *tdm__cuda_lib(void);

/* The loaded driver library (not opened by us unless it has to be); NULL
 * when there is none. */
void *tdm__cuda_lib(void)
{
    static _Atomic(void *) lib;
    void *h = atomic_load_explicit(&lib, memory_order_acquire);
    if (h)
        return h;
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        void *expected = NULL;
        if (!atomic_compare_exchange_strong(&lib, &expected, h))
            dlclose(h), h = expected; /* another thread won; one reference kept */
    }
    return h;
}

static _Atomic int resolved;

/* No lock: dlsym takes the loader's lock, and a library constructor
 * running under that lock may call a wrapper; threads racing here do the
 * same lookups and store the same pointers. */
void *tdm__cuda_resolve_slow(int v)
{
    if (!atomic_load_explicit(&resolved, memory_order_acquire)) {
        void *lib = NULL;
        int found_lib = 0;
        for (int i = 0; i < TDM__CV_COUNT; i++) {
            if (atomic_load(&tdm__cuda_real_fn[i]))
                continue;
            const char *name = tdm__cuda_variants[i].name;
            void *p = tdm__hook_real(name);
            if (p == NULL) {
                if (lib == NULL)
                    lib = tdm__cuda_lib();
                p = lib ? tdm__hook_real_dlsym(lib, name) : NULL;
            }
            found_lib |= p != NULL || lib != NULL;
            tdm__cuda_set_real(i, p);
        }
        /* Without any driver in the process, try again next time. */
        if (found_lib)
            atomic_store_explicit(&resolved, 1, memory_order_release);
    }
    return atomic_load_explicit(&tdm__cuda_real_fn[v], memory_order_acquire);
}

/* ---- choosing the variant ------------------------------------------------ */

/* The driver's pointer for (symbol, CUDA_VERSION, flags) is the one it gave
 * for `version`: nothing newer than what our headers describe. */
static int same_as_known_version(const char *symbol, void *fn, cuuint64_t flags)
{
    PFN_cuGetProcAddress_v12000 gpa =
        (PFN_cuGetProcAddress_v12000)tdm__cuda_real(TDM__CV_cuGetProcAddress_v2);
    void *known = NULL;
    CUdriverProcAddressQueryResult q;
    return gpa && gpa(symbol, &known, CUDA_VERSION, flags, &q) == CUDA_SUCCESS &&
           known == fn;
}

void tdm__cuda_wrap(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (symbol == NULL || pfn == NULL || *pfn == NULL || symbol[0] != 'c' ||
        symbol[1] != 'u' || tdm__hook_mode_get() == TDM__HOOK_OFF ||
        tdm__cuda_is_ours(*pfn))
        return;
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
               !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    int best = -1, twin = 0;
    for (int v = 0; v < TDM__CV_COUNT; v++) {
        const tdm__cuda_variant *c = &tdm__cuda_variants[v];
        if (strcmp(c->base, symbol) != 0)
            continue;
        twin |= c->ptsz;
        if (c->version > version)
            continue;
        if (best < 0 || c->version > tdm__cuda_variants[best].version)
            best = v;
    }
    if (best < 0)
        return; /* not ours to wrap, or a version before our variants */
    /* The _ptsz twin shares the base name and version: pick it by flags. */
    if (twin) {
        for (int v = 0; v < TDM__CV_COUNT; v++) {
            const tdm__cuda_variant *c = &tdm__cuda_variants[v];
            if (strcmp(c->base, symbol) == 0 &&
                c->version == tdm__cuda_variants[best].version && c->ptsz == ptsz)
                best = v;
        }
    }
    if (version > CUDA_VERSION && !same_as_known_version(symbol, *pfn, flags))
        return;
    tdm__cuda_set_real(best, *pfn);
    *pfn = tdm__cuda_variants[best].wrapper;
}

/* ---- the resolvers ---------------------------------------------------------- */

CUresult tdm__cuda_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status)
{
    PFN_cuGetProcAddress_v12000 real =
        (PFN_cuGetProcAddress_v12000)tdm__cuda_real(TDM__CV_cuGetProcAddress_v2);
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && (status == NULL || *status == CU_GET_PROC_ADDRESS_SUCCESS))
        tdm__cuda_wrap(symbol, pfn, version, flags);
    return r;
}

CUresult tdm__cuda_w_cuGetProcAddress(const char *symbol, void **pfn, int version,
                                      cuuint64_t flags)
{
    PFN_cuGetProcAddress_v11030 real =
        (PFN_cuGetProcAddress_v11030)tdm__cuda_real(TDM__CV_cuGetProcAddress);
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS)
        tdm__cuda_wrap(symbol, pfn, version, flags);
    return r;
}

extern __typeof__(tdm__cuda_w_cuGetProcAddress_v2) cuGetProcAddress_v2
    __attribute__((alias("tdm__cuda_w_cuGetProcAddress_v2"), visibility("default")));
extern __typeof__(tdm__cuda_w_cuGetProcAddress) cuGetProcAddress
    __attribute__((alias("tdm__cuda_w_cuGetProcAddress"), visibility("default")));

/* ---- dlsym ---------------------------------------------------------------- */

typedef void *(*dlsym_fn)(void *handle, const char *name);

static _Atomic(dlsym_fn) libc_dlsym_ptr;

static void *no_dlsym(void *handle, const char *name)
{
    (void)handle, (void)name;
    return NULL;
}

/* The code on the way of every dlsym runs before anything else may be
 * ready: a sanitizer runtime looks its interceptors up with dlsym before
 * it has mapped its shadow memory.  So it is not instrumented, and it
 * calls nothing a sanitizer intercepts (no strcmp). */
#define TDM_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

/* libc's dlsym: the versioned lookup skips ours (see common.c). */
TDM_EARLY static dlsym_fn libc_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&libc_dlsym_ptr, memory_order_acquire);
    if (f)
        return f;
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (f == NULL)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (f == NULL)
        f = no_dlsym;
    atomic_store_explicit(&libc_dlsym_ptr, f, memory_order_release);
    return f;
}

/* A lookup of a resolver: libc's answer, with ours in its place. */
static void *resolver_dlsym(void *handle, const char *name)
{
    void *p = libc_dlsym()(handle, name);
    if (p == NULL || tdm__cuda_is_ours(p) || tdm__hook_mode_get() == TDM__HOOK_OFF)
        return p;
    int v = strcmp(name, "cuGetProcAddress_v2") == 0 ? TDM__CV_cuGetProcAddress_v2
                                                     : TDM__CV_cuGetProcAddress;
    tdm__cuda_set_real(v, p);
    return tdm__cuda_variants[v].wrapper;
}

/* The variant whose exported name is `name`, or -1.  Compares by hand:
 * runs on the way of every dlsym (see TDM_EARLY). */
TDM_EARLY static int variant_of_name(const char *name)
{
    for (int v = 0; v < TDM__CV_COUNT; v++) {
        const char *w = tdm__cuda_variants[v].name;
        size_t i = 0;
        while (w[i] && w[i] == name[i])
            i++;
        if (w[i] == '\0' && name[i] == '\0')
            return v;
    }
    return -1;
}

/* A lookup of a hooked entry point by name on a handle: libc's answer,
 * with our wrapper of it in its place. */
static void *entry_dlsym(void *handle, const char *name)
{
    void *p = libc_dlsym()(handle, name);
    int v = variant_of_name(name);
    if (p == NULL || v < 0 || tdm__cuda_is_ours(p) || tdm__hook_mode_get() == TDM__HOOK_OFF)
        return p;
    tdm__cuda_set_real(v, p);
    return tdm__cuda_variants[v].wrapper;
}

/* "cuGetProcAddress" or "cuGetProcAddress_v2". */
TDM_EARLY static int is_resolver_name(const char *name)
{
    static const char want[] = "cuGetProcAddress";
    size_t i = 0;
    for (; want[i]; i++)
        if (name[i] != want[i])
            return 0;
    return name[i] == '\0' || (name[i] == '_' && name[i + 1] == 'v' && name[i + 2] == '2' &&
                               name[i + 3] == '\0');
}

/* Where dlsym(handle, name) goes: our resolver_dlsym, or libc's dlsym. */
TDM_CUDA_HIDDEN void *tdm__cuda_dlsym_target(void *handle, const char *name);
TDM_EARLY void *tdm__cuda_dlsym_target(void *handle, const char *name)
{
    if (handle != RTLD_NEXT && name && name[0] == 'c' && name[1] == 'u') {
        if (is_resolver_name(name))
            return (void *)resolver_dlsym;
        if (variant_of_name(name) >= 0)
            return (void *)entry_dlsym;
    }
    return (void *)libc_dlsym();
}

#if defined(__x86_64__)
/* dlsym(handle, name): asks tdm__cuda_dlsym_target where to go, with the
 * arguments saved, then jumps there with the caller's return address
 * still on the stack, as if the program had called that function. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "endbr64\n"
        "pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "subq $8, %rsp\n" /* 16-byte alignment at the call */
        ".cfi_adjust_cfa_offset 8\n"
        "call tdm__cuda_dlsym_target\n"
        "addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "jmp *%rax\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
/* Elsewhere a C tail call: libc sees our return address only if the
 * compiler does not turn it into a jump (it does at -O2). */
__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
    dlsym_fn f = (dlsym_fn)tdm__cuda_dlsym_target(handle, name);
    return f(handle, name);
}
#endif
