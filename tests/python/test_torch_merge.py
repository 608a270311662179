"""tests/python/test_torch_merge.py: one .tdm per run of an unmodified
torch program: PyTorch's tensor history (NAME.torch.pickle) merged with
tidemark's own segments and stacks (`tidemark run` at the end, `tidemark
merge-torch` by hand; viewer-export/import/merge_torch.h).

A CUDA torch is simulated (sim_torch_cuda.py over Debian's CPU torch,
torch_train.py's training loop) with its segments taken from the fake CUDA
runtime's cudaMalloc, so tidemark's hooks see them as they see PyTorch's.
Checked:

- `tidemark run`: one .tdm, no pickle; its history's peak allocated is
  max_memory_allocated() (each tensor's block, from the history's own
  layout: import_pytorch_blocks.h), its statistics are PyTorch's, its reserved memory the segments
  (max_memory_reserved(), memory_reserved() at the end, and never less
  than what is allocated), no anomalies, tensors in categories;
- a run killed (`tidemark run` SIGKILLed while the program, a shell's
  child, runs on) leaves the .tdm and the pickle; commands reading the .tdm say so in one
  line; `tidemark merge-torch X.tdm -o Y.tdm` keeps both; in place it
  replaces X.tdm and removes the pickle, giving what `tidemark run` gives;
- a pickle missing or corrupt: one line, exit 2, the .tdm byte for byte as
  it was; a merged .tdm is not merged twice.

Environment: TIDEMARK, TDM_SOURCE_DIR, PRELOAD, FAKE_CUDA_RT/FAKE_CUDA_DRV.
Skipped (77) without torch or the fake CUDA runtime."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from child_env import sanitizer_runtime  # noqa: E402

try:
    import torch  # noqa: F401
except ImportError:
    print("no torch for %s (Debian: python3-torch): skipped" % sys.executable)
    sys.exit(77)
if not os.environ.get("FAKE_CUDA_RT"):
    print("no fake CUDA runtime in this build: skipped")
    sys.exit(77)

SRC = os.environ["TDM_SOURCE_DIR"]
TIDEMARK = os.environ["TIDEMARK"]
HERE = os.path.join(SRC, "tests", "python")
CHILD = os.path.join(HERE, "torch_train.py")
PYDIR = os.path.join(SRC, "python")
SAN = sanitizer_runtime()
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def child_env(out, hold=None):
    env = dict(os.environ)
    for k in ("TIDEMARK_CONF", "PYTHONPATH", "TIDEMARK_LIB", "SIM_TORCH_API",
              "SIM_TORCH_INIT", "TIDEMARK_TEST_TORCH_MISSING"):
        env.pop(k, None)
    if SAN:
        env["LD_PRELOAD"] = SAN
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    env.update(PYTHONPATH=HERE, TIDEMARK_TEST_TORCH_CUDA="sim_torch_cuda", MIRROR="torch",
               SIM_TORCH_CUDART="libcudart.so.13",
               LD_LIBRARY_PATH="%s:%s" % (os.environ["FAKE_CUDA_RT"],
                                          os.environ["FAKE_CUDA_DRV"]),
               SIM_TORCH_REPORT=os.path.join(out, "report.json"))
    if hold:
        env["SIM_TORCH_HOLD"] = hold
    if SAN and "libtsan" in SAN:
        # The killed run's program is a shell's child: the shell, recorded
        # with dump_on=signal, has tidemark's signal watcher thread, and its
        # forked child starts its own (fork=follow).  glibc allows a thread
        # in the child of a threaded process; ThreadSanitizer refuses it
        # unless told.
        env["TSAN_OPTIONS"] = (env.get("TSAN_OPTIONS", "") + ":die_after_fork=0").lstrip(":")
    return env


def files(d):
    return sorted(f for f in os.listdir(d) if f.endswith((".tdm", ".pickle")))


def tidemark(*args):
    return subprocess.run([TIDEMARK] + list(args), capture_output=True, text=True,
                          timeout=120)


def check_merged(tdm, report, what):
    """The merged snapshot against what the simulated PyTorch reported."""
    r = tidemark("export", "-f", "json", "-o", "-", "-q", tdm)
    if r.returncode != 0:
        fail("%s: export: %s" % (what, r.stderr))
        return
    m = json.loads(r.stdout)
    d = m["devices"][0]
    want = {"peak_allocated": report["max_memory_allocated"],
            "peak_reserved": report["max_memory_reserved"],
            "end_reserved": report["memory_reserved"],
            "end_allocated": report["requested_now"], "anomalies": 0}
    got = {k: d[k] for k in want}
    if got != want:
        fail("%s: device 0 %s, want %s" % (what, got, want))
    t = d["timeline"]
    over = [i for i, (a, b) in enumerate(zip(t["allocated"], t["reserved"])) if a > b]
    if over:
        fail("%s: allocated above reserved at %d samples (first seq %s)"
             % (what, len(over), t["seq"][over[0]]))
    cats = d["categories_at_peak"]
    if not (cats.get("parameter") and cats.get("gradient") and cats.get("optimizer_state")):
        fail("%s: tensors not in categories at the peak: %s" % (what, cats))
    r = tidemark("summary", "--bytes", tdm)
    st = re.search(r"stats +allocated (\d+) B now, (\d+) B peak; reserved (\d+) B now, "
                   r"(\d+) B peak", r.stdout)
    if not st or [int(x) for x in st.groups()] != [
            report["memory_allocated"], report["max_memory_allocated"],
            report["memory_reserved"], report["max_memory_reserved"]]:
        fail("%s: summary's stats %s, want torch's %s" % (what, st and st.groups(), report))
    if "tensor events from PyTorch's memory history" not in r.stdout:
        fail("%s: the summary does not say where the tensors come from" % what)
    if "torch.pickle" in r.stderr:
        fail("%s: a merged snapshot still says a pickle is beside it: %s" % (what, r.stderr))
    if "filled its ring" in r.stdout or not re.search(r"events +\d+ recorded, 0 dropped",
                                                      r.stdout):
        fail("%s: a history that did not wrap is said to have lost events:\n%s"
             % (what, r.stdout))
    print("%s: peak allocated %d B (max_memory_allocated), stats peak %d B "
          "(max_memory_allocated), reserved peak %d B, end %d B"
          % (what, d["peak_allocated"], int(st.group(2)) if st else -1,
             d["peak_reserved"], d["end_reserved"]))


# ---- `tidemark run` ------------------------------------------------------------
out = tempfile.mkdtemp(prefix="tdm-merge-")
r = subprocess.run([TIDEMARK, "run", "-q", "-o", out, "--", sys.executable, CHILD, "plain",
                    "3", PYDIR], capture_output=True, text=True, env=child_env(out),
                   timeout=300)
if r.returncode != 0 or "trained" not in r.stdout:
    fail("run: exit %d: %s" % (r.returncode, (r.stdout + r.stderr)[-2000:]))
got = files(out)
if len(got) != 1 or not got[0].endswith(".tdm"):
    fail("run: want one .tdm, got %s" % got)
else:
    report = json.load(open(os.path.join(out, "report.json")))
    check_merged(os.path.join(out, got[0]), report, "run")

# ---- PyTorch's ring wrapped -------------------------------------------------------
# max_entries=50 (TIDEMARK_CONF: both rings): PyTorch keeps its newest 50
# trace entries and says nothing of the rest, so the parameters' allocations
# are gone from the history.  The merged snapshot must say so (a note, the
# lost allocations counted as dropped events), in summary and categories.
out = tempfile.mkdtemp(prefix="tdm-merge-wrap-")
r = subprocess.run([TIDEMARK, "run", "-q", "-o", out, "--conf", "max_entries=50", "--",
                    sys.executable, CHILD, "plain", "3", PYDIR], capture_output=True,
                   text=True, env=child_env(out), timeout=300)
got = files(out)
if r.returncode != 0 or len(got) != 1:
    fail("wrapped run: exit %d, files %s: %s" % (r.returncode, got, (r.stdout + r.stderr)[-2000:]))
else:
    tdm = os.path.join(out, got[0])
    if "filled its ring" not in r.stderr:
        fail("wrapped run: nothing said on stderr: %s" % r.stderr[-2000:])
    s = tidemark("summary", tdm).stdout
    note = re.search(r"note +PyTorch's memory history filled its ring of 50 entries "
                     r"\(max_entries\) on device 0: its oldest tensor events are lost "
                     r"\(at least (\d+) tensor allocations", s)
    dropped = re.search(r"events +\d+ recorded, (\d+) dropped", s)
    if not note or not dropped or int(dropped.group(1)) < int(note.group(1)) or \
            int(note.group(1)) == 0:
        fail("wrapped run: the summary does not say PyTorch's ring wrapped:\n%s" % s)
    else:
        print("wrapped: %s allocations lost, %s events dropped"
              % (note.group(1), dropped.group(1)))
    c = tidemark("categories", tdm).stdout
    if not re.search(r"history incomplete: [1-9]\d* events dropped", c):
        fail("wrapped run: categories do not say the history is incomplete:\n%s" % c)

# ---- a killed run, merged later ---------------------------------------------------
out = tempfile.mkdtemp(prefix="tdm-merge-killed-")
hold = os.path.join(out, "hold")
# The program is a shell's child (the shell dies with tidemark, the
# program lives on): tidemark is gone before it could merge.
p = subprocess.Popen([TIDEMARK, "run", "-q", "-o", out, "--", "sh", "-c", '"$0" "$@"; :',
                      sys.executable, CHILD, "plain", "3", PYDIR],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env=child_env(out, hold))
deadline = time.time() + 120
while not os.path.exists(hold + ".ready") and time.time() < deadline and p.poll() is None:
    time.sleep(0.02)
p.send_signal(signal.SIGKILL)
p.wait()
open(hold + ".go", "w").close()
tdm = pickle = None
while time.time() < deadline:
    got = files(out)
    if len(got) == 2 and not any(".tmp." in f for f in os.listdir(out)):
        tdm, pickle = (os.path.join(out, f) for f in got)
        break
    time.sleep(0.05)
if not tdm or not tdm.endswith(".tdm") or not pickle.endswith(".torch.pickle"):
    fail("killed run: want a .tdm and a .torch.pickle left, got %s" % files(out))
else:
    report = json.load(open(os.path.join(out, "report.json")))
    time.sleep(0.2)  # the program's last writes done
    r = tidemark("summary", tdm)
    notes = [ln for ln in r.stderr.splitlines() if "torch.pickle" in ln]
    if len(notes) != 1 or "merge-torch" not in notes[0]:
        fail("killed run: summary of the unmerged .tdm: want one line about the pickle, got %r"
             % r.stderr)
    else:
        print("unmerged: %s" % notes[0])
    original = open(tdm, "rb").read()

    # Missing or corrupt pickles: one line, the .tdm untouched.
    spare = os.path.join(out, "spare.pickle")
    shutil.copy(pickle, spare)
    os.unlink(pickle)
    r = tidemark("merge-torch", tdm)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or "no PyTorch history" not in lines[0] or \
            open(tdm, "rb").read() != original:
        fail("missing pickle: exit %d, %r, .tdm %s" % (r.returncode, r.stderr,
             "untouched" if open(tdm, "rb").read() == original else "CHANGED"))
    else:
        print("missing pickle: %s" % lines[0])
    data = open(spare, "rb").read()
    with open(pickle, "wb") as f:
        f.write(data[:len(data) // 2])
    r = tidemark("merge-torch", tdm)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or "byte" not in lines[0] or \
            open(tdm, "rb").read() != original or not os.path.exists(pickle):
        fail("corrupt pickle: exit %d, %r" % (r.returncode, r.stderr))
    else:
        print("corrupt pickle: %s" % lines[0])
    shutil.copy(spare, pickle)
    os.unlink(spare)

    # -o: both inputs kept.
    other = os.path.join(out, "sub", "merged.tdm")
    r = tidemark("merge-torch", "-q", tdm, "-o", other)
    if r.returncode != 0 or r.stderr or not os.path.exists(pickle) or \
            open(tdm, "rb").read() != original:
        fail("merge-torch -o: exit %d, %r" % (r.returncode, r.stderr))
    else:
        check_merged(other, report, "merge-torch -o")
        r = tidemark("merge-torch", other, pickle)
        if r.returncode != 0 or "already" not in r.stderr:
            fail("merging twice: exit %d, %r" % (r.returncode, r.stderr))

    # In place: one file, as `tidemark run` leaves it.
    r = tidemark("merge-torch", tdm)
    if r.returncode != 0 or os.path.exists(pickle) or "merged" not in r.stderr:
        fail("merge-torch in place: exit %d, %r, pickle %s" % (
            r.returncode, r.stderr, "left" if os.path.exists(pickle) else "removed"))
    else:
        print("in place: %s" % r.stderr.strip())
        check_merged(tdm, report, "merge-torch in place")

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all ok")
