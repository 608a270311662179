/* alloc/provider_vendor.c: what the vendor providers (provider_cuda.c,
 * provider_hip.c, provider_ze.c) share: the vendor error code of a
 * thread's last failed provider call, and the lookup of the vendor's
 * functions.
 *
 * A hook serving a vendor call from the cache gets a tdm_status back; when
 * that is TDM_VENDOR_ERROR (or TDM_OUT_OF_MEMORY) it hands the program the
 * vendor's own code, which the provider noted here.  Per thread, so no
 * lock; no initial-exec TLS model, so libtidemark.so stays dlopen()able.
 *
 * The lookup goes through libc's dlsym, found once by its symbol version:
 * libtidemark_preload.so defines an unversioned dlsym that hands out its
 * wrappers of the CUDA entry points, and a versioned lookup never binds
 * to an unversioned definition.  Lock: none; the pointer is an atomic,
 * and threads racing to set it store the same value.
 */
#define _GNU_SOURCE /* dlvsym, RTLD_DEFAULT */
#include "provider.h"

#include <dlfcn.h>
#include <stdatomic.h>

static __thread int last_vendor_error;

void tdm__provider_set_vendor_error(int code)
{
    last_vendor_error = code;
}

int tdm__provider_last_vendor_error(void)
{
    return last_vendor_error;
}

typedef void *(*dlsym_fn)(void *handle, const char *name);

static _Atomic(dlsym_fn) libc_dlsym_ptr;

/* glibc 2.34 moved dlsym into libc under a new version; before, it was
 * libdl's, versioned as the architecture's first glibc (x86-64, aarch64). */
static dlsym_fn libc_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    dlsym_fn f = atomic_load_explicit(&libc_dlsym_ptr, memory_order_acquire);
    if (f)
        return f;
    for (size_t i = 0; f == NULL && i < sizeof versions / sizeof versions[0]; i++)
        f = (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", versions[i]);
    if (f == NULL)
        f = dlsym; /* a libc without symbol versions: no preload can hide it */
    atomic_store_explicit(&libc_dlsym_ptr, f, memory_order_release);
    return f;
}

void *tdm__provider_sym(void *lib, const char *name)
{
    return libc_dlsym()(lib, name);
}
