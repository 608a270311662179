"""A training loop with torch.optim.Adam that zeroes its gradients in place,
zero_grad(set_to_none=False): the gradients are made by the first backward
and kept for the whole run.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python zero_grad_false.py [STEPS]
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
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(STEPS):
    opt.zero_grad(set_to_none=False)
    x = torch.randn(256, 512, device=DEVICE)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
