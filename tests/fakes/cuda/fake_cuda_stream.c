/* tests/fakes/cuda/fake_cuda_stream.c: the fake driver's streams, events
 * and graph captures — the part of libcuda.so.1 that says when queued
 * work has completed.
 *
 * A stream counts the work queued on it and the work completed; work is
 * queued and completed only when a test says so (fake_cuda_stream_enqueue
 * / _complete, fake_cuda.h), as a GPU would run a kernel "later".  An
 * event recorded on a stream is done once the stream's completed count
 * reaches what was queued at the record; cuEventSynchronize,
 * cuStreamSynchronize and cuCtxSynchronize complete the work they wait
 * for (the GPU got there).  The legacy default stream (0,
 * CU_STREAM_LEGACY) is one static record.  The per-thread default stream
 * is one record per thread: "it gives each host thread its own default
 * stream" (CUDA Programming Guide, Default Stream; Driver API, Stream
 * synchronization behavior: "The per-thread default stream is not a
 * non-blocking stream ... local to both the thread and the CUcontext"),
 * named CU_STREAM_PER_THREAD, or 0 in a _ptsz call.  A stream made by
 * cuStreamCreate belongs to the context current then, and so to its
 * device (cuStreamGetCtx, cuStreamGetDevice); a default stream to the
 * calling thread's current context.
 *
 * Captures: cuStreamBeginCapture_v2 / cuStreamEndCapture per stream, with
 * the mode.  While a global or thread-local capture is underway, the
 * calls CUDA forbids then (memory allocation and free, event query and
 * synchronize, context and stream synchronize: fake__capture_check) fail
 * with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidate every capture
 * (its cuStreamEndCapture then returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
 * and are counted (fake_cuda_capture_violations).  Querying an event
 * recorded during a capture is one too, in any mode.
 *
 * Lock: g_stream_lock around every stream, event and capture record.
 */
#define _GNU_SOURCE
#include "fake_cuda_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fake_cuda.h"

#define cfg fake__cfg
#define MAX_STREAMS 256

typedef struct fake_stream {
    unsigned long long queued, done; /* work items */
    void *ctx;                       /* cuStreamCreate's: its context */
    int device;                      /* ... and that context's device */
    int capturing;                   /* a capture is underway on it */
    int invalidated;                 /* ... and a forbidden call broke it */
    CUstreamCaptureMode mode;
} fake_stream;

typedef struct fake_event {
    fake_stream *s;              /* NULL until recorded */
    unsigned long long ticket;   /* s->queued at the record */
    int in_capture;              /* recorded into a graph being captured */
    int used;                    /* created and not destroyed */
} fake_event;

/* Events come from a static table: like the real driver's, the events a
 * process never destroys are not a leak of its heap. */
#define MAX_EVENTS 4096
static fake_event g_events[MAX_EVENTS];

static pthread_mutex_t g_stream_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_stream g_legacy; /* 0 / CU_STREAM_LEGACY */
static fake_stream *g_streams[MAX_STREAMS];
/* Per-thread default streams: each thread's record, made at its first
 * use and kept (listed here) so that a context synchronize reaches it. */
#define MAX_PTDS 256
static fake_stream *g_ptds[MAX_PTDS];
static int g_nptds;
static __thread fake_stream *t_ptds;
static atomic_long g_violations;
static int g_graph; /* what a captured graph handle points at */

static int is_default(CUstream h)
{
    return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

/* The calling thread's per-thread default stream; caller holds the lock.
 * Past MAX_PTDS threads the record still exists but a context
 * synchronize does not reach it. */
static fake_stream *ptds_locked(void)
{
    if (t_ptds == NULL) {
        t_ptds = calloc(1, sizeof *t_ptds);
        if (t_ptds == NULL)
            abort(); /* a test double out of host memory: nothing to test */
        if (g_nptds < MAX_PTDS)
            g_ptds[g_nptds++] = t_ptds;
    }
    return t_ptds;
}

/* The record of stream handle `h` (`ptsz`: as a _ptsz entry point reads
 * it, 0 being the per-thread stream); caller holds the lock. */
static fake_stream *stream_of_pt(CUstream h, int ptsz)
{
    if (h == CU_STREAM_PER_THREAD || (h == NULL && ptsz))
        return ptds_locked();
    if (h == NULL || h == CU_STREAM_LEGACY)
        return &g_legacy;
    return (fake_stream *)h;
}

static fake_stream *stream_of(CUstream h)
{
    return stream_of_pt(h, 0);
}

/* Every stream, the legacy one first; caller holds the lock. */
#define EACH_STREAM(v)                                                         \
    for (int i_ = 0; i_ < 1 + MAX_STREAMS + MAX_PTDS; i_++)                    \
        for (fake_stream *v = i_ == 0             ? &g_legacy                  \
                              : i_ <= MAX_STREAMS ? g_streams[i_ - 1]          \
                                                  : g_ptds[i_ - 1 - MAX_STREAMS]; \
             v; v = NULL)

/* Whether a capture forbids potentially unsafe calls now; caller holds
 * the lock. */
static int forbidding(void)
{
    EACH_STREAM(s)
    if (s->capturing && s->mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return 1;
    return 0;
}

static CUresult violation(void)
{
    atomic_fetch_add(&g_violations, 1);
    EACH_STREAM(s)
    if (s->capturing)
        s->invalidated = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fake__capture_check(void)
{
    pthread_mutex_lock(&g_stream_lock);
    CUresult r = forbidding() ? violation() : CUDA_SUCCESS;
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

CUresult f_cuStreamCreate(CUstream *s, unsigned int flags)
{
    ENTER(FC_cuStreamCreate);
    (void)flags;
    NEED_INIT();
    int dev;
    if (fake__current_device(&dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_stream *n = calloc(1, sizeof *n);
    if (n == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->ctx = fake__current_ctx();
    n->device = dev;
    pthread_mutex_lock(&g_stream_lock);
    int i = 0;
    while (i < MAX_STREAMS && g_streams[i] != NULL)
        i++;
    if (i < MAX_STREAMS)
        g_streams[i] = n;
    pthread_mutex_unlock(&g_stream_lock);
    if (i == MAX_STREAMS) {
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *s = (CUstream)n; /* never 0, 1 or 2: the default streams */
    return CUDA_SUCCESS;
}

CUresult f_cuStreamDestroy_v2(CUstream s)
{
    ENTER(FC_cuStreamDestroy_v2);
    pthread_mutex_lock(&g_stream_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i] == (fake_stream *)s)
            g_streams[i] = NULL;
    pthread_mutex_unlock(&g_stream_lock);
    free(s);
    return CUDA_SUCCESS;
}

CUresult f_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    ENTER(FC_cuStreamIsCapturing);
    NEED_INIT();
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of(s);
    CUresult r = CUDA_SUCCESS;
    if (cfg.capturing || st->capturing) {
        *status = st->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                  : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    } else if (st == &g_legacy && forbidding()) {
        /* The legacy stream would join another stream's capture. */
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else {
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
    }
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

static CUresult begin_capture(CUstream s, CUstreamCaptureMode mode, int ptsz)
{
    NEED_INIT();
    if ((s == NULL && !ptsz) || s == CU_STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* as CUDA: not the legacy stream */
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of_pt(s, ptsz);
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    if (!st->capturing) {
        st->capturing = 1;
        st->invalidated = 0;
        st->mode = mode;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

CUresult f_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    ENTER(FC_cuStreamBeginCapture_v2);
    return begin_capture(s, mode, 0);
}

CUresult f_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    ENTER(FC_cuStreamBeginCapture_v2_ptsz);
    return begin_capture(s, mode, 1);
}

static CUresult end_capture(CUstream s, CUgraph *graph, int ptsz)
{
    NEED_INIT();
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of_pt(s, ptsz);
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    if (st->capturing) {
        r = st->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
        *graph = st->invalidated ? NULL : (CUgraph)&g_graph;
        st->capturing = 0;
        st->invalidated = 0;
    }
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

CUresult f_cuStreamEndCapture(CUstream s, CUgraph *graph)
{
    ENTER(FC_cuStreamEndCapture);
    return end_capture(s, graph, 0);
}

CUresult f_cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph)
{
    ENTER(FC_cuStreamEndCapture_ptsz);
    return end_capture(s, graph, 1);
}

CUresult fake__stream_place(CUstream s, int ptsz, void **ctx, int *dev)
{
    (void)ptsz;
    fake_stream *st = NULL;
    pthread_mutex_lock(&g_stream_lock);
    for (int i = 0; i < MAX_STREAMS && st == NULL && !is_default(s); i++)
        if (g_streams[i] == (fake_stream *)s)
            st = g_streams[i];
    if (st) {
        *ctx = st->ctx;
        *dev = st->device;
    }
    pthread_mutex_unlock(&g_stream_lock);
    if (st)
        return CUDA_SUCCESS;
    /* A default stream is the calling thread's current context's; so is a
     * handle the fake never made (FAKE_CUDA_PROBE_TABLE's made-up one). */
    CUresult r = fake__current_device(dev);
    *ctx = fake__current_ctx();
    return r;
}

CUresult f_cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
    ENTER(FC_cuStreamGetCtx);
    NEED_INIT();
    int dev;
    void *ctx;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake__stream_place(s, 0, &ctx, &dev);
    *pctx = (CUcontext)ctx;
    return r;
}

CUresult f_cuStreamGetDevice(CUstream s, CUdevice *device)
{
    ENTER(FC_cuStreamGetDevice);
    NEED_INIT();
    void *ctx;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return fake__stream_place(s, 0, &ctx, device);
}

void fake__complete_all(void)
{
    pthread_mutex_lock(&g_stream_lock);
    EACH_STREAM(st)
    st->done = st->queued;
    pthread_mutex_unlock(&g_stream_lock);
}

/* Completes the stream's queued work, then lets the pools give back
 * what they hold above their release thresholds (fake_cuda_pool.c), as a
 * synchronize does. */
CUresult fake__stream_synchronize(CUstream s)
{
    NEED_INIT();
    pthread_mutex_lock(&g_stream_lock);
    CUresult r = CUDA_SUCCESS;
    fake_stream *st = stream_of(s);
    if (forbidding() || st->capturing)
        r = violation();
    else
        st->done = st->queued;
    pthread_mutex_unlock(&g_stream_lock);
    if (r == CUDA_SUCCESS)
        fake__pool_synchronize();
    return r;
}

CUresult f_cuStreamSynchronize(CUstream s)
{
    ENTER(FC_cuStreamSynchronize);
    return fake__stream_synchronize(s);
}

CUresult f_cuCtxSynchronize(void)
{
    ENTER(FC_cuCtxSynchronize);
    NEED_INIT();
    pthread_mutex_lock(&g_stream_lock);
    CUresult r = CUDA_SUCCESS;
    if (forbidding()) {
        r = violation();
    } else {
        EACH_STREAM(s)
        s->done = s->queued;
    }
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

/* ---- events ------------------------------------------------------------------ */

CUresult f_cuEventCreate(CUevent *ev, unsigned int flags)
{
    ENTER(FC_cuEventCreate);
    (void)flags;
    NEED_INIT();
    pthread_mutex_lock(&g_stream_lock);
    fake_event *e = NULL;
    for (int i = 0; i < MAX_EVENTS && e == NULL; i++)
        if (!g_events[i].used)
            e = &g_events[i];
    if (e != NULL)
        *e = (fake_event){.used = 1};
    pthread_mutex_unlock(&g_stream_lock);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ev = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult f_cuEventRecord(CUevent ev, CUstream s)
{
    ENTER(FC_cuEventRecord);
    NEED_INIT();
    fake_event *e = (fake_event *)ev;
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of(s);
    e->in_capture = st->capturing;
    e->s = st;
    e->ticket = st->queued;
    pthread_mutex_unlock(&g_stream_lock);
    return CUDA_SUCCESS;
}

CUresult f_cuEventQuery(CUevent ev)
{
    ENTER(FC_cuEventQuery);
    NEED_INIT();
    fake_event *e = (fake_event *)ev;
    pthread_mutex_lock(&g_stream_lock);
    CUresult r = CUDA_SUCCESS;
    if (forbidding() || e->in_capture)
        r = violation();
    else if (e->s != NULL && e->s->done < e->ticket)
        r = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

CUresult f_cuEventSynchronize(CUevent ev)
{
    ENTER(FC_cuEventSynchronize);
    NEED_INIT();
    fake_event *e = (fake_event *)ev;
    pthread_mutex_lock(&g_stream_lock);
    CUresult r = CUDA_SUCCESS;
    if (forbidding() || e->in_capture)
        r = violation();
    else if (e->s != NULL && e->s->done < e->ticket)
        e->s->done = e->ticket; /* the GPU ran the stream up to the event */
    pthread_mutex_unlock(&g_stream_lock);
    return r;
}

CUresult f_cuEventDestroy_v2(CUevent ev)
{
    ENTER(FC_cuEventDestroy_v2);
    pthread_mutex_lock(&g_stream_lock);
    ((fake_event *)ev)->used = 0;
    pthread_mutex_unlock(&g_stream_lock);
    return CUDA_SUCCESS;
}

/* ---- the test's controls (fake_cuda.h) ------------------------------------------ */

FAKE_EXPORT void fake_cuda_stream_enqueue(void *stream)
{
    pthread_mutex_lock(&g_stream_lock);
    stream_of((CUstream)stream)->queued++;
    pthread_mutex_unlock(&g_stream_lock);
}

FAKE_EXPORT void fake_cuda_stream_complete(void *stream)
{
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of((CUstream)stream);
    st->done = st->queued;
    pthread_mutex_unlock(&g_stream_lock);
}

FAKE_EXPORT long fake_cuda_stream_pending(void *stream)
{
    pthread_mutex_lock(&g_stream_lock);
    fake_stream *st = stream_of((CUstream)stream);
    long n = (long)(st->queued - st->done);
    pthread_mutex_unlock(&g_stream_lock);
    return n;
}

FAKE_EXPORT long fake_cuda_capture_violations(void)
{
    return atomic_load(&g_violations);
}

FAKE_EVENTS(FC_ALIAS)
