"""bench/record_overhead_py.py: what Python frames add to recording.

Run with the interpreter to measure (e.g. /usr/bin/python3) and
TIDEMARK_LIB naming a build's libtidemark.so.  From a Python stack DEPTH
deep (default 20), calls tdm_malloc + tdm_free through ctypes, ROUNDS
rounds of N pairs (best round kept), under stacks=none, native, python
and all (context=all: a stack is captured at the alloc and at the free).
Prints ns per pair and, against stacks=none, ns per captured stack.
MAP_LEVELS (default 0) of the calls go through map(), each adding the
interpreter's native frames (about 6) as a C extension between Python
frames does: 2 levels make the native stack about 30 frames deep.

    record_overhead_py.py [N] [DEPTH] [ROUNDS] [MAP_LEVELS]
"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tidemark  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 7
MAP_LEVELS = int(sys.argv[4]) if len(sys.argv) > 4 else 0
# A ring that wraps within the warm-up, so rounds measure steady state:
# its pages already touched, as in a long run, not first-touch faults.
RING = int(os.environ.get("RING", 1 << 14))
lib = tidemark.library()
malloc, free = lib.tdm_malloc, lib.tdm_free
p = ctypes.c_void_p()
ref = ctypes.byref(p)
size = ctypes.c_size_t(4096)


def pairs(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        malloc(ref, size, 0, None)
        free(p)
    return time.perf_counter_ns() - t


def through_map(k, n):
    # a call through a builtin: the interpreter's C frames between Python ones
    return list(map(lambda _: through_map(k - 1, n), [0]))[0] if k > 0 else pairs(n)


def at_depth(d, n):
    # plain calls: Python-to-Python calls add no native frame in 3.11+
    return at_depth(d - 1, n) if d > 1 else through_map(MAP_LEVELS, n)


# (stacks, context, stacks captured per pair): context=all captures a stack
# at the alloc and at the free, as PyTorch's context="all" does;
# context=alloc only at the alloc (PyTorch's "alloc").
CONFIGS = [("none", "all", 0), ("native", "all", 2), ("python", "all", 2),
           ("all", "all", 2), ("all", "alloc", 1)]
results = {}
for stacks, context, _ in CONFIGS:
    tidemark.record_memory_history(stacks=stacks, context=context,
                                   max_entries=RING, clear_history=True)
    at_depth(DEPTH, 1000)  # warm up: stacks interned, code objects copied
    best = min(at_depth(DEPTH, N) for _ in range(ROUNDS))
    results[stacks, context] = best / N

none = results["none", "all"]
print("Python %s, %d Python frames deep, %d levels through map(), best of %d rounds of %d pairs"
      % (sys.version.split()[0], DEPTH + 1 + 2 * MAP_LEVELS, MAP_LEVELS, ROUNDS, N))
print("| stacks | context | ns per alloc+free pair (ctypes calls included) "
      "| ns per pair over stacks=none | ns per captured stack |")
print("|---|---|---:|---:|---:|")
for stacks, context, per_pair in CONFIGS:
    v = results[stacks, context]
    over = "" if not per_pair else "%.0f" % (v - none)
    each = "" if not per_pair else "%.0f" % ((v - none) / per_pair)
    print("| %s | %s | %.0f | %s | %s |" % (stacks, context, v, over, each))
print("python frames over native capture, per stack: %.0f ns (all - native)"
      % ((results["all", "all"] - results["native", "all"]) / 2))
