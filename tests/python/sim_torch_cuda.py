"""tests/python/sim_torch_cuda.py: stands in for torch.cuda of a CUDA build
of PyTorch, on machines whose torch has no CUDA (Debian's is CPU-only).
python/tidemark_tensors.py uses it instead of torch.cuda when
TIDEMARK_TEST_TORCH_CUDA=sim_torch_cuda.

It keeps the parts of torch.cuda's behaviour the glue relies on: CUDA
starts lazily, at the first allocation, running the calls queued by
_lazy_call first; the memory history records only once turned on and only
what is allocated after; a pluggable allocator can be installed only
before CUDA starts, and then serves every allocation through the
library's functions (here called with ctypes, as torch calls them from
C++).  Without one, the allocations come from a caching allocator shaped
like PyTorch's: sizes rounded to 512 bytes, a small pool (blocks of at
most 1 MiB, in 2 MiB segments) and a large one (20 MiB segments, or the
size rounded to 2 MiB), first fit in the cached segments, empty_cache()
giving empty segments back; the trace records requested sizes, as
PyTorch's does, and memory_stats() (max_memory_allocated(), ...) counts
rounded ones, as PyTorch's does.  SIM_TORCH_CUDART names a CUDA runtime
the segments come from (cudaMalloc/cudaFree), so that tidemark's hooks
see them as they see PyTorch's; without it their addresses are made up.

SIM_TORCH_API picks the memory-history API: 2.1 (enabled, context,
stacks, max_entries: the default), 2.0 (enabled, record_context,
trace_alloc_max_entries, ...; no pluggable allocator check), 1.13
(enabled only: no trace, no CUDAPluggableAllocator).  SIM_TORCH_INIT=early
starts CUDA at import.  The test program calls alloc(nbytes) and
free(addr) where a tensor would be made and freed.
"""
import ctypes
import os
import sys
import time
import types

API = os.environ.get("SIM_TORCH_API", "2.1")
__version__ = "%s (simulated CUDA)" % API

_initialized = False
_queued = []
_history = None      # {"stacks": ..., "max_entries": N} once turned on
_trace = []
_fake_base = 0x7f0000000000   # segment addresses without SIM_TORCH_CUDART
_segments = {}       # base -> {"size": bytes, "pool": "small"|"large", "blocks": {addr: size}}
_live = {}           # addr -> (rounded size, requested size, segment base)
_pluggable = None    # (alloc, free) ctypes functions
_cudart = None       # SIM_TORCH_CUDART's cudaMalloc/cudaFree, loaded at the first segment
_stats = {}          # torch.cuda.memory_stats' keys (all pools only)
history_calls = []   # what the glue asked for, for the test to read
SMALL = 1 << 20      # PyTorch's small pool: blocks of at most 1 MiB, 2 MiB segments


def is_initialized():
    return _initialized


def device_count():
    return 1


def _lazy_call(fn):
    if _initialized:
        fn()
    else:
        _queued.append(fn)


def _lazy_init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    for fn in _queued:
        fn()


def _frames():
    f = sys._getframe(2)
    out = []
    while f is not None and len(out) < 32:
        out.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                    "name": f.f_code.co_name})
        f = f.f_back
    return out


def _event(action, addr, size):
    if _history is None:
        return
    _trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                   "time_us": time.time_ns() // 1000, "frames": _frames()})
    if len(_trace) > _history["max_entries"]:
        del _trace[0]


def _stat(name, delta):
    """name.all.{current,peak,allocated,freed} as PyTorch keeps them."""
    key = name + ".all."
    cur = _stats.get(key + "current", 0) + delta
    _stats[key + "current"] = cur
    _stats[key + "peak"] = max(_stats.get(key + "peak", 0), cur)
    which = "allocated" if delta > 0 else "freed"
    _stats[key + which] = _stats.get(key + which, 0) + abs(delta)


def _device_malloc(size):
    """A segment's memory: the CUDA runtime's cudaMalloc when
    SIM_TORCH_CUDART names one (so tidemark's hooks see the segment, as
    they see PyTorch's), else made-up addresses."""
    global _cudart, _fake_base
    lib = os.environ.get("SIM_TORCH_CUDART")
    if not lib:
        base, _fake_base = _fake_base, _fake_base + size
        return base
    if _cudart is None:
        _cudart = ctypes.CDLL(lib)
        _cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        _cudart.cudaFree.argtypes = [ctypes.c_void_p]
    p = ctypes.c_void_p()
    if _cudart.cudaMalloc(ctypes.byref(p), size) != 0:
        raise RuntimeError("CUDA out of memory (simulated)")
    return p.value


def _fit(base, size):
    """The first gap of `size` bytes in the segment at base, or None."""
    seg = _segments[base]
    at = base
    for addr in sorted(seg["blocks"]):
        if addr - at >= size:
            return at
        at = addr + seg["blocks"][addr]
    return at if base + seg["size"] - at >= size else None


def alloc(nbytes):
    """A tensor of nbytes: PyTorch's rounding (512 bytes), its pools, first
    fit in the cached segments, else a new segment (2 MiB for the small
    pool; 20 MiB, or the size rounded to 2 MiB, for the large one)."""
    _lazy_init()
    if _pluggable is not None:
        return _pluggable[0](nbytes, 0, None)
    size = max(512, (nbytes + 511) // 512 * 512)
    pool = "small" if size <= SMALL else "large"
    addr = None
    for base in sorted(_segments):
        if _segments[base]["pool"] == pool:
            addr = _fit(base, size)
            if addr is not None:
                break
    if addr is None:
        seg_size = 2 << 20 if pool == "small" else \
            (20 << 20 if size < (10 << 20) else (size + (2 << 20) - 1) // (2 << 20) * (2 << 20))
        base = _device_malloc(seg_size)
        _segments[base] = {"size": seg_size, "pool": pool, "blocks": {}}
        _stat("reserved_bytes", seg_size)
        _stat("segment", 1)
        _event("segment_alloc", base, seg_size)
        addr = base
    seg_base = max(b for b in _segments if b <= addr) if addr not in _segments else addr
    _segments[seg_base]["blocks"][addr] = size
    _live[addr] = (size, nbytes, seg_base)
    _stat("allocated_bytes", size)
    _stat("active_bytes", size)
    _stat("requested_bytes", nbytes)
    _stat("allocation", 1)
    _event("alloc", addr, nbytes)
    return addr


def free(addr):
    if _pluggable is not None:
        _pluggable[1](addr, 0, 0, None)
        return
    size, requested, seg_base = _live.pop(addr)
    del _segments[seg_base]["blocks"][addr]
    _event("free_requested", addr, requested)
    _stat("allocated_bytes", -size)
    _stat("active_bytes", -size)
    _stat("requested_bytes", -requested)
    _stat("allocation", -1)
    _event("free_completed", addr, requested)


def empty_cache():
    """Gives every segment with no live block back (cudaFree)."""
    for base in sorted(_segments):
        seg = _segments[base]
        if seg["blocks"]:
            continue
        _event("segment_free", base, seg["size"])
        if _cudart is not None:
            _cudart.cudaFree(ctypes.c_void_p(base))
        del _segments[base]
        _stat("reserved_bytes", -seg["size"])
        _stat("segment", -1)


def memory_stats(device=None):
    return dict(sorted(_stats.items()))


def max_memory_allocated(device=None):
    return _stats.get("allocated_bytes.all.peak", 0)


def memory_allocated(device=None):
    return _stats.get("allocated_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return _stats.get("reserved_bytes.all.peak", 0)


def memory_reserved(device=None):
    return _stats.get("reserved_bytes.all.current", 0)


def _record_2_1(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                device=None):
    global _history
    history_calls.append(("2.1", enabled, context, stacks, max_entries))
    _history = None if enabled is None else {"stacks": stacks, "max_entries": max_entries}


def _record_2_0(enabled, record_context=True, trace_alloc_max_entries=1,
                trace_alloc_record_context=False, device=None, record_context_cpp=False):
    global _history
    history_calls.append(("2.0", enabled, trace_alloc_max_entries))
    _history = {"stacks": "python", "max_entries": trace_alloc_max_entries} if enabled else None


def _record_1_13(enabled, device=None):
    history_calls.append(("1.13", enabled))


def _snapshot(device=None):
    """Every segment with its blocks in address order (the gaps inactive),
    and the trace when the history is on."""
    segments = []
    for base in sorted(_segments):
        seg = _segments[base]
        blocks, at = [], base
        for addr in sorted(seg["blocks"]):
            if addr > at:
                blocks.append({"address": at, "size": addr - at, "state": "inactive"})
            size, requested, _ = _live[addr]
            blocks.append({"address": addr, "size": size, "requested_size": requested,
                           "state": "active_allocated", "frames": []})
            at = addr + size
        end = base + seg["size"]
        if at < end:
            blocks.append({"address": at, "size": end - at, "state": "inactive"})
        allocated = sum(seg["blocks"].values())
        segments.append({"device": 0, "address": base, "total_size": seg["size"],
                         "stream": 0, "segment_type": seg["pool"],
                         "allocated_size": allocated, "active_size": allocated,
                         "blocks": blocks})
    return {"segments": segments, "device_traces": [list(_trace)]}


class _PluggableInner:
    def __init__(self):
        self.hooks = {}

    def __getattr__(self, name):
        if name.startswith("set_") and name.endswith("_fn"):
            return lambda addr, name=name: self.hooks.__setitem__(name, addr)
        raise AttributeError(name)


class CUDAPluggableAllocator:
    def __init__(self, path, alloc_fn_name, free_fn_name):
        lib = ctypes.CDLL(path)
        self.alloc = getattr(lib, alloc_fn_name)
        self.alloc.restype = ctypes.c_void_p
        self.alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self.free = getattr(lib, free_fn_name)
        self.free.restype = None
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self._allocator = _PluggableInner()


def change_current_allocator(allocator):
    global _pluggable
    if _initialized:
        raise RuntimeError("Can't swap an already initialized allocator")
    _pluggable = (allocator.alloc, allocator.free)


memory = types.SimpleNamespace(_snapshot=_snapshot)
if API == "2.1":
    memory._record_memory_history = _record_2_1
elif API == "2.0":
    memory._record_memory_history = _record_2_0
else:
    memory._record_memory_history = _record_1_13
if API in ("2.0", "2.1"):
    memory.CUDAPluggableAllocator = CUDAPluggableAllocator
    memory.change_current_allocator = change_current_allocator

if os.environ.get("SIM_TORCH_INIT") == "early":
    _lazy_init()
