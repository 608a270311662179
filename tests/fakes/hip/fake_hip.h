/* tests/fakes/hip/fake_hip.h: what the fake libamdhip64.so.5 exports for
 * tests besides the HIP API (version node FAKE_TEST).  Test programs that
 * stay "unmodified" HIP programs look these up with dlsym(RTLD_DEFAULT)
 * through the pointer types below; they exist only in the fake. */
#ifndef TDM_FAKE_HIP_H
#define TDM_FAKE_HIP_H

#include <stddef.h>

/* Calls of entry point `name` ("hipMalloc") so far; -1 for unknown names. */
long fake_hip_calls(const char *name);
/* Allocations of any kind (device, host, physical) not yet freed. */
long fake_hip_live_allocations(void);
/* Device bytes in use on `device`. */
size_t fake_hip_used_bytes(int device);
/* Zeroes every call counter. */
void fake_hip_reset_calls(void);

/* Stream work, which completes only when the test says so: queue one item
 * on `stream` (a hipStream_t; 0 = the current device's null stream),
 * complete all queued items, count those not completed.  Events and
 * stream/device syncs follow (fake_hip_stream.c). */
void fake_hip_stream_enqueue(void *stream);
void fake_hip_stream_complete(void *stream);
long fake_hip_stream_pending(void *stream);
/* Calls made during a global/thread-local capture that HIP forbids then
 * (each invalidated the capture). */
long fake_hip_capture_violations(void);
/* The pools give back what they hold above their release thresholds
 * through no call the hooks see (as at a hipEventSynchronize). */
void fake_hip_pool_release_unseen(void);

typedef long (*fake_hip_calls_fn)(const char *name);
typedef long (*fake_hip_live_allocations_fn)(void);
typedef size_t (*fake_hip_used_bytes_fn)(int device);

#endif
