"""tests/python/test_torch_phases.py: an unmodified torch training loop
(torch_train.py, Debian's CPU torch) run by `tidemark run` gets phases and
steps from tidemark's automatic torch hooks, and from them categories:
parameters, activations, gradients and optimizer state, at most 10%
unknown at the peak.  Also: activation checkpointing (forwards recomputed
inside backward) and four-deep nested modules leave the categories right;
the program's own marks win; TIDEMARK_CONF=torch_phases=off leaves torch
alone; a torch without the global module hooks (simulated) degrades with
one line; the fake CUDA runtime under the preload; `python -m tidemark`
and a bare LD_PRELOAD with python/autostart on PYTHONPATH.

Environment: TIDEMARK (the CLI), PRELOAD, FAKE_CUDA_RT/FAKE_CUDA_DRV,
TDM_SOURCE_DIR.  Skipped (77) without torch."""
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
CHILD = os.path.join(SRC, "tests", "python", "torch_train.py")
PYDIR = os.path.join(SRC, "python")
SAN = sanitizer_runtime()
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def env_for(extra=None):
    env = dict(os.environ)
    for k in ("TIDEMARK_CONF", "PYTHONPATH", "TIDEMARK_LIB"):
        env.pop(k, None)
    if SAN:
        env["LD_PRELOAD"] = SAN
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env.update(extra or {})
    return env


def run(cmd, env, what):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0 or "trained" not in r.stdout:
        fail("%s: exit %d: %s" % (what, r.returncode, (r.stdout + r.stderr)[-2000:]))
    return r


def record(mode, what, conf=None, extra=None, steps=4):
    out = tempfile.mkdtemp(prefix="tdm-torch-")
    cmd = [TIDEMARK, "run", "-o", out]
    if conf:
        cmd += ["--conf", conf]
    cmd += ["--", sys.executable, CHILD, mode, str(steps), PYDIR]
    r = run(cmd, env_for(extra), what)
    snaps = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tdm")]
    if len(snaps) != 1:
        fail("%s: %d snapshots in %s" % (what, len(snaps), out))
        return None, r
    return snaps[0], r


def model(snap):
    r = subprocess.run([TIDEMARK, "export", "-f", "json", "-o", "-", "-q", snap],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("export %s: %s" % (snap, r.stderr))
        return None
    return json.loads(r.stdout)


def categories_at_peak(snap):
    """{category: bytes} of the allocations live at device 0's peak."""
    m = model(snap)
    if m is None:
        return {}, []
    peak = m["devices"][0]["peak_seq"]
    a = m["allocations"]
    out = {}
    for i in range(len(a["size"])):
        free = a["free_seq"][i]
        if a["alloc_seq"][i] <= peak and (free is None or free < 0 or free > peak):
            cat = a["category"][i]
            out[cat] = out.get(cat, 0) + a["size"][i]
    return out, m["phases"]


def bytes_ever(snap, category):
    m = model(snap)
    a = m["allocations"]
    return sum(s for s, c in zip(a["size"], a["category"]) if c == category)


def phase_sequence(snap):
    """The phase slices of the snapshot's Perfetto trace, in time order."""
    r = subprocess.run([TIDEMARK, "export", "-f", "perfetto", "-o", "-", "-q", snap],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("perfetto export %s: %s" % (snap, r.stderr))
        return []
    d = json.loads(r.stdout)
    events = d["traceEvents"] if isinstance(d, dict) else d
    slices = [e for e in events if e.get("ph") == "X"
              and e.get("name") in ("forward", "backward", "optimizer")]
    return [e["name"] for e in sorted(slices, key=lambda e: e["ts"])]


def check_categories(snap, what, activations=True, steps=4):
    cats, phases = categories_at_peak(snap)
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
    if activations and bytes_ever(snap, "activation") <= 0:
        fail("%s: no activation bytes in the run" % what)
    seq = phase_sequence(snap)
    if seq != ["forward", "backward", "optimizer"] * steps:
        fail("%s: phases %s, want forward, backward, optimizer once a step"
             % (what, seq))
    print("%s: at the peak %s, %.1f%% unknown; phases %s"
          % (what, {k: v >> 10 for k, v in cats.items()}, 100 * unknown, phases))


snap, _ = record("plain", "plain")
if snap:
    check_categories(snap, "plain (modules four deep)")

snap, _ = record("checkpoint", "checkpoint")
if snap:
    # the checkpointed blocks keep no activations: their recomputation
    # inside backward makes and frees them there (temporary)
    check_categories(snap, "activation checkpointing", activations=False)

snap, _ = record("marks", "own marks")
if snap:
    cats, phases = categories_at_peak(snap)
    if "my_forward_pass" not in phases or "forward" in phases or "backward" in phases:
        fail("own marks: automatic marks mixed in: %s" % phases)
    else:
        print("own marks kept: %s" % phases)

snap, r = record("plain", "torch_phases=off", conf="torch_phases=off")
if snap:
    _, phases = categories_at_peak(snap)
    if [p for p in phases if p]:
        fail("torch_phases=off: phases marked: %s" % phases)
    else:
        print("torch_phases=off: no phases")

snap, r = record("plain", "old torch", extra={
    "TIDEMARK_TEST_TORCH_MISSING": "register_module_forward_pre_hook"})
lines = [ln for ln in r.stderr.splitlines() if ln.startswith("tidemark: this torch")]
if len(lines) != 1 or "register_module_forward_pre_hook" not in lines[0]:
    fail("old torch: want one line naming the missing hook, got %s" % r.stderr[-1500:])
elif snap:
    _, phases = categories_at_peak(snap)
    if "forward" in phases or "optimizer" not in phases:
        fail("old torch: phases %s (forward cannot be marked, the rest can)" % phases)
    else:
        print("old torch: %s; phases %s" % (lines[0], phases))

if os.environ.get("FAKE_CUDA_RT"):
    ld = "%s:%s" % (os.environ["FAKE_CUDA_RT"], os.environ["FAKE_CUDA_DRV"])
    snap, _ = record("plain", "fake CUDA", extra={"MIRROR": "cuda", "LD_LIBRARY_PATH": ld})
    if snap:
        check_categories(snap, "fake CUDA runtime under the preload")

# Without `tidemark run`: LD_PRELOAD + TIDEMARK_CONF, with either
# python/autostart on PYTHONPATH or `python -m tidemark`.
for how, cmd, extra in (
        ("PYTHONPATH=python/autostart",
         [sys.executable, CHILD, "plain", "3", PYDIR],
         {"PYTHONPATH": os.path.join(PYDIR, "autostart")}),
        ("python -m tidemark",
         [sys.executable, "-m", "tidemark", CHILD, "plain", "3", PYDIR],
         {"PYTHONPATH": PYDIR})):
    out = os.path.join(tempfile.mkdtemp(prefix="tdm-torch-"), "run.tdm")
    extra = dict(extra, TIDEMARK_CONF="dump=" + out)
    env = env_for(extra)
    env["LD_PRELOAD"] = ":".join(p for p in (SAN, os.environ["PRELOAD"]) if p)
    run(cmd, env, how)
    if os.path.exists(out):
        check_categories(out, how, steps=3)
    else:
        fail("%s: no snapshot %s" % (how, out))

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all ok")
