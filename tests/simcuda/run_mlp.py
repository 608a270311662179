"""tests/simcuda/run_mlp.py: a small MLP trained with AdamW, unmodified
CUDA PyTorch; writes PyTorch's own peaks (max_memory_reserved,
max_memory_allocated) as JSON to argv[1], and the device it ran on, for
test_run_simulate.sh to hold tidemark's recording against."""
import json, sys, torch
torch.backends.cudnn.enabled = False
m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.AdamW(m.parameters())
for _ in range(5):
    loss = torch.nn.functional.cross_entropy(m(torch.randn(256, 512, device="cuda")), torch.randint(0, 10, (256,), device="cuda"))
    opt.zero_grad(); loss.backward(); opt.step()
torch.cuda.synchronize()
p = torch.cuda.get_device_properties(0)
json.dump({"devices": torch.cuda.device_count(), "name": p.name, "total": p.total_memory, "max_reserved": torch.cuda.max_memory_reserved(), "max_allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.memory_reserved()}, open(sys.argv[1], "w"))
