"""tests/gpu/torch_train.py: a small PyTorch training run for tests/gpu/run.sh.

    python3 torch_train.py torch      PyTorch's own caching allocator, no
                                      tidemark: the reference (its stats and
                                      its memory snapshot of the run)
    python3 torch_train.py raw        PyTorch's allocator with caching off
                                      (run.sh sets PYTORCH_NO_CUDA_MEMORY_CACHING=1
                                      and preloads tidemark in mode=cache, so
                                      every tensor is a cudaMalloc tidemark serves;
                                      PyTorch keeps no stats then)
    python3 torch_train.py pluggable LIB   tidemark's allocator through
                                      torch.cuda.memory.CUDAPluggableAllocator,
                                      installed by python/tidemark.py's
                                      use_with_torch() with LIB (alloc, free,
                                      init, reset, fraction, record_stream)
    python3 torch_train.py expandable PyTorch's own caching allocator with
                                      expandable segments (cuMemCreate/cuMemMap
                                      through cudaGetDriverEntryPoint)

Trains the same MLP for a few steps (fixed seed, fixed shapes) and prints
one line of JSON: the final loss and, where PyTorch's caching allocator is
in use (torch, expandable), its max_memory_allocated and the peak of its
own memory snapshot of the run (alloc and free_completed events of
device 0).
"""
import json
import os
import sys

import torch


def snapshot_peak(snap):
    """Peak of live bytes over the trace of device 0 of a memory snapshot."""
    traces = snap.get("device_traces") or [[]]
    live = peak = 0
    for ev in traces[0]:
        if ev["action"] == "alloc":
            live += ev["size"]
        elif ev["action"] == "free_completed":
            live -= ev["size"]
        peak = max(peak, live)
    return peak


def train(steps=10):
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=dev)
    y = torch.randint(0, 10, (512,), device=dev)
    loss = None
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "raw"
    out = {"mode": mode}
    if mode == "pluggable":
        # Through python/tidemark.py, as users do: it also installs the
        # init, reset, memory-fraction and record-stream hooks.
        os.environ["TIDEMARK_LIB"] = sys.argv[2]
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "..", "python"))
        import tidemark
        tidemark.use_with_torch()
    # Only PyTorch's caching allocator keeps stats and history.
    stats = mode in ("torch", "expandable")
    if stats:
        torch.cuda.memory._record_memory_history(max_entries=1000000)
    out["loss"] = round(train(), 4)
    if stats:
        out["max_memory_allocated"] = torch.cuda.max_memory_allocated(0)
        out["torch_snapshot_peak"] = snapshot_peak(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(enabled=None)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
