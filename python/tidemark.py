"""tidemark from Python: record the device-memory life of a program.

ctypes only, no build step: copy this file next to your script (or put
python/ on PYTHONPATH) and it finds libtidemark.so by itself, trying in
turn:

  1. the environment variable TIDEMARK_LIB: the library's path, or the
     folder it is in; when set, nothing else is tried;
  2. libtidemark.so next to this file, or in ../lib or ../lib64 beside it
     (an installed tree);
  3. the build trees of the source tree this file is in: every build*/
     folder of the repository root (build/, build-release/, ...), the most
     recently built library first (a sanitizer build is passed over unless
     its runtime is loaded already);
  4. the dynamic loader's search path (libtidemark.so.0, libtidemark.so),
     then the installed library as ctypes.util.find_library("tidemark")
     finds it.

When none loads, OSError says where it looked and names TIDEMARK_LIB.

The names follow torch.cuda.memory where there is a counterpart::

    import tidemark
    tidemark.record_memory_history(max_entries=200000)   # _record_memory_history
    for batch in data:
        tidemark.step()
        with tidemark.phase("forward"):                  # or a plain call
            with tidemark.tag("activation"):
                ...
    tidemark.dump_snapshot("run.tdm")                    # _dump_snapshot

and PyTorch can allocate its CUDA memory from tidemark, with every block
recorded, through its pluggable-allocator interface::

    a = torch.cuda.memory.CUDAPluggableAllocator(*tidemark.pluggable_allocator())
    torch.cuda.memory.change_current_allocator(a)

(tidemark.use_with_torch() does that and sets the optional hooks too).
"""

import contextlib
import ctypes
import ctypes.util
import glob
import os
import threading
import time

__all__ = [
    "TidemarkError",
    "load",
    "library",
    "library_path",
    "record_memory_history",
    "is_recording",
    "dump_snapshot",
    "phase",
    "step",
    "tag",
    "tag_pointer",
    "set_metadata",
    "memory_stats",
    "reset_peak_memory_stats",
    "empty_cache",
    "pluggable_allocator",
    "torch_hooks",
    "use_with_torch",
    "auto_phases",
]

# The C enums of include/tidemark.h, by the names the TIDEMARK_CONF keys use.
_RECORD = {"off": 0, "state": 1, "all": 2}
_CONTEXT = {"none": 0, "state": 1, "alloc": 2, "all": 3}
_STACKS = {"none": 0, "native": 1, "python": 2, "all": 3}
CATEGORIES = ("unknown", "parameter", "optimizer_state", "gradient",
              "activation", "input", "temporary")
_POOLS = ("all", "small_pool", "large_pool")


class TidemarkError(RuntimeError):
    """A tidemark call failed; .status is the tdm_status number, .name its
    TDM_* name."""

    def __init__(self, call, status, name, message):
        super().__init__("%s: %s (%s)" % (call, message, name))
        self.status = status
        self.name = name


class _HistoryOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("enabled", ctypes.c_int),
                ("context", ctypes.c_int), ("stacks", ctypes.c_int),
                ("max_entries", ctypes.c_size_t), ("clear_history", ctypes.c_int)]


class _Stat(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64),
                ("allocated", ctypes.c_int64), ("freed", ctypes.c_int64)]


_STAT_ROWS = ("allocated_bytes", "reserved_bytes", "active_bytes",
              "requested_bytes", "allocation", "segment")


class _Stats(ctypes.Structure):
    _fields_ = ([("size", ctypes.c_size_t)] +
                [(row, _Stat) for row in _STAT_ROWS] +
                [("num_alloc_retries", ctypes.c_uint64),
                 ("num_ooms", ctypes.c_uint64)])


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_lib = None
_lib_path = None


def _sanitizer_of(folder):
    """TDM_SANITIZE of the build tree `folder` ("" if none or unknown)."""
    try:
        with open(os.path.join(folder, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("TDM_SANITIZE:"):
                    return line.split("=", 1)[1].strip()
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def _runtime_loaded(sanitizer):
    """Whether this process has the sanitizer's runtime (a sanitized
    library loaded into a process without it stops the process)."""
    lib = {"address": "libasan", "thread": "libtsan"}.get(sanitizer, "lib" + sanitizer)
    try:
        with open("/proc/self/maps") as f:
            return lib in f.read()
    except OSError:
        return True  # cannot tell: let the loader say


def _build_trees(root, basename="libtidemark.so"):
    """(library, why it is skipped or None) for `basename` of every
    build*/ folder under `root`, the most recently built first; folders
    without one are left out."""
    found = []
    for folder in glob.glob(os.path.join(root, "build*")):
        lib = os.path.join(folder, basename)
        try:
            found.append((os.path.getmtime(lib), lib))
        except OSError:
            continue
    out = []
    for _, lib in sorted(found, key=lambda t: t[0], reverse=True):
        san = _sanitizer_of(os.path.dirname(lib))
        why = None
        if san and not _runtime_loaded(san):
            why = "a TDM_SANITIZE=%s build, skipped (its runtime is not loaded)" % san
        out.append((lib, why))
    return out


_FIND_LIBRARY = object()  # in the list of names: ask ctypes.util.find_library


def _already_loaded():
    """The libtidemark the process has loaded already (the preload
    library's, under `tidemark run` or LD_PRELOAD): marks must reach the
    instance that records, whatever else is on disk."""
    for soname in ("libtidemark.so.0", "libtidemark.so"):
        try:
            lib = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return _where_loaded(lib) or soname
    return None


def _candidates():
    """([(name to try, why it is skipped or None)] in order, the places
    looked in for the error message, whether TIDEMARK_LIB chose them)."""
    loaded = _already_loaded()
    if loaded:
        return [(loaded, None)], ["the libtidemark already in this process"], False
    env = os.environ.get("TIDEMARK_LIB")
    if env:
        if os.path.isdir(env):
            env = os.path.join(env, "libtidemark.so")
        return [(env, None)], ["TIDEMARK_LIB=%s" % os.environ["TIDEMARK_LIB"]], True
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    names = [(os.path.join(folder, "libtidemark.so"), None)
             for folder in (here, os.path.join(root, "lib"), os.path.join(root, "lib64"))]
    places = ["next to tidemark.py (%s), ../lib, ../lib64" % here]
    names += _build_trees(root)
    places.append(os.path.join(root, "build*") + os.sep)
    names += [("libtidemark.so.0", None), ("libtidemark.so", None), (_FIND_LIBRARY, None)]
    places += ["the loader's search path", "ctypes.util.find_library('tidemark')"]
    return names, places, False


def _where_loaded(lib):
    """The file the loader actually opened for `lib` (dladdr of a symbol)."""
    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    addr = ctypes.cast(lib.tdm_version, ctypes.c_void_p).value
    if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
        return os.path.realpath(os.fsdecode(info.dli_fname))
    return None


def library():
    """The loaded libtidemark.so (a ctypes.CDLL); loads it on first use.
    Raises OSError naming every place it looked when none loads."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    names, places, from_env = _candidates()
    errors = []
    for name, skipped in names:
        if skipped:
            errors.append("%s: %s" % (name, skipped))
            continue
        if name is _FIND_LIBRARY:  # last: it may run ldconfig or a compiler
            name = ctypes.util.find_library("tidemark")
            if not name:
                errors.append("find_library('tidemark'): nothing")
                continue
        if os.sep in name and not os.path.exists(name):
            errors.append("%s: no such file" % name)
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
            continue
        _declare(lib)
        _lib = lib
        _lib_path = _where_loaded(lib) or os.path.abspath(name)
        return _lib
    if from_env:
        hint = "TIDEMARK_LIB names no loadable library: fix it, or unset it to search"
    else:
        hint = "set TIDEMARK_LIB to its path, or to its folder"
    raise OSError("tidemark: cannot load libtidemark.so: %s.  Looked in: %s.  Tried: %s"
                  % (hint, "; ".join(places), "; ".join(errors)))


def library_path():
    """The absolute path of the libtidemark.so in use."""
    library()
    return _lib_path


def _declare(lib):
    c = ctypes
    sigs = {
        "tdm_version": (c.c_uint, []),
        "tdm_status_name": (c.c_char_p, [c.c_int]),
        "tdm_strerror": (c.c_char_p, [c.c_int]),
        "tdm_history_options_init": (None, [c.POINTER(_HistoryOptions)]),
        "tdm_record_memory_history": (c.c_int, [c.POINTER(_HistoryOptions)]),
        "tdm_is_recording": (c.c_int, []),
        "tdm_dump_snapshot": (c.c_int, [c.c_char_p]),
        "tdm_phase": (c.c_int, [c.c_char_p]),
        "tdm_phase_end": (c.c_int, []),
        "tdm_step": (c.c_int, []),
        "tdm_tag_push": (c.c_int, [c.c_int]),
        "tdm_tag_pop": (c.c_int, []),
        "tdm_tag_ptr": (c.c_int, [c.c_void_p, c.c_int]),
        "tdm_set_metadata": (c.c_int, [c.c_char_p]),
        "tdm_memory_stats_pool": (c.c_int, [c.c_int, c.c_int, c.POINTER(_Stats)]),
        "tdm_reset_peak_stats": (c.c_int, [c.c_int]),
        "tdm_empty_cache": (c.c_int, [c.c_int]),
        "tdm_torch_alloc": (c.c_void_p, [c.c_size_t, c.c_int, c.c_void_p]),
        "tdm_torch_free": (None, [c.c_void_p, c.c_size_t, c.c_int, c.c_void_p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _check(call, status):
    if status != 0:
        lib = library()
        name = lib.tdm_status_name(status).decode()
        message = lib.tdm_strerror(status).decode()
        raise TidemarkError(call, status, name, message)


def load(path, partial=False):
    """Reads a snapshot through libtidemark_reader.so, the reader and
    analysis model of the `tidemark` command: a .tdm file, a PyTorch
    snapshot pickle (torch.cuda.memory._dump_snapshot) or another format
    `tidemark import` reads gives a Snapshot; a folder (what `tidemark run
    -o DIR` writes, one file per rank) gives a Run of its snapshots in rank
    order.  A corrupt or truncated file raises TidemarkError with the
    reader's message and byte offset; partial=True reads a truncated .tdm
    up to its cut instead.  docs/python.md walks through it."""
    import tidemark_snapshot
    return tidemark_snapshot.load(path, partial=partial)


def _enum(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    try:
        return table[str(value).lower()]
    except KeyError:
        raise ValueError("%s must be one of %s, not %r"
                         % (what, ", ".join(table), value)) from None


def record_memory_history(enabled="all", context="all", stacks="all",
                          max_entries=1000000, clear_history=False):
    """Starts, reconfigures or stops recording (torch's
    _record_memory_history).  enabled: "all" (a ring of the last
    max_entries events), "state" (live blocks keep their stacks only) or
    None / False / "off" to stop; True means "all".  context: "none",
    "state", "alloc" or "all".  stacks: "none", "native", "python" (the
    Python frames of the calling thread, file:line and function, like
    torch's stacks="python"; native on a thread running no Python code) or
    "all" (native frames with the interpreter's replaced by the Python
    frames they ran, innermost first, like torch's stacks="all", the
    default: a Python program's native frames alone are the interpreter's
    and libffi's, the same for every call); None means "none".  Python frames are read without the GIL and resolved from
    tidemark's own copies, so a dump at exit still names them."""
    if stacks is None:
        stacks = "none"
    lib = library()
    if enabled is None or enabled is False:
        enabled = "off"
    elif enabled is True:
        enabled = "all"
    opts = _HistoryOptions()
    lib.tdm_history_options_init(ctypes.byref(opts))
    opts.enabled = _enum(_RECORD, enabled, "enabled")
    opts.context = _enum(_CONTEXT, context, "context")
    opts.stacks = _enum(_STACKS, stacks, "stacks")
    if int(max_entries) < 1:
        raise ValueError("max_entries must be at least 1")
    opts.max_entries = int(max_entries)
    opts.clear_history = 1 if clear_history else 0
    _check("record_memory_history",
           lib.tdm_record_memory_history(ctypes.byref(opts)))


def is_recording():
    return bool(library().tdm_is_recording())


def dump_snapshot(path):
    """Writes a .tdm snapshot to `path` (atomically: never half-written)."""
    _check("dump_snapshot", library().tdm_dump_snapshot(os.fsencode(path)))


_phase_lock = threading.Lock()
_phase_now = None  # the phase this module last marked
_user_marks = False  # the program marked a phase or step itself
# (time in µs since the epoch, name) of every phase and step marked from
# Python, steps as "ProfilerStep#N": tidemark_tensors.py writes them into
# PyTorch's memory snapshot, whose tensors then fall into phases too.
# Bounded, as tidemark's own ring is: the oldest go first.
_MARKS_KEPT = 1 << 20
_marks_log = []
_steps_marked = 0


def _log_mark(name, stage="START"):
    if len(_marks_log) >= _MARKS_KEPT:
        del _marks_log[:_MARKS_KEPT // 2]
    _marks_log.append((time.time_ns() // 1000, name, stage))


class _Phase:
    """What phase() returns: the phase is marked already; as a context
    manager it also ends with its block: on exit it goes back to the phase
    that was in force before, or to no phase when there was none (so a
    `with phase("init"):` block does not leave "init" in force, for later
    blocks to restore)."""

    def __init__(self, name, before):
        self.name = name
        self.before = before

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global _phase_now
        with _phase_lock:
            if self.before is not None:
                _check("phase", library().tdm_phase(self.before.encode()))
                _log_mark(self.before)
            else:
                _check("phase", library().tdm_phase_end())
                _log_mark(self.name, "END")
            _phase_now = self.before
        return False

    def __repr__(self):
        return "tidemark.phase(%r)" % self.name


def phase(name):
    """Marks the start of a named phase ("forward", "backward",
    "optimizer", ...) for the whole process.  Also a context manager, like
    torch.profiler.record_function::

        with tidemark.phase("forward"):
            loss = model(x)

    marks "forward" on entry and, on exit, marks again the phase that was
    in force before it (the one this module marked last), so phases nest;
    a block that began with no phase in force ends its phase on exit
    (what follows is in no phase).  A plain call's phase lasts until the
    next one."""
    global _user_marks
    _user_marks = True
    return _auto_phase(name)


def _auto_phase(name):
    global _phase_now
    name = str(name)
    lib = library()
    with _phase_lock:
        _check("phase", lib.tdm_phase(name.encode()))
        before, _phase_now = _phase_now, name
        _log_mark(name)
    return _Phase(name, before)


def step():
    """Marks the start of the next training step (steps count from 1)."""
    global _user_marks
    _user_marks = True
    _auto_step()


def _auto_step():
    global _steps_marked
    _check("step", library().tdm_step())
    with _phase_lock:
        _steps_marked += 1
        _log_mark("ProfilerStep#%d" % _steps_marked)


def auto_phases():
    """Marks phases and steps from torch's own hooks, for a program that
    marks none: forward (the outermost module call), backward, optimizer
    and a step per optimizer step (see tidemark_torch.py).  Installs them
    now if torch is imported, else when it is.  A program that calls
    phase() or step() itself keeps its own marks."""
    import tidemark_torch
    return tidemark_torch.install_when_imported()


def _category(category):
    return _enum({n: i for i, n in enumerate(CATEGORIES)}, category, "category")


@contextlib.contextmanager
def tag(category):
    """Allocations this thread makes inside the block carry `category`
    ("parameter", "optimizer_state", "gradient", "activation", "input",
    "temporary" or "unknown").  Tags nest up to 16 deep."""
    lib = library()
    _check("tag", lib.tdm_tag_push(_category(category)))
    try:
        yield
    finally:
        lib.tdm_tag_pop()


def tag_pointer(ptr, category):
    """Tags one live allocation after the fact: an address, or anything with
    a data_ptr() method (a torch.Tensor)."""
    if hasattr(ptr, "data_ptr"):
        ptr = ptr.data_ptr()
    _check("tag_pointer", library().tdm_tag_ptr(ctypes.c_void_p(int(ptr)),
                                                _category(category)))


def set_metadata(text):
    """A free-form string kept in the snapshot header; None clears it."""
    arg = None if text is None else str(text).encode()
    _check("set_metadata", library().tdm_set_metadata(arg))


def memory_stats(device=0):
    """A flat dict like torch.cuda.memory_stats(device):
    "allocated_bytes.all.current", "reserved_bytes.large_pool.peak", ...,
    "allocation.all.allocated", "num_alloc_retries", "num_ooms"."""
    lib = library()
    out = {}
    for index, pool in enumerate(_POOLS):
        st = _Stats()
        st.size = ctypes.sizeof(_Stats)
        _check("memory_stats",
               lib.tdm_memory_stats_pool(int(device), index, ctypes.byref(st)))
        for row in _STAT_ROWS:
            stat = getattr(st, row)
            for field in ("current", "peak", "allocated", "freed"):
                out["%s.%s.%s" % (row, pool, field)] = getattr(stat, field)
        out["num_alloc_retries"] = st.num_alloc_retries
        out["num_ooms"] = st.num_ooms
    return out


def reset_peak_memory_stats(device=0):
    _check("reset_peak_memory_stats", library().tdm_reset_peak_stats(int(device)))


def empty_cache(device=-1):
    """Gives every cached, unused segment back (-1: on every device)."""
    _check("empty_cache", library().tdm_empty_cache(int(device)))


def pluggable_allocator():
    """(path, "tdm_torch_alloc", "tdm_torch_free"): the arguments of
    torch.cuda.memory.CUDAPluggableAllocator."""
    return (library_path(), "tdm_torch_alloc", "tdm_torch_free")


def torch_hooks():
    """Addresses of the optional hooks, for the set_*_fn methods of a
    CUDAPluggableAllocator's _allocator: {"init": ..., "reset": ...,
    "memory_fraction": ..., "base_alloc": ..., "record_stream": ...}.
    base_alloc is what torch shares a CUDA tensor with (its
    getBaseAllocation: the segment a block lies in, which
    cudaIpcGetMemHandle exports); without it torch takes the block for the
    whole allocation and the receiving process maps the wrong memory."""
    lib = library()
    names = {"init": "tdm_torch_init", "reset": "tdm_torch_reset",
             "memory_fraction": "tdm_torch_memory_fraction",
             "base_alloc": "tdm_torch_base_alloc",
             "record_stream": "tdm_torch_record_stream"}
    return {key: ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
            for key, sym in names.items()}


def use_with_torch(memory=None):
    """Makes tidemark PyTorch's CUDA allocator (before any CUDA memory is
    allocated) and returns the CUDAPluggableAllocator.  `memory`: the
    torch.cuda.memory module to use (default: import torch's)."""
    if memory is None:
        import torch  # only here: the rest of this module needs no torch
        memory = torch.cuda.memory

    alloc = memory.CUDAPluggableAllocator(*pluggable_allocator())
    hooks = torch_hooks()
    inner = alloc._allocator
    for key, setter in (("init", "set_init_fn"), ("reset", "set_reset_fn"),
                        ("memory_fraction", "set_memory_fraction_fn"),
                        ("base_alloc", "set_base_alloc_fn"),
                        ("record_stream", "set_record_stream_fn")):
        if hasattr(inner, setter):
            getattr(inner, setter)(hooks[key])
    memory.change_current_allocator(alloc)
    return alloc


def _main(argv):
    """python -m tidemark SCRIPT [ARGS...] | -m MODULE [ARGS...]: runs the
    program with automatic phases (auto_phases()), as `tidemark run` does
    for a Python program; recording itself is TIDEMARK_CONF's (under
    LD_PRELOAD or `tidemark run`)."""
    import runpy
    import sys
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: python -m tidemark SCRIPT [ARGS...]\n"
                         "       python -m tidemark -m MODULE [ARGS...]\n")
        return 2
    import tidemark_torch
    import tidemark_tensors
    if tidemark_torch.enabled_by_conf(os.environ.get("TIDEMARK_CONF")):
        auto_phases()
    tidemark_tensors.start_when_imported()  # torch_tensors
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write("python -m tidemark -m: a module name is missing\n")
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    import sys as _sys
    # Run as a script, this file is __main__: hand the work to the module
    # of its name, so marks and state are those `import tidemark` sees.
    _sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tidemark as _self
    _sys.exit(_self._main(_sys.argv[1:]))
