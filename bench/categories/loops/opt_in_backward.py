"""A training loop with the optimizer in backward: one AdamW per parameter,
stepped by the parameter's register_post_accumulate_grad_hook as soon as
its gradient is ready, which then drops the gradient; the loop itself calls
no optimizer.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python opt_in_backward.py [STEPS]
"""
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
torch.manual_seed(0)


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(DEVICE)


model = mlp()
opts = {p: torch.optim.AdamW([p], lr=1e-3) for p in model.parameters()}


def step_now(p):
    opts[p].step()
    opts[p].zero_grad()


for p in model.parameters():
    p.register_post_accumulate_grad_hook(step_now)
for step in range(STEPS):
    x = torch.randn(256, 512, device=DEVICE)
    loss = model(x).square().mean()
    loss.backward()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
