/* simcuda/driver/procaddress.c: entry points by name (cuGetProcAddress,
 * and for the runtime's cudaGetDriverEntryPointByVersion).
 *
 * A name is resolved in this library only, never through the global scope
 * (where an interposer such as tidemark's could answer): first under the
 * name cuda.h's renaming macros give it (cuMemGetInfo -> cuMemGetInfo_v2;
 * simcuda/symbols/driver_aliases.txt, generated from the header), then as
 * given.  A name the simulated driver does not export is "not found"; one
 * it exports but does not simulate resolves to its stub, which answers
 * CUDA_ERROR_NOT_SUPPORTED, as an entry point of a real driver that cannot
 * do the job would.  No lock: the library handle is taken once.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "simcuda_driver_aliases.h"  /* SIMCUDA_DRIVER_ALIASES, generated */

static void *g_self;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void open_self(void) {
  Dl_info info;
  if (dladdr((void *)&open_self, &info) && info.dli_fname)
    g_self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

static const char *const g_aliases[][2] = {SIMCUDA_DRIVER_ALIASES};

void *tdm__simcuda_driver_symbol(const char *name, int cuda_version) {
  pthread_once(&g_once, open_self);
  if (!g_self || !name || strncmp(name, "cu", 2) != 0)
    return NULL;
  if (!strcmp(name, "cuGetProcAddress"))
    name = "cuGetProcAddress_v2";
  for (size_t i = 0; i < sizeof g_aliases / sizeof g_aliases[0]; i++)
    if (!strcmp(name, g_aliases[i][0])) {
      void *f = dlsym(g_self, g_aliases[i][1]);
      if (f)
        return f;
      break;
    }
  return dlsym(g_self, name);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  *pfn = tdm__simcuda_driver_symbol(symbol, cudaVersion);
  if (status)
    *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
