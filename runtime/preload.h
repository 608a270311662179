/* runtime/preload.h: what every vendor interposer of libtidemark_preload.so
 * shares (hooks/preload/common.c).
 *
 * libtidemark_preload.so holds the interposers only; it links
 * libtidemark.so for everything else.  Its exported symbols are exactly the
 * hooked ones (listed in the .syms files of hooks/preload).  TIDEMARK_CONF's
 * `mode` picks what the hooks do:
 *   observe (default)  call the vendor, then book the result with
 *                      tdm__alloc_observe_*; errors pass through unchanged;
 *   cache              serve device allocations from tidemark's caching
 *                      allocator over the vendor's provider; a vendor free
 *                      returns the block to the cache.
 *
 * Every hook:
 *   1. resolves its real function once (tdm__hook_real*, cached in a
 *      static pointer; never dlsym per call);
 *   2. opens with TDM_HOOK_PROLOGUE: when tidemark is off or this thread
 *      is already inside tidemark (e.g. the provider calling the vendor)
 *      it calls the real function straight away;
 *   3. otherwise does its work and calls tdm__hook_leave().
 */
#ifndef TDM_RUNTIME_PRELOAD_H
#define TDM_RUNTIME_PRELOAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "tidemark.h"
#include "visibility.h"

#define TDM_HOOK_API __attribute__((visibility("default")))

typedef enum tdm__hook_mode {
    TDM__HOOK_OFF = 0,     /* tidemark is not recording: pure pass-through */
    TDM__HOOK_OBSERVE = 1,
    TDM__HOOK_CACHE = 2,
} tdm__hook_mode;

/* The mode in force (read once at load from TIDEMARK_CONF).  Inline, as
 * the guard below: every hooked call asks both, and a call into
 * hooks/preload/common.c for each was a tenth of an observed call's cost
 * (bench/hook_overhead). */
extern _Atomic int tdm__hook_mode_known TDM__HIDDEN; /* tdm__hook_mode; -1 = not asked yet */
tdm__hook_mode tdm__hook_mode_ask(void);
static inline tdm__hook_mode tdm__hook_mode_get(void)
{
    int m = atomic_load_explicit(&tdm__hook_mode_known, memory_order_acquire);
    return m >= 0 ? (tdm__hook_mode)m : tdm__hook_mode_ask();
}

/* libtidemark.so's side of it (runtime/autoinit.c), exported for this
 * library: TIDEMARK_CONF's `mode` as a tdm__hook_mode, applying
 * TIDEMARK_CONF first if libtidemark's constructor has not run yet.
 * TDM__HOOK_OFF when TIDEMARK_CONF is unset, blank, help or invalid, and
 * for mode=observe with record=off (there is nothing to observe for).
 * -1 while TIDEMARK_CONF is being applied (by another thread, or further
 * up this thread's stack): not known yet, ask again later. */
TDM_API int tdm__autoinit_hook_mode(void);
/* TIDEMARK_CONF's `ipc_libraries` ("" when not given or not applied yet). */
TDM_API const char *tdm__autoinit_ipc_libraries(void);

/* Per-thread recursion guard.  Returns 1 and marks the thread "inside"
 * when it was not; returns 0 when it already was (then do not call
 * tdm__hook_leave).  A mark left by a hook that an exception (or
 * longjmp) unwound before its tdm__hook_leave is dropped at the thread's
 * next hook call made at the same stack depth or above. */
extern __thread uintptr_t tdm__hook_inside_at __attribute__((tls_model("initial-exec")));
/* Always inlined, so the frame it marks is the hook's own (see common.c). */
static inline __attribute__((always_inline)) int tdm__hook_enter(void)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t at = tdm__hook_inside_at;
    if (at != 0 && here < at)
        return 0;
    tdm__hook_inside_at = here;
    return 1;
}
static inline void tdm__hook_leave(void)
{
    tdm__hook_inside_at = 0;
}

/* The prologue every hook opens with (CUDA driver and runtime, HIP, Level
 * Zero): declares `mode`, the mode in force, and returns `passthrough` (the
 * real call, or the vendor's "absent" answer when there is no real
 * function) when the hook must pass straight through: `ready` false (the
 * real function missing or not resolved), tidemark off, or this thread
 * already inside tidemark.  Else the thread is marked inside: the hook
 * ends with tdm__hook_leave().  A macro, so that tdm__hook_enter marks the
 * hook's own frame.  _OF takes the mode and the guard of a consumer with
 * its own (the Level Zero shim driver). */
#define TDM_HOOK_PROLOGUE_OF(mode, get_mode, enter, ready, passthrough)       \
    tdm__hook_mode mode = (ready) ? (get_mode) : TDM__HOOK_OFF;                \
    if (mode == TDM__HOOK_OFF || !(enter))                                     \
        return (passthrough);                                                  \
    (void)mode
#define TDM_HOOK_PROLOGUE(mode, ready, passthrough)                            \
    TDM_HOOK_PROLOGUE_OF(mode, tdm__hook_mode_get(), tdm__hook_enter(), ready, passthrough)

/* The next definition of `name` after the preload library (RTLD_NEXT),
 * through the real dlsym even though dlsym itself is interposed.  NULL
 * when absent.  Cache the result in the caller. */
void *tdm__hook_real(const char *name);
/* The same through a versioned lookup (dlvsym), e.g. ("hipMalloc",
 * "hip_4.2"); falls back to the unversioned lookup. */
void *tdm__hook_real_versioned(const char *name, const char *version);
/* The real dlsym, for lookups on a handle (dlopen'ed vendor libraries). */
void *tdm__hook_real_dlsym(void *handle, const char *name);

/* Frames each hook adds above the application's call, so stacks start at
 * the application's own frame: pass as `skip` to tdm__alloc_observe_* and
 * tdm__alloc_malloc/free. */
#define TDM_HOOK_SKIP 1

/* Cache mode's side of a vendor free: 1 when the cache took the block
 * back; 0 when the pointer is not the cache's (the vendor frees it); -1
 * when it lies in memory the cache holds but is no live block (freed
 * twice, or a pointer into a block): then the hook returns the vendor's
 * invalid-value error itself, as the vendor would, and never passes the
 * pointer on, since the vendor would free the cache's whole segment.
 * Inlined, so `skip` counts the hook's own frame only. */
static inline __attribute__((always_inline)) int tdm__hook_cache_free(void *p, unsigned skip)
{
    if (tdm__alloc_free(p, skip) == TDM_OK)
        return 1;
    return tdm__alloc_owns(p) ? -1 : 0;
}

#endif
