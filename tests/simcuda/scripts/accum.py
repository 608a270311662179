"""Gradient accumulation: 3 steps of 4 micro-batches each, gradients summed
in place before AdamW steps, set_to_none between steps."""
import torch, torch.nn as nn
m = nn.Sequential(nn.Linear(768, 3072), nn.ReLU(), nn.Linear(3072, 768)).cuda()
opt = torch.optim.AdamW(m.parameters())
for _ in range(3):
    for _ in range(4):
        x = torch.randn(256, 768, device="cuda")
        (m(x).pow(2).mean() / 4).backward()
    opt.step(); opt.zero_grad(set_to_none=True)
