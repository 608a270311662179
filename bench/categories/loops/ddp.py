"""Data parallel over two GPUs: each rank (torch.distributed.run) trains the
same MLP wrapped in DistributedDataParallel, whose reducer keeps gradient
buckets on the device and all-reduces them during backward.  Plain PyTorch
over NCCL, no tidemark calls (bench/categories, docs/categories.md).

    python -m torch.distributed.run --standalone --nproc-per-node 2 ddp.py [STEPS]
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 10)).cuda()
model = DistributedDataParallel(net, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(STEPS):
    opt.zero_grad()
    x = torch.randn(256, 512, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
dist.destroy_process_group()
print("trained %d steps" % STEPS)
