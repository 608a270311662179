#!/usr/bin/env bash
# `tidemark categories`, the perfetto/flamegraph/csv/json exports and the
# rmm/trace imports end to end:
#   - the demo ($TRAIN_SIM) recorded, then every allocation's category
#     checked by count and size against what train_sim allocates
#     (docs/categories.md "Examples");
#   - the shared PyTorch traces scored against their labels (>= 90%);
#     skipped with a message when ../shared/traces is not beside the repo;
#   - the exports parsed with python3's json and checked for the documented
#     event shapes (docs/export.md), --merge into a profiler-like trace;
#   - RMM logs and traces imported and exported back;
#   - usage errors and bad input with their exit codes (docs/cli.md).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM TDM_SOURCE_DIR
have_python=1
command -v python3 >/dev/null || { echo "note: no python3; JSON shape checks skipped"; have_python=0; }
# py WHAT ARGS... <<'EOF' (a python3 script on stdin, ARGS in sys.argv[1:])
py() {
  local what=$1; shift
  [ "$have_python" = 1 ] || return 0
  python3 - "$@" || fail "python check: $what"
}

# ---- usage and bad input ---------------------------------------------------
expect 0 "help categories" -- "$TIDEMARK" help categories
has out "usage: tidemark categories"; has out "--score"
expect 1 "no snapshot" -- "$TIDEMARK" categories
expect 1 "--score without --trace" -- "$TIDEMARK" categories --score x.tdm
expect 1 "bad --samples" -- "$TIDEMARK" categories --samples -3 x.tdm
expect 1 "unknown option" -- "$TIDEMARK" categories --frobnicate x.tdm
expect 2 "missing snapshot" -- "$TIDEMARK" categories "$work/none.tdm"
printf 'action,time_ns,id,size,category\nfree,1,5,10,\n' >"$work/bad.csv"
expect 2 "bad trace" -- "$TIDEMARK" categories --trace "$work/bad.csv"
has err "line 2 (at byte 32): free of id 5"

# ---- the demo: every kind of memory train_sim makes ---------------------------
L=2 S=3 H=256 B=128
expect 0 "train_sim" -- "$TRAIN_SIM" --steps $S --layers $L --hidden $H --batch $B \
  --dump "$work/demo.tdm"
expect 0 "categories demo" -- "$TIDEMARK" categories --samples 6 "$work/demo.tdm"
for c in parameter optimizer_state gradient activation; do has out "    $c "; done
has out "over time"
# More samples than the history has events: each state is shown once (a
# row the same as the one above it says nothing).
expect 0 "categories demo, many samples" -- "$TIDEMARK" categories --samples 2000 "$work/demo.tdm"
rows=$(sed -n '/over time/,$p' "$work/out" | tail -n +3)
[ -n "$rows" ] || fail "no over-time rows"
[ "$(printf '%s\n' "$rows" | uniq -d | wc -l)" -eq 0 ] ||
  fail "repeated over-time rows: $(printf '%s\n' "$rows" | uniq -d | head -3)"
expect 0 "export json" -- "$TIDEMARK" export --format json -o "$work/demo.json" "$work/demo.tdm"
py "demo categories" "$work/demo.json" $L $S $H $B <<'EOF'
import json, sys, collections
d = json.load(open(sys.argv[1])); L, S, H, B = map(int, sys.argv[2:])
a = d["allocations"]
got = collections.Counter(zip(a["size"], a["category"]))
W, bias, act = H * H * 4, H * 4, B * H * 4
want = collections.Counter({
    (W, "parameter"): L, (bias, "parameter"): L,           # init
    (act, "input"): S,                                      # data
    (act // 2, "temporary"): L * S,                         # matmul workspace
    (act, "activation"): 2 * L * S,                         # pre-activation + activation
    (act, "temporary"): L * S,                              # input gradient
    (W, "gradient"): L * S, (bias, "gradient"): L * S,      # weight/bias gradients
    (W, "optimizer_state"): 2 * L,                          # Adam moments
})
want[(W, "temporary")] += L * S                             # optimizer update temporary
if got != want:
    print("got ", sorted(got.items())); print("want", sorted(want.items())); sys.exit(1)
if any(t for t in a["tagged"]): print("untagged demo has tags"); sys.exit(1)
EOF

# ---- perfetto ---------------------------------------------------------------------
expect 0 "export perfetto" -- "$TIDEMARK" export --format perfetto -o "$work/demo.pf.json" "$work/demo.tdm"
py "perfetto shapes" "$work/demo.pf.json" "$work/demo.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1])); m = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
assert isinstance(t["baseTimeNanoseconds"], int)
mem = [e for e in ev if e.get("name") == "[memory]"]
n_alloc = len(m["allocations"]["size"])
n_free = sum(1 for f in m["allocations"]["free_seq"] if f is not None)
assert len(mem) == n_alloc + n_free, (len(mem), n_alloc, n_free)
keys = {"Total Reserved", "Total Allocated", "Bytes", "Addr", "Device Id", "Device Type"}
for e in mem:
    assert e["ph"] == "i" and e["cat"] == "cpu_instant_event" and e["s"] == "t", e
    assert keys <= set(e["args"]), e
    assert isinstance(e["ts"], (int, float))
assert sum(e["args"]["Bytes"] for e in mem) == m["devices"][0]["end_allocated"]
peak = max(e["args"]["Total Allocated"] for e in mem)
assert peak == m["devices"][0]["peak_allocated"], (peak, m["devices"][0]["peak_allocated"])
counters = {e["name"] for e in ev if e["ph"] == "C"}
for c in ["allocated", "reserved", "parameter", "optimizer_state", "gradient",
          "activation", "input", "temporary"]:
    assert "device 0 " + c in counters, (c, counters)
for e in ev:
    if e["ph"] == "C":
        assert list(e["args"]) == ["bytes"] and e["args"]["bytes"] >= 0, e
phases = [e["name"] for e in ev if e["ph"] == "X" and e["tid"] == 2000000001]
assert phases[:6] == ["init", "data", "forward", "backward", "optimizer", "zero_grad"], phases
steps = [e["name"] for e in ev if e["ph"] == "X" and e["tid"] == 2000000002]
assert steps == ["step 1", "step 2", "step 3"], steps
assert all(e["dur"] >= 0 for e in ev if e["ph"] == "X")
names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
assert {"tidemark phases", "tidemark steps"} <= names, names
EOF
# --merge: a profiler trace of "the same run" (its base is the recording start)
base=$(python3 -c "import json;print(json.load(open('$work/demo.pf.json'))['baseTimeNanoseconds'])" 2>/dev/null || echo 0)
# ts counts from the recording's start: the profiler's events sit just
# after the recording's first event.
t0=$(python3 -c "import json;print(min(e['ts'] for e in json.load(open('$work/demo.pf.json'))['traceEvents'] if 'ts' in e))" 2>/dev/null || echo 0)
t_mm=$(python3 -c "print($t0 + 10.0)"); t_mem=$(python3 -c "print($t0 + 12.0)")
cat >"$work/prof.json" <<EOF
{"schemaVersion": 1, "deviceProperties": [],
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": $t_mm, "dur": 5.0},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": $t_mem,
   "args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": 0, "Addr": 0, "Device Id": 0, "Device Type": 1}}
 ],
 "traceName": "prof", "baseTimeNanoseconds": $base}
EOF
expect 0 "export --merge" -- "$TIDEMARK" export --format perfetto --merge "$work/prof.json" \
  -o "$work/merged.json" "$work/demo.tdm"
py "merged trace" "$work/merged.json" "$work/demo.pf.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); own = json.load(open(sys.argv[2]))
assert m["traceName"] == "prof" and m["schemaVersion"] == 1
ev = m["traceEvents"]
assert ev[0]["name"] == "aten::mm" and ev[1]["name"] == "[memory]"
ours = [e for e in ev[2:]]
assert not any(e.get("name") == "process_name" for e in ours)
# same base: the merged events carry exactly the standalone timestamps
a = [e["ts"] for e in own["traceEvents"] if e.get("name") == "[memory]"]
b = [e["ts"] for e in ours if e.get("name") == "[memory]"]
assert a == b, (a[:3], b[:3])
EOF
lacks err "do not overlap"
# one long slice that starts before the recording and lasts past it overlaps
# it; one that ends before it does not (a trace of another run)
for span in "-1000.0 1e12 lacks" "-1e9 10.0 has"; do
  set -- $span
  printf '{"traceEvents": [{"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": %s, "dur": %s}],\n "baseTimeNanoseconds": %s}\n' \
    "$1" "$2" "$base" >"$work/long.json"
  expect 0 "merge a slice of $2 us" -- "$TIDEMARK" export --format perfetto --merge "$work/long.json" \
    --force -o "$work/long.out.json" "$work/demo.tdm"
  $3 err "do not overlap in time"
done
echo '{"traceEvents": [' >"$work/cut.json"
expect 2 "merge into a cut trace" -- "$TIDEMARK" export --format perfetto --merge "$work/cut.json" \
  -o "$work/never.json" "$work/demo.tdm"
has err "not valid JSON"
[ "$(wc -l < "$work/err")" -eq 1 ] || fail "a bad --merge input says more than one line"
[ ! -e "$work/never.json" ] || fail "a failed merge left its output"
expect 2 "merge a missing trace" -- "$TIDEMARK" export --format perfetto --merge "$work/none.json" \
  -o "$work/never.json" "$work/demo.tdm"
has err "none.json"
mkdir "$work/adir"
expect 2 "merge into a folder" -- "$TIDEMARK" export --format perfetto --merge "$work/adir" \
  -o "$work/never.json" "$work/demo.tdm"
has err "--merge $work/adir: Is a directory"
[ "$(wc -l < "$work/err")" -eq 1 ] || fail "a missing --merge input says more than one line"

# ---- flamegraph and csv ---------------------------------------------------------------
expect 0 "export flamegraph" -- "$TIDEMARK" export --format flamegraph -o "$work/demo.folded" "$work/demo.tdm"
awk '!/^device 0;.* [0-9]+$/ { bad = 1; print "bad line: " $0 } END { exit bad }' \
  "$work/demo.folded" || fail "flamegraph lines are not 'path bytes'"
peak=$(python3 -c "import json;print(json.load(open('$work/demo.json'))['devices'][0]['peak_allocated'])" 2>/dev/null || true)
sum=$(awk '{ s += $NF } END { print s }' "$work/demo.folded")
[ -z "$peak" ] || [ "$sum" = "$peak" ] || fail "flamegraph sums to $sum, peak is $peak"
expect 0 "flamegraph --at end" -- "$TIDEMARK" export --format flamegraph --at end --by-category \
  -o - "$work/demo.tdm"
has out "device 0;parameter;"; has out "device 0;optimizer_state;"
expect 0 "export csv" -- "$TIDEMARK" export --format csv -o "$work/demo.csv" "$work/demo.tdm"
[ "$(head -n 1 "$work/demo.csv")" = "Thread,Time,Action,Pointer,Size,Stream" ] || fail "csv header"
awk -F, 'NR > 1 && !($1 ~ /^[0-9]+$/ && $2 ~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9][0-9][0-9][0-9][0-9][0-9]$/ &&
          ($3 == "allocate" || $3 == "free") && $4 ~ /^0x[0-9a-f]+$/ && $5 ~ /^[0-9]+$/) { bad = 1; print } END { exit bad }' \
  "$work/demo.csv" || fail "csv rows are not RMM log rows"

# ---- import: RMM log round trip, traces ---------------------------------------------------
expect 0 "import rmm" -- "$TIDEMARK" import -o "$work/rmm.tdm" "$work/demo.csv"
expect 0 "export csv again" -- "$TIDEMARK" export --format csv -o "$work/rmm.csv" "$work/rmm.tdm"
# same actions, pointers and sizes, in the same order (Thread and Time may differ)
cut -d, -f3-5 "$work/demo.csv" >"$work/a"; cut -d, -f3-5 "$work/rmm.csv" >"$work/b"
cmp -s "$work/a" "$work/b" || fail "RMM log round trip changed events"
expect 0 "summary of imported rmm" -- "$TIDEMARK" summary "$work/rmm.tdm"
has out "peak"

traces="$TDM_SOURCE_DIR/../shared/traces"
if [ -r "$traces/mlp.csv" ]; then
  for t in mlp transformer; do
    expect 0 "score $t" -- "$TIDEMARK" categories --trace "$traces/$t.csv" --score --min-score 90
    has out "overall agreement"
    score=$(sed -n 's/.*overall agreement: \([0-9.]*\)%.*/\1/p' "$work/out")
    echo "  $t: $score%"
    expect 0 "ids $t" -- "$TIDEMARK" categories --trace "$traces/$t.csv"
    [ "$(head -n 1 "$work/out")" = "id,category" ] || fail "$t: no id,category header"
    rows=$(grep -c '^alloc,' "$traces/$t.csv")
    [ "$(($(wc -l <"$work/out") - 1))" = "$rows" ] || fail "$t: not one line per allocation"
    grep -vqE '^(id,category|[0-9]+,(PARAMETER|OPTIMIZER_STATE|GRADIENT|ACTIVATION|INPUT|TEMPORARY|UNKNOWN))$' \
      "$work/out" && fail "$t: odd id,category line"
  done
  expect 3 "--min-score unmet" -- "$TIDEMARK" categories --trace "$traces/mlp.csv" --score --min-score 100
  expect 0 "import trace" -- "$TIDEMARK" import -o "$work/mlp.tdm" "$traces/mlp.csv"
  expect 0 "categories of imported trace" -- "$TIDEMARK" categories --samples 0 "$work/mlp.tdm"
  has out "parameter"; has out "optimizer_state"
else
  echo "SKIPPED: shared traces not found at $traces (CI keeps shared/ beside the repo)"
fi

finish "tidemark categories and the exports"
