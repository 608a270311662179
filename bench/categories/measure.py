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
        # the device the tensors are on (a rank of a job may list others)
        # (allocations name a device by its ordinal: -1 is pinned host memory)
        counts = {}
        for d, size in zip(self.a["device"], self.a["size"]):
            counts[d] = counts.get(d, 0) + size
        self.device = max((d for d in counts if d >= 0), key=lambda d: counts[d], default=0)
        self.dev = next(d for d in doc["devices"] if d["ordinal"] == self.device)
        self.peak_seq = self.dev["peak_seq"]
        self.frames = doc["frames"]
        self.stacks = doc["stacks"]

    def category(self, i):
        return self.a["category"][i]

    def live_at(self, i, seq):
        free = self.a["free_seq"][i]
        return self.a["alloc_seq"][i] <= seq and (free is None or free < 0 or free > seq)

    def at_peak(self):
        """{category: bytes} live at the peak of the device the tensors are on."""
        out = {}
        for i in range(self.n):
            if self.a["device"][i] == self.device and self.live_at(i, self.peak_seq):
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


# Loops that are jobs of two ranks, started by torch.distributed.run.
DISTRIBUTED = ("ddp", "fsdp2")


def run_loop(tidemark, python, name, args=(), gpu="h100", conf=None, out=None, timeout=600,
             wrapper=(), cpu_mirror=None):
    """Runs loop `name` under tidemark (through `wrapper`, a script and its
    first arguments, when given: oracle.py) on the simulated GPU `gpu`, or,
    with `cpu_mirror` (tests/python/torch_cpu_mirror.c's library, for a
    torch without CUDA), on the CPU with its tensors booked on the sim
    device; returns (Snapshot, path of the .tdm, the run's output).  Raises
    RuntimeError when the run fails."""
    out = out or tempfile.mkdtemp(prefix="tdm-cat-%s-" % name)
    cmd = [tidemark, "run", "--simulate", gpu, "-q", "-o", out] if not cpu_mirror else \
        [tidemark, "run", "-q", "-o", out]
    env = dict(os.environ)
    if cpu_mirror:
        env["LD_PRELOAD"] = cpu_mirror + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if conf:
        cmd += ["--conf", conf]
    launch = [python]
    if name in DISTRIBUTED:
        launch += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += ["--"] + launch + list(wrapper) + [loop_path(name)] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (name, r.returncode, (r.stdout + r.stderr)[-3000:]))
    snaps = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tdm"))
    if not snaps:
        raise RuntimeError("%s: no snapshot in %s: %s" % (name, out, r.stderr[-2000:]))
    # a job's: rank 0's
    for snap in snaps:
        s = read(tidemark, snap)
        if s.doc["snapshot"].get("rank", -1) in (0, -1):
            return s, snap, r.stdout + r.stderr
    raise RuntimeError("%s: no snapshot of rank 0 in %s" % (name, out))


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
