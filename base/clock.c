/* base/clock.c: CLOCK_REALTIME in ns, cheap on the hot path.
 *
 * State: one anchor {tsc, ns, mult} behind a seqlock (all atomics), written
 * only by the thread that wins `updating`.  Readers never wait: a reader
 * that sees the anchor mid-update falls back to clock_gettime.
 *
 * mult is ns per tick in 32.32 fixed point, measured over the span between
 * two real readings of CLOCK_REALTIME (the first 2 ms, then each ~100 ms
 * re-anchor), so its error shrinks as the spans grow.  A re-anchor sets
 * the new anchor's ns to the larger of the real clock and the interpolated
 * value, so readings never go backwards; the difference (the error of the
 * previous mult over 100 ms, or an NTP slew of the real clock meanwhile)
 * is microseconds.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "seqlock.h"

/* Re-anchor period: short enough that a rate error or an NTP slew of the
 * real clock (up to 500 ppm) stays within tens of microseconds; one
 * re-anchor costs about five clock_gettime calls. */
#define TDM_CLOCK_SPAN_NS 100000000u

/* The anchor and the method (clock.h: read inline on the hot path). */
tdm__clock_shared tdm__clock_state;
#define ANCHOR tdm__clock_state.anchor

static _Atomic int updating;
/* A rate re-anchoring refused (far from the one in use); a second
 * measurement agreeing with it means the old rate was wrong, not a step. */
static uint64_t refused_rate; /* guarded by `updating` */
static _Atomic int initialized;

uint64_t tdm__clock_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A (tsc, ns) pair read as close together as we can: of a few tries, the
 * one whose two tsc reads around clock_gettime are nearest (a try that was
 * preempted is wide), with the tsc taken halfway. */
static void real_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best_width = UINT64_MAX;
    *tsc = *ns = 0; /* always replaced: b - a < UINT64_MAX */
    for (int i = 0; i < 5; i++) {
        uint64_t a = tdm__clock_tsc();
        uint64_t n = tdm__clock_real_ns();
        uint64_t b = tdm__clock_tsc();
        if (b - a < best_width) {
            best_width = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

static int kernel_uses_tsc(void)
{
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    char buf[32] = {0};
    if (!f)
        return 0;
    int ok = fgets(buf, sizeof buf, f) && strncmp(buf, "tsc", 3) == 0 &&
             (buf[3] == '\n' || buf[3] == '\0');
    fclose(f);
    return ok;
}

static void publish(uint64_t tsc, uint64_t ns, uint64_t mult, uint64_t span,
                    uint64_t rtsc, uint64_t rns, uint64_t rate)
{
    uint64_t s = atomic_load_explicit(&ANCHOR.seq, memory_order_relaxed);
    atomic_store_explicit(&ANCHOR.seq, s + 1, memory_order_relaxed);
    TDM_SEQ_FENCE_RELEASE();
    atomic_store_explicit(&ANCHOR.tsc, tsc, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.ns, ns, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.mult, mult, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.span, span, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.real_tsc, rtsc, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.real_ns, rns, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.rate, rate, TDM_SEQ_DATA_STORE);
    atomic_store_explicit(&ANCHOR.seq, s + 2, memory_order_release);
}

/* ns per tick in 32.32 from two real readings; 0 if unusable. */
static uint64_t measure_mult(uint64_t t0, uint64_t n0, uint64_t t1, uint64_t n1)
{
    if (t1 <= t0 || n1 <= n0)
        return 0;
    return (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
}

void tdm__clock_init(void)
{
    if (atomic_exchange(&initialized, 1))
        return;
    if (!TDM_HAVE_TSC || !kernel_uses_tsc())
        return;
    uint64_t t0, n0, t1, n1;
    real_pair(&t0, &n0);
    do { /* ~2 ms: long enough for a first mult within ~20 ppm */
        real_pair(&t1, &n1);
    } while (n1 - n0 < 2000000);
    uint64_t mult = measure_mult(t0, n0, t1, n1);
    if (mult == 0)
        return;
    uint64_t span = (uint64_t)(((unsigned __int128)TDM_CLOCK_SPAN_NS << 32) / mult);
    publish(t1, n1, mult, span, t1, n1, mult);
    atomic_store(&tdm__clock_state.use_tsc, 1);
}

/* Re-anchors at the current tick, if no other thread is doing it (clock.h).
 * `now_interp` is the interpolated time the caller computed. */
__attribute__((noinline)) uint64_t tdm__clock_reanchor(uint64_t now_interp)
{
    if (atomic_exchange_explicit(&updating, 1, memory_order_acquire))
        return now_interp;
    uint64_t rtsc = atomic_load_explicit(&ANCHOR.real_tsc, memory_order_relaxed);
    uint64_t rns = atomic_load_explicit(&ANCHOR.real_ns, memory_order_relaxed);
    uint64_t old_rate = atomic_load_explicit(&ANCHOR.rate, memory_order_relaxed);
    uint64_t t, n;
    real_pair(&t, &n);
    /* The rate over the whole span since the last real reading (about a
     * second, so a reading error of a microsecond is a ppm).  A clock step
     * (settimeofday, suspend) shows as a rate far off: keep the old one. */
    uint64_t rate = measure_mult(rtsc, rns, t, n);
    if (rate == 0) {
        rate = old_rate;
    } else if (rate > old_rate + old_rate / 100 || rate < old_rate - old_rate / 100) {
        uint64_t r = refused_rate;
        int confirmed = r && rate < r + r / 1000 && rate > r - r / 1000;
        refused_rate = confirmed ? 0 : rate;
        if (!confirmed)
            rate = old_rate;
    } else {
        refused_rate = 0;
    }
    uint64_t span = (uint64_t)(((unsigned __int128)TDM_CLOCK_SPAN_NS << 32) / rate);
    uint64_t ns = n, mult = rate;
    if (now_interp > n) {
        /* Ahead of the real clock: never step back; run slower until the
         * next anchor to give back the lead, by at most 0.1% (1 ms/s). */
        uint64_t lead = now_interp - n;
        uint64_t max_slew = TDM_CLOCK_SPAN_NS / 1000; /* 0.1% of a span */
        uint64_t slew = lead < max_slew ? lead : max_slew;
        ns = now_interp;
        mult = rate - (uint64_t)(((unsigned __int128)rate * slew) / TDM_CLOCK_SPAN_NS);
    }
    publish(t, ns, mult, span, t, n, rate);
    atomic_store_explicit(&updating, 0, memory_order_release);
    return now_interp;
}

int tdm__clock_uses_tsc(void) { return atomic_load(&tdm__clock_state.use_tsc); }

void tdm__clock_force_tsc(int on)
{
    if (!on) {
        atomic_store(&tdm__clock_state.use_tsc, 0);
        return;
    }
    tdm__clock_init();
    if (atomic_load(&ANCHOR.mult))
        atomic_store(&tdm__clock_state.use_tsc, 1);
}
