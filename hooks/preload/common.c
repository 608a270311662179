/* hooks/preload/common.c: what every interposer of libtidemark_preload.so
 * shares (the contract is runtime/preload.h).
 *
 * Owns: the per-thread recursion guard; the real dlsym, found once with
 * dlvsym(RTLD_NEXT, "dlsym", ...) so that lookups still work when a vendor
 * hook interposes dlsym itself; the lookups of real (next) definitions;
 * and the hook mode, asked of libtidemark.so once (TIDEMARK_CONF's
 * `mode`) and then read with one relaxed load per call.
 *
 * Invariants: a thread is "inside" from a hook's tdm__hook_enter() to its
 * tdm__hook_leave(); everything tidemark does meanwhile (providers calling
 * the vendor, dlopen of libunwind, ...) reaches the real functions
 * directly.  The mode, once known, never changes in a process.
 * Lock: none.  The cached pointers and the mode are atomics written with
 * the same value by whichever thread gets there first.
 */
#define _GNU_SOURCE /* dlvsym, RTLD_NEXT */
#include "preload.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Where on its stack this thread entered the outermost hook (the frame of
 * the hook that called tdm__hook_enter, inlined there), 0 when it is
 * outside.  A nested call (tidemark
 * calling the vendor, the vendor calling its own exported functions) is
 * always deeper on the same stack, at a lower address.  A call at the
 * same depth or above can only come after the entering hook's frame is
 * gone without its tdm__hook_leave: a C++ exception (or longjmp) went
 * through the hook.  Such a stale mark is dropped instead of turning
 * every later hook of the thread into a silent pass-through.
 * Initial-exec TLS model: read and written at every hooked call, and so a
 * plain %fs-relative access instead of a TLS-descriptor call.  The library
 * is meant for LD_PRELOAD (loaded at start, into the static TLS block); a
 * late dlopen() (a launcher) still works because this library's TLS is a
 * few words, which fit the surplus glibc keeps for such libraries
 * (hooks.infra.test_preload_dlopen: keep big objects out of its TLS).
 * libtidemark.so keeps the dynamic model: Python and PyTorch dlopen it,
 * among many other libraries. */
__thread uintptr_t tdm__hook_inside_at __attribute__((tls_model("initial-exec")));

/* ---- real symbols ------------------------------------------------------ */

typedef void *(*dlsym_fn)(void *handle, const char *name);

static _Atomic(dlsym_fn) real_dlsym_ptr;

/* The versioned lookup finds libc's dlsym even when a vendor hook defines
 * an unversioned dlsym of its own in this library: RTLD_NEXT starts after
 * us.  glibc 2.34 moved dlsym from libdl into libc under a new version;
 * older glibc only has GLIBC_2.2.5 (x86-64). */
static dlsym_fn real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
    if (f)
        return f;
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    atomic_store_explicit(&real_dlsym_ptr, f, memory_order_release);
    return f;
}

void *tdm__hook_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = real_dlsym();
    return f ? f(handle, name) : NULL;
}

/* RTLD_NEXT is relative to the object that makes the call.  The real
 * dlsym is called from here, so "next" is the next object after
 * libtidemark_preload.so in the search order: the program's own libraries
 * and the vendor's, never this library's hooks. */
void *tdm__hook_real(const char *name)
{
    return tdm__hook_real_dlsym(RTLD_NEXT, name);
}

void *tdm__hook_real_versioned(const char *name, const char *version)
{
    void *p = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    return p ? p : tdm__hook_real(name);
}

/* ---- the mode ---------------------------------------------------------- */

_Atomic int tdm__hook_mode_known = -1;

__attribute__((noinline)) tdm__hook_mode tdm__hook_mode_ask(void)
{
    /* libtidemark.so may have to apply TIDEMARK_CONF now (when a vendor
     * library's constructor calls a hook before libtidemark's constructor
     * ran); whatever that does must reach the real vendor functions. */
    int entered = tdm__hook_enter();
    int m = tdm__autoinit_hook_mode();
    if (entered)
        tdm__hook_leave();
    if (m < 0)
        return TDM__HOOK_OFF; /* being applied: pass this call through */
    atomic_store_explicit(&tdm__hook_mode_known, m, memory_order_release);
    return (tdm__hook_mode)m;
}

/* Asks once at load, so that the first hooked call pays nothing extra. */
__attribute__((constructor)) static void tdm_preload_ctor(void)
{
    (void)real_dlsym();
    (void)tdm__hook_mode_get();
}
