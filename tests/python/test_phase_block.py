"""tests/python/test_phase_block.py: `with tidemark.phase("init"):` ends
with its block (issue 39, point 10).  Before, a block begun with no phase
in force left its phase in force, and every later block restored it on
exit: a buffer made after training began was "made in phase init, step 2"
and called a parameter, and the viewer showed "init" across training.

phase_block_child.py makes a parameter inside `with phase("init")`, runs
two steps of forward/backward blocks, then makes a buffer outside every
block, then one after a plain phase("train") call and an "eval" block.
Checked through `tidemark categories --explain ADDR` and the PyTorch
export's phase annotations:
- the parameter is made in phase init (and is a parameter);
- the later buffer is made in no phase, not in "init";
- the last one is made in "train" (a plain call's phase lasts, and a
  block begun inside it goes back to it);
- "init" starts once in the annotations;
- the marks a merged PyTorch history gets end the init block too: a
  PyTorch snapshot with those annotations, imported, has a tensor made
  after the block in no phase (before, the importer read START entries
  only and "init" lasted to the end).

Environment: LIBTIDEMARK, TIDEMARK, TDM_SOURCE_DIR."""
import os
import pickle
import subprocess
import sys
import tempfile

from child_env import HERE, sanitizer_runtime  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
CHILD = os.path.join(HERE, "phase_block_child.py")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def explain(snap, addr):
    r = subprocess.run([TIDEMARK, "categories", "--explain", addr, snap],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("categories --explain %s: exit %d: %s" % (addr, r.returncode, r.stderr))
    return r.stdout


def check_torch_history(tmp, marks):
    """A PyTorch history carrying the child's marks: one tensor made in the
    init block, one after it."""
    notes = []
    for m in marks:
        stage, name, time_us = m.rsplit(":", 2)
        notes.append({"device": 0, "stage": stage, "name": name, "time_us": int(time_us)})
    ends = [n for n in notes if n["stage"] == "END" and n["name"] == "init"]
    if not ends:
        fail("the marks for a PyTorch history do not end the init block: %s" % marks)
        return
    start = min(n["time_us"] for n in notes)
    end = ends[0]["time_us"]
    a, b = 0x7f0000000000, 0x7f0000200000
    trace = [{"action": "alloc", "addr": a, "size": 1 << 20, "stream": 0,
              "time_us": start + 1, "frames": []},
             {"action": "alloc", "addr": b, "size": 1 << 20, "stream": 0,
              "time_us": end + 1, "frames": []}]
    snap = {"segments": [], "device_traces": [trace], "external_annotations": notes}
    pkl = os.path.join(tmp, "history.pickle")
    with open(pkl, "wb") as f:
        pickle.dump(snap, f)
    made = explain(pkl, "%#x" % b)
    if "phase init" in made:
        fail("in a PyTorch history, a tensor made after the init block is in init: %s"
             % made.strip())


def main():
    env = dict(os.environ, TIDEMARK_CONF="")
    san = sanitizer_runtime()
    if san:
        env["LD_PRELOAD"] = san
        # The interpreter's own memory at exit (its modules, types, code
        # objects) is not tidemark's: LeakSanitizer would list it.
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "p.tdm")
        r = subprocess.run([sys.executable, CHILD, snap], capture_output=True, text=True,
                           env=env)
        if r.returncode != 0 or not os.path.exists(snap):
            print(r.stdout, r.stderr)
            sys.exit("FAIL: the child did not record (exit %d)" % r.returncode)
        addrs = dict(line.split() for line in r.stdout.splitlines() if " 0x" in line)
        marks = [line.split(" ", 1)[1] for line in r.stdout.splitlines()
                 if line.startswith("marks ")]

        params = explain(snap, addrs["params"])
        if "made in phase init" not in params or "parameter" not in params:
            fail("the parameter is not made in init: %s" % params.strip())
        buf = explain(snap, addrs["buf"])
        if "phase init" in buf or "parameter" in buf.split(":")[0]:
            fail("a buffer made after the init block is still in init: %s" % buf.strip())
        if "made in no phase, step 2" not in buf:
            fail("the buffer after the blocks is not in no phase: %s" % buf.strip())
        kept = explain(snap, addrs["kept"])
        if "made in phase train" not in kept:
            fail("a block inside a plain call's phase did not go back to it: %s"
                 % kept.strip())

        pkl = os.path.join(tmp, "p.pickle")
        r = subprocess.run([TIDEMARK, "export", "--format", "pytorch", "-o", pkl, snap],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("export pytorch: %s" % r.stderr)
        else:
            with open(pkl, "rb") as f:
                notes = pickle.load(f).get("external_annotations", [])
            starts = [n["name"] for n in notes if n["stage"] == "START"]
            if starts.count("init") != 1:
                fail("init starts %d times: %s" % (starts.count("init"), starts))
            print("phase starts: %s" % starts)
        check_torch_history(tmp, marks[0].split(";") if marks else [])
    if failures:
        sys.exit("%d check(s) failed" % len(failures))
    print("ok: phase blocks")


main()
