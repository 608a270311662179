/* viewer-export/reader/reader_load.c: loading a snapshot for a program
 * (tidemark_reader.h): the file read as every command reads it
 * (import/load.h: a .tdm, or a format of the import table), its model,
 * the category of each allocation, then the rows the accessors hand out.
 *
 * Messages are the reader's own, put in the caller's buffer instead of
 * on stderr; nothing is printed.  Lock: tdm__reader_lock around
 * everything that touches the model's process-wide state. */
#include "reader_internal.h"

#include "load.h"
#include "torch_segments.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

pthread_mutex_t tdm__reader_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(char *err, size_t errlen, const char *text)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", text);
}

/* Frees everything of `s`; the caller holds the lock. */
static void free_locked(tdm_snapshot *s)
{
    if (!s)
        return;
    free(s->events);
    free(s->segments);
    free(s->blocks);
    free(s->frames);
    free(s->stack_frames);
    free(s->devices);
    free(s->allocations);
    free(s->cats);
    free(s->cat_sources);
    if (s->model)
        tdm__model_free(s->model);
    tdm__input_snap_free(s->snap);
    free(s);
}

/* The model and the categories over a snapshot just read. */
static tdm_status analyse(tdm_snapshot *s)
{
    tdm_status st = tdm__model_build(s->snap, &s->model);
    if (st != TDM_OK)
        return st;
    tdm_category_decision d;
    st = tdm__categories_decide(s->model, &d);
    if (st != TDM_OK)
        return st;
    size_t n = s->model->alloc_count;
    s->cats = malloc(n ? n : 1);
    s->cat_sources = malloc(n ? n : 1);
    if (s->cats && s->cat_sources) {
        for (size_t i = 0; i < n; i++) {
            s->cats[i] = d.cats[i];
            s->cat_sources[i] = d.why[i].source;
        }
    } else {
        st = TDM_HOST_OUT_OF_MEMORY;
    }
    tdm__categories_decision_free(&d);
    if (st != TDM_OK)
        return st;
    s->torch = tdm__torch_segments_seen(s->snap);
    return tdm__reader_make_rows(s);
}

/* What a read that stopped with exit code `rc` was (load.h's codes). */
static tdm_status status_of(int rc, const char *msg)
{
    if (rc == TDM_EXIT_TOOL_ERROR)
        return TDM_HOST_OUT_OF_MEMORY;
    if (strstr(msg, tdm_strerror(TDM_UNSUPPORTED_VERSION)))
        return TDM_UNSUPPORTED_VERSION;
    if (strstr(msg, tdm_strerror(TDM_IO_ERROR)))
        return TDM_IO_ERROR;
    if (strstr(msg, tdm_strerror(TDM_TRUNCATED)))
        return TDM_TRUNCATED;
    return TDM_FORMAT_ERROR;
}

tdm_status tdm_snapshot_load(const char *path, unsigned flags, tdm_snapshot **out, char *err,
                             size_t errlen)
{
    say(err, errlen, "");
    if (!out)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    if (!path) {
        say(err, errlen, "no path");
        return TDM_INVALID_ARGUMENT;
    }
    /* Said here as the commands say it, before a reader's "input/output
     * error". */
    struct stat st;
    char msg[512];
    if (stat(path, &st) != 0) {
        snprintf(msg, sizeof msg, "%s: %s", path, strerror(errno));
        say(err, errlen, msg);
        return TDM_IO_ERROR;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(msg, sizeof msg, "%s: a directory: each of its .tdm files is a snapshot", path);
        say(err, errlen, msg);
        return TDM_INVALID_ARGUMENT;
    }
    tdm_snapshot *s = calloc(1, sizeof *s);
    if (!s) {
        say(err, errlen, tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_HOST_OUT_OF_MEMORY;
    }
    msg[0] = '\0';
    pthread_mutex_lock(&tdm__reader_lock);
    int rc = tdm__input_read_quiet(path, &s->snap, &s->truncated, &s->truncated_at, msg,
                                   sizeof msg);
    tdm_status status = TDM_OK;
    if (!s->snap)
        status = status_of(rc, msg);
    else if (s->truncated && !(flags & TDM_SNAPSHOT_PARTIAL_OK))
        status = TDM_TRUNCATED;
    else if ((status = analyse(s)) != TDM_OK)
        snprintf(msg, sizeof msg, "%s: %s", path, tdm_strerror(status));
    if (status != TDM_OK) {
        free_locked(s);
        s = NULL;
    }
    pthread_mutex_unlock(&tdm__reader_lock);
    if (status != TDM_OK) {
        say(err, errlen, msg[0] ? msg : tdm_strerror(status));
        return status;
    }
    *out = s;
    return TDM_OK;
}

void tdm_snapshot_free(tdm_snapshot *snap)
{
    if (!snap)
        return;
    pthread_mutex_lock(&tdm__reader_lock);
    free_locked(snap);
    pthread_mutex_unlock(&tdm__reader_lock);
}

tdm_status tdm_snapshot_get_info(const tdm_snapshot *snap, tdm_snapshot_info *info)
{
    if (!snap || !info || info->size == 0)
        return TDM_INVALID_ARGUMENT;
    const tdm_snap *s = snap->snap;
    const tdm_snap_header *h = &s->header;
    tdm_snapshot_info full = {
        .size = sizeof full,
        .host = h->host ? h->host : "",
        .tool_version = h->tool_version ? h->tool_version : "",
        .command = h->command ? h->command : "",
        .config = h->config ? h->config : "",
        .metadata = h->metadata ? h->metadata : "",
        .notes = h->notes ? h->notes : "",
        .alloc_mode = h->alloc_mode ? h->alloc_mode : "",
        .pid = h->pid,
        .rank = h->rank,
        .local_rank = h->local_rank,
        .world_size = h->world_size,
        .format_version = h->format_version,
        .start_time_us = h->start_time_us,
        .dump_time_us = h->dump_time_us,
        .max_entries = h->max_entries,
        .dropped_events = s->dropped_events,
        .time_origin_ns = tdm__model_time_origin_ns(snap->model),
        .complete = s->complete,
        .truncated = snap->truncated,
        .truncated_at = snap->truncated_at,
        .torch_segments = snap->torch,
        .event_count = s->event_count,
        .segment_count = s->segment_count,
        .block_count = s->block_count,
        .frame_count = s->frame_count,
        .stack_count = s->stack_count,
        .stack_frame_count = snap->stack_frame_count,
        .device_count = snap->model->device_count,
        .allocation_count = snap->model->alloc_count,
        .phase_count = s->phase_count,
    };
    size_t n = info->size < sizeof full ? info->size : sizeof full;
    memcpy(info, &full, n);
    info->size = n;
    return TDM_OK;
}
