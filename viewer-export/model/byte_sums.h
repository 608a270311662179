/* viewer-export/model/byte_sums.h: sums and differences of byte counts
 * that saturate instead of overflowing.  A snapshot's event sizes are
 * any 64-bit value the file holds (its checksums say only that the bytes
 * arrived as written), so two live blocks of 2^63-1 bytes must add to the
 * largest count, never wrap negative (signed overflow is undefined).
 * Running totals (allocs add, frees take away) are kept wide, 128 bits,
 * which no sum of 2^64 sizes overflows, and clamped when shown: a
 * saturated total would not come back to zero when its blocks are freed.
 * Header-only, no state. */
#ifndef TDM_VIEWER_BYTE_SUMS_H
#define TDM_VIEWER_BYTE_SUMS_H

#include <stdint.h>

/* A size as a signed count: sizes past INT64_MAX count as INT64_MAX. */
static inline int64_t tdm__bytes_signed(uint64_t size)
{
    return size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
}

static inline int64_t tdm__bytes_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t tdm__bytes_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* A running total of byte counts, and its value as a count. */
__extension__ typedef __int128 tdm__bytes_wide;

static inline int64_t tdm__bytes_clamp(tdm__bytes_wide v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

#endif
