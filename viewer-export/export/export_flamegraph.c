/* viewer-export/export/export_flamegraph.c: `tidemark export --format flamegraph`,
 * the bytes live at one moment as collapsed stacks, one line per distinct
 * stack: "device 0;main;train;forward_layer 8388608".  flamegraph.pl,
 * inferno, speedscope and Perfetto read it.
 *
 * The moment is each device's peak (default), or --at TIME for all
 * devices: an offset from the time origin every command uses (model.h:
 * the recording's start, else the first event; "1.5", "1500ms", "250us",
 * "42ns", "2s"), or "peak" / "end".  Frames go root first; tidemark's own
 * innermost frames (tdm_*, libtidemark) are left out, as the summary does;
 * ';' in a name becomes ':' (it separates frames).  --by-category puts the
 * category as the frame after the device.  Lines are sorted, identical
 * paths merged, so the output is deterministic.  No state, no locks.
 */
#include "categories.h"
#include "export_formats.h"
#include "snap_build.h" /* tdm__grow_array */
#include "stack_display.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct line {
    char *text;     /* the path, without the count */
    uint64_t bytes;
} line;

typedef struct lines {
    line *v;
    size_t n, cap;
} lines;

static int line_cmp(const void *pa, const void *pb)
{
    return strcmp(((const line *)pa)->text, ((const line *)pb)->text);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int is_own_frame(const tdm_snap_frame *f)
{
    if (f->function && strncmp(f->function, "tdm_", 4) == 0)
        return 1;
    return f->module && strncmp(base_name(f->module), "libtidemark", 11) == 0;
}

/* Appends frame name `s` to the growing string, ';' → ':' and no
 * newlines; s == NULL appends the ';' that separates frames. */
static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
    int sep = s == NULL;
    if (sep)
        s = ";";
    size_t n = strlen(s);
    if (*len + n + 2 > *cap) {
        size_t c = (*cap ? *cap : 128);
        while (*len + n + 2 > c)
            c *= 2;
        char *g = realloc(*buf, c);
        if (!g)
            return -1;
        *buf = g;
        *cap = c;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        (*buf)[(*len)++] = sep ? ch : ch == ';' ? ':' : (ch == '\n' || ch == '\r') ? ' ' : ch;
    }
    (*buf)[*len] = '\0';
    return 0;
}

static int frame_label(char *out, size_t len, const tdm_snap_frame *f)
{
    /* A Python frame as py-spy and memray fold them: "forward (train.py:42)". */
    if (f->kind == TDM_FRAME_PYTHON && f->function && f->function[0])
        return snprintf(out, len, "%s (%s:%u)", f->function, base_name(f->file ? f->file : ""),
                        f->line);
    if (f->function && f->function[0] && strcmp(f->function, "??") != 0)
        return snprintf(out, len, "%s", f->function);
    if (f->module && f->module[0])
        return snprintf(out, len, "[%s] 0x%" PRIx64, base_name(f->module), f->pc);
    return snprintf(out, len, "0x%" PRIx64, f->pc);
}

static char *path_of(const tdm_snap *s, const tdm_model_device *d,
                     uint32_t stack_id, const char *category)
{
    char *buf = NULL, label[512];
    size_t len = 0, cap = 0;
    snprintf(label, sizeof label, "device %d", d->ordinal);
    if (append(&buf, &len, &cap, label) != 0)
        return NULL;
    if (category && (append(&buf, &len, &cap, NULL) != 0 ||
                     append(&buf, &len, &cap, category) != 0))
        goto oom;
    const tdm_snap_stack *st = stack_id < s->stack_count ? &s->stacks[stack_id] : NULL;
    uint32_t depth = st ? st->depth : 0, inner = 0;
    /* Leave out tidemark's own innermost frames, but never all of them. */
    while (inner < depth && inner + 1 < depth &&
           is_own_frame(&s->frames[st->frames[inner]]))
        inner++;
    if (depth == 0) {
        if (append(&buf, &len, &cap, NULL) != 0 ||
            append(&buf, &len, &cap, "[no stack]") != 0)
            goto oom;
        return buf;
    }
    for (uint32_t k = depth; k-- > inner;) {
        frame_label(label, sizeof label, &s->frames[st->frames[k]]);
        if (append(&buf, &len, &cap, NULL) != 0 || append(&buf, &len, &cap, label) != 0)
            goto oom;
    }
    return buf;
oom:
    free(buf);
    return NULL;
}

/* Parses --at: "peak", "end", or an offset with an optional unit. */
static int parse_at(const char *text, const tdm_model *m, int *at_peak,
                    int64_t *seq)
{
    *at_peak = 0;
    if (strcmp(text, "peak") == 0) {
        *at_peak = 1;
        return 0;
    }
    if (strcmp(text, "end") == 0) {
        *seq = tdm__model_end_seq(m);
        return 0;
    }
    char *end;
    const char *t = text[0] == '+' ? text + 1 : text;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || errno || v < 0)
        return -1;
    double scale = 1e9;
    if (strcmp(end, "s") == 0 || *end == '\0')
        scale = 1e9;
    else if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "us") == 0)
        scale = 1e3;
    else if (strcmp(end, "ns") == 0)
        scale = 1;
    else
        return -1;
    double ns = v * scale;
    if (ns > 1.8e19)
        return -1;
    *seq = tdm__model_seq_at_time(m, tdm__model_time_origin_ns(m) + (uint64_t)ns);
    return 0;
}

static int add_line(lines *ls, char *text, uint64_t bytes)
{
    if (tdm__grow_array(&ls->v, &ls->cap, ls->n + 1, sizeof *ls->v) != 0)
        return -1;
    ls->v[ls->n++] = (line){text, bytes};
    return 0;
}

tdm_status tdm__export_flamegraph(FILE *out, const tdm_export_context *ctx)
{
    const tdm_model *m = ctx->model;
    const tdm_snap *s = ctx->snap;
    const char *at = tdm__export_option(ctx, "at");
    int by_cat = tdm__export_option(ctx, "by-category") != NULL;
    int at_peak = 1;
    int64_t at_seq = 0;
    uint8_t *cats = NULL;
    lines ls = {0};
    tdm_status st = TDM_HOST_OUT_OF_MEMORY;

    if (at && parse_at(at, m, &at_peak, &at_seq) != 0) {
        fprintf(stderr, "tidemark export: --at wants peak, end, or an offset from the "
                        "recording's start such as 1.5, 1500ms, 250us; got '%s'\n", at);
        return TDM_INVALID_ARGUMENT;
    }
    if (by_cat && tdm__categories_infer(m, &cats) != TDM_OK)
        goto out;
    for (size_t d = 0; d < m->device_count; d++) {
        const tdm_model_device *dev = &m->devices[d];
        if (ctx->device >= 0 && dev->ordinal != ctx->device)
            continue;
        int64_t seq = at_peak ? dev->peak_seq : at_seq;
        for (size_t i = 0; i < m->alloc_count; i++) {
            const tdm_model_alloc *a = &m->allocs[i];
            if (a->device_index != d || !tdm__model_alloc_live_at(a, seq) || !a->size ||
                !tdm__stack_display_focused(s, a->stack_id))
                continue;
            char *p = path_of(s, dev, a->stack_id,
                              by_cat ? tdm_category_name((tdm_category)cats[i]) : NULL);
            if (!p || add_line(&ls, p, a->size) != 0) {
                free(p);
                goto out;
            }
        }
    }
    if (ls.n) /* qsort's array may not be NULL, even empty */
        qsort(ls.v, ls.n, sizeof *ls.v, line_cmp);
    for (size_t i = 0; i < ls.n;) {
        uint64_t sum = 0;
        size_t j = i;
        for (; j < ls.n && strcmp(ls.v[j].text, ls.v[i].text) == 0; j++)
            sum += ls.v[j].bytes;
        fprintf(out, "%s %" PRIu64 "\n", ls.v[i].text, sum);
        i = j;
    }
    st = fflush(out) == 0 && !ferror(out) ? TDM_OK : TDM_IO_ERROR;
    /* The caller says why (the errno of the failed write). */
out:
    if (st == TDM_HOST_OUT_OF_MEMORY)
        fprintf(stderr, "tidemark export: %s\n", tdm_strerror(st));
    for (size_t i = 0; i < ls.n; i++)
        free(ls.v[i].text);
    free(ls.v);
    free(cats);
    return st;
}
