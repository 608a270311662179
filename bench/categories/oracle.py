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
                    garbage collector; for a decoder that preallocates a
                    KV cache (loops/kv_cache.py: a `new_cache` method and
                    a BATCH), the cache's bytes from the model's shape

    python oracle.py OUT LOOP.py [ARGS...]

The loop runs as __main__ (runpy), so its code is untouched; the profiler
only watches.  Run under `tidemark run`, tidemark records the same run.

A torch without CUDA (Debian's 1.13) runs the loop on the CPU: its tensors
reach tidemark through tests/python/torch_cpu_mirror.c, preloaded, which
this starts; such a torch has no memory timeline (export_memory_timeline
came with torch 2.1), so OUT.known.json is the only oracle then.
"""
import ctypes
import gc
import json
import os
import runpy
import sys

import torch
import torch.profiler

out, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
CUDA = torch.cuda.is_available()
TIMELINE = hasattr(torch.profiler.profile, "export_memory_timeline")


def on_device(t):
    """A tensor on the device the loops run on (CUDA; the CPU without it)."""
    return t.is_cuda if CUDA else t.device.type == "cpu"


def local(t):
    """A DTensor's (FSDP2's) shard on this rank; a plain tensor itself."""
    shard = getattr(t, "_local_tensor", None)
    return shard if shard is not None else t


def tensor_bytes(t):
    t = local(t)
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.storage().nbytes()


def known_sizes():
    seen, params, trainable, frozen = set(), 0, 0, 0
    opt_state = 0
    state_ptrs, param_ptrs = [], []
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.nn.Parameter) and on_device(o) and id(o) not in seen:
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
                        if torch.is_tensor(v) and on_device(v):
                            opt_state += tensor_bytes(v)
                            state_ptrs.append(local(v).data_ptr())
        except Exception:  # noqa: BLE001 - a half-made object in gc's list
            pass
    return {"parameter_bytes": params, "trainable_bytes": trainable,
            "frozen_bytes": frozen, "optimizer_state_bytes": opt_state,
            "optimizer_state_addresses": state_ptrs, "parameter_addresses": param_ptrs}


def kv_cache_bytes(g):
    """Bytes of one KV cache, known from the model: layers x 2 (keys and
    values) x batch x sequence x width (heads x head_dim) x dtype bytes;
    None when the loop has no such cache."""
    model = g.get("model")
    if not hasattr(model, "new_cache") or "BATCH" not in g:
        return None
    dtype = model.out.weight.element_size()
    return {"layers": len(model.qkv), "batch": g["BATCH"], "seq": model.max_len,
            "width": model.n, "dtype_bytes": dtype,
            "bytes": len(model.qkv) * 2 * g["BATCH"] * model.max_len * model.n * dtype}


if "RANK" in os.environ:  # one rank of torch.distributed.run: files of its own
    out = "%s.rank%s" % (out, os.environ["RANK"])
sys.argv = [script] + args
if not CUDA:
    start = getattr(ctypes.CDLL(None), "tdm_torch_cpu_mirror_start", None)
    if start is None or start() != 0:
        sys.exit("oracle: torch %s has no CUDA and the CPU mirror is not preloaded "
                 "(tests/python/torch_cpu_mirror.c)" % torch.__version__)
prof = None
if TIMELINE:
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  profile_memory=True, record_shapes=True, with_stack=True)
    prof.start()
try:
    # its globals kept: the model and optimizer live on for known_sizes()
    loop_globals = runpy.run_path(script, run_name="__main__")
finally:
    if prof is not None:
        prof.stop()
known = known_sizes()
known["kv_cache"] = kv_cache_bytes(loop_globals)
known["torch"] = torch.__version__
with open(out + ".known.json", "w") as f:
    json.dump(known, f)
if prof is not None:
    prof.export_memory_timeline(out + ".raw.json.gz", device="cuda:%d" % torch.cuda.current_device())
    print("oracle: wrote %s.raw.json.gz and %s.known.json" % (out, out))
else:
    print("oracle: wrote %s.known.json (torch %s has no memory timeline)" % (out, torch.__version__))
