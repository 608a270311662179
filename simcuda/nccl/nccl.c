/* simcuda/nccl/nccl.c: the simulated NCCL (libsimnccl.so, soname
 * libnccl.so.2), so that torch.distributed's NCCL backend runs on the
 * simulated platform.  NVIDIA's NCCL cannot: it carries its own static
 * cudart, which asks the driver for private tables the platform does not
 * simulate (docs/simulate.md).
 *
 * Each rank is its own process and no rank ever talks to another here:
 *  - a communicator is made locally from the rank and size its init call
 *    is given; the unique id (which torch passes through its TCPStore)
 *    is random bytes and means nothing;
 *  - a collective is the copy one rank can do alone, as if every peer held
 *    the same data as this one (all-reduce: the input into the output;
 *    broadcast and reduce: the root's input into its output; all-gather
 *    and gather: the rank's chunk into every slot; reduce-scatter: the
 *    rank's slice; all-to-all: the chunk this rank would send to itself,
 *    into every slot).  That keeps what DDP compares across ranks
 *    (parameter counts and shapes, gathered at start) consistent.  Values
 *    are meaningless anyway: kernels are not run.  send/recv leave the
 *    receive buffer as it is.  Streams complete at enqueue on the
 *    simulated platform, so the copy is done at once on the host (device
 *    memory is host address space);
 *  - NCCL's own device memory is real on the simulated device, so that
 *    tidemark sees it and books it apart from tensors: ncclMemAlloc and a
 *    communicator's buffers are taken through the driver's public
 *    virtual-memory calls (cuMemCreate, cuMemAddressReserve, cuMemMap),
 *    as NCCL does with cuMem enabled (its default), so tidemark's
 *    interposer sees them as it sees NCCL's on a GPU.  A communicator of
 *    more than one rank holds one NCCL_BUFFSIZE buffer (NCCL's documented
 *    default, 4 MiB; the environment variable is read as NCCL reads it)
 *    per peer, rounded up to the allocation granularity: the order of what
 *    NCCL's simple protocol holds per peer, not NCCL's exact footprint,
 *    which depends on channels, protocols and topology.
 *
 * What is not simulated (windows, signals, device communicators, grow and
 * shrink) is a generated stub answering ncclInvalidUsage, once logged.
 * Thread safety: communicators are independent; the group depth is per
 * thread, as NCCL's.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "simcuda.h"

/* The NCCL ABI, from NCCL's documentation (nccl.h of 2.30). */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

/* The version the CUDA 13 wheel pins (nvidia-nccl-cu13 2.30.7), coded as
 * NCCL codes it from 2.9 on; PyTorch gates features on it. */
#define SIMNCCL_VERSION (2 * 10000 + 30 * 100 + 7)
#define SIMNCCL_UNIQUE_ID_BYTES 128
#define SIMNCCL_DEFAULT_BUFFSIZE ((size_t)4 << 20)
#define SIMNCCL_COMM_MAGIC 0x4e43434cu
#define SIMNCCL_MAX_OPS 64 /* ncclNumOps and the custom ops after it */

typedef struct { char internal[SIMNCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef struct simnccl_comm *ncclComm_t;
typedef int ncclDataType_t; /* ncclInt8 0 ... ncclFloat8e5m2 11 */
typedef int ncclRedOp_t;    /* ncclSum 0 ... ncclAvg 4, then custom */
typedef void ncclConfig_t;  /* read by nobody here */

struct simnccl_comm {
    uint32_t magic;
    int rank, nranks, device;
    /* the communicator's own buffer (0 size: none) */
    CUdeviceptr buf;
    size_t buf_size;
    CUmemGenericAllocationHandle buf_handle;
    int next_op;
};

/* Prototypes of what is implemented, from NCCL's documentation. */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
                                      ncclUniqueId *ids, ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
                                      int residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, void *stream);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, void *stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                       void *stream);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, void *stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, void *stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               void *stream);
ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, void *stream);
ncclResult_t ncclGather(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                        ncclComm_t comm, void *stream);
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, void *stream);
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      void *stream);

static __thread int g_group_depth;

static struct simnccl_comm *check(ncclComm_t c)
{
    return c && c->magic == SIMNCCL_COMM_MAGIC ? c : NULL;
}

/* Bytes of one element of ncclDataType_t t, 0 if t is not one. */
static size_t type_size(ncclDataType_t t)
{
    static const unsigned char sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return t >= 0 && (size_t)t < sizeof sizes ? sizes[t] : 0;
}

/* Device memory through the driver's public virtual-memory calls, on the
 * current device, rounded up to the granularity.  *size becomes the size
 * mapped. */
static ncclResult_t vmm_alloc(int dev, size_t *size, CUdeviceptr *out,
                              CUmemGenericAllocationHandle *handle)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
                    CUDA_SUCCESS || gran == 0)
        gran = SIMCUDA_GRANULARITY;
    size_t n = (*size + gran - 1) / gran * gran;
    if (n == 0)
        n = gran;
    CUdeviceptr va = 0;
    if (cuMemCreate(handle, n, &prop, 0) != CUDA_SUCCESS)
        return ncclUnhandledCudaError;
    if (cuMemAddressReserve(&va, n, gran, 0, 0) != CUDA_SUCCESS) {
        cuMemRelease(*handle);
        return ncclUnhandledCudaError;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemMap(va, n, 0, *handle, 0) != CUDA_SUCCESS) {
        cuMemAddressFree(va, n);
        cuMemRelease(*handle);
        return ncclUnhandledCudaError;
    }
    if (cuMemSetAccess(va, n, &access, 1) != CUDA_SUCCESS) {
        cuMemUnmap(va, n);
        cuMemAddressFree(va, n);
        cuMemRelease(*handle);
        return ncclUnhandledCudaError;
    }
    *size = n;
    *out = va;
    return ncclSuccess;
}

static void vmm_free(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle handle)
{
    cuMemUnmap(va, size);
    cuMemRelease(handle);
    cuMemAddressFree(va, size);
}

/* The device of the calling thread's current context, as NCCL takes it. */
static int current_device(void)
{
    CUdevice d;
    return cuCtxGetDevice(&d) == CUDA_SUCCESS ? (int)d : -1;
}

static size_t buffsize(void)
{
    const char *s = getenv("NCCL_BUFFSIZE");
    if (s && *s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 0);
        if (*end == '\0' && v > 0)
            return (size_t)v;
    }
    return SIMNCCL_DEFAULT_BUFFSIZE;
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = SIMNCCL_VERSION;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    size_t got = 0;
    while (got < sizeof id->internal) {
        ssize_t n = getrandom(id->internal + got, sizeof id->internal - got, 0);
        if (n <= 0)
            return ncclSystemError;
        got += (size_t)n;
    }
    return ncclSuccess;
}

static ncclResult_t comm_make(ncclComm_t *out, int nranks, int rank, int dev)
{
    if (!out || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    if (dev < 0)
        return ncclUnhandledCudaError; /* no current device */
    struct simnccl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->magic = SIMNCCL_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->device = dev;
    c->next_op = 5; /* after ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg */
    if (nranks > 1) {
        c->buf_size = buffsize() * (size_t)(nranks - 1);
        ncclResult_t r = vmm_alloc(dev, &c->buf_size, &c->buf, &c->buf_handle);
        if (r != ncclSuccess) {
            free(c);
            return r;
        }
    }
    tdm__simcuda_log("simnccl: communicator rank %d of %d on device %d, %zu B of buffers", rank,
                     nranks, dev, c->buf_size);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)id;
    return comm_make(comm, nranks, rank, current_device());
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    (void)id;
    (void)config; /* a non-blocking init is complete at once: ncclSuccess */
    return comm_make(comm, nranks, rank, current_device());
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid,
                                      ncclUniqueId *ids, ncclConfig_t *config)
{
    (void)config;
    if (nid < 1 || !ids)
        return ncclInvalidArgument;
    return comm_make(comm, nranks, rank, current_device());
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms || ndev < 1)
        return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= tdm__simcuda_device_count())
            return ncclInvalidArgument;
        ncclResult_t r = comm_make(&comms[i], ndev, i, dev);
        if (r != ncclSuccess) {
            while (i-- > 0)
                ncclCommDestroy(comms[i]);
            return r;
        }
    }
    return ncclSuccess;
}

/* Ranks of one color form a communicator; alone, a rank cannot know how
 * many share its color, so it takes the parent's size, as when every rank
 * gives the same color (what torch's new_group over all ranks does). */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    (void)key;
    (void)config;
    struct simnccl_comm *c = check(comm);
    if (!c || !newcomm)
        return ncclInvalidArgument;
    if (color < 0) { /* NCCL_SPLIT_NOCOLOR: this rank takes part in none */
        *newcomm = NULL;
        return ncclSuccess;
    }
    return comm_make(newcomm, c->nranks, c->rank, c->device);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return check(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    struct simnccl_comm *c = check(comm);
    if (!c)
        return comm ? ncclInvalidArgument : ncclSuccess;
    if (c->buf_size)
        vmm_free(c->buf, c->buf_size, c->buf_handle);
    c->magic = 0;
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return ncclCommDestroy(comm);
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
    (void)flags;
    return check(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    if (!check(comm) || !err)
        return ncclInvalidArgument;
    *err = ncclSuccess; /* nothing runs asynchronously */
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!check(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!check(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "";
}

ncclResult_t ncclGroupStart(void)
{
    g_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (g_group_depth <= 0)
        return ncclInvalidUsage;
    g_group_depth--;
    return ncclSuccess;
}

/* An ncclMemAlloc allocation: its mapping and handle, found again by
 * ncclMemFree.  A short list under a lock: these are few and large. */
struct simnccl_mem {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
    struct simnccl_mem *next;
};
static struct simnccl_mem *g_mem;
static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr || size == 0)
        return ncclInvalidArgument;
    struct simnccl_mem *m = calloc(1, sizeof *m);
    if (!m)
        return ncclSystemError;
    int dev = current_device();
    if (dev < 0) {
        free(m);
        return ncclUnhandledCudaError;
    }
    m->size = size;
    ncclResult_t r = vmm_alloc(dev, &m->size, &m->va, &m->handle);
    if (r != ncclSuccess) {
        free(m);
        return r;
    }
    pthread_mutex_lock(&g_mem_lock);
    m->next = g_mem;
    g_mem = m;
    pthread_mutex_unlock(&g_mem_lock);
    *ptr = (void *)(uintptr_t)m->va;
    return ncclSuccess;
}

ncclResult_t ncclMemFree(void *ptr)
{
    if (!ptr)
        return ncclSuccess;
    pthread_mutex_lock(&g_mem_lock);
    struct simnccl_mem **p = &g_mem;
    while (*p && (*p)->va != (CUdeviceptr)(uintptr_t)ptr)
        p = &(*p)->next;
    struct simnccl_mem *m = *p;
    if (m)
        *p = m->next;
    pthread_mutex_unlock(&g_mem_lock);
    if (!m)
        return ncclInvalidArgument;
    vmm_free(m->va, m->size, m->handle);
    free(m);
    return ncclSuccess;
}

/* Registration makes no copy and takes no memory: the handle is the buffer. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    (void)size;
    if (!check(comm) || !handle)
        return ncclInvalidArgument;
    *handle = buff;
    return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    (void)handle;
    return check(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
                                      int residence, ncclComm_t comm)
{
    (void)scalar;
    (void)residence;
    struct simnccl_comm *c = check(comm);
    if (!c || !op || !type_size(type))
        return ncclInvalidArgument;
    if (c->next_op >= SIMNCCL_MAX_OPS)
        return ncclInvalidUsage;
    *op = c->next_op++;
    return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    (void)op;
    return check(comm) ? ncclSuccess : ncclInvalidArgument;
}

/* Copy n bytes unless source and destination are the same (in place). */
static void copy(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memmove(dst, src, n);
}

/* The checks every collective makes; *bytes is count elements of type. */
static ncclResult_t args(ncclComm_t comm, size_t count, ncclDataType_t type, size_t *bytes)
{
    if (!check(comm))
        return ncclInvalidArgument;
    size_t sz = type_size(type);
    if (!sz || (count && sz > SIZE_MAX / count))
        return ncclInvalidArgument;
    *bytes = count * sz;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, void *stream)
{
    (void)op;
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess || (n && (!send || !recv)))
        return r != ncclSuccess ? r : ncclInvalidArgument;
    copy(recv, send, n);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess)
        return r;
    if (root < 0 || root >= comm->nranks || (n && !recv))
        return ncclInvalidArgument;
    /* Only the root's input counts; elsewhere the output keeps what this
     * rank holds, which stands for the root's. */
    if (comm->rank == root) {
        if (n && !send)
            return ncclInvalidArgument;
        copy(recv, send, n);
    }
    return ncclSuccess;
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                       void *stream)
{
    return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, void *stream)
{
    (void)op;
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, sendcount, type, &n);
    if (r != ncclSuccess || (n && (!send || !recv)))
        return r != ncclSuccess ? r : ncclInvalidArgument;
    for (int i = 0; i < comm->nranks; i++)
        copy((char *)recv + (size_t)i * n, send, n);
    return ncclSuccess;
}

ncclResult_t ncclGather(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                        ncclComm_t comm, void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess)
        return r;
    if (root < 0 || root >= comm->nranks || (n && !send))
        return ncclInvalidArgument;
    if (comm->rank == root) {
        if (n && !recv)
            return ncclInvalidArgument;
        for (int i = 0; i < comm->nranks; i++)
            copy((char *)recv + (size_t)i * n, send, n);
    }
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               void *stream)
{
    (void)op;
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, recvcount, type, &n);
    if (r != ncclSuccess || (n && (!send || !recv)))
        return r != ncclSuccess ? r : ncclInvalidArgument;
    copy(recv, (const char *)send + (size_t)comm->rank * n, n);
    return ncclSuccess;
}

ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess || (n && (!send || !recv)))
        return r != ncclSuccess ? r : ncclInvalidArgument;
    if (n == 0)
        return ncclSuccess;
    /* Every peer sends what this rank sends itself.  In place, that chunk is
     * kept aside first: the slots overwrite the input. */
    const char *mine = (const char *)send + (size_t)comm->rank * n;
    char *keep = NULL;
    if ((const char *)recv < (const char *)send + (size_t)comm->nranks * n &&
            (const char *)send < (const char *)recv + (size_t)comm->nranks * n) {
        if (!(keep = malloc(n)))
            return ncclSystemError;
        memcpy(keep, mine, n);
        mine = keep;
    }
    for (int i = 0; i < comm->nranks; i++)
        copy((char *)recv + (size_t)i * n, mine, n);
    free(keep);
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess)
        return r;
    return peer < 0 || peer >= comm->nranks || (n && !send) ? ncclInvalidArgument : ncclSuccess;
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      void *stream)
{
    (void)stream;
    size_t n;
    ncclResult_t r = args(comm, count, type, &n);
    if (r != ncclSuccess)
        return r;
    return peer < 0 || peer >= comm->nranks || (n && !recv) ? ncclInvalidArgument : ncclSuccess;
}
