"""tests/simcuda/test_category_loops.py: the categories at the peak of
unmodified PyTorch training loops (bench/categories/loops/*.py) run by
`tidemark run --simulate h100` on the simulated GPU, each loop a small model
so a case takes seconds.

    python test_category_loops.py LOOP

Every training loop runs under bench/categories/oracle.py (PyTorch's
profiler watching, the model's objects read at exit) and is held to the
bar of docs/categories.md: at the peak, parameters and optimizer state are
the bytes of the model's parameters and of its optimizers' state tensors,
`unknown` at most 5% of the peak; the most gradient bytes live at once are
the trainable parameters' (less with the optimizer in backward, which drops
each gradient once used); bytes x time agreement with PyTorch's memory
timeline (where it is wrong corrected by the evidence, bench/categories/
run.py: its cuBLAS workspaces, the optimizer state and parameters the
objects hold, a KV cache of the size the model gives, an optimizer step's
scratch it calls activations) at least 95%, the cuBLAS workspaces left
out.

custom_sgd also: an optimizer subclassing torch.optim.SGD that overrides
step() (allocating nothing) and gradients made by parameter hooks in
backward(), freed by the next step's zero_grad: every tensor the hook made
is a gradient, at the peak and over the run, with PyTorch's history and
with tidemark's own stacks (torch_tensors=pluggable).  kv_cache (inference,
no backward): the KV cache is input (PyTorch's timeline, which calls it
unknown, corrected by its size known from the model), held to the bar, and
a --rules line renames it.
ddp and fsdp2 are two-rank jobs on a simulated 2xh100 (rank 0 is held):
DDP's gradient buckets are gradients; FSDP2's all-gathered parameters
parameters, its reduce-scatter buffers and the unsharded gradients it
reduces gradients.

Environment: TIDEMARK, TDM_VENV_PYTHON, TDM_SOURCE_DIR.  Skipped (77)
without a CUDA torch, and in sanitizer builds."""
import os
import subprocess
import sys

SRC = os.environ["TDM_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "bench", "categories"))
import measure  # noqa: E402
import run as bench  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
PY = os.environ.get("TDM_VENV_PYTHON", "")
if os.environ.get("TDM_SANITIZE"):
    print("sanitizer build: skipped")
    sys.exit(77)
if not PY or subprocess.run([PY, os.path.join(SRC, "tests", "simcuda", "cuda_torch.py")],
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


def near(got, want, tensors=64):
    """Equal up to PyTorch's 512-byte blocks (tidemark counts the block a
    tensor holds, the oracle its storage's bytes)."""
    return abs(got - want) <= 512 * tensors + want // 100


def held_to_the_bar(name, grads="trainable", min_agreement=95.0, gpu="h100", sharded=False):
    """grads: what the most gradient bytes live at once are: "trainable"
    (the trainable parameters'), "fewer" (the optimizer in backward drops
    each once used), "buckets" (DDP: the gradients and the reducer's
    buckets, rebuilt once: at least twice the trainable parameters').
    sharded (FSDP2 on two ranks): the model's parameters and gradients are
    this rank's shards; at the peak the all-gathered parameters of the
    layers in use add at most the whole model (two shards), and the
    reduce-scatter buffers are whole layers' gradients."""
    r = bench.measure_loop(TIDEMARK, PY, name, gpu, keep=False)
    peak, k = r["peak"], r["known"]
    total = sum(peak.values())
    if sharded:
        got, shard = peak.get("parameter", 0), k["parameter_bytes"]
        check(shard < got <= 3 * shard + 64 * 512,
              "%s: parameters at the peak %.2f MiB: the rank's shards %.2f MiB and the "
              "all-gathered layers, at most the whole model" % (name, got / MiB, shard / MiB))
        check(shard < r["most_grad"] <= 3 * shard + 64 * 512,
              "%s: at most %.2f MiB of gradients live: the shards' and the reduce-scatter "
              "buffers of whole layers" % (name, r["most_grad"] / MiB))
        grads = None
    check(sharded or near(peak.get("parameter", 0), k["parameter_bytes"]),
          "%s: parameters at the peak %.2f MiB, the model's %.2f MiB (%s)"
          % (name, peak.get("parameter", 0) / MiB, k["parameter_bytes"] / MiB, shown(peak)))
    check(near(peak.get("optimizer_state", 0), k["optimizer_state_bytes"]),
          "%s: optimizer state at the peak %.2f MiB, the optimizers' state tensors %.2f MiB"
          % (name, peak.get("optimizer_state", 0) / MiB, k["optimizer_state_bytes"] / MiB))
    if grads == "trainable":
        check(near(r["most_grad"], k["trainable_bytes"]),
              "%s: at most %.2f MiB of gradients live, the trainable parameters %.2f MiB"
              % (name, r["most_grad"] / MiB, k["trainable_bytes"] / MiB))
    elif grads == "buckets":
        check(2 * k["trainable_bytes"] <= r["most_grad"] <= 3 * k["trainable_bytes"] + 64 * 512,
              "%s: at most %.2f MiB of gradients and buckets live, 2 to 3 times the trainable "
              "parameters' %.2f MiB" % (name, r["most_grad"] / MiB, k["trainable_bytes"] / MiB))
    elif grads == "fewer":
        check(0 < r["most_grad"] < k["trainable_bytes"],
              "%s: at most %.2f MiB of gradients live, fewer than the trainable parameters' "
              "%.2f MiB (each dropped once the optimizer used it)"
              % (name, r["most_grad"] / MiB, k["trainable_bytes"] / MiB))
    unknown = 100.0 * peak.get("unknown", 0) / total if total else 100.0
    check(unknown <= 5.0, "%s: unknown %.1f%% of the peak (at most 5%%)" % (name, unknown))
    agreement = 100.0 * sum(v[2] for v in r["acc2"].values()) / r["big2"]
    w = r["worst2"]
    check(agreement >= min_agreement,
          "%s: bytes x time agreement with PyTorch's timeline %.1f%% (at least %.0f%%)%s"
          % (name, agreement, min_agreement, "" if agreement >= min_agreement else
             "; per category %s; the worst interval, %.3f s after the first event and %.3f s "
             "long, lost %.1f%% of the whole" % (
                 ", ".join("%s %.1f%%" % (c, 100.0 * v[2] / v[3]) for c, v in r["acc2"].items()
                           if v[3]),
                 (w["t"] - w["start"]) / 1e9, w["dt"] / 1e9, 100.0 * w["lost"] / r["big2"])))
    return r


def case_kv_cache():
    """Inference: no optimizer, autograd off, so every outermost forward (a
    token) is a step, followed by a data phase.  Each sequence's KV cache,
    handed to every forward and let go in a data phase, is input (the first
    one, made before the first forward, like the model, too); the model's
    parameters are the only parameters at the peak; a rule of the user's
    names the caches."""
    r = bench.measure_loop(TIDEMARK, PY, "kv_cache", "h100", keep=True)
    s, snap = measure.read(TIDEMARK, r["snap"]), r["snap"]
    caches = [i for i in range(s.n) if s.made_at(i, "kv_cache.py", "new_cache")]
    cats = sorted(set(s.category(i) for i in caches))
    check(len(caches) == 2 and cats == ["input"],
          "kv_cache: the %d KV caches are %s (input)" % (len(caches), cats))
    check(near(r["peak"].get("parameter", 0), r["known"]["parameter_bytes"]),
          "kv_cache: parameters at the peak %.2f MiB, the model's %.2f MiB"
          % (r["peak"].get("parameter", 0) / MiB, r["known"]["parameter_bytes"] / MiB))
    rules = os.path.join(os.path.dirname(snap), "rules.txt")
    with open(rules, "w") as f:
        f.write("activation function=new_cache$ file=kv_cache[.]py$\n")
    out = subprocess.run([TIDEMARK, "categories", "--rules", rules, "--explain", "new_cache", snap],
                         capture_output=True, text=True).stdout
    lines = [ln for ln in out.splitlines() if "allocs" in ln]
    check(len(lines) == 1 and "activation: rule %s:1" % rules in lines[0] and "2 allocs" in lines[0],
          "kv_cache: --rules renames both caches: %s" % lines)
    peak = r["peak"]
    check(peak.get("unknown", 0) <= sum(peak.values()) // 20,
          "kv_cache: unknown at most 5%% of the peak: %s" % shown(peak))
    check(r["kv"][0] == 2, "kv_cache: PyTorch's timeline corrected for %d caches of the known "
          "%d B (want 2)" % (r["kv"][0], r["known"]["kv_cache"]["bytes"]))
    agreement = 100.0 * sum(v[2] for v in r["acc2"].values()) / r["big2"]
    check(agreement >= 95.0, "kv_cache: bytes x time agreement with PyTorch's timeline %.1f%% "
          "(at least 95%%)" % agreement)


CASES = {
    "custom_sgd": lambda: (case_custom_sgd(), held_to_the_bar("custom_sgd")),
    "adamw": lambda: held_to_the_bar("adamw"),
    "sgd_momentum": lambda: held_to_the_bar("sgd_momentum"),
    "zero_grad_false": lambda: held_to_the_bar("zero_grad_false"),
    "grad_accum": lambda: held_to_the_bar("grad_accum"),
    "checkpoint": lambda: held_to_the_bar("checkpoint"),
    "opt_in_backward": lambda: held_to_the_bar("opt_in_backward", grads="fewer"),
    "lora": lambda: held_to_the_bar("lora"),
    "bf16_autocast": lambda: held_to_the_bar("bf16_autocast"),
    "kv_cache": case_kv_cache,
    "ddp": lambda: held_to_the_bar("ddp", grads="buckets", gpu="2xh100"),
    "fsdp2": lambda: held_to_the_bar("fsdp2", gpu="2xh100", sharded=True),
}

if len(sys.argv) != 2 or sys.argv[1] not in CASES:
    sys.exit("usage: test_category_loops.py %s" % "|".join(CASES))
CASES[sys.argv[1]]()
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
