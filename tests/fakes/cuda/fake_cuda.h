/* tests/fakes/cuda/fake_cuda.h: what the CUDA test doubles export for tests.
 *
 * The fakes (fake_cuda.c = libcuda.so.1, fake_cudart*.c = libcudart.so.13)
 * count every call they serve and every allocation still live, so a test
 * can assert "no leak", "frees matched" and "cache mode called the vendor
 * fewer times than the program allocated".  Programs that do not link a
 * fake reach these functions with dlopen(..., RTLD_NOLOAD) + dlsym.
 *
 * Environment knobs of the fake driver (read at its first call):
 *   FAKE_CUDA_DEVICES=n        devices (1..8, default 1)
 *   FAKE_CUDA_CAPACITY=bytes   memory per device (default 1 GiB)
 *   FAKE_CUDA_OOM_ABOVE=bytes  any allocation larger than this fails with
 *                              CUDA_ERROR_OUT_OF_MEMORY
 *   FAKE_CUDA_INIT_RESULT=n    what cuInit returns (default 0, success)
 *   FAKE_CUDA_HANG_S=n         the first call into the driver sleeps n seconds
 *                              first (a hung driver, for run.sh's time limits)
 *   FAKE_CUDA_FAIL=name:code   `name` (e.g. cuMemFree_v2) returns `code`
 *                              without doing anything
 *   FAKE_CUDA_GPA_EXPORTED=1   cuGetProcAddress hands out the addresses of
 *                              the exported symbols (which an LD_PRELOAD
 *                              library interposes) instead of internal ones
 *   FAKE_CUDA_PROBE_TABLE=1    cuInit calls through the function-table slots
 *                              the caller (libcudart) filled by
 *                              cuGetProcAddress, and reports which
 *                              implementation each slot reached
 *   FAKE_CUDA_REPORT=path      where that report goes (default stderr)
 *   FAKE_CUDA_CAPTURING=1      cuStreamIsCapturing says every stream is
 *                              capturing (a CUDA graph being recorded)
 * The fake runtime has none of its own: it runs over the fake driver.
 */
#ifndef TDM_TESTS_FAKE_CUDA_H
#define TDM_TESTS_FAKE_CUDA_H

#include <stddef.h>

/* Calls served by function `name` of the fake driver ("cuMemAlloc_v2",
 * "cuMemAllocAsync_ptsz", ...); -1 for a name it does not have. */
long fake_cuda_calls(const char *name);
/* Calls to every allocating function of the driver (device, managed,
 * pitch, async, pool, cuMemCreate, host), successful or not. */
long fake_cuda_alloc_calls(void);
/* Allocations (and cuMemCreate handles) not yet freed. */
long fake_cuda_live_allocations(void);
/* Bytes in use on `device`, as cuMemGetInfo counts them. */
unsigned long long fake_cuda_used_bytes(int device);
/* Changes FAKE_CUDA_OOM_ABOVE at run time (0: no limit). */
void fake_cuda_set_oom_above(unsigned long long bytes);

/* Stream work, which completes only when the test says so: queue one item
 * on `stream` (a CUstream; 0 = the legacy stream), complete all queued
 * items, count those not completed.  CU_STREAM_PER_THREAD (2) names the
 * calling thread's own per-thread default stream.  Events and stream/context syncs
 * follow (fake_cuda_stream.c). */
void fake_cuda_stream_enqueue(void *stream);
void fake_cuda_stream_complete(void *stream);
long fake_cuda_stream_pending(void *stream);
/* Calls made during a global/thread-local capture that CUDA forbids then
 * (each invalidated the capture). */
long fake_cuda_capture_violations(void);
/* Whether a kernel of the calling thread's current context could use
 * `ptr` (it lies in a live allocation of that context; managed, host and
 * pool memory of the device: yes). */
int fake_cuda_ptr_usable(const void *ptr);
/* The exporter's address that a range cuIpcOpenMemHandle returned stands
 * for (the base of the exported allocation); 0 for any other pointer. */
unsigned long long fake_cuda_ipc_source(unsigned long long opened);
/* The pools give back what they hold above their release thresholds
 * through no call the hooks see (as at a cuCtxSynchronize). */
void fake_cuda_pool_release_unseen(void);

/* The fake runtime (libcudart.so.13 double): calls per function name,
 * and its calls into the driver's allocating functions. */
long fake_cudart_calls(const char *name);
long fake_cudart_live_allocations(void);

#endif
