"""tests/python/test_pytest_plugin.py: the pytest plugin (python/pytest_tidemark.py)
run the way a user runs it, `PYTHON -m pytest -p pytest_tidemark`, on a
small test file written here, and its outcome read back:

  sim    (argument `sim`): tdm_malloc on the sim device through ctypes, the
         tidemark backend: a test under its limit passes; one over
         limit_device_memory fails with its peak (the exact size) and the
         site holding it (the test file's function and line); a leak over
         limit_device_leaks fails naming the leaked bytes and their site,
         one under it passes; an unmarked test passes; --tidemark-dump
         keeps the snapshot of each failing test and of no passing one,
         and the kept snapshot's peak is the one the message gave; the
         same suite under `tidemark run` (its recording kept on) too;
  torch  (argument `torch`): a CUDA build of torch on the simulated GPU
         (LD_PRELOAD of the simulated platform, as tests/simcuda run it),
         the torch backend: a tensor over the limit fails naming the peak
         and the test's line; a small one passes; a tensor kept alive
         fails limit_device_leaks; and the same under `tidemark run
         --simulate h100`, whose own snapshot still holds every test.
         Skipped (77) without a CUDA torch at PYTEST_PYTHON, or without
         the simulated platform.

Environment: PYTEST_PYTHON (the interpreter whose pytest runs), LIBTIDEMARK,
READER_LIB, TDM_SOURCE_DIR; for torch SIMCUDA_PRELOAD, SIMCUDA_LIBDIR, TIDEMARK."""
import os
import re
import subprocess
import sys
import tempfile

from child_env import sanitizer_runtime  # noqa: E402

SRC = os.environ["TDM_SOURCE_DIR"]
# A sanitizer build's libraries load into this interpreter (it reads a
# kept snapshot) only after their runtime: run again with it preloaded.
_san = sanitizer_runtime()
if _san and _san not in os.environ.get("LD_PRELOAD", ""):
    os.environ["LD_PRELOAD"] = _san
    os.environ["ASAN_OPTIONS"] = "detect_leaks=0"
    os.execv(sys.executable, [sys.executable] + sys.argv)
PY = os.environ.get("PYTEST_PYTHON") or sys.executable
MODE = sys.argv[1] if len(sys.argv) > 1 else "sim"
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def check(cond, what):
    if not cond:
        fail(what)
    return cond


def has(py, module):
    return subprocess.run([py, "-c", "import " + module], capture_output=True).returncode == 0


SIM_TESTS = '''
import ctypes
import pytest
import tidemark

lib = tidemark.library()
lib.tdm_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int,
                           ctypes.c_size_t]
lib.tdm_free.argtypes = [ctypes.c_void_p]
MiB = 1 << 20
kept = []


def device_alloc(size):
    p = ctypes.c_void_p()
    assert lib.tdm_malloc(ctypes.byref(p), size, 0, 0) == 0
    return p


def make_big():
    return device_alloc(24 * MiB)  # MARK big


@pytest.mark.limit_device_memory("12MiB")
def test_under_limit():
    p = device_alloc(4 * MiB)
    lib.tdm_free(p)


@pytest.mark.limit_device_memory("12MiB")
def test_over_limit():
    p = make_big()
    lib.tdm_free(p)


def leak(size):
    kept.append(device_alloc(size))  # MARK leak


@pytest.mark.limit_device_leaks("1MiB")
def test_leaks():
    leak(3 * MiB)


@pytest.mark.limit_device_leaks("1MiB")
def test_small_leak():
    leak(256 * 1024)


def test_unmarked():
    lib.tdm_free(device_alloc(64 * MiB))


def test_fails_itself():
    lib.tdm_free(device_alloc(2 * MiB))
    assert False, "this test fails on its own"
'''

TORCH_TESTS = '''
import pytest
import torch

kept = []


@pytest.mark.limit_device_memory("32MiB")
def test_big_tensor():
    x = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")  # MARK big
    del x


@pytest.mark.limit_device_memory("32MiB")
def test_small_tensor():
    x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    del x


@pytest.mark.limit_device_leaks("1MiB")
def test_kept_tensor():
    kept.append(torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))  # MARK leak
'''


def marked_line(text, mark):
    for n, line in enumerate(text.splitlines(), 1):
        if "# MARK " + mark in line:
            return n
    raise AssertionError(mark)


def run_pytest(folder, name, text, env, extra=()):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    args = [PY, "-m", "pytest", "-p", "pytest_tidemark", "-p", "no:cacheprovider", "-rA",
            path] + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=folder,
                       env=env)
    print("---- pytest exit %d\n%s\n%s" % (r.returncode, r.stdout[-6000:], r.stderr[-2000:]))
    return r


def outcome(out, test):
    m = re.search(r"^(PASSED|FAILED|ERROR) \S*::%s\b" % test, out, re.M)
    return m.group(1) if m else None


def failure_text(out, test):
    """The failure section of `test` in pytest's output."""
    m = re.search(r"_{3,} %s _{3,}\n(.*?)(?=\n_{3,} |\n={3,} )" % test, out, re.S)
    return m.group(1) if m else ""


def base_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(SRC, "python")] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    env["TIDEMARK_LIB"] = os.environ["LIBTIDEMARK"]
    env["TIDEMARK_READER_LIB"] = os.environ["READER_LIB"]
    env["TIDEMARK_CONF"] = ""
    env.pop("PYTEST_ADDOPTS", None)
    san = sanitizer_runtime()
    if san:  # the sanitized libraries load into the interpreter after its runtime
        env["LD_PRELOAD"] = san
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def test_sim(folder):
    dump = os.path.join(folder, "kept")
    r = run_pytest(folder, "test_sim_limits.py", SIM_TESTS, base_env(),
                   ["--tidemark-dump", dump])
    out = r.stdout
    check(r.returncode == 1, "pytest exit %d, not 1 (some tests failed)" % r.returncode)
    want = {"test_under_limit": "PASSED", "test_over_limit": "FAILED", "test_leaks": "FAILED",
            "test_small_leak": "PASSED", "test_unmarked": "PASSED",
            "test_fails_itself": "FAILED"}
    for test, state in want.items():
        check(outcome(out, test) == state, "%s: %s, not %s" % (test, outcome(out, test), state))
    big = marked_line(SIM_TESTS, "big")
    over = failure_text(out, "test_over_limit")
    check("peak 24.00 MiB allocated is over limit_device_memory('12MiB') = 12.00 MiB" in over,
          "the over-limit message lacks the peak:\n" + over)
    check(re.search(r"top sites at the peak:\n\s+24\.00 MiB\s+100\.0%%\s+1 allocation\s+"
                    r"device_alloc \(test_sim_limits\.py:\d+\)\n\s+"
                    r"make_big \(test_sim_limits\.py:%d\)" % big, over) is not None,
          "the over-limit message lacks make_big's site at line %d:\n%s" % (big, over))
    leak_line = marked_line(SIM_TESTS, "leak")
    leaks = failure_text(out, "test_leaks")
    check("3.00 MiB in 1 allocation made during the test still allocated at its end, "
          "over limit_device_leaks('1MiB') = 1.00 MiB" in leaks,
          "the leak message lacks the leaked bytes:\n" + leaks)
    check("leak (test_sim_limits.py:%d)" % leak_line in leaks,
          "the leak message lacks the leaking line %d:\n%s" % (leak_line, leaks))
    kept = sorted(os.listdir(dump)) if os.path.isdir(dump) else []
    check(kept == sorted(["test_sim_limits.py_test_fails_itself.tdm",
                          "test_sim_limits.py_test_leaks.tdm",
                          "test_sim_limits.py_test_over_limit.tdm"]),
          "--tidemark-dump kept %r" % kept)
    # the kept snapshot holds the failing test's peak
    sys.path.insert(0, os.path.join(SRC, "python"))
    os.environ["TIDEMARK_READER_LIB"] = os.environ["READER_LIB"]
    import tidemark
    path = os.path.join(dump, "test_sim_limits.py_test_over_limit.tdm")
    if os.path.exists(path):
        snap = tidemark.load(path)
        peaks = [p.bytes for p in snap.peak()]
        check(peaks and max(peaks) >= 24 << 20, "the kept snapshot's peaks %r" % peaks)
    check("tidemark: 3 snapshots of failing tests in" in out, "no summary line of kept files")


def test_sim_under_run(folder):
    """The sim suite under `tidemark run`: the run's recording, already on,
    serves the tests and stays on, so the run's snapshot holds them all
    (test_unmarked's 64 MiB is its peak)."""
    path = os.path.join(folder, "test_sim_limits.py")
    out_dir = os.path.join(folder, "run")
    env = base_env()
    args = [os.environ["TIDEMARK"], "run", "-q", "-o", out_dir, "--", PY, "-m", "pytest",
            "-p", "pytest_tidemark", "-p", "no:cacheprovider", "-rA", path]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=folder, env=env)
    print("---- tidemark run exit %d\n%s\n%s" % (r.returncode, r.stdout[-4000:],
                                                 r.stderr[-2000:]))
    check(r.returncode == 1, "tidemark run: exit %d, not pytest's 1" % r.returncode)
    for test, state in (("test_under_limit", "PASSED"), ("test_over_limit", "FAILED"),
                        ("test_leaks", "FAILED"), ("test_small_leak", "PASSED")):
        check(outcome(r.stdout, test) == state, "under tidemark run: %s: %s, not %s"
              % (test, outcome(r.stdout, test), state))
    check("peak 24.00 MiB allocated is over limit_device_memory('12MiB')"
          in failure_text(r.stdout, "test_over_limit"),
          "under tidemark run: the over-limit message:\n" + r.stdout)
    summary = subprocess.run([os.environ["TIDEMARK"], "summary", "--bytes", out_dir],
                             capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"peak allocated [^(]*\((\d+) B\)", summary)
    check(m is not None and int(m.group(1)) >= 64 << 20,
          "the run's snapshot lacks the tests' history:\n" + summary)


def check_torch_outcomes(out, dump, what):
    want = {"test_big_tensor": "FAILED", "test_small_tensor": "PASSED",
            "test_kept_tensor": "FAILED"}
    for test, state in want.items():
        check(outcome(out, test) == state, "%s: %s: %s, not %s"
              % (what, test, outcome(out, test), state))
    big = failure_text(out, "test_big_tensor")
    check("peak 48.00 MiB allocated is over limit_device_memory('32MiB')" in big,
          "%s: the torch message lacks the peak:\n%s" % (what, big))
    check("test_big_tensor (test_torch_limits.py:%d)" % marked_line(TORCH_TESTS, "big") in big,
          "%s: the torch message lacks the test's line:\n%s" % (what, big))
    check("device 0 (NVIDIA H100 80GB HBM3)" in big, "%s: the device is not named:\n%s"
          % (what, big))
    kept = failure_text(out, "test_kept_tensor")
    check("8.00 MiB in 1 allocation made during the test still allocated" in kept and
          "test_kept_tensor (test_torch_limits.py:%d)" % marked_line(TORCH_TESTS, "leak")
          in kept, "%s: the torch leak message:\n%s" % (what, kept))
    files = sorted(os.listdir(dump)) if os.path.isdir(dump) else []
    check(files == ["test_torch_limits.py_test_big_tensor.pickle",
                    "test_torch_limits.py_test_kept_tensor.pickle"],
          "%s: --tidemark-dump kept %r" % (what, files))


def test_torch_under_run(folder):
    """The same suite under `tidemark run --simulate h100`: the run's own
    PyTorch history (tidemark_tensors) serves the tests and keeps running,
    so the run's snapshot still holds every test, each a phase."""
    env = base_env()
    dump = os.path.join(folder, "kept-run")
    out_dir = os.path.join(folder, "run")
    path = os.path.join(folder, "test_torch_limits.py")
    args = [os.environ["TIDEMARK"], "run", "--simulate", "h100", "-o", out_dir, "--",
            PY, "-m", "pytest", "-p", "pytest_tidemark", "-p", "no:cacheprovider", "-rA", path,
            "--tidemark-dump", dump]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=folder, env=env)
    print("---- tidemark run exit %d\n%s\n%s" % (r.returncode, r.stdout[-6000:],
                                                 r.stderr[-3000:]))
    check(r.returncode == 1, "tidemark run: exit %d, not pytest's 1" % r.returncode)
    check_torch_outcomes(r.stdout, dump, "under tidemark run")
    summary = subprocess.run([os.environ["TIDEMARK"], "summary", out_dir], capture_output=True,
                             text=True, timeout=120).stdout
    check("peak allocated 48.00 MiB" in summary and
          "phase pytest test_torch_limits.py::test_big_tensor" in summary,
          "the run's snapshot lacks the tests' history:\n" + summary)


def test_torch(folder):
    env = base_env()
    env["LD_PRELOAD"] = os.environ["SIMCUDA_PRELOAD"]
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.environ["SIMCUDA_LIBDIR"], "python",
                                                      "autostart"), env["PYTHONPATH"]])
    dump = os.path.join(folder, "kept-torch")
    r = run_pytest(folder, "test_torch_limits.py", TORCH_TESTS, env, ["--tidemark-dump", dump])
    check(r.returncode == 1, "pytest exit %d, not 1" % r.returncode)
    check_torch_outcomes(r.stdout, dump, "on the simulated GPU")


def main():
    if not has(PY, "pytest"):
        print("no pytest for %s (Debian: python3-pytest; the venv has it): skipped" % PY)
        return 77
    if MODE == "torch":
        if not os.environ.get("SIMCUDA_PRELOAD"):
            print("no simulated CUDA platform in this build: skipped")
            return 77
        if os.environ.get("TDM_SANITIZE"):
            print("sanitizer build: skipped (the interpreter does not carry its runtime)")
            return 77
        probe = os.path.join(SRC, "tests", "simcuda", "cuda_torch.py")
        ok = subprocess.run([PY, probe], capture_output=True).returncode == 0
        if not ok:
            print("no CUDA build of torch at %s: skipped" % PY)
            return 77
    with tempfile.TemporaryDirectory(prefix="tdm-pytest-") as folder:
        if MODE == "torch":
            test_torch(folder)
            test_torch_under_run(folder)
        else:
            test_sim(folder)
            test_sim_under_run(folder)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok: pytest_tidemark (%s) under %s" % (MODE, PY))
    return 0


if __name__ == "__main__":
    sys.exit(main())
