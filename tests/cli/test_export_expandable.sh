#!/usr/bin/env bash
# Expandable segments recorded by tidemark's own caching allocator
# (expandable_segments=1) reach every reader as PyTorch's do: the memory_viz
# pickle has segment_map / segment_unmap trace entries and no
# segment_alloc, segments with is_expandable, one per run of mapped pages,
# and passes the schema-and-replay checker (the viewer's segment list);
# the summary and the JSON export read the same file (reserved = mapped).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK EXPAND_PROG TDM_SOURCE_DIR
need_python
CHECK="python3 $TDM_SOURCE_DIR/tests/tools/check_pytorch_snapshot.py"
MiB=1048576

TIDEMARK_CONF="dump=$work/x.tdm,expandable_segments=1,device=sim:1GiB" "$EXPAND_PROG" \
  >"$work/prog.out" 2>"$work/prog.err" || fail "expand_prog: $(cat "$work/prog.err")"
[ -s "$work/x.tdm" ] || { fail "no snapshot"; finish "expandable export"; }
[ -s "$work/prog.err" ] && grep -v "wrote snapshot" "$work/prog.err" && fail "stderr of expand_prog"

expect 0 "export pytorch" -- "$TIDEMARK" export --format pytorch "$work/x.tdm" -o "$work/x.pickle"
$CHECK --strict "$work/x.pickle" >"$work/check" 2>&1 || fail "checker: $(head -n 20 "$work/check")"

python3 - "$work/x.pickle" $MiB >"$work/py" 2>&1 <<'PY' || fail "pickle: $(cat "$work/py")"
import pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
MiB = int(sys.argv[2])
trace = snap["device_traces"][0]
actions = [e["action"] for e in trace]
assert "segment_alloc" not in actions and "segment_free" not in actions, actions
maps = [(e["addr"], e["size"] // MiB) for e in trace if e["action"] == "segment_map"]
unmaps = [(e["addr"], e["size"] // MiB) for e in trace if e["action"] == "segment_unmap"]
large = [m for m in maps if m[1] >= 20]
base = large[0][0]
# a: two 20 MiB pages; b: one; c: two; then one again after empty_cache.
assert [(a - base, s) for a, s in large] == [(0, 40), (40 * MiB, 20), (60 * MiB, 40), (0, 20)], maps
assert (maps[3][1], len(maps)) == (2, 5), maps  # the small pool's 2 MiB page
assert [(a - base, s) for a, s in unmaps] == [(0, 40)], unmaps
assert actions.index("segment_unmap") < len(actions) - 2
segs = snap["segments"]
assert all(s["is_expandable"] for s in segs), segs
got = sorted((s["address"] - base, s["total_size"] // MiB, s["segment_type"]) for s in segs
             if s["segment_type"] == "large")
# mapped runs: [0, 20) MiB again, and [40, 100) MiB (the hole [20, 40) unmapped)
assert got == [(0, 20, "large"), (40 * MiB, 60, "large")], got
assert snap["allocator_settings"]["expandable_segments"] is True, snap["allocator_settings"]
print("ok")
PY

expect 0 "summary" -- "$TIDEMARK" summary "$work/x.tdm"
expect 0 "export json" -- "$TIDEMARK" export --format json "$work/x.tdm" -o "$work/x.json"
# Reserved memory is what was mapped: 100 MiB of large pages, 2 MiB small.
got=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['devices'][0]['peak_reserved'] // $MiB)" "$work/x.json")
[ "$got" = 102 ] || fail "peak reserved in the JSON export: $got MiB"
finish "expandable export"
