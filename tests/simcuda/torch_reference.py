"""tests/simcuda/torch_reference.py: runs an unmodified PyTorch script
(runpy, as `python SCRIPT` would) and then writes PyTorch's own account of
the run for test_against_torch.sh to hold tidemark's recording against:

    python torch_reference.py SCRIPT OUT [ARGS...]

OUT.json: torch.cuda.max_memory_allocated(), max_memory_reserved(),
the peak of the bytes asked for (memory_stats' requested_bytes),
memory_allocated() and memory_reserved() of every device; OUT.pickle:
torch.cuda.memory._dump_snapshot() (the history tidemark's torch_tensors
turned on as CUDA started); OUT.segments.json: torch.cuda.memory._snapshot()
segments (address, size, stream, pool, blocks) at the end.  Where torch has
no figures of its own (another allocator serves it: torch_tensors=pluggable)
OUT.json says so and nothing else is written.  Nothing of torch is
patched."""
import json
import runpy
import sys

import torch

script, out = sys.argv[1], sys.argv[2]
sys.argv = [script] + sys.argv[3:]
# Kept to the end, so what the script leaves live (a model and its
# optimizer hold reference cycles) is live at tidemark's dump at exit too.
kept = runpy.run_path(script, run_name="__main__")
torch.cuda.synchronize()
n = torch.cuda.device_count()
try:
    figures = {"devices": n,
               "per_device": [{"max_allocated": torch.cuda.max_memory_allocated(d),
                               "max_reserved": torch.cuda.max_memory_reserved(d),
                               "max_requested": torch.cuda.memory_stats(d).get("requested_bytes.all.peak", 0),
                               "allocated": torch.cuda.memory_allocated(d),
                               "reserved": torch.cuda.memory_reserved(d)} for d in range(n)]}
    snap = torch.cuda.memory._snapshot()
except RuntimeError as e:  # another allocator serves torch (pluggable): no figures of its own
    json.dump({"devices": n, "no_figures": str(e)}, open(out + ".json", "w"))
    sys.exit(0)
segs = [{"device": s["device"], "address": s["address"], "total_size": s["total_size"],
         "stream": s["stream"], "segment_type": s["segment_type"],
         "blocks": [[b["size"], b["requested_size"], b["state"]] for b in s["blocks"]]}
        for s in snap["segments"]]
figures["traced"] = sum(len(t) for t in snap["device_traces"])
torch.cuda.memory._dump_snapshot(out + ".pickle")
json.dump(figures, open(out + ".json", "w"))
json.dump(segs, open(out + ".segments.json", "w"))
