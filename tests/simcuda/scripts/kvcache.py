"""Inference with a KV cache: a 4-layer decoder fills its cache for a
128-token prompt, then decodes 64 tokens one at a time, the cache grown by
torch.cat each step, under torch.no_grad (greedy: argmax)."""
import torch, torch.nn as nn, torch.nn.functional as F
D, H, L, V = 512, 8, 4, 4096
class Layer(nn.Module):
    def __init__(s):
        super().__init__(); s.qkv = nn.Linear(D, 3 * D); s.o = nn.Linear(D, D); s.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
    def forward(s, x, cache):
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in s.qkv(x).split(D, 2))
        if cache:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=not cache)
        x = x + s.o(y.transpose(1, 2).reshape(B, T, D))
        return x + s.ff(x), (k, v)
emb, layers, head = nn.Embedding(V, D).cuda(), nn.ModuleList(Layer() for _ in range(L)).cuda(), nn.Linear(D, V).cuda()
with torch.no_grad():
    tok = torch.randint(0, V, (4, 128), device="cuda")
    caches = [None] * L
    for _ in range(64):
        x = emb(tok)
        for i, l in enumerate(layers):
            x, caches[i] = l(x, caches[i])
        tok = head(x[:, -1:]).argmax(-1)
