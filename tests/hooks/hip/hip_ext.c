/* tests/hooks/hip/hip_ext.c: a HIP "extension module", linked against one
 * fake libamdhip64 (.so.5, .so.6 or .so.7: EXT_MAJOR) and loaded by
 * hip_local.c with dlopen(RTLD_LOCAL), as Python loads JAX's or CuPy's
 * extensions and ctypes.CDLL loads a library: libamdhip64 is then in that
 * object's local scope only, where RTLD_NEXT cannot find it.
 *
 * hip_ext_run(scenario) prints every HIP return code, so that a run under
 * the preload can be compared with one without it:
 *   local    hipMalloc / hipFree / hipGetLastError
 *   pinned   pinned host memory: hipHostAlloc (and, EXT_MAJOR >= 6,
 *            hipExtHostAlloc), freed by hipHostFree
 *   device   (2 devices) hipMallocAsync on a stream of device 1 while
 *            device 0 is current: which device's bytes grew
 *   rocm6    (EXT_MAJOR >= 6) pinned host memory from hipHostAlloc and
 *            hipExtHostAlloc; a capture begun by hipStreamBeginCaptureToGraph
 *            with a hipMallocAsync in it (HIP's own to serve: a graph node)
 */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define hipExtHostAlloc ext_header_hipExtHostAlloc
#define hipStreamBeginCaptureToGraph ext_header_hipStreamBeginCaptureToGraph
#include <hip/hip_runtime_api.h>
#undef hipExtHostAlloc
#undef hipStreamBeginCaptureToGraph

#include <stdio.h>
#include <string.h>

#include "fake_hip.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#if EXT_MAJOR >= 6
hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags);
hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph,
                                        const hipGraphNode_t *dependencies,
                                        const void *dependencyData, size_t numDependencies,
                                        hipStreamCaptureMode mode);
#endif

#define MiB ((size_t)1 << 20)
/* Seen by hip_local's dlsym and by the snapshot's stack symbolizer. */
#define EXT_API __attribute__((visibility("default")))

static void say(const char *what, hipError_t r)
{
    printf("%s -> %d\n", what, (int)r);
}

/* The functions the snapshot's stacks name (not inlined, not static). */
EXT_API void ext_alloc_pinned(void **a, void **b);
EXT_API void ext_alloc_on_stream(void **p, hipStream_t s);

EXT_API void ext_alloc_pinned(void **a, void **b)
{
    say("hipHostAlloc", hipHostAlloc(a, 3000, 0));
#if EXT_MAJOR >= 6
    say("hipExtHostAlloc", hipExtHostAlloc(b, 5000, 0));
#else
    *b = NULL;
#endif
}

EXT_API void ext_alloc_on_stream(void **p, hipStream_t s)
{
    say("hipMallocAsync", hipMallocAsync(p, 4 * MiB, s));
}

static void local_scope(void)
{
    void *p = NULL;
    say("hipMalloc", hipMalloc(&p, MiB));
    say("hipFree", hipFree(p));
    say("hipGetLastError", hipGetLastError());
}

static void pinned(void)
{
    void *a = NULL, *b = NULL;
    ext_alloc_pinned(&a, &b);
    say("hipHostFree(a)", hipHostFree(a));
    if (b != NULL)
        say("hipHostFree(b)", hipHostFree(b));
}

static void stream_device(void)
{
    hipStream_t s1 = NULL;
    say("hipSetDevice(1)", hipSetDevice(1));
    say("hipStreamCreate", hipStreamCreate(&s1));
    say("hipSetDevice(0)", hipSetDevice(0));
    size_t before0 = fake_hip_used_bytes(0), before1 = fake_hip_used_bytes(1);
    void *p = NULL;
    ext_alloc_on_stream(&p, s1);
    printf("device 0 grew %s, device 1 grew %s\n",
           fake_hip_used_bytes(0) > before0 ? "yes" : "no",
           fake_hip_used_bytes(1) > before1 ? "yes" : "no");
    int cur = -1;
    say("hipGetDevice", hipGetDevice(&cur));
    printf("current device %d\n", cur);
    say("hipFreeAsync", hipFreeAsync(p, s1));
    say("hipStreamSynchronize", hipStreamSynchronize(s1));
    say("hipStreamDestroy", hipStreamDestroy(s1));
}

static void rocm6(void)
{
#if EXT_MAJOR >= 6
    pinned();

    hipStream_t s = NULL;
    say("hipStreamCreate", hipStreamCreate(&s));
    static int graph_body; /* the fake never looks into a graph */
    long before = fake_hip_calls("hipMallocAsync");
    say("hipStreamBeginCaptureToGraph",
        hipStreamBeginCaptureToGraph(s, (hipGraph_t)(void *)&graph_body, NULL, NULL, 0,
                                     hipStreamCaptureModeRelaxed));
    void *g = NULL;
    ext_alloc_on_stream(&g, s);
    printf("captured hipMallocAsync reached HIP: %s\n",
           fake_hip_calls("hipMallocAsync") > before ? "yes" : "no");
    hipGraph_t graph = NULL;
    say("hipStreamEndCapture", hipStreamEndCapture(s, &graph));
    say("hipStreamDestroy", hipStreamDestroy(s));
#else
    printf("rocm6: not in ROCm %d\n", EXT_MAJOR);
#endif
}

EXT_API int hip_ext_run(const char *scenario);

EXT_API int hip_ext_run(const char *scenario)
{
    if (strcmp(scenario, "local") == 0)
        local_scope();
    else if (strcmp(scenario, "pinned") == 0)
        pinned();
    else if (strcmp(scenario, "device") == 0)
        stream_device();
    else if (strcmp(scenario, "rocm6") == 0)
        rocm6();
    else
        return 2;
    fflush(stdout);
    return 0;
}
