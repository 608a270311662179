"""tests/simcuda/run_gpt.py: a small GPT (6 layers, width 384, 8 x 256
tokens, vocabulary 8192) trained 20 steps with AdamW under bf16 autocast,
attention through scaled_dot_product_attention; unmodified CUDA PyTorch.
Writes the seconds its steps took (after import torch) and
PyTorch's own peaks as JSON to argv[1]."""
import json, sys, time, torch, torch.nn as nn, torch.nn.functional as F
t0 = time.time()
class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__(); s.h = h
        s.ln1 = nn.LayerNorm(d); s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d)
        s.ln2 = nn.LayerNorm(d); s.fc = nn.Linear(d, 4 * d); s.out = nn.Linear(4 * d, d)
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.out(F.gelu(s.fc(s.ln2(x))))
class GPT(nn.Module):
    def __init__(s, V=8192, d=384, L=6, h=6, T=256):
        super().__init__()
        s.tok = nn.Embedding(V, d); s.pos = nn.Embedding(T, d)
        s.blocks = nn.ModuleList(Block(d, h) for _ in range(L)); s.ln = nn.LayerNorm(d); s.head = nn.Linear(d, V, bias=False)
    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks: x = b(x)
        return s.head(s.ln(x))
m = GPT().cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
for step in range(20):
    idx = torch.randint(0, 8192, (8, 256), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(idx).view(-1, 8192), idx.view(-1))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
torch.cuda.synchronize()
json.dump({"seconds": time.time() - t0, "max_allocated": torch.cuda.max_memory_allocated(),
           "max_reserved": torch.cuda.max_memory_reserved()}, open(sys.argv[1], "w"))
