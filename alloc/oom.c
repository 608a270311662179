/* alloc/oom.c: what tidemark says when a device runs out of memory.
 *
 * Owns the one-line report (device, request, free bytes, the three live
 * allocation sites holding the most bytes) and the call of the configured
 * on_oom hook (which may write a snapshot), and the per-thread list of
 * sites the modes fill for it.  Rare path: it may symbolize, allocate and
 * print.  Called with no allocator lock held.
 */
#include <stdio.h>
#include <string.h>

#include "alloc_internal.h"
#include "stack.h"
#include "symbolize.h"

tdm__oom_sites *tdm__oom_sites_begin(void)
{
    static __thread tdm__oom_sites sites; /* 4 KiB: off the caller's stack */
    sites.n = 0;
    return &sites;
}

void tdm__oom_site_add(tdm__oom_sites *s, uint32_t stack_id, uint64_t bytes)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->site[i].stack_id == stack_id) {
            s->site[i].bytes += bytes;
            return;
        }
    }
    if (s->n < TDM__OOM_SITES) {
        s->site[s->n].stack_id = stack_id;
        s->site[s->n].bytes = bytes;
        s->n++;
    }
    /* Past TDM__OOM_SITES distinct sites the rest go uncounted: the
     * report is a hint, and the snapshot has every block. */
}

typedef struct map_sites {
    tdm__oom_sites *s;
    int device; /* the device that ran out */
} map_sites;

static void add_map_site(void *ctx, uint64_t key, const tdm__ptr_rec *rec)
{
    (void)key;
    map_sites *m = ctx;
    if (rec->device == m->device)
        tdm__oom_site_add(m->s, rec->stack_id, rec->size);
}

void tdm__oom_sites_from_map(tdm__oom_sites *s, tdm__ptrmap *m, int device)
{
    map_sites ctx = {s, device};
    tdm__ptrmap_each(m, add_map_site, &ctx);
}

static void human(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
}

/* A site's stack as the source reads it: each return address expanded
 * into the functions inlined at it, innermost first. */
#define OOM_FRAMES 64
typedef struct site_frames {
    tdm_symbol f[OOM_FRAMES];
    unsigned n;
} site_frames;

static void expand_site(tdm_symbolizer *sym, const tdm__oom_site *site, site_frames *out)
{
    out->n = 0;
    const uintptr_t *pcs = NULL;
    unsigned depth = site->stack_id ? tdm__stack_get(site->stack_id, &pcs) : 0;
    for (unsigned k = 0; k < depth && out->n < OOM_FRAMES; k++) {
        const tdm_symbol *chain = NULL;
        size_t m = tdm__symbolize_frames(sym, pcs[k], &chain);
        for (size_t j = 0; j < m && out->n < OOM_FRAMES; j++)
            out->f[out->n++] = chain[j];
    }
}

static int same_frame(const tdm_symbol *a, const tdm_symbol *b)
{
    return a->line == b->line && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0;
}

/* How many innermost frames the stacks of sites[0..n) all share: when
 * every allocation goes through one helper, the line names the helper's
 * callers, the first frame where the sites differ, not the helper n times.
 * Frames are compared as source lines, inlined ones included: a helper
 * the compiler inlined into each caller (-O3) has other return addresses
 * at each call, and is the same helper.  0 when fewer than two sites have
 * stacks. */
static unsigned shared_frames(const site_frames *fr, size_t n)
{
    const site_frames *with[3];
    unsigned count = 0, min_depth = ~0u;
    for (size_t i = 0; i < n && i < 3; i++) {
        if (fr[i].n == 0)
            continue;
        if (fr[i].n < min_depth)
            min_depth = fr[i].n;
        with[count++] = &fr[i];
    }
    if (count < 2)
        return 0;
    unsigned k = 0;
    while (k + 1 < min_depth) {
        for (unsigned i = 1; i < count; i++)
            if (!same_frame(&with[i]->f[k], &with[0]->f[k]))
                return k;
        k++;
    }
    return k;
}

void tdm__oom_report(int device, const char *device_name, size_t request,
                     size_t rounded, size_t free_bytes, tdm__oom_sites *live)
{
    const tdm__alloc_config *cfg = &tdm__alloc_g.cfg;
    tdm__oom_site *sites = live->site;
    size_t n = live->n;
    if (!cfg->quiet_oom) {
        /* The three largest sites, by a partial selection sort. */
        for (size_t i = 0; i < n && i < 3; i++) {
            size_t best = i;
            for (size_t j = i + 1; j < n; j++)
                if (sites[j].bytes > sites[best].bytes)
                    best = j;
            tdm__oom_site t = sites[i];
            sites[i] = sites[best];
            sites[best] = t;
        }
        char line[1024], a[32], b[32];
        human(a, sizeof a, rounded);
        human(b, sizeof b, free_bytes);
        int len = snprintf(line, sizeof line,
                           "tidemark: out of memory on %s: tried to allocate %s "
                           "(%zu bytes requested), %s free; largest live sites:",
                           device_name, a, request, b);
        tdm_symbolizer *sym = NULL;
        if (n > 0 && tdm__symbolizer_open(&sym) != TDM_OK)
            sym = NULL;
        size_t shown = n < 3 ? n : 3;
        static __thread site_frames frames[3]; /* 8 KiB: off the caller's stack */
        for (size_t i = 0; i < shown; i++) {
            frames[i].n = 0;
            if (sym != NULL)
                expand_site(sym, &sites[i], &frames[i]);
        }
        unsigned shared = shared_frames(frames, shown);
        for (size_t i = 0; i < shown && len > 0 && (size_t)len < sizeof line; i++) {
            char where[256] = "(no stack recorded)";
            unsigned depth = frames[i].n;
            if (depth > 0) {
                const tdm_symbol *f = &frames[i].f[shared < depth ? shared : depth - 1];
                if (f->file[0] != '\0')
                    snprintf(where, sizeof where, "%s (%s:%u)", f->function, f->file, f->line);
                else
                    snprintf(where, sizeof where, "%s", f->function);
            }
            human(a, sizeof a, sites[i].bytes);
            len += snprintf(line + len, sizeof line - (size_t)len, "%s %s %s",
                            i ? "," : "", where, a);
        }
        if (n == 0 && len > 0 && (size_t)len < sizeof line)
            snprintf(line + len, sizeof line - (size_t)len, " none");
        if (sym != NULL)
            tdm__symbolizer_close(sym);
        fprintf(stderr, "%s\n", line);
    }
    if (cfg->on_oom != NULL)
        cfg->on_oom(device, request);
}
