"""tests/python/torch_train.py: a small torch.nn training loop that never
calls tidemark, with its "device memory" mirrored on tidemark's sim device
through ctypes (tdm_malloc/tdm_free of libtidemark, which the preload
library has loaded): parameters in the modules' construction, activations
in an autograd Function's forward (freed in its backward), gradients in
gradient hooks (freed when the next step zeroes them), optimizer state in
the optimizer's first step.  Run by test_torch_phases.py under `tidemark
run`; its phases and steps come only from tidemark's automatic torch hooks.

    torch_train.py [plain|checkpoint|marks] [STEPS] [PYTHON_DIR]

plain: Model -> Block -> Layer -> Linear, modules nested four deep;
checkpoint: the blocks under activation checkpointing (recomputed inside
backward); marks: the program marks its own steps and a phase with
tidemark.phase(), which automatic marks must leave alone.  MIRROR=cuda
mirrors through the fake CUDA runtime's cudaMalloc instead; MIRROR=torch
through sim_torch_cuda.py, a CUDA torch's allocator simulated.
"""
import ctypes
import os
import sys
import time
import weakref

import torch
import torch.utils.checkpoint

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
if os.environ.get("MIRROR") == "torch":  # a CUDA torch's allocator, simulated
    import sim_torch_cuda
    dev_alloc, dev_free = sim_torch_cuda.alloc, sim_torch_cuda.free
elif os.environ.get("MIRROR") == "cuda":  # the fake CUDA runtime, preloaded
    rt = ctypes.CDLL("libcudart.so.13")
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]

    def dev_alloc(nbytes):
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), nbytes) == 0
        return p.value

    def dev_free(p):
        assert rt.cudaFree(ctypes.c_void_p(p)) == 0
else:  # tidemark's sim device, through the libtidemark the preload loaded
    lib = ctypes.CDLL("libtidemark.so.0", mode=ctypes.RTLD_GLOBAL)
    lib.tdm_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                               ctypes.c_int, ctypes.c_void_p]
    lib.tdm_free.argtypes = [ctypes.c_void_p]

    def dev_alloc(nbytes):
        p = ctypes.c_void_p()
        assert lib.tdm_malloc(ctypes.byref(p), nbytes, 0, None) == 0
        return p.value

    def dev_free(p):
        lib.tdm_free(ctypes.c_void_p(p))


def nbytes(t):
    return t.numel() * t.element_size() * 64  # scaled: visible amounts


class Mirror(torch.autograd.Function):
    """Saves its input's mirror in forward, frees it in backward, or when
    autograd drops the context unused (a forward without grad, as
    checkpointing's first pass)."""

    @staticmethod
    def forward(ctx, x):
        ctx.mirror = weakref.finalize(ctx, dev_free, dev_alloc(nbytes(x)))
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.mirror()  # frees now, once
        return grad


grad_mirrors = {}


class Layer(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)
        self.mirrors = [dev_alloc(nbytes(p)) for p in self.lin.parameters()]
        for p in self.lin.parameters():
            p.register_hook(lambda g, p=p: grad_mirrors.setdefault(id(p), dev_alloc(nbytes(g))) and None)

    def forward(self, x):
        return torch.relu(Mirror.apply(self.lin(x)))


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.a, self.b = Layer(n), Layer(n)

    def forward(self, x):
        if MODE == "checkpoint":
            return torch.utils.checkpoint.checkpoint(lambda y: self.b(self.a(y)), x,
                                                     use_reentrant=True)
        return self.b(self.a(x))


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(n) for _ in range(3))
        self.head = torch.nn.Linear(n, 1)
        self.head_mirror = [dev_alloc(nbytes(p)) for p in self.head.parameters()]

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Adam(torch.optim.Adam):
    """Adam whose state is mirrored at its first step."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.state_mirrors = None

    @torch.no_grad()
    def step(self, closure=None):
        if self.state_mirrors is None:
            self.state_mirrors = [dev_alloc(2 * nbytes(p))
                                  for g in self.param_groups for p in g["params"]]
        scratch = dev_alloc(4096)  # a temporary of the update
        out = super().step(closure)
        dev_free(scratch)
        return out


torch.manual_seed(0)
model = Model(64)
opt = Adam(model.parameters(), lr=1e-3)
x = torch.randn(32, 64, requires_grad=MODE == "checkpoint")
if MODE == "marks":
    sys.path.insert(0, sys.argv[3])
    import tidemark
for step in range(STEPS):
    for p in list(grad_mirrors.values()):  # zero_grad: the gradients go
        dev_free(p)
    grad_mirrors.clear()
    opt.zero_grad(set_to_none=True)
    if MODE == "marks":
        tidemark.step()
        tidemark.phase("my_forward_pass")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
print("trained %d steps" % STEPS)
if os.environ.get("MIRROR") == "torch" and os.environ.get("SIM_TORCH_REPORT"):
    # What PyTorch itself would report, for the test to compare with the
    # snapshot: its statistics, after the cache is given back.
    import json
    sim_torch_cuda.empty_cache()
    stats = sim_torch_cuda.memory_stats()
    with open(os.environ["SIM_TORCH_REPORT"], "w") as f:
        json.dump({"max_memory_allocated": sim_torch_cuda.max_memory_allocated(),
                   "requested_peak": stats.get("requested_bytes.all.peak", 0),
                   "max_memory_reserved": sim_torch_cuda.max_memory_reserved(),
                   "memory_reserved": sim_torch_cuda.memory_reserved(),
                   "memory_allocated": sim_torch_cuda.memory_allocated(),
                   "requested_now": stats.get("requested_bytes.all.current", 0),
                   "segments": sorted(sim_torch_cuda._segments)}, f)
    if os.environ.get("SIM_TORCH_HOLD"):
        # Held until the test says go: the test kills `tidemark run` meanwhile.
        open(os.environ["SIM_TORCH_HOLD"] + ".ready", "w").close()
        while not os.path.exists(os.environ["SIM_TORCH_HOLD"] + ".go"):
            time.sleep(0.02)
