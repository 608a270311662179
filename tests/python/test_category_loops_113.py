"""tests/python/test_category_loops_113.py: the category loops of
bench/categories on Debian's torch 1.13 (CPU only), the categories at the
peak held to the sizes known from the model's objects.

    python3 test_category_loops_113.py LOOP

torch 1.13 has no CUDA here, no pluggable allocator and no memory timeline,
so each loop runs on the CPU (the loops take CUDA when torch has it, the
CPU otherwise) under `tidemark run`, inside bench/categories/oracle.py,
with torch_cpu_mirror.c preloaded: every tensor storage PyTorch's CPU
allocator makes is booked on tidemark's sim device, with the Python frames
that made it and the phases torch's hooks mark.  At the peak: parameters
and optimizer state are the bytes of the model's parameters and of its
optimizers' state tensors, `unknown` at most 5%; the most gradient bytes
live at once are the trainable parameters' (LoRA: the adapters').
custom_sgd also: the tensors the parameter hooks made in backward that
became .grad are the gradients (torch 1.13 zeroes .grad in place, so
later hook results are added into them and freed: temporaries).  kv_cache: the two KV caches are input, and a --rules line
renames them.  The loops 1.13 cannot run are not here: opt_in_backward
(register_post_accumulate_grad_hook came with torch 2.1), ddp and fsdp2
(NCCL, fully_shard).

Environment: TIDEMARK, CPU_MIRROR (libtorch_cpu_mirror.so), TDM_SOURCE_DIR.
Skipped (77) without torch, with a torch that has CUDA (the simulated
GPU's loops are simcuda.categories.*), and in sanitizer builds (TDM_SANITIZE:
the sanitized mirror would need the sanitizer's runtime preloaded before it
into Debian's python; what it books goes through the recorder's paths that
the other tests run under the sanitizers)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ["TDM_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "bench", "categories"))
import measure  # noqa: E402
import run as bench  # noqa: E402

# Before torch's import, which takes a sanitizer build's nine skips 2 s each.
if os.environ.get("TDM_SANITIZE"):
    print("sanitizer build: skipped")
    sys.exit(77)
try:
    import torch
except ImportError:
    print("no torch: skipped")
    sys.exit(77)
if torch.cuda.is_available():
    print("torch %s has CUDA: its loops are simcuda.categories.*: skipped" % torch.__version__)
    sys.exit(77)

TIDEMARK = os.environ["TIDEMARK"]
MIRROR = os.environ["CPU_MIRROR"]
MiB = 1 << 20
LOOPS = ("adamw", "sgd_momentum", "custom_sgd", "zero_grad_false", "grad_accum", "checkpoint",
         "lora", "bf16_autocast", "kv_cache")
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def near(got, want, tensors=64):
    """Equal up to tidemark's 512-byte blocks, one per tensor."""
    return abs(got - want) <= 512 * tensors + want // 100


def shown(cats):
    return ", ".join("%s %.2f MiB" % (k, v / MiB) for k, v in sorted(cats.items()))


if len(sys.argv) != 2 or sys.argv[1] not in LOOPS:
    sys.exit("usage: test_category_loops_113.py %s" % "|".join(LOOPS))
name = sys.argv[1]
out = tempfile.mkdtemp(prefix="tdm-cat113-%s-" % name)
try:
    wrap = [os.path.join(measure.HERE, "oracle.py"), os.path.join(out, name)]
    s, snap, _ = measure.run_loop(TIDEMARK, sys.executable, name, out=out, wrapper=wrap,
                                  cpu_mirror=MIRROR)
    k = json.load(open(os.path.join(out, name + ".known.json")))
    peak = s.at_peak()
    total = sum(peak.values())
    print("torch %s, %s: peak %s" % (k["torch"], name, shown(peak)))
    check(near(peak.get("parameter", 0), k["parameter_bytes"]),
          "parameters at the peak %.2f MiB, the model's %.2f MiB"
          % (peak.get("parameter", 0) / MiB, k["parameter_bytes"] / MiB))
    check(near(peak.get("optimizer_state", 0), k["optimizer_state_bytes"]),
          "optimizer state at the peak %.2f MiB, the optimizers' state tensors %.2f MiB"
          % (peak.get("optimizer_state", 0) / MiB, k["optimizer_state_bytes"] / MiB))
    most = bench.max_live(s, "gradient")
    if name == "kv_cache":
        check(most == 0, "no gradients in inference (%.2f MiB)" % (most / MiB))
    else:
        check(near(most, k["trainable_bytes"]),
              "at most %.2f MiB of gradients live, the trainable parameters %.2f MiB"
              % (most / MiB, k["trainable_bytes"] / MiB))
    unknown = 100.0 * peak.get("unknown", 0) / total if total else 100.0
    check(unknown <= 5.0, "unknown %.1f%% of the peak (at most 5%%)" % unknown)
    if name == "custom_sgd":
        # torch 1.13's zero_grad zeroes .grad in place (set_to_none=False):
        # the first step's hook results become the .grad tensors, kept to
        # the end; later ones are added into them and freed inside backward
        hook = [i for i in range(s.n) if s.made_at(i, "custom_sgd.py", "<lambda>")]
        grads = [i for i in hook if s.category(i) == "gradient"]
        kept = [i for i in hook if s.a["free_seq"][i] is None or s.a["free_seq"][i] < 0]
        check(sorted(grads) == sorted(kept) and len(kept) == 6 and
              near(sum(s.a["size"][i] for i in grads), k["trainable_bytes"]),
              "of the %d tensors the hooks made, the %d kept as .grad are the gradients (%d, "
              "%.2f MiB: the trainable parameters')"
              % (len(hook), len(kept), len(grads), sum(s.a["size"][i] for i in grads) / MiB))
    if name == "kv_cache":
        caches = [i for i in range(s.n) if s.made_at(i, "kv_cache.py", "Decoder.new_cache")]
        cats = sorted(set(s.category(i) for i in caches))
        sizes = sorted(set(s.a["size"][i] for i in caches))
        check(len(caches) == 2 and cats == ["input"] and sizes == [k["kv_cache"]["bytes"]],
              "the %d KV caches (%s B, known %d B) are %s (input)"
              % (len(caches), sizes, k["kv_cache"]["bytes"], cats))
        rules = os.path.join(out, "rules.txt")
        with open(rules, "w") as f:
            f.write("activation function=new_cache$ file=kv_cache[.]py$\n")
        text = subprocess.run([TIDEMARK, "categories", "--rules", rules, "--explain", "new_cache",
                               snap], capture_output=True, text=True).stdout
        lines = [ln for ln in text.splitlines() if "allocs" in ln]
        check(len(lines) == 1 and "activation: rule %s:1" % rules in lines[0] and
              "2 allocs" in lines[0], "--rules renames both caches: %s" % lines)
finally:
    shutil.rmtree(out, ignore_errors=True)
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
