#!/usr/bin/env bash
# `tidemark export --format pytorch` and `tidemark import` end to end:
#   - the golden small snapshot exports to exactly its golden pickle;
#   - python3's pickle loads every export, pickletools finds only the
#     writer's opcodes, and tests/tools/check_pytorch_snapshot.py (schema
#     and replay, from the reference) passes on: the small snapshot, the
#     recorded demo ($TRAIN_SIM), the demo with a ring too small for its
#     history (dropped events), in pass-through mode, per device, and a
#     snapshot cut before its final state;
#   - the checker itself rejects broken snapshots (so its OK means something);
#   - import: pickle -> .tdm -> pickle is byte-identical, also from pickles
#     CPython re-wrote with protocols 2, 4, 5 (memo, FRAME); truncated and
#     malformed pickles fail with exit 2 and a byte offset;
#   - usage errors and exit codes (docs/cli.md).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM TDM_SOURCE_DIR
CHECK="python3 $TDM_SOURCE_DIR/tests/tools/check_pytorch_snapshot.py"
GOLDEN=$TDM_SOURCE_DIR/tests/data/golden

check() { # check WHAT FILE: the schema-and-replay checker, strict
  $CHECK --strict "$2" >"$work/check" 2>&1 || { fail "$1: checker"; head -n 20 "$work/check"; }
}
need_python

# ---- help and usage -----------------------------------------------------------
expect 0 "help export" -- "$TIDEMARK" help export
has out "usage: tidemark export"; has out "pytorch"
expect 0 "export --help" -- "$TIDEMARK" export --help
expect 0 "help import" -- "$TIDEMARK" help import
has out "usage: tidemark import"; has out "pytorch"
expect 0 "--help lists them" -- "$TIDEMARK" --help
has out "export"; has out "import"
expect 1 "export without --format" -- "$TIDEMARK" export "$GOLDEN/pytorch-small.tdm"
has err "no --format"
expect 1 "unknown format" -- "$TIDEMARK" export --format nope x.tdm
has err "unknown format 'nope'"
expect 1 "unknown option" -- "$TIDEMARK" export --format pytorch --bogus x.tdm
has err "unknown option '--bogus'"
expect 1 "no file" -- "$TIDEMARK" export --format pytorch
expect 1 "two files, one output" -- "$TIDEMARK" export --format pytorch a.tdm b.tdm -o "$work/ab.pickle"
expect 1 "bad --device" -- "$TIDEMARK" export --format pytorch --device x a.tdm
if "$TIDEMARK" help export | grep -q -- "--merge"; then
  expect 1 "another format's option" -- "$TIDEMARK" export --format pytorch --merge x.json a.tdm
  has err "does not apply to --format pytorch"
fi
expect 2 "missing input" -- "$TIDEMARK" export --format pytorch "$work/none.tdm" -o "$work/x.pickle"
has err "No such file"
[ ! -e "$work/x.pickle" ] || fail "a failed export left its output"
printf 'not a snapshot\n' >"$work/junk.tdm"
expect 2 "corrupt input" -- "$TIDEMARK" export --format pytorch "$work/junk.tdm" -o "$work/x.pickle"
has err "at byte"
expect 4 "unwritable output" -- "$TIDEMARK" export --format pytorch "$GOLDEN/pytorch-small.tdm" \
  -o "$work/junk.tdm/dir/x.pickle"
has err "cannot create the directory $work/junk.tdm"
expect 0 "output in new folders" -- "$TIDEMARK" export --format pytorch "$GOLDEN/pytorch-small.tdm" \
  -o "$work/no/such/dir/x.pickle"
[ -s "$work/no/such/dir/x.pickle" ] || fail "no pickle in the new folders"
expect 1 "import without a file" -- "$TIDEMARK" import
expect 1 "import unknown format" -- "$TIDEMARK" import --format nope x
expect 2 "import missing file" -- "$TIDEMARK" import "$work/none.pickle"

# ---- (a) the small hand-built snapshot: golden file ------------------------------
# The golden pickle holds the stacks as recorded (tests/unit writes it from
# the file itself); the tool drops the small program's allocation wrapper
# (alloc_tensor) unless --keep-wrappers.
expect 0 "export small" -- "$TIDEMARK" export --format pytorch --keep-wrappers \
  "$GOLDEN/pytorch-small.tdm" -o "$work/small.pickle"
has err "wrote $work/small.pickle"
has err "1 of 14 events"            # the free outside every segment is left out
cmp -s "$work/small.pickle" "$GOLDEN/pytorch-small.pickle" ||
  fail "small export differs from tests/data/golden/pytorch-small.pickle"
check small "$work/small.pickle"
expect 0 "export to stdout" -- "$TIDEMARK" export -q --format=pytorch --keep-wrappers -o - \
  "$GOLDEN/pytorch-small.tdm"
cmp -s "$work/out" "$GOLDEN/pytorch-small.pickle" || fail "-o - differs from the golden pickle"
expect 0 "export without the wrapper" -- "$TIDEMARK" export -q --format=pytorch -o - \
  "$GOLDEN/pytorch-small.tdm"
cmp -s "$work/out" "$GOLDEN/pytorch-small.pickle" && fail "the wrapper alloc_tensor was kept"
/usr/bin/python3 -c 'import pickle,sys; s=pickle.load(sys.stdin.buffer); n=[f["name"] for t in s["device_traces"] for e in t for f in e["frames"]]; sys.exit(0 if n and "alloc_tensor" not in n else 1)' \
  <"$work/out" || fail "the default export still names alloc_tensor"
[ ! -s "$work/err" ] || fail "-q still printed: $(cat "$work/err")"
cp "$GOLDEN/pytorch-small.tdm" "$work/dflt.tdm"
expect 0 "default output name" -- "$TIDEMARK" export --format pytorch "$work/dflt.tdm"
[ -s "$work/dflt.pickle" ] || fail "no dflt.pickle next to dflt.tdm"

# ---- (b) the recorded demo, and (c) with dropped events -------------------------------
if [ ! -x "$TRAIN_SIM" ]; then echo "FAIL: TRAIN_SIM=$TRAIN_SIM is not built"; exit 1; fi
record() { # record NAME CONF...
  local name=$1; shift
  TIDEMARK_CONF="dump=$work/$name.tdm${1:+,$1}" "$TRAIN_SIM" --steps 3 >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "train_sim ($name) failed"; }
}
record demo ""
record dropped "max_entries=60"
record pass "alloc_mode=passthrough"
record passdropped "alloc_mode=passthrough,max_entries=45"
for name in demo dropped pass passdropped; do
  expect 0 "export $name" -- "$TIDEMARK" export --format pytorch "$work/$name.tdm" \
    -o "$work/$name.pickle"
  # A ring that dropped its oldest events keeps a suffix of a consistent
  # history: it replays whole, nothing is left out.
  lacks err "left out"
  check "$name" "$work/$name.pickle"
done
python3 - "$work" <<'EOF' || fail "demo pickles' content"
import pickle, sys
w = sys.argv[1]
demo = pickle.load(open(w + "/demo.pickle", "rb"))
drop = pickle.load(open(w + "/dropped.pickle", "rb"))
t = demo["allocator_settings"]["tidemark"]
assert t["dropped_events"] == 0 and t["alloc_mode"] == "cache", t
assert drop["allocator_settings"]["tidemark"]["dropped_events"] > 0
assert len(drop["device_traces"][0]) < len(demo["device_traces"][0])
# The final state is complete whatever the ring lost.
assert len(drop["segments"]) == len(demo["segments"])
cats = {e["category"] for e in demo["device_traces"][0]}
assert {"parameter", "optimizer_state", "unknown"} <= cats, cats
# Frames name the demo's functions, innermost first.
alloc = next(e for e in demo["device_traces"][0] if e["action"] == "alloc")
names = [f["name"] for f in alloc["frames"]]
assert "train" in names and "main" in names and names.index("train") < names.index("main"), names
assert any(f["filename"].endswith("train_sim.c") and f["line"] > 0 for f in alloc["frames"])
# Observe/pass-through: every allocation its own segment.
p = pickle.load(open(w + "/pass.pickle", "rb"))
assert all(len([b for b in s["blocks"] if b["state"] != "inactive"]) <= 1 for s in p["segments"])
EOF
expect 0 "export --device 0" -- "$TIDEMARK" export --format pytorch --device 0 "$work/demo.tdm" \
  -o "$work/dev0.pickle"
check "device 0" "$work/dev0.pickle"

# A file cut before its final state: exported with a synthetic segment.
size=$(stat -c %s "$work/demo.tdm")
head -c $((size * 2 / 3)) "$work/demo.tdm" >"$work/cut.tdm"
expect 2 "export a truncated snapshot" -- "$TIDEMARK" export --format pytorch "$work/cut.tdm" \
  -o "$work/cut.pickle"
has err "truncated"
has err "no final allocator state"
check cut "$work/cut.pickle"

# ---- the checker can fail ------------------------------------------------------
python3 - "$work" "$TDM_SOURCE_DIR/tests/tools" <<'EOF' || fail "checker self-test"
import copy, io, pickle, sys
sys.path.insert(0, sys.argv[2])
import check_pytorch_snapshot as C
w = sys.argv[1]
good = pickle.load(open(w + "/demo.pickle", "rb"))
def problems(snap, proto=4):
    path = w + "/bad.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=proto)
    r, _ = C.check_file(path)
    return r.problems
assert problems(good) == [], problems(good)
def mutated(fn):
    s = copy.deepcopy(good); fn(s); return s
t = lambda s: s["device_traces"][0]
cases = {
  "reversed frames": lambda s: [e.__setitem__("frames", e["frames"][::-1]) for e in t(s)],
  "no unknown category": lambda s: [e.__setitem__("category", "parameter") for e in t(s)],
  "a free dropped": lambda s: t(s).remove(next(e for e in t(s) if e["action"] == "free_completed")),
  "an alloc dropped": lambda s: t(s).remove(next(e for e in t(s) if e["action"] == "alloc")),
  "segment_alloc moved last": lambda s: t(s).append(t(s).pop(next(i for i, e in enumerate(t(s)) if e["action"] == "segment_alloc"))),
  "blocks do not tile": lambda s: s["segments"][0]["blocks"][0].__setitem__("size", 512),
  "state misspelt": lambda s: s["segments"][0]["blocks"][0].__setitem__("state", "active_awaiting_free"),
  "no device_traces": lambda s: s.pop("device_traces"),
  "time in ns": lambda s: [e.__setitem__("time_us", e["time_us"] * 1000) for e in t(s)],
  "addr too large": lambda s: t(s)[0].__setitem__("addr", 2**64 - 1),
  "segment on a device without a list": lambda s: s["segments"][0].__setitem__("device", 3),
  "line is a str": lambda s: t(s)[0]["frames"][0].__setitem__("line", "12"),
}
for name, fn in cases.items():
    assert problems(mutated(fn)), "checker accepted: " + name
# Expandable segments, replayed as the viewer's own segment list does: a 40
# MiB map whose upper half is unmapped on another stream, or next to a
# segment freed above every other one, cannot be undone (the viewer throws).
M = 1 << 20; E = 0x7f2a00000000
def expandable(events, stream=0):
    seg = {"device": 0, "address": E, "total_size": 20 * M, "stream": stream,
           "blocks": [{"size": 20 * M, "state": "inactive"}]}
    ev = [dict(action=a, addr=x, size=n, stream=st) for a, x, n, st in events]
    return {"segments": [seg], "device_traces": [[{"action": "oom", "device_free": 0,
                                                   "size": 1, "stream": 0}] + ev]}
fine = [("segment_map", E, 40 * M, 7), ("segment_unmap", E + 20 * M, 20 * M, 7)]
assert problems(expandable(fine, 7)) == [], problems(expandable(fine, 7))
other_stream = [("segment_map", E, 40 * M, 7), ("segment_unmap", E + 20 * M, 20 * M, 0)]
assert any("viewer throws" in p for p in problems(expandable(other_stream, 7)))
freed_above = [("segment_map", E, 40 * M, 0), ("segment_alloc", E + 100 * M, 2 * M, 0),
               ("segment_unmap", E + 20 * M, 20 * M, 0), ("segment_free", E + 100 * M, 2 * M, 0)]
assert any("viewer throws" in p for p in problems(expandable(freed_above)))
freed_below = [(a, x - 200 * M if a in ("segment_alloc", "segment_free") else x, n, st)
               for a, x, n, st in freed_above]
assert problems(expandable(freed_below)) == [], problems(expandable(freed_below))
# Encoding: protocol 5, and a class (GLOBAL/REDUCE) are refused.
assert any("protocol 5" in p for p in problems(good, 5))
s = copy.deepcopy(good); s["segments"][0]["extra"] = {1, 2}
assert any("EMPTY_SET" in p for p in problems(s))
EOF

# ---- import ------------------------------------------------------------------
expect 0 "import the demo's pickle" -- "$TIDEMARK" import "$work/demo.pickle" -o "$work/demo2.tdm"
has err "wrote $work/demo2.tdm"
expect 0 "summary of the import" -- "$TIDEMARK" summary "$work/demo2.tdm"
has out "peak allocated"; has out "train_sim.c:"
expect 0 "re-export" -- "$TIDEMARK" export -q --format pytorch "$work/demo2.tdm" -o "$work/demo3.pickle"
cmp -s "$work/demo.pickle" "$work/demo3.pickle" || fail "pickle -> .tdm -> pickle changed the demo"
# the default name is FILE.tdm beside it; the recording there is not replaced
expect 1 "import onto the recording" -- "$TIDEMARK" import -q "$work/dropped.pickle"
has err "$work/dropped.tdm exists; use -o to choose another name or --force to replace it"
mkdir "$work/fresh" && cp "$work/dropped.pickle" "$work/fresh/"
expect 0 "import default name" -- "$TIDEMARK" import -q "$work/fresh/dropped.pickle"
[ -s "$work/fresh/dropped.tdm" ] || fail "no dropped.tdm next to dropped.pickle"
# CPython's own pickles of the same data (memo, FRAME, protocols 2..5).
for proto in 2 4 5; do
  python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); pickle.dump(d, open(sys.argv[2],'wb'), protocol=int(sys.argv[3]))" \
    "$work/demo.pickle" "$work/py$proto.pickle" "$proto"
  expect 0 "import CPython protocol $proto" -- "$TIDEMARK" import -q "$work/py$proto.pickle" \
    -o "$work/py$proto.tdm"
  expect 0 "re-export protocol $proto" -- "$TIDEMARK" export -q --format pytorch \
    "$work/py$proto.tdm" -o "$work/py$proto.out.pickle"
  cmp -s "$work/demo.pickle" "$work/py$proto.out.pickle" ||
    fail "CPython protocol $proto pickle imported differently"
done
# Bad pickles: exit 2, and where.
head -c 5000 "$work/demo.pickle" >"$work/trunc.pickle"
expect 2 "import a truncated pickle" -- "$TIDEMARK" import "$work/trunc.pickle" -o "$work/t.tdm"
has err "truncated"; has err "at byte"
[ ! -e "$work/t.tdm" ] || fail "a failed import left its output"
python3 -c "import pickle,sys; pickle.dump({'segments': [], 'device_traces': [[]], 'x': complex(1, 2)}, open(sys.argv[1],'wb'), protocol=4)" "$work/class.pickle"
expect 2 "import a pickle with a class" -- "$TIDEMARK" import "$work/class.pickle" -o "$work/t.tdm"
has err "unsupported pickle opcode"; has err "at byte"
# Segments that blocks do not tile, and a segment listed twice: refused
# with where, before anything is written (gate and diff read the same way).
python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); d['segments'][0]['total_size'] += 512; pickle.dump(d, open(sys.argv[2],'wb'), protocol=4)" \
  "$work/demo.pickle" "$work/tile.pickle"
expect 2 "import a segment its blocks do not tile" -- "$TIDEMARK" import "$work/tile.pickle" -o "$work/t.tdm"
has err "segments[0]"; has err "but total_size is"; has err "at byte"
expect 2 "gate on the same pickle" -- "$TIDEMARK" gate --max-peak 1TiB "$work/tile.pickle"
python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); d['segments'].append(d['segments'][0]); pickle.dump(d, open(sys.argv[2],'wb'), protocol=4)" \
  "$work/demo.pickle" "$work/dup.pickle"
expect 2 "import a segment listed twice" -- "$TIDEMARK" import "$work/dup.pickle" -o "$work/t.tdm"
has err "overlaps segment 0"; has err "at byte"
[ ! -e "$work/t.tdm" ] || fail "a refused import left its output"
python3 -c "import pickle,sys; pickle.dump({'segments': [{'device': 0, 'address': 'x'}], 'device_traces': [[]]}, open(sys.argv[1],'wb'), protocol=4)" "$work/schema.pickle"
expect 2 "import a pickle with a wrong type" -- "$TIDEMARK" import "$work/schema.pickle" -o "$work/t.tdm"
has err "segments[0]: 'address' is str, not int"; has err "at byte"
expect 2 "import something else" -- "$TIDEMARK" import "$work/junk.tdm" -o "$work/t.tdm"
has err "not a format tidemark imports"
expect 2 "import --format pytorch of a non-pickle" -- "$TIDEMARK" import --format pytorch \
  "$work/junk.tdm" -o "$work/t.tdm"
has err "at byte 0"

finish "pytorch export and import"
