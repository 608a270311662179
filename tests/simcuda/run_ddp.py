"""tests/simcuda/run_ddp.py [ddp|fsdp2]: one rank of a two-rank data-parallel
job over NCCL (torch.distributed.run sets RANK, LOCAL_RANK, WORLD_SIZE and
MASTER_*), unmodified CUDA PyTorch: a few training steps of a small MLP on
the rank's own device, wrapped in DistributedDataParallel (ddp, the
default) or sharded with FSDP2's fully_shard (fsdp2).  Prints one line of JSON with the rank, its pid and
device, and PyTorch's own peaks, for test_ddp.sh to hold each rank's
snapshot against."""
import json, os, sys, torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
if (sys.argv[1:] or ["ddp"])[0] == "fsdp2":
    from torch.distributed.fsdp import fully_shard
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    model = fully_shard(m)
else:
    model = DDP(m, device_ids=[local])
opt = torch.optim.AdamW(model.parameters())
for _ in range(4):
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
# A collective's copy (the platform runs no kernels, so the values come
# from the host): all-gather puts this rank's chunk into every slot.
mine = torch.tensor([rank + 1.0, rank + 2.0]).cuda()
every = torch.empty(2 * dist.get_world_size(), device="cuda")
dist.all_gather_into_tensor(every, mine)
gathered = every.cpu().tolist()
torch.cuda.synchronize()
out = {"gathered": gathered, "rank": rank, "world": dist.get_world_size(), "pid": os.getpid(), "device": torch.cuda.current_device(),
       "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved()}
dist.destroy_process_group()
print(json.dumps(out), flush=True)
