"""tests/gpu/test_compare_categories.py: compare_categories.py (run.sh's
"torch categories vs profiler") on made-up timelines where the two
mistakes the row once had change the verdict: the profiler's timeline is
in microseconds, and tidemark's side must be clipped to the profiler's
window (a tensor alive long after profiling stopped, as the cuBLAS
workspace is, would otherwise outweigh everything).  Run by ctest as
gpu.compare_categories; exits 1 on a wrong figure."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_categories as cc  # noqa: E402

BASE = 1_796_000_000_000_000_000  # realtime ns, as tidemark records
MS = 1_000_000


def model(window_end):
    # parameter: made before profiling, never freed; activation: 2..3 ms
    return {"snapshot": {"window_end_ns": window_end},
            "allocations": {"device": [0, 0, 1],
                            "size": [100, 100, 5000],
                            "alloc_time_ns": [BASE + MS // 2, BASE + 2 * MS, BASE + MS],
                            "free_time_ns": [None, BASE + 3 * MS, None],
                            "category": ["parameter", "activation", "parameter"]}}


def with_uncategorized(m):
    # one more allocation outside every PyTorch range: no category
    a = m["allocations"]
    for k, v in (("device", 0), ("size", 0), ("alloc_time_ns", BASE + MS),
                 ("free_time_ns", None), ("category", None)):
        a[k] = a[k] + [v]
    return m


def profiler(times_us, window_ns):
    return {"time_us": times_us, "window_ns": window_ns,
            "bytes": {"parameter": [100, 100, 100], "activation": [0, 100, 0]}}


failures = []


def expect(what, got, lo, hi):
    ok = lo <= got <= hi
    print("%-60s %6.1f  %s" % (what, got, "ok" if ok else "WRONG (want %g..%g)" % (lo, hi)))
    if not ok:
        failures.append(what)


# The profiler's window is 1..3 ms; the process lives 100 s longer.
us = [(BASE + k * MS) // 1000 for k in (1, 2, 3)]
m = model(BASE + 100_000 * MS)
p = profiler(us, [BASE, BASE + 4 * MS])
agree, mine, theirs, (t0, t1, why) = cc.agreement(m, p)
expect("clipped to the profiler's window: same shares", agree, 99.9, 100)
expect("  window start (ns) is the first timeline point", t0 - BASE, MS, MS)
expect("  window end (ns) is the last timeline point", t1 - BASE, 3 * MS, 3 * MS)
expect("  device 1 left out: parameter share 2/3", 100 * mine["parameter"], 66.6, 66.7)

# What the row computed before: tidemark's side to window_end_ns, the
# profiler's over its own points.  The scenario must tell the two apart.
a = m["allocations"]
old = {}
for i in range(2):
    t1_old = a["free_time_ns"][i] or m["snapshot"]["window_end_ns"]
    old[a["category"][i]] = old.get(a["category"][i], 0) + a["size"][i] * (t1_old - a["alloc_time_ns"][i])
s_old = cc.shares(old)
expect("unclipped (the old reading) disagrees", 100 * sum(min(s_old.get(c, 0), theirs.get(c, 0)) for c in theirs), 0, 80)

# A profiler clock that is not the realtime one: window_ns is used.
p2 = profiler([1000, 2000, 3000], [BASE + MS, BASE + 3 * MS])
agree2, _, _, (t0, t1, why) = cc.agreement(m, p2)
expect("other clock: clipped to window_ns instead", agree2, 99.9, 100)
if "window_ns" not in why:
    failures.append("other clock: the reason names window_ns (%s)" % why)

# The command line: agreement on stdout, shares on stderr.
with tempfile.TemporaryDirectory() as d:
    mp, pp = os.path.join(d, "m.json"), os.path.join(d, "p.json")
    json.dump(with_uncategorized(m), open(mp, "w"))
    json.dump(p, open(pp, "w"))
    r = subprocess.run([sys.executable, cc.__file__, mp, pp], capture_output=True, text=True)
    expect("command line prints the agreement", float(r.stdout.strip() or -1), 99.9, 100)
    if "tidemark activation=33% parameter=67%" not in r.stderr:
        failures.append("command line: shares on stderr (%r)" % r.stderr)

if failures:
    print("FAIL: " + "; ".join(failures))
    sys.exit(1)
print("ok")
