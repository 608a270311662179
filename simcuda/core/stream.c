/* simcuda/core/stream.c: streams and events.
 *
 * Work is done when it is enqueued (copies are memcpy, kernels are not
 * run), so every stream is always idle and in order, an event is complete
 * the moment it is recorded, and waiting is a no-op.  A stream or event is
 * a small heap object whose first word is a magic number, so a handle that
 * is not one of ours (or was destroyed) is refused with an error instead of
 * being trusted.  An event keeps the host time it was recorded at, so the
 * elapsed time between two events is the host time the program took
 * between them (kernels taking none).  No lock: a handle is owned by its
 * user, as in CUDA.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <stdlib.h>

CUresult tdm__simcuda_stream_create(int dev, unsigned flags, int priority, void **out) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  struct tdm__simcuda_stream *s = malloc(sizeof *s);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *s = (struct tdm__simcuda_stream){SIMCUDA_STREAM_MAGIC, dev, flags, priority};
  *out = s;
  return CUDA_SUCCESS;
}

int tdm__simcuda_stream_valid(const void *s) {
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
    return 1;
  return ((const struct tdm__simcuda_stream *)s)->magic == SIMCUDA_STREAM_MAGIC;
}

CUresult tdm__simcuda_stream_destroy(void *s) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !tdm__simcuda_stream_valid(s))
    return CUDA_ERROR_INVALID_HANDLE;
  ((struct tdm__simcuda_stream *)s)->magic = 0;
  free(s);
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_event_create(int dev, unsigned flags, void **out) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  struct tdm__simcuda_event *e = malloc(sizeof *e);
  if (!e)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *e = (struct tdm__simcuda_event){SIMCUDA_EVENT_MAGIC, dev, flags, 0, 0};
  *out = e;
  return CUDA_SUCCESS;
}

int tdm__simcuda_event_valid(const void *e) {
  return e && ((const struct tdm__simcuda_event *)e)->magic == SIMCUDA_EVENT_MAGIC;
}

CUresult tdm__simcuda_event_destroy(void *e) {
  if (!tdm__simcuda_event_valid(e))
    return CUDA_ERROR_INVALID_HANDLE;
  ((struct tdm__simcuda_event *)e)->magic = 0;
  free(e);
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_event_record(void *e, void *stream) {
  if (!tdm__simcuda_event_valid(e) || !tdm__simcuda_stream_valid(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  struct tdm__simcuda_event *ev = e;
  ev->recorded = 1;
  ev->ns = tdm__simcuda_now_ns();
  return CUDA_SUCCESS;
}

CUresult tdm__simcuda_event_elapsed(float *ms, void *start, void *end) {
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  if (!tdm__simcuda_event_valid(start) || !tdm__simcuda_event_valid(end))
    return CUDA_ERROR_INVALID_HANDLE;
  const struct tdm__simcuda_event *a = start, *b = end;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  *ms = (float)((double)((int64_t)(b->ns - a->ns)) / 1e6);
  return CUDA_SUCCESS;
}
