/* viewer-export/view/view_json.c: writes one snapshot's view data (the
 * columns of view_data.c plus the model's figures) as the JSON object the
 * `tidemark view` page embeds; view_data.h describes it.
 *
 * Invariant: the output never contains '<' (strings escape it, base64 and
 * numbers have none), so it can sit inside a <script> element whatever the
 * snapshot's strings hold.  Numbers past 2^53 (epoch times in ns or µs)
 * are written as strings so JavaScript reads them exactly.
 * No state, no locks.
 */
#include "view_data.h"
#include "torch_segments.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------------ */

typedef struct jw {
    FILE *f;
    uint64_t bytes;
    int err;
} jw;

static void jw_raw(jw *w, const char *s, size_t n)
{
    if (n && fwrite(s, 1, n, w->f) != n)
        w->err = 1;
    w->bytes += n;
}

static void jw_lit(jw *w, const char *s) { jw_raw(w, s, strlen(s)); }

__attribute__((format(printf, 2, 3)))
static void jw_fmt(jw *w, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        w->err = 1;
    else
        jw_raw(w, buf, (size_t)n);
}

/* A JSON string.  '<', '>' and '&' are escaped so that no "</script" or
 * "<!--" can appear; bytes >= 0x80 pass through (the page is UTF-8). */
static void jw_str(jw *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    char buf[256];
    size_t n = 0;
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (n + 8 > sizeof buf) {
            jw_raw(w, buf, n);
            n = 0;
        }
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)ch;
        } else if (ch < 0x20 || ch == '<' || ch == '>' || ch == '&' || ch == 0x7f) {
            memcpy(buf + n, "\\u00", 4);
            buf[n + 4] = hex[ch >> 4];
            buf[n + 5] = hex[ch & 15];
            n += 6;
        } else {
            buf[n++] = (char)ch;
        }
    }
    buf[n++] = '"';
    jw_raw(w, buf, n);
}

static void jw_key(jw *w, const char *key, int first)
{
    if (!first)
        jw_lit(w, ",");
    jw_str(w, key);
    jw_lit(w, ":");
}

static void jw_b64(jw *w, const tdm_view_buf *b)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[4096];
    size_t n = 0;
    jw_lit(w, "\"");
    for (size_t i = 0; i < b->len; i += 3) {
        uint32_t v = (uint32_t)b->data[i] << 16;
        if (i + 1 < b->len)
            v |= (uint32_t)b->data[i + 1] << 8;
        if (i + 2 < b->len)
            v |= b->data[i + 2];
        out[n++] = tab[v >> 18];
        out[n++] = tab[(v >> 12) & 63];
        out[n++] = i + 1 < b->len ? tab[(v >> 6) & 63] : '=';
        out[n++] = i + 2 < b->len ? tab[v & 63] : '=';
        if (n + 4 > sizeof out) {
            jw_raw(w, out, n);
            n = 0;
        }
    }
    jw_raw(w, out, n);
    jw_lit(w, "\"");
}

static const char *mode_name(unsigned v, const char *const *names, size_t n)
{
    return v < n ? names[v] : "?";
}

static void write_header(jw *w, const tdm_view_input *in)
{
    static const char *const rec[] = {"off", "state", "all"};
    static const char *const ctx[] = {"none", "state", "alloc", "all"};
    static const char *const stk[] = {"none", "native", "python", "all"};
    const tdm_snap_header *h = &in->snap->header;
    jw_key(w, "header", 0);
    jw_lit(w, "{");
    jw_key(w, "format_version", 1);
    jw_fmt(w, "%" PRIu32, h->format_version);
    jw_key(w, "tool", 0), jw_str(w, h->tool_version);
    jw_key(w, "host", 0), jw_str(w, h->host);
    jw_key(w, "pid", 0), jw_fmt(w, "%" PRId64, h->pid);
    jw_key(w, "rank", 0), jw_fmt(w, "%" PRId32, h->rank);
    jw_key(w, "world_size", 0), jw_fmt(w, "%" PRId32, h->world_size);
    /* µs since the epoch: past 2^53 in ns, so strings. */
    jw_key(w, "start_us", 0), jw_fmt(w, "\"%" PRIu64 "\"", h->start_time_us);
    jw_key(w, "dump_us", 0), jw_fmt(w, "\"%" PRIu64 "\"", h->dump_time_us);
    jw_key(w, "config", 0), jw_str(w, h->config);
    jw_key(w, "metadata", 0), jw_str(w, h->metadata);
    jw_key(w, "command", 0), jw_str(w, h->command);
    jw_key(w, "record", 0), jw_str(w, mode_name(h->record_mode, rec, 3));
    jw_key(w, "context", 0), jw_str(w, mode_name(h->context_mode, ctx, 4));
    jw_key(w, "stacks", 0), jw_str(w, mode_name(h->stacks_mode, stk, 4));
    jw_key(w, "max_entries", 0), jw_fmt(w, "%" PRIu64, h->max_entries);
    jw_key(w, "alloc_mode", 0), jw_str(w, h->alloc_mode);
    /* What the memory is, when it is not what the program allocated. */
    jw_key(w, "memory_note", 0);
    jw_str(w, tdm__torch_segments_seen(in->snap) ? TDM_TORCH_SEGMENTS_NOTE : "");
    jw_lit(w, "}");
}

static void write_stat(jw *w, const char *key, const tdm_stat *s)
{
    jw_key(w, key, 0);
    jw_fmt(w, "[%" PRId64 ",%" PRId64 "]", s->current, s->peak);
}

static void write_devices(jw *w, const tdm_model *m, const tdm_view_columns *c)
{
    jw_key(w, "devices", 0);
    jw_lit(w, "[");
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_model_device *v = &m->devices[d];
        jw_lit(w, d ? ",{" : "{");
        jw_key(w, "ordinal", 1), jw_fmt(w, "%" PRId32, v->ordinal);
        jw_key(w, "vendor", 0), jw_str(w, v->vendor);
        jw_key(w, "name", 0), jw_str(w, v->name);
        jw_key(w, "capacity", 0), jw_fmt(w, "%" PRIu64, v->capacity);
        jw_key(w, "peak", 0), jw_fmt(w, "%" PRId64, v->peak_allocated);
        jw_key(w, "peak_seq", 0), jw_fmt(w, "%" PRId64, v->peak_seq);
        jw_key(w, "peak_step", 0), jw_fmt(w, "%" PRIu32, v->peak_step);
        jw_key(w, "peak_phase", 0), jw_fmt(w, "%" PRIu32, v->peak_phase);
        jw_key(w, "reserved_known", 0), jw_fmt(w, "%d", v->reserved_known);
        jw_key(w, "reserved_at_peak", 0), jw_fmt(w, "%" PRId64, v->reserved_at_peak);
        jw_key(w, "peak_reserved", 0), jw_fmt(w, "%" PRId64, v->peak_reserved);
        jw_key(w, "end_from_state", 0),
            jw_fmt(w, "%d", v->end_source == TDM_MODEL_END_FROM_STATE);
        jw_key(w, "end_allocated", 0), jw_fmt(w, "%" PRId64, v->end_allocated);
        jw_key(w, "end_blocks", 0), jw_fmt(w, "%" PRIu64, v->end_blocks);
        jw_key(w, "end_reserved", 0), jw_fmt(w, "%" PRId64, v->end_reserved);
        jw_key(w, "alloc_events", 0), jw_fmt(w, "%" PRIu64, v->alloc_events);
        jw_key(w, "free_events", 0), jw_fmt(w, "%" PRIu64, v->free_events);
        jw_key(w, "oom_events", 0), jw_fmt(w, "%" PRIu64, v->oom_events);
        jw_key(w, "seeded", 0),
            jw_fmt(w, "%" PRIu64, v->seeded_from_free + v->seeded_from_state);
        jw_key(w, "anomalies", 0), jw_fmt(w, "%" PRIu64, v->anomalies);
        jw_key(w, "stats", 0);
        if (v->stats) {
            jw_lit(w, "{");
            jw_key(w, "allocations", 1);
            jw_fmt(w, "%" PRId64, v->stats->allocation.allocated);
            write_stat(w, "allocated_bytes", &v->stats->allocated_bytes);
            write_stat(w, "reserved_bytes", &v->stats->reserved_bytes);
            write_stat(w, "active_bytes", &v->stats->active_bytes);
            write_stat(w, "requested_bytes", &v->stats->requested_bytes);
            write_stat(w, "allocation", &v->stats->allocation);
            write_stat(w, "segment", &v->stats->segment);
            jw_key(w, "num_ooms", 0), jw_fmt(w, "%" PRIu64, v->stats->num_ooms);
            jw_key(w, "num_alloc_retries", 0),
                jw_fmt(w, "%" PRIu64, v->stats->num_alloc_retries);
            jw_lit(w, "}");
        } else {
            jw_lit(w, "null");
        }
        jw_key(w, "rs", 0), jw_b64(w, &c->rs[d]);
        jw_lit(w, "}");
    }
    jw_lit(w, "]");
}

tdm_status tdm__view_data_write(FILE *out, const tdm_view_input *in, uint64_t *bytes)
{
    const tdm_snap *s = in->snap;
    const tdm_model *m = in->model;
    tdm_view_columns c;
    jw w = {.f = out};
    *bytes = 0;
    if (tdm__view_columns_build(m, in->cats, &c) != TDM_OK)
        return TDM_HOST_OUT_OF_MEMORY;

    const char *base = strrchr(in->path, '/');
    jw_lit(&w, "{");
    jw_key(&w, "data_format", 1), jw_lit(&w, "1");
    jw_key(&w, "file", 0), jw_str(&w, base ? base + 1 : in->path);
    jw_key(&w, "label", 0), jw_str(&w, in->label ? in->label : base ? base + 1 : in->path);
    jw_key(&w, "path", 0), jw_str(&w, in->path);
    jw_key(&w, "complete", 0), jw_fmt(&w, "%d", s->complete);
    jw_key(&w, "truncated_at", 0),
        jw_fmt(&w, "%" PRIu64, in->truncated ? in->truncated_at : 0);
    write_header(&w, in);
    jw_key(&w, "events", 0), jw_fmt(&w, "%zu", s->event_count);
    jw_key(&w, "dropped", 0), jw_fmt(&w, "%" PRIu64, s->dropped_events);
    jw_key(&w, "state_known", 0), jw_fmt(&w, "%d", m->state_known);
    jw_key(&w, "t0_ns", 0), jw_fmt(&w, "\"%" PRIu64 "\"", m->window_start_ns);
    /* The span with events (ns from the first to the last): the page's
     * time axis opens on it, not on the process start before it. */
    jw_key(&w, "span_ns", 0),
        jw_fmt(&w, "%" PRIu64, s->event_count && s->events[s->event_count - 1].time_ns >
                                                 m->window_start_ns
                                   ? s->events[s->event_count - 1].time_ns - m->window_start_ns
                                   : 0);
    /* Offsets are shown from the recording start, as the summary does. */
    uint64_t origin = s->header.start_time_us ? s->header.start_time_us * 1000u
                                              : m->window_start_ns;
    jw_key(&w, "origin_ns", 0),
        jw_fmt(&w, "%" PRId64, s->event_count ? (int64_t)(m->window_start_ns - origin) : 0);
    jw_key(&w, "phase0", 0), jw_fmt(&w, "%" PRIu32, s->event_count ? s->events[0].phase : 0);
    jw_key(&w, "step0", 0), jw_fmt(&w, "%" PRIu32, s->event_count ? s->events[0].step : 0);
    jw_key(&w, "phases", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < s->phase_count; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, s->phase_names[i]);
    }
    jw_lit(&w, "]");
    jw_key(&w, "categories", 0);
    jw_lit(&w, "[");
    for (int i = 0; i < TDM_CATEGORY_COUNT_; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, tdm_category_name((tdm_category)i));
    }
    jw_lit(&w, "]");
    write_devices(&w, m, &c);
    jw_key(&w, "oom", 0);
    jw_lit(&w, "[");
    int first = 1;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (e->action != TDM_ACTION_OOM)
            continue;
        int d = tdm__model_device_index(m, e->device);
        jw_fmt(&w, "%s[%zu,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", i,
               d, e->size, e->requested, e->addr);
        first = 0;
    }
    jw_lit(&w, "]");
    jw_key(&w, "sizes", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < c.size_count; i++)
        jw_fmt(&w, "%s%" PRIu64, i ? "," : "", c.sizes[i]);
    jw_lit(&w, "]");
    jw_key(&w, "strings", 0);
    jw_lit(&w, "[");
    for (size_t i = 0; i < c.string_count; i++) {
        if (i)
            jw_lit(&w, ",");
        jw_str(&w, c.strings[i]);
    }
    jw_lit(&w, "]");
    jw_key(&w, "counts", 0);
    jw_fmt(&w, "{\"marks\":%zu,\"allocs\":%zu,\"segments\":%zu,", c.mark_count,
           c.alloc_count, c.segment_count);
    jw_fmt(&w, "\"stacks\":%zu,\"frames\":%zu,\"segment_anomalies\":%" PRIu64 "}",
           c.stack_count, c.frame_count, c.segment_anomalies);
    static const struct {
        const char *key;
        size_t off;
    } cols[] = {
#define COL(name) {#name, offsetof(tdm_view_columns, name)}
        COL(ev_t),   COL(mk_seq),  COL(mk_kind), COL(mk_val),  COL(a_seq),
        COL(a_life), COL(a_pend), COL(a_size),  COL(a_cat),   COL(a_stack), COL(a_addr),
        COL(a_dev),  COL(s_seq),   COL(s_life),  COL(s_size),  COL(s_addr),
        COL(s_dev),  COL(s_pool),  COL(st),      COL(fr),     COL(fk),
#undef COL
    };
    jw_key(&w, "col", 0);
    jw_lit(&w, "{");
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        jw_key(&w, cols[i].key, i == 0);
        jw_b64(&w, (const tdm_view_buf *)((const char *)&c + cols[i].off));
    }
    jw_lit(&w, "}}");
    tdm__view_columns_free(&c);
    *bytes = w.bytes;
    return w.err ? TDM_IO_ERROR : TDM_OK;
}
