/* simcuda/core/preset.c: the simulated GPUs (presets) and the device table.
 *
 * A preset is what the named GPU's driver reports, from NVIDIA's
 * datasheets, architecture whitepapers and tuning guides (H100: "NVIDIA
 * H100 Tensor Core GPU Architecture" and the Hopper tuning guide; A100: the
 * "NVIDIA A100 Tensor Core GPU Architecture" whitepaper and the Ampere
 * tuning guide): capacity, SM count, compute capability, caches, shared
 * memory and register files, so that what PyTorch derives from them
 * (cuBLAS workspace, kernel choices, launch grids) is that GPU's.  Capacity
 * is the marketed size read as GiB (80 GB -> 80 GiB); a real device reports
 * a little less, which docs/simulate.md says.
 * SIMCUDA_GPU picks the devices: PRESET, NxPRESET or cuda:SIZE (an H100
 * whose capacity is SIZE); unset means one h100.  The table is built once,
 * under pthread_once, and is read-only afterwards.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GiB ((uint64_t)1 << 30)

static const struct tdm__simcuda_preset presets[] = {
    /* H100 SXM5 80 GB HBM3: 132 SMs, 50 MB L2, 228 KB shared memory per SM
     * (227 KB per block opt-in), 5120-bit HBM3 at 2619 MHz, 1980 MHz boost. */
    {"h100", "NVIDIA H100 80GB HBM3", 80 * GiB, 9, 0, 132, 50 << 20, 228 << 10, 227 << 10, 2048, 32,
     65536, 5120, 2619000, 1980000, 3, 0x2330},
    /* H200 SXM 141 GB HBM3e: the H100's GH100 die, 6144-bit HBM3e at 3201 MHz. */
    {"h200", "NVIDIA H200", 141 * GiB, 9, 0, 132, 50 << 20, 228 << 10, 227 << 10, 2048, 32, 65536,
     6144, 3201000, 1980000, 3, 0x2335},
    /* A100 SXM4 40 GB HBM2: 108 SMs, 40 MB L2, 164 KB shared memory per SM
     * (163 KB opt-in), 5120-bit HBM2 at 1215 MHz, 1410 MHz boost. */
    {"a100-40g", "NVIDIA A100-SXM4-40GB", 40 * GiB, 8, 0, 108, 40 << 20, 164 << 10, 163 << 10, 2048, 32,
     65536, 5120, 1215000, 1410000, 3, 0x20b0},
    /* A100 SXM4 80 GB HBM2e at 1593 MHz. */
    {"a100-80g", "NVIDIA A100-SXM4-80GB", 80 * GiB, 8, 0, 108, 40 << 20, 164 << 10, 163 << 10, 2048, 32,
     65536, 5120, 1593000, 1410000, 3, 0x20b2},
};
#define NPRESETS (int)(sizeof presets / sizeof presets[0])

const struct tdm__simcuda_preset *tdm__simcuda_presets(int *n) {
  *n = NPRESETS;
  return presets;
}

static int parse_size(const char *s, uint64_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v <= 0)
    return -1;
  uint64_t unit = 1;
  if (!strcasecmp(end, "GiB") || !strcasecmp(end, "G"))
    unit = GiB;
  else if (!strcasecmp(end, "MiB") || !strcasecmp(end, "M"))
    unit = (uint64_t)1 << 20;
  else if (!strcasecmp(end, "TiB") || !strcasecmp(end, "T"))
    unit = (uint64_t)1 << 40;
  else if (!strcasecmp(end, "GB"))
    unit = 1000000000ull;
  else if (*end)
    return -1;
  *out = (uint64_t)(v * (double)unit);
  /* Whole 2 MiB pages, as the driver hands them out. */
  *out -= *out % SIMCUDA_GRANULARITY;
  return *out ? 0 : -1;
}

int tdm__simcuda_parse(const char *spec, struct tdm__simcuda_preset *out, int *n, char *err,
                       size_t errlen) {
  int count = 1;
  const char *s = spec;
  if (isdigit((unsigned char)*s)) {
    char *end;
    long c = strtol(s, &end, 10);
    if (*end != 'x' || c < 1 || c > SIMCUDA_MAX_DEVICES) {
      snprintf(err, errlen, "bad device count in '%s' (1 to %d devices: NxGPU)", spec,
               SIMCUDA_MAX_DEVICES);
      return -1;
    }
    count = (int)c;
    s = end + 1;
  }
  struct tdm__simcuda_preset p;
  if (!strncasecmp(s, "cuda:", 5)) {
    uint64_t size;
    if (parse_size(s + 5, &size)) {
      snprintf(err, errlen, "bad capacity in '%s' (e.g. cuda:80GiB)", spec);
      return -1;
    }
    p = presets[0];
    p.key = "cuda";
    p.name = "Simulated CUDA GPU (H100 class)";
    p.total_mem = size;
  } else {
    int i;
    for (i = 0; i < NPRESETS; i++)
      if (!strcasecmp(s, presets[i].key))
        break;
    if (i == NPRESETS) {
      int len = snprintf(err, errlen, "unknown GPU '%s' (one of:", spec);
      for (int j = 0; j < NPRESETS && len > 0 && (size_t)len < errlen; j++)
        len += snprintf(err + len, errlen - (size_t)len, " %s", presets[j].key);
      if (len > 0 && (size_t)len < errlen)
        snprintf(err + len, errlen - (size_t)len, ", NxGPU or cuda:SIZE)");
      return -1;
    }
    p = presets[i];
  }
  for (int i = 0; i < count; i++)
    out[i] = p;
  *n = count;
  return 0;
}

static struct tdm__simcuda_device g_dev[SIMCUDA_MAX_DEVICES];
static int g_ndev;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void fill_attributes(struct tdm__simcuda_device *d) {
  const struct tdm__simcuda_preset *p = &d->p;
  int *a = d->attr;
#define A(name, v) a[CU_DEVICE_ATTRIBUTE_##name] = (v)
  A(MAX_THREADS_PER_BLOCK, 1024);
  A(MAX_BLOCK_DIM_X, 1024);
  A(MAX_BLOCK_DIM_Y, 1024);
  A(MAX_BLOCK_DIM_Z, 64);
  A(MAX_GRID_DIM_X, 2147483647);
  A(MAX_GRID_DIM_Y, 65535);
  A(MAX_GRID_DIM_Z, 65535);
  A(MAX_SHARED_MEMORY_PER_BLOCK, 48 << 10);
  A(TOTAL_CONSTANT_MEMORY, 64 << 10);
  A(WARP_SIZE, 32);
  A(MAX_PITCH, 2147483647);
  A(MAX_REGISTERS_PER_BLOCK, 65536);
  A(CLOCK_RATE, p->clock_khz);
  A(TEXTURE_ALIGNMENT, 512);
  A(GPU_OVERLAP, 1);
  A(MULTIPROCESSOR_COUNT, p->sm_count);
  A(KERNEL_EXEC_TIMEOUT, 0);
  A(INTEGRATED, 0);
  A(CAN_MAP_HOST_MEMORY, 1);
  A(COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT);
  A(MAXIMUM_TEXTURE1D_WIDTH, 131072);
  A(MAXIMUM_TEXTURE2D_WIDTH, 131072);
  A(MAXIMUM_TEXTURE2D_HEIGHT, 65536);
  A(MAXIMUM_TEXTURE3D_WIDTH, 16384);
  A(MAXIMUM_TEXTURE3D_HEIGHT, 16384);
  A(MAXIMUM_TEXTURE3D_DEPTH, 16384);
  A(SURFACE_ALIGNMENT, 512);
  A(CONCURRENT_KERNELS, 1);
  A(ECC_ENABLED, 1);
  A(PCI_BUS_ID, d->ordinal + 1);
  A(PCI_DEVICE_ID, 0);
  A(PCI_DOMAIN_ID, 0);
  A(TCC_DRIVER, 0);
  A(MEMORY_CLOCK_RATE, p->mem_clock_khz);
  A(GLOBAL_MEMORY_BUS_WIDTH, p->bus_width_bits);
  A(L2_CACHE_SIZE, p->l2_bytes);
  A(MAX_THREADS_PER_MULTIPROCESSOR, p->max_threads_per_sm);
  A(ASYNC_ENGINE_COUNT, p->async_engines);
  A(UNIFIED_ADDRESSING, 1);
  A(TEXTURE_PITCH_ALIGNMENT, 32);
  A(COMPUTE_CAPABILITY_MAJOR, p->major);
  A(COMPUTE_CAPABILITY_MINOR, p->minor);
  A(STREAM_PRIORITIES_SUPPORTED, 1);
  A(GLOBAL_L1_CACHE_SUPPORTED, 1);
  A(LOCAL_L1_CACHE_SUPPORTED, 1);
  A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, p->smem_per_sm);
  A(MAX_REGISTERS_PER_MULTIPROCESSOR, p->regs_per_sm);
  A(MANAGED_MEMORY, 1);
  A(MULTI_GPU_BOARD, 0);
  A(MULTI_GPU_BOARD_GROUP_ID, d->ordinal);
  A(HOST_NATIVE_ATOMIC_SUPPORTED, 0);
  A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2);
  A(PAGEABLE_MEMORY_ACCESS, 0);
  A(CONCURRENT_MANAGED_ACCESS, 1);
  A(COMPUTE_PREEMPTION_SUPPORTED, 1);
  A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0);
  A(COOPERATIVE_LAUNCH, 1);
  A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, p->smem_per_block_optin);
  A(CAN_FLUSH_REMOTE_WRITES, 0);
  A(HOST_REGISTER_SUPPORTED, 1);
  A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0);
  A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0);
  A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
  A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1);
  A(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0);
  A(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0);
  A(MAX_BLOCKS_PER_MULTIPROCESSOR, p->max_blocks_per_sm);
  A(GENERIC_COMPRESSION_SUPPORTED, 1);
  /* Persisting L2 may take up to 75% of L2 (the tuning guides' set-aside). */
  A(MAX_PERSISTING_L2_CACHE_SIZE, p->l2_bytes / 4 * 3);
  A(MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632);
  A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 1);
  A(RESERVED_SHARED_MEMORY_PER_BLOCK, 1024);
  A(SPARSE_CUDA_ARRAY_SUPPORTED, 1);
  A(READ_ONLY_HOST_REGISTER_SUPPORTED, 1);
  A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1);
  A(MEMORY_POOLS_SUPPORTED, 1);
  A(GPU_DIRECT_RDMA_SUPPORTED, 1);
  A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, 1);
  A(GPU_DIRECT_RDMA_WRITES_ORDERING, 0);
  A(MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  A(CLUSTER_LAUNCH, p->major >= 9);
  A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1);
  A(CAN_USE_64_BIT_STREAM_MEM_OPS, 1);
  A(CAN_USE_STREAM_WAIT_VALUE_NOR, 1);
  A(DMA_BUF_SUPPORTED, 1);
  A(IPC_EVENT_SUPPORTED, 1);
  A(MEM_SYNC_DOMAIN_COUNT, p->major >= 9 ? 4 : 1);
  A(TENSOR_MAP_ACCESS_SUPPORTED, p->major >= 9);
  /* No fabric (IMEX) here: FABRIC handles are refused (memory.c). */
  A(HANDLE_TYPE_FABRIC_SUPPORTED, 0);
  A(UNIFIED_FUNCTION_POINTERS, 1);
  A(NUMA_CONFIG, 0);
  A(NUMA_ID, -1);
  A(MULTICAST_SUPPORTED, 0);
  A(MPS_ENABLED, 0);
  A(HOST_NUMA_ID, -1);
#undef A
  /* A UUID that is the same run after run: the PCI ids and the ordinal. */
  memset(d->uuid, 0, sizeof d->uuid);
  memcpy(d->uuid, "simcuda", 7);
  d->uuid[8] = (unsigned char)(p->pci_device_id >> 8);
  d->uuid[9] = (unsigned char)p->pci_device_id;
  d->uuid[15] = (unsigned char)d->ordinal;
}

static void build_table(void) {
  const char *spec = getenv("SIMCUDA_GPU");
  struct tdm__simcuda_preset p[SIMCUDA_MAX_DEVICES];
  char err[256];
  int n = 0;
  if (!spec || !*spec)
    spec = "h100";
  if (tdm__simcuda_parse(spec, p, &n, err, sizeof err)) {
    /* One line, and a platform without devices (cudaErrorNoDevice). */
    fprintf(stderr, "simcuda: SIMCUDA_GPU: %s; no simulated device\n", err);
    n = 0;
  }
  for (int i = 0; i < n; i++) {
    g_dev[i].p = p[i];
    g_dev[i].ordinal = i;
    fill_attributes(&g_dev[i]);
  }
  g_ndev = n;
}

int tdm__simcuda_device_count(void) {
  pthread_once(&g_once, build_table);
  return g_ndev;
}

const struct tdm__simcuda_device *tdm__simcuda_device(int ordinal) {
  pthread_once(&g_once, build_table);
  return ordinal >= 0 && ordinal < g_ndev ? &g_dev[ordinal] : NULL;
}
