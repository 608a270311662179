"""bench/categories/measure.py: runs one training loop of bench/categories/loops
under `tidemark run --simulate` and reads back what tidemark decided: each
allocation's category, size, lifetime and allocation stack (the snapshot's
`json` export), the device's peak.  Used by bench/categories/run.py (the
table) and by tests/simcuda/test_category_loops.py (a test per loop).

Nothing here decides a category: it only reads tidemark's decisions.
"""
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPS = os.path.join(HERE, "loops")


def loop_path(name):
    return os.path.join(LOOPS, name + ".py")


class Snapshot:
    """The `json` export of one device-0 snapshot, with per-allocation
    accessors."""

    def __init__(self, doc):
        self.doc = doc
        self.a = doc["allocations"]
        self.n = len(self.a["size"])
        self.dev = doc["devices"][0]
        self.peak_seq = self.dev["peak_seq"]
        self.frames = doc["frames"]
        self.stacks = doc["stacks"]

    def category(self, i):
        return self.a["category"][i]

    def live_at(self, i, seq):
        free = self.a["free_seq"][i]
        return self.a["alloc_seq"][i] <= seq and (free is None or free < 0 or free > seq)

    def at_peak(self):
        """{category: bytes} live at device 0's peak."""
        out = {}
        for i in range(self.n):
            if self.a["device"][i] == 0 and self.live_at(i, self.peak_seq):
                c = self.category(i)
                out[c] = out.get(c, 0) + self.a["size"][i]
        return out

    def made_at(self, i, file_suffix, function=None):
        """Nonzero when allocation i's stack has a frame in a file ending
        with file_suffix (and, given, of that function)."""
        for f in self.stacks[self.a["stack"][i]] if self.a["stack"][i] is not None else ():
            fr = self.frames[f]
            if (fr.get("file") or "").endswith(file_suffix) and \
                    (function is None or fr.get("function") == function):
                return True
        return False


def run_loop(tidemark, python, name, args=(), gpu="h100", conf=None, out=None, timeout=600,
             wrapper=()):
    """Runs loop `name` under tidemark (through `wrapper`, a script and its
    first arguments, when given: oracle.py); returns (Snapshot, path of the
    .tdm, the run's output).  Raises RuntimeError when the run fails."""
    out = out or tempfile.mkdtemp(prefix="tdm-cat-%s-" % name)
    cmd = [tidemark, "run", "--simulate", gpu, "-q", "-o", out]
    if conf:
        cmd += ["--conf", conf]
    cmd += ["--", python] + list(wrapper) + [loop_path(name)] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (name, r.returncode, (r.stdout + r.stderr)[-3000:]))
    snaps = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tdm"))
    if not snaps:
        raise RuntimeError("%s: no snapshot in %s: %s" % (name, out, r.stderr[-2000:]))
    return read(tidemark, snaps[0]), snaps[0], r.stdout + r.stderr


def read(tidemark, snap):
    r = subprocess.run([tidemark, "export", "-f", "json", "-o", "-", "-q", snap],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("export %s: %s" % (snap, r.stderr))
    return Snapshot(json.loads(r.stdout))


def explain(tidemark, snap, site):
    r = subprocess.run([tidemark, "categories", "--explain", site, snap],
                       capture_output=True, text=True)
    return r.stdout + r.stderr
