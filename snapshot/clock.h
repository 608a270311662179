/* snapshot/clock.h: the recorder's time base: CLOCK_REALTIME nanoseconds
 * (so ranks on different hosts line up within clock skew), read cheaply.
 *
 * Where the kernel itself keeps time with the TSC (clocksource "tsc": the
 * counter is invariant and synchronized across CPUs), tdm__clock_ns()
 * interpolates from the TSC between anchors taken with clock_gettime, and
 * re-anchors every ~100 ms, so it tracks CLOCK_REALTIME (NTP
 * included) to within microseconds and never runs backwards.  Anywhere
 * else it is clock_gettime(CLOCK_REALTIME). */
#ifndef TDM_SNAPSHOT_CLOCK_H
#define TDM_SNAPSHOT_CLOCK_H

#include <stdint.h>

/* Decides the method and takes the first anchors (about 2 ms the first
 * time).  Idempotent and thread-safe; tdm__clock_ns works before it too. */
void tdm__clock_init(void);
/* CLOCK_REALTIME now, in ns since the Unix epoch. */
uint64_t tdm__clock_ns(void);
/* Nonzero when the TSC path is in use (for tests and benchmarks). */
int tdm__clock_uses_tsc(void);
/* Tests: forces clock_gettime (0) or re-enables the TSC path (1). */
void tdm__clock_force_tsc(int on);

#endif
