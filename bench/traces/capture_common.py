"""Shared by the bench/traces training scripts: phase marks and the loop.

Run under the capture shim (capture.sh does it): the shim writes every
tensor allocation (posix_memalign/free) to TDM_CAPTURE_OUT, and
`phase(name)` adds a `phase` row so a replay or an inference can tell
forward from backward.  Without the shim, phase() does nothing and the
scripts simply train.
"""
import ctypes
import random

import torch

try:
    _mark = ctypes.CDLL(None).tidemark_capture_phase
    _mark.argtypes = [ctypes.c_char_p]
except AttributeError:
    _mark = None


def phase(name):
    if _mark is not None:
        _mark(name.encode())


def seed_everything(seed):
    # One intra-op thread: the order of allocations is then the same on
    # every run and every machine.
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    random.seed(seed)


def train(model, optimizer, make_batch, loss_of, steps=3):
    """The loop every script runs: phases as in shared/traces/README.md."""
    for _ in range(steps):
        phase("step")
        phase("data")
        batch = make_batch()
        phase("forward")
        loss = loss_of(model, batch)
        phase("backward")
        loss.backward()
        phase("optimizer")
        optimizer.step()
        phase("zero_grad")
        # Gradients freed, as PyTorch 2 does by default.
        optimizer.zero_grad(set_to_none=True)
        del batch, loss
    phase("end")
