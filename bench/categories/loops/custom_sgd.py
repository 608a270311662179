"""A training loop whose optimizer subclasses torch.optim.SGD and overrides
step() (it never calls SGD.step), with every gradient made by a hook on its
parameter during backward() (the hook scales the gradient: autograd keeps
the hook's result as .grad).  Plain PyTorch, no tidemark calls.

    python custom_sgd.py [STEPS]
"""
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6


class ScaledSGD(torch.optim.SGD):
    """SGD without momentum, its update written out; no state."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])


torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 10)).to(DEVICE)
for p in model.parameters():
    p.register_hook(lambda g: g * 0.5)
opt = ScaledSGD(model.parameters(), lr=0.01)
for step in range(STEPS):
    opt.zero_grad()
    x = torch.randn(256, 512, device=DEVICE)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
