"""tests/simcuda/history_pickle.py: a real PyTorch memory history, as
torch.cuda.memory._dump_snapshot() writes it, of a short training run on
every device there is (SIMCUDA_GPU=2xh100: two), with
user_metadata (_set_memory_metadata), a tensor annotation
(_annotate_tensor) and profiler annotations (record_function with
global_record_annotations), under whatever PYTORCH_CUDA_ALLOC_CONF says:

    python history_pickle.py OUT.pickle OUT.json

OUT.json: max_memory_reserved(), max_memory_allocated() and the reserved
timeline (torch's own segment events summed) of every device."""
import json, sys, torch, torch.nn as nn
torch.cuda.memory._record_memory_history(max_entries=1000000, global_record_annotations=True)
for dev in range(torch.cuda.device_count()):
    with torch.cuda.device(dev):
        torch.cuda.memory._set_memory_metadata("device %d setup" % dev)
        m = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
        opt = torch.optim.AdamW(m.parameters())
        for step in range(3):
            torch.cuda.memory._set_memory_metadata("step %d" % step)
            with torch.profiler.record_function("forward"):
                x = torch.randn(512 * (step + 1), 1024, device="cuda")
                y = m(x)
            torch.cuda.memory._annotate_tensor(y, "activation of step %d" % step)
            with torch.profiler.record_function("backward"):
                y.pow(2).mean().backward()
            opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.memory._set_memory_metadata("")
torch.cuda.synchronize()
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._dump_snapshot(sys.argv[1])
out = []
for dev, trace in enumerate(snap["device_traces"]):
    cur, timeline = 0, []
    for e in trace:
        if e["action"] in ("segment_alloc", "segment_map"):
            cur += e["size"]; timeline.append(cur)
        elif e["action"] in ("segment_free", "segment_unmap"):
            cur -= e["size"]; timeline.append(cur)
    out.append({"max_reserved": torch.cuda.max_memory_reserved(dev),
                "max_allocated": torch.cuda.max_memory_allocated(dev), "reserved_timeline": timeline})
json.dump(out, open(sys.argv[2], "w"))
