/* tests/fakes/hip/fake_hip_stream.c: the fake libamdhip64's streams,
 * events and graph captures — the part of HIP that says when queued work
 * has completed.
 *
 * A stream counts the work queued on it and the work completed; work is
 * queued and completed only when a test says so (fake_hip_stream_enqueue
 * / _complete, fake_hip.h), as a GPU would run a kernel "later".  An event
 * recorded on a stream is done once the stream's completed count reaches
 * what was queued at the record; hipEventSynchronize, hipStreamSynchronize,
 * hipDeviceSynchronize (and hipFree, which synchronizes the device) complete
 * the work they wait for (the GPU got there).  The null stream and
 * hipStreamPerThread are one static record per device each (the fake does
 * not tell threads' per-thread streams apart).  Events come from a static
 * table, so that the ones a process never destroys (cache mode keeps its
 * markers for reuse) are not leaks under LeakSanitizer.
 *
 * A stream belongs to the device current at its creation; the null stream
 * and hipStreamPerThread to the calling thread's current device.
 * hipStreamGetDevice (ROCm 6) and hipGetStreamDeviceId answer it.
 *
 * Captures: hipStreamBeginCapture (or, ROCm 6.1, hipStreamBeginCaptureToGraph,
 * which captures into a graph the program made) / hipStreamEndCapture per
 * stream, with the mode.  While a global or thread-local capture is underway, the calls
 * HIP forbids then (hipMalloc, hipFree, event query and synchronize, device
 * and stream synchronize: fake_capture_check) fail with
 * hipErrorStreamCaptureUnsupported, invalidate every capture (its
 * hipStreamEndCapture then returns hipErrorStreamCaptureInvalidated) and are
 * counted (fake_hip_capture_violations).  Querying an event recorded during
 * a capture is one too, in any mode.
 *
 * Lock: stream_mu around every stream, event and capture record.
 */
#include "fake_hip_internal.h"

#define MAX_STREAMS 256
#define MAX_EVENTS 1024

struct ihipEvent_t {
    int used;                  /* a slot of the table handed out */
    struct ihipStream_t *s;    /* NULL until recorded */
    unsigned long long ticket; /* s->queued at the record */
    int in_capture;            /* recorded into a graph being captured */
};

static pthread_mutex_t stream_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ihipStream_t null_streams[MAX_DEVICES], per_thread_streams[MAX_DEVICES];
static struct ihipStream_t *streams[MAX_STREAMS];
static struct ihipEvent_t events[MAX_EVENTS];
static atomic_long violations;
static int a_graph; /* what a captured graph handle points at */

/* The record of stream handle `h`; caller holds the lock. */
static struct ihipStream_t *stream_of(hipStream_t h)
{
    int d = cur_device >= 0 && cur_device < MAX_DEVICES ? cur_device : 0;
    if (h == NULL)
        return &null_streams[d];
    if (h == hipStreamPerThread)
        return &per_thread_streams[d];
    return h;
}

/* Every stream, default ones first; caller holds the lock. */
#define EACH_STREAM(v)                                                         \
    for (int i_ = 0; i_ < 2 * MAX_DEVICES + MAX_STREAMS; i_++)                 \
        for (struct ihipStream_t *v = i_ < MAX_DEVICES       ? &null_streams[i_] \
                                      : i_ < 2 * MAX_DEVICES ? &per_thread_streams[i_ - MAX_DEVICES] \
                                                             : streams[i_ - 2 * MAX_DEVICES]; \
             v; v = NULL)

/* Whether a capture forbids potentially unsafe calls now; caller holds
 * the lock. */
static int forbidding(void)
{
    EACH_STREAM(s)
    if (s->capturing && s->mode != hipStreamCaptureModeRelaxed)
        return 1;
    return 0;
}

static hipError_t violation(void)
{
    atomic_fetch_add(&violations, 1);
    EACH_STREAM(s)
    if (s->capturing)
        s->invalidated = 1;
    return hipErrorStreamCaptureUnsupported;
}

hipError_t fake_capture_check(void)
{
    pthread_mutex_lock(&stream_mu);
    hipError_t r = forbidding() ? violation() : hipSuccess;
    pthread_mutex_unlock(&stream_mu);
    return r;
}

void fake_device_idle(void)
{
    pthread_mutex_lock(&stream_mu);
    EACH_STREAM(s)
    s->done = s->queued;
    pthread_mutex_unlock(&stream_mu);
}

/* Entry points share this: counted, injected error. */
#define ENTER(f)                                                               \
    int e_ = enter(f);                                                         \
    if (e_)                                                                    \
    return fake_last((hipError_t)e_)

/* ---- streams ------------------------------------------------------------------------ */

EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
    ENTER(F_hipStreamCreate);
    hipError_t r = check_device(cur_device);
    if (r != hipSuccess)
        return fake_last(r);
    if (!stream)
        return fake_last(hipErrorInvalidValue);
    struct ihipStream_t *n = calloc(1, sizeof *n);
    if (!n)
        return fake_last(hipErrorOutOfMemory);
    n->device = cur_device;
    pthread_mutex_lock(&stream_mu);
    int i = 0;
    while (i < MAX_STREAMS && streams[i] != NULL)
        i++;
    if (i < MAX_STREAMS)
        streams[i] = n;
    pthread_mutex_unlock(&stream_mu);
    if (i == MAX_STREAMS) {
        free(n);
        return fake_last(hipErrorOutOfMemory);
    }
    *stream = n; /* never 0 or hipStreamPerThread */
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
    ENTER(F_hipStreamDestroy);
    if (!stream || stream == hipStreamPerThread)
        return fake_last(hipErrorInvalidHandle);
    pthread_mutex_lock(&stream_mu);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] == stream)
            streams[i] = NULL;
    pthread_mutex_unlock(&stream_mu);
    free(stream);
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipStreamSynchronize(hipStream_t stream)
{
    ENTER(F_hipStreamSynchronize);
    hipError_t r = check_device(cur_device);
    if (r != hipSuccess)
        return fake_last(r);
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    if (forbidding() || s->capturing)
        r = violation();
    else
        s->done = s->queued;
    pthread_mutex_unlock(&stream_mu);
    if (r == hipSuccess)
        fake_pools_synchronize();
    return fake_last(r);
}

EXPORT hipError_t hipDeviceSynchronize(void)
{
    ENTER(F_hipDeviceSynchronize);
    hipError_t r = check_device(cur_device);
    if (r != hipSuccess)
        return fake_last(r);
    pthread_mutex_lock(&stream_mu);
    if (forbidding()) {
        r = violation();
    } else {
        EACH_STREAM(s)
        s->done = s->queued;
    }
    pthread_mutex_unlock(&stream_mu);
    if (r == hipSuccess)
        fake_pools_synchronize();
    return fake_last(r);
}

int fake_stream_device(hipStream_t h)
{
    if (h == NULL || h == hipStreamPerThread)
        return cur_device;
    pthread_mutex_lock(&stream_mu);
    int d = h->device;
    pthread_mutex_unlock(&stream_mu);
    return d;
}

/* "Returns device ID on the stream." (HIP's hipGetStreamDeviceId); -1 for
 * no stream the fake made, as HIP's answer for an invalid one. */
EXPORT int hipGetStreamDeviceId(hipStream_t stream)
{
    if (enter(F_hipGetStreamDeviceId))
        return -1;
    return fake_stream_device(stream);
}

#if FAKE_HIP_MAJOR >= 6
/* "Gets the device associated with the stream." (hipStreamGetDevice). */
EXPORT hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device)
{
    ENTER(F_hipStreamGetDevice);
    if (!device)
        return fake_last(hipErrorInvalidValue);
    *device = fake_stream_device(stream);
    return fake_last(hipSuccess);
}
#endif

/* ---- graph captures -------------------------------------------------------------------- */

EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status)
{
    ENTER(F_hipStreamIsCapturing);
    if (!status)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    hipError_t r = hipSuccess;
    if (s->capturing) {
        *status = s->invalidated ? hipStreamCaptureStatusInvalidated
                                 : hipStreamCaptureStatusActive;
    } else if (stream == NULL && forbidding()) {
        /* The null stream would join another stream's capture. */
        r = hipErrorStreamCaptureImplicit;
    } else {
        *status = hipStreamCaptureStatusNone;
    }
    pthread_mutex_unlock(&stream_mu);
    return fake_last(r);
}

static hipError_t begin_capture(hipStream_t stream, hipStreamCaptureMode mode)
{
    if (stream == NULL)
        return fake_last(hipErrorStreamCaptureUnsupported); /* not the null stream */
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    hipError_t r = hipErrorIllegalState;
    if (!s->capturing) {
        s->capturing = 1;
        s->invalidated = 0;
        s->mode = mode;
        r = hipSuccess;
    }
    pthread_mutex_unlock(&stream_mu);
    return fake_last(r);
}

EXPORT hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode)
{
    ENTER(F_hipStreamBeginCapture);
    return begin_capture(stream, mode);
}

#if FAKE_HIP_MAJOR >= 6
/* The capture goes into `graph` (after `dependencies`) instead of a new
 * graph; for what the hooks see, a capture like the other. */
EXPORT hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph,
                                               const hipGraphNode_t *dependencies,
                                               const void *dependencyData,
                                               size_t numDependencies, hipStreamCaptureMode mode)
{
    ENTER(F_hipStreamBeginCaptureToGraph);
    (void)dependencyData;
    if (graph == NULL || (numDependencies > 0 && dependencies == NULL))
        return fake_last(hipErrorInvalidValue);
    return begin_capture(stream, mode);
}
#endif

EXPORT hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph)
{
    ENTER(F_hipStreamEndCapture);
    if (!graph)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    hipError_t r = hipErrorIllegalState;
    if (s->capturing) {
        r = s->invalidated ? hipErrorStreamCaptureInvalidated : hipSuccess;
        *graph = s->invalidated ? NULL : (hipGraph_t)(void *)&a_graph;
        s->capturing = 0;
        s->invalidated = 0;
    }
    pthread_mutex_unlock(&stream_mu);
    return fake_last(r);
}

/* ---- events ------------------------------------------------------------------------ */

EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags)
{
    ENTER(F_hipEventCreateWithFlags);
    (void)flags;
    if (!event)
        return fake_last(hipErrorInvalidValue);
    pthread_mutex_lock(&stream_mu);
    int i = 0;
    while (i < MAX_EVENTS && events[i].used)
        i++;
    if (i < MAX_EVENTS)
        events[i] = (struct ihipEvent_t){.used = 1};
    pthread_mutex_unlock(&stream_mu);
    if (i == MAX_EVENTS)
        return fake_last(hipErrorOutOfMemory);
    *event = &events[i];
    return fake_last(hipSuccess);
}

EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    ENTER(F_hipEventRecord);
    if (!event || !event->used)
        return fake_last(hipErrorInvalidHandle);
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    event->in_capture = s->capturing;
    event->s = s;
    event->ticket = s->queued;
    pthread_mutex_unlock(&stream_mu);
    return fake_last(hipSuccess);
}

/* HIP keeps hipErrorNotReady as the thread's last error, like any other. */
EXPORT hipError_t hipEventQuery(hipEvent_t event)
{
    ENTER(F_hipEventQuery);
    if (!event || !event->used)
        return fake_last(hipErrorInvalidHandle);
    pthread_mutex_lock(&stream_mu);
    hipError_t r = hipSuccess;
    if (forbidding() || event->in_capture)
        r = violation();
    else if (event->s != NULL && event->s->done < event->ticket)
        r = hipErrorNotReady;
    pthread_mutex_unlock(&stream_mu);
    return fake_last(r);
}

EXPORT hipError_t hipEventSynchronize(hipEvent_t event)
{
    ENTER(F_hipEventSynchronize);
    if (!event || !event->used)
        return fake_last(hipErrorInvalidHandle);
    pthread_mutex_lock(&stream_mu);
    hipError_t r = hipSuccess;
    if (forbidding() || event->in_capture)
        r = violation();
    else if (event->s != NULL && event->s->done < event->ticket)
        event->s->done = event->ticket; /* the GPU ran the stream up to the event */
    pthread_mutex_unlock(&stream_mu);
    return fake_last(r);
}

EXPORT hipError_t hipEventDestroy(hipEvent_t event)
{
    ENTER(F_hipEventDestroy);
    if (!event || !event->used)
        return fake_last(hipErrorInvalidHandle);
    pthread_mutex_lock(&stream_mu);
    event->used = 0;
    pthread_mutex_unlock(&stream_mu);
    return fake_last(hipSuccess);
}

/* ---- the test's controls (fake_hip.h) ------------------------------------------ */

EXPORT void fake_hip_stream_enqueue(void *stream)
{
    pthread_mutex_lock(&stream_mu);
    stream_of(stream)->queued++;
    pthread_mutex_unlock(&stream_mu);
}

EXPORT void fake_hip_stream_complete(void *stream)
{
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    s->done = s->queued;
    pthread_mutex_unlock(&stream_mu);
}

EXPORT long fake_hip_stream_pending(void *stream)
{
    pthread_mutex_lock(&stream_mu);
    struct ihipStream_t *s = stream_of(stream);
    long n = (long)(s->queued - s->done);
    pthread_mutex_unlock(&stream_mu);
    return n;
}

EXPORT long fake_hip_capture_violations(void)
{
    return atomic_load(&violations);
}
