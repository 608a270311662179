#!/usr/bin/env bash
# A PyTorch history's annotations survive `tidemark import` and `export
# --format pytorch` (format 1.4's annotations record): each entry's
# user_metadata (per device list), `annotate` entries in their places, and
# external_annotations with their ENDs and devices; and the imported
# file's export is stable (import of the export exports the same bytes).
# The pickle is written by hand, as torch 2.14 writes one, so that this
# runs without torch (simcuda.import_replay does it with torch's own).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK
need_python
python3 - "$work/orig.pickle" <<'PY'
import pickle, sys
T0 = 1700000000000000
def e(action, addr, size, t, meta, **kw):
    d = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + t,
         "frames": [], "user_metadata": meta, "compile_context": "N/A"}
    d.update(kw)
    return d
dev0 = [e("segment_alloc", 0x10000000, 2 << 20, 1, "setup"),
        e("alloc", 0x10000000, 4096, 2, "setup"),
        e("alloc", 0x10001000, 8192, 5, "step 0"),
        e("annotate", 0x10001000, 8192, 6, "activation of step 0"),
        e("free_requested", 0x10001000, 8192, 7, "step 0"),
        e("free_completed", 0x10001000, 8192, 7, "step 0"),
        e("annotate", 0x10000000, 4096, 9, "weights")]
dev1 = [e("segment_alloc", 0x20000000, 2 << 20, 3, ""),
        e("alloc", 0x20000000, 1024, 4, "dev1 step"),
        e("free_requested", 0x20000000, 1024, 8, "")]
seg = lambda dev, addr, blocks: {"device": dev, "address": addr, "total_size": 2 << 20,
    "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
    "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "small",
    "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
blk = lambda size, state, req: {"size": size, "requested_size": req, "state": state, "frames": []}
snap = {"segments": [seg(0, 0x10000000, [blk(4096, "active_allocated", 4096), blk((2 << 20) - 4096, "inactive", 0)]),
                     seg(1, 0x20000000, [blk(1024, "active_pending_free", 1024), blk((2 << 20) - 1024, "inactive", 0)])],
        "device_traces": [dev0, dev1],
        "external_annotations": [
            {"stage": "START", "name": "forward", "device": 0, "time_us": T0 + 5},
            {"stage": "START", "name": "forward", "device": 1, "time_us": T0 + 5},
            {"stage": "END", "name": "forward", "device": 1, "time_us": T0 + 6},
            {"stage": "END", "name": "forward", "device": 0, "time_us": T0 + 8}],
        "allocator_settings": {"expandable_segments": False}}
pickle.dump(snap, open(sys.argv[1], "wb"), protocol=4)
PY
expect 0 "import" -- "$TIDEMARK" import -q "$work/orig.pickle" -o "$work/a.tdm"
lacks err "skipped"
expect 0 "export" -- "$TIDEMARK" export -f pytorch -q -o "$work/a.pickle" "$work/a.tdm"
python3 - "$work/orig.pickle" "$work/a.pickle" >"$work/cmp" 2>&1 <<'PY' || { cat "$work/cmp"; fail "the annotations do not round-trip"; }
import pickle, sys
a, b = (pickle.load(open(p, "rb")) for p in sys.argv[1:3])
key = lambda e: (e["action"], e["addr"], e["size"], e["time_us"], e.get("user_metadata", ""))
for d in range(2):
    x = [key(e) for e in a["device_traces"][d]]
    y = [key(e) for e in b["device_traces"][d]]
    assert x == y, "device %d:\n  %s\n  %s" % (d, x, y)
ann = lambda s: [(e["stage"], e["name"], e["device"], e["time_us"]) for e in s["external_annotations"]]
assert ann(a) == ann(b), (ann(a), ann(b))
PY
# Stable: the export's import exports the same bytes.
expect 0 "import of the export" -- "$TIDEMARK" import -q "$work/a.pickle" -o "$work/b.tdm"
expect 0 "export again" -- "$TIDEMARK" export -f pytorch -q -o "$work/b.pickle" "$work/b.tdm"
cmp -s "$work/a.pickle" "$work/b.pickle" || fail "the second export differs from the first"
# The phases tidemark shows still come from the STARTs.
expect 0 "summary" -- "$TIDEMARK" summary "$work/a.tdm"
has out "1 phase name"
finish "import annotations"
