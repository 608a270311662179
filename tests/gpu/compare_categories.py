"""tests/gpu/compare_categories.py: bytes x time per category, tidemark's
against PyTorch's profiler, for run.sh's row "torch categories vs profiler".

    python3 compare_categories.py MODEL.json PROFILER.json

MODEL.json is `tidemark export -f json` of the merged .tdm; PROFILER.json
is what torch_train.py's `profiled` mode wrote:
    {"time_us": [...], "bytes": {category: [...]}, "window_ns": [t0, t1]}
time_us is the profiler's memory timeline (_coalesce_timeline converts its
nanoseconds to microseconds); window_ns is time.time_ns() as the profiled
block began and ended.  tidemark's times are nanoseconds of the same clock
(CLOCK_REALTIME).

Both sides are integrated over one window, the profiler's: its first and
last timeline points, in nanoseconds.  tidemark's side is clipped to it:
an allocation alive across either edge (the cuBLAS workspace lives until
exit) counts only for its part inside.
If the profiler's points do not fall inside window_ns (a clock other than
the realtime one), window_ns is the window instead, and stderr says so.

Prints the agreement (sum over categories of the smaller of the two
shares, in percent, 100 when both split the same way) on stdout, and each
side's shares and the window on stderr.
"""
import json
import sys

# A profiler timeline point may come up to this long before the block began
# or after it ended (its events are stamped by another thread).
EDGE_NS = 5 * 10**9


def window(prof):
    times = [t * 1000 for t in prof["time_us"]]
    w0, w1 = prof.get("window_ns") or (None, None)
    if not times:
        return w0, w1, "window_ns (the profiler has no timeline)"
    t0, t1 = times[0], times[-1]
    if w0 is None or (w0 - EDGE_NS <= t0 and t1 <= w1 + EDGE_NS):
        return t0, t1, "the profiler's timeline"
    return w0, w1, "window_ns (the profiler's clock is not the realtime one)"


def tidemark_side(model, t0, t1, device=0):
    a = model["allocations"]
    end = model["snapshot"]["window_end_ns"]
    out = {}
    for i, dev in enumerate(a["device"]):
        start = a["alloc_time_ns"][i]
        if dev != device or start is None:
            continue
        stop = a["free_time_ns"][i]
        stop = end if stop is None else stop
        span = min(stop, t1) - max(start, t0)
        if span > 0:
            c = a["category"][i]
            out[c] = out.get(c, 0) + a["size"][i] * span
    return out


def profiler_side(prof):
    # Each point's bytes hold until the next point.  The timeline spans the
    # profiler's window by definition (on its own clock, whichever it is),
    # so it needs no clipping.
    times = [t * 1000 for t in prof["time_us"]]
    return {c: sum(v[k] * (times[k + 1] - times[k]) for k in range(len(times) - 1))
            for c, v in prof["bytes"].items()}


def shares(d):
    total = sum(max(v, 0) for v in d.values()) or 1
    return {k: max(v, 0) / total for k, v in d.items()}


def agreement(model, prof):
    t0, t1, why = window(prof)
    mine = shares(tidemark_side(model, t0, t1))
    theirs = shares(profiler_side(prof))
    agree = sum(min(mine.get(c, 0), theirs.get(c, 0)) for c in set(mine) | set(theirs))
    return 100 * agree, mine, theirs, (t0, t1, why)


def main():
    model = json.load(open(sys.argv[1]))
    prof = json.load(open(sys.argv[2]))
    agree, mine, theirs, (t0, t1, why) = agreement(model, prof)
    print("%.1f" % agree)
    # (an allocation outside every PyTorch range may have no category: None)
    fmt = lambda s: " ".join("%s=%.0f%%" % (k, 100 * v)
                             for k, v in sorted(s.items(), key=lambda kv: str(kv[0])) if v)
    print("window %.3f s, from %s" % ((t1 - t0) / 1e9, why), file=sys.stderr)
    print("tidemark " + fmt(mine), file=sys.stderr)
    print("profiler " + fmt(theirs), file=sys.stderr)


if __name__ == "__main__":
    main()
