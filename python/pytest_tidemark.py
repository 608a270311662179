"""pytest_tidemark: device-memory limits for a test suite, as pytest-memray's
limit_memory is for host memory.

    @pytest.mark.limit_device_memory("12GiB")   # the test's peak, per device
    @pytest.mark.limit_device_leaks("1MiB")     # made in the test, live at its end

A test over its limit fails with the peak (bytes, device, when) and the
sites holding the most memory at that moment, as `tidemark summary` names
them; a leak fails with the bytes still allocated and the sites that made
them.  `--tidemark-dump DIR` keeps the snapshot of each failing test in
DIR (every test is then recorded, marked or not).

Enable it with `-p pytest_tidemark` (python/ on PYTHONPATH), or install
python/ (its pyproject.toml declares the pytest11 entry point).

What is recorded, per test (only the test's call, not its fixtures):
  torch    when torch is imported and torch.cuda.is_available() (a GPU, or
           the simulated one: docs/simulate.md): PyTorch's own memory
           history (torch.cuda.memory._record_memory_history), dumped as
           its pickle at the end of the test and read by tidemark's
           importer (under `tidemark run`, the run's own history, left
           running); the figures are PyTorch's allocated bytes (tensors);
  tidemark otherwise: tidemark's recording (tdm_malloc, or any program under
           libtidemark_preload.so): started if it is not on, kept on if
           it is (`tidemark run -- pytest`), the test's stretch told by a
           phase mark ("pytest NODEID") at its start.
--tidemark-backend picks one.  Sizes take the suffixes TIDEMARK_CONF does
(K, KB, KiB, M, MiB, G, GiB, T: powers of 1024) or a number of bytes.
docs/pytest.md says more.
"""

import gc
import os
import re
import shutil
import sys
import tempfile

import pytest

import tidemark

_UNITS = {"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
          "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")
_PHASE_ACTION = 9  # the event action of a phase mark (format/event.h)


def parse_size(value):
    """Bytes from 12, "12GiB", "1.5 MiB" (powers of 1024, as TIDEMARK_CONF)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = _SIZE.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError("a size is bytes or a number with K, M, G or T (KiB, MiB, GiB...), "
                         "not %r" % (value,))
    return int(round(float(m.group(1)) * (1 << _UNITS[m.group(2).lower()])))


def format_size(n):
    """A size as the tidemark commands write one (12.00 MiB)."""
    if n < 1024:
        return "%d B" % n
    v, units, u = float(n), ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"), 0
    while u + 1 < len(units) and v >= 1023.995:
        v /= 1024.0
        u += 1
    return "%.2f %s" % (v, units[u])


def _indent(text, by):
    return ("\n" + " " * by).join(text.splitlines())


# ---- recording one test ---------------------------------------------------

class _Marked:
    """A test's stretch of a longer history: a phase mark "pytest NODEID"
    opens it (in tidemark's events, and in PyTorch's pickle as the
    annotation tidemark_tensors writes for each mark)."""

    def __init__(self):
        self.mark = None
        self.phase = None

    def open_mark(self, nodeid):
        self.mark = "pytest " + nodeid
        # not tidemark.phase(): that would turn off the automatic torch phases
        self.phase = tidemark._auto_phase(self.mark)

    def close_mark(self):
        if self.phase is not None:
            self.phase.__exit__(None, None, None)
            self.phase = None

    def since(self, snap):
        """The position of the test's mark (its last one: a name may repeat),
        or -1 when the history has lost it (the window is then longer than
        the test, never shorter)."""
        ev = snap.events
        if isinstance(ev, list):
            marks = [i for i, e in enumerate(ev) if e.action == _PHASE_ACTION]
        else:
            marks = [int(i) for i in (ev["action"] == _PHASE_ACTION).nonzero()[0]]
        for i in reversed(marks):
            if snap.phase_name(int(_col(ev[i], "phase"))) == self.mark:
                return i
        return -1


class _TorchRecording(_Marked):
    """PyTorch's memory history over one test, written as its pickle with
    tidemark's marks.  Under `tidemark run` the run's own history (started
    by tidemark_tensors) is used and left running; else one is started for
    the test and stopped after it."""
    suffix = ".pickle"

    def __init__(self, torch):
        super().__init__()
        self.torch = torch
        self.own = False

    def start(self, nodeid):
        tensors = sys.modules.get("tidemark_tensors")
        self.own = getattr(tensors, "_memory", None) is None
        if self.own:
            self.torch.cuda.memory._record_memory_history(max_entries=1000000)
        self.open_mark(nodeid)

    def stop(self, path):
        import pickle
        gc.collect()
        self.torch.cuda.synchronize()
        self.close_mark()
        snap = self.torch.cuda.memory._snapshot()
        try:
            import tidemark_tensors
            snap = tidemark_tensors._with_marks(snap)
        except ImportError:
            pass
        with open(path, "wb") as f:
            pickle.dump(snap, f)
        if self.own:
            self.torch.cuda.memory._record_memory_history(enabled=None)
            self.own = False

    def device_name(self, ordinal):
        """PyTorch's pickle names no device: torch does."""
        try:
            return self.torch.cuda.get_device_name(ordinal)
        except Exception:
            return None


class _TidemarkRecording(_Marked):
    """tidemark's own recording: started if it is not on (and stopped at
    the end of the session), kept on if it is (`tidemark run`)."""
    suffix = ".tdm"

    def __init__(self):
        super().__init__()
        self.started_here = False

    def start(self, nodeid):
        if not tidemark.is_recording():
            tidemark.record_memory_history("all")
            self.started_here = True
        self.open_mark(nodeid)

    def stop(self, path):
        gc.collect()
        self.close_mark()
        tidemark.dump_snapshot(path)

    def close(self):
        if self.started_here:
            tidemark.record_memory_history(None)
            self.started_here = False


def _col(row, name):
    return getattr(row, name) if isinstance(row, tuple) else row[name]


# ---- what a test is held to -----------------------------------------------

def _limits(item):
    out = []
    for name in ("limit_device_memory", "limit_device_leaks"):
        for mark in item.iter_markers(name=name):
            if not mark.args and "limit" not in mark.kwargs:
                raise pytest.UsageError("%s: @pytest.mark.%s needs a size ('12GiB')"
                                        % (item.nodeid, name))
            raw = mark.args[0] if mark.args else mark.kwargs["limit"]
            try:
                limit = parse_size(raw)
            except ValueError as e:
                raise pytest.UsageError("%s: @pytest.mark.%s: %s" % (item.nodeid, name, e))
            out.append((name, raw, limit, mark.kwargs.get("device")))
    return out


def _site_lines(sites, total, width=2):
    lines = []
    for s in sites:
        share = " %5.1f%%" % (100.0 * s.live_bytes / total) if total else ""
        count = "%d allocation%s" % (s.live_count, "" if s.live_count == 1 else "s")
        head = "    %10s%s  %-15s " % (format_size(s.live_bytes), share, count)
        lines.append(head + _indent(s.frames, len(head)))
    return lines


def _peak_failure(snap, since, device, raw, limit, top, rec):
    """The message for each device whose peak since `since` is over limit."""
    out = []
    for p in _device_peaks(snap, since, device):
        if p.bytes <= limit:
            continue
        label = _label(snap, p.device, rec)
        what = "reserved by PyTorch's caching allocator" if p.of_reserved else "allocated"
        sites = [s for s in snap.sites_at(p.seq, device=p.device, frames=3) if s.live_bytes]
        when = ", at step %d" % p.step if p.step else ""
        if p.phase and not p.phase.startswith("pytest "):
            when += ", phase " + p.phase
        lines = ["device %d (%s): peak %s %s is over limit_device_memory(%r) = %s%s"
                 % (p.device, label, format_size(p.bytes), what, raw, format_size(limit), when),
                 "top sites at the peak:"]
        lines += _site_lines(sites[:top], p.allocated)
        if len(sites) > top:
            lines.append("    ... %d more site%s" % (len(sites) - top,
                                                     "" if len(sites) - top == 1 else "s"))
        out.append("\n".join(lines))
    return out


class _Leak:
    def __init__(self, stack_id, frames):
        self.stack_id, self.frames = stack_id, frames
        self.live_bytes = self.live_count = 0


def _leak_failure(snap, since, device, raw, limit, top, rec):
    """The message for each device with more than `limit` bytes allocated
    after `since` and still allocated at the dump."""
    out = []
    rows = snap.categories
    if not isinstance(rows, list):  # numpy: the rows made in the test and live at its end
        rows = rows[(rows["free_seq"] == -1) & (rows["alloc_seq"] > since)]
    by_device = {}
    for r in rows:
        if int(_col(r, "free_seq")) != -1 or int(_col(r, "alloc_seq")) <= since:
            continue
        dev = int(_col(r, "device"))
        if device is not None and dev != device:
            continue
        sites = by_device.setdefault(dev, {})
        sid = int(_col(r, "stack_id"))
        if sid not in sites:
            sites[sid] = _Leak(sid, snap.site_frames(sid, 3))
        sites[sid].live_bytes += int(_col(r, "size"))
        sites[sid].live_count += 1
    for dev, sites in sorted(by_device.items()):
        total = sum(s.live_bytes for s in sites.values())
        if total <= limit:
            continue
        count = sum(s.live_count for s in sites.values())
        ranked = sorted(sites.values(), key=lambda s: (-s.live_bytes, -s.live_count))
        lines = ["device %d (%s): %s in %d allocation%s made during the test still allocated "
                 "at its end, over limit_device_leaks(%r) = %s"
                 % (dev, _label(snap, dev, rec), format_size(total), count,
                    "" if count == 1 else "s",
                    raw, format_size(limit)), "sites:"]
        lines += _site_lines(ranked[:top], total)
        out.append("\n".join(lines))
    return out


def _device_peaks(snap, since, device):
    if device is not None:
        return [snap.peak(device, since=since)]
    return snap.peak(since=since)


def _label(snap, ordinal, rec=None):
    name = rec.device_name(ordinal) if hasattr(rec, "device_name") else None
    if name:
        return name
    for d in snap.devices:
        if int(_col(d, "ordinal")) == ordinal:
            return _col(d, "label")
    return "?"


# ---- the plugin ----------------------------------------------------------------

def pytest_addoption(parser):
    group = parser.getgroup("tidemark", "device-memory limits (tidemark)")
    group.addoption("--tidemark-dump", metavar="DIR", default=None,
                    help="record every test and keep the snapshot of each failing one in DIR")
    group.addoption("--tidemark-backend", choices=("auto", "torch", "tidemark"),
                    default="auto",
                    help="what records a test: PyTorch's memory history (torch, when CUDA "
                         "is available), tidemark's recording, or auto (the default)")
    group.addoption("--tidemark-top", type=int, default=5, metavar="N",
                    help="sites a failure lists (default 5)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_device_memory(limit, device=None): fail when the test's peak "
                   "device memory (per device, or on `device`) is over `limit` ('12GiB')")
    config.addinivalue_line(
        "markers", "limit_device_leaks(limit, device=None): fail when more than `limit` "
                   "of the device memory the test allocated is still allocated at its end")
    config.pluginmanager.register(TidemarkPlugin(config), "tidemark")


class TidemarkPlugin:
    def __init__(self, config):
        self.config = config
        self.dump_dir = config.getoption("tidemark_dump")
        self.backend_name = config.getoption("tidemark_backend")
        self.top = max(1, config.getoption("tidemark_top"))
        self.tmp = None
        self.tidemark_recording = None
        if self.dump_dir:
            os.makedirs(self.dump_dir, exist_ok=True)

    def _recording(self):
        name = self.backend_name
        torch = sys.modules.get("torch")
        if name == "torch" or (name == "auto" and torch is not None and
                               torch.cuda.is_available()):
            if torch is None:
                import torch
            return _TorchRecording(torch)
        if self.tidemark_recording is None:
            self.tidemark_recording = _TidemarkRecording()
        return self.tidemark_recording

    def _snapshot_path(self, item, suffix):
        if self.tmp is None:
            self.tmp = tempfile.mkdtemp(prefix="pytest-tidemark-")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[:200] or "test"
        return os.path.join(self.tmp, name + suffix)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        limits = _limits(item)
        if not limits and not self.dump_dir:
            yield
            return
        rec = self._recording()
        path = self._snapshot_path(item, rec.suffix)
        rec.start(item.nodeid)
        try:
            yield
        finally:
            item._tidemark = {"limits": limits, "path": None, "failures": [], "error": None}
            try:
                rec.stop(path)
                item._tidemark["path"] = path
                if limits:
                    item._tidemark["failures"] = self._check(rec, path, limits)
            except Exception as e:  # a recording that failed fails the test, said why
                item._tidemark["error"] = "tidemark could not check the test: %s" % e

    def _check(self, rec, path, limits):
        snap = tidemark.load(path)
        since = rec.since(snap)
        failures = []
        for name, raw, limit, device in limits:
            check = _peak_failure if name == "limit_device_memory" else _leak_failure
            failures += check(snap, since, device, raw, limit, self.top, rec)
        return failures

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        state = getattr(item, "_tidemark", None)
        if call.when != "call" or state is None:
            return
        problems = state["failures"] + ([state["error"]] if state["error"] else [])
        if problems and report.passed:
            report.outcome = "failed"
            report.longrepr = "tidemark: " + "\n".join(problems)
        path = state["path"]
        if path and os.path.exists(path):
            if report.failed and self.dump_dir:
                kept = os.path.join(self.dump_dir, os.path.basename(path))
                shutil.move(path, kept)
                report.sections.append(("tidemark", "snapshot kept: %s" % kept))
            else:
                os.unlink(path)

    def pytest_terminal_summary(self, terminalreporter):
        if self.dump_dir:
            kept = sorted(os.listdir(self.dump_dir))
            if kept:
                terminalreporter.write_line("tidemark: %d snapshot%s of failing tests in %s"
                                            % (len(kept), "" if len(kept) == 1 else "s",
                                               self.dump_dir))

    def pytest_unconfigure(self, config):
        if self.tidemark_recording is not None:
            self.tidemark_recording.close()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
