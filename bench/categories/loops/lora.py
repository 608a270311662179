"""LoRA: a frozen base model (requires_grad False: parameters with no
gradient) with trainable low-rank adapters, AdamW over the adapters only.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python lora.py [STEPS]
"""
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
torch.manual_seed(0)


class LoRALinear(torch.nn.Module):
    def __init__(self, n_in, n_out, rank=8):
        super().__init__()
        self.base = torch.nn.Linear(n_in, n_out)
        self.base.requires_grad_(False)
        self.lora_a = torch.nn.Parameter(torch.randn(rank, n_in) * 0.01)
        self.lora_b = torch.nn.Parameter(torch.zeros(n_out, rank))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t()) @ self.lora_b.t()


model = torch.nn.Sequential(LoRALinear(512, 1024), torch.nn.ReLU(),
                            LoRALinear(1024, 1024), torch.nn.ReLU(),
                            LoRALinear(1024, 10)).to(DEVICE)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(STEPS):
    opt.zero_grad()
    x = torch.randn(256, 512, device=DEVICE)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("trained %d steps" % STEPS)
