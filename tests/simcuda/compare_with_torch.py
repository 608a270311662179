"""tests/simcuda/compare_with_torch.py: tidemark's recording of a run held
against PyTorch's own account of the same run (torch_reference.py):

    python compare_with_torch.py TIDEMARK RUN.tdm REF [segments-only]

  - peaks: the timeline's peak allocated = torch.cuda.max_memory_allocated()
    and its peak reserved = max_memory_reserved(), every device, exactly;
  - segments: the segment timeline (segment_alloc/free/map/unmap: address,
    size, in order) of tidemark's own hooks = the one in PyTorch's
    _dump_snapshot(), and the final segments (address, size, stream, pool,
    blocks: size, requested size, state) = its _snapshot() segments;
  - memory_viz: `tidemark export --format pytorch` = PyTorch's
    _dump_snapshot(): every trace entry's action, address, size and stream
    in order, frames aside.
With `segments-only` (tidemark saw segments, not tensors: torch_tensors=off,
or a cache mode that stood aside) only reserved memory is held against
PyTorch's.  Prints one line per check; exit 1 on the first mismatch."""
import json
import pickle
import subprocess
import sys

tidemark, tdm, ref = sys.argv[1:4]
segments_only = len(sys.argv) > 4 and sys.argv[4] == "segments-only"
SEG = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
TENSOR = ("alloc", "free_requested", "free_completed")


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


def out(*args):
    r = subprocess.run([tidemark] + list(args), capture_output=True)
    if r.returncode != 0:
        fail("tidemark %s: %s" % (" ".join(args), r.stderr.decode()))
    return r.stdout


figures = json.load(open(ref + ".json"))
mine = json.loads(out("export", "-f", "json", "-q", "-o", "-", tdm))
by_ordinal = {d["ordinal"] if "ordinal" in d else i: d for i, d in enumerate(mine["devices"])}
for dev, want in enumerate(figures["per_device"]):
    d = by_ordinal.get(dev)
    if d is None:
        if want["max_reserved"]:
            fail("device %d: not in tidemark's snapshot" % dev)
        continue
    if d["peak_reserved"] != want["max_reserved"]:
        fail("device %d: peak reserved %d B, torch.cuda.max_memory_reserved() %d B"
             % (dev, d["peak_reserved"], want["max_reserved"]))
    if not segments_only and d["peak_allocated"] != want["max_allocated"]:
        fail("device %d: peak allocated %d B, torch.cuda.max_memory_allocated() %d B"
             % (dev, d["peak_allocated"], want["max_allocated"]))
    print("ok: device %d: peak reserved %d B%s = torch's" % (
        dev, d["peak_reserved"], "" if segments_only else ", allocated %d B" % d["peak_allocated"]))

theirs = pickle.load(open(ref + ".pickle", "rb"))
ours = pickle.loads(out("export", "-f", "pytorch", "-q", "-o", "-", tdm))


def entries(snap, dev, actions):
    traces = snap.get("device_traces", [])
    t = traces[dev] if dev < len(traces) else []
    return [(e["action"], e["addr"], e["size"], e["stream"]) for e in t if e["action"] in actions]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "entry %d: tidemark %s, torch %s" % (i, x, y)
    return "tidemark has %d entries, torch %d" % (len(a), len(b))


for dev in range(figures["devices"]):
    a, b = entries(ours, dev, SEG), entries(theirs, dev, SEG)
    if a != b:
        fail("device %d: segment timeline: %s" % (dev, first_difference(a, b)))
    print("ok: device %d: segment timeline, %d events, = PyTorch's" % (dev, len(a)))

def block(size, requested, state):
    return [size, 0 if state == "inactive" else requested, state]


want = sorted(({**s, "blocks": [block(*b) for b in s["blocks"]]}
               for s in json.load(open(ref + ".segments.json"))),
              key=lambda s: (s["device"], s["address"]))
got = sorted(({"device": s["device"], "address": s["address"], "total_size": s["total_size"],
               "stream": s["stream"], "segment_type": s["segment_type"],
               "blocks": [block(b["size"], b["requested_size"], b["state"]) for b in s["blocks"]]}
              for s in ours["segments"]), key=lambda s: (s["device"], s["address"]))
if segments_only:
    got = [dict(g, blocks=None) for g in got]
    want = [dict(w, blocks=None) for w in want]
if got != want:
    diff = [(g, w) for g, w in zip(got, want) if g != w]
    fail("final segments: %d of tidemark's, %d of torch's; first difference %s" % (
        len(got), len(want), diff[0] if diff else "(a segment missing)"))
print("ok: final segments (%d) = torch.cuda.memory._snapshot()'s" % len(got))

if not segments_only:
    for dev in range(figures["devices"]):
        a, b = entries(ours, dev, SEG + TENSOR), entries(theirs, dev, SEG + TENSOR)
        if a != b:
            fail("device %d: memory_viz trace: %s" % (dev, first_difference(a, b)))
        print("ok: device %d: memory_viz trace, %d entries (action, address, size, stream), "
              "= PyTorch's _dump_snapshot()" % (dev, len(a)))
