"""tests/python/test_reader.py: tidemark.load(), the Python reader over
libtidemark_reader.so, against the command-line tool on the same files:

- a .tdm of examples/train_sim: the peak (bytes, time, step, phase) and
  the top sites (bytes, count, share, frames) are `tidemark summary`'s;
  the bytes per category at the peak are `tidemark categories`'; the
  tables agree with each other (allocations live at the end = the
  device's end_allocated; events of the device = its alloc count);
- a PyTorch pickle (tests/data/torch-2.14-stacks-all.pickle): the same
  agreement with the summary;
- a run folder of two ranks: a Run in rank order whatever the file names;
  the folder `tidemark run -o DIR` writes, its peak the summary's;
- a truncated file raises TidemarkError naming the byte offset the
  command's warning names; partial=True reads it; garbage raises too;
- without numpy, the same tables as namedtuples with the same values;
  to_pandas without pandas raises ImportError saying so (with pandas, a
  DataFrame of every row);
- docs/python.md: its sh block (the recordings) and every python block,
  in order, in one namespace, in a folder of their own.

Environment: TIDEMARK (the command-line tool), TRAIN_SIM, LIBTIDEMARK,
READER_LIB, TDM_SOURCE_DIR."""
import os
import re
import subprocess
import sys
import tempfile

from child_env import sanitizer_runtime  # noqa: E402

SRC = os.environ["TDM_SOURCE_DIR"]
# A sanitizer build's libraries load into this interpreter only after
# their runtime: run again with it preloaded.
_san = sanitizer_runtime()
if _san and _san not in os.environ.get("LD_PRELOAD", ""):
    os.environ["LD_PRELOAD"] = _san
    os.environ["ASAN_OPTIONS"] = "detect_leaks=0"
    os.execv(sys.executable, [sys.executable] + sys.argv)
sys.path.insert(0, os.path.join(SRC, "python"))
os.environ["TIDEMARK_READER_LIB"] = os.environ["READER_LIB"]
os.environ["TIDEMARK_LIB"] = os.environ["LIBTIDEMARK"]
os.environ.pop("TIDEMARK_CONF", None)

try:
    import numpy  # noqa: F401  (the checks below index the tables as a notebook does)
except ImportError:
    print("no numpy for %s (Debian: python3-numpy): skipped" % sys.executable)
    sys.exit(77)

import tidemark  # noqa: E402
import tidemark_snapshot  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
TRAIN_SIM = os.environ["TRAIN_SIM"]
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def check(cond, what):
    if not cond:
        fail(what)
    return cond


def run(args, env=None, cwd=None, own_runtime=False):
    """own_runtime: the command (a shell running train_sim, which carries
    its sanitizer's runtime itself) runs without the runtime this
    interpreter was given: a shell under a preloaded ThreadSanitizer dies
    of SIGSEGV."""
    full = dict(os.environ, **(env or {}))
    if own_runtime and "LD_PRELOAD" in full:
        kept = [p for p in full["LD_PRELOAD"].split(":")
                if p and not re.search(r"lib[at]san\.so", p)]
        full["LD_PRELOAD"] = ":".join(kept)
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd, env=full)
    return r


def record(path, *args, env=None):
    r = run([TRAIN_SIM] + list(args), env=dict(env or {}, TIDEMARK_CONF="dump=" + path))
    if r.returncode != 0 or not os.path.exists(path):
        fail("train_sim %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr[-1500:]))
        sys.exit(1)


def summary(path):
    r = run([TIDEMARK, "summary", "--top", "50", path])
    check(r.returncode == 0, "summary %s: exit %d %s" % (path, r.returncode, r.stderr))
    return r.stdout


def summary_peak(text):
    """(bytes, offset text, step, phase) of the summary's first device."""
    m = re.search(r"peak allocated [^(]*\((\d+) B\)", text)
    at = re.search(r"peak at\s+(\S+ s)[^,\n]*(?:, step (\d+)|, before step 1)"
                   r"(?:, phase (\S+))?", text)
    if not m or not at:
        fail("no peak in the summary:\n" + text[:2000])
        return None
    return int(m.group(1)), at.group(1), int(at.group(2) or 0), at.group(3) or ""


def summary_sites(text):
    """[(live bytes as written, count, share text, frames)] at the peak."""
    block = text.split("top allocation sites by bytes live at the peak", 1)
    if len(block) < 2:
        return []
    out = []
    for line in block[1].split("\n\n", 1)[0].splitlines()[2:]:
        m = re.match(r"\s+\d+\s+(\d+(?:\.\d+)? \S*B)\s+(\S+)\s+(\d+)\s+(.*)$", line)
        if m:
            out.append([m.group(1), int(m.group(3)), m.group(2), m.group(4).strip()])
        elif out and line.startswith(" " * 30) and line.strip():
            out[-1][3] += "\n" + line.strip()  # the site's next frame
    return [tuple(o) for o in out]


def share_text(share):
    """A share written as the summary writes it."""
    pct = 100 * share
    return "<0.1%" if pct < 0.1 else "%.1f%%" % pct


def offset_text(ns):
    """An offset as the commands write it (tdm__fmt_offset), below a minute."""
    if 0 < ns < 1000000:
        return "+0.%06d s" % (ns // 1000)
    return "+%d.%03d s" % (ns // 10**9, ns % 10**9 // 10**6)


def agree_with_summary(snap, path, what):
    text = summary(path)
    want = summary_peak(text)
    if not want:
        return
    p = snap.peak(0)
    got = (p.bytes, offset_text(p.time_ns - snap.info["time_origin_ns"]), p.step, p.phase)
    check(got == want, "%s: peak %r, summary says %r" % (what, got, want))
    wanted_sites = summary_sites(text)
    sites = snap.top_sites(50, device=0)
    check(len(wanted_sites) > 0, "%s: the summary lists no site" % what)
    got_sites = [(mib_text(s.live_bytes), s.live_count, share_text(s.share), s.frames)
                 for s in sites]
    check(got_sites == wanted_sites, "%s: top sites\n  %r\nsummary's\n  %r"
          % (what, got_sites, wanted_sites))
    return p


def categories_at_peak(path):
    r = run([TIDEMARK, "categories", path])
    check(r.returncode == 0, "categories: exit %d %s" % (r.returncode, r.stderr))
    text = r.stdout.split("over time", 1)[0]
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\s{4}(\w+)\s+(\S+ \S+)\s+\S+%$", text, re.M)}


def mib_text(n):
    """A size as tidemark writes it (format_size.c)."""
    if n < 1024:
        return "%d B" % n
    v, units = float(n), ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    u = 0
    while u + 1 < len(units) and v >= 1023.995:
        v /= 1024.0
        u += 1
    return "%.2f %s" % (v, units[u])


def test_tdm(tmp):
    path = os.path.join(tmp, "train.tdm")
    record(path, "--steps", "3")
    snap = tidemark.load(path)
    check(isinstance(snap, tidemark_snapshot.Snapshot), "load gave %r" % snap)
    p = agree_with_summary(snap, path, "train.tdm")
    # categories at the peak, as `tidemark categories` gives them
    want = categories_at_peak(path)
    rows = snap.bytes_by_category(device=0, at="peak")
    got = {c: mib_text(int(rows[0][c])) for c in tidemark.CATEGORIES if rows[0][c]}
    check(got == want, "categories at the peak: %r, tidemark categories says %r" % (got, want))
    check(int(rows[0]["total"]) == p.bytes, "categories' total %d != peak %d"
          % (rows[0]["total"], p.bytes))
    steps = snap.bytes_by_category(device=0)
    check([int(r["step"]) for r in steps] == [0, 1, 2, 3], "steps %r" % list(steps["step"]))
    check(max(int(r["total"]) for r in steps) == p.bytes,
          "the steps' highest total is not the peak")
    # the tables agree with one another and with the model's figures
    dev = snap.devices[0]
    live = snap.categories[snap.categories["free_seq"] == -1]
    check(int(live["size"].sum()) == int(dev["end_allocated"]),
          "live allocations %d B != end_allocated %d" % (live["size"].sum(),
                                                         dev["end_allocated"]))
    allocs = snap.events[(snap.events["action"] == 0) & (snap.events["device"] == 0)]
    check(len(allocs) == int(dev["alloc_events"]), "%d alloc events, device says %d"
          % (len(allocs), dev["alloc_events"]))
    check(len(snap.events) == snap.info["event_count"], "event count")
    check(tidemark_snapshot.action_name(0) == "alloc", "action 0 is %r"
          % tidemark_snapshot.action_name(0))
    top = snap.top_sites(1)[0]
    frames = snap.stacks[snap.stacks["stack_id"] == top.stack_id]
    check(len(frames) > 0 and any(f in top.frames for f in frames["function"]),
          "the top site's stack rows %r do not hold its frames %r" % (frames, top.frames))
    check(int(snap.segments["total_size"].sum()) == int(dev["end_reserved"]),
          "segments hold %d B, end_reserved %d" % (snap.segments["total_size"].sum(),
                                                   dev["end_reserved"]))
    return path, snap


def plain(v):
    """A numpy value as a plain one (int or str)."""
    return v if isinstance(v, str) else int(v)


def test_without_numpy(path, with_numpy):
    """The same file read with numpy hidden: namedtuples, same values."""
    want_event = tuple(plain(v) for v in with_numpy.events[5])
    want_count = len(with_numpy.events)
    want_peak, want_sites = with_numpy.peak(), with_numpy.top_sites()
    want_steps = [tuple(plain(v) for v in r) for r in with_numpy.bytes_by_category(device=0)]
    want_function = str(with_numpy.stacks[0]["function"])
    saved = sys.modules.get("numpy")
    sys.modules["numpy"] = None  # import numpy raises ImportError
    try:
        snap = tidemark.load(path)
        check(isinstance(snap.events, list) and hasattr(snap.events[0], "time_ns"),
              "without numpy events are %r" % type(snap.events))
        check(len(snap.events) == want_count, "event counts differ")
        check(tuple(snap.events[5]) == want_event,
              "event 5 differs: %r vs %r" % (snap.events[5], want_event))
        check(snap.peak() == want_peak, "peaks differ without numpy")
        check(snap.top_sites() == want_sites, "sites differ without numpy")
        check([tuple(r) for r in snap.bytes_by_category(device=0)] == want_steps,
              "bytes per category differ without numpy")
        check(snap.stacks[0].function == want_function, "stacks differ")
    finally:
        if saved is not None:
            sys.modules["numpy"] = saved
        else:
            del sys.modules["numpy"]


def test_pandas(snap):
    try:
        import pandas  # noqa: F401
    except ImportError:
        saved = None
    else:
        saved = sys.modules["pandas"]
        df = snap.to_pandas("events")
        check(len(df) == len(snap.events) and "action_name" in df.columns,
              "to_pandas('events'): %r" % df.columns)
        check(set(snap.to_pandas()) == set(snap.TABLES), "to_pandas() tables")
    sys.modules["pandas"] = None
    try:
        snap.to_pandas("events")
        fail("to_pandas without pandas raised nothing")
    except ImportError as e:
        check("needs pandas" in str(e), "to_pandas's ImportError says %r" % str(e))
    finally:
        if saved is not None:
            sys.modules["pandas"] = saved
        else:
            del sys.modules["pandas"]


def test_pickle():
    path = os.path.join(SRC, "tests", "data", "torch-2.14-stacks-all.pickle")
    snap = tidemark.load(path)
    check(snap.info["event_count"] > 0, "the pickle has no events")
    agree_with_summary(snap, path, "the PyTorch pickle")


def test_folder(tmp):
    job = os.path.join(tmp, "job")
    os.mkdir(job)
    # names in the other order than the ranks: the header's rank orders them
    record(os.path.join(job, "a.tdm"), "--steps", "1", "--layers", "6",
           env={"RANK": "1", "WORLD_SIZE": "2"})
    record(os.path.join(job, "b.tdm"), "--steps", "1", "--layers", "3",
           env={"RANK": "0", "WORLD_SIZE": "2"})
    r = tidemark.load(job)
    check(isinstance(r, tidemark_snapshot.Run) and len(r) == 2, "folder gave %r" % r)
    check([s.rank for s in r] == [0, 1], "ranks in order %r" % [s.rank for s in r])
    peaks = r.peak()
    check([p.rank for p in peaks] == [0, 1], "peak ranks %r" % peaks)
    check(peaks[1].bytes > peaks[0].bytes, "six layers peak above three: %r" % peaks)
    check(peaks[0].bytes == r[0].peak(0).bytes, "a rank's peak differs in the Run")
    rank, sites = r.top_sites(1)
    check(rank == 1 and len(sites) == 1, "top sites of rank %r" % rank)
    # what `tidemark run -o DIR` writes
    ran = os.path.join(tmp, "ran")
    r = run([TIDEMARK, "run", "-q", "-o", ran, "--", TRAIN_SIM, "--steps", "1"])
    check(r.returncode == 0, "tidemark run: exit %d %s" % (r.returncode, r.stderr))
    folder = tidemark.load(ran)
    check(isinstance(folder, tidemark_snapshot.Run) and len(folder) == 1,
          "tidemark run's folder gave %r" % folder)
    want = summary_peak(summary(ran))
    check(want is not None and folder.peak()[0].bytes == want[0],
          "tidemark run's folder: peak %r, summary %r" % (folder.peak(), want))
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    try:
        tidemark.load(empty)
        fail("an empty folder loaded")
    except tidemark.TidemarkError as e:
        check("no .tdm snapshot" in str(e), "empty folder: %s" % e)


def test_errors(tmp, path):
    cut = os.path.join(tmp, "cut.tdm")
    with open(path, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    warn = run([TIDEMARK, "summary", cut]).stderr
    m = re.search(r"truncated at byte (\d+)", warn)
    check(m is not None, "summary says nothing of the cut: %s" % warn)
    try:
        tidemark.load(cut)
        fail("a truncated file loaded without partial=True")
    except tidemark.TidemarkError as e:
        check(e.name == "TDM_TRUNCATED", "truncated: status %s" % e.name)
        check(m is not None and ("at byte %s" % m.group(1)) in str(e),
              "the error %r does not name byte %s" % (str(e), m and m.group(1)))
    part = tidemark.load(cut, partial=True)
    check(part.truncated and m is not None and part.info["truncated_at"] == int(m.group(1)),
          "partial read: truncated=%r at %r" % (part.truncated, part.info["truncated_at"]))
    bad = os.path.join(tmp, "bad.tdm")
    with open(bad, "wb") as f:
        f.write(data[:10] + b"\xc1" * 200)  # the signature, then msgpack's never-used byte
    try:
        tidemark.load(bad)
        fail("a corrupt file loaded")
    except tidemark.TidemarkError as e:
        check(re.search(r"at byte \d+", str(e)) is not None and e.name != "TDM_OK",
              "corrupt: %s" % e)
    try:
        tidemark.load(os.path.join(tmp, "none.tdm"))
        fail("a missing file loaded")
    except tidemark.TidemarkError as e:
        check(e.name == "TDM_IO_ERROR" and "No such file" in str(e), "missing: %s" % e)


def doc_blocks():
    """[(language, text)] of docs/python.md's fenced blocks, in order."""
    with open(os.path.join(SRC, "docs", "python.md")) as f:
        lines = f.read().splitlines()
    blocks, lang, body = [], None, []
    for line in lines:
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                blocks.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def without_times(line):
    """A line with its time offsets blanked: they differ run to run."""
    return re.sub(r"\+\d+\.\d+ s", "+T s", line.rstrip())


def test_doc(tmp):
    """docs/python.md's recordings (its sh block) and every python block,
    in order, in one namespace; what they print is checked against the
    snapshot's own figures."""
    folder = os.path.join(tmp, "doc")
    os.makedirs(os.path.join(folder, "job"))
    blocks = doc_blocks()
    shells = [b for lang, b in blocks if lang == "sh"]
    pythons = [b for lang, b in blocks if lang == "python"]
    check(len(shells) == 1 and len(pythons) >= 6, "docs/python.md: %d sh, %d python blocks"
          % (len(shells), len(pythons)))
    script = shells[0].replace("./build/examples/train_sim", TRAIN_SIM)
    r = run(["sh", "-ec", script], cwd=folder, own_runtime=True)
    check(r.returncode == 0, "the doc's recordings: exit %d %s" % (r.returncode, r.stderr))
    out_path = os.path.join(folder, "out.txt")
    code = "\n".join(pythons)
    driver = ("import os, sys; sys.path.insert(0, %r); os.chdir(%r)\n"
              "exec(compile(open(%r).read(), 'docs/python.md', 'exec'), {})\n"
              % (os.path.join(SRC, "python"), folder, os.path.join(folder, "walk.py")))
    with open(os.path.join(folder, "walk.py"), "w") as f:
        f.write(code)
    r = run([sys.executable, "-c", driver], cwd=folder)
    with open(out_path, "w") as f:
        f.write(r.stdout)
    if not check(r.returncode == 0, "docs/python.md's snippets: exit %d\n%s"
                 % (r.returncode, r.stderr[-3000:])):
        return
    snap = tidemark.load(os.path.join(folder, "train.tdm"))
    p = snap.peak(0)
    check("peak %.1f MiB at +%.3f s, step %d, phase %s"
          % (p.bytes / 2**20, p.offset_s, p.step, p.phase) in r.stdout,
          "the walk's peak line is not the snapshot's:\n" + r.stdout)
    check("TDM_TRUNCATED" in r.stdout and "highest: rank 1" in r.stdout,
          "the walk's errors or ranks part printed:\n" + r.stdout)
    wide = tidemark.load(os.path.join(folder, "train-wide.tdm")).peak(0)
    check("peak %+.1f MiB" % ((wide.bytes - p.bytes) / 2**20) in r.stdout,
          "the comparison's line:\n" + r.stdout)
    # the outputs the page shows are what the walk printed
    printed = [without_times(line) for line in r.stdout.splitlines()]
    for lang, block in blocks:
        if lang:
            continue
        for line in block.splitlines():
            if line.strip() != "...":
                check(without_times(line) in printed,
                      "docs/python.md shows %r, the walk printed:\n%s" % (line, r.stdout))


def main():
    with tempfile.TemporaryDirectory(prefix="tdm-reader-") as tmp:
        path, snap = test_tdm(tmp)
        test_without_numpy(path, snap)
        test_pandas(snap)
        test_pickle()
        test_folder(tmp)
        test_errors(tmp, path)
        test_doc(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok: the Python reader agrees with tidemark summary and categories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
