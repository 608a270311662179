"""tests/simcuda/test_category_loops.py: the categories at the peak of
unmodified PyTorch training loops (bench/categories/loops/*.py) run by
`tidemark run --simulate h100` on the simulated GPU, each loop a small model
so a case takes seconds.

    python test_category_loops.py LOOP

custom_sgd: an optimizer subclassing torch.optim.SGD that overrides step()
(allocating nothing) and gradients made by parameter hooks in backward(),
freed by the next step's zero_grad: every tensor the hook made is a
gradient, at the peak and over the run (with tidemark's own stacks,
torch_tensors=pluggable, the engine's frames match the gradient rule and
no allocation outside backward comes before zero_grad frees them: the
free's own stack says backward had returned), and the peak's parameters
are the model's.

Environment: TIDEMARK, TDM_VENV_PYTHON, TDM_SOURCE_DIR.  Skipped (77)
without a CUDA torch, and in sanitizer builds."""
import os
import subprocess
import sys

SRC = os.environ["TDM_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "bench", "categories"))
import measure  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
PY = os.environ.get("TDM_VENV_PYTHON", "")
if os.environ.get("TDM_SANITIZE"):
    print("sanitizer build: skipped")
    sys.exit(77)
if not PY or subprocess.run([PY, "-c", "import torch, sys; sys.exit(0 if torch.version.cuda else 1)"],
                            capture_output=True).returncode != 0:
    print("no CUDA build of torch at TDM_VENV_PYTHON=%r: skipped" % PY)
    sys.exit(77)

MiB = 1 << 20
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def shown(cats):
    return ", ".join("%s %.2f MiB" % (k, v / MiB) for k, v in sorted(cats.items()))


def block(n):
    """What PyTorch's caching allocator holds for a tensor of n bytes."""
    return max(512, (n + 511) // 512 * 512)


def mlp_param_bytes(sizes):
    """Parameters of an MLP of torch.nn.Linear layers: (bytes, bytes in
    PyTorch's blocks).  Under torch_tensors=pluggable an allocation is the
    size PyTorch asked for; in PyTorch's history, the block it held."""
    shapes = [n for i, o in zip(sizes, sizes[1:]) for n in (4 * i * o, 4 * o)]
    return sum(shapes), sum(block(n) for n in shapes)


def case_custom_sgd():
    params = mlp_param_bytes([512, 1024, 1024, 10])
    for conf in (None, "torch_tensors=pluggable"):
        how = conf or "PyTorch's history merged"
        s, snap, _ = measure.run_loop(TIDEMARK, PY, "custom_sgd", [6], conf=conf)
        peak = s.at_peak()
        check(peak.get("parameter") in params,
              "%s: parameters at the peak %.2f MiB = the model's %.2f MiB (%s)"
              % (how, peak.get("parameter", 0) / MiB, params[1] / MiB, shown(peak)))
        hook = [i for i in range(s.n) if s.made_at(i, "custom_sgd.py", "<lambda>")]
        wrong = [i for i in hook if s.category(i) != "gradient"]
        check(len(hook) == 36 and not wrong,
              "%s: the hook made %d tensors (want 36: 6 steps x 6 parameters), %d not gradient%s"
              % (how, len(hook), len(wrong),
                 "" if not wrong else ": " + measure.explain(TIDEMARK, snap, "custom_sgd.py:")[-1200:]))
        at_peak = [i for i in hook if s.live_at(i, s.peak_seq)]
        check(at_peak and all(s.category(i) == "gradient" for i in at_peak),
              "%s: the %d hook-made tensors live at the peak are gradients" % (how, len(at_peak)))


CASES = {"custom_sgd": case_custom_sgd}

if len(sys.argv) != 2 or sys.argv[1] not in CASES:
    sys.exit("usage: test_category_loops.py %s" % "|".join(CASES))
CASES[sys.argv[1]]()
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
