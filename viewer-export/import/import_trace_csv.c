/* viewer-export/import/import_trace_csv.c: the allocation traces of
 * ../shared/traces (`action,time_ns,id,size,category`) → a snapshot
 * (import_csv.h).
 *
 * The file names allocations by id, not by address, so the importer gives
 * each one an address of its own from a bump pointer that never reuses
 * one (512-byte aligned, as PyTorch rounds blocks): addresses stay
 * unique, so every consumer's address-keyed replay sees exactly the
 * file's lifetimes.  Columns are found by their header names; `category`
 * and `stream` (an allocation's stream, a number; its free is on the
 * same) may be absent.  Invariants: an id is live at most once; a free names a
 * live id.  No state, no locks.
 */
#include "import_csv.h"
#include "import_formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_read.h"
#include "import_build.h"
#include "snap_build.h" /* tdm__grow_array */

/* Where imported allocations start: a plausible device-heap address, far
 * from 0 so that no address is mistaken for "none". */
#define TRACE_BASE_ADDR 0x7f0000000000ull
#define TRACE_ALIGN 512ull

enum { COL_ACTION, COL_TIME, COL_ID, COL_SIZE, COL_CATEGORY, COL_STREAM, COL_COUNT };
static const char *const col_names[COL_COUNT] = {"action", "time_ns", "id",
                                                 "size", "category", "stream"};

/* id → index into the alloc table, for the ids now live. */
typedef struct id_slot {
    uint64_t id;
    size_t idx;      /* SIZE_MAX = empty */
    uint64_t stream; /* the allocation's, for its free */
} id_slot;

typedef struct idmap {
    id_slot *s;
    size_t mask, used;
} idmap;

static size_t id_home(const idmap *m, uint64_t id)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 32)) & m->mask;
}

static size_t id_find(const idmap *m, uint64_t id)
{
    size_t i = id_home(m, id);
    while (m->s[i].idx != SIZE_MAX && m->s[i].id != id)
        i = (i + 1) & m->mask;
    return i;
}

static int id_grow(idmap *m)
{
    size_t old_n = m->s ? m->mask + 1 : 0, n = old_n ? old_n * 2 : 1024;
    id_slot *old = m->s;
    if (!(m->s = malloc(n * sizeof *m->s))) {
        m->s = old;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        m->s[i].idx = SIZE_MAX;
    m->mask = n - 1;
    for (size_t i = 0; i < old_n; i++)
        if (old[i].idx != SIZE_MAX)
            m->s[id_find(m, old[i].id)] = old[i];
    free(old);
    return 0;
}

static void id_del(idmap *m, size_t i)
{
    m->s[i].idx = SIZE_MAX;
    m->used--;
    for (size_t j = (i + 1) & m->mask; m->s[j].idx != SIZE_MAX;
         j = (j + 1) & m->mask) {
        size_t home = id_home(m, m->s[j].id);
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        m->s[i] = m->s[j];
        m->s[j].idx = SIZE_MAX;
        i = j;
    }
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static uint8_t category_of(const char *s)
{
    for (unsigned c = 0; c < TDM_CATEGORY_COUNT_; c++)
        if (strcasecmp(s, tdm_category_name((tdm_category)c)) == 0)
            return (uint8_t)c;
    return TDM_CATEGORY_UNKNOWN;
}

/* Reads the CSV open in `r` (closed here); `base` names it. */
static tdm_status read_trace(tdm_csv r, const char *base, const tdm_trace_csv_options *opts,
                             tdm_snap **out, char *err, size_t errlen)
{
    tdm_status st = TDM_OK;
    char meta[256];
    snprintf(meta, sizeof meta, "imported from traces CSV %s", base);

    tdm_ibuild *b = NULL;
    idmap ids = {0};
    tdm_trace_alloc *allocs = NULL;
    size_t nallocs = 0, capallocs = 0;
    int col[COL_COUNT];
    int have_header = 0;
    uint64_t next_addr = TRACE_BASE_ADDR;
    st = tdm__ibuild_new("trace", base, meta, &b);
    if (st == TDM_OK && id_grow(&ids) != 0)
        st = TDM_HOST_OUT_OF_MEMORY;

    while (st == TDM_OK && tdm__csv_next(&r, &st)) {
        if (!have_header) {
            int missing = tdm__csv_header(&r, col_names, COL_COUNT,
                                          1u << COL_CATEGORY | 1u << COL_STREAM, col);
            if (missing >= 0)
                st = tdm__csv_fail(&r, "the header lacks a '%s' column "
                                       "(want action,time_ns,id,size,category)",
                                   col_names[missing]);
            have_header = 1;
            continue;
        }
        const char *v[COL_COUNT];
        tdm__csv_row(&r, col, COL_COUNT, v);
        uint64_t t, id, size = 0, stream = 0;
        if (parse_u64(v[COL_TIME], &t) != 0) {
            st = tdm__csv_fail(&r, "time_ns '%s' is not a number", v[COL_TIME]);
            break;
        }
        if (strcmp(v[COL_ACTION], "phase") == 0) {
            if (!*v[COL_CATEGORY]) {
                st = tdm__csv_fail(&r, "a phase row needs its name in the category column");
                break;
            }
            st = strcmp(v[COL_CATEGORY], "step") == 0
                     ? tdm__ibuild_step(b, t)
                     : tdm__ibuild_phase(b, t, v[COL_CATEGORY]);
            continue;
        }
        int is_alloc = strcmp(v[COL_ACTION], "alloc") == 0;
        if (!is_alloc && strcmp(v[COL_ACTION], "free") != 0) {
            st = tdm__csv_fail(&r, "unknown action '%s' (want alloc, free or phase)",
                               v[COL_ACTION]);
            break;
        }
        if (parse_u64(v[COL_ID], &id) != 0) {
            st = tdm__csv_fail(&r, "id '%s' is not a number", v[COL_ID]);
            break;
        }
        if ((is_alloc || *v[COL_SIZE]) && parse_u64(v[COL_SIZE], &size) != 0) {
            st = tdm__csv_fail(&r, "size '%s' is not a number", v[COL_SIZE]);
            break;
        }
        if (is_alloc && *v[COL_STREAM] && parse_u64(v[COL_STREAM], &stream) != 0) {
            st = tdm__csv_fail(&r, "stream '%s' is not a number", v[COL_STREAM]);
            break;
        }
        size_t slot = id_find(&ids, id);
        if (is_alloc) {
            if (ids.s[slot].idx != SIZE_MAX) {
                st = tdm__csv_fail(&r, "id %llu is allocated again before its free",
                                   (unsigned long long)id);
                break;
            }
            if (tdm__grow_array(&allocs, &capallocs, nallocs + 1, sizeof *allocs) != 0) {
                st = TDM_HOST_OUT_OF_MEMORY;
                break;
            }
            uint8_t cat = *v[COL_CATEGORY] ? category_of(v[COL_CATEGORY])
                                           : TDM_CATEGORY_UNKNOWN;
            allocs[nallocs] = (tdm_trace_alloc){id, next_addr, size, t,
                                                UINT64_MAX, cat};
            st = tdm__ibuild_alloc(b, t, 0, next_addr, size, stream,
                                   opts->tag_with_category ? cat : 0);
            uint64_t step = size ? (size + TRACE_ALIGN - 1) & ~(TRACE_ALIGN - 1)
                                 : TRACE_ALIGN;
            next_addr += step;
            if ((ids.used + 1) * 2 > ids.mask + 1) {
                if (id_grow(&ids) != 0) {
                    st = TDM_HOST_OUT_OF_MEMORY;
                    break;
                }
                slot = id_find(&ids, id);
            }
            ids.s[slot] = (id_slot){id, nallocs++, stream};
            ids.used++;
        } else {
            if (ids.s[slot].idx == SIZE_MAX) {
                st = tdm__csv_fail(&r, "free of id %llu, which is not allocated",
                                   (unsigned long long)id);
                break;
            }
            tdm_trace_alloc *a = &allocs[ids.s[slot].idx];
            a->free_ns = t;
            stream = ids.s[slot].stream;
            id_del(&ids, slot);
            st = tdm__ibuild_free(b, t, 0, a->addr, a->size, stream);
        }
    }
    if (st == TDM_OK && !have_header)
        st = tdm__csv_fail(&r, "no header line (want action,time_ns,id,size,category)");
    st = tdm__csv_close(&r, st);
    free(ids.s);
    if (st == TDM_OK) {
        st = tdm__ibuild_finish(b, out);
        b = NULL;
    }
    tdm__ibuild_abort(b);
    if (st == TDM_OK && opts->allocs) {
        *opts->allocs = allocs;
        *opts->alloc_count = nallocs;
        allocs = NULL;
    }
    free(allocs);
    if (st == TDM_HOST_OUT_OF_MEMORY && err && errlen)
        snprintf(err, errlen, "%s", tdm_strerror(st));
    return st;
}

/* What both entry points do first: no output yet, the defaults. */
static const tdm_trace_csv_options *start(const tdm_trace_csv_options *opts, tdm_snap **out)
{
    static const tdm_trace_csv_options none = {0};
    *out = NULL;
    if (!opts)
        return &none;
    if (opts->allocs) {
        *opts->allocs = NULL;
        *opts->alloc_count = 0;
    }
    return opts;
}

tdm_status tdm__import_trace_csv(const char *path, const tdm_trace_csv_options *opts,
                                 tdm_snap **out, char *err, size_t errlen)
{
    opts = start(opts, out);
    tdm_csv r;
    tdm_status st = tdm__csv_open(&r, path, TDM_CSV_COMMENTS, err, errlen);
    if (st != TDM_OK)
        return st;
    const char *base = strrchr(path, '/');
    return read_trace(r, base ? base + 1 : path, opts, out, err, errlen);
}

tdm_status tdm__import_trace_csv_buffer(const void *data, size_t len, const char *source,
                                        const tdm_trace_csv_options *opts, tdm_snap **out,
                                        char *err, size_t errlen)
{
    opts = start(opts, out);
    tdm_csv r;
    tdm_status st = tdm__csv_open_buffer(&r, data, len, TDM_CSV_COMMENTS, err, errlen);
    if (st != TDM_OK)
        return st;
    return read_trace(r, source ? source : "", opts, out, err, errlen);
}

int tdm__import_trace_sniff(const unsigned char *head, size_t len)
{
    /* Comment lines, then the header naming at least these columns. */
    size_t i = 0;
    while (i < len && head[i] == '#') {
        while (i < len && head[i] != '\n')
            i++;
        i++;
    }
    static const char want[] = "action,time_ns,id,size";
    return i < len && len - i >= sizeof want - 1 &&
           memcmp(head + i, want, sizeof want - 1) == 0;
}

tdm_status tdm__import_trace(const char *path, tdm_snap **out, char *err,
                             size_t errlen)
{
    tdm_trace_csv_options o = {.tag_with_category = 1};
    return tdm__import_trace_csv(path, &o, out, err, errlen);
}
