/* viewer-export/import/import_rmm_csv.c: RMM's logging_resource_adaptor log →
 * a snapshot (import_csv.h).
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   140573312345856,14:03:12.123456,allocate,0x7f8a40000000,1024,0
 *
 * Columns are found by their header names.  Accepted: Action allocate,
 * free, "allocate failure" (an OOM; Pointer "(nil)"); Pointer and Stream
 * in hex with or without 0x ("(nil)" is 0); Time as the adaptor writes it
 * (time of day, HH:MM:SS.ffffff; the date is not in the log, so times
 * start on 1970-01-01, and a time more than 12 h before the previous one
 * means midnight passed) or as seconds since the epoch ("1634567890.123456",
 * as RMM's docs show).  A free of an address the log never allocated is
 * kept (the model seeds it at the window start, as for a partial ring).
 * Invariant: events are added in file order.  No state, no locks.
 */
#include "import_csv.h"
#include "import_formats.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_read.h"
#include "import_build.h"
#include "vendor.h"

#define DAY_NS 86400000000000ull

enum { C_THREAD, C_TIME, C_ACTION, C_POINTER, C_SIZE, C_STREAM, C_COUNT };
static const char *const col_names[C_COUNT] = {"Thread", "Time", "Action",
                                               "Pointer", "Size", "Stream"};

static int parse_hex(const char *s, uint64_t *out)
{
    if (strcmp(s, "(nil)") == 0 || strcmp(s, "nullptr") == 0) {
        *out = 0;
        return 0;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno || *end || !isxdigit((unsigned char)s[0]))
        return -1;
    *out = v;
    return 0;
}

static int parse_dec(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Digits after a '.', as ns (at most 9 used). */
static int parse_frac_ns(const char *s, uint64_t *ns)
{
    uint64_t v = 0;
    int n = 0;
    for (; isdigit((unsigned char)*s); s++, n++)
        if (n < 9)
            v = v * 10 + (uint64_t)(*s - '0');
    if (*s || n == 0)
        return -1;
    for (; n < 9; n++)
        v *= 10;
    *ns = v;
    return 0;
}

/* "HH:MM:SS.ffffff" → ns into the day, or "SECONDS.frac" → ns since the
 * epoch (*is_tod says which). */
static int parse_time(const char *s, uint64_t *ns, int *is_tod)
{
    unsigned h, m, sec;
    int used = 0;
    if (sscanf(s, "%2u:%2u:%2u%n", &h, &m, &sec, &used) == 3 && used > 0) {
        if (h > 23 || m > 59 || sec > 60)
            return -1;
        uint64_t frac = 0;
        const char *rest = s + used;
        /* RMM's parser accepts ':' before the microseconds too. */
        if ((*rest == '.' || *rest == ':') && parse_frac_ns(rest + 1, &frac) != 0)
            return -1;
        if (*rest && *rest != '.' && *rest != ':')
            return -1;
        *ns = ((uint64_t)h * 3600 + m * 60 + sec) * 1000000000ull + frac;
        *is_tod = 1;
        return 0;
    }
    const char *dot = strchr(s, '.');
    char whole[24];
    size_t wl = dot ? (size_t)(dot - s) : strlen(s);
    if (wl == 0 || wl >= sizeof whole)
        return -1;
    memcpy(whole, s, wl);
    whole[wl] = '\0';
    uint64_t secs, frac = 0;
    if (parse_dec(whole, &secs) != 0 || secs > 18000000000ull)
        return -1;
    if (dot && parse_frac_ns(dot + 1, &frac) != 0)
        return -1;
    *ns = secs * 1000000000ull + frac;
    *is_tod = 0;
    return 0;
}

/* Reads the log open in `r` (closed here); `base` names it. */
static tdm_status read_log(tdm_csv r, const char *base, tdm_snap **out, char *err,
                           size_t errlen)
{
    tdm_status st = TDM_OK;
    char meta[256];
    snprintf(meta, sizeof meta, "imported from RMM log %s", base);

    tdm_ibuild *b = NULL;
    int col[C_COUNT], have_header = 0;
    uint64_t day = 0, last_tod = 0;
    int seen_tod = 0;
    st = tdm__ibuild_new(tdm__vendor_name(TDM_VENDOR_CUDA), "rmm", meta, &b); /* RMM is CUDA's */
    while (st == TDM_OK && tdm__csv_next(&r, &st)) {
        if (!have_header) {
            /* Thread and Stream carry nothing we need. */
            int missing = tdm__csv_header(&r, col_names, C_COUNT,
                                          1u << C_THREAD | 1u << C_STREAM, col);
            if (missing >= 0)
                st = tdm__csv_fail(&r, "not an RMM log: the header lacks '%s' "
                                       "(want Thread,Time,Action,Pointer,Size,Stream)",
                                   col_names[missing]);
            have_header = 1;
            continue;
        }
        const char *v[C_COUNT];
        tdm__csv_row(&r, col, C_COUNT, v);
        uint64_t t, ptr, size, stream = 0;
        int tod;
        if (parse_time(v[C_TIME], &t, &tod) != 0) {
            st = tdm__csv_fail(&r, "Time '%s' is neither HH:MM:SS.ffffff nor seconds",
                               v[C_TIME]);
            break;
        }
        if (tod) {
            if (seen_tod && t + DAY_NS / 2 < last_tod)
                day += DAY_NS;
            last_tod = t;
            seen_tod = 1;
            t += day;
        }
        if (parse_hex(v[C_POINTER], &ptr) != 0) {
            st = tdm__csv_fail(&r, "Pointer '%s' is not a hex address", v[C_POINTER]);
            break;
        }
        if (parse_dec(v[C_SIZE], &size) != 0) {
            st = tdm__csv_fail(&r, "Size '%s' is not a number", v[C_SIZE]);
            break;
        }
        if (*v[C_STREAM] && parse_hex(v[C_STREAM], &stream) != 0) {
            st = tdm__csv_fail(&r, "Stream '%s' is not a hex handle", v[C_STREAM]);
            break;
        }
        if (strcmp(v[C_ACTION], "allocate") == 0) {
            st = tdm__ibuild_alloc(b, t, 0, ptr, size, stream, 0);
        } else if (strcmp(v[C_ACTION], "free") == 0) {
            st = tdm__ibuild_free(b, t, 0, ptr, size, stream);
        } else if (strcmp(v[C_ACTION], "allocate failure") == 0) {
            tdm_event ev = {.time_ns = t, .size = size, .requested = size,
                            .stream = stream, .device = 0,
                            .action = TDM_ACTION_OOM};
            st = tdm__ibuild_event(b, &ev);
        } else {
            st = tdm__csv_fail(&r, "unknown Action '%s' (want allocate, free or "
                                   "allocate failure)", v[C_ACTION]);
        }
    }
    if (st == TDM_OK && !have_header)
        st = tdm__csv_fail(&r, "empty file: no RMM log header");
    st = tdm__csv_close(&r, st);
    if (st == TDM_OK) {
        st = tdm__ibuild_finish(b, out);
        b = NULL;
    }
    tdm__ibuild_abort(b);
    if (st == TDM_HOST_OUT_OF_MEMORY && err && errlen)
        snprintf(err, errlen, "%s", tdm_strerror(st));
    return st;
}

tdm_status tdm__import_rmm_csv(const char *path, tdm_snap **out, char *err,
                               size_t errlen)
{
    *out = NULL;
    tdm_csv r;
    tdm_status st = tdm__csv_open(&r, path, TDM_CSV_TRIM, err, errlen);
    if (st != TDM_OK)
        return st;
    const char *base = strrchr(path, '/');
    return read_log(r, base ? base + 1 : path, out, err, errlen);
}

tdm_status tdm__import_rmm_csv_buffer(const void *data, size_t len, const char *source,
                                      tdm_snap **out, char *err, size_t errlen)
{
    *out = NULL;
    tdm_csv r;
    tdm_status st = tdm__csv_open_buffer(&r, data, len, TDM_CSV_TRIM, err, errlen);
    if (st != TDM_OK)
        return st;
    return read_log(r, source ? source : "", out, err, errlen);
}

int tdm__import_rmm_sniff(const unsigned char *head, size_t len)
{
    static const char want[] = "Thread,Time,Action,Pointer,Size,Stream";
    size_t i = 0;
    if (len >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF)
        i = 3; /* a UTF-8 byte order mark */
    return len - i >= sizeof want - 1 && memcmp(head + i, want, sizeof want - 1) == 0;
}
