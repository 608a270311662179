/* viewer-export/export/export_json.c: `tidemark export --format json`, the
 * analysis model (model.h) and the categories as one JSON document for
 * scripts.  docs/export.md "json" is the schema; its version is the
 * top-level "tidemark_json" number, raised whenever a field changes
 * meaning or goes away (new fields may appear without a bump).
 *
 * Shape: {"tidemark_json":1, "snapshot":{…}, "phases":[…],
 * "devices":[{…, "timeline":{columns}}], "allocations":{columns},
 * "frames":[…], "stacks":[…]}.  Long tables are written column-wise
 * (one array per field) so a script loads them straight into arrays or a
 * DataFrame and the file stays small.  Times are ns since the epoch;
 * positions ("seq") index the snapshot's events, -1 being the window
 * start; a free_seq of null means still live at the dump.  No state, no
 * locks.
 */
#include "categories.h"
#include "export_formats.h"
#include "json.h"

#include <stdlib.h>

#define JSON_VERSION 1

typedef struct col {
    const tdm_model *m;
    const uint8_t *cats;
    const int *keep; /* per device index: exported */
} col;

static void arr_begin(tdm_jw *w, const char *key)
{
    tdm__jw_key(w, key);
    tdm__jw_open(w, '[');
}

static void arr_end(tdm_jw *w) { tdm__jw_close(w, ']'); }

static void v_i64(tdm_jw *w, int64_t v)
{
    tdm__jw_sep(w);
    tdm__jw_i64(w, v);
}

static void v_u64(tdm_jw *w, uint64_t v)
{
    tdm__jw_sep(w);
    tdm__jw_u64(w, v);
}

static void v_str(tdm_jw *w, const char *s)
{
    tdm__jw_sep(w);
    tdm__jw_str(w, s);
}

static void v_bool(tdm_jw *w, int b)
{
    tdm__jw_sep(w);
    tdm__jw_lit(w, b ? "true" : "false");
}

/* A free's position: null for an allocation still live at the dump. */
static void v_free_seq(tdm_jw *w, int64_t seq)
{
    tdm__jw_sep(w);
    if (seq == TDM_MODEL_SEQ_NEVER)
        tdm__jw_lit(w, "null");
    else
        tdm__jw_i64(w, seq);
}

/* A free's time, read from its event: null as for v_free_seq. */
static void v_free_time(tdm_jw *w, const tdm_snap *s, int64_t seq)
{
    tdm__jw_sep(w);
    if (seq == TDM_MODEL_SEQ_NEVER)
        tdm__jw_lit(w, "null");
    else
        tdm__jw_u64(w, s->events[seq].time_ns);
}

/* "key":[…], one value v(w, …) per pass of the loop header `rows`: the
 * tables are written column by column, each column one such array. */
#define ARRAY(w, key, rows, v, ...)                                            \
    do {                                                                       \
        arr_begin(w, key);                                                     \
        rows v(w, __VA_ARGS__);                                                \
        arr_end(w);                                                            \
    } while (0)

static void header(tdm_jw *w, const tdm_export_context *ctx)
{
    const tdm_snap_header *h = &ctx->snap->header;
    tdm__jw_key(w, "snapshot");
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "path", ctx->input_path);
    tdm__jw_ku64(w, "format_version", h->format_version);
    tdm__jw_kstr(w, "tool_version", h->tool_version);
    tdm__jw_kstr(w, "host", h->host);
    tdm__jw_ki64(w, "pid", h->pid);
    tdm__jw_ki64(w, "rank", h->rank);
    tdm__jw_ki64(w, "world_size", h->world_size);
    tdm__jw_kstr(w, "command", h->command);
    tdm__jw_kstr(w, "metadata", h->metadata);
    tdm__jw_kstr(w, "notes", h->notes ? h->notes : "");
    tdm__jw_kstr(w, "config", h->config);
    tdm__jw_kstr(w, "alloc_mode", h->alloc_mode);
    tdm__jw_ku64(w, "start_time_us", h->start_time_us);
    tdm__jw_ku64(w, "dump_time_us", h->dump_time_us);
    tdm__jw_ku64(w, "max_entries", h->max_entries);
    tdm__jw_ku64(w, "event_count", ctx->snap->event_count);
    tdm__jw_ku64(w, "dropped_events", ctx->snap->dropped_events);
    tdm__jw_key(w, "complete");
    tdm__jw_lit(w, ctx->snap->complete ? "true" : "false");
    tdm__jw_key(w, "state_known");
    tdm__jw_lit(w, ctx->model->state_known ? "true" : "false");
    tdm__jw_ku64(w, "window_start_ns", ctx->model->window_start_ns);
    tdm__jw_ku64(w, "window_end_ns", ctx->model->window_end_ns);
    tdm__jw_close(w, '}');
}

static void device(tdm_jw *w, const col *c, size_t d)
{
    const tdm_model *m = c->m;
    const tdm_model_device *dev = &m->devices[d];
    char pbuf[32];
    tdm__jw_sep(w);
    tdm__jw_open(w, '{');
    tdm__jw_ki64(w, "ordinal", dev->ordinal);
    tdm__jw_kstr(w, "vendor", dev->vendor);
    tdm__jw_kstr(w, "name", dev->name);
    tdm__jw_ku64(w, "capacity", dev->capacity);
    tdm__jw_ki64(w, "peak_allocated", dev->peak_allocated);
    tdm__jw_ki64(w, "peak_seq", dev->peak_seq);
    tdm__jw_ku64(w, "peak_time_ns", dev->peak_time_ns);
    tdm__jw_ku64(w, "peak_step", dev->peak_step);
    tdm__jw_kstr(w, "peak_phase", tdm__model_phase_name(m, dev->peak_phase, pbuf, sizeof pbuf));
    tdm__jw_key(w, "reserved_known");
    tdm__jw_lit(w, dev->reserved_known ? "true" : "false");
    tdm__jw_ki64(w, "reserved_at_peak", dev->reserved_at_peak);
    tdm__jw_ki64(w, "peak_reserved", dev->peak_reserved);
    tdm__jw_kstr(w, "end_source",
                 dev->end_source == TDM_MODEL_END_FROM_STATE ? "state" : "replay");
    tdm__jw_ki64(w, "end_allocated", dev->end_allocated);
    tdm__jw_ki64(w, "end_reserved", dev->end_reserved);
    tdm__jw_ku64(w, "end_blocks", dev->end_blocks);
    tdm__jw_ku64(w, "alloc_events", dev->alloc_events);
    tdm__jw_ku64(w, "free_events", dev->free_events);
    tdm__jw_ku64(w, "oom_events", dev->oom_events);
    tdm__jw_ku64(w, "seeded_from_free", dev->seeded_from_free);
    tdm__jw_ku64(w, "seeded_from_state", dev->seeded_from_state);
    tdm__jw_ku64(w, "anomalies", dev->anomalies);

    /* Bytes per category live at the peak. */
    uint64_t at_peak[TDM_CATEGORY_COUNT_] = {0};
    for (size_t i = 0; i < m->alloc_count; i++)
        if (m->allocs[i].device_index == d &&
            tdm__model_alloc_live_at(&m->allocs[i], dev->peak_seq))
            at_peak[c->cats[i]] += m->allocs[i].size;
    tdm__jw_key(w, "categories_at_peak");
    tdm__jw_open(w, '{');
    for (unsigned k = 0; k < TDM_CATEGORY_COUNT_; k++)
        tdm__jw_ku64(w, tdm_category_name((tdm_category)k), at_peak[k]);
    tdm__jw_close(w, '}');

    tdm__jw_key(w, "timeline");
    tdm__jw_open(w, '{');
#define SAMPLES for (size_t i = 0; i < dev->sample_count; i++)
    ARRAY(w, "seq", SAMPLES, v_i64, dev->samples[i].seq);
    ARRAY(w, "time_ns", SAMPLES, v_u64, dev->samples[i].time_ns);
    ARRAY(w, "allocated", SAMPLES, v_i64, dev->samples[i].allocated);
    ARRAY(w, "reserved", SAMPLES, v_i64, dev->samples[i].reserved);
#undef SAMPLES
    tdm__jw_close(w, '}');
    tdm__jw_close(w, '}');
}

static void allocations(tdm_jw *w, const col *c)
{
    const tdm_model *m = c->m;
    const tdm_snap *s = m->snap;
    tdm__jw_key(w, "allocations");
    tdm__jw_open(w, '{');
#define EACH for (size_t i = 0; i < m->alloc_count; i++) if (c->keep[m->allocs[i].device_index])
    ARRAY(w, "device", EACH, v_i64, m->devices[m->allocs[i].device_index].ordinal);
    ARRAY(w, "addr", EACH, v_u64, m->allocs[i].addr);
    ARRAY(w, "size", EACH, v_u64, m->allocs[i].size);
    ARRAY(w, "alloc_seq", EACH, v_i64, m->allocs[i].alloc_seq);
    ARRAY(w, "free_seq", EACH, v_free_seq, m->allocs[i].free_seq);
    ARRAY(w, "alloc_time_ns", EACH, v_u64, m->allocs[i].alloc_time_ns);
    ARRAY(w, "free_time_ns", EACH, v_free_time, s, m->allocs[i].free_seq);
    ARRAY(w, "stack", EACH, v_u64, m->allocs[i].stack_id);
    ARRAY(w, "category", EACH, v_str, tdm_category_name((tdm_category)c->cats[i]));
    ARRAY(w, "tagged", EACH, v_bool, m->allocs[i].category != TDM_CATEGORY_UNKNOWN);
    ARRAY(w, "flags", EACH, v_u64, m->allocs[i].flags);
#undef EACH
    tdm__jw_close(w, '}');
}

static void frames_and_stacks(tdm_jw *w, const tdm_snap *s)
{
    arr_begin(w, "frames");
    for (size_t i = 0; i < s->frame_count; i++) {
        const tdm_snap_frame *f = &s->frames[i];
        tdm__jw_sep(w);
        tdm__jw_open(w, '{');
        tdm__jw_ku64(w, "pc", f->pc);
        tdm__jw_kstr(w, "function", f->function);
        tdm__jw_kstr(w, "file", f->file);
        tdm__jw_ku64(w, "line", f->line);
        tdm__jw_kstr(w, "module", f->module);
        tdm__jw_close(w, '}');
    }
    arr_end(w);
    arr_begin(w, "stacks");
    for (size_t i = 0; i < s->stack_count; i++) {
        tdm__jw_sep(w);
        tdm__jw_open(w, '[');
        for (uint32_t k = 0; k < s->stacks[i].depth; k++)
            v_u64(w, s->stacks[i].frames[k]);
        tdm__jw_close(w, ']');
    }
    arr_end(w);
}

tdm_status tdm__export_json(FILE *out, const tdm_export_context *ctx)
{
    const tdm_model *m = ctx->model;
    uint8_t *cats = NULL;
    int *keep = calloc(m->device_count + 1, sizeof *keep);
    tdm_jw w;
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;
    if (!keep || tdm__categories_infer(m, &cats) != TDM_OK ||
        tdm__jw_init(&w, out) != TDM_OK)
        goto out;
    for (size_t d = 0; d < m->device_count; d++)
        keep[d] = ctx->device < 0 || m->devices[d].ordinal == ctx->device;
    col c = {m, cats, keep};

    tdm__jw_open(&w, '{');
    tdm__jw_ku64(&w, "tidemark_json", JSON_VERSION);
    header(&w, ctx);
    ARRAY(&w, "categories", for (unsigned k = 0; k < TDM_CATEGORY_COUNT_; k++), v_str,
          tdm_category_name((tdm_category)k));
    ARRAY(&w, "phases", for (size_t i = 0; i < ctx->snap->phase_count; i++), v_str,
          ctx->snap->phase_names[i]);
    arr_begin(&w, "devices");
    for (size_t d = 0; d < m->device_count; d++)
        if (keep[d])
            device(&w, &c, d);
    arr_end(&w);
    allocations(&w, &c);
    frames_and_stacks(&w, ctx->snap);
    tdm__jw_close(&w, '}');
    tdm__jw_raw(&w, "\n", 1);
    st = tdm__jw_finish(&w);
    /* The caller says why (the errno of the failed write). */
out:
    if (st == TDM_HOST_OUT_OF_MEMORY)
        fprintf(stderr, "tidemark export: %s\n", tdm_strerror(st));
    free(keep);
    free(cats);
    return st;
}
