"""Activation checkpointing: eight blocks under torch.utils.checkpoint
(non-reentrant), so activations are recomputed in backward; 3 steps."""
import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint
blocks = nn.ModuleList(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
                       for _ in range(8)).cuda()
opt = torch.optim.AdamW(blocks.parameters())
for _ in range(3):
    x = torch.randn(256, 1024, device="cuda", requires_grad=True)
    for b in blocks:
        x = x + checkpoint(b, x, use_reentrant=False)
    opt.zero_grad(); x.pow(2).mean().backward(); opt.step()
