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
C++).  Without one, the allocations come from a bump allocator inside one
256 MiB segment, rounded to 512 bytes as PyTorch's are.

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
_segment_base = 0x7f0000000000
_segment_size = 256 << 20
_next = _segment_base
_live = {}           # addr -> size
_pluggable = None    # (alloc, free) ctypes functions
history_calls = []   # what the glue asked for, for the test to read


def is_initialized():
    return _initialized


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


def alloc(nbytes):
    global _next
    _lazy_init()
    if _pluggable is not None:
        return _pluggable[0](nbytes, 0, None)
    size = max(512, (nbytes + 511) // 512 * 512)
    if _next + size > _segment_base + _segment_size:
        raise RuntimeError("CUDA out of memory (simulated)")
    addr, _next = _next, _next + size
    if not _live and addr == _segment_base:
        _event("segment_alloc", _segment_base, _segment_size)
    _live[addr] = size
    _event("alloc", addr, size)
    return addr


def free(addr):
    if _pluggable is not None:
        _pluggable[1](addr, 0, 0, None)
        return
    size = _live.pop(addr)
    _event("free_requested", addr, size)
    _event("free_completed", addr, size)


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
    """The live blocks of the one segment (addresses in order, the gaps and
    the tail inactive), and the trace when the history is on."""
    blocks, at = [], _segment_base
    for addr in sorted(_live):
        if addr > at:
            blocks.append({"address": at, "size": addr - at, "state": "inactive"})
        blocks.append({"address": addr, "size": _live[addr], "requested_size": _live[addr],
                       "state": "active_allocated", "frames": []})
        at = addr + _live[addr]
    end = _segment_base + _segment_size
    if at < end:
        blocks.append({"address": at, "size": end - at, "state": "inactive"})
    allocated = sum(_live.values())
    segments = [{"device": 0, "address": _segment_base, "total_size": _segment_size,
                 "stream": 0, "segment_type": "large", "allocated_size": allocated,
                 "active_size": allocated, "blocks": blocks}] if _trace or _live else []
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
