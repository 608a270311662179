/* viewer-export/model/format_size.h: how the `tidemark` tool writes and reads
 * byte counts and durations for people ("1.50 GiB", "+12.345 s",
 * "12GiB").  Pure functions, no state, no locks. */
#ifndef TDM_VIEWER_FORMAT_SIZE_H
#define TDM_VIEWER_FORMAT_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

/* Longest output of the formatters below, with its NUL. */
#define TDM_FMT_LEN 64

/* "512 B", "1.00 KiB", "12.34 MiB", "1.50 GiB", "2.00 TiB": binary
 * units, two decimals, the largest unit that keeps the number >= 1. */
const char *tdm__fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* The same for signed values ("-1.00 KiB"). */
const char *tdm__fmt_sbytes(char *buf, size_t len, int64_t bytes);
/* tdm__fmt_bytes followed by the exact count: "1.50 GiB (1610612736 B)";
 * just "512 B" when the two would say the same. */
const char *tdm__fmt_bytes_exact(char *buf, size_t len, uint64_t bytes);
/* An offset in ns as "+0.000123 s", "+12.345 s", "+2 min 03.456 s",
 * "+1 h 02 min 03 s"; negative offsets get "-". */
const char *tdm__fmt_offset(char *buf, size_t len, int64_t ns);
/* A span of `us` microseconds in ns for tdm__fmt_offset, INT64_MAX past
 * what an int64 holds (a file's dump time 2^56 µs after its start: the
 * product overflowed). */
static inline int64_t tdm__fmt_us_to_ns(uint64_t us)
{
    return us > (uint64_t)INT64_MAX / 1000 ? INT64_MAX : (int64_t)(us * 1000);
}
/* A time in µs since the epoch as "2026-03-01 12:00:00 UTC". */
const char *tdm__fmt_utc(char *buf, size_t len, uint64_t us);

/* Parses "123", "4096B", "1.5GiB", "12G", "512 KiB", "3MB" (K/M/G/T and
 * KB/MB/.. and KiB/MiB/.. all binary, as TIDEMARK_CONF reads them) into
 * bytes.  TDM_INVALID_ARGUMENT for anything else or on overflow. */
tdm_status tdm__parse_size(const char *text, uint64_t *bytes);

/* A share of a whole as every command and the viewer write it: "12.3%",
 * "<0.1%" for a nonzero part under 0.05%, "0.0%" for none, "100.0%";
 * "-" when `whole` is 0. */
const char *tdm__fmt_share(char *buf, size_t len, double part, double whole);

/* Parses option `opt`'s `arg` as a whole number up to `max` into *v;
 * returns -1 after printing why not ("tidemark CMD: ..."). */
int tdm__parse_count(const char *cmd, const char *opt, const char *arg,
                     unsigned long max, unsigned long *v);

#endif
