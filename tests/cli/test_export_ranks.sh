#!/usr/bin/env bash
# `tidemark export` with several snapshots (the ranks of a job):
#   - perfetto merges them into one trace: one process per rank (pid =
#     rank + 1, named "rank R (host)"), every event at the absolute time
#     the rank's own export puts it (its ts + its baseTimeNanoseconds), so
#     the ranks share one time axis; -o is required, --merge refused;
#   - pytorch (and every other format) writes one file per snapshot, named
#     by -o as a template (%r, %l, %h, %p, %n, %%) or a directory, or beside
#     each input; each pickle is byte-identical to exporting that snapshot
#     alone and carries its own rank; two inputs naming one output is an
#     error for the second, nothing is overwritten;
#   - unreadable inputs are reported and the others still exported (exit 2).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
need_python

# Three ranks of different sizes, run side by side as a launcher would.
mkdir "$work/job"
for r in 2 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 TIDEMARK_CONF="dump=$work/job/r%r.tdm" "$TRAIN_SIM" \
    --steps 2 --layers 3 --hidden $((512 + 256 * r)) --compute-us 50 >/dev/null 2>&1 &
done
wait
for r in 0 1 2; do [ -s "$work/job/r$r.tdm" ] || fail "rank $r wrote no snapshot"; done

expect 0 "help export" -- "$TIDEMARK" help export
has out "one trace, each rank a process"; has out "%r rank"

# ---- perfetto: one trace ---------------------------------------------------------------
expect 1 "several, no -o" -- "$TIDEMARK" export --format perfetto "$work/job"
has err "3 snapshots make one trace"
expect 1 "several with --merge" -- "$TIDEMARK" export --format perfetto --merge x.json \
  "$work/job" -o "$work/m.json"
has err "give one snapshot"
expect 1 "several into a directory" -- "$TIDEMARK" export --format perfetto "$work/job" -o "$work/job/"
expect 0 "merged trace" -- "$TIDEMARK" export --format perfetto "$work/job" -o "$work/all.json"
has err "wrote $work/all.json (perfetto: 3 of 3 snapshots, one process each)"
for r in 0 1 2; do
  expect 0 "rank $r alone" -- "$TIDEMARK" export -q --format perfetto "$work/job/r$r.tdm" \
    -o "$work/r$r.json"
done
python3 - "$work" >"$work/py" 2>&1 <<'EOF' || { fail "merged trace"; cat "$work/py"; }
import json, sys
from decimal import Decimal
w = sys.argv[1]
# ts are µs since the epoch with ns digits: past a double's precision
d = json.load(open(w + "/all.json"), parse_float=Decimal)
ev = d["traceEvents"]
assert d["baseTimeNanoseconds"] == 0, d["baseTimeNanoseconds"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == [1, 2, 3], names
for r in range(3):
    assert names[r + 1].startswith("rank %d (" % r), names
# thread ids never shared between processes
owner = {}
for e in ev:
    assert owner.setdefault(e["tid"], e["pid"]) == e["pid"], e
assert {s["rank"]: s["pid"] for s in d["otherData"]["snapshots"]} == {0: 1, 1: 2, 2: 3}
for r in range(3):
    one = json.load(open("%s/r%d.json" % (w, r)), parse_float=Decimal)
    base_us = Decimal(one["baseTimeNanoseconds"]) / 1000
    mine = [e for e in one["traceEvents"] if e["ph"] != "M"]
    merged = [e for e in ev if e["pid"] == r + 1 and e["ph"] != "M"]
    assert len(mine) == len(merged), (r, len(mine), len(merged))
    for a, b in zip(mine, merged):
        # the same event at the same absolute time (µs since the epoch)
        assert a["name"] == b["name"] and a["ph"] == b["ph"], (a, b)
        assert a["ts"] + base_us == b["ts"], (r, a, b)
        assert a.get("args", {}).get("bytes") == b.get("args", {}).get("bytes")
print("ok")
EOF
expect 0 "merged to stdout" -- "$TIDEMARK" export --format perfetto -o - "$work/job/r1.tdm" "$work/job/r0.tdm"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["otherData"]["snapshots"]) == 2' \
  "$work/out" || fail "merged stdout is not a trace of two"
expect 2 "merged, one unreadable" -- "$TIDEMARK" export --format perfetto "$work/job" \
  "$work/none.tdm" -o "$work/some.json"
has err "none.tdm"; has err "3 of 4 snapshots"
expect 2 "merged, none readable" -- "$TIDEMARK" export --format perfetto "$work/none.tdm" \
  "$work/nix.tdm" -o "$work/nothing.json"
[ ! -e "$work/nothing.json" ] || fail "a trace of nothing was written"

# ---- pytorch: one pickle per rank --------------------------------------------------------
expect 1 "one -o for several" -- "$TIDEMARK" export --format pytorch "$work/job" -o "$work/one.pickle"
has err "give -o a directory"
[ ! -e "$work/one.pickle" ] || fail "wrote one.pickle anyway"
expect 1 "-o - for several" -- "$TIDEMARK" export --format pytorch "$work/job" -o -
expect 1 "unknown code" -- "$TIDEMARK" export --format pytorch "$work/job" -o "$work/r%q.pickle"
has err "'%q' is not a code"
mkdir "$work/p"
expect 0 "template" -- "$TIDEMARK" export --format pytorch "$work/job" -o "$work/p/rank%r-%%.pickle"
for r in 0 1 2; do
  has err "wrote $work/p/rank$r-%.pickle (pytorch)"
  "$TIDEMARK" export -q --format pytorch "$work/job/r$r.tdm" -o "$work/alone$r.pickle" ||
    fail "export rank $r alone"
  cmp -s "$work/p/rank$r-%.pickle" "$work/alone$r.pickle" || fail "rank $r's pickle differs from its own export"
  python3 -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],"rb")); t=s["allocator_settings"]["tidemark"]
assert t["rank"] == int(sys.argv[2]), t["rank"]' "$work/p/rank$r-%.pickle" "$r" ||
    fail "rank$r-%.pickle is not rank $r's"
done
expect 0 "a directory" -- "$TIDEMARK" export -q --format pytorch "$work/job" -o "$work/p/"
for r in 0 1 2; do cmp -s "$work/p/r$r.pickle" "$work/alone$r.pickle" || fail "p/r$r.pickle"; done
expect 0 "beside each" -- "$TIDEMARK" export -q --format pytorch "$work/job"
for r in 0 1 2; do [ -s "$work/job/r$r.pickle" ] || fail "no job/r$r.pickle"; done
expect 0 "host and name codes" -- "$TIDEMARK" export -q --format csv "$work/job/r1.tdm" -o "$work/%h-%n.csv"
[ -s "$work/$(uname -n | tr / _)-r1.csv" ] || fail "%h-%n.csv: $(ls "$work")"
# one name for three: the first is written, the others refused, nothing overwritten
host=$(uname -n | tr / _)
expect 1 "same name" -- "$TIDEMARK" export --format pytorch "$work/job" -o "$work/same-%h.pickle"
has err "would overwrite $work/same-$host.pickle, written from $work/job/r0.tdm"
cmp -s "$work/same-$host.pickle" "$work/alone0.pickle" || fail "same-%h.pickle is not rank 0's"
# a file that cannot be read: the others are still exported
mkdir "$work/q"
expect 2 "one missing" -- "$TIDEMARK" export -q --format pytorch "$work/job/r2.tdm" "$work/none.tdm" -o "$work/q/"
[ -s "$work/q/r2.pickle" ] || fail "r2 not exported next to a missing file"
# one snapshot: -o codes and directories work too; a plain name as before
expect 0 "one, template" -- "$TIDEMARK" export -q --format json "$work/job/r2.tdm" -o "$work/q/%r.json"
[ -s "$work/q/2.json" ] || fail "no q/2.json"
expect 0 "one, directory" -- "$TIDEMARK" export -q --format perfetto "$work/job/r2.tdm" -o "$work/q"
cmp -s "$work/q/r2.json" "$work/r2.json" || fail "q/r2.json differs from r2.json"
# -o DIR/ that does not exist yet is created, parents too (mkdir -p)
expect 0 "a new directory" -- "$TIDEMARK" export -q --format pytorch "$work/job" -o "$work/new/deep/"
for r in 0 1 2; do cmp -s "$work/new/deep/r$r.pickle" "$work/alone$r.pickle" || fail "new/deep/r$r.pickle"; done
: >"$work/plain"
expect 4 "a directory under a file" -- "$TIDEMARK" export -q --format pytorch "$work/job" -o "$work/plain/sub/"
has err "cannot create the directory $work/plain/sub"
# a template into folders that do not exist yet (docs/export.md's example)
expect 0 "a template into a new folder" -- "$TIDEMARK" export -q --format pytorch "$work/job" \
  -o "$work/pickles/rank%r.pickle"
for r in 0 1 2; do cmp -s "$work/pickles/rank$r.pickle" "$work/alone$r.pickle" || fail "pickles/rank$r.pickle"; done
expect 0 "import into a new folder" -- "$TIDEMARK" import -q "$work/pickles/rank1.pickle" \
  -o "$work/back/r1.tdm"
[ -s "$work/back/r1.tdm" ] || fail "import did not write back/r1.tdm"

finish "tidemark export of several ranks"
