/* tests/hooks/infra/isolation.cpp: "Loading tidemark must not change the
 * program" (DESIGN.md).  A C++ program linked to libtidemark.so (and, as
 * the shell test runs it, with libtidemark_preload.so or the test
 * interposer preloaded) records with native stacks -- so libunwind has
 * been dlopen()ed -- and then checks:
 *   - malloc comes from libc;
 *   - _Unwind_RaiseException comes from libgcc_s (not libunwind);
 *   - a C++ exception thrown from inside a hooked vendor call (the fake
 *     vendor's allocation callback) unwinds through the vendor and the
 *     hook frames to our catch.
 * Prints one line per check; exit status 0, or 1. */
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "fake_vendor.h"
#include "tidemark.h"

static int failures;

static void from(const char *sym, const char *want)
{
    void *p = dlsym(RTLD_DEFAULT, sym);
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname) {
        std::printf("FAIL %s: not found\n", sym);
        failures++;
        return;
    }
    const char *base = std::strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (std::strncmp(base, want, std::strlen(want)) != 0) {
        std::printf("FAIL %s comes from %s, want %s\n", sym, info.dli_fname, want);
        failures++;
        return;
    }
    std::printf("ok %s from %s\n", sym, base);
}

static void thrower(size_t size)
{
    throw std::runtime_error("thrown inside the vendor: " + std::to_string(size));
}

__attribute__((noinline)) static int allocate_through_the_hook()
{
    void *p = nullptr;
    return fv_malloc(&p, 4321);
}

int main()
{
    tdm_history_options o;
    tdm_history_options_init(&o);
    if (tdm_record_memory_history(&o) != TDM_OK) {
        std::printf("FAIL record\n");
        return 1;
    }
    void *p = nullptr;
    if (tdm_malloc(&p, 4096, 0, 0) != TDM_OK || tdm_free(p) != TDM_OK) {
        std::printf("FAIL tdm_malloc\n");
        return 1;
    }
    /* A sanitizer build interposes malloc itself (the test says which). */
    const char *mfrom = std::getenv("ISOLATION_MALLOC_FROM");
    if (!mfrom || !*mfrom)
        mfrom = "libc.so";
    from("malloc", mfrom);
    from("free", mfrom);
    /* ASan also interposes the unwinder's entry points (its own
     * __cxa_throw bookkeeping); the test names that runtime then. */
    const char *ufrom = std::getenv("ISOLATION_UNWIND_FROM");
    if (!ufrom || !*ufrom)
        ufrom = "libgcc_s.so";
    from("_Unwind_RaiseException", ufrom);
    from("_Unwind_Backtrace", "libgcc_s.so");

    fv_set_alloc_callback(thrower);
    bool caught = false;
    try {
        allocate_through_the_hook();
    } catch (const std::runtime_error &e) {
        caught = std::strstr(e.what(), "4321") != nullptr;
    }
    fv_set_alloc_callback(nullptr);
    if (!caught) {
        std::printf("FAIL the exception did not reach the catch\n");
        failures++;
    } else {
        std::printf("ok exception unwound through the hooked call\n");
    }
    /* The program goes on normally. */
    void *q = nullptr;
    if (fv_malloc(&q, 100) != FV_SUCCESS || fv_free(q) != FV_SUCCESS) {
        std::printf("FAIL vendor after the exception\n");
        failures++;
    }
    return failures ? 1 : 0;
}
