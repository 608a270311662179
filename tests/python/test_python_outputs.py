"""tests/python/test_python_outputs.py: Python frames (stacks=all) as the
tidemark commands show them, from a real snapshot of a /usr/bin/python3
program (pystacks_child.py, scenario nested):

- summary: the site named by the script's functions with their lines,
  innermost user frame first, in call order (alloc, inner, middle, outer);
  with --native-frames the native frames merged in: the
  ctypes call's (ffi_call) inside the Python frames, none of the
  evaluation loop left;
- the memory_viz pickle: the allocation's frames carry filename (the .py
  path), line and name as PyTorch writes Python frames, in the same order;
- the flame graph: "alloc (pystacks_child.py:19)" folded root first;
- diff of two recordings of the same program: no site changed.

Environment: LIBTIDEMARK, TIDEMARK (the command-line tool),
TDM_SOURCE_DIR."""
import os
import pickle
import re
import subprocess
import sys
import tempfile

from child_env import CHILD, frame_pointers_only, marked_lines, sanitizer_runtime  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
LINES = marked_lines()
CALLS = ["alloc", "inner", "middle", "outer"]
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def record(out):
    env = dict(os.environ, TIDEMARK_LIB=os.environ["LIBTIDEMARK"], TIDEMARK_CONF="")
    san = sanitizer_runtime()
    if san:
        env["LD_PRELOAD"] = san
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    r = subprocess.run([sys.executable, CHILD, "nested", out, "all"], capture_output=True,
                       text=True, env=env, timeout=120)
    if r.returncode != 0 or not os.path.exists(out):
        fail("recording failed (exit %d): %s" % (r.returncode, r.stderr[-2000:]))
        sys.exit(1)


def tidemark(*args):
    r = subprocess.run([TIDEMARK] + list(args), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("tidemark %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-2000:]))
    return r.stdout


def site_frames(summary):
    """The frames of the summary's first site at the peak."""
    if "innermost frames" not in summary:
        fail("summary lists no site: %s" % summary[-1500:])
        return []
    body = summary.split("innermost frames\n", 1)[1].split("\n\n", 1)[0]
    lines = [l.strip() for l in body.splitlines() if l.strip()]
    if lines:
        lines[0] = re.sub(r"^1 +1000 B +100\.0% +1 +", "", lines[0])
    return lines


def want(name):
    return "%s (pystacks_child.py:%d)" % (name, LINES[name])


with tempfile.TemporaryDirectory() as tmp:
    a, b = os.path.join(tmp, "a.tdm"), os.path.join(tmp, "b.tdm")
    record(a)
    record(b)

    # summary: the site by its Python frames, innermost user frame first
    site = site_frames(tidemark("summary", "--frames", "8", a))
    if site[:len(CALLS)] != [want(c) for c in CALLS]:
        fail("summary site frames %s, want %s" % (site, [want(c) for c in CALLS]))
    if any("ffi_call" in f or "_PyEval" in f for f in site):
        fail("summary shows native frames by default: %s" % site)

    # --native-frames: merged, ffi_call inside the Python frames
    frames = site_frames(tidemark("summary", "--frames", "40", "--native-frames", a))
    idx = [next((i for i, f in enumerate(frames) if f == want(c)), -1) for c in CALLS]
    if -1 in idx or idx != sorted(idx):
        fail("--native-frames: Python frames missing or out of order: %s" % frames)
    elif not frame_pointers_only() and not any("ffi_call" in f for f in frames[:idx[0]]):
        fail("--native-frames: no ffi_call inside the Python frames: %s" % frames)
    if any("_PyEval_EvalFrameDefault" in f for f in frames):
        fail("--native-frames: an evaluation-loop frame left: %s" % frames)

    # the memory_viz pickle
    pk = os.path.join(tmp, "a.pickle")
    tidemark("export", "--format", "pytorch", a, "-o", pk)
    snap = pickle.load(open(pk, "rb"))
    allocs = [t for dev in snap["device_traces"] for t in dev
              if t["action"] == "alloc" and t["size"] == 1000]
    if not allocs:
        fail("pickle: no alloc of 1000 bytes")
    else:
        py = [(f["name"], f["line"]) for f in allocs[0]["frames"]
              if f["filename"].endswith("/pystacks_child.py")]
        if py[:len(CALLS)] != [(c, LINES[c]) for c in CALLS]:
            fail("pickle Python frames %s" % py)
        bad = [f for f in allocs[0]["frames"] if f["filename"].endswith(".py") and
               not os.path.isabs(f["filename"])]
        if bad:
            fail("pickle: Python frames without their path: %s" % bad)

    # the flame graph, root first
    folded = tidemark("export", "--format", "flamegraph", a, "-o", "-")
    chain = ";".join(want(c) for c in reversed(CALLS))
    if chain not in folded:
        fail("flame graph lacks %s: %s" % (chain, folded[:600]))

    # diff of two recordings of the same program
    out = tidemark("diff", a, b)
    if "no allocation site changed" not in out:
        fail("diff of two runs of the same program: %s" % out[-1500:])

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("ok: Python frames in summary, pickle, flame graph and diff")
