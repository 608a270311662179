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

/* How many innermost frames the stacks of sites[0..n) all share: when
 * every allocation goes through one helper, the line names the helper's
 * callers, the first frame where the sites differ, not the helper n times.
 * 0 when fewer than two sites have stacks. */
static unsigned shared_frames(const tdm__oom_site *sites, size_t n)
{
    const uintptr_t *pcs[3];
    unsigned depth[3], with = 0, min_depth = ~0u;
    for (size_t i = 0; i < n && i < 3; i++) {
        if (sites[i].stack_id == 0 ||
            (depth[with] = tdm__stack_get(sites[i].stack_id, &pcs[with])) == 0)
            continue;
        if (depth[with] < min_depth)
            min_depth = depth[with];
        with++;
    }
    if (with < 2)
        return 0;
    unsigned k = 0;
    while (k + 1 < min_depth) {
        for (unsigned i = 1; i < with; i++)
            if (pcs[i][k] != pcs[0][k])
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
        unsigned shared = shared_frames(sites, shown);
        for (size_t i = 0; i < shown && len > 0 && (size_t)len < sizeof line; i++) {
            const uintptr_t *pcs = NULL;
            char where[256] = "(no stack recorded)";
            unsigned depth = 0;
            if (sites[i].stack_id != 0 && sym != NULL &&
                (depth = tdm__stack_get(sites[i].stack_id, &pcs)) > 0) {
                tdm_symbol s;
                tdm__symbolize(sym, pcs[shared < depth ? shared : depth - 1], &s);
                if (s.file[0] != '\0')
                    snprintf(where, sizeof where, "%s (%s:%u)", s.function, s.file, s.line);
                else
                    snprintf(where, sizeof where, "%s", s.function);
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
