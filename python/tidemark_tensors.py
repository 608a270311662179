"""tidemark_tensors: one event per PyTorch tensor, without code changes.

Under the preload library alone tidemark sees PyTorch's caching-allocator
segments (its reserved memory), never the tensors carved out of them.
When a Python program started by `tidemark run` (or with python/autostart
on PYTHONPATH) imports torch, this module arranges tensor-level events,
as TIDEMARK_CONF's torch_tensors says:

- history (the default): PyTorch's own memory history is turned on the
  moment CUDA starts (torch.cuda._lazy_call, so before the first tensor),
  with Python stacks only, which is cheap; at exit (atexit, before the
  interpreter finalizes) its snapshot is written beside tidemark's, the
  dump path with .tdm replaced by .torch.pickle, with the phase and step
  marks tidemark made (automatic or the program's own) added as
  external_annotations, so the tensors fall into phases and categories,
  and torch.cuda.memory_stats() of each device; its cuBLAS workspaces
  named (released after the snapshot is taken, the blocks that went get a
  frame "cuBLAS workspace").  `tidemark run` merges it
  into the .tdm when the program ends (`tidemark merge-torch` does it by
  hand): one file, tensors from PyTorch, segments from tidemark.
  PyTorch's allocator, its statistics (max_memory_allocated(), ...),
  expandable segments, CUDA graphs and PYTORCH_CUDA_ALLOC_CONF keep
  working as without tidemark.
- pluggable: libtidemark.so becomes torch's CUDA allocator
  (torch.cuda.memory.CUDAPluggableAllocator, installed as torch is
  imported, before CUDA starts): every tensor is an event of tidemark's
  own snapshot, with tidemark's stacks, phases and categories.  Torch's
  own memory statistics stop working (torch raises on them).
- off: nothing; the snapshot shows PyTorch's segments.

A torch built without CUDA (or ROCm) is left alone without a word.  A
torch that lacks the API, or whose CUDA started before tidemark could act,
gets one line on stderr and the segment view.  Nothing here may break the
program: any error is one line, and the program runs on.
"""

import atexit
import os
import socket
import sys
import time

MODES = ("history", "pluggable", "off")
_started = False
_pickle_path = None
_memory = None     # torch.cuda.memory (or a test's stand-in)
_cuda = None       # torch.cuda (or a test's stand-in)
_entries = None    # the max_entries PyTorch's history was turned on with
# PyTorch's history ring when TIDEMARK_CONF sets no max_entries: it holds
# every tensor event (alloc, free_requested, free_completed), so it fills
# far faster than tidemark's own ring, which then holds segments only.
# Each entry costs PyTorch about 0.5 KiB of host memory with Python stacks
# (about 2 GiB at 4 million); when it wraps anyway, the merged snapshot
# says so (_with_ring below, merge_torch.c).
TORCH_MAX_ENTRIES = 4000000


def _say(what):
    try:
        sys.stderr.write("tidemark: %s\n" % what)
    except Exception:  # noqa: BLE001 - stderr closed: nothing to say it on
        pass


def _conf_items(conf):
    """TIDEMARK_CONF's (key, value) pairs in order; a key given twice keeps
    its last value (docs/configuration.md), so readers take the last."""
    for item in (conf or "").split(","):
        key, _, value = item.partition("=")
        yield key.strip(), value.strip()


def mode_from_conf(conf):
    """torch_tensors of a TIDEMARK_CONF text: history (the default),
    pluggable or off; "off" also when recording is off (no TIDEMARK_CONF,
    or record=off), as there is no snapshot to go beside."""
    if not (conf or "").strip():
        return "off"
    mode, record = "history", "all"
    for key, value in _conf_items(conf):
        if key == "record":
            record = value.lower()
        if key == "torch_tensors" and value.lower() in MODES:
            mode = value.lower()
    return "off" if record == "off" else mode


def _has(obj, name):
    """getattr(obj, name, None), or None for a name a test says this torch
    lacks (tidemark_torch._has)."""
    import tidemark_torch
    return tidemark_torch._has(obj, name)


def _backend(torch):
    """(torch.cuda, version text, whether this torch was built with CUDA
    or ROCm).  TIDEMARK_TEST_TORCH_CUDA names a module that stands in for
    torch.cuda, for tests on machines whose torch has no CUDA."""
    stand_in = os.environ.get("TIDEMARK_TEST_TORCH_CUDA")
    if stand_in:
        import importlib
        cuda = importlib.import_module(stand_in)
        return cuda, cuda.__version__, True
    version = getattr(torch, "version", None)
    built = bool(getattr(version, "cuda", None) or getattr(version, "hip", None))
    return getattr(torch, "cuda", None), getattr(torch, "__version__", "?"), built


# ---- where the history goes ---------------------------------------------------

_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
              "MV2_COMM_WORLD_RANK", "PALS_RANKID", "JSM_NAMESPACE_RANK",
              "FLUX_TASK_RANK", "ALPS_APP_PE", "SLURM_PROCID")
_LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                    "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID",
                    "JSM_NAMESPACE_LOCAL_RANK", "FLUX_TASK_LOCAL_ID", "SLURM_LOCALID")


def _first_int(names):
    for name in names:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return 0


def _process_start_utc():
    """The process's start time, YYYYmmdd-HHMMSS in UTC (what %t names:
    the preload library starts with the process)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        started = time.time()
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))


def pickle_path(conf, cwd=None):
    """The file PyTorch's history goes to: TIDEMARK_CONF's dump template
    (docs/configuration.md, "Dump paths") expanded for this process, made
    absolute in `cwd`, with .tdm replaced by .torch.pickle."""
    template = "tidemark-%h-%p.tdm"
    for key, value in _conf_items(conf):
        if key == "dump" and value:
            template = value
    codes = {"p": lambda: str(os.getpid()),
             "h": lambda: socket.gethostname().replace("/", "_"),
             "r": lambda: str(_first_int(_RANK_VARS)),
             "l": lambda: str(_first_int(_LOCAL_RANK_VARS)),
             "t": _process_start_utc,
             "%": lambda: "%"}
    out, i = [], 0
    while i < len(template):
        c = template[i]
        if c == "%" and i + 1 < len(template) and template[i + 1] in codes:
            out.append(codes[template[i + 1]]())
            i += 2
            continue
        out.append(c)
        i += 1
    path = "".join(out)
    path = path[:-4] if path.endswith(".tdm") else path
    return os.path.join(cwd or os.getcwd(), path + ".torch.pickle")


# ---- history --------------------------------------------------------------------

def _history_call(record, max_entries):
    """The call that turns the history on, by the API this torch has:
    torch >= 2.1 (enabled, context, stacks, max_entries), 2.0 (enabled,
    record_context, trace_alloc_max_entries, ...); None when it keeps no
    allocation trace (1.13: live blocks only)."""
    import inspect
    try:
        params = inspect.signature(record).parameters
    except (TypeError, ValueError):
        return None
    if "stacks" in params and "max_entries" in params:
        return lambda: record(enabled="all", context="all", stacks="python",
                              max_entries=max_entries)
    if "trace_alloc_max_entries" in params:
        return lambda: record(True, record_context=True,
                              trace_alloc_max_entries=max_entries,
                              trace_alloc_record_context=True)
    return None


def _max_entries(conf):
    """The ring of PyTorch's history: TIDEMARK_CONF's max_entries when it
    sets one (the user's word for both rings), else TORCH_MAX_ENTRIES."""
    entries = TORCH_MAX_ENTRIES
    for key, value in _conf_items(conf):
        if key == "max_entries":
            try:
                entries = max(int(value), 1)
            except ValueError:
                pass
    return entries


def _start_history(cuda, version, conf):
    global _pickle_path, _memory, _cuda
    memory = getattr(cuda, "memory", None)
    record = _has(memory, "_record_memory_history")
    snapshot = _has(memory, "_snapshot")
    if record is None or snapshot is None:
        _say("this torch (%s) has no torch.cuda.memory.%s: tidemark sees PyTorch's "
             "segments (reserved memory), not tensors"
             % (version, "_record_memory_history" if record is None else "_snapshot"))
        return False
    global _entries
    _entries = _max_entries(conf)
    turn_on = _history_call(record, _entries)
    if turn_on is None:
        _say("this torch (%s) keeps no allocation trace (torch 2.0 or later does): "
             "tidemark sees PyTorch's segments (reserved memory), not tensors" % version)
        return False

    def enable():
        try:
            turn_on()
        except Exception as exc:  # noqa: BLE001 - never into torch's init
            _say("PyTorch's memory history not started (%s: %s): tidemark sees "
                 "PyTorch's segments (reserved memory), not tensors"
                 % (type(exc).__name__, exc))

    initialized = _has(cuda, "is_initialized")
    if initialized is not None and initialized():
        _say("CUDA was started before tidemark could turn on PyTorch's memory "
             "history: tensors allocated before now are seen as PyTorch's "
             "segments only")
        enable()
    else:
        lazy = _has(cuda, "_lazy_call")
        if lazy is not None:
            lazy(enable)  # runs as CUDA starts, before the first tensor
        else:
            enable()
    _pickle_path = pickle_path(conf)
    _memory, _cuda = memory, cuda
    atexit.register(_dump_history)
    return True


def _with_marks(snap):
    """PyTorch's snapshot with tidemark's phase and step marks appended to
    its external_annotations (START entries, which tidemark's importer
    reads as phases, "ProfilerStep#N" as steps; an END where a phase block
    ended with no phase before it)."""
    tidemark = sys.modules.get("tidemark")
    marks = list(getattr(tidemark, "_marks_log", ()))
    if not isinstance(snap, dict) or not marks:
        return snap
    notes = snap.get("external_annotations")
    if not isinstance(notes, list):
        notes = []
        snap["external_annotations"] = notes
    for time_us, name, stage in marks:
        notes.append({"device": 0, "stage": stage, "name": name, "time_us": time_us})
    return snap


def _with_stats(snap):
    """PyTorch's snapshot with torch.cuda.memory_stats() of every device
    under "tidemark_memory_stats" (plain dicts of ints: tidemark's pickle
    reader takes no classes), so the merged .tdm's statistics are
    PyTorch's own (max_memory_allocated(), ...)."""
    if not isinstance(snap, dict):
        return snap
    try:
        count, stats = _has(_cuda, "device_count"), _has(_cuda, "memory_stats")
        if count is None or stats is None:
            return snap
        snap["tidemark_memory_stats"] = {
            d: {str(k): int(v) for k, v in stats(d).items()
                if isinstance(v, int) and not isinstance(v, bool)}
            for d in range(count())}
    except Exception as exc:  # noqa: BLE001 - the history matters more
        _say("PyTorch's memory statistics not saved (%s: %s)" % (type(exc).__name__, exc))
    return snap


def _with_ring(snap):
    """PyTorch's snapshot with what its history ring was: max_entries and,
    per device, how many entries it held when that was max_entries or more
    ("tidemark_history": {"max_entries": N, "full": {device: entries}}).
    A full ring has likely wrapped, keeping only the newest entries without
    a word (the parameters' allocations first among the lost); the merge
    says so in the snapshot instead of losing their categories silently."""
    traces = snap.get("device_traces") if isinstance(snap, dict) else None
    if not isinstance(traces, list) or not _entries:
        return snap
    full = {d: len(t) for d, t in enumerate(traces)
            if isinstance(t, list) and len(t) >= _entries}
    snap["tidemark_history"] = {"max_entries": int(_entries), "full": full}
    if full:
        _say("PyTorch's memory history filled its ring of %d entries (max_entries) on "
             "device%s %s: its oldest tensor events are lost, and with them the "
             "categories of what was allocated first (parameters); a larger "
             "max_entries in TIDEMARK_CONF keeps more"
             % (_entries, "" if len(full) == 1 else "s", ", ".join(str(d) for d in full)))
    return snap


# The frame put innermost on the allocation of each cuBLAS or cuBLASLt
# workspace PyTorch still held at exit, so that tidemark's default rule
# "temporary function=^cuBLAS workspace$ file=clearCublasWorkspaces" names
# it: PyTorch's Python-only stacks show a workspace as the forward call (or,
# on autograd's engine thread, nothing) that ran a thread's first matmul.
WORKSPACE_FRAME = {"name": "cuBLAS workspace", "line": 0,
                   "filename": "<released by torch._C._cuda_clearCublasWorkspaces() at exit>"}


def _active_blocks(segments):
    return {(s.get("device"), b.get("address"))
            for s in segments if isinstance(s, dict)
            for b in s.get("blocks", ()) if b.get("state") == "active_allocated"}


def _with_workspaces(snap):
    """PyTorch's snapshot with its cuBLAS workspaces named: at exit, after
    the snapshot is taken, PyTorch is asked to release them
    (torch._C._cuda_clearCublasWorkspaces); the blocks that released are
    the workspaces, and the last allocation of each in the history gets
    WORKSPACE_FRAME.  The history is stopped first (the snapshot holds it)
    so that the second look at the segments is cheap.  The snapshot's own
    segments stay as they were when it was taken."""
    traces = snap.get("device_traces") if isinstance(snap, dict) else None
    segments = snap.get("segments") if isinstance(snap, dict) else None
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    clear = _has(torch_c, "_cuda_clearCublasWorkspaces")
    if clear is None or not isinstance(traces, list) or not isinstance(segments, list):
        return snap
    try:
        held = _active_blocks(segments)
        try:
            _memory._record_memory_history(enabled=None)
        except TypeError:  # torch 2.0's signature
            _memory._record_memory_history(False)
        clear()
        released = held - _active_blocks(_memory._snapshot().get("segments", ()))
        named = 0
        for device, trace in enumerate(traces):
            last = {}
            for i, e in enumerate(trace if isinstance(trace, list) else ()):
                if isinstance(e, dict) and e.get("action") == "alloc":
                    last[e.get("addr")] = i
            for dev, addr in released:
                if dev == device and addr in last:
                    e = trace[last[addr]]
                    e["frames"] = [dict(WORKSPACE_FRAME)] + list(e.get("frames") or ())
                    named += 1
        snap["tidemark_cublas_workspaces"] = named
    except Exception as exc:  # noqa: BLE001 - the history matters more
        _say("PyTorch's cuBLAS workspaces not named (%s: %s)" % (type(exc).__name__, exc))
    return snap


def _dump_history():
    """At exit: PyTorch's snapshot (with tidemark's marks) beside tidemark's
    own, written whole or not at all.  Nothing when CUDA never started."""
    try:
        initialized = _has(_cuda, "is_initialized")
        if initialized is not None and not initialized():
            return
        import pickle
        snap = _with_workspaces(_with_ring(_with_stats(_with_marks(_memory._snapshot()))))
        folder = os.path.dirname(_pickle_path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        part = "%s.%d.part" % (_pickle_path, os.getpid())
        with open(part, "wb") as f:
            pickle.dump(snap, f)
        os.replace(part, _pickle_path)
        tdm = _pickle_path[:-len(".torch.pickle")] + ".tdm"
        _say("PyTorch's tensor history: %s (`tidemark run` merges it into %s "
             "as the program ends; without it: tidemark merge-torch %s)"
             % (_pickle_path, tdm, tdm))
    except Exception as exc:  # noqa: BLE001 - never fail the exit
        _say("PyTorch's tensor history not written (%s: %s)" % (type(exc).__name__, exc))


# ---- pluggable ------------------------------------------------------------------

def _start_pluggable(cuda, version):
    memory = getattr(cuda, "memory", None)
    segments = "tidemark sees PyTorch's segments (reserved memory), not tensors"
    if _has(memory, "CUDAPluggableAllocator") is None or \
            _has(memory, "change_current_allocator") is None:
        _say("torch_tensors=pluggable: this torch (%s) has no "
             "torch.cuda.memory.CUDAPluggableAllocator (torch 2.0 or later): %s"
             % (version, segments))
        return False
    initialized = _has(cuda, "is_initialized")
    if initialized is not None and initialized():
        _say("torch_tensors=pluggable: CUDA was started before tidemark could "
             "serve torch's allocator: %s" % segments)
        return False
    try:
        import tidemark
        tidemark.use_with_torch(memory)
    except Exception as exc:  # noqa: BLE001 - never break the program
        _say("torch_tensors=pluggable: tidemark could not serve torch's "
             "allocator (%s: %s): %s" % (type(exc).__name__, exc, segments))
        return False
    return True


def start(torch, conf=None):
    """Arranges tensor events for an imported torch, as TIDEMARK_CONF's
    torch_tensors says (conf: that text; default the environment's).
    True when tensor events are on their way.  Once per process."""
    global _started
    if _started:
        return False
    _started = True
    if conf is None:
        conf = os.environ.get("TIDEMARK_CONF")
    try:
        mode = mode_from_conf(conf)
        if mode == "off":
            return False
        cuda, version, built = _backend(torch)
        if not built or cuda is None:
            return False  # a CPU-only torch has no device memory to see
        if mode == "pluggable":
            return _start_pluggable(cuda, version)
        return _start_history(cuda, version, conf)
    except Exception as exc:  # noqa: BLE001 - never break the program
        _say("tensor events not set up (%s: %s); the program runs on"
             % (type(exc).__name__, exc))
        return False


def start_when_imported():
    """start(torch) as soon as the program imports torch (now if it has)."""
    import tidemark_torch
    return tidemark_torch.when_imported(start)
