"""A GPT-like decoder: token and position embeddings, pre-norm blocks of
causal self-attention and an MLP, tied output head; AdamW, 3 training
steps on 8 sequences of 128 tokens."""
import torch
from torch import nn

from capture_common import phase, seed_everything, train

VOCAB, CONTEXT, WIDTH, HEADS, LAYERS, BATCH = 8192, 128, 256, 4, 4, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                                 nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x, causal):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, idx):
        n = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(n))
        causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        for block in self.blocks:
            x = block(x, causal)
        return self.head(self.norm(x))


def main():
    seed_everything(3)
    phase("init")
    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def make_batch():
        tokens = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1))
        return tokens[:, :-1], tokens[:, 1:]

    def loss_of(m, batch):
        inputs, targets = batch
        logits = m(inputs)
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    train(model, optimizer, make_batch, loss_of)


if __name__ == "__main__":
    main()
