/* tests/fakes/ze/fake_ze.h: what the fake Level Zero driver exports for
 * tests besides its DDI getters.  The driver is dlopen'ed RTLD_LOCAL by
 * the loader, so tests reach these with dlopen(path, RTLD_NOLOAD) + dlsym
 * through the pointer types below. */
#ifndef TDM_FAKE_ZE_H
#define TDM_FAKE_ZE_H

#include <stddef.h>

/* Calls of entry `name` ("zeMemAllocDevice") so far; -1 for unknown names. */
long fake_ze_calls(const char *name);
/* Allocations and physical memory objects not yet freed. */
long fake_ze_live_allocations(void);
/* Device bytes in use on device `device` (its index in zeDeviceGet). */
size_t fake_ze_used_bytes(int device);

/* A command in flight uses [ptr, ptr + size) on command queue (or
 * immediate command list) `queue`, whose synchronize completes it, or
 * (fake_ze_device_use) the allocation holding `ptr` on a queue no handle
 * names, which only fake_ze_device_finish completes; every command in flight completes (and
 * the frees deferred until then happen); whether [ptr, ptr + size)
 * overlaps memory a command in flight uses; frees of memory in use the
 * program was not allowed to make (fake_ze_driver.c). */
void fake_ze_queue_use(void *queue, const void *ptr, size_t size);
void fake_ze_device_use(const void *ptr);
void fake_ze_device_finish(void);
int fake_ze_in_use(const void *ptr, size_t size);
long fake_ze_free_violations(void);

typedef long (*fake_ze_calls_fn)(const char *name);
typedef long (*fake_ze_live_allocations_fn)(void);
typedef size_t (*fake_ze_used_bytes_fn)(int device);
typedef void (*fake_ze_queue_use_fn)(void *queue, const void *ptr, size_t size);
typedef void (*fake_ze_device_use_fn)(const void *ptr);
typedef void (*fake_ze_device_finish_fn)(void);
typedef int (*fake_ze_in_use_fn)(const void *ptr, size_t size);
typedef long (*fake_ze_free_violations_fn)(void);

#endif
