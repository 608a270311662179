#!/usr/bin/env python3
"""check_pytorch_snapshot.py: does a pickle load in PyTorch's memory viewer?

A schema-and-replay checker for PyTorch CUDA memory snapshot pickles,
written from ../shared/reference/pytorch-snapshot-format.md (no PyTorch
code, stdlib only).  It checks what pytorch.org/memory_viz and
torch/cuda/_memory_viz.py rely on:

  encoding   every opcode is one the viewer's unpickler handles (§3.1), the
             protocol is at most --max-protocol (4: every viewer version);
             with --strict, only the opcodes tidemark's writer may emit
  schema     top-level `segments` and `device_traces` (a list per device);
             segment, block, trace entry and frame keys with their types
             (§2); states and actions spelled as PyTorch spells them
  segments   blocks tile each segment exactly, in address order; segments
             sorted by address per device and disjoint; allocated/active/
             requested sizes agree with the blocks
  history    replays onto the final segments (§7 Allocator State History,
             §12 P1): undone from the end, every alloc removes a live
             block, every free re-creates one inside a live segment, every
             free_requested finds its pending block, segments come and go
             only when empty; forwards, every alloc is matched by a free or
             a block live at the end, and every free_requested is completed
             or still pending at the end.  With segment_map/segment_unmap
             (expandable segments) the segments are replayed on a list kept
             the way the viewer's MemoryView keeps it: ordered by address,
             an unmapped range joined back only to neighbours of its own
             stream, a segment_free re-created above all others put before
             the last one (its splice(-1, 0, seg)); a segment_map that no one
             range holds makes the viewer throw
  values     every int fits signed 64-bit (§3.3); time_us is microseconds
             since the epoch; frames innermost first with str filename and
             name and int line; `category` on every entry (--strict) with an
             "unknown" among them (§12 P5); allocator_settings free of
             values JSON cannot hold exactly

Usage: check_pytorch_snapshot.py [--strict] [--max-protocol N] FILE...
Exit status 0 when every file passes, 1 otherwise; problems are printed
one per line as "FILE: what".
"""
import argparse
import bisect
import pickle
import pickletools
import sys

# §3.1: what the viewer's own unpickler handles (newest version).
VIEWER_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
    "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1",
    "TUPLE2", "TUPLE3", "NONE", "NEWTRUE", "NEWFALSE", "BININT1", "BININT2", "BININT",
    "LONG1", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "BINPUT", "LONG_BINPUT",
    "MEMOIZE", "BINGET", "LONG_BINGET", "BYTEARRAY8",
}
# §3.1 "Recommended for a C writer": what tidemark's pickler writes.
WRITER_OPCODES = {
    "PROTO", "STOP", "MARK", "EMPTY_DICT", "SETITEMS", "EMPTY_LIST", "APPENDS",
    "TUPLE2", "SHORT_BINUNICODE", "BINUNICODE", "BININT1", "BININT2", "BININT",
    "LONG1", "NEWTRUE", "NEWFALSE", "NONE", "BINFLOAT",
    "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom", "annotate", "user_defined"}
STATES = {"active_allocated", "active_pending_free", "inactive"}
CATEGORIES = {"parameter", "optimizer_state", "gradient", "activation", "input",
              "temporary", "autograd_detail", "unknown"}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MASK64 = (1 << 64) - 1
# time_us must be µs since the epoch: between 2001 and 2286.
TIME_US_MIN, TIME_US_MAX = 10**15, 10**16
# Frames that only ever sit at the outer end of a native or Python stack.
OUTER_NAMES = ("main", "_start", "<module>")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_outer(frame):
    n = frame.get("name", "")
    return n in OUTER_NAMES or n.startswith("__libc_start")


class Report:
    def __init__(self, name, limit=30):
        self.name, self.limit, self.problems = name, limit, []

    def __call__(self, msg):
        self.problems.append(msg)

    def lines(self):
        shown = ["%s: %s" % (self.name, p) for p in self.problems[: self.limit]]
        if len(self.problems) > self.limit:
            shown.append("%s: ... and %d more" % (self.name, len(self.problems) - self.limit))
        return shown


# ---- encoding ----------------------------------------------------------------

def check_encoding(data, bad, max_protocol, strict):
    allowed = WRITER_OPCODES if strict else VIEWER_OPCODES
    seen = set()
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name not in allowed:
                if op.name not in seen:
                    bad("opcode %s at byte %d is not allowed%s" % (
                        op.name, pos, " for tidemark's writer" if strict else ""))
                seen.add(op.name)
            if op.name == "PROTO" and arg > max_protocol:
                bad("protocol %d at byte %d; at most %d loads in every viewer" % (
                    arg, pos, max_protocol))
    except ValueError as e:
        bad("not a pickle: %s" % e)


# ---- schema --------------------------------------------------------------------

def check_frames(frames, where, bad):
    if not isinstance(frames, list):
        bad("%s: frames is %s, not list" % (where, type(frames).__name__))
        return
    outer_seen = False
    for k, f in enumerate(frames):
        if not isinstance(f, dict):
            bad("%s: frame %d is %s, not dict" % (where, k, type(f).__name__))
            return
        if not isinstance(f.get("filename"), str) or not isinstance(f.get("name"), str):
            bad("%s: frame %d needs str filename and name" % (where, k))
            return
        if not is_int(f.get("line")):
            bad("%s: frame %d needs an int line" % (where, k))
            return
        # Innermost first: main, _start and <module> are the outer end.
        if is_outer(f):
            outer_seen = True
        elif outer_seen:
            bad("%s: frame %d (%s) comes after an outer frame: frames are not innermost "
                "first" % (where, k, f["name"]))
            return


def check_int(v, what, bad, lo=INT64_MIN, hi=INT64_MAX):
    if not is_int(v):
        bad("%s is %s, not int" % (what, type(v).__name__))
        return False
    if not lo <= v <= hi:
        bad("%s = %d is out of range [%d, %d]" % (what, v, lo, hi))
        return False
    return True


SEGMENT_KEYS_STRICT = ("allocated_size", "active_size", "requested_size", "segment_type",
                       "segment_pool_id", "is_expandable", "frames")


def check_segments(snap, ndev, bad, strict):
    segs = snap["segments"]
    last_end = {}
    for i, s in enumerate(segs):
        w = "segments[%d]" % i
        if not isinstance(s, dict):
            bad("%s is %s, not dict" % (w, type(s).__name__))
            continue
        ok = True
        for key in ("device", "address", "total_size", "blocks"):
            if key not in s:
                bad("%s lacks '%s'" % (w, key))
                ok = False
        if strict:
            for key in ("stream",) + SEGMENT_KEYS_STRICT:
                if key not in s:
                    bad("%s lacks '%s'" % (w, key))
        if not ok:
            continue
        if not check_int(s["device"], w + ".device", bad, 0, ndev - 1):
            continue
        if not check_int(s["address"], w + ".address", bad) or \
                not check_int(s["total_size"], w + ".total_size", bad, 1):
            continue
        if "stream" in s:
            check_int(s["stream"], w + ".stream", bad)
        if "segment_type" in s and s["segment_type"] not in ("small", "large"):
            bad("%s.segment_type is %r" % (w, s["segment_type"]))
        if "segment_pool_id" in s:
            p = s["segment_pool_id"]
            if not (isinstance(p, tuple) and len(p) == 2 and all(map(is_int, p))):
                bad("%s.segment_pool_id is %r, not a tuple of two ints" % (w, p))
        if "is_expandable" in s and not isinstance(s["is_expandable"], bool):
            bad("%s.is_expandable is not a bool" % w)
        if "frames" in s:
            check_frames(s["frames"], w, bad)
        # Sorted as the allocator sorts them: by the unsigned address (a
        # high-half address written as a negative int64 comes last).
        d, a, ua = s["device"], s["address"], s["address"] & MASK64
        if d in last_end and ua < last_end[d]:
            bad("%s at %#x is not after the previous segment of device %d (sorted, "
                "disjoint)" % (w, ua, d))
        last_end[d] = ua + s["total_size"]
        if not isinstance(s["blocks"], list):
            bad("%s.blocks is not a list" % w)
            continue
        addr, alloc, active, req = a, 0, 0, 0
        for j, b in enumerate(s["blocks"]):
            bw = "%s.blocks[%d]" % (w, j)
            if not isinstance(b, dict) or "size" not in b or "state" not in b:
                bad("%s needs size and state" % bw)
                break
            if not check_int(b["size"], bw + ".size", bad, 1):
                break
            if b["state"] not in STATES:
                bad("%s.state is %r" % (bw, b["state"]))
            if "frames" in b:
                if "requested_size" not in b:
                    bad("%s has frames but no requested_size (NaN widths)" % bw)
                check_frames(b["frames"], bw, bad)
            elif strict:
                bad("%s lacks frames" % bw)
            r = b.get("requested_size", b["size"])
            if not check_int(r, bw + ".requested_size", bad, 0):
                break
            if b["state"] != "inactive" and r > b["size"]:
                bad("%s.requested_size %d > size %d" % (bw, r, b["size"]))
            if "address" in b and b["address"] != addr:
                bad("%s.address %#x, but the blocks before it end at %#x (blocks must tile "
                    "in address order)" % (bw, b["address"] & MASK64, addr & MASK64))
            if b["state"] == "active_allocated":
                alloc += b["size"]
            if b["state"] != "inactive":
                active += b["size"]
                req += r
            addr += b["size"]
        else:
            if addr - a != s["total_size"]:
                bad("%s: blocks sum to %d, total_size is %d" % (w, addr - a, s["total_size"]))
            for key, want in (("allocated_size", alloc), ("active_size", active),
                              ("requested_size", req)):
                if key in s and s[key] != want:
                    bad("%s.%s is %r, its blocks say %d" % (w, key, s[key], want))


def check_traces(snap, bad, strict):
    traces = snap["device_traces"]
    entries = 0
    categories = set()
    with_cat = 0
    for d, trace in enumerate(traces):
        if not isinstance(trace, list):
            bad("device_traces[%d] is %s, not list" % (d, type(trace).__name__))
            continue
        for i, e in enumerate(trace):
            w = "device_traces[%d][%d]" % (d, i)
            entries += 1
            if not isinstance(e, dict) or not isinstance(e.get("action"), str):
                bad("%s needs a str action" % w)
                continue
            a = e["action"]
            if a not in ACTIONS:
                (bad if strict else (lambda m: None))("%s: unknown action %r" % (w, a))
            if a == "oom":
                if "addr" in e:
                    bad("%s: an oom has device_free, not addr" % w)
                check_int(e.get("device_free"), w + ".device_free", bad, 0)
            else:
                check_int(e.get("addr"), w + ".addr", bad)
            check_int(e.get("size"), w + ".size", bad, 0)
            if "stream" in e or strict:
                check_int(e.get("stream"), w + ".stream", bad)
            if "time_us" in e or strict:
                check_int(e.get("time_us"), w + ".time_us (µs since the epoch)", bad,
                          TIME_US_MIN, TIME_US_MAX)
            if "frames" in e:
                check_frames(e["frames"], w, bad)
            elif strict:
                bad("%s lacks frames" % w)
            if "category" in e:
                with_cat += 1
                if e["category"] not in CATEGORIES:
                    bad("%s: category %r" % (w, e["category"]))
                categories.add(e["category"])
            elif strict:
                bad("%s lacks category" % w)
    if with_cat and "unknown" not in categories:
        bad("entries carry categories but none is 'unknown' (older viewers crash, P5)")
    return entries


def check_settings(snap, bad):
    def walk(v, path):
        if is_int(v) and abs(v) > 2**53:
            bad("allocator_settings%s = %d: JSON.stringify in the viewer cannot hold it" % (
                path, v))
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    bad("allocator_settings%s has a non-str key %r" % (path, k))
                walk(x, "%s[%r]" % (path, k))
        elif isinstance(v, (list, tuple)):
            for k, x in enumerate(v):
                walk(x, "%s[%d]" % (path, k))
        elif not (v is None or isinstance(v, (str, bool, int, float))):
            bad("allocator_settings%s is %s" % (path, type(v).__name__))
    if "allocator_settings" in snap:
        if not isinstance(snap["allocator_settings"], dict):
            bad("allocator_settings is not a dict")
        else:
            walk(snap["allocator_settings"], "")


# ---- replay ------------------------------------------------------------------

class Ranges:
    """Disjoint [start, start+size) ranges, sorted by start."""

    def __init__(self):
        self.starts, self.sizes = [], {}

    def add(self, a, n, extra=None):
        bisect.insort(self.starts, a)
        self.sizes[a] = [n, extra]

    def remove(self, a):
        self.starts.pop(bisect.bisect_left(self.starts, a))
        del self.sizes[a]

    def floor(self, a):
        k = bisect.bisect_right(self.starts, a)
        return self.starts[k - 1] if k else None

    def overlaps(self, a, end):
        f = self.floor(end - 1)
        return f is not None and f + self.sizes[f][0] > a

    def containing(self, a, end):
        f = self.floor(a)
        return f if f is not None and f + self.sizes[f][0] >= end else None


class ViewerSegments:
    """Live segments as the viewer's MemoryView keeps them (a list of
    [addr, size, stream] in the order its splice() calls leave it), for a
    device whose history maps and unmaps ranges: there the order and the
    streams decide which ranges join.  Same interface as Ranges."""

    def __init__(self):
        self.v = []

    def add_final(self, a, n, stream):
        self.v.append([a, n, stream])
        self.v.sort(key=lambda x: x[0])

    def overlaps(self, a, end):
        return any(x[0] < end and a < x[0] + x[1] for x in self.v)

    def containing(self, a, end):
        for x in self.v:
            if x[0] <= a and end <= x[0] + x[1]:
                return x[0]
        return None

    def size_at(self, a):
        return next((x[1] for x in self.v if x[0] == a), None)

    def _first_after(self, a):
        return next((i for i, x in enumerate(self.v) if x[0] > a), -1)

    def remove(self, a):  # unmap_segment(false)
        self.v.pop(next(i for i, x in enumerate(self.v) if x[0] == a))

    def insert_free(self, a, n, stream):  # map_segment(false): JS splice(-1, 0, seg)
        i = self._first_after(a)
        self.v.insert(i if i >= 0 else max(len(self.v) - 1, 0), [a, n, stream])

    def insert_unmap(self, a, n, stream):  # map_segment(true)
        i = self._first_after(a)
        if i < 0:
            i = len(self.v)
        seg = [a, n, stream]
        self.v.insert(i, seg)
        if i + 1 < len(self.v):
            nxt = self.v[i + 1]
            if seg[0] + seg[1] == nxt[0] and seg[2] == nxt[2]:
                seg[1] += nxt[1]
                del self.v[i + 1]
        if i > 0:
            prev = self.v[i - 1]
            if prev[0] + prev[1] == seg[0] and prev[2] == seg[2]:
                prev[1] += seg[1]
                del self.v[i]

    def carve(self, a, n, stream):  # unmap_segment(true); False where it throws
        end = a + n
        i = next((i for i, x in enumerate(self.v) if x[0] <= a and end <= x[0] + x[1]), -1)
        if i < 0:
            return False
        x = self.v[i]
        x_end = x[0] + x[1]
        if x[0] == a:
            x[0] += n
            x[1] -= n
            if x[1] == 0:
                del self.v[i]
        elif x_end == end:
            x[1] -= n
        else:
            x[1] = a - x[0]
            self.v.insert(i + 1, [end, x_end - end, stream])
        return True


def check_replay(snap, bad):
    traces = snap["device_traces"]
    for d, trace in enumerate(traces):
        expandable = any(e.get("action") in ("segment_map", "segment_unmap") for e in trace)
        segs, blocks = (ViewerSegments() if expandable else Ranges()), Ranges()
        final_active, final_pending = set(), set()
        for s in snap["segments"]:
            if s.get("device") != d:
                continue
            if expandable:
                segs.add_final(s["address"], s["total_size"], s.get("stream"))
            else:
                segs.add(s["address"], s["total_size"])
            a = s["address"]
            for b in s["blocks"]:
                if b["state"] != "inactive":
                    blocks.add(a, b["size"], b["state"] == "active_pending_free")
                    final_active.add(a)
                    if b["state"] == "active_pending_free":
                        final_pending.add(a)
                a += b["size"]
        # Backwards, as the Allocator State History undoes events.
        for i in range(len(trace) - 1, -1, -1):
            e = trace[i]
            act, a, n = e["action"], e.get("addr"), max(e.get("size", 0), 1)
            w = "device_traces[%d][%d] (%s at %#x)" % (d, i, act, (a or 0) & MASK64)
            if act == "alloc":
                if a not in blocks.sizes:
                    bad("%s: undoing it finds no live block there (history does not replay "
                        "onto the segments)" % w)
                    return
                blocks.remove(a)
            elif act == "free_completed":
                if blocks.overlaps(a, a + n):
                    bad("%s: re-creating the freed block overlaps a live block" % w)
                    return
                if segs.containing(a, a + n) is None:
                    bad("%s: re-creating the freed block finds no live segment holding it" % w)
                    return
                blocks.add(a, n, True)
            elif act == "free_requested":
                if a not in blocks.sizes or not blocks.sizes[a][1]:
                    bad("%s: no block awaiting this free (free_requested never completed "
                        "and not pending at the end)" % w)
                    return
                blocks.sizes[a][1] = False
            elif expandable and act.startswith("segment_"):
                if not replay_viewer_segment(segs, blocks, e, w, bad):
                    return
            elif act == "segment_alloc":
                if a not in segs.sizes or segs.sizes[a][0] != e["size"]:
                    bad("%s: undoing it finds no such segment" % w)
                    return
                if blocks.overlaps(a, a + e["size"]):
                    bad("%s: the segment still holds live blocks before it was allocated" % w)
                    return
                segs.remove(a)
            elif act == "segment_free":
                if segs.overlaps(a, a + n):
                    bad("%s: re-creating the segment overlaps a live one" % w)
                    return
                segs.add(a, n)
        # Forwards: every alloc matched, every free_requested completed.
        live = {}
        for i, e in enumerate(trace):
            act, a = e["action"], e.get("addr")
            w = "device_traces[%d][%d] (%s at %#x)" % (d, i, act, (a or 0) & MASK64)
            if act == "alloc":
                if a in live:
                    bad("%s: address already allocated" % w)
                live[a] = "allocated"
            elif act == "free_requested":
                live[a] = "requested"
            elif act == "free_completed":
                live.pop(a, None)
        for a, state in live.items():
            if state == "allocated" and a not in final_active:
                bad("device %d: alloc at %#x is never freed and not live at the end" % (
                    d, a & MASK64))
            if state == "requested" and a not in final_pending:
                bad("device %d: free_requested at %#x is never completed and not pending at "
                    "the end" % (d, a & MASK64))


def replay_viewer_segment(segs, blocks, e, w, bad):
    """Undoes one segment event on a ViewerSegments; False (and a report)
    where it does not fit."""
    act, a, n, st = e["action"], e.get("addr"), e.get("size", 0), e.get("stream")
    if n <= 0:
        bad("%s: a segment event of %d bytes" % (w, n))
        return False
    if act == "segment_alloc":
        if segs.size_at(a) != n:
            bad("%s: undoing it finds no such segment" % w)
            return False
        if blocks.overlaps(a, a + n):
            bad("%s: the segment still holds live blocks before it was allocated" % w)
            return False
        segs.remove(a)
    elif act in ("segment_free", "segment_unmap"):
        if segs.overlaps(a, a + n):
            bad("%s: re-creating the segment overlaps a live one" % w)
            return False
        (segs.insert_free if act == "segment_free" else segs.insert_unmap)(a, n, st)
    elif act == "segment_map":
        if blocks.overlaps(a, a + n):
            bad("%s: the mapped range is not an empty part of a live segment" % w)
            return False
        if not segs.carve(a, n, st):
            bad("%s: no one segment holds the mapped range as the viewer joins them "
                "(only neighbours of the same stream join; a segment_free re-created above "
                "every other segment is put before the last one): the viewer throws" % w)
            return False
    return True


# ---- driver ---------------------------------------------------------------------

def check_snapshot(snap, bad, strict=False):
    """Checks a loaded snapshot; returns (segments, entries) counts."""
    if not isinstance(snap, dict):
        bad("top level is %s, not dict" % type(snap).__name__)
        return 0, 0
    for key in ("segments", "device_traces"):
        if key not in snap:
            bad("lacks '%s' (the viewer fails to load)" % key)
            return 0, 0
    if not isinstance(snap["segments"], list) or not isinstance(snap["device_traces"], list):
        bad("segments and device_traces must be lists")
        return 0, 0
    if not snap["device_traces"]:
        bad("device_traces is empty: needs one list per device")
        return 0, 0
    before = len(getattr(bad, "problems", []))
    check_segments(snap, len(snap["device_traces"]), bad, strict)
    entries = check_traces(snap, bad, strict)
    check_settings(snap, bad)
    if not entries and not snap["segments"]:
        bad("no trace entry and no segment: the newest viewer has no device to show")
    if len(getattr(bad, "problems", [])) == before:
        check_replay(snap, bad)
    return len(snap["segments"]), entries


def check_file(path, max_protocol=4, strict=False):
    r = Report(path)
    with open(path, "rb") as f:
        data = f.read()
    check_encoding(data, r, max_protocol, strict)
    try:
        snap = pickle.loads(data)
    except Exception as e:  # anything pickle raises means "does not load"
        r("pickle.load fails: %s: %s" % (type(e).__name__, e))
        return r, None
    counts = check_snapshot(snap, r, strict)
    return r, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--strict", action="store_true",
                    help="tidemark's own output: writer opcodes only, every key present")
    ap.add_argument("--max-protocol", type=int, default=4)
    ap.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    args = ap.parse_args(argv)
    failed = 0
    for path in args.files:
        r, counts = check_file(path, args.max_protocol, args.strict)
        if r.problems:
            failed += 1
            print("\n".join(r.lines()))
        elif not args.quiet:
            print("%s: OK (%d segments, %d trace entries)" % (path, counts[0], counts[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
