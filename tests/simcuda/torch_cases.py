"""tests/simcuda/torch_cases.py: unmodified PyTorch programs on the
simulated CUDA platform, each holding PyTorch's own figures
(torch.cuda.memory_stats, max_memory_reserved, _snapshot) against what the
platform saw (its SIMCUDA_TRACE log of cudaMalloc/cudaFree and the
virtual-memory calls).

    python torch_cases.py CASE TRACE_FILE

Run under LD_PRELOAD of the platform with its Python start-up folder on
PYTHONPATH (test_torch.sh does it), which turns cuDNN off through
torch.backends right after torch is imported (simcuda_torch.py,
docs/simulate.md).  Nothing of torch is patched.
"""
import os
import sys

import torch

MiB = 1 << 20
GiB = 1 << 30


DEVICE_EVENTS = ("malloc", "free", "oom", "create", "release", "map", "unmap")


def trace(path):
    """The platform's events: [kind, device, ...] for device events,
    [kind, address, size] for address reservations."""
    with open(path) as f:
        return [line.split() for line in f]


def platform_reserved(events, dev=0):
    """(current, peak) bytes the platform holds for device dev, as the
    caching allocator counts reserved memory: cudaMalloc'd segments plus
    mapped expandable-segment pages."""
    cur = peak = 0
    for e in events:
        if e[0] in ("malloc", "free", "map", "unmap") and int(e[1]) == dev:
            size = int(e[3])
            cur += size if e[0] in ("malloc", "map") else -size
            peak = max(peak, cur)
    return cur, peak


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def same_reserved(path, dev=0):
    ev = trace(path)
    cur, peak = platform_reserved(ev, dev)
    check(cur == torch.cuda.memory_reserved(dev),
          f"platform holds {cur} B = torch.cuda.memory_reserved() {torch.cuda.memory_reserved(dev)}")
    check(peak == torch.cuda.max_memory_reserved(dev),
          f"platform peak {peak} B = torch.cuda.max_memory_reserved() {torch.cuda.max_memory_reserved(dev)}")
    segs = torch.cuda.memory_snapshot()
    snap = sorted((s["address"], s["total_size"]) for s in segs if s["device"] == dev)
    live = {}
    for e in ev:
        if e[0] not in DEVICE_EVENTS or int(e[1]) != dev:
            continue
        if e[0] == "malloc":
            live[int(e[2], 16)] = int(e[3])
        elif e[0] == "free":
            live.pop(int(e[2], 16))
    if not any(e[0] == "map" for e in ev):
        check(sorted(live.items()) == snap, f"the {len(snap)} segments of torch's snapshot are the platform's live allocations")
    return ev


def case_m1(path):
    check(torch.cuda.is_available(), "torch.cuda.is_available()")
    check(torch.cuda.device_count() == 1, "device_count() == 1")
    x = torch.empty(1 << 20, device="cuda")
    s = torch.cuda.memory_stats()
    check(s["allocated_bytes.all.current"] == 4194304, "allocated 4194304")
    check(s["reserved_bytes.all.current"] == 20971520, "reserved 20971520")
    check(s["segment.all.current"] == 1, "one segment")
    p = torch.cuda.get_device_properties(0)
    check(p.name == "NVIDIA H100 80GB HBM3", f"name {p.name}")
    check(p.total_memory == 80 * GiB, f"total_memory {p.total_memory}")
    check(p.multi_processor_count == 132, "132 SMs")
    check((p.major, p.minor) == (9, 0), "compute capability 9.0")
    check(torch.cuda.get_device_capability() == (9, 0), "get_device_capability")
    free, total = torch.cuda.mem_get_info()
    check((free, total) == (80 * GiB - 20 * MiB, 80 * GiB), f"mem_get_info {free, total}")
    ev = same_reserved(path)
    check([e[0] for e in ev] == ["malloc"] and ev[0][3] == "20971520", "the platform saw one cudaMalloc(20971520)")
    maps = open("/proc/self/maps").read()
    check("libcudart.so" not in maps and "/libcublas" not in maps, "no NVIDIA runtime or cuBLAS mapped")
    del x


def case_devices(path):
    n = int(os.environ["EXPECT_DEVICES"])
    check(torch.cuda.device_count() == n, f"device_count() == {n}")
    xs = [torch.empty(3 * MiB, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
    for i in range(n):
        check(xs[i].device.index == i, f"tensor on cuda:{i}")
        check(torch.cuda.memory_reserved(i) == 20 * MiB, f"cuda:{i} reserved 20 MiB")
        same_reserved(path, i)


def case_cache(path):
    x = torch.empty(1 << 20, device="cuda")
    del x
    torch.cuda.empty_cache()
    ev = trace(path)
    check([e[0] for e in ev] == ["malloc", "free"], "del + empty_cache(): one cudaFree")
    check(torch.cuda.memory_reserved() == 0, "nothing reserved")
    y = torch.ones(3, device="cuda").cpu()
    check(y.shape == (3,) and y.dtype == torch.float32 and y.device.type == "cpu", "ones(3).cpu() comes back")
    # The fill kernel is not run: the copy reads memory nothing wrote.
    check(torch.equal(y, torch.zeros(3)), "its values are those of unwritten memory (zeros)")
    same_reserved(path)


def case_nocache(path):
    check(os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1", "caching off")
    a = torch.empty(1000, device="cuda")
    b = torch.empty(1 << 20, device="cuda")
    del a
    ev = trace(path)
    sizes = [(e[0], int(e[3])) for e in ev]
    check(sizes == [("malloc", 4000), ("malloc", 4194304), ("free", 4000)],
          f"every tensor is its own cudaMalloc/cudaFree of its size: {sizes}")
    del b


def mlp(width=256, depth=3):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).cuda()


def case_linear(path):
    m = torch.nn.Linear(512, 256).cuda()
    x = torch.randn(64, 512, device="cuda", requires_grad=True)
    y = m(x)
    y.sum().backward()
    torch.cuda.synchronize()
    check(m.weight.grad is not None and m.weight.grad.shape == (256, 512), "backward made the weight's gradient")
    check(x.grad.shape == (64, 512), "and the input's")
    same_reserved(path)
    # cuBLAS's workspace comes from the caching allocator: it is in the
    # snapshot as a block no tensor of the program owns.
    blocks = [b for s in torch.cuda.memory_snapshot() for b in s["blocks"] if b["state"] == "active_allocated"]
    sizes = sorted(b["size"] for b in blocks)
    print("active blocks:", sizes)
    check(any(s >= 1 * MiB for s in sizes), "a workspace of at least 1 MiB is allocated")


def case_mlp(path):
    torch.manual_seed(0)
    m = mlp()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for step in range(5):
        x = torch.randn(128, 256, device="cuda")
        t = torch.randint(0, 10, (128,), device="cuda")
        loss = torch.nn.functional.cross_entropy(m(x), t)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    st = opt.state[next(iter(m.parameters()))]
    check("exp_avg" in st and "exp_avg_sq" in st, "AdamW made its state")
    params = sum(p.numel() * 4 for p in m.parameters())
    check(torch.cuda.max_memory_allocated() >= 4 * params, "peak allocated holds params, grads and two moments")
    same_reserved(path)


def case_expandable(path):
    check("expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "expandable segments on")
    m = mlp(512)
    opt = torch.optim.AdamW(m.parameters())
    for _ in range(3):
        loss = m(torch.randn(256, 512, device="cuda")).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    x = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    ev = same_reserved(path)
    kinds = {e[0] for e in ev}
    check({"reserve", "create", "map"} <= kinds and "malloc" not in kinds,
          "memory came through cuMemAddressReserve/cuMemCreate/cuMemMap, no cudaMalloc")
    segs = torch.cuda.memory_snapshot()
    mapped = sum(int(e[3]) * (1 if e[0] == "map" else -1) for e in ev if e[0] in ("map", "unmap"))
    check(sum(s["total_size"] for s in segs) == mapped, "snapshot's segment sizes = mapped bytes")
    del x, m, opt, loss
    torch.cuda.empty_cache()
    ev = trace(path)
    check(any(e[0] == "unmap" for e in ev) and any(e[0] == "release" for e in ev),
          "empty_cache() unmapped and released")
    same_reserved(path)


def case_oom(path):
    x = torch.empty(70 * GiB, dtype=torch.uint8, device="cuda")
    try:
        torch.empty(20 * GiB, dtype=torch.uint8, device="cuda")
        check(False, "20 GiB more on an 80 GiB device must not fit")
    except torch.OutOfMemoryError as e:
        check("Tried to allocate 20.00 GiB" in str(e), "torch.OutOfMemoryError from the platform's out of memory")
    check(torch.cuda.memory_stats()["num_ooms"] == 1, "PyTorch counted one OOM")
    same_reserved(path)
    del x


def case_defaults(path):
    want = os.environ.get("SIMCUDA_TORCH_DEFAULTS", "1") != "0"
    check(torch.backends.cudnn.enabled is not want, f"cuDNN {'off' if want else 'left on'} by simcuda_torch")
    check(torch.backends.cuda.cudnn_sdp_enabled() is not want, "and cuDNN attention with it")


def case_sdpa(path):
    torch.manual_seed(0)
    B, H, T, D = 4, 8, 256, 64
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    y.sum().backward()
    torch.cuda.synchronize()
    check(q.grad.shape == q.shape, "attention forward and backward on PyTorch's own kernels")
    same_reserved(path)


def case_conv(path):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        loss = m(torch.randn(16, 3, 64, 64, device="cuda")).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    check(m[0].weight.grad is not None, "a conv net trains with cuDNN off")
    same_reserved(path)


def main():
    case, path = sys.argv[1], sys.argv[2]
    globals()["case_" + case](path)
    # Every check has passed: leave without the interpreter's finalization.
    # PyTorch's autograd device thread may still be dropping the last
    # backward's graph task then, and its decref takes the GIL of a
    # finalizing interpreter, which ends the thread through a noexcept
    # destructor: "terminate called without an active exception", abort
    # (PyTorch's own exit race, pytorch/pytorch#38230 and #117762; seen in
    # 1 run of 3 of the sdpa case, whose backward is its last work).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
