"""Mixed precision: the forward and backward under torch.autocast(bfloat16)
over fp32 master weights (the parameters), AdamW on the fp32 weights.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python bf16_autocast.py [STEPS]
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
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(STEPS):
    opt.zero_grad()
    x = torch.randn(256, 512, device=DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        loss = model(x).float().square().mean()
    loss.backward()
    opt.step()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
