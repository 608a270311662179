"""tests/python/test_python_default_stacks.py: a Python program recorded
with tidemark's defaults gets Python frames, and tidemark's own Python
wrappers never show in its stacks (issue 39, point 11).  Before, under
`tidemark run` or the preload, stacks were native by default: every site
was `0x7f... (libffi.so.8.1.2)` and the sites looked the same.

default_stacks_child.py records only through TIDEMARK_CONF (no
record_memory_history call), makes memory in make_weights,
make_activations and real_backward (called through tidemark_torch's
wrapper of Tensor.backward).  For the preload and for `tidemark run`:
- the snapshot says stacks=all;
- the summary's sites are those three functions (child.py:line), none
  is libffi's or the interpreter's;
- no frame of tidemark_torch.py (or tidemark.py) is shown.

Environment: LIBTIDEMARK, PRELOAD, TIDEMARK, TDM_SOURCE_DIR."""
import glob
import os
import subprocess
import sys
import tempfile

from child_env import HERE, sanitizer_runtime  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
CHILD = os.path.join(HERE, "default_stacks_child.py")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def check(what, snap):
    before = len(failures)
    r = subprocess.run([TIDEMARK, "summary", "--frames", "8", snap], capture_output=True,
                       text=True)
    out = r.stdout
    if r.returncode != 0:
        fail("%s: summary exit %d: %s" % (what, r.returncode, r.stderr))
        return
    if "stacks=all" not in out:
        fail("%s: not recorded with stacks=all:\n%s" % (what, out))
    for fn in ("make_weights", "make_activations", "real_backward"):
        if "%s (default_stacks_child.py:" % fn not in out:
            fail("%s: no site in %s:\n%s" % (what, fn, out))
    for bad in ("libffi", "tidemark_torch.py", "tidemark.py", "_PyEval"):
        if bad in out:
            fail("%s: the summary shows %s:\n%s" % (what, bad, out))
    if len(failures) == before:
        print("%s: ok" % what)


def main():
    preload = os.environ.get("PRELOAD")
    if not preload or sanitizer_runtime():
        print("no preload library (or a sanitizer build): skipped")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "pre.tdm")
        env = dict(os.environ, LD_PRELOAD=preload, TIDEMARK_CONF="dump=" + snap)
        r = subprocess.run([sys.executable, CHILD], capture_output=True, text=True, env=env)
        if r.returncode != 0 or not os.path.exists(snap):
            fail("preloaded child: exit %d: %s %s" % (r.returncode, r.stdout, r.stderr))
        else:
            check("LD_PRELOAD", snap)
        out = os.path.join(tmp, "run")
        env = dict(os.environ, TIDEMARK_CONF="")
        env.pop("LD_PRELOAD", None)
        r = subprocess.run([TIDEMARK, "run", "-o", out, "--", sys.executable, CHILD],
                           capture_output=True, text=True, env=env)
        snaps = glob.glob(os.path.join(out, "**", "*.tdm"), recursive=True)
        if r.returncode != 0 or len(snaps) != 1:
            fail("tidemark run: exit %d, %d snapshots: %s %s"
                 % (r.returncode, len(snaps), r.stdout, r.stderr))
        else:
            check("tidemark run", snaps[0])
    if failures:
        sys.exit("%d check(s) failed" % len(failures))
    print("ok: default stacks of a Python program")


main()
