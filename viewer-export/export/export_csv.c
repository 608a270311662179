/* viewer-export/export/export_csv.c: `tidemark export --format csv`, the log
 * RMM's logging_resource_adaptor writes, so RMM's REPLAY_BENCHMARK (and
 * anything else that reads those logs) can replay a tidemark history:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   4242,12:00:00.000001,allocate,0x7f0000000000,4096,0
 *   4242,12:00:00.000003,free,0x7f0000000000,4096,0
 *
 * As the adaptor does: Thread is a decimal thread id (events carry none:
 * the recorded process id stands in, so a replay runs one thread); Time is
 * the time of day HH:MM:SS.ffffff (UTC here); Action is allocate, free or
 * "allocate failure" (an OOM, Pointer "(nil)"); Pointer is %p-style hex;
 * Size is the requested bytes; Stream is the stream handle in hex without
 * 0x ("0" for the default stream).
 *
 * So that a replay never frees what it did not allocate, allocations
 * already live when the window opens come first, as allocate rows at the
 * first event's time, and an allocation the history closed by reusing its
 * address gets its free row just before the reuse.  Every device goes to
 * the one file unless --device picks one.  No state, no locks.
 */
#include "export_formats.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct csv {
    FILE *out;
    int64_t tid;
} csv;

static void row(csv *c, uint64_t t_ns, const char *action, uint64_t ptr,
                uint64_t size, uint64_t stream)
{
    uint64_t day_us = (t_ns / 1000) % 86400000000ull;
    unsigned h = (unsigned)(day_us / 3600000000ull);
    unsigned mi = (unsigned)(day_us / 60000000ull % 60);
    unsigned se = (unsigned)(day_us / 1000000ull % 60);
    unsigned us = (unsigned)(day_us % 1000000ull);
    char p[24], s[24];
    if (ptr)
        snprintf(p, sizeof p, "0x%" PRIx64, ptr);
    else
        strcpy(p, "(nil)");
    snprintf(s, sizeof s, "%" PRIx64, stream);
    fprintf(c->out, "%" PRId64 ",%02u:%02u:%02u.%06u,%s,%s,%" PRIu64 ",%s\n",
            c->tid, h, mi, se, us, action, p, size, s);
}

static int addr_cmp(const void *pa, const void *pb)
{
    const tdm_model_alloc *a = *(const tdm_model_alloc *const *)pa;
    const tdm_model_alloc *b = *(const tdm_model_alloc *const *)pb;
    if (a->device_index != b->device_index)
        return a->device_index < b->device_index ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

tdm_status tdm__export_csv(FILE *out, const tdm_export_context *ctx)
{
    const tdm_model *m = ctx->model;
    const tdm_snap *s = ctx->snap;
    csv c = {.out = out, .tid = s->header.pid > 0 ? s->header.pid : 1};
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    size_t n_ev = s->event_count ? s->event_count : 1;
    int32_t *opened = malloc(n_ev * sizeof *opened);
    int32_t *closed = malloc(n_ev * sizeof *closed);
    const tdm_model_alloc **seeded = malloc((m->alloc_count ? m->alloc_count : 1) *
                                            sizeof *seeded);
    size_t nseeded = 0;
    if (!opened || !closed || !seeded)
        goto out;
    for (size_t i = 0; i < s->event_count; i++)
        opened[i] = closed[i] = -1;
    for (size_t i = 0; i < m->alloc_count && i < INT32_MAX; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        const tdm_model_device *d = &m->devices[a->device_index];
        if (ctx->device >= 0 && d->ordinal != ctx->device)
            continue;
        if (a->alloc_seq >= 0)
            opened[a->alloc_seq] = (int32_t)i;
        else
            seeded[nseeded++] = a;
        if (a->free_seq != TDM_MODEL_SEQ_NEVER)
            closed[a->free_seq] = (int32_t)i;
    }
    qsort(seeded, nseeded, sizeof *seeded, addr_cmp);

    fputs("Thread,Time,Action,Pointer,Size,Stream\n", out);
    uint64_t t0 = m->window_start_ns;
    for (size_t i = 0; i < nseeded; i++)
        row(&c, t0, "allocate", seeded[i]->addr, seeded[i]->size, 0);
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *ev = &s->events[i];
        /* A close at an alloc event is a reused address: free it first. */
        if (closed[i] >= 0) {
            const tdm_model_alloc *a = &m->allocs[closed[i]];
            row(&c, ev->time_ns, "free", a->addr, a->size, ev->stream);
        }
        if (opened[i] >= 0) {
            const tdm_model_alloc *a = &m->allocs[opened[i]];
            row(&c, ev->time_ns, "allocate", a->addr, a->size, ev->stream);
        } else if (ev->action == TDM_ACTION_OOM &&
                   (ctx->device < 0 || ev->device == ctx->device)) {
            row(&c, ev->time_ns, "allocate failure", 0, ev->requested, ev->stream);
        }
    }
    st = fflush(out) == 0 && !ferror(out) ? TDM_OK : TDM_IO_ERROR;
    /* The caller says why (the errno of the failed write). */
out:
    if (st == TDM_HOST_OUT_OF_MEMORY)
        fprintf(stderr, "tidemark export: %s\n", tdm_strerror(st));
    free(opened);
    free(closed);
    free(seeded);
    return st;
}
