/* viewer-export/cli/top_read.c: one reading of one recording process for
 * `tidemark top` (top.h).
 *
 * The spill file is copied read-only (format_spill.h,
 * tdm__spill_read_live: torn slots left out), made into a snapshot the
 * way `tidemark recover` makes one (recover_build.c: the state the kept
 * events' replay gives), prepared for display like every snapshot read
 * (stack_display.h) and modelled; the frame's figures are the model's at
 * its last event: allocated and reserved now, their peaks over the
 * history the ring holds, bytes by category, the sites holding the most,
 * and allocated bytes at each of the last TDM_TOP_HISTORY seconds.
 * State: the cache of symbolizers, one per spill file, owned by the
 * caller.
 */
#include "categories.h"
#include "format_size.h"
#include "model.h"
#include "recover.h"
#include "sites.h"
#include "stack_display.h"
#include "top.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* tdm__escape_text */

typedef struct cache_entry {
    char *path;
    int64_t pid;
    size_t module_count;
    tdm_recover_symbols *sym;
} cache_entry;

struct tdm_top_cache {
    cache_entry *v;
    size_t n;
};

tdm_top_cache *tdm__top_cache_new(void) { return calloc(1, sizeof(tdm_top_cache)); }

void tdm__top_cache_free(tdm_top_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].path);
        tdm__recover_symbols_close(c->v[i].sym);
    }
    free(c->v);
    free(c);
}

void tdm__top_cache_keep(tdm_top_cache *c, const tdm_top_sources *src)
{
    size_t kept = 0;
    for (size_t i = 0; c && i < c->n; i++) {
        int wanted = 0;
        for (size_t k = 0; k < src->count && !wanted; k++)
            wanted = strcmp(src->v[k].path, c->v[i].path) == 0;
        if (wanted) {
            c->v[kept++] = c->v[i];
        } else {
            free(c->v[i].path);
            tdm__recover_symbols_close(c->v[i].sym);
        }
    }
    if (c)
        c->n = kept;
}

/* The symbolizer for `d`, read from `path`: the cached one while the
 * process has the same modules, else opened anew (NULL: raw addresses). */
static tdm_recover_symbols *symbols_for(tdm_top_cache *c, const char *path,
                                        const tdm_spill_data *d)
{
    cache_entry *e = NULL;
    for (size_t i = 0; c && i < c->n && !e; i++)
        if (strcmp(c->v[i].path, path) == 0)
            e = &c->v[i];
    if (e && e->pid == d->header.pid && e->module_count == d->module_count)
        return e->sym;
    size_t changed, missing;
    tdm_recover_symbols *sym = tdm__recover_symbols_open(d, NULL, &changed, &missing);
    if (!c)
        return sym;
    if (!e) {
        cache_entry *grown = realloc(c->v, (c->n + 1) * sizeof *grown);
        char *copy = strdup(path);
        if (!grown || !copy) {
            if (grown)
                c->v = grown;
            free(copy);
            tdm__recover_symbols_close(sym);
            return NULL;
        }
        c->v = grown;
        e = &c->v[c->n++];
        *e = (cache_entry){copy, 0, 0, NULL};
    }
    tdm__recover_symbols_close(e->sym);
    e->sym = sym;
    e->pid = d->header.pid;
    e->module_count = d->module_count;
    return sym;
}

static void escape_into(char *out, size_t cap, const char *in)
{
    size_t used;
    size_t n = tdm__escape_text(in, strlen(in), out, cap - 1, 0, 1, &used);
    out[n] = '\0';
}

static void site_name(const tdm_snap *snap, uint32_t stack_id, char *out, size_t len)
{
    char raw[512] = "(no stack recorded)";
    if (stack_id && stack_id < snap->stack_count) {
        uint32_t f = tdm__site_first_frame(snap, stack_id);
        const tdm_snap_stack *st = &snap->stacks[stack_id];
        if (f < st->depth) {
            const tdm_snap_frame *fr = &snap->frames[st->frames[f]];
            /* Python frames are named from code objects that live in the
             * process: a spill file holds none (docs/spill.md). */
            if (strcmp(fr->function, "<python>") == 0)
                snprintf(raw, sizeof raw, "Python code (its frames are named in the snapshot)");
            else
                tdm__site_format_frame(raw, sizeof raw, fr);
        }
    }
    escape_into(out, len, raw);
}

static tdm_status fill_device(const tdm_model *model, size_t di, const uint8_t *cats,
                              uint64_t now_ns, uint64_t start_ns, int with_sites,
                              tdm_top_device *out)
{
    const tdm_model_device *dev = &model->devices[di];
    const tdm_snap *snap = model->snap;
    int64_t end = tdm__model_end_seq(model);
    const tdm_model_sample *now = tdm__model_sample_at(dev, end);
    out->ordinal = dev->ordinal;
    escape_into(out->name, sizeof out->name, tdm__model_device_label(dev));
    out->allocated = now ? now->allocated : 0;
    out->reserved = now ? now->reserved : 0;
    out->reserved_known = dev->reserved_known;
    out->peak_allocated = dev->peak_allocated;
    out->peak_reserved = dev->peak_reserved;
    for (size_t i = 0; i < model->alloc_count; i++) {
        const tdm_model_alloc *a = &model->allocs[i];
        if (a->device_index == di && tdm__model_alloc_live_at(a, end))
            out->category_bytes[cats[i] < TDM_CATEGORY_COUNT_ ? cats[i] : 0] += a->size;
    }
    for (int k = 0; k < TDM_TOP_HISTORY; k++) {
        uint64_t back = (uint64_t)(TDM_TOP_HISTORY - 1 - k) * 1000000000u;
        uint64_t t = now_ns > back ? now_ns - back : 0;
        if (t < start_ns && k < TDM_TOP_HISTORY - 1) {
            out->history[k] = -1;
            continue;
        }
        /* The last second ends with the last event, whose time stamp may
         * be a little ahead of this clock (clock.h interpolates). */
        int64_t seq = k == TDM_TOP_HISTORY - 1 ? end : tdm__model_seq_at_time(model, t);
        const tdm_model_sample *s = tdm__model_sample_at(dev, seq);
        out->history[k] = s ? s->allocated : 0;
    }
    if (!with_sites)
        return TDM_OK;
    tdm_model_site *sites;
    size_t n;
    if (tdm__model_sites_at(model, di, end, &sites, &n) != TDM_OK)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && out->site_count < TDM_TOP_SITES; i++) {
        if (!sites[i].live_bytes)
            break;
        tdm_top_site *s = &out->sites[out->site_count++];
        s->bytes = sites[i].live_bytes;
        s->count = sites[i].live_count;
        site_name(snap, sites[i].stack_id, s->where, sizeof s->where);
    }
    free(sites);
    return TDM_OK;
}

tdm_status tdm__top_read(tdm_top_cache *cache, const tdm_top_source *src, uint64_t now_ns,
                         int sites, tdm_top_process *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    out->source = *src;
    tdm_spill_data *d = NULL;
    tdm_snap *snap = NULL;
    tdm_model *model = NULL;
    uint8_t *cats = NULL;
    tdm_read_error err = {0};
    tdm_status st = tdm__spill_read_live(src->path, &d, &err, &out->copied_bytes);
    if (st != TDM_OK) {
        if (st == TDM_IO_ERROR)
            snprintf(why, why_len, "%s: %s", src->path, err.message);
        else
            snprintf(why, why_len, "%s: %s: %s", src->path, tdm_strerror(st), err.message);
        return st;
    }
    tdm__top_labels_read(d->header.pid, d->header.host, &out->labels);
    escape_into(out->labels.host, sizeof out->labels.host, d->header.host);
    escape_into(out->command, sizeof out->command, d->header.command);
    out->start_us = d->header.start_time_us;
    out->torn = d->torn_slots;
    out->dropped = d->overwritten;
    tdm_recover_symbols *sym = sites ? symbols_for(cache, src->path, d) : NULL;
    st = tdm__recover_build(d, sym, "", &snap);
    if (!cache)
        tdm__recover_symbols_close(sym);
    if (st == TDM_OK)
        st = tdm__stack_display_apply(snap);
    if (st == TDM_OK)
        st = tdm__model_build(snap, &model);
    if (st == TDM_OK)
        st = tdm__categories_infer(model, &cats);
    if (st == TDM_OK) {
        out->events = snap->event_count;
        out->last_event_ns = model->window_end_ns;
        out->devices = calloc(model->device_count + 1, sizeof *out->devices);
        if (!out->devices)
            st = TDM_HOST_OUT_OF_MEMORY;
        for (size_t i = 0; st == TDM_OK && i < model->device_count; i++) {
            st = fill_device(model, i, cats, now_ns, out->start_us * 1000u, sites,
                             &out->devices[i]);
            out->device_count = i + 1;
        }
    }
    if (st != TDM_OK) {
        snprintf(why, why_len, "%s: %s", src->path, tdm_strerror(st));
        tdm__top_process_free(out);
    }
    free(cats);
    tdm__model_free(model);
    if (snap) {
        tdm__stack_display_forget(snap);
        tdm__recover_snap_free(snap);
    }
    tdm__spill_data_free(d);
    return st;
}

void tdm__top_process_free(tdm_top_process *p)
{
    free(p->devices);
    p->devices = NULL;
    p->device_count = 0;
}
