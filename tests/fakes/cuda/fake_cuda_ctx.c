/* tests/fakes/cuda/fake_cuda_ctx.c: the fake driver's devices and contexts
 * (cuInit, the device queries, primary contexts and the per-thread context
 * stack), streams, error names and export tables; the part of libcuda.so.1
 * that holds no memory (fake_cuda.c: allocations and their registry).
 *
 * Contexts: the primary one of each device, and those cuCtxCreate makes.
 * "Each context has its own distinct address space" (CUDA Programming
 * Guide, Driver API, Context): allocations record their context
 * (fake_cuda.c), and cuCtxDestroy frees what its context allocated.
 * cuDevicePrimaryCtxReset: "Destroy all allocations and reset all state
 * on the primary context" (Driver API, Primary Context Management):
 * every allocation of that context goes, whatever the retain count.
 *
 * Invariants: a context is current on a thread only between its push (or
 * set) and its pop; primary contexts are never freed.  Lock: none; the
 * context stack is per thread, the rest atomics.
 */
#define _GNU_SOURCE
#include "fake_cuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define cfg fake__cfg

/* Returns CUDA_ERROR_INVALID_DEVICE from the caller when `dev` is not a
 * device of this run. */
#define CHECK_DEVICE(dev)                                                      \
    do {                                                                       \
        if ((dev) < 0 || (dev) >= cfg.devices)                                 \
            return CUDA_ERROR_INVALID_DEVICE;                                  \
    } while (0)

typedef struct fake_ctx {
    int device;
    atomic_int refs;
} fake_ctx;

static fake_ctx g_primary[MAX_DEV];
static fake_pool g_pools[MAX_DEV];
static atomic_int g_initialized;
static __thread fake_ctx *t_stack[16];
static __thread int t_depth;

static fake_ctx *current(void)
{
    return t_depth > 0 ? t_stack[t_depth - 1] : NULL;
}

CUresult fake__need_init(void)
{
    return atomic_load(&g_initialized) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

int fake__has_context(void)
{
    return current() != NULL;
}

void *fake__current_ctx(void)
{
    return current();
}

CUresult fake__current_device(int *dev)
{
    NEED_INIT();
    fake_ctx *c = current();
    if (c == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->device;
    return CUDA_SUCCESS;
}

/* ---- initialization, devices, contexts ----------------------------------- */

CUresult f_cuInit(unsigned int flags)
{
    ENTER(FC_cuInit);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (cfg.probe_table)
        fake__probe_table();
    if (cfg.init_result != CUDA_SUCCESS)
        return cfg.init_result;
    atomic_store(&g_initialized, 1);
    return CUDA_SUCCESS;
}

CUresult f_cuDriverGetVersion(int *v)
{
    ENTER(FC_cuDriverGetVersion);
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceGet(CUdevice *dev, int ordinal)
{
    ENTER(FC_cuDeviceGet);
    NEED_INIT();
    if (dev == NULL || ordinal < 0 || ordinal >= cfg.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceGetCount(int *count)
{
    ENTER(FC_cuDeviceGetCount);
    NEED_INIT();
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = cfg.devices;
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceGetName(char *name, int len, CUdevice dev)
{
    ENTER(FC_cuDeviceGetName);
    NEED_INIT();
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEVICE(dev);
    snprintf(name, (size_t)len, "Fake CUDA Device %d", dev);
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ENTER(FC_cuDeviceTotalMem_v2);
    NEED_INIT();
    CHECK_DEVICE(dev);
    *bytes = (size_t)cfg.capacity;
    return CUDA_SUCCESS;
}

CUresult f_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    ENTER(FC_cuDeviceGetDefaultMemPool);
    NEED_INIT();
    CHECK_DEVICE(dev);
    g_pools[dev].device = dev;
    *pool = (CUmemoryPool)&g_pools[dev];
    return CUDA_SUCCESS;
}

CUresult f_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    ENTER(FC_cuDevicePrimaryCtxRetain);
    NEED_INIT();
    CHECK_DEVICE(dev);
    g_primary[dev].device = dev;
    atomic_fetch_add(&g_primary[dev].refs, 1);
    *pctx = (CUcontext)&g_primary[dev];
    return CUDA_SUCCESS;
}

CUresult f_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    ENTER(FC_cuDevicePrimaryCtxRelease_v2);
    CHECK_DEVICE(dev);
    if (atomic_fetch_sub(&g_primary[dev].refs, 1) <= 0) {
        atomic_fetch_add(&g_primary[dev].refs, 1);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return CUDA_SUCCESS;
}

CUresult f_cuCtxGetCurrent(CUcontext *pctx)
{
    ENTER(FC_cuCtxGetCurrent);
    NEED_INIT();
    *pctx = (CUcontext)current();
    return CUDA_SUCCESS;
}

CUresult f_cuCtxSetCurrent(CUcontext ctx)
{
    ENTER(FC_cuCtxSetCurrent);
    NEED_INIT();
    if (ctx == NULL) {
        if (t_depth > 0)
            t_depth--;
    } else if (t_depth == 0) {
        t_stack[t_depth++] = (fake_ctx *)ctx;
    } else {
        t_stack[t_depth - 1] = (fake_ctx *)ctx;
    }
    return CUDA_SUCCESS;
}

CUresult f_cuCtxPushCurrent_v2(CUcontext ctx)
{
    ENTER(FC_cuCtxPushCurrent_v2);
    NEED_INIT();
    if (ctx == NULL || t_depth == (int)(sizeof t_stack / sizeof t_stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    t_stack[t_depth++] = (fake_ctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult f_cuCtxPopCurrent_v2(CUcontext *pctx)
{
    ENTER(FC_cuCtxPopCurrent_v2);
    NEED_INIT();
    if (t_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_ctx *c = t_stack[--t_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult f_cuCtxGetDevice(CUdevice *dev)
{
    ENTER(FC_cuCtxGetDevice);
    int d;
    CUresult r = fake__current_device(&d);
    if (r == CUDA_SUCCESS)
        *dev = d;
    return r;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    NEED_INIT();
    CHECK_DEVICE(dev);
    if (pctx == NULL || t_depth == (int)(sizeof t_stack / sizeof t_stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    fake_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->device = dev;
    atomic_store(&c->refs, 1);
    t_stack[t_depth++] = c; /* "pushed onto the CPU thread's stack" */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult f_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    ENTER(FC_cuCtxCreate_v2);
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult f_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                          CUdevice dev)
{
    ENTER(FC_cuCtxCreate_v4);
    (void)params;
    (void)flags;
    return ctx_create(pctx, dev);
}

static int is_primary(const fake_ctx *c)
{
    return c >= &g_primary[0] && c < &g_primary[MAX_DEV];
}

CUresult f_cuCtxDestroy_v2(CUcontext ctx)
{
    ENTER(FC_cuCtxDestroy_v2);
    NEED_INIT();
    fake_ctx *c = (fake_ctx *)ctx;
    if (c == NULL || is_primary(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    fake__give_context(c);
    for (int i = 0; i < t_depth; i++) /* no longer current on this thread */
        if (t_stack[i] == c) {
            memmove(&t_stack[i], &t_stack[i + 1], (size_t)(t_depth - i - 1) * sizeof t_stack[0]);
            t_depth--;
            i--;
        }
    free(c);
    return CUDA_SUCCESS;
}

CUresult f_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    ENTER(FC_cuDevicePrimaryCtxReset_v2);
    NEED_INIT();
    CHECK_DEVICE(dev);
    fake__complete_all(); /* the device is idle before it is reset */
    fake__give_context(&g_primary[dev]);
    return CUDA_SUCCESS;
}

/* ---- errors, export tables ----------------------------------------- */

static const char *error_name(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    default: return NULL;
    }
}

CUresult f_cuGetErrorName(CUresult e, const char **s)
{
    ENTER(FC_cuGetErrorName);
    *s = error_name(e);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult f_cuGetErrorString(CUresult e, const char **s)
{
    ENTER(FC_cuGetErrorString);
    *s = error_name(e);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* libcudart asks for private tables the fake cannot provide; it then
 * reports an error to the program, which is what a no-device run does. */
CUresult f_cuGetExportTable(const void **table, const CUuuid *id)
{
    ENTER(FC_cuGetExportTable);
    (void)id;
    *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- FAKE_CUDA_PROBE_TABLE support ------------------------------------------ */

int fake__probe_begin(void)
{
    int was = atomic_exchange(&g_initialized, 1);
    g_primary[0].device = 0;
    t_stack[t_depth++] = &g_primary[0];
    return was;
}

void fake__probe_end(int was_initialized)
{
    t_depth--;
    atomic_store(&g_initialized, was_initialized);
}

/* ---- the exported entry points -------------------------------------------- */
FAKE_DEVICES(FC_ALIAS)
FAKE_STREAMS(FC_ALIAS)
