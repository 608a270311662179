"""A training loop with activation checkpointing: each block's forward runs
under torch.utils.checkpoint (non-reentrant), which keeps only its input and
recomputes the rest inside backward.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python checkpoint.py [STEPS]
"""
import sys

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
torch.manual_seed(0)
import torch.utils.checkpoint

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.a, self.b = torch.nn.Linear(n, 4 * n), torch.nn.Linear(4 * n, n)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


class Net(torch.nn.Module):
    def __init__(self, n, depth):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(n) for _ in range(depth))
        self.head = torch.nn.Linear(n, 10)

    def forward(self, x):
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
        return self.head(x)


model = Net(256, 4).to(DEVICE)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(STEPS):
    opt.zero_grad()
    x = torch.randn(512, 256, device=DEVICE)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
