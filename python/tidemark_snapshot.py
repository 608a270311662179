"""Reading tidemark snapshots from Python: tidemark.load(path).

Everything is read by libtidemark_reader.so (include/tidemark_reader.h),
the reader and analysis model the `tidemark` command uses; this module
only copies its tables out and names their columns, so a notebook's peak,
sites and bytes per category are those of `tidemark summary` and
`tidemark categories`.  Tables are numpy structured arrays when numpy can
be imported, else lists of namedtuples with the same fields;
Snapshot.to_pandas() gives DataFrames when pandas is installed.

The library is found as python/tidemark.py finds libtidemark.so, under its
own name: TIDEMARK_READER_LIB (its path or folder), else the folder of
TIDEMARK_LIB, next to this file or in ../lib, ../lib64, the build*/
folders of this source tree, then the loader's search path.
docs/python.md walks through it.
"""

import collections
import ctypes
import ctypes.util
import os
import threading

import tidemark

__all__ = ["load", "Snapshot", "Run", "Peak", "Site", "CATEGORIES"]

CATEGORIES = tidemark.CATEGORIES  # index = tdm_category
READER_NAME = "libtidemark_reader.so"
PARTIAL_OK = 1  # TDM_SNAPSHOT_PARTIAL_OK
_SITE_FRAMES = 2  # frames per site, as `tidemark summary` shows them


# ---- the C rows (tidemark_reader.h), field for field ---------------------

class _Info(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t)] + [
        (n, ctypes.c_char_p) for n in ("host", "tool_version", "command", "config",
                                       "metadata", "notes", "alloc_mode")] + [
        ("pid", ctypes.c_int64), ("rank", ctypes.c_int32), ("local_rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32), ("format_version", ctypes.c_uint32)] + [
        (n, ctypes.c_uint64) for n in ("start_time_us", "dump_time_us", "max_entries",
                                       "dropped_events", "time_origin_ns")] + [
        ("complete", ctypes.c_int), ("truncated", ctypes.c_int),
        ("truncated_at", ctypes.c_uint64), ("torch_segments", ctypes.c_int)] + [
        (n, ctypes.c_size_t) for n in ("event_count", "segment_count", "block_count",
                                       "frame_count", "stack_count", "stack_frame_count",
                                       "device_count", "allocation_count", "phase_count")]


class _Event(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("time_ns", "address", "size", "requested",
                                                "stream")] + [
        ("stack_id", ctypes.c_uint32), ("phase", ctypes.c_uint32), ("step", ctypes.c_uint32),
        ("device", ctypes.c_int32), ("action", ctypes.c_uint8), ("tag", ctypes.c_uint8)]


class _Segment(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("address", "total_size", "allocated",
                                                "stream")] + [
        ("device", ctypes.c_int32), ("stack_id", ctypes.c_uint32),
        ("block_count", ctypes.c_uint32), ("pool", ctypes.c_uint8),
        ("is_expandable", ctypes.c_uint8)]


class _Block(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("address", "size", "requested_size",
                                                "alloc_time_ns")] + [
        ("segment", ctypes.c_uint32), ("stack_id", ctypes.c_uint32),
        ("state", ctypes.c_uint8), ("category", ctypes.c_uint8)]


class _Frame(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_uint64), ("function", ctypes.c_char_p),
                ("file", ctypes.c_char_p), ("module", ctypes.c_char_p),
                ("line", ctypes.c_uint32), ("kind", ctypes.c_uint8),
                ("tidemark", ctypes.c_uint8)]


class _StackFrame(ctypes.Structure):
    _fields_ = [("stack_id", ctypes.c_uint32), ("position", ctypes.c_uint32),
                ("frame", ctypes.c_uint32)]


class _Device(ctypes.Structure):
    _fields_ = [("ordinal", ctypes.c_int32), ("vendor", ctypes.c_char_p),
                ("name", ctypes.c_char_p), ("label", ctypes.c_char_p),
                ("capacity", ctypes.c_uint64)] + [
        (n, ctypes.c_int64) for n in ("peak_allocated", "peak_reserved", "end_allocated",
                                      "end_reserved")] + [
        (n, ctypes.c_uint64) for n in ("end_blocks", "alloc_events", "free_events",
                                       "oom_events")] + [
        ("reserved_known", ctypes.c_int)]


class _Allocation(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("address", "size", "alloc_time_ns",
                                                "free_time_ns")] + [
        ("alloc_seq", ctypes.c_int64), ("free_seq", ctypes.c_int64),
        ("stack_id", ctypes.c_uint32), ("device", ctypes.c_int32),
        ("category", ctypes.c_uint8), ("category_source", ctypes.c_uint8),
        ("stack_of_free", ctypes.c_uint8)]


class _Peak(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("of_reserved", ctypes.c_int)] + [
        (n, ctypes.c_int64) for n in ("bytes", "allocated", "reserved", "seq")] + [
        ("time_ns", ctypes.c_uint64), ("step", ctypes.c_uint32), ("phase", ctypes.c_uint32),
        ("history", ctypes.c_int)]


class _Site(ctypes.Structure):
    _fields_ = [("stack_id", ctypes.c_uint32), ("stack_of_free", ctypes.c_int)] + [
        (n, ctypes.c_uint64) for n in ("live_bytes", "live_count", "total_bytes",
                                       "total_count")]


# ---- finding and declaring the library -----------------------------------

_lib = None
_lib_lock = threading.Lock()


def _candidates():
    env = os.environ.get("TIDEMARK_READER_LIB")
    if env:
        return [os.path.join(env, READER_NAME) if os.path.isdir(env) else env]
    names = []
    lib_env = os.environ.get("TIDEMARK_LIB")
    if lib_env:
        folder = lib_env if os.path.isdir(lib_env) else os.path.dirname(lib_env)
        names.append(os.path.join(folder, READER_NAME))
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    names += [os.path.join(f, READER_NAME)
              for f in (here, os.path.join(root, "lib"), os.path.join(root, "lib64"))]
    names += [lib for lib, skipped in tidemark._build_trees(root, READER_NAME) if not skipped]
    names += [READER_NAME + ".0", READER_NAME]
    found = ctypes.util.find_library("tidemark_reader")
    if found:
        names.append(found)
    return names


def _declare(lib):
    c = ctypes
    P = c.POINTER
    sigs = {
        "tdm_status_name": (c.c_char_p, [c.c_int]),
        "tdm_snapshot_load": (c.c_int, [c.c_char_p, c.c_uint, P(c.c_void_p), c.c_char_p,
                                        c.c_size_t]),
        "tdm_snapshot_free": (None, [c.c_void_p]),
        "tdm_snapshot_get_info": (c.c_int, [c.c_void_p, P(_Info)]),
        "tdm_snapshot_events": (P(_Event), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_segments": (P(_Segment), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_blocks": (P(_Block), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_frames": (P(_Frame), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_stack_frames": (P(_StackFrame), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_devices": (P(_Device), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_allocations": (P(_Allocation), [c.c_void_p, P(c.c_size_t)]),
        "tdm_snapshot_action_name": (c.c_char_p, [c.c_uint]),
        "tdm_snapshot_phase_name": (c.c_char_p, [c.c_void_p, c.c_uint32, c.c_char_p,
                                                 c.c_size_t]),
        "tdm_snapshot_get_peak": (c.c_int, [c.c_void_p, c.c_size_t, P(_Peak)]),
        "tdm_snapshot_get_peak_since": (c.c_int, [c.c_void_p, c.c_size_t, c.c_int64,
                                                  P(_Peak)]),
        "tdm_snapshot_sites_at": (c.c_int, [c.c_void_p, c.c_size_t, c.c_int64,
                                            P(P(_Site)), P(c.c_size_t)]),
        "tdm_snapshot_sites_free": (None, [P(_Site)]),
        "tdm_snapshot_site_text": (c.c_size_t, [c.c_void_p, c.c_uint32, c.c_uint,
                                                c.c_char_p, c.c_size_t]),
        "tdm_snapshot_category_bytes": (c.c_int, [c.c_void_p, c.c_size_t, P(c.c_int64),
                                                  c.c_size_t, P(c.c_int64)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def reader_library():
    """The loaded libtidemark_reader.so (a ctypes.CDLL).  Raises OSError
    naming the places tried when none loads."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for name in _candidates():
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
            return lib
        raise OSError("tidemark: cannot load %s (set TIDEMARK_READER_LIB to its path or "
                      "folder).  Tried: %s" % (READER_NAME, "; ".join(errors)))


def _check(lib, call, status, message=None):
    if status != 0:
        name = lib.tdm_status_name(status).decode()
        raise tidemark.TidemarkError(call, status, name, message or name)


def _numpy():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _field(row, name):
    """A column of one row, numpy record or namedtuple."""
    return row[name] if isinstance(row, tuple) is False else getattr(row, name)


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


# ---- tables ---------------------------------------------------------------

Peak = collections.namedtuple(
    "Peak", "rank device bytes time_ns offset_s step phase of_reserved allocated reserved seq")
Peak.__doc__ = """The peak `tidemark summary` reports for one device: bytes (of
allocated memory, or of reserved memory when of_reserved: PyTorch's caching
allocator seen from below), when (time_ns since the epoch, offset_s from the
time origin every command uses, step, phase name), and the allocated and
reserved bytes at that moment; seq is its event position (-1: the start)."""

Site = collections.namedtuple(
    "Site", "stack_id live_bytes live_count share frames total_bytes total_count "
            "stack_of_free")
Site.__doc__ = """An allocation site at a moment, as `tidemark summary` lists
it: bytes and allocations live then, their share of the allocated bytes,
its innermost frames as the summary writes them ("function (file:line)",
one a line), and every allocation of the window made there."""


def _struct_rows(ptr, count, struct):
    """A table of `count` C rows at `ptr`: a numpy structured array (a
    copy, packed), else a list of namedtuples."""
    names = [f[0] for f in struct._fields_]
    np = _numpy()
    if np is not None:
        kinds = {ctypes.c_uint64: "<u8", ctypes.c_int64: "<i8", ctypes.c_uint32: "<u4",
                 ctypes.c_int32: "<i4", ctypes.c_uint8: "u1", ctypes.c_int: "<i4"}
        laid = np.dtype({"names": names,
                         "formats": [kinds[t] for _, t in struct._fields_],
                         "offsets": [getattr(struct, n).offset for n in names],
                         "itemsize": ctypes.sizeof(struct)})
        packed = np.dtype([(n, laid.fields[n][0]) for n in names])
        if count == 0:
            return np.zeros(0, dtype=packed)
        raw = ctypes.string_at(ptr, count * ctypes.sizeof(struct))
        return np.frombuffer(raw, dtype=laid).astype(packed)
    Row = _row_type(struct)
    return [Row(*(getattr(ptr[i], n) for n in names)) for i in range(count)]


_row_types = {}


def _row_type(struct):
    if struct not in _row_types:
        _row_types[struct] = collections.namedtuple(
            struct.__name__.lstrip("_"), [f[0] for f in struct._fields_])
    return _row_types[struct]


def _table(names, formats, rows):
    """A table of Python values (strings among them): numpy with object
    columns for the strings, else namedtuples."""
    np = _numpy()
    if np is None:
        Row = collections.namedtuple("Row", names)
        return [Row(*r) for r in rows]
    arr = np.empty(len(rows), dtype=list(zip(names, formats)))
    for i, r in enumerate(rows):
        arr[i] = r
    return arr


# ---- one snapshot ---------------------------------------------------------

class Snapshot:
    """One snapshot, read and analysed by libtidemark_reader.so.

    Tables (numpy structured arrays, else lists of namedtuples):
      events      the history, oldest first: time_ns, address, size,
                  requested, stream, stack_id, phase, step, device, action
                  (tidemark_snapshot.action_name), tag (category tag)
      segments    the final allocator state's segments (allocated: bytes
                  of their active blocks); blocks: their blocks
      stacks      one row per frame of every stack, innermost first:
                  stack_id, position, function, file, line, module, kind,
                  tidemark (a frame of tidemark itself)
      devices     ordinal, vendor, name, label, capacity, peak_allocated,
                  peak_reserved, end_allocated, end_reserved, end_blocks...
      categories  one row per allocation with the category decided for it
                  as `tidemark categories` decides: address, size,
                  alloc_time_ns, free_time_ns (0: live at the dump),
                  alloc_seq (-1: made before the window), free_seq (-1:
                  live at the dump), stack_id, device, category (index
                  into CATEGORIES), category_source (0 tag, 1 stack rule,
                  2 phases, 3 a fact of its free), stack_of_free
    """

    def __init__(self, path, partial=False):
        self.path = os.fspath(path)
        lib = self._lib = reader_library()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        status = lib.tdm_snapshot_load(os.fsencode(self.path), PARTIAL_OK if partial else 0,
                                       ctypes.byref(handle), err, len(err))
        _check(lib, "load", status, _text(err.value))
        self._handle = handle
        info = _Info()
        info.size = ctypes.sizeof(_Info)
        _check(lib, "load", lib.tdm_snapshot_get_info(handle, ctypes.byref(info)))
        self.info = {n: (_text(getattr(info, n)) if t is ctypes.c_char_p else getattr(info, n))
                     for n, t in _Info._fields_ if n != "size"}
        self.rank = self.info["rank"]
        self.host = self.info["host"]
        self.pid = self.info["pid"]
        self.truncated = bool(self.info["truncated"])
        self._copy_tables()

    def _rows(self, fn, struct):
        n = ctypes.c_size_t()
        ptr = fn(self._handle, ctypes.byref(n))
        return _struct_rows(ptr, n.value, struct)

    def _copy_tables(self):
        lib = self._lib
        self.events = self._rows(lib.tdm_snapshot_events, _Event)
        self.segments = self._rows(lib.tdm_snapshot_segments, _Segment)
        self.blocks = self._rows(lib.tdm_snapshot_blocks, _Block)
        self.categories = self._rows(lib.tdm_snapshot_allocations, _Allocation)
        n = ctypes.c_size_t()
        fr = lib.tdm_snapshot_frames(self._handle, ctypes.byref(n))
        frames = [(_text(fr[i].function), _text(fr[i].file), fr[i].line, _text(fr[i].module),
                   fr[i].kind, fr[i].tidemark, fr[i].pc) for i in range(n.value)]
        sf = lib.tdm_snapshot_stack_frames(self._handle, ctypes.byref(n))
        rows = []
        for i in range(n.value):
            f = frames[sf[i].frame] if sf[i].frame < len(frames) else ("?", "", 0, "", 0, 0, 0)
            rows.append((sf[i].stack_id, sf[i].position) + f)
        self.stacks = _table(["stack_id", "position", "function", "file", "line", "module",
                              "kind", "tidemark", "pc"],
                             ["u4", "u4", "O", "O", "u4", "O", "u1", "u1", "u8"], rows)
        dv = lib.tdm_snapshot_devices(self._handle, ctypes.byref(n))
        names = [f[0] for f in _Device._fields_]
        self.devices = _table(
            names, ["i4", "O", "O", "O", "u8", "i8", "i8", "i8", "i8", "u8", "u8", "u8", "u8",
                    "i4"],
            [tuple(_text(v) if isinstance(v, bytes) else v
                   for v in (getattr(dv[i], k) for k in names)) for i in range(n.value)])
        self._device_ordinals = [dv[i].ordinal for i in range(n.value)]
        self._device_has_history = [bool(dv[i].alloc_events or dv[i].free_events or
                                         dv[i].end_blocks) for i in range(n.value)]

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.tdm_snapshot_free(handle)
            self._handle = None

    def __repr__(self):
        return "<tidemark.Snapshot %s: %d events, %d devices%s>" % (
            self.path, self.info["event_count"], self.info["device_count"],
            ", rank %d" % self.rank if self.rank >= 0 else "")

    # ---- names --------------------------------------------------------------

    def phase_name(self, phase):
        """The name of a phase id ("" for 0)."""
        buf = ctypes.create_string_buffer(256)
        return _text(self._lib.tdm_snapshot_phase_name(self._handle, phase, buf, len(buf)))

    def _device_index(self, device):
        try:
            return self._device_ordinals.index(device)
        except ValueError:
            raise ValueError("%s has no device %r (its devices: %s)" % (
                self.path, device, ", ".join(map(str, self._device_ordinals)) or "none")) \
                from None

    def _devices_shown(self, device):
        """Device indices a question is about: the one named, else those
        with allocations (as the summary and categories show them)."""
        if device is not None:
            return [self._device_index(device)]
        shown = [i for i, h in enumerate(self._device_has_history) if h]
        return shown or list(range(len(self._device_ordinals)))

    # ---- the answers ------------------------------------------------------

    def _peak(self, di, since=None):
        p = _Peak()
        lib = self._lib
        if since is None or since < 0:
            status = lib.tdm_snapshot_get_peak(self._handle, di, ctypes.byref(p))
        else:
            status = lib.tdm_snapshot_get_peak_since(self._handle, di, since, ctypes.byref(p))
        _check(lib, "peak", status)
        origin = self.info["time_origin_ns"]
        return Peak(self.rank, p.device, p.bytes, p.time_ns,
                    (p.time_ns - origin) / 1e9 if p.history else None, p.step,
                    self.phase_name(p.phase), bool(p.of_reserved), p.allocated, p.reserved,
                    p.seq)

    def peak(self, device=None, since=None):
        """The peak of `device` (an ordinal) as a Peak; without one, a list
        of the peaks of every device with allocations, in device order.
        since: an event position; the peak of the history from there on
        (the state there included), as a test's stretch of a recording."""
        if device is not None:
            return self._peak(self._device_index(device), since)
        return [self._peak(i, since) for i in self._devices_shown(None)]

    def site_frames(self, stack_id, frames=_SITE_FRAMES):
        """The frames of a site as the summary writes them, one a line."""
        buf = ctypes.create_string_buffer(4096)
        self._lib.tdm_snapshot_site_text(self._handle, stack_id, frames, buf, len(buf))
        return _text(buf.value)

    def sites_at(self, seq, device=None, frames=_SITE_FRAMES):
        """Every site of `device` (default: the first device with
        allocations) at event position `seq`, largest live bytes first."""
        di = self._devices_shown(device)[0]
        return self._sites(di, seq, None, frames)

    def _sites(self, di, seq, total, frames):
        lib = self._lib
        arr = ctypes.POINTER(_Site)()
        n = ctypes.c_size_t()
        _check(lib, "sites", lib.tdm_snapshot_sites_at(self._handle, di, seq,
                                                       ctypes.byref(arr), ctypes.byref(n)))
        out = []
        try:
            buf = ctypes.create_string_buffer(4096)
            for i in range(n.value):
                s = arr[i]
                lib.tdm_snapshot_site_text(self._handle, s.stack_id, frames, buf, len(buf))
                share = s.live_bytes / total if total else None
                out.append(Site(s.stack_id, s.live_bytes, s.live_count, share,
                                _text(buf.value), s.total_bytes, s.total_count,
                                bool(s.stack_of_free)))
        finally:
            lib.tdm_snapshot_sites_free(arr)
        return out

    def top_sites(self, n=10, device=None, frames=_SITE_FRAMES):
        """The `n` sites holding the most bytes at the peak of `device`
        (default: the device with the highest peak), as `tidemark summary`
        lists them: live bytes, count, share of the allocated bytes at the
        peak, innermost frames.  Only sites with bytes live then."""
        if device is None:
            peaks = self.peak()
            if not peaks:
                return []
            device = max(peaks, key=lambda p: p.bytes).device
        di = self._device_index(device)
        p = self._peak(di)
        total = p.allocated if p.offset_s is not None else _field(self.devices[di],
                                                                  "end_allocated")
        sites = self._sites(di, p.seq, total, frames)
        return [s for s in sites if s.live_bytes][:n]

    def bytes_by_category(self, device=None, at="steps"):
        """Bytes of each category live on `device` (default: the first
        with allocations), as `tidemark categories` counts them, at:
          "steps"  the highest moment of each step (its allocated bytes'
                   peak within the step), one row per step seen;
          "peak"   the device's peak;
          a list of event positions (-1 the start).
        Rows: (step, seq, time_ns, phase, total, then one column per
        category name) as a numpy structured array or namedtuples."""
        di = self._devices_shown(device)[0]
        ordinal = self._device_ordinals[di]
        if isinstance(at, str):
            if at == "peak":
                seqs = [self._peak(di).seq]
            elif at == "steps":
                seqs = self._step_peaks(ordinal)
            else:
                raise ValueError("at must be 'steps', 'peak' or a list of positions")
        else:
            seqs = sorted(int(s) for s in at)
        ncat = len(CATEGORIES)
        out = (ctypes.c_int64 * max(1, len(seqs) * ncat))()
        arg = (ctypes.c_int64 * max(1, len(seqs)))(*seqs)
        _check(self._lib, "bytes_by_category",
               self._lib.tdm_snapshot_category_bytes(self._handle, di, arg, len(seqs), out))
        ev = self.events
        rows = []
        for i, seq in enumerate(seqs):
            if seq >= 0:
                e = ev[seq]
                step, t, ph = int(e["step"] if _numpy() else e.step), \
                    int(e["time_ns"] if _numpy() else e.time_ns), \
                    self.phase_name(int(e["phase"] if _numpy() else e.phase))
            else:
                step, t, ph = 0, 0, ""
            cats = [out[i * ncat + c] for c in range(ncat)]
            rows.append((step, seq, t, ph, sum(cats)) + tuple(cats))
        return _table(["step", "seq", "time_ns", "phase", "total"] + list(CATEGORIES),
                      ["u4", "i8", "u8", "O", "i8"] + ["i8"] * ncat, rows)

    def _step_peaks(self, ordinal):
        """Per step, the position where the device's allocated bytes are
        highest within it (the model's own replay: its category sums at
        every change, the highest total kept)."""
        ev = self.events
        np = _numpy()
        if np is not None:
            steps = ev["step"]
            mine = np.nonzero(ev["device"] == ordinal)[0]
            step_of = steps[mine]
        else:
            mine = [i for i, e in enumerate(ev) if e.device == ordinal]
            step_of = [ev[i].step for i in mine]
        if len(mine) == 0:
            return [-1]
        seqs = [int(i) for i in mine]
        ncat = len(CATEGORIES)
        out = (ctypes.c_int64 * (len(seqs) * ncat))()
        arg = (ctypes.c_int64 * len(seqs))(*seqs)
        di = self._device_ordinals.index(ordinal)
        _check(self._lib, "bytes_by_category",
               self._lib.tdm_snapshot_category_bytes(self._handle, di, arg, len(seqs), out))
        if np is not None:
            totals = np.ctypeslib.as_array(out).reshape(len(seqs), ncat).sum(axis=1)
            step_of = np.asarray(step_of)
            # per step, the first position of its highest total
            order = np.lexsort((np.arange(len(seqs)), -totals, step_of))
            first = np.ones(len(order), dtype=bool)
            first[1:] = step_of[order][1:] != step_of[order][:-1]
            return sorted(int(seqs[i]) for i in order[first])
        best = {}
        for k, seq in enumerate(seqs):
            total = sum(out[k * ncat + c] for c in range(ncat))
            s = int(step_of[k])
            if s not in best or total > best[s][0]:
                best[s] = (total, seq)
        return sorted(v[1] for v in best.values())

    # ---- pandas -------------------------------------------------------------

    TABLES = ("events", "segments", "blocks", "stacks", "devices", "categories")

    def to_pandas(self, table=None):
        """The table named `table` (one of Snapshot.TABLES) as a pandas
        DataFrame, with readable columns added (action_name, category_name,
        phase_name); without a name, a dict of every table."""
        try:
            import pandas
        except ImportError:
            raise ImportError("tidemark: to_pandas() needs pandas, which this Python "
                              "lacks (pip install pandas, or Debian's python3-pandas); "
                              "the tables themselves are numpy arrays or tuples "
                              "without it") from None
        if table is None:
            return {t: self.to_pandas(t) for t in self.TABLES}
        if table not in self.TABLES:
            raise ValueError("table must be one of %s" % ", ".join(self.TABLES))
        rows = getattr(self, table)
        df = pandas.DataFrame(rows) if _numpy() is None else pandas.DataFrame.from_records(
            rows, columns=list(rows.dtype.names))
        if table == "events":
            df["action_name"] = [action_name(a) for a in df["action"]]
            df["phase_name"] = [self.phase_name(int(p)) for p in df["phase"]]
        if table in ("categories", "blocks"):
            df["category_name"] = [CATEGORIES[c] for c in df["category"]]
        if self.rank >= 0:
            df.insert(0, "rank", self.rank)
        return df


def action_name(action):
    """The name of an event's action ("alloc", "free_completed", ...)."""
    return _text(reader_library().tdm_snapshot_action_name(int(action)))


# ---- a run folder -----------------------------------------------------------

class Run:
    """The snapshots of a folder (`tidemark run -o DIR`: one .tdm per rank),
    in rank order as `tidemark summary DIR` orders them: by the rank in
    each header, files without one after, ties in name order."""

    def __init__(self, path, partial=False):
        self.path = os.fspath(path)
        names = sorted(n for n in os.listdir(self.path)
                       if not n.startswith(".") and n.endswith(".tdm") and len(n) > 4
                       and not os.path.isdir(os.path.join(self.path, n)))
        if not names:
            raise tidemark.TidemarkError("load", 9, "IO_ERROR",
                                         "%s: no .tdm snapshot in this directory" % self.path)
        snaps = [Snapshot(os.path.join(self.path, n), partial=partial) for n in names]
        big = float("inf")
        self.snapshots = sorted(snaps, key=lambda s: s.rank if s.rank >= 0 else big)

    def __len__(self):
        return len(self.snapshots)

    def __iter__(self):
        return iter(self.snapshots)

    def __getitem__(self, i):
        return self.snapshots[i]

    def __repr__(self):
        return "<tidemark.Run %s: %d snapshots>" % (self.path, len(self.snapshots))

    def peak(self):
        """Every rank's peaks (Peak.rank says whose), in rank order."""
        return [p for s in self.snapshots for p in s.peak()]

    def top_sites(self, n=10, frames=_SITE_FRAMES):
        """The top sites of the rank with the highest peak (the one the
        summary's rank table names), as (rank, [Site])."""
        best = max(self.snapshots, key=lambda s: max([p.bytes for p in s.peak()] or [0]))
        return best.rank, best.top_sites(n, frames=frames)

    def to_pandas(self, table):
        """One table of every rank as one DataFrame, a rank column first."""
        import pandas  # Snapshot.to_pandas says what is missing
        return pandas.concat([s.to_pandas(table) for s in self.snapshots], ignore_index=True)


def load(path, partial=False):
    """A Snapshot of a file, or a Run of a folder's snapshots
    (tidemark.load's documentation)."""
    if os.path.isdir(path):
        return Run(path, partial=partial)
    return Snapshot(path, partial=partial)
