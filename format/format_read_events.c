/* format/format_read_events.c: the reader of the `events` record and of
 * `events_zstd`, the same payload compressed (format_read.c reads the
 * others): its columns, each an array of one
 * integer per event or one integer standing for all, every value checked
 * against its range (actions, categories, devices, stack and phase ids
 * known so far).  Untrusted input, as everywhere in the reader: a value
 * out of range is an error naming the column and the byte offset.
 *
 * Lock: none; no global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "format_decode.h"

typedef tdm__fmt_reader reader;
typedef tdm__fmt_cur cur;

static int column_range_error(reader *r, const uint8_t *at, enum tdm_fmt_key k,
                              uint64_t v, int neg)
{
    char what[128];
    size_t lim = k == TDM_KEY_STACK ? tdm__fmt_stack_limit(r) : tdm__fmt_phase_limit(r);
    const char *allowed;
    char buf[48];
    switch (k) {
    case TDM_KEY_ACTION: allowed = "a known action"; break;
    case TDM_KEY_CATEGORY: allowed = "a known category"; break;
    case TDM_KEY_DEVICE: allowed = "-1..32767"; break;
    case TDM_KEY_STEP: allowed = "a step below 2^32"; break;
    case TDM_KEY_STACK:
    case TDM_KEY_PHASE:
        snprintf(buf, sizeof buf, "an id below %zu", lim);
        allowed = buf;
        break;
    default: allowed = "not negative"; break;
    }
    snprintf(what, sizeof what, "%s%llu is out of range (must be %s)", neg ? "-" : "",
             (unsigned long long)(neg ? -v : v), allowed);
    return tdm__fmt_bad(r, at, tdm__fmt_key_names[k], what);
}

/* Decodes one events column into ev[0..n): an array of n integers, or one
 * integer standing for all.  See docs/format.md for each column's coding. */
static int read_column(reader *r, const uint8_t *const pos[], enum tdm_fmt_key k,
                       tdm_event *ev, size_t n)
{
    cur c = {0};
    if (tdm__fmt_field(r, pos, k, &c))
        return -1;
    const char *name = tdm__fmt_key_names[k];
    const uint8_t *at0 = c.p;
    int scalar = 0, sneg = 0;
    uint64_t sv = 0;
    if (c.p < c.end && ((*c.p >= 0x90 && *c.p <= 0x9f) || *c.p == 0xdc || *c.p == 0xdd)) {
        uint64_t len = 0;
        if (tdm__fmt_len(r, &c, name, 'a', &len))
            return -1;
        if (len != n)
            return tdm__fmt_bad(r, at0, name, "column length differs from 'count'");
    } else {
        if (tdm__fmt_dec_int(&c.p, c.end, &sv, &sneg) != TDM_FMT_DEC_OK)
            return tdm__fmt_bad(r, at0, name, "expected an integer or an array");
        scalar = 1;
    }
    const uint64_t nstacks = tdm__fmt_stack_limit(r), nphases = tdm__fmt_phase_limit(r);
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *at = c.p;
        uint64_t v = 0;
        int neg = 0;
        if (scalar) {
            v = sv;
            neg = sneg;
            at = at0;
        } else if (tdm__fmt_dec_int(&c.p, c.end, &v, &neg) != TDM_FMT_DEC_OK) {
            return tdm__fmt_bad(r, at, name, "expected an integer");
        }
        tdm_event *e = &ev[i];
        switch (k) {
        case TDM_KEY_TIME_NS: e->time_ns = acc += v; break;
        case TDM_KEY_ADDR: e->addr = acc += v; break;
        case TDM_KEY_REQUESTED: e->requested = e->size - v; break;
        case TDM_KEY_STEP:
            acc += v;
            if (acc > UINT32_MAX)
                return column_range_error(r, at, k, acc, 0);
            e->step = (uint32_t)acc;
            break;
        case TDM_KEY_ACTION:
            if (neg || v >= TDM_ACTION_COUNT_)
                return column_range_error(r, at, k, v, neg);
            e->action = (uint8_t)v;
            break;
        case TDM_KEY_CATEGORY:
            if (neg || v >= TDM_CATEGORY_COUNT_)
                return column_range_error(r, at, k, v, neg);
            e->category = (uint8_t)v;
            break;
        case TDM_KEY_DEVICE:
            if (neg ? (int64_t)v < TDM_FMT_DEVICE_MIN : v > TDM_FMT_DEVICE_MAX)
                return column_range_error(r, at, k, v, neg);
            e->device = (int16_t)(int64_t)v;
            break;
        case TDM_KEY_STACK:
            if (neg || v >= nstacks)
                return column_range_error(r, at, k, v, neg);
            e->stack_id = (uint32_t)v;
            break;
        case TDM_KEY_PHASE:
            if (neg || v >= nphases)
                return column_range_error(r, at, k, v, neg);
            e->phase = (uint32_t)v;
            break;
        default: /* size, stream */
            if (neg)
                return column_range_error(r, at, k, v, neg);
            if (k == TDM_KEY_SIZE)
                e->size = v;
            else
                e->stream = v;
            break;
        }
    }
    return 0;
}

int tdm__fmt_read_events(tdm__fmt_reader *r, tdm__fmt_cur *c)
{
    const uint8_t *pos[TDM_KEY_COUNT_];
    uint64_t first = 0, n = 0;
    if (tdm__fmt_index_map(r, c, pos) || tdm__fmt_u64_field(r, pos, TDM_KEY_FIRST, &first) ||
        tdm__fmt_u64_field(r, pos, TDM_KEY_COUNT, &n))
        return -1;
    if (first != r->events.n)
        return tdm__fmt_bad(r, pos[TDM_KEY_FIRST], "first", "does not follow the events before it");
    /* At least a byte per event: what bounds memory by the file's size. */
    if (n > (uint64_t)(r->rec_end - r->rec_payload))
        return tdm__fmt_bad(r, pos[TDM_KEY_COUNT], "count",
                            "more events than the record has bytes");
    tdm_event *ev = tdm__fmt_vec_more(r, &r->events, sizeof *ev, n);
    if (!ev)
        return -1;
    /* size before requested, which is stored as size - requested */
    static const enum tdm_fmt_key cols[] = {
        TDM_KEY_TIME_NS, TDM_KEY_ACTION, TDM_KEY_DEVICE,  TDM_KEY_ADDR,
        TDM_KEY_SIZE,    TDM_KEY_REQUESTED, TDM_KEY_STREAM, TDM_KEY_STACK,
        TDM_KEY_PHASE,   TDM_KEY_STEP,   TDM_KEY_CATEGORY,
    };
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (read_column(r, pos, cols[i], ev, n))
            return -1;
    r->events.n += n;
    return 0;
}

/* One zstd frame that states its size, which is bounded twice: by
 * TDM_FMT_ZSTD_MAX_PLAIN, and by TDM_FMT_ZSTD_MAX_RATIO times the
 * compressed bytes, so that what a file makes the reader allocate stays
 * proportional to the file's size (docs/format.md §7). */
int tdm__fmt_read_events_zstd(tdm__fmt_reader *r, tdm__fmt_cur *c)
{
    const uint8_t *z = c->p;
    size_t zlen = (size_t)(c->end - c->p);
    unsigned long long at = (unsigned long long)tdm__fmt_off(r, z);
    unsigned long long plain = ZSTD_getFrameContentSize(z, zlen);
    if (plain == ZSTD_CONTENTSIZE_ERROR)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at, "no zstd frame at byte %llu", at);
    if (plain == ZSTD_CONTENTSIZE_UNKNOWN)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at,
                             "the zstd frame at byte %llu does not state its size", at);
    if (plain == 0 || plain > TDM_FMT_ZSTD_MAX_PLAIN || plain / TDM_FMT_ZSTD_MAX_RATIO > zlen)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at,
                             "the zstd frame at byte %llu states %llu bytes (must be 1..%zu "
                             "and at most %d times its %zu compressed bytes)",
                             at, plain, TDM_FMT_ZSTD_MAX_PLAIN, TDM_FMT_ZSTD_MAX_RATIO, zlen);
    if (!r->zstd_dctx && !(r->zstd_dctx = ZSTD_createDCtx()))
        return tdm__fmt_oom(r);
    if (plain > r->plain_cap) {
        uint8_t *p = realloc(r->plain, plain);
        if (!p)
            return tdm__fmt_oom(r);
        r->plain = p;
        r->plain_cap = plain;
    }
    size_t got = ZSTD_decompressDCtx(r->zstd_dctx, r->plain, plain, z, zlen);
    if (ZSTD_isError(got))
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at,
                             "the zstd frame at byte %llu does not decompress: %s", at,
                             ZSTD_getErrorName(got));
    if (got != plain)
        return tdm__fmt_fail(r, TDM_FORMAT_ERROR, at,
                             "the zstd frame at byte %llu gives %zu bytes, not the %llu it states",
                             at, got, plain);
    r->plain_len = got;
    r->plain_at = at;
    r->rec_payload = r->plain;
    r->rec_end = r->plain + got;
    cur pc = {r->plain, r->plain + got};
    int bad = tdm__fmt_read_events(r, &pc);
    r->plain_len = 0;
    return bad;
}

void tdm__fmt_events_zstd_free(tdm__fmt_reader *r)
{
    free(r->plain);
    r->plain = NULL;
    r->plain_cap = 0;
    ZSTD_freeDCtx(r->zstd_dctx);
    r->zstd_dctx = NULL;
}
