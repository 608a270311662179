/* viewer-export/model/format_size.c: byte counts, offsets and dates written for
 * people, and sizes read from the command line (see format_size.h).
 * Pure functions: no state, no locks. */
#include "format_size.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

const char *tdm__fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes;
    unsigned u = 0;
    /* Move up a unit also when two decimals would round to 1024.00. */
    while (u + 1 < sizeof units / sizeof units[0] && v >= 1023.995) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

const char *tdm__fmt_sbytes(char *buf, size_t len, int64_t bytes)
{
    if (bytes >= 0)
        return tdm__fmt_bytes(buf, len, (uint64_t)bytes);
    char tmp[TDM_FMT_LEN];
    tdm__fmt_bytes(tmp, sizeof tmp, (uint64_t)0 - (uint64_t)bytes);
    snprintf(buf, len, "-%s", tmp);
    return buf;
}

const char *tdm__fmt_bytes_exact(char *buf, size_t len, uint64_t bytes)
{
    char tmp[TDM_FMT_LEN];
    tdm__fmt_bytes(tmp, sizeof tmp, bytes);
    if (bytes < 1024)
        snprintf(buf, len, "%s", tmp);
    else
        snprintf(buf, len, "%s (%" PRIu64 " B)", tmp, bytes);
    return buf;
}

const char *tdm__fmt_offset(char *buf, size_t len, int64_t ns)
{
    const char *sign = ns < 0 ? "-" : "+";
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    uint64_t s = a / 1000000000u, frac_ns = a % 1000000000u;
    if (s < 1 && a != 0 && a < 1000000u) /* below 1 ms: keep µs visible */
        snprintf(buf, len, "%s0.%06" PRIu64 " s", sign, frac_ns / 1000u);
    else if (s < 60)
        snprintf(buf, len, "%s%" PRIu64 ".%03" PRIu64 " s", sign, s, frac_ns / 1000000u);
    else if (s < 3600)
        snprintf(buf, len, "%s%" PRIu64 " min %02" PRIu64 ".%03" PRIu64 " s", sign,
                 s / 60, s % 60, frac_ns / 1000000u);
    else
        snprintf(buf, len, "%s%" PRIu64 " h %02" PRIu64 " min %02" PRIu64 " s", sign,
                 s / 3600, s / 60 % 60, s % 60);
    return buf;
}

const char *tdm__fmt_utc(char *buf, size_t len, uint64_t us)
{
    time_t t = (time_t)(us / 1000000u);
    struct tm tm;
    if (us == 0 || !gmtime_r(&t, &tm) ||
        strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, len, "unknown");
    return buf;
}

tdm_status tdm__parse_size(const char *text, uint64_t *bytes)
{
    if (!text || !bytes)
        return TDM_INVALID_ARGUMENT;
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return TDM_INVALID_ARGUMENT; /* no sign, no "inf", no "nan" */
    errno = 0;
    char *end;
    double v = strtod(p, &end);
    if (end == p || errno != 0)
        return TDM_INVALID_ARGUMENT;
    while (isspace((unsigned char)*end))
        end++;
    static const struct { const char *suffix; unsigned shift; } table[] = {
        {"", 0},     {"b", 0},    {"k", 10},   {"kb", 10},  {"kib", 10},
        {"m", 20},   {"mb", 20},  {"mib", 20}, {"g", 30},   {"gb", 30},
        {"gib", 30}, {"t", 40},   {"tb", 40},  {"tib", 40},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcasecmp(end, table[i].suffix) != 0)
            continue;
        double r = ldexp(v, (int)table[i].shift);
        if (table[i].shift == 0 && r != floor(r))
            return TDM_INVALID_ARGUMENT; /* "1.5" bytes */
        r = floor(r + 0.5);
        if (!(r < 18446744073709551616.0)) /* 2^64 */
            return TDM_INVALID_ARGUMENT;
        *bytes = (uint64_t)r;
        return TDM_OK;
    }
    return TDM_INVALID_ARGUMENT;
}

int tdm__parse_count(const char *cmd, const char *opt, const char *arg,
                         unsigned long max, unsigned long *v)
{
    char *end;
    if (arg[0] < '0' || arg[0] > '9' || (*v = strtoul(arg, &end, 10), *end) || *v > max) {
        fprintf(stderr, "tidemark %s: %s needs a whole number up to %lu, not '%s'\n", cmd,
                opt, max, arg);
        return -1;
    }
    return 0;
}

const char *tdm__fmt_share(char *buf, size_t len, double part, double whole)
{
    if (whole == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    double pct = 100.0 * part / whole;
    if (part > 0 && pct < 0.05)
        snprintf(buf, len, "<0.1%%");
    else
        snprintf(buf, len, "%.1f%%", pct);
    return buf;
}
