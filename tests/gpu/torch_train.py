"""tests/gpu/torch_train.py: small PyTorch runs for tests/gpu/run.sh.

    python3 torch_train.py MODE [ARG]

    torch       PyTorch's caching allocator with its own memory history
                (_record_memory_history): the reference
    plain       PyTorch's caching allocator, no history (run under the
                preload in mode=observe, and with expandable segments or
                backend:cudaMallocAsync as run.sh's environment says)
    raw         PyTorch with caching off (run.sh sets
                PYTORCH_NO_CUDA_MEMORY_CACHING=1): every tensor is a
                cudaMalloc of the requested size
    pluggable LIB   tidemark's allocator through CUDAPluggableAllocator,
                installed by python/tidemark.py's use_with_torch() from LIB
    expandable  as plain, then frees everything and calls empty_cache(), so
                that expandable segments are unmapped
    graph       the training step captured with torch.cuda.graph and
                replayed; the same steps run eagerly on a copy of the
                model must give the same loss
    dataloader  batches from a DataLoader with 2 worker processes and
                pin_memory=True
    nccl        one rank of a 2-GPU job (torch.distributed.run sets RANK,
                LOCAL_RANK, WORLD_SIZE, MASTER_*): an all_reduce over NCCL
    profiled OUT.json   the training run (model built inside) under
                torch.profiler with profile_memory: PyTorch's own memory
                timeline by category, written as {"time_us": [...],
                "bytes": {category: [...]}, "window_ns": [begin, end]} (the
                categories named as tidemark names them; window_ns is
                time.time_ns() around the profiled block)
    bench WHAT  times the training step: WHAT is none, torch (PyTorch's
                history with stacks="all") or pluggable LIB (tidemark's
                allocator; run.sh sets the stacks in TIDEMARK_CONF)

Prints one line of JSON: the final loss and, where PyTorch's caching
allocator is in use, its statistics.
"""
import json
import os
import sys
import time

import torch


def stat(name):
    """A device 0 statistic of PyTorch's allocator, None where it keeps none."""
    return torch.cuda.memory_stats(0).get(name)


def trace_peak_requested(snap):
    """Peak of live requested bytes over device 0's trace of a PyTorch
    memory snapshot.  The trace's alloc / free_completed sizes are the sizes
    asked for, not the rounded blocks, so this peak is PyTorch's
    requested_bytes peak, not max_memory_allocated (which counts whole
    blocks: rounded to 512 B, and a block too small to split is handed out
    whole)."""
    traces = snap.get("device_traces") or [[]]
    live = peak = 0
    for ev in traces[0]:
        if ev["action"] == "alloc":
            live += ev["size"]
        elif ev["action"] == "free_completed":
            live -= ev["size"]
        peak = max(peak, live)
    return peak


def make_model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10)).to(dev)


def data(dev):
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(512, 1024, generator=g).to(dev)
    y = torch.randint(0, 10, (512,), generator=g).to(dev)
    return x, y


def train(steps=10):
    dev = torch.device("cuda", 0)
    model = make_model(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = data(dev)
    loss = None
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


def caching_stats(out):
    out["max_memory_allocated"] = torch.cuda.max_memory_allocated(0)
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved(0)
    # PyTorch 2.1 and later; absent before.
    out["requested_peak"] = stat("requested_bytes.all.peak")


def use_tidemark(lib):
    # Through python/tidemark.py, as users do: it also installs the init,
    # reset, memory-fraction and record-stream hooks.
    os.environ["TIDEMARK_LIB"] = lib
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "python"))
    import tidemark
    tidemark.use_with_torch()


def run_graph(out, warmup=3, replays=5):
    """PyTorch's whole-network capture: warm-up on a side stream, capture
    one step (forward, backward, SGD step) with static input, replay with
    new data copied in.  A second model from the same seed takes the same
    steps eagerly."""
    dev = torch.device("cuda", 0)
    batches = [data(dev)[0] * (1 + i / 10) for i in range(warmup + replays)]
    _, y = data(dev)

    def step(model, opt, x):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    eager = make_model(dev)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.1)
    for x in batches:
        eager_loss = float(step(eager, eager_opt, x))

    model = make_model(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    static_x = torch.empty_like(batches[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in batches[:warmup]:
            static_x.copy_(x)
            step(model, opt, static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    # The captured step is the first replayed one: capturing runs nothing.
    with torch.cuda.graph(graph):
        static_loss = step(model, opt, static_x)
    for x in batches[warmup:]:
        static_x.copy_(x)
        graph.replay()
    torch.cuda.synchronize()
    out["loss"] = round(float(static_loss), 4)
    out["eager_loss"] = round(eager_loss, 4)


def run_dataloader(out):
    dev = torch.device("cuda", 0)
    g = torch.Generator().manual_seed(2)
    xs = torch.randn(2048, 1024, generator=g)
    ys = torch.randint(0, 10, (2048,), generator=g)
    ds = torch.utils.data.TensorDataset(xs, ys)
    loader = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2,
                                         pin_memory=True, shuffle=False)
    model = make_model(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = None
    for _ in range(2):
        for x, y in loader:
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    out["loss"] = round(float(loss), 4)
    out["pid"] = os.getpid()


def run_nccl(out):
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    t = torch.full((1 << 20,), float(rank + 1), device=f"cuda:{local}")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    world = dist.get_world_size()
    want = world * (world + 1) / 2
    out.update(rank=rank, device=local, pid=os.getpid(),
               allreduce_ok=bool((t == want).all().item()))
    dist.destroy_process_group()


def run_bench(out, what, lib=None, warmup=5, steps=50):
    if what == "pluggable":
        use_tidemark(lib)
    elif what == "torch":
        torch.cuda.memory._record_memory_history(max_entries=1000000, stacks="all")
    dev = torch.device("cuda", 0)
    model = make_model(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = data(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    out["ms_per_step"] = round((time.perf_counter() - t0) * 1000 / steps, 3)
    out["loss"] = round(float(loss), 4)
    if what == "torch":
        torch.cuda.memory._record_memory_history(enabled=None)


# PyTorch's memory-timeline categories as tidemark names them.  Its
# AUTOGRAD_DETAIL (autograd's own scratch in backward) has no counterpart:
# tidemark calls memory made and freed inside backward temporary.
TORCH_CATEGORIES = {"PARAMETER": "parameter", "OPTIMIZER_STATE": "optimizer_state",
                    "INPUT": "input", "TEMPORARY": "temporary",
                    "ACTIVATION": "activation", "GRADIENT": "gradient",
                    "AUTOGRAD_DETAIL": "temporary", None: "unknown"}


def run_profiled(out, path):
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler import _memory_profiler as mp
    # The block's edges on tidemark's clock (realtime nanoseconds), for
    # compare_categories.py to check the profiler's times against.
    begin = time.time_ns()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 profile_memory=True, record_shapes=True, with_stack=True) as prof:
        out["loss"] = round(train(steps=5), 4)
    end = time.time_ns()
    timeline = mp.MemoryProfileTimeline(prof._memory_profile())
    times, sizes = timeline._coalesce_timeline("cuda:0")
    # sizes[i] has a column per category in _CATEGORY_TO_INDEX order, after
    # any leading columns of its own (counted, not assumed).
    lead = len(sizes[0]) - len(mp._CATEGORY_TO_INDEX) if sizes else 0
    series = {}
    for category, index in mp._CATEGORY_TO_INDEX.items():
        name = TORCH_CATEGORIES.get(getattr(category, "name", None), "unknown")
        column = [row[lead + index] for row in sizes]
        prev = series.get(name)
        series[name] = column if prev is None else [a + b for a, b in zip(prev, column)]
    # _coalesce_timeline gives microseconds ("Convert timestamps from ns to
    # us, to match trace events"), hence time_us.
    with open(path, "w") as f:
        json.dump({"time_us": [int(t) for t in times], "bytes": series,
                   "window_ns": [begin, end]}, f)
    out["timeline_points"] = len(times)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    out = {"mode": mode}
    if mode == "pluggable":
        use_tidemark(sys.argv[2])
        out["loss"] = round(train(), 4)
    elif mode == "torch":
        torch.cuda.memory._record_memory_history(max_entries=1000000)
        out["loss"] = round(train(), 4)
        caching_stats(out)
        out["trace_peak_requested"] = trace_peak_requested(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(enabled=None)
    elif mode in ("plain", "raw"):
        out["loss"] = round(train(), 4)
        if mode == "plain":
            caching_stats(out)
    elif mode == "expandable":
        out["loss"] = round(train(), 4)
        caching_stats(out)
        # Everything train() made is gone with its frame: give the cached
        # pages back, which unmaps them from the expandable segments.
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        out["reserved_after_empty_cache"] = torch.cuda.memory_reserved(0)
    elif mode == "graph":
        run_graph(out)
        out["max_memory_reserved"] = torch.cuda.max_memory_reserved(0)
    elif mode == "dataloader":
        run_dataloader(out)
    elif mode == "nccl":
        run_nccl(out)
    elif mode == "profiled":
        run_profiled(out, sys.argv[2])
    elif mode == "bench":
        run_bench(out, sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        sys.exit("torch_train.py: unknown mode " + mode)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
