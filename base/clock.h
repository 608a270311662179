/* base/clock.h: the recorder's time base: CLOCK_REALTIME nanoseconds
 * (so ranks on different hosts line up within clock skew), read cheaply.
 *
 * Where the kernel itself keeps time with the TSC (clocksource "tsc": the
 * counter is invariant and synchronized across CPUs), tdm__clock_ns()
 * interpolates from the TSC between anchors taken with clock_gettime, and
 * re-anchors every ~100 ms, so it tracks CLOCK_REALTIME (NTP
 * included) to within microseconds and never runs backwards.  Anywhere
 * else it is clock_gettime(CLOCK_REALTIME). */
#ifndef TDM_BASE_CLOCK_H
#define TDM_BASE_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "seqlock.h"
#include "visibility.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#define TDM_HAVE_TSC 1
static inline uint64_t tdm__clock_tsc(void) { return __rdtsc(); }
#else
#define TDM_HAVE_TSC 0
static inline uint64_t tdm__clock_tsc(void) { return 0; }
#endif

/* The anchor, behind a seqlock, and the method; written by clock.c only.
 * Visible here so that a reading is inline on the recorder's hot path
 * (a call into clock.c cost each recorded event ~10 instructions). */
typedef struct tdm__clock_shared {
    struct {
        _Atomic uint64_t seq;      /* odd while being written */
        _Atomic uint64_t tsc;      /* ticks at the anchor */
        _Atomic uint64_t ns;       /* CLOCK_REALTIME ns given to that tick */
        _Atomic uint64_t mult;     /* ns per tick, 32.32 fixed point */
        _Atomic uint64_t span;     /* ticks after which to re-anchor (~100 ms) */
        _Atomic uint64_t real_tsc; /* last real reading, for measuring mult */
        _Atomic uint64_t real_ns;
        _Atomic uint64_t rate;     /* measured ns per tick (32.32); mult is this
                                    * rate slewed to pull back a lead */
    } anchor;
    _Atomic int use_tsc;           /* 0 until tdm__clock_init decides */
} tdm__clock_shared;

extern tdm__clock_shared tdm__clock_state TDM__HIDDEN;

/* Decides the method and takes the first anchors (about 2 ms the first
 * time).  Idempotent and thread-safe; tdm__clock_ns works before it too. */
void tdm__clock_init(void);
/* clock_gettime(CLOCK_REALTIME) in ns. */
uint64_t tdm__clock_real_ns(void);
/* Re-anchors (if no other thread is at it) once a reading finds the
 * anchor a span old; returns the interpolated `now_interp`. */
uint64_t tdm__clock_reanchor(uint64_t now_interp);

/* CLOCK_REALTIME now, in ns since the Unix epoch. */
static inline uint64_t tdm__clock_ns(void)
{
    tdm__clock_shared *c = &tdm__clock_state;
    if (__builtin_expect(!atomic_load_explicit(&c->use_tsc, memory_order_relaxed), 0))
        return tdm__clock_real_ns();
    uint64_t s = atomic_load_explicit(&c->anchor.seq, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&c->anchor.tsc, TDM_SEQ_DATA_LOAD);
    uint64_t n = atomic_load_explicit(&c->anchor.ns, TDM_SEQ_DATA_LOAD);
    uint64_t m = atomic_load_explicit(&c->anchor.mult, TDM_SEQ_DATA_LOAD);
    uint64_t span = atomic_load_explicit(&c->anchor.span, TDM_SEQ_DATA_LOAD);
    TDM_SEQ_FENCE_ACQUIRE();
    if (__builtin_expect((s & 1) || atomic_load_explicit(&c->anchor.seq, memory_order_relaxed) != s,
                         0))
        return tdm__clock_real_ns();
    uint64_t now = tdm__clock_tsc();
    uint64_t d = __builtin_expect(now > t, 1) ? now - t : 0;
    uint64_t ns = n + (uint64_t)(((unsigned __int128)d * m) >> 32);
    if (__builtin_expect(d > span, 0))
        return tdm__clock_reanchor(ns);
    return ns;
}
/* Nonzero when the TSC path is in use (for tests and benchmarks). */
int tdm__clock_uses_tsc(void);
/* Tests: forces clock_gettime (0) or re-enables the TSC path (1). */
void tdm__clock_force_tsc(int on);

#endif
