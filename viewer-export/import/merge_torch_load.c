/* viewer-export/import/merge_torch_load.c: reading PyTorch's history for a
 * merge (merge_torch.h): the pickle imported as `tidemark import` does,
 * plus the memory_stats rows tidemark_tensors.py adds under
 * `tidemark_memory_stats` ({device: {"allocated_bytes.all.peak": N, ...}},
 * torch.cuda.memory_stats' flat keys) and what its history ring was
 * (`tidemark_history`, merge_torch.h).  No state, no locks. */
#include "merge_torch.h"
#include "import_formats.h"
#include "pickle_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *tdm__merge_torch_pickle_path(const char *tdm_path)
{
    size_t n = strlen(tdm_path);
    if (n > 4 && strcmp(tdm_path + n - 4, ".tdm") == 0)
        n -= 4;
    static const char tail[] = ".torch.pickle";
    char *p = malloc(n + sizeof tail);
    if (!p)
        return NULL;
    memcpy(p, tdm_path, n);
    memcpy(p + n, tail, sizeof tail);
    return p;
}

/* torch.cuda.memory_stats' name of each tdm_stats figure. */
static tdm_stat *stat_named(tdm_stats *st, const char *name, size_t n)
{
    static const char *const names[] = {"allocated_bytes", "reserved_bytes", "active_bytes",
                                        "requested_bytes", "allocation", "segment"};
    tdm_stat *fields[] = {&st->allocated_bytes, &st->reserved_bytes, &st->active_bytes,
                          &st->requested_bytes, &st->allocation, &st->segment};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0)
            return fields[i];
    return NULL;
}

/* One "STAT.POOL.FIELD": int entry into rows[0..3) (all, small, large). */
static int put_stat(tdm_snap_device_stats rows[3], const tdm_pkv *key, const tdm_pkv *value)
{
    uint64_t v;
    if (!key || key->type != TDM_PKV_STR || tdm__pk_u64(value, &v) != 0)
        return 0;
    const char *s = key->v.s, *end = s + key->n;
    if (key->n == strlen("num_alloc_retries") && memcmp(s, "num_alloc_retries", key->n) == 0) {
        for (int p = 0; p < 3; p++)
            rows[p].stats.num_alloc_retries = v;
        return 1;
    }
    if (key->n == strlen("num_ooms") && memcmp(s, "num_ooms", key->n) == 0) {
        for (int p = 0; p < 3; p++)
            rows[p].stats.num_ooms = v;
        return 1;
    }
    const char *dot1 = memchr(s, '.', key->n);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
    if (!dot2)
        return 0;
    static const char *const pools[] = {"all", "small_pool", "large_pool"};
    int pool = -1;
    for (int p = 0; p < 3; p++)
        if ((size_t)(dot2 - dot1 - 1) == strlen(pools[p]) &&
            memcmp(dot1 + 1, pools[p], strlen(pools[p])) == 0)
            pool = p;
    tdm_stat *st = pool < 0 ? NULL : stat_named(&rows[pool].stats, s, (size_t)(dot1 - s));
    if (!st)
        return 0;
    const char *field = dot2 + 1;
    size_t fn = (size_t)(end - field);
    int64_t *dst = fn == 7 && memcmp(field, "current", 7) == 0     ? &st->current
                   : fn == 4 && memcmp(field, "peak", 4) == 0      ? &st->peak
                   : fn == 9 && memcmp(field, "allocated", 9) == 0 ? &st->allocated
                   : fn == 5 && memcmp(field, "freed", 5) == 0     ? &st->freed
                                                                   : NULL;
    if (!dst)
        return 0;
    *dst = (int64_t)v;
    return 1;
}

/* The rows of tidemark_memory_stats; entries of another shape are left
 * out (statistics are a bonus: the history is what is merged). */
static tdm_status read_stats(const tdm_pkv *root, tdm_snap_device_stats **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    const tdm_pkv *d = tdm__pk_get(root, "tidemark_memory_stats");
    if (!d || d->type != TDM_PKV_DICT || d->n == 0)
        return TDM_OK;
    if (d->n > 32768)
        return TDM_OK;
    tdm_snap_device_stats *rows = calloc((size_t)d->n * 3, sizeof *rows);
    if (!rows)
        return TDM_HOST_OUT_OF_MEMORY;
    size_t n = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        uint64_t dev;
        const tdm_pkv *k = d->v.items[2 * i], *v = d->v.items[2 * i + 1];
        if (tdm__pk_u64(k, &dev) != 0 || (int64_t)dev < 0 || dev > 32767 ||
            !v || v->type != TDM_PKV_DICT)
            continue;
        tdm_snap_device_stats *r = rows + n;
        int any = 0;
        for (int p = 0; p < 3; p++) {
            r[p].device = (int32_t)dev;
            r[p].pool = (uint8_t)p;
            r[p].stats.size = sizeof r[p].stats;
        }
        for (uint32_t j = 0; j < v->n; j++)
            any |= put_stat(r, v->v.items[2 * j], v->v.items[2 * j + 1]);
        if (any)
            n += 3;
    }
    if (!n) {
        free(rows);
        return TDM_OK;
    }
    *out = rows;
    *nout = n;
    return TDM_OK;
}

/* tidemark_history: the ring's max_entries and its full devices; entries
 * of another shape are left out, as for the statistics. */
static tdm_status read_ring(const tdm_pkv *root, tdm_merge_torch_ring *ring)
{
    const tdm_pkv *h = tdm__pk_get(root, "tidemark_history");
    uint64_t me;
    if (!h || h->type != TDM_PKV_DICT || tdm__pk_u64(tdm__pk_get(h, "max_entries"), &me) != 0)
        return TDM_OK;
    ring->max_entries = me;
    const tdm_pkv *full = tdm__pk_get(h, "full");
    if (!full || full->type != TDM_PKV_DICT || full->n == 0 || full->n > 32768)
        return TDM_OK;
    if (!(ring->full = calloc(full->n, sizeof *ring->full)))
        return TDM_HOST_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < full->n; i++) {
        uint64_t dev;
        if (tdm__pk_u64(full->v.items[2 * i], &dev) == 0 && dev <= 32767)
            ring->full[ring->nfull++] = (int32_t)dev;
    }
    return TDM_OK;
}

tdm_status tdm__merge_torch_load(const char *path, tdm_snap **torch,
                                 tdm_snap_device_stats **stats, size_t *nstats,
                                 tdm_merge_torch_ring *ring, char *err, size_t errlen)
{
    *torch = NULL;
    *stats = NULL;
    *nstats = 0;
    memset(ring, 0, sizeof *ring);
    unsigned char *buf;
    size_t got;
    tdm_status rs = tdm__import_read_file(path, &buf, &got, err, errlen);
    if (rs != TDM_OK)
        return rs;
    const char *base = strrchr(path, '/');
    tdm_status s = tdm__import_pytorch_buffer(buf, got, base ? base + 1 : path, torch, NULL,
                                              err, errlen);
    if (s == TDM_OK) {
        tdm_pk_doc *doc = NULL;
        const tdm_pkv *root = NULL;
        tdm_pk_error perr;
        /* It parsed once already: only memory can fail now. */
        s = tdm__pk_parse(buf, got, &doc, &root, &perr);
        if (s == TDM_OK)
            s = read_stats(root, stats, nstats);
        if (s == TDM_OK)
            s = read_ring(root, ring);
        tdm__pk_free(doc);
        if (s != TDM_OK) {
            snprintf(err, errlen, "out of memory reading its statistics");
            tdm__import_pytorch_free(*torch);
            *torch = NULL;
            free(*stats);
            *stats = NULL;
            *nstats = 0;
            free(ring->full);
            memset(ring, 0, sizeof *ring);
        }
    }
    free(buf);
    return s;
}
