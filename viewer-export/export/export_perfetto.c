/* viewer-export/export/export_perfetto.c: `tidemark export --format perfetto`, a
 * Chrome JSON trace (the Trace Event Format) that ui.perfetto.dev,
 * chrome://tracing and HTA open, or, with --merge, the same events spliced
 * into a PyTorch profiler trace of the same run.  docs/export.md
 * "perfetto" lists every event shape; in short, per device:
 *   counters  "device N allocated" / "device N reserved" {"bytes": B},
 *             "device N <category>" {"bytes": B} per category;
 *   instants  "[memory]" per alloc and free, with Kineto's args (Total
 *             Reserved, Total Allocated, Bytes, Addr, Device Id, Device
 *             Type) plus "Category"; "OOM" and "snapshot";
 *   slices    phases and steps ("X" events on their own threads).
 *
 * Times: ts is µs (3 decimals) after a base.  Standalone, the base is the
 * origin every command counts from (model.h: the recording's start, else
 * the first event), so a peak has the time here that summary, categories
 * and gate give it; the top-level "baseTimeNanoseconds" says it, as
 * Kineto does, and otherData's "time_origin" names it; merged, the profiler trace's own baseTimeNanoseconds is
 * used, or 0 (absolute µs since the epoch, older Kineto) when it has
 * none.  Both clocks are CLOCK_REALTIME, so the events line up.
 *
 * Merging copies the profiler file byte for byte except for our events,
 * inserted at the end of its traceEvents array: nothing of the profiler's
 * own is rewritten.
 *
 * Several snapshots (a multi-rank job; tdm__export_perfetto_ranks_*) go
 * into one trace, one process each: pid = rank + 1 (Perfetto treats pid 0
 * as the kernel's swapper, so rank 0 cannot be pid 0), named "rank R
 * (host)" and sorted by rank; a file without a rank, or a second file of
 * a rank already added, gets a pid from TDM_PF_SPARE_PID up.  Each process
 * has its own device counters and its own three track threads: thread ids
 * are unique across the trace (Perfetto keys threads by tid alone and
 * would start a new thread each time one tid changed process).  ts is
 * absolute µs since the epoch (baseTimeNanoseconds 0), so ranks line up by
 * the CLOCK_REALTIME times their snapshots carry.  Snapshots are added one
 * at a time, each freed by the caller before the next is read, so a job
 * of many large rings needs the memory of one.  No state, no locks.
 */
#include "categories.h"
#include "export_formats.h"
#include "json.h"
#include "snap_build.h" /* tdm__grow_array */
#include "vendor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Thread ids of our own tracks: far above real tids, below INT32_MAX.
 * Process k of a merged trace uses these + 3 k. */
#define TID_PHASES 2000000001
#define TID_STEPS 2000000002
#define TID_MARKS 2000000003
#define TID_STRIDE 3
/* Most processes one merged trace holds (their tids stay below INT32_MAX). */
#define MAX_PROCESSES ((INT32_MAX - TID_MARKS) / TID_STRIDE)
/* pids of merged processes without a rank of their own: far above ranks. */
#define TDM_PF_SPARE_PID 10000001

#define NCAT TDM_CATEGORY_COUNT_

/* Track k of a device: allocated, reserved, then one per category. */
enum { TRACK_ALLOCATED = 0, TRACK_RESERVED = 1, TRACK_CATEGORY = 2,
       TRACK_COUNT = 2 + TDM_CATEGORY_COUNT_ };

typedef struct prefixes {
    char counter[TRACK_COUNT][96]; /* {"ph":"C","name":"device N x",...,"ts": */
    char memory_tail[64];          /* ,"Device Id":N,"Device Type":T,"Category":" */
} prefixes;

typedef struct pf {
    tdm_jw *w;
    const tdm_export_context *ctx;
    const tdm_snap *s;
    const tdm_model *m;
    uint8_t *cats;
    int32_t *ev_alloc;  /* per event: the model alloc it opens or closes, -1 */
    int64_t base_ns;    /* ts origin */
    int64_t pid;
    int64_t tid_phases, tid_steps, tid_marks; /* this process's track threads */
    size_t *cursor;     /* per device: current sample */
    int64_t (*cat_bytes)[NCAT]; /* per device: live bytes per category */
    /* Per device, the fixed text of each event kind up to its "ts" value,
     * made once: the hot loop then writes them as raw bytes (escaping the
     * same names a million times would dominate the export). */
    prefixes *pre;
    char memory_head[96]; /* {"ph":"i","name":"[memory]","pid":P,"tid":P,"ts": */
} pf;

static int device_type_of(const char *vendor)
{
    /* The c10::DeviceType of the vendor the file names (vendors.def); a
     * vendor tidemark does not know stands in for a GPU, as CUDA's. */
    const tdm_vendor_info *v = tdm__vendor_info(tdm__vendor_of_name(vendor));
    return v ? (int)v->torch_device : TDM_TORCH_DEVICE_CUDA;
}

static int wanted(const pf *p, size_t dev)
{
    return p->ctx->device < 0 || p->m->devices[dev].ordinal == p->ctx->device;
}

/* {"ph":"X"... opener shared by every event. */
static void ev_head(pf *p, const char *ph, const char *name, int64_t tid,
                    int64_t t_ns)
{
    tdm_jw *w = p->w;
    tdm__jw_sep(w);
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "ph", ph);
    tdm__jw_kstr(w, "name", name);
    tdm__jw_ki64(w, "pid", p->pid);
    tdm__jw_ki64(w, "tid", tid);
    tdm__jw_key(w, "ts");
    tdm__jw_us(w, t_ns - p->base_ns);
}

static void make_prefixes(pf *p, size_t d)
{
    const tdm_model_device *dev = &p->m->devices[d];
    prefixes *x = &p->pre[d];
    for (int k = 0; k < TRACK_COUNT; k++) {
        const char *what = k == TRACK_ALLOCATED ? "allocated"
                           : k == TRACK_RESERVED ? "reserved"
                           : tdm_category_name((tdm_category)(k - TRACK_CATEGORY));
        /* Names are ours ("device 3 optimizer_state"): nothing to escape. */
        snprintf(x->counter[k], sizeof x->counter[k],
                 "{\"ph\":\"C\",\"name\":\"device %d %s\",\"pid\":%lld,\"tid\":%lld,\"ts\":",
                 dev->ordinal, what, (long long)p->pid, (long long)p->pid);
    }
    snprintf(x->memory_tail, sizeof x->memory_tail,
             ",\"Device Id\":%d,\"Device Type\":%d,\"Category\":\"", dev->ordinal,
             device_type_of(dev->vendor));
}

/* One counter value: track k of device d. */
static void counter(pf *p, size_t d, int k, int64_t t_ns, int64_t bytes)
{
    tdm_jw *w = p->w;
    tdm__jw_sep(w);
    tdm__jw_lit(w, p->pre[d].counter[k]);
    tdm__jw_us(w, t_ns - p->base_ns);
    tdm__jw_lit(w, ",\"args\":{\"bytes\":");
    tdm__jw_i64(w, bytes);
    tdm__jw_lit(w, "}}");
}

static void cat_counter(pf *p, size_t dev, uint8_t c, int64_t t_ns)
{
    counter(p, dev, TRACK_CATEGORY + c, t_ns, p->cat_bytes[dev][c]);
}

static void thread_name(pf *p, int64_t tid, const char *name)
{
    tdm_jw *w = p->w;
    tdm__jw_sep(w);
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "ph", "M");
    tdm__jw_kstr(w, "name", tid == p->pid ? "process_name" : "thread_name");
    tdm__jw_ki64(w, "pid", p->pid);
    tdm__jw_ki64(w, "tid", tid);
    tdm__jw_key(w, "args");
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "name", name);
    tdm__jw_close(w, '}');
    tdm__jw_close(w, '}');
}

static void slice(pf *p, int64_t tid, const char *name, int64_t t0, int64_t t1)
{
    ev_head(p, "X", name, tid, t0);
    tdm__jw_key(p->w, "dur");
    tdm__jw_us(p->w, t1 > t0 ? t1 - t0 : 0);
    tdm__jw_close(p->w, '}');
}

/* The values at the window start: one counter of each kind per device. */
static void initial_counters(pf *p)
{
    const tdm_model *m = p->m;
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (a->alloc_seq < 0)
            p->cat_bytes[a->device_index][p->cats[i]] += (int64_t)a->size;
    }
    int64_t t0 = (int64_t)m->window_start_ns;
    for (size_t d = 0; d < m->device_count; d++) {
        if (!wanted(p, d))
            continue;
        const tdm_model_device *dev = &m->devices[d];
        counter(p, d, TRACK_ALLOCATED, t0, dev->samples[0].allocated);
        counter(p, d, TRACK_RESERVED, t0, dev->samples[0].reserved);
        for (uint8_t c = 0; c < NCAT; c++)
            if (p->cat_bytes[d][c])
                cat_counter(p, d, c, t0);
    }
}

static void memory_event(pf *p, size_t d, const tdm_event *ev,
                         const tdm_model_sample *smp, int64_t bytes,
                         uint8_t cat)
{
    tdm_jw *w = p->w;
    tdm__jw_sep(w);
    tdm__jw_lit(w, p->memory_head);
    tdm__jw_us(w, (int64_t)ev->time_ns - p->base_ns);
    tdm__jw_lit(w, ",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"args\":{\"Total Reserved\":");
    tdm__jw_i64(w, smp->reserved);
    tdm__jw_lit(w, ",\"Total Allocated\":");
    tdm__jw_i64(w, smp->allocated);
    tdm__jw_lit(w, ",\"Bytes\":");
    tdm__jw_i64(w, bytes);
    tdm__jw_lit(w, ",\"Addr\":");
    tdm__jw_u64(w, ev->addr);
    tdm__jw_lit(w, p->pre[d].memory_tail);
    tdm__jw_lit(w, tdm_category_name((tdm_category)cat));
    tdm__jw_lit(w, "\"}}");
}

static void mark_event(pf *p, const char *name, const tdm_event *ev, size_t d)
{
    tdm_jw *w = p->w;
    ev_head(p, "i", name, p->tid_marks, (int64_t)ev->time_ns);
    tdm__jw_kstr(w, "s", "p");
    tdm__jw_key(w, "args");
    tdm__jw_open(w, '{');
    if (ev->action == TDM_ACTION_OOM) {
        tdm__jw_ki64(w, "device", p->m->devices[d].ordinal);
        tdm__jw_ku64(w, "requested", ev->requested);
        tdm__jw_ku64(w, "rounded", ev->size);
        tdm__jw_ku64(w, "device free", ev->addr);
    }
    tdm__jw_close(w, '}');
    tdm__jw_close(w, '}');
}

static const char *phase_label(const pf *p, uint32_t id, char *buf, size_t len)
{
    const char *n = tdm__model_phase_name(p->m, id, buf, len);
    return n[0] ? n : "(none)";
}

/* The events, in ring order. */
static void walk(pf *p)
{
    const tdm_snap *s = p->s;
    const tdm_model *m = p->m;
    char pbuf[32], sbuf[32];
    int64_t phase_t0 = 0, step_t0 = 0;
    uint32_t phase = 0, step = 0;
    int in_phase = 0, in_step = 0;

    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *ev = &s->events[i];
        int64_t t = (int64_t)ev->time_ns;
        if (ev->action == TDM_ACTION_PHASE) {
            if (in_phase)
                slice(p, p->tid_phases, phase_label(p, phase, pbuf, sizeof pbuf),
                      phase_t0, t);
            phase = ev->phase;
            phase_t0 = t;
            in_phase = phase != 0; /* phase 0: a phase ended (tdm_phase_end) */
            continue;
        }
        if (ev->action == TDM_ACTION_STEP) {
            if (in_step) {
                snprintf(sbuf, sizeof sbuf, "step %u", step);
                slice(p, p->tid_steps, sbuf, step_t0, t);
            }
            step = ev->step;
            step_t0 = t;
            in_step = 1;
            continue;
        }
        if (ev->action == TDM_ACTION_SNAPSHOT) {
            mark_event(p, "snapshot", ev, 0);
            continue;
        }
        if (ev->action == TDM_ACTION_TAG || ev->action == TDM_ACTION_FREE_REQUESTED)
            continue;
        int di = tdm__model_device_index(m, ev->device);
        if (di < 0 || !wanted(p, (size_t)di))
            continue;
        size_t d = (size_t)di;
        if (ev->action == TDM_ACTION_OOM) {
            mark_event(p, "OOM", ev, d);
            continue;
        }
        const tdm_model_device *dev = &m->devices[d];
        size_t *cur = &p->cursor[d];
        while (*cur + 1 < dev->sample_count && dev->samples[*cur + 1].seq <= (int64_t)i)
            (*cur)++;
        const tdm_model_sample *smp = &dev->samples[*cur];
        if (ev->action == TDM_ACTION_ALLOC || ev->action == TDM_ACTION_FREE_COMPLETED) {
            int32_t k = p->ev_alloc[i];
            uint8_t cat = k >= 0 ? p->cats[k] : TDM_CATEGORY_UNKNOWN;
            int64_t sz = k >= 0 ? (int64_t)m->allocs[k].size : (int64_t)ev->size;
            int64_t bytes = ev->action == TDM_ACTION_ALLOC ? sz : -sz;
            memory_event(p, d, ev, smp, bytes, cat);
            counter(p, d, TRACK_ALLOCATED, t, smp->allocated);
            if (k >= 0) {
                p->cat_bytes[d][cat] += bytes;
                cat_counter(p, d, cat, t);
            }
        } else {
            /* segment_alloc/free/map/unmap */
            counter(p, d, TRACK_RESERVED, t, smp->reserved);
        }
    }
    int64_t end = (int64_t)m->window_end_ns;
    if (in_phase)
        slice(p, p->tid_phases, phase_label(p, phase, pbuf, sizeof pbuf), phase_t0, end);
    if (in_step) {
        snprintf(sbuf, sizeof sbuf, "step %u", step);
        slice(p, p->tid_steps, sbuf, step_t0, end);
    }
}

static void metadata_events(pf *p, int standalone)
{
    char name[512];
    if (standalone) {
        const char *cmd = p->s->header.command;
        snprintf(name, sizeof name, "tidemark: %s",
                 cmd && cmd[0] ? cmd : p->ctx->input_path);
        thread_name(p, p->pid, name);
    }
    thread_name(p, p->tid_phases, "tidemark phases");
    thread_name(p, p->tid_steps, "tidemark steps");
    thread_name(p, p->tid_marks, "tidemark OOM and snapshots");
}

/* ---- merging into a profiler trace ---------------------------------------- */

typedef struct profiler_trace {
    char *data;
    size_t len;
    size_t events_close;   /* offset of traceEvents' closing ']' */
    int events_nonempty;
    int has_base;
    int64_t base_ns;
    double ts_min, ts_max; /* µs, over events with a ts */
    int has_ts;
} profiler_trace;

static tdm_status read_all(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tidemark export: --merge %s: %s\n", path, strerror(errno));
        return TDM_FORMAT_ERROR; /* an input that cannot be read: exit 2 */
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int read_errno = 0;
    while (buf) {
        if (n == cap) {
            char *g = realloc(buf, cap * 2);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
        errno = 0;
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            read_errno = errno;
            break;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return TDM_HOST_OUT_OF_MEMORY;
    if (bad) {
        fprintf(stderr, "tidemark export: --merge %s: %s\n", path,
                read_errno ? strerror(read_errno) : "read error");
        free(buf);
        return TDM_FORMAT_ERROR;
    }
    *data = buf;
    *len = n;
    return TDM_OK;
}

/* Scans one trace event for its span: "ts", to "ts" + "dur" for a
 * complete ("X") event, so that a long slice counts to its end. */
static int scan_event(tdm_jr *r, profiler_trace *t)
{
    if (tdm__jr_peek(r) != '{')
        return tdm__jr_skip(r);
    const char *k;
    size_t kl;
    int more, has_ts = 0;
    double ts = 0, dur = 0;
    tdm__jr_object_begin(r);
    while ((more = tdm__jr_object_next(r, &k, &kl)) == 1) {
        int is_ts = tdm__jr_key_is(k, kl, "ts"), is_dur = tdm__jr_key_is(k, kl, "dur");
        if ((is_ts || is_dur) && tdm__jr_peek(r) != '"') {
            double d;
            if (tdm__jr_number(r, &d, NULL, NULL) != 0)
                return -1;
            if (is_ts) {
                ts = d;
                has_ts = 1;
            } else if (d > 0) {
                dur = d;
            }
        } else if (tdm__jr_skip(r) != 0) {
            return -1;
        }
    }
    if (more == 0 && has_ts) {
        if (!t->has_ts || ts < t->ts_min)
            t->ts_min = ts;
        if (!t->has_ts || ts + dur > t->ts_max)
            t->ts_max = ts + dur;
        t->has_ts = 1;
    }
    return more;
}

static tdm_status parse_profiler(const char *path, profiler_trace *t)
{
    tdm_status st = read_all(path, &t->data, &t->len);
    if (st != TDM_OK)
        return st;
    if (t->len >= 2 && (unsigned char)t->data[0] == 0x1f &&
        (unsigned char)t->data[1] == 0x8b) {
        fprintf(stderr, "tidemark export: --merge %s: gzip-compressed; "
                        "gunzip it first\n", path);
        return TDM_FORMAT_ERROR;
    }
    tdm_jr r;
    tdm__jr_init(&r, t->data, t->len);
    const char *k;
    size_t kl;
    int more, found = 0;
    if (tdm__jr_object_begin(&r) != 0)
        goto bad;
    while ((more = tdm__jr_object_next(&r, &k, &kl)) == 1) {
        if (tdm__jr_key_is(k, kl, "traceEvents")) {
            if (tdm__jr_array_begin(&r) != 0)
                goto bad;
            int el;
            while ((el = tdm__jr_array_next(&r)) == 1) {
                t->events_nonempty = 1;
                if (scan_event(&r, t) < 0)
                    goto bad;
            }
            if (el < 0)
                goto bad;
            t->events_close = (size_t)(r.p - 1 - t->data);
            found = 1;
        } else if (tdm__jr_key_is(k, kl, "baseTimeNanoseconds")) {
            int64_t v;
            int is_int = 0;
            if (tdm__jr_number(&r, NULL, &v, &is_int) != 0)
                goto bad;
            if (is_int) {
                t->has_base = 1;
                t->base_ns = v;
            }
        } else if (tdm__jr_skip(&r) != 0) {
            goto bad;
        }
    }
    if (more < 0)
        goto bad;
    if (tdm__jr_peek(&r) != 0) {
        r.error = "data after the top-level object";
        r.error_at = (size_t)(r.p - t->data);
        goto bad;
    }
    if (!found) {
        fprintf(stderr, "tidemark export: --merge %s: no \"traceEvents\" array "
                        "(not a Chrome/Kineto trace)\n", path);
        return TDM_FORMAT_ERROR;
    }
    return TDM_OK;
bad:
    fprintf(stderr, "tidemark export: --merge %s: not valid JSON at byte %zu: %s\n",
            path, r.error_at, r.error ? r.error : "unexpected input");
    return TDM_FORMAT_ERROR;
}

/* ---- one process ------------------------------------------------------------ */

/* Makes p's per-snapshot tables (p->pid and p->ctx set).  TDM_OK or
 * TDM_HOST_OUT_OF_MEMORY; pf_release frees what was made either way. */
static tdm_status pf_prepare(pf *p)
{
    const tdm_snap *s = p->s;
    const tdm_model *m = p->m;
    p->ev_alloc = malloc((s->event_count ? s->event_count : 1) * sizeof *p->ev_alloc);
    p->cursor = calloc(m->device_count + 1, sizeof *p->cursor);
    p->cat_bytes = calloc(m->device_count + 1, sizeof *p->cat_bytes);
    p->pre = calloc(m->device_count + 1, sizeof *p->pre);
    if (!p->ev_alloc || !p->cursor || !p->cat_bytes || !p->pre ||
        tdm__categories_infer(m, &p->cats) != TDM_OK)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < s->event_count; i++)
        p->ev_alloc[i] = -1;
    for (size_t i = 0; i < m->alloc_count && i < INT32_MAX; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (a->alloc_seq >= 0)
            p->ev_alloc[a->alloc_seq] = (int32_t)i;
        if (a->free_seq != TDM_MODEL_SEQ_NEVER && !(a->flags & TDM_MODEL_REPLACED))
            p->ev_alloc[a->free_seq] = (int32_t)i;
    }
    for (size_t d = 0; d < m->device_count; d++)
        make_prefixes(p, d);
    snprintf(p->memory_head, sizeof p->memory_head,
             "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":%lld,\"tid\":%lld,\"ts\":",
             (long long)p->pid, (long long)p->pid);
    return TDM_OK;
}

static void pf_release(pf *p)
{
    free(p->ev_alloc);
    free(p->cursor);
    free(p->cat_bytes);
    free(p->pre);
    free(p->cats);
    p->ev_alloc = NULL;
    p->cursor = NULL;
    p->cat_bytes = NULL;
    p->pre = NULL;
    p->cats = NULL;
}

/* Every event of one process: its names, the counters at the window
 * start, then the history. */
static void pf_emit(pf *p, int standalone)
{
    metadata_events(p, standalone);
    initial_counters(p);
    walk(p);
}

static void set_tids(pf *p, size_t k)
{
    p->tid_phases = TID_PHASES + (int64_t)(k * TID_STRIDE);
    p->tid_steps = TID_STEPS + (int64_t)(k * TID_STRIDE);
    p->tid_marks = TID_MARKS + (int64_t)(k * TID_STRIDE);
}

/* ---- entry point ------------------------------------------------------------ */

tdm_status tdm__export_perfetto(FILE *out, const tdm_export_context *ctx)
{
    const tdm_model *m = ctx->model;
    const tdm_snap *s = ctx->snap;
    const char *merge = tdm__export_option(ctx, "merge");
    profiler_trace prof = {0};
    tdm_jw w;
    pf p = {.w = &w, .ctx = ctx, .s = s, .m = m};
    tdm_status st;

    if (merge && (st = parse_profiler(merge, &prof)) != TDM_OK) {
        free(prof.data);
        return st;
    }
    p.pid = s->header.pid > 0 ? s->header.pid : 1;
    set_tids(&p, 0);
    if ((st = pf_prepare(&p)) != TDM_OK)
        goto out;

    if (merge) {
        p.base_ns = prof.has_base ? prof.base_ns : 0;
        if (prof.has_ts && s->event_count && !ctx->quiet) {
            double a0 = (double)((int64_t)m->window_start_ns - p.base_ns) / 1000.0;
            double a1 = (double)((int64_t)m->window_end_ns - p.base_ns) / 1000.0;
            if (a1 < prof.ts_min || a0 > prof.ts_max)
                fprintf(stderr, "tidemark export: warning: %s and %s do not overlap in "
                                "time; are they from the same run?\n",
                        ctx->input_path, merge);
        }
    } else {
        p.base_ns = (int64_t)tdm__model_time_origin_ns(m);
    }

    if ((st = tdm__jw_init(&w, out)) != TDM_OK)
        goto out;
    if (merge) {
        tdm__jw_raw(&w, prof.data, prof.events_close);
        /* We write inside their array: depth 1, "has an element" if theirs did. */
        w.depth = 1;
        w.has_item[0] = (uint8_t)prof.events_nonempty;
    } else {
        tdm__jw_open(&w, '{');
        tdm__jw_key(&w, "traceEvents");
        tdm__jw_open(&w, '[');
    }
    pf_emit(&p, !merge);
    if (merge) {
        tdm__jw_raw(&w, prof.data + prof.events_close, prof.len - prof.events_close);
    } else {
        tdm__jw_close(&w, ']');
        tdm__jw_kstr(&w, "displayTimeUnit", "ms");
        tdm__jw_ki64(&w, "baseTimeNanoseconds", p.base_ns);
        tdm__jw_key(&w, "otherData");
        tdm__jw_open(&w, '{');
        tdm__jw_kstr(&w, "producer", "tidemark " TDM_VERSION_STRING);
        tdm__jw_kstr(&w, "snapshot", ctx->input_path);
        tdm__jw_kstr(&w, "host", s->header.host);
        tdm__jw_ki64(&w, "rank", s->header.rank);
        tdm__jw_ku64(&w, "dropped_events", s->dropped_events);
        tdm__jw_kstr(&w, "time_origin", tdm__model_time_origin_name(m));
        tdm__jw_close(&w, '}');
        tdm__jw_close(&w, '}');
        tdm__jw_raw(&w, "\n", 1);
    }
    st = tdm__jw_finish(&w); /* on failure the caller says why (the write's errno) */
out:
    if (st == TDM_HOST_OUT_OF_MEMORY)
        fprintf(stderr, "tidemark export: %s\n", tdm_strerror(st));
    pf_release(&p);
    free(prof.data);
    return st;
}

/* ---- several snapshots in one trace ---------------------------------------------- */

/* What the trailer says of each process added (the snapshot is gone by then). */
typedef struct pf_process {
    char *file;           /* malloc'd input path */
    char *host;           /* malloc'd */
    int32_t rank;         /* -1 without one */
    int64_t pid;          /* in the trace */
    int64_t recorded_pid; /* in the snapshot's header */
    uint64_t dropped_events;
} pf_process;

struct tdm_perfetto_ranks {
    tdm_jw w;
    pf_process *procs;
    size_t count, cap;
    int64_t next_spare;   /* the next pid for a process without a rank of its own */
    tdm_status status;    /* the first failure, sticky */
};

tdm_status tdm__export_perfetto_ranks_begin(FILE *out, tdm_perfetto_ranks **writer)
{
    *writer = NULL;
    tdm_perfetto_ranks *r = calloc(1, sizeof *r);
    if (!r)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_status st = tdm__jw_init(&r->w, out);
    if (st != TDM_OK) {
        free(r);
        return st;
    }
    r->next_spare = TDM_PF_SPARE_PID;
    tdm__jw_open(&r->w, '{');
    tdm__jw_key(&r->w, "traceEvents");
    tdm__jw_open(&r->w, '[');
    *writer = r;
    return TDM_OK;
}

static int pid_taken(const tdm_perfetto_ranks *r, int64_t pid)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->procs[i].pid == pid)
            return 1;
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

tdm_status tdm__export_perfetto_ranks_add(tdm_perfetto_ranks *r, const tdm_export_context *ctx)
{
    if (r->status != TDM_OK)
        return r->status;
    if (tdm__export_option(ctx, "merge")) {
        fprintf(stderr, "tidemark export: --merge takes one snapshot, not several\n");
        return r->status = TDM_INVALID_ARGUMENT;
    }
    if (r->count >= MAX_PROCESSES) {
        fprintf(stderr, "tidemark export: more than %d snapshots in one trace\n",
                (int)MAX_PROCESSES);
        return r->status = TDM_INVALID_ARGUMENT;
    }
    if (tdm__grow_array(&r->procs, &r->cap, r->count + 1, sizeof *r->procs) != 0)
        return r->status = TDM_HOST_OUT_OF_MEMORY;
    const tdm_snap *s = ctx->snap;
    const char *host = s->header.host && s->header.host[0] ? s->header.host : "?";
    pf p = {.w = &r->w, .ctx = ctx, .s = s, .m = ctx->model, .base_ns = 0};
    int32_t rank = s->header.rank;
    p.pid = rank >= 0 ? (int64_t)rank + 1 : 0;
    while (p.pid <= 0 || pid_taken(r, p.pid))
        p.pid = r->next_spare++;
    set_tids(&p, r->count);

    pf_process *pr = &r->procs[r->count];
    memset(pr, 0, sizeof *pr);
    pr->file = strdup(ctx->input_path ? ctx->input_path : "");
    pr->host = strdup(host);
    tdm_status st = pr->file && pr->host ? pf_prepare(&p) : TDM_HOST_OUT_OF_MEMORY;
    if (st != TDM_OK) {
        free(pr->file);
        free(pr->host);
        pf_release(&p);
        fprintf(stderr, "tidemark export: %s\n", tdm_strerror(st));
        return r->status = st;
    }
    pr->rank = rank;
    pr->pid = p.pid;
    pr->recorded_pid = s->header.pid;
    pr->dropped_events = s->dropped_events;
    r->count++;

    char name[512];
    if (rank >= 0)
        snprintf(name, sizeof name, "rank %d (%s)", (int)rank, host);
    else
        snprintf(name, sizeof name, "%s (pid %lld, %s)", base_name(pr->file),
                 (long long)s->header.pid, host);
    thread_name(&p, p.pid, name); /* tid == pid: the process's name */
    tdm_jw *w = &r->w;
    tdm__jw_sep(w);
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "ph", "M");
    tdm__jw_kstr(w, "name", "process_sort_index");
    tdm__jw_ki64(w, "pid", p.pid);
    tdm__jw_ki64(w, "tid", p.pid);
    tdm__jw_key(w, "args");
    tdm__jw_open(w, '{');
    tdm__jw_ki64(w, "sort_index", rank >= 0 ? (int64_t)rank : p.pid);
    tdm__jw_close(w, '}');
    tdm__jw_close(w, '}');
    pf_emit(&p, 0);
    pf_release(&p);
    return TDM_OK;
}

tdm_status tdm__export_perfetto_ranks_end(tdm_perfetto_ranks *r)
{
    if (!r)
        return TDM_OK;
    tdm_jw *w = &r->w;
    tdm__jw_close(w, ']');
    tdm__jw_kstr(w, "displayTimeUnit", "ms");
    tdm__jw_ki64(w, "baseTimeNanoseconds", 0);
    tdm__jw_key(w, "otherData");
    tdm__jw_open(w, '{');
    tdm__jw_kstr(w, "producer", "tidemark " TDM_VERSION_STRING);
    tdm__jw_key(w, "snapshots");
    tdm__jw_open(w, '[');
    for (size_t i = 0; i < r->count; i++) {
        const pf_process *pr = &r->procs[i];
        tdm__jw_sep(w);
        tdm__jw_open(w, '{');
        tdm__jw_kstr(w, "snapshot", pr->file);
        tdm__jw_kstr(w, "host", pr->host);
        tdm__jw_ki64(w, "rank", pr->rank);
        tdm__jw_ki64(w, "pid", pr->pid);
        tdm__jw_ki64(w, "recorded_pid", pr->recorded_pid);
        tdm__jw_ku64(w, "dropped_events", pr->dropped_events);
        tdm__jw_close(w, '}');
        free(pr->file);
        free(pr->host);
    }
    tdm__jw_close(w, ']');
    tdm__jw_close(w, '}');
    tdm__jw_close(w, '}');
    tdm__jw_raw(w, "\n", 1);
    tdm_status st = tdm__jw_finish(w); /* on failure the caller says why */
    if (r->status != TDM_OK)
        st = r->status;
    free(r->procs);
    free(r);
    return st;
}
