"""Inference with a KV cache: a small attention decoder generates tokens one
at a time under torch.no_grad(), each step appending its keys and values to
a cache preallocated for the whole sequence.
Plain PyTorch on CUDA (on the CPU with a torch that has none), no tidemark
calls (bench/categories, docs/categories.md).

    python kv_cache.py [STEPS]
"""
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
BATCH = 8
torch.manual_seed(0)


class Decoder(torch.nn.Module):
    def __init__(self, n, layers, vocab, max_len):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, n)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(n, 3 * n) for _ in range(layers))
        self.out = torch.nn.Linear(n, vocab)
        self.n, self.max_len = n, max_len

    def new_cache(self, batch):
        shape = (len(self.qkv), 2, batch, self.max_len, self.n)
        return torch.zeros(shape, device=self.out.weight.device)

    def forward(self, tok, cache, pos):
        x = self.emb(tok)
        for i, qkv in enumerate(self.qkv):
            q, k, v = qkv(x).chunk(3, dim=-1)
            cache[i, 0, :, pos] = k
            cache[i, 1, :, pos] = v
            keys, vals = cache[i, 0, :, :pos + 1], cache[i, 1, :, :pos + 1]
            att = torch.softmax(torch.einsum("bn,btn->bt", q, keys) / self.n ** 0.5, -1)
            x = x + torch.einsum("bt,btn->bn", att, vals)
        return self.out(x)


model = Decoder(256, 4, 1000, 64).to(DEVICE).eval()
with torch.no_grad():
    for seq in range(max(1, STEPS // 3)):
        cache = model.new_cache(BATCH)
        tok = torch.zeros(BATCH, dtype=torch.long, device=DEVICE)
        for pos in range(32):
            tok = model(tok, cache, pos).argmax(-1)
        del cache
if DEVICE == "cuda":
    torch.cuda.synchronize()
print("generated %d sequences" % max(1, STEPS // 3))
