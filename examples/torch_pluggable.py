#!/usr/bin/env python3
"""PyTorch training with tidemark as its CUDA allocator, no LD_PRELOAD.

    TIDEMARK_LIB=/path/to/libtidemark.so python3 examples/torch_pluggable.py out.tdm
    tidemark summary out.tdm

tidemark serves every CUDA tensor (through
torch.cuda.memory.CUDAPluggableAllocator), records each allocation with its
stack, the phases and steps marked below and the categories of the tagged
blocks, and writes a snapshot at the end.  PyTorch's own caching allocator
is replaced: torch.cuda.memory_stats() does not work with a pluggable
allocator, tidemark.memory_stats() does.

Without torch or without a CUDA device the script still runs: it makes the
calls torch would make (tdm_torch_alloc / tdm_torch_free, on tidemark's
simulated device) for the same three-phase loop, so the snapshot shows what
a training run looks like.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tidemark  # noqa: E402


def train_with_torch(torch, steps):
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        tidemark.step()
        tidemark.phase("forward")
        with tidemark.tag("input"):
            x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        tidemark.phase("backward")
        loss.backward()
        tidemark.phase("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def train_without_torch(steps):
    """The allocations a small model makes, through the same entry points
    PyTorch calls; sizes in bytes."""
    lib = ctypes.CDLL(tidemark.library_path())
    alloc = lib.tdm_torch_alloc
    alloc.restype = ctypes.c_void_p
    alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    free = lib.tdm_torch_free
    free.restype = None
    free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.tdm_torch_init(0)

    def tensor(n):
        p = alloc(n, 0, None)
        if not p:
            raise MemoryError("tdm_torch_alloc(%d) failed" % n)
        return (p, n)

    def release(t):
        free(t[0], t[1], 0, None)

    with tidemark.tag("parameter"):
        params = [tensor(16 << 20), tensor(16 << 10), tensor(16 << 20), tensor(4 << 10)]
    state = []
    for _ in range(steps):
        tidemark.step()
        tidemark.phase("forward")
        with tidemark.tag("input"):
            x = tensor(1 << 20)
        acts = [tensor(4 << 20), tensor(4 << 20), tensor(1 << 20)]
        tidemark.phase("backward")
        grads = [tensor(p[1]) for p in params]
        for a in acts:
            release(a)
        release(x)
        tidemark.phase("optimizer")
        if not state:
            with tidemark.tag("optimizer_state"):
                state = [tensor(p[1]) for p in params for _ in range(2)]
        for g in grads:
            release(g)
    stats = tidemark.memory_stats(0)
    print("peak allocated %.1f MiB, reserved %.1f MiB" %
          (stats["allocated_bytes.all.peak"] / 2**20, stats["reserved_bytes.all.peak"] / 2**20))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "torch_pluggable.tdm"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    try:
        import torch
        have_cuda = torch.cuda.is_available()
    except ImportError:
        torch, have_cuda = None, False

    if have_cuda:
        tidemark.use_with_torch()  # before the first CUDA tensor
    tidemark.record_memory_history(max_entries=100000)
    if have_cuda:
        train_with_torch(torch, steps)
    else:
        print("no torch with CUDA here: making torch's allocator calls directly")
        train_without_torch(steps)
    tidemark.dump_snapshot(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
