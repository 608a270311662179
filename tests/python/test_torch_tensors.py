"""tests/python/test_torch_tensors.py: one event per tensor for an
unmodified torch program under `tidemark run` (TIDEMARK_CONF's
torch_tensors; python/tidemark_tensors.py), and how it degrades.

Debian's torch has no CUDA, so a CUDA torch's allocator is simulated by
sim_torch_cuda.py (TIDEMARK_TEST_TORCH_CUDA): torch_train.py's training
loop (real torch.nn on the CPU, phases from tidemark's automatic hooks)
allocates its "device memory" through it.  Checked:

- history (the default): PyTorch's memory history is on before the first
  tensor, and its snapshot, written beside tidemark's as .torch.pickle
  with tidemark's phase and step marks, is merged into the .tdm by
  `tidemark run` (one file), so `tidemark categories` of it gives
  parameters, gradients, optimizer state and activations with at most 10%
  unknown, in forward/backward/optimizer order; also with torch 2.0's
  API (test_torch_merge.py checks the merge itself);
- pluggable: the tensors are in tidemark's own snapshot, categorized the
  same way, and no pickle is written;
- one line and the segment view: a torch whose CUDA started first (both
  modes), torch 1.13 (no trace; no CUDAPluggableAllocator), a torch
  without _record_memory_history;
- nothing at all: the real CPU-only torch (both modes), torch_tensors=off.

Environment: TIDEMARK (the CLI), TDM_SOURCE_DIR.  Skipped (77) without
torch."""
import json
import os
import subprocess
import sys
import tempfile

from child_env import sanitizer_runtime  # noqa: E402

try:
    import torch  # noqa: F401
except ImportError:
    print("no torch for %s (Debian: python3-torch): skipped" % sys.executable)
    sys.exit(77)

SRC = os.environ["TDM_SOURCE_DIR"]
TIDEMARK = os.environ["TIDEMARK"]
HERE = os.path.join(SRC, "tests", "python")
CHILD = os.path.join(HERE, "torch_train.py")
PYDIR = os.path.join(SRC, "python")
SAN = sanitizer_runtime()
SEGMENTS = "tidemark sees PyTorch's segments (reserved memory), not tensors"
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def record(what, conf=None, simulated=True, extra=None, steps=3):
    """Runs torch_train.py under `tidemark run`; (.tdm, .torch.pickle or
    None, tidemark's stderr lines about torch)."""
    env = dict(os.environ)
    for k in ("TIDEMARK_CONF", "PYTHONPATH", "TIDEMARK_LIB", "TIDEMARK_TEST_TORCH_CUDA",
              "TIDEMARK_TEST_TORCH_MISSING", "SIM_TORCH_API", "SIM_TORCH_INIT", "MIRROR"):
        env.pop(k, None)
    if SAN:
        env["LD_PRELOAD"] = SAN
        # `tidemark run` puts its preload library before this one.
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    env["PYTHONPATH"] = HERE
    if simulated:
        env.update(TIDEMARK_TEST_TORCH_CUDA="sim_torch_cuda", MIRROR="torch")
    env.update(extra or {})
    out = tempfile.mkdtemp(prefix="tdm-tensors-")
    cmd = [TIDEMARK, "run", "-q", "-o", out]
    if conf:
        cmd += ["--conf", conf]
    cmd += ["--", sys.executable, CHILD, "plain", str(steps), PYDIR]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0 or "trained" not in r.stdout:
        fail("%s: exit %d: %s" % (what, r.returncode, (r.stdout + r.stderr)[-2000:]))
    files = sorted(os.listdir(out))
    tdm = [os.path.join(out, f) for f in files if f.endswith(".tdm")]
    pickles = [os.path.join(out, f) for f in files if f.endswith(".torch.pickle")]
    if len(tdm) != 1 or len(pickles) > 1:
        fail("%s: want one .tdm and at most one .torch.pickle, got %s" % (what, files))
    elif pickles and pickles[0][:-len(".torch.pickle")] != tdm[0][:-len(".tdm")]:
        fail("%s: the pickle is not named after the snapshot: %s" % (what, files))
    lines = [ln for ln in r.stderr.splitlines()
             if ln.startswith("tidemark: ") and "wrote snapshot" not in ln]
    return (tdm[0] if tdm else None), (pickles[0] if pickles else None), lines


def export(path, fmt):
    r = subprocess.run([TIDEMARK, "export", "-f", fmt, "-o", "-", "-q", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("export %s %s: %s" % (fmt, path, r.stderr))
        return None
    return json.loads(r.stdout)


def categories_at_peak(m):
    peak = m["devices"][0]["peak_seq"]
    a = m["allocations"]
    out = {}
    for i in range(len(a["size"])):
        free = a["free_seq"][i]
        if a["alloc_seq"][i] <= peak and (free is None or free < 0 or free > peak):
            out[a["category"][i]] = out.get(a["category"][i], 0) + a["size"][i]
    return out


def check_tensors(path, what, steps=3):
    """Tensor-level events with phases: categories at the peak and the
    phase order of every step."""
    m = export(path, "json")
    if m is None:
        return
    cats = categories_at_peak(m)
    total = sum(cats.values())
    if not total:
        fail("%s: nothing live at the peak" % what)
        return
    for want in ("parameter", "gradient", "optimizer_state"):
        if cats.get(want, 0) <= 0:
            fail("%s: no %s at the peak: %s" % (what, want, cats))
    unknown = cats.get("unknown", 0) / total
    if unknown > 0.10:
        fail("%s: %.0f%% unknown at the peak: %s" % (what, 100 * unknown, cats))
    a = m["allocations"]
    if sum(s for s, c in zip(a["size"], a["category"]) if c == "activation") <= 0:
        fail("%s: no activation bytes in the run" % what)
    d = export(path, "perfetto") or {}
    events = d["traceEvents"] if isinstance(d, dict) else d
    seq = [e["name"] for e in sorted(events, key=lambda e: e.get("ts", 0))
           if e.get("ph") == "X" and e.get("name") in ("forward", "backward", "optimizer")]
    if seq != ["forward", "backward", "optimizer"] * steps:
        fail("%s: phases %s, want forward, backward, optimizer once a step" % (what, seq))
    print("%s: at the peak %s KiB, %.1f%% unknown"
          % (what, {k: v >> 10 for k, v in cats.items()}, 100 * unknown))


def device_events(tdm):
    m = export(tdm, "json")
    return len(m["allocations"]["size"]) if m else -1


def want_one_line(lines, what, *words):
    if len(lines) != 1 or not all(w in lines[0] for w in words):
        fail("%s: want one line with %s, got %s" % (what, words, lines))
    else:
        print("%s: %s" % (what, lines[0]))


# ---- the file name ---------------------------------------------------------------
sys.path.insert(0, PYDIR)
import tidemark_tensors  # noqa: E402

pid = os.getpid()
for conf, want in (("dump=out/run-%p.tdm", "/w/out/run-%d.torch.pickle" % pid),
                   ("dump=/abs/%%p-%p", "/abs/%%p-%d.torch.pickle" % pid),
                   ("record=all", "/w/tidemark-%s-%d.torch.pickle"
                    % (__import__("socket").gethostname().replace("/", "_"), pid))):
    got = tidemark_tensors.pickle_path(conf, cwd="/w")
    if got != want:
        fail("pickle_path(%r): %s, want %s" % (conf, got, want))
for conf, want in (("", "off"), ("dump=x.tdm", "history"), ("torch_tensors=pluggable", "pluggable"),
                   ("torch_tensors=off", "off"), ("record=off,torch_tensors=pluggable", "off"),
                   # A key given twice keeps its last value, as the C library reads it.
                   ("record=off,record=all", "history"), ("record=all,record=OFF", "off"),
                   ("torch_tensors=pluggable,torch_tensors=history", "history"),
                   ("torch_tensors=off,torch_tensors=pluggable", "pluggable")):
    if tidemark_tensors.mode_from_conf(conf) != want:
        fail("mode_from_conf(%r): %s, want %s"
             % (conf, tidemark_tensors.mode_from_conf(conf), want))

import tidemark_torch  # noqa: E402
for conf, want in ((None, True), ("", True), ("torch_phases=off", False),
                   ("torch_phases=on,torch_phases=off", False),
                   ("torch_phases=off,torch_phases=on", True),
                   ("torch_phases=OFF,record=all", False)):
    if tidemark_torch.enabled_by_conf(conf) != want:
        fail("enabled_by_conf(%r): %s, want %s"
             % (conf, tidemark_torch.enabled_by_conf(conf), want))
for conf, want in (("max_entries=5", 5), ("max_entries=5,max_entries=7", 7),
                   ("", tidemark_tensors.TORCH_MAX_ENTRIES), ("record=all", 4000000)):
    if tidemark_tensors._max_entries(conf) != want:
        fail("_max_entries(%r): %s, want %s"
             % (conf, tidemark_tensors._max_entries(conf), want))

# ---- tensor events ---------------------------------------------------------------
# `tidemark run` merges PyTorch's history into the .tdm: one file.
tdm, pk, lines = record("history (torch 2.1 API)")
if pk or not tdm:
    fail("history: want the history merged into one .tdm, got %s %s" % (tdm, pk))
else:
    want_one_line(lines, "history", "tensor history", "merge-torch")
    check_tensors(tdm, "history (torch 2.1 API)")

tdm, pk, lines = record("history (torch 2.0 API)", extra={"SIM_TORCH_API": "2.0"})
if tdm and not pk:
    check_tensors(tdm, "history (torch 2.0 API)")
else:
    fail("history (torch 2.0 API): not merged (%s, %s)" % (tdm, pk))

tdm, pk, lines = record("pluggable", conf="torch_tensors=pluggable")
if pk or lines:
    fail("pluggable: a pickle (%s) or lines %s" % (pk, lines))
if tdm:
    check_tensors(tdm, "pluggable")

# ---- one line, and the segment view ----------------------------------------------
for mode in ("history", "pluggable"):
    conf = "torch_tensors=" + mode
    tdm, pk, lines = record(mode + ", CUDA started first", conf=conf,
                            extra={"SIM_TORCH_INIT": "early"})
    want_one_line(lines[:1], mode + ", CUDA started first", "CUDA was started before")
    if mode == "pluggable":
        if pk or len(lines) != 1 or (tdm and device_events(tdm) != 0):
            fail("pluggable, CUDA started first: served anyway (%s, %s)" % (pk, lines))
    elif pk or not tdm or device_events(tdm) <= 0:
        # What is allocated after the start is still seen, merged.
        fail("history, CUDA started first: no tensors merged (%s, %s)" % (tdm, pk))

    tdm, pk, lines = record(mode + ", torch 1.13", conf=conf, extra={"SIM_TORCH_API": "1.13"})
    want_one_line(lines, mode + ", torch 1.13", "1.13", SEGMENTS)
    if pk:
        fail("%s, torch 1.13: a pickle was written" % mode)

tdm, pk, lines = record("no _record_memory_history",
                        extra={"TIDEMARK_TEST_TORCH_MISSING": "_record_memory_history"})
want_one_line(lines, "no _record_memory_history", "_record_memory_history", SEGMENTS)

# ---- nothing ---------------------------------------------------------------------
for what, conf, simulated in (("CPU torch, history", None, False),
                              ("CPU torch, pluggable", "torch_tensors=pluggable", False),
                              ("torch_tensors=off", "torch_tensors=off", True)):
    tdm, pk, lines = record(what, conf=conf, simulated=simulated)
    if pk or lines:
        fail("%s: want nothing, got %s %s" % (what, pk, lines))
    else:
        print("%s: nothing done, nothing said" % what)

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all ok")
