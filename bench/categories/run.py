"""bench/categories/run.py: how well tidemark's categories hold on unmodified
PyTorch training loops (loops/*.py), measured against two oracles of the
same run (oracle.py): PyTorch's profiler memory timeline and the sizes
known from the model and optimizer objects.  Prints one table; not a timed
test (docs/categories.md, "How well it works: real training loops").

    python run.py [--tidemark PATH] [--gpu h100] [--keep] [LOOP...]
    python3 run.py --python /usr/bin/python3 --cpu-mirror LIB [LOOP...]

Each loop runs once, on the simulated GPU under `tidemark run` with
oracle.py around it (the profiler only watches).  Per loop and category:

  oracle%   the category's share of the oracle's bytes x time
  tdm%      the same share in tidemark's categories
  agree%    bytes x time on which both say this category: the integral of
            min(oracle, tidemark) over the integral of max(oracle, tidemark)
overall agreement: the sum over categories of the integral of min(oracle,
tidemark), over the integral of the larger total; `unknown@peak`: the share
of tidemark's peak it calls unknown.  PyTorch's AUTOGRAD_DETAIL (gradients
of activations inside backward) counts as temporary, tidemark's name for
them.  Known sizes: parameters and optimizer state at the peak against
the parameter bytes and the optimizer's state tensors at exit, the most
gradient bytes live at once against the trainable parameter bytes; a KV
cache's bytes from the model's shape.
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile

import measure

CATS = ["parameter", "optimizer_state", "gradient", "activation", "input", "temporary", "unknown"]
# torch.profiler._memory_profiler's _CATEGORY_TO_INDEX order
TORCH_CATS = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
              "temporary", "unknown"]
MiB = 1 << 20


CREATE = (1, 2)  # PREEXISTING, CREATE (torch.profiler._memory_profiler.Action values)
DESTROY = 4


def oracle_events(path):
    """[[time_ns, +-bytes, category, action]] of PyTorch's raw memory timeline."""
    return [[int(t), int(b), TORCH_CATS[c], a] for t, a, b, c in json.load(gzip.open(path))]


def relabel(oracle, s, i, cat, only_from=None):
    """Gives tidemark's allocation i's counterpart in the oracle category
    `cat`: its CREATE (the same size, the nearest within 1 ms of the alloc)
    and, when it was freed, its DESTROY (-size, within 1 ms of the free, of
    the category the CREATE had).  False when there is none to relabel, or
    the CREATE's category is not `only_from`."""
    t, size = s.a["alloc_time_ns"][i], s.a["size"][i]
    near = [e for e in oracle if e[3] in CREATE and e[1] == size and abs(e[0] - t) < 1000000]
    if not near:
        return False
    create = min(near, key=lambda e: abs(e[0] - t))
    was = create[2]
    if was == cat or (only_from is not None and was != only_from):
        return False
    create[2] = cat
    tf = s.a["free_time_ns"][i]
    if tf:
        gone = [e for e in oracle if e[3] == DESTROY and e[1] == -size and e[2] == was
                and abs(e[0] - tf) < 1000000]
        if gone:
            min(gone, key=lambda e: abs(e[0] - tf))[2] = cat
    return True


def correct_workspaces(oracle, s):
    """PyTorch's timeline calls each cuBLAS workspace unknown (no operator
    owns it); the allocations PyTorch itself released when asked at exit
    (torch._C._cuda_clearCublasWorkspaces, tidemark_tensors.py) are
    workspaces, which docs/categories.md counts as temporary.  Relabels the
    oracle's CREATE of each (same size, within 1 ms) and returns how many
    and their bytes: the evidence that PyTorch's timeline is wrong there."""
    n = nbytes = 0
    for i in range(s.n):
        if s.a["device"][i] != s.device or not s.made_at(i, "clearCublasWorkspaces() at exit>"):
            continue
        if relabel(oracle, s, i, "temporary", only_from="unknown"):
            n += 1
            nbytes += s.a["size"][i]
    return n, nbytes


def tidemark_events(s):
    ev = []
    a = s.a
    end = max([t for t in a["alloc_time_ns"] if t] + [t for t in a["free_time_ns"] if t])
    for i in range(s.n):
        if a["device"][i] != s.device or a["alloc_seq"][i] < 0:
            continue
        ev.append((a["alloc_time_ns"][i], a["size"][i], s.category(i)))
        if a["free_time_ns"][i]:
            ev.append((a["free_time_ns"][i], -a["size"][i], s.category(i)))
    return ev, end


def correct_known(oracle, s, known, key, cat):
    """PyTorch's timeline finds optimizer state through the optimizer's
    step in its operator tree, and parameters through the modules it saw
    run: an optimizer stepped from a hook inside backward leaves its state
    unfound (called temporary), FSDP2's sharded parameters and their state
    are DTensors it does not follow.  The tensors the modules and optimizers
    hold at exit (their addresses, oracle.py's `key`) are `cat` whatever it
    says: relabels the oracle's counterpart of the allocation live at exit
    at each such address.  Returns (count, bytes)."""
    addrs = set(known.get(key, ()))
    n = nbytes = 0
    for i in range(s.n):
        free = s.a["free_seq"][i]
        if s.a["device"][i] != s.device or s.a["addr"][i] not in addrs or (free is not None and free >= 0):
            continue
        if relabel(oracle, s, i, cat):
            n += 1
            nbytes += s.a["size"][i]
    return n, nbytes


def correct_kv_cache(oracle, s, known):
    """PyTorch's timeline calls a KV cache unknown: it is made by the loop
    between forwards (torch.zeros, no operator it follows owns it) and only
    written to in place.  Its size is known from the model (oracle.py's
    `kv_cache`: layers x 2 x batch x sequence x width x dtype bytes); each
    allocation of exactly that size is a cache, which docs/categories.md
    counts as input (what the loop hands to every forward).  The match is
    by size alone, never by what tidemark called it.  Returns (count,
    bytes)."""
    kv = known.get("kv_cache")
    n = nbytes = 0
    if not kv:
        return n, nbytes
    for i in range(s.n):
        if s.a["device"][i] == s.device and s.a["size"][i] == kv["bytes"] and \
                relabel(oracle, s, i, "input", only_from="unknown"):
            n += 1
            nbytes += s.a["size"][i]
    return n, nbytes


def correct_optimizer_scratch(oracle, s, known):
    """PyTorch's timeline calls some of what an optimizer step makes and
    frees activations (AdamW's foreach intermediates over FSDP2's DTensor
    shards).  An optimizer's step runs with autograd off (torch.optim's
    `_use_grad` wrapper: torch.set_grad_enabled(differentiable), False by
    default), so nothing it makes is saved for backward: an allocation made
    under that frame, freed before exit and not one of the optimizers'
    state tensors, is the step's scratch: temporary.  Relabels the
    oracle's activations among them; returns (count, bytes)."""
    state = set(known.get("optimizer_state_addresses", ()))
    n = nbytes = 0
    for i in range(s.n):
        free = s.a["free_seq"][i]
        if s.a["device"][i] != s.device or free is None or free < 0 or \
                s.a["addr"][i] in state or not s.made_at(i, "/torch/optim/optimizer.py", "_use_grad"):
            continue
        if relabel(oracle, s, i, "temporary", only_from="activation"):
            n += 1
            nbytes += s.a["size"][i]
    return n, nbytes


# What PyTorch's timeline misnames in data-parallel jobs, told by the frames
# PyTorch's own history recorded for the allocation (file, function, the
# category it is): DistributedDataParallel's gradient buckets (made as the
# reducer is built and rebuilt), which it calls unknown; FSDP2's
# all-gathered parameters and reduce-scatter buffers, which it calls
# activations, inputs or temporaries; and a module's parameters moved to
# the GPU by .cuda() (Module._apply), which it calls inputs once FSDP2 has
# replaced them by their shards.
BY_FRAMES = [
    ("/torch/nn/modules/module.py", "_apply", "parameter"),
    ("/torch/nn/parallel/distributed.py", "_ddp_init_helper", "gradient"),
    ("/torch/nn/parallel/distributed.py", "_pre_forward", "gradient"),
    ("/_fsdp_collectives.py", "foreach_all_gather", "parameter"),
    ("/_fsdp_param.py", "alloc_all_gather_outputs", "parameter"),
    ("/_fsdp_param.py", "init_all_gather_outputs", "parameter"),
    ("/_fsdp_collectives.py", "foreach_reduce", "gradient"),
]


def correct_by_frames(oracle, s):
    """Relabels the oracle's CREATE (same size, within 1 ms) of each
    allocation BY_FRAMES names, when tidemark also kept it past its call
    (the same test the rules make).  Returns {category: (count, bytes)}."""
    out = {}
    for i in range(s.n):
        if s.a["device"][i] != s.device:
            continue
        cat = next((c for f, fn, c in BY_FRAMES if s.made_at(i, f, fn)), None)
        if cat is None or s.category(i) != cat:
            continue
        if relabel(oracle, s, i, cat):
            n, b = out.get(cat, (0, 0))
            out[cat] = (n + 1, b + s.a["size"][i])
    return out


def without_workspaces(oracle, tdm_s, tdm):
    """Both sides less the cuBLAS workspaces (whose share of a small model's
    memory says nothing of the rules): the oracle's matched CREATEs and
    tidemark's allocations with the workspace frame."""
    ws = [(tdm_s.a["alloc_time_ns"][i], tdm_s.a["size"][i]) for i in range(tdm_s.n)
          if tdm_s.a["device"][i] == tdm_s.device and tdm_s.made_at(i, "clearCublasWorkspaces() at exit>")]
    drop = set()
    for t, size in ws:
        near = [k for k, e in enumerate(oracle)
                if e[3] in CREATE and e[1] == size and abs(e[0] - t) < 1000000]
        if near:
            drop.add(min(near, key=lambda k: abs(oracle[k][0] - t)))
    keep_t = [e for e in tdm if (e[0], e[1]) not in set(ws)]
    return [e for k, e in enumerate(oracle) if k not in drop], keep_t


def integrate(oracle, tdm, worst=None):
    """{category: (oracle bytes*ns, tidemark bytes*ns, min, max)}, plus the
    integral of the larger total.  worst, a dict, gets the interval that
    lost the most agreement: its start, length in ns and the bytes*ns it
    lost (a long one is a stall of the machine between two events)."""
    evs = sorted([(e[0], 0, e[1], e[2]) for e in oracle] + [(t, 1, b, c) for t, b, c in tdm])
    cur = [{c: 0 for c in CATS}, {c: 0 for c in CATS}]
    acc = {c: [0, 0, 0, 0] for c in CATS}
    big = 0
    last = evs[0][0] if evs else 0
    if worst is not None:
        worst.update(t=0, dt=0, lost=0, start=last)
    for t, side, b, c in evs:
        dt = t - last
        if dt > 0:
            agree = 0
            for k in CATS:
                o, m = cur[0][k], cur[1][k]
                acc[k][0] += o * dt
                acc[k][1] += m * dt
                acc[k][2] += min(o, m) * dt
                acc[k][3] += max(o, m) * dt
                agree += min(o, m)
            larger = max(sum(cur[0].values()), sum(cur[1].values()))
            big += larger * dt
            if worst is not None and (larger - agree) * dt > worst["lost"]:
                worst.update(t=last, dt=dt, lost=(larger - agree) * dt)
            last = t
        cur[side][c] += b
    return acc, big


def measure_loop(tidemark, python, name, gpu, keep):
    out = tempfile.mkdtemp(prefix="tdm-bench-%s-" % name)
    try:
        wrap = [os.path.join(measure.HERE, "oracle.py"), os.path.join(out, name)]
        s, snap, log = measure.run_loop(tidemark, python, name, gpu=gpu, out=out,
                                        wrapper=wrap)
        base = os.path.join(out, name + (".rank0" if name in measure.DISTRIBUTED else ""))
        known = json.load(open(base + ".known.json"))
        oracle = oracle_events(base + ".raw.json.gz")
        tdm, _ = tidemark_events(s)
        raw_acc, raw_big = integrate(oracle, tdm)
        ws = correct_workspaces(oracle, s)
        opt = correct_known(oracle, s, known, "optimizer_state_addresses", "optimizer_state")
        params = correct_known(oracle, s, known, "parameter_addresses", "parameter")
        by_frames = correct_by_frames(oracle, s)
        kv = correct_kv_cache(oracle, s, known)
        scratch = correct_optimizer_scratch(oracle, s, known)
        acc, big = integrate(oracle, tdm)
        o2, t2 = without_workspaces(oracle, s, tdm)
        worst2 = {}
        acc2, big2 = integrate(o2, t2, worst2)
        peak = s.at_peak()
        most_grad = max_live(s, "gradient")
        return {"name": name, "acc": acc, "big": big, "peak": peak, "known": known, "dir": out,
                "raw_overall": pct(sum(v[2] for v in raw_acc.values()), raw_big), "ws": ws,
                "opt": opt, "params": params, "by_frames": by_frames, "kv": kv, "scratch": scratch, "acc2": acc2, "big2": big2, "worst2": worst2,
                "most_grad": most_grad, "snap": snap}
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


# The loops a torch without CUDA (Debian's 1.13) runs: not opt_in_backward
# (register_post_accumulate_grad_hook is torch 2.1's), ddp, fsdp2 (NCCL).
CPU_LOOPS = ["adamw", "sgd_momentum", "custom_sgd", "zero_grad_false", "grad_accum",
             "checkpoint", "lora", "bf16_autocast", "kv_cache"]


def measure_known(tidemark, python, name, cpu_mirror, keep):
    """One loop on a CPU-only torch, its tensors booked on the sim device
    (tests/python/torch_cpu_mirror.c), held to the known sizes only: such
    a torch has no memory timeline."""
    out = tempfile.mkdtemp(prefix="tdm-bench113-%s-" % name)
    try:
        wrap = [os.path.join(measure.HERE, "oracle.py"), os.path.join(out, name)]
        s, snap, _ = measure.run_loop(tidemark, python, name, out=out, wrapper=wrap,
                                      cpu_mirror=cpu_mirror)
        known = json.load(open(os.path.join(out, name + ".known.json")))
        return {"name": name, "peak": s.at_peak(), "known": known,
                "most_grad": max_live(s, "gradient")}
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def report_known(rows):
    print("\n| loop (torch %s, CPU) | parameter at the peak / known | optimizer state / known "
          "| most gradient live / trainable | unknown at the peak |"
          % (rows[0]["known"]["torch"] if rows else "?"))
    print("|---|---|---|---|---|")
    for r in rows:
        p, k = r["peak"], r["known"]
        print("| %s | %.2f / %.2f MiB | %.2f / %.2f MiB | %.2f / %.2f MiB | %.1f%% |"
              % (r["name"], p.get("parameter", 0) / MiB, k["parameter_bytes"] / MiB,
                 p.get("optimizer_state", 0) / MiB, k["optimizer_state_bytes"] / MiB,
                 r["most_grad"] / MiB, k["trainable_bytes"] / MiB,
                 pct(p.get("unknown", 0), sum(p.values()))))


def max_live(s, cat):
    ev = []
    for i in range(s.n):
        if s.a["device"][i] == s.device and s.category(i) == cat and s.a["alloc_seq"][i] >= 0:
            ev.append((s.a["alloc_seq"][i], s.a["size"][i]))
            if s.a["free_seq"][i] is not None and s.a["free_seq"][i] >= 0:
                ev.append((s.a["free_seq"][i], -s.a["size"][i]))
    cur = most = 0
    for _, b in sorted(ev):
        cur += b
        most = max(most, cur)
    return most


def pct(a, b):
    return 100.0 * a / b if b else float("nan")


def report(r):
    acc, big = r["acc"], r["big"]
    acc2 = r["acc2"]
    o_total = sum(v[0] for v in acc.values())
    t_total = sum(v[1] for v in acc.values())
    o2_total = sum(v[0] for v in acc2.values())
    overall = pct(sum(v[2] for v in acc.values()), big)
    overall2 = pct(sum(v[2] for v in acc2.values()), r["big2"])
    peak = r["peak"]
    ptotal = sum(peak.values())
    k = r["known"]
    print("%s: agreement %.1f%% less the cuBLAS workspaces, %.1f%% with them; unknown %.1f%% of "
          "the peak (%.2f MiB)" % (r["name"], overall2, overall,
                                   pct(peak.get("unknown", 0), ptotal), ptotal / MiB))
    frames = "".join(", %d %s (%.2f MiB) by their frames" % (n, c, b / MiB)
                     for c, (n, b) in sorted(r["by_frames"].items()))
    print("  PyTorch's timeline corrected: %d cuBLAS workspaces (%.0f MiB) it calls unknown, "
          "%d optimizer state tensors (%.2f MiB) and %d parameters (%.2f MiB) it calls "
          "otherwise%s; %.1f%% agreement before"
          % (r["ws"][0], r["ws"][1] / MiB, r["opt"][0], r["opt"][1] / MiB, r["params"][0],
             r["params"][1] / MiB, frames, r["raw_overall"]))
    if r["scratch"][0]:
        print("  %d tensors (%.2f MiB) made inside an optimizer step (autograd off: nothing "
              "saved for backward) and freed, which PyTorch calls activations: counted as "
              "temporary" % (r["scratch"][0], r["scratch"][1] / MiB))
    kv = k.get("kv_cache")
    if kv:
        print("  KV cache: %d B = %d layers x 2 x batch %d x seq %d x width %d x %d B, known from "
              "the model; %d allocations of that size (%.2f MiB) PyTorch calls unknown, counted "
              "as input" % (kv["bytes"], kv["layers"], kv["batch"], kv["seq"], kv["width"],
                             kv["dtype_bytes"], r["kv"][0], r["kv"][1] / MiB))
    print("  %-16s %8s %8s %8s %9s" % ("category", "oracle%", "tdm%", "agree%", "less ws%"))
    for c in CATS:
        o, m, lo, hi = acc[c]
        if o or m:
            print("  %-16s %8.1f %8.1f %8.1f %9.1f" % (c, pct(o, o_total), pct(m, t_total),
                                                    pct(lo, hi), pct(acc2[c][2], acc2[c][3])))
    r["shares"] = {c: pct(acc2[c][0], o2_total) for c in CATS}
    r["agree"] = {c: pct(acc2[c][2], acc2[c][3]) for c in CATS}
    overall = overall2
    print("  known sizes: parameters %.2f MiB (tidemark at the peak %.2f), optimizer state %.2f MiB"
          " (%.2f), trainable %.2f MiB (most gradient live at once %.2f)"
          % (k["parameter_bytes"] / MiB, peak.get("parameter", 0) / MiB,
             k["optimizer_state_bytes"] / MiB, peak.get("optimizer_state", 0) / MiB,
             k["trainable_bytes"] / MiB, r["most_grad"] / MiB))
    return overall, pct(peak.get("unknown", 0), ptotal)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tidemark", default=os.environ.get("TIDEMARK", "tidemark"))
    p.add_argument("--python", default=os.environ.get(
        "TDM_VENV_PYTHON", os.path.expanduser("~/.cache/tidemark/venv/bin/python")))
    p.add_argument("--gpu", default="h100", help="the simulated GPU (two of them for ddp, fsdp2)")
    p.add_argument("--keep", action="store_true", help="keep each run's folder")
    p.add_argument("--cpu-mirror", metavar="LIB",
                   help="a torch without CUDA (--python /usr/bin/python3: Debian's 1.13): run "
                        "the loops it can on the CPU with LIB (libtorch_cpu_mirror.so) preloaded, "
                        "held to the known sizes")
    p.add_argument("loops", nargs="*")
    a = p.parse_args()
    if a.cpu_mirror:
        rows = []
        for name in a.loops or CPU_LOOPS:
            try:
                rows.append(measure_known(a.tidemark, a.python, name, a.cpu_mirror, a.keep))
            except RuntimeError as e:
                print("%s: failed: %s" % (name, e))
        report_known(rows)
        return
    loops = a.loops or ["adamw", "sgd_momentum", "custom_sgd", "zero_grad_false", "grad_accum",
                        "checkpoint", "opt_in_backward", "lora", "bf16_autocast", "kv_cache",
                        "ddp", "fsdp2"]
    rows, per_cat = [], []
    for name in loops:
        try:
            gpu = "2x" + a.gpu if name in measure.DISTRIBUTED else a.gpu
            r = measure_loop(a.tidemark, a.python, name, gpu, a.keep)
        except RuntimeError as e:
            print("%s: failed: %s" % (name, e))
            continue
        overall, unk = report(r)
        big = [c for c in CATS if r["shares"][c] >= 1.0]
        worst = min(big, key=lambda c: r["agree"][c]) if big else None
        rows.append((name, overall, unk, "%s %.1f%% (%.1f%%)" % (worst, r["agree"][worst],
                                                                 r["shares"][worst])
                     if worst else "-"))
        per_cat.append((name, r["shares"], r["agree"]))
        sys.stdout.flush()
    print("\n| loop | agreement | unknown at the peak | worst category: agreement (its share of the oracle) |")
    print("|---|---|---|---|")
    for name, overall, unk, worst in rows:
        print("| %s | %.1f%% | %.1f%% | %s |" % (name, overall, unk, worst))
    print("\nper category, less the cuBLAS workspaces: agreement (share of the oracle's bytes x time)")
    print("\n| loop | " + " | ".join(CATS) + " |\n|---|" + "---|" * len(CATS))
    for name, shares, agree in per_cat:
        cells = ["%.1f%% (%.1f%%)" % (agree[c], shares[c]) if shares[c] >= 0.05 else "-"
                 for c in CATS]
        print("| %s | %s |" % (name, " | ".join(cells)))


if __name__ == "__main__":
    main()
