"""An MLP with LayerNorm trained 5 steps with AdamW under bf16 autocast
(the casts' copies of the weights are PyTorch's autocast cache)."""
import torch, torch.nn as nn
m = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.LayerNorm(4096), nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(m.parameters())
for _ in range(5):
    x = torch.randn(512, 1024, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(x).float().pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
