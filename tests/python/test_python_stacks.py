"""tests/python/test_python_stacks.py: Python frames in tidemark's stacks
(stacks=python and stacks=all), checked in real snapshots of
/usr/bin/python3 programs (pystacks_child.py) read with pyframes_read:
names and line numbers in call order, merged among native frames; a C
thread with native frames only; generators and coroutines; code objects
freed and their addresses reused; a dump at interpreter exit; the preload
library with the fake CUDA runtime; an interpreter version tidemark
cannot read.

Environment: LIBTIDEMARK, READER, CTHREAD_LIB, TDM_SOURCE_DIR; PRELOAD and
FAKE_CUDA_RT/FAKE_CUDA_DRV for the CUDA part (skipped when absent)."""
import os
import re
import subprocess
import sys
import tempfile

from child_env import CHILD, frame_pointers_only, marked_lines, sanitizer_runtime  # noqa: E402

LINES = marked_lines()
FP_ONLY = frame_pointers_only()
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


SAN = sanitizer_runtime()


def run_child(scenario, out, stacks="all", env_extra=None, preload=None):
    env = dict(os.environ)
    env["TIDEMARK_LIB"] = os.environ["LIBTIDEMARK"]
    env.setdefault("TIDEMARK_CONF", "")
    pre = [p for p in (SAN, preload) if p]
    if pre:
        env["LD_PRELOAD"] = ":".join(pre)
    if SAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, CHILD, scenario, out, stacks],
                       capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        fail("%s: child exit %d: %s" % (scenario, r.returncode, r.stderr[-2000:]))
    return r


def events(path):
    r = subprocess.run([os.environ["READER"], path], capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s unreadable: %s" % (path, r.stderr))
        return []
    out = []
    for line in r.stdout.splitlines():
        head, _, rest = line.partition(" ")
        size, _, frames = rest.partition(" ")
        out.append((head, int(size), [f.strip() for f in frames.split(" | ") if f.strip()]))
    return out


def alloc_of(evs, size):
    for action, sz, frames in evs:
        if action == "alloc" and sz == size:
            return frames
    fail("no alloc event of %d bytes" % size)
    return []


def py_frames(frames):
    return [f for f in frames if f.startswith("py:")]


def expect_py(what, frames, want):
    got = py_frames(frames)
    if len(got) < len(want) or not all(g == w or g.startswith(w + ":")
                                       for g, w in zip(got, want)):
        fail("%s: python frames %s, want them to start %s" % (what, got, want))


f = "pystacks_child.py"
NESTED = ["py:alloc:%s:%d" % (f, LINES["alloc"]), "py:inner:%s:%d" % (f, LINES["inner"]),
          "py:middle:%s:%d" % (f, LINES["middle"]), "py:outer:%s:%d" % (f, LINES["outer"])]

with tempfile.TemporaryDirectory() as tmp:
    # stacks=all: Python frames in call order, native frames inside and around
    snap = os.path.join(tmp, "nested.tdm")
    run_child("nested", snap, "all")
    frames = alloc_of(events(snap), 1000)
    expect_py("all", frames, NESTED)
    if frames and not frames[0].startswith("c:"):
        fail("all: innermost frame %s is not native (the ctypes call)" % frames[0])
    if FP_ONLY:
        print("note: frame-pointer unwinding (TSan build): native frames around the "
              "Python ones not checked")
    elif frames and frames[-1].startswith("py:"):
        fail("all: outermost frame is Python; the interpreter's startup frames are missing")
    first_py = next((i for i, x in enumerate(frames) if x.startswith("py:")), None)
    if not FP_ONLY and first_py is not None and not any("ffi_call" in x for x in frames[:first_py]):
        fail("all: ffi_call is not among the native frames inside the Python ones: %s" % frames)
    if any("_PyEval_EvalFrameDefault" in x for x in frames):
        fail("all: an evaluation-loop frame was left in place of its Python frames: %s" % frames)
    print("stacks=all:", " | ".join(frames[:14]))

    # stacks=python: the Python frames alone
    snap = os.path.join(tmp, "python.tdm")
    run_child("nested", snap, "python")
    frames = alloc_of(events(snap), 1000)
    expect_py("python", frames, NESTED)
    if frames and any(not x.startswith("py:") for x in frames):
        fail("python: native frames in %s" % frames)

    # a C thread: native frames only; the Python thread beside it unchanged
    snap = os.path.join(tmp, "cthread.tdm")
    run_child("cthread", snap, "all", {"CTHREAD_LIB": os.environ["CTHREAD_LIB"]})
    evs = events(snap)
    frames = alloc_of(evs, 4000)
    if py_frames(frames) or not any("c_thread_alloc" in x for x in frames):
        fail("C thread: want native frames with c_thread_alloc, got %s" % frames)
    expect_py("after the C thread", alloc_of(evs, 1000), NESTED)
    snap = os.path.join(tmp, "cthread-py.tdm")
    run_child("cthread", snap, "python", {"CTHREAD_LIB": os.environ["CTHREAD_LIB"]})
    frames = alloc_of(events(snap), 4000)
    if py_frames(frames) or not any("c_thread_alloc" in x for x in frames):
        fail("C thread, stacks=python: want its native stack, got %s" % frames)

    # a generator and a coroutine
    snap = os.path.join(tmp, "gen.tdm")
    run_child("gen", snap, "all")
    evs = events(snap)
    for size in (2000, 2001):
        expect_py("generator", alloc_of(evs, size),
                  ["py:alloc:%s:%d" % (f, LINES["alloc"]), "py:gen:%s:%d" % (f, LINES["gen"]),
                   "py:main:%s" % f])
    expect_py("coroutine", alloc_of(evs, 3000),
              ["py:alloc:%s:%d" % (f, LINES["alloc"]), "py:coro:%s:%d" % (f, LINES["coro"]),
               "py:main:%s" % f])

    # code objects freed in a loop: their addresses are reused, names never mixed up
    snap = os.path.join(tmp, "churn.tdm")
    r = run_child("churn", snap, "all")
    reused = int(re.search(r"reused (\d+)", r.stdout).group(1)) if "reused" in r.stdout else 0
    if reused == 0:
        fail("churn: no code object address was reused; the test proves nothing")
    evs = events(snap)
    wrong = 0
    for i in range(300):
        got = py_frames(alloc_of(evs, 10000 + i))
        want = "py:f_%d:dyn_%d.py:%d" % (i, i % 3, i % 7 + 2)
        if len(got) < 2 or got[1] != want:
            wrong += 1
            if wrong < 4:
                fail("churn: f_%d shows as %s" % (i, got[1] if len(got) > 1 else got))
    print("code churn: %d of 300 functions whose code address was reused, %d wrong" % (reused, wrong))

    # a dump at interpreter exit
    snap = os.path.join(tmp, "exit.tdm")
    run_child("exit", snap, "all",
              {"TIDEMARK_CONF": "dump=%s,dump_on=exit,stacks=all" % snap})
    expect_py("dump at exit", alloc_of(events(snap), 1000), NESTED)

    # an interpreter version tidemark cannot read: one line, native stacks
    snap = os.path.join(tmp, "unknown.tdm")
    r = run_child("nested", snap, "all", {"TIDEMARK_TEST_PYTHON_VERSION": "0x0309"})
    said = [x for x in r.stderr.splitlines() if "tidemark" in x]
    if len(said) != 1 or "3.9" not in said[0] or "native only" not in said[0]:
        fail("unknown version: want one line naming 3.9 and native stacks, got %r" % said)
    frames = alloc_of(events(snap), 1000)
    if py_frames(frames) or not (FP_ONLY or any("_PyEval_EvalFrameDefault" in x for x in frames)):
        fail("unknown version: want the native stack unchanged, got %s" % frames)

    # the preload library with the fake CUDA runtime
    if os.environ.get("PRELOAD") and os.environ.get("FAKE_CUDA_RT"):
        snap = os.path.join(tmp, "cuda.tdm")
        run_child("cuda", snap, "all", {
            "TIDEMARK_CONF": "dump=%s,dump_on=exit,stacks=all" % snap,
            "LD_LIBRARY_PATH": os.environ["FAKE_CUDA_RT"] + ":" + os.environ["FAKE_CUDA_DRV"],
        }, preload=os.environ["PRELOAD"])
        frames = alloc_of(events(snap), 5000)
        expect_py("cudaMalloc under the preload library", frames,
                  ["py:main.<locals>.cuda_alloc:%s:%d" % (f, LINES["cuda"]),
                   "py:main:%s:%d" % (f, LINES["cuda_call"])])
        if frames and not frames[0].startswith("c:"):
            fail("cuda: innermost frame %s is not native" % frames[0])
    else:
        print("note: no preload library or fake CUDA runtime; the CUDA part is skipped")

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all ok")
