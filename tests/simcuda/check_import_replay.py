"""tests/simcuda/check_import_replay.py: what test_import_replay.sh holds a
real PyTorch history (history_pickle.py) and tidemark's handling of it to.

    python check_import_replay.py roundtrip ORIG.pickle AGAIN.pickle
        tidemark's export of its import of ORIG = ORIG: every trace entry
        (action, address, size, stream, time, user_metadata) of every
        device, `annotate` entries included, the segments (address, size,
        stream, pool, blocks), the external annotations (stage, name,
        device, time).
    python check_import_replay.py peaks TIDEMARK X.tdm REF.json
        the import's peak allocated = max_memory_allocated(), every device.
    python check_import_replay.py timeline REPLAYED.pickle REF.json DEVICE
        the replay's segment timeline (the sizes, in order, as reserved
        memory rises and falls) = PyTorch's reserved timeline of that run.
Exit 1 with one line on a mismatch."""
import json
import pickle
import subprocess
import sys


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


def entries(snap, dev):
    t = snap["device_traces"][dev] if dev < len(snap["device_traces"]) else []
    return [(e["action"], e["addr"], e["size"], e["stream"], e["time_us"],
             e.get("user_metadata", "")) for e in t]


def segments(snap):
    return sorted((s["device"], s["address"], s["total_size"], s["stream"], s["segment_type"],
                   tuple((b["size"], b["requested_size"] if b["state"] != "inactive" else 0, b["state"])
                         for b in s["blocks"])) for s in snap["segments"])


what = sys.argv[1]
if what == "roundtrip":
    a, b = (pickle.load(open(p, "rb")) for p in sys.argv[2:4])
    for dev in range(len(a["device_traces"])):
        x, y = entries(a, dev), entries(b, dev)
        if x != y:
            i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            fail("device %d: entry %d: PyTorch %s, after import and export %s" % (
                dev, i, x[i] if i < len(x) else None, y[i] if i < len(y) else None))
        print("ok: device %d: %d trace entries round-trip" % (dev, len(x)))
    if segments(a) != segments(b):
        fail("the segments do not round-trip")
    print("ok: %d segments round-trip" % len(a["segments"]))
    ann = lambda s: [(e["stage"], e["name"], e.get("device"), e["time_us"])
                     for e in s.get("external_annotations", [])]
    if ann(a) != ann(b):
        i = next((i for i, (p, q) in enumerate(zip(ann(a), ann(b))) if p != q), min(len(ann(a)), len(ann(b))))
        fail("the annotations do not round-trip: annotation %d: PyTorch %s, after import and export %s" % (
            i, ann(a)[i] if i < len(ann(a)) else None, ann(b)[i] if i < len(ann(b)) else None))
    print("ok: %d annotations (START and END, with their devices) round-trip" % len(ann(a)))
elif what == "peaks":
    tidemark, tdm, ref = sys.argv[2:5]
    mine = json.loads(subprocess.run([tidemark, "export", "-f", "json", "-q", "-o", "-", tdm],
                                     capture_output=True, check=True).stdout)
    for dev, want in enumerate(json.load(open(ref))):
        got = mine["devices"][dev]["peak_allocated"]
        if got != want["max_allocated"]:
            fail("device %d: imported peak allocated %d B, max_memory_allocated() %d B" % (dev, got, want["max_allocated"]))
        print("ok: device %d: imported peak allocated %d B = max_memory_allocated()" % (dev, got))
elif what == "timeline":
    snap, ref, dev = pickle.load(open(sys.argv[2], "rb")), json.load(open(sys.argv[3])), int(sys.argv[4])
    cur, got = 0, []
    for e in snap["device_traces"][0] if len(snap["device_traces"]) == 1 else snap["device_traces"][dev]:
        if e["action"] in ("segment_alloc", "segment_map"):
            cur += e["size"]; got.append(cur)
        elif e["action"] in ("segment_free", "segment_unmap"):
            cur -= e["size"]; got.append(cur)
    want = ref[dev]["reserved_timeline"]
    if got != want:
        fail("device %d: replayed reserved timeline (%d steps, peak %d) differs from PyTorch's (%d steps, peak %d)" % (
            dev, len(got), max(got or [0]), len(want), max(want or [0])))
    print("ok: device %d: the replay's reserved timeline = PyTorch's when run so (%d steps, peak %d B)" % (dev, len(got), max(got or [0])))
