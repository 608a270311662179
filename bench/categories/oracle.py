"""bench/categories/oracle.py: runs an unmodified training loop under
PyTorch's profiler and writes the two oracles the category benchmark holds
tidemark's categories against:

  OUT.raw.json.gz   PyTorch's own memory timeline of the run
                    (torch.profiler.profile(profile_memory=True,
                    record_shapes=True, with_stack=True), then
                    export_memory_timeline(... .raw.json.gz, "cuda:0")):
                    [time_ns, action, +-bytes, category index] per event
  OUT.known.json    sizes known from the objects at exit: every CUDA
                    nn.Parameter (and its requires_grad), every optimizer's
                    state tensors (and their addresses), found by the
                    garbage collector

    python oracle.py OUT LOOP.py [ARGS...]

The loop runs as __main__ (runpy), so its code is untouched; the profiler
only watches.  Run under `tidemark run`, tidemark records the same run.
"""
import gc
import json
import os
import runpy
import sys

import torch
import torch.profiler

out, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]


def local(t):
    """A DTensor's (FSDP2's) shard on this rank; a plain tensor itself."""
    shard = getattr(t, "_local_tensor", None)
    return shard if shard is not None else t


def tensor_bytes(t):
    t = local(t)
    return t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else t.numel() * t.element_size()


def known_sizes():
    seen, params, trainable, frozen = set(), 0, 0, 0
    opt_state = 0
    state_ptrs, param_ptrs = [], []
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.nn.Parameter) and o.is_cuda and id(o) not in seen:
                seen.add(id(o))
                n = tensor_bytes(o)
                params += n
                param_ptrs.append(local(o).data_ptr())
                if o.requires_grad:
                    trainable += n
                else:
                    frozen += n
            elif isinstance(o, torch.optim.Optimizer):
                for st in o.state.values():
                    for v in st.values():
                        if torch.is_tensor(v) and v.is_cuda:
                            opt_state += tensor_bytes(v)
                            state_ptrs.append(local(v).data_ptr())
        except Exception:  # noqa: BLE001 - a half-made object in gc's list
            pass
    return {"parameter_bytes": params, "trainable_bytes": trainable,
            "frozen_bytes": frozen, "optimizer_state_bytes": opt_state,
            "optimizer_state_addresses": state_ptrs, "parameter_addresses": param_ptrs}


if "RANK" in os.environ:  # one rank of torch.distributed.run: files of its own
    out = "%s.rank%s" % (out, os.environ["RANK"])
sys.argv = [script] + args
prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                              profile_memory=True, record_shapes=True, with_stack=True)
prof.start()
try:
    # its globals kept: the model and optimizer live on for known_sizes()
    loop_globals = runpy.run_path(script, run_name="__main__")
finally:
    prof.stop()
known = known_sizes()
with open(out + ".known.json", "w") as f:
    json.dump(known, f)
device = "cuda:%d" % torch.cuda.current_device()
prof.export_memory_timeline(out + ".raw.json.gz", device=device)
print("oracle: wrote %s.raw.json.gz and %s.known.json" % (out, out))
