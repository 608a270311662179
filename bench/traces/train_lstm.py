"""LSTM language model, 3 training steps, a different sequence length per
batch.  The varying length is what fragments a caching allocator: every
step's activations (one set per time step) come in sizes the previous step
never asked for, so cached blocks of the old sizes get split or left idle."""
import random

import torch
from torch import nn

from capture_common import phase, seed_everything, train

VOCAB, EMBED, HIDDEN, LAYERS, BATCH = 8000, 256, 512, 2, 32


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN, LAYERS, dropout=0.1)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def main():
    seed_everything(1)
    phase("init")
    model = LanguageModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def make_batch():
        length = random.randint(8, 64)
        tokens = torch.randint(0, VOCAB, (length + 1, BATCH))
        return tokens[:-1], tokens[1:]

    def loss_of(m, batch):
        inputs, targets = batch
        logits = m(inputs)
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    train(model, optimizer, make_batch, loss_of)


if __name__ == "__main__":
    main()
