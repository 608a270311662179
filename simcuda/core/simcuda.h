/* simcuda/core/simcuda.h: the simulated CUDA platform's core, shared by the
 * driver (libsimcuda.so, soname libcuda.so.1, which holds all state), the
 * runtime (libsimcudart.so, soname libcudart.so.13) and the cuBLAS /
 * cuBLASLt facades, which reach it through these tdm__simcuda_* calls.
 *
 * The core keeps one table of simulated devices (from SIMCUDA_GPU, a
 * preset), each with its device-memory arena: host address space reserved
 * PROT_NONE + MAP_NORESERVE, made readable and writable range by range as
 * memory is allocated or mapped, and given back with MADV_DONTNEED when it
 * is freed, so a simulated device costs only the pages a program copies
 * into.  Device capacity and out-of-memory follow the preset.  Error codes
 * are the driver's (CUresult); the runtime maps them to cudaError_t.
 * Invariants: the device table is built once (pthread_once) and never
 * changes; memory bookkeeping is under one mutex per device.
 */
#ifndef SIMCUDA_CORE_H
#define SIMCUDA_CORE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define SIMCUDA_MAX_DEVICES 16

/* A GPU as NVIDIA documents it: what the driver reports for it. */
struct tdm__simcuda_preset {
  const char *key;            /* h100, h200, a100-40g, a100-80g */
  const char *name;           /* the name the driver reports */
  uint64_t total_mem;         /* bytes */
  int major, minor;           /* compute capability */
  int sm_count;
  int l2_bytes;
  int smem_per_sm;            /* bytes */
  int smem_per_block_optin;   /* bytes */
  int max_threads_per_sm;
  int max_blocks_per_sm;
  int regs_per_sm;
  int bus_width_bits;
  int mem_clock_khz;
  int clock_khz;
  int async_engines;
  int pci_device_id;          /* the PCI device id, for the UUID and bus id */
};

struct tdm__simcuda_device {
  struct tdm__simcuda_preset p;
  int ordinal;
  int attr[CU_DEVICE_ATTRIBUTE_MAX];
  unsigned char uuid[16];
};

/* Table and configuration (core/preset.c). */
int tdm__simcuda_device_count(void);
const struct tdm__simcuda_device *tdm__simcuda_device(int ordinal);
/* Parse a SIMCUDA_GPU value ("h100", "2xh100", "cuda:80GiB") into *n devices;
 * 0 on success, -1 with a message in err. */
int tdm__simcuda_parse(const char *spec, struct tdm__simcuda_preset *out, int *n, char *err,
                       size_t errlen);
const struct tdm__simcuda_preset *tdm__simcuda_presets(int *n);

/* Logging (core/log.c): SIMCUDA_LOG=1 prints to stderr; SIMCUDA_TRACE=FILE
 * appends one line per device-memory event (malloc, free, map, unmap). */
int tdm__simcuda_log_enabled(void);
void tdm__simcuda_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tdm__simcuda_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include "simcuda_stub.h"  /* tdm__simcuda_unsupported */

/* Device memory (core/memory.c). */
CUresult tdm__simcuda_mem_alloc(int dev, size_t size, void **out);
CUresult tdm__simcuda_mem_free(void *ptr);
CUresult tdm__simcuda_mem_info(int dev, size_t *free_b, size_t *total_b);
/* Free every allocation of dev (cudaDeviceReset). */
void tdm__simcuda_mem_free_all(int dev);
/* Which device owns ptr (-1 if none); *base and *size give its allocation. */
int tdm__simcuda_mem_lookup(const void *ptr, void **base, size_t *size);
/* Virtual memory management: reserve address space, create physical
 * allocations (accounting), map them, unmap, release. */
CUresult tdm__simcuda_va_reserve(size_t size, size_t align, void *hint, void **out);
CUresult tdm__simcuda_va_free(void *ptr, size_t size);
CUresult tdm__simcuda_phys_create(int dev, size_t size, uint64_t *handle);
CUresult tdm__simcuda_phys_release(uint64_t handle);
CUresult tdm__simcuda_phys_map(void *ptr, size_t size, size_t offset, uint64_t handle);
CUresult tdm__simcuda_phys_unmap(void *ptr, size_t size);
CUresult tdm__simcuda_phys_props(uint64_t handle, int *dev, size_t *size);
/* The caller's mapping of device memory is plain host memory: copies and
 * sets are memcpy/memset.  Granularity of VMM and large allocations. */
#define SIMCUDA_GRANULARITY ((size_t)2 << 20)

/* Contexts (driver/context.c): one primary context per device. */
CUcontext tdm__simcuda_primary_ctx(int dev);
/* Make dev's primary context active and current on this thread, as the
 * runtime's first call on a device does. */
void tdm__simcuda_ctx_init(int dev);
int tdm__simcuda_ctx_device(CUcontext ctx);
/* The device of this thread's current context, -1 if none. */
int tdm__simcuda_current_device(void);

/* Streams and events (core/stream.c).  Work completes at enqueue time. */
struct tdm__simcuda_stream { uint32_t magic; int device; unsigned flags; int priority; };
struct tdm__simcuda_event { uint32_t magic; int device; unsigned flags; int recorded; uint64_t ns; };
#define SIMCUDA_STREAM_MAGIC 0x5354524du
#define SIMCUDA_EVENT_MAGIC 0x45564e54u
CUresult tdm__simcuda_stream_create(int dev, unsigned flags, int priority, void **out);
CUresult tdm__simcuda_stream_destroy(void *s);
/* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are valid streams. */
int tdm__simcuda_stream_valid(const void *s);
CUresult tdm__simcuda_event_create(int dev, unsigned flags, void **out);
CUresult tdm__simcuda_event_destroy(void *e);
CUresult tdm__simcuda_event_record(void *e, void *stream);
CUresult tdm__simcuda_event_elapsed(float *ms, void *start, void *end);
int tdm__simcuda_event_valid(const void *e);
uint64_t tdm__simcuda_now_ns(void);

/* Kernels (driver/module.c): an ordinary kernel's attributes (a
 * CUfunction_attribute) on dev, and how many blocks of `block` threads fit
 * on one of its SMs. */
int tdm__simcuda_func_attribute(int attr, int dev, int thread_limit);
int tdm__simcuda_occupancy(int dev, int block, size_t dyn_smem);

/* The driver's entry-point table (driver/procaddress.c): the function an
 * entry point name resolves to, or NULL. */
void *tdm__simcuda_driver_symbol(const char *name, int cuda_version);

#endif
