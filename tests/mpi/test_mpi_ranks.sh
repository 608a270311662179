#!/usr/bin/env bash
# tests/mpi/test_mpi_ranks.sh: many ranks under a real MPI.  Runs
# examples/mpi_ranks ($MPI_RANKS) with `mpirun -np 4`, recorded through
# TIDEMARK_CONF alone (dump=DIR/%h-r%r.tdm), and checks:
#   - four files, one per rank, named by host and rank;
#   - each header's rank, world size and local rank;
#   - `tidemark summary DIR`: one row per rank, whose peak and live-at-end
#     bytes equal the program's sizes exactly (rank r holds r + 1 shards of
#     64 MiB, and peaks 5 activations of 16 MiB above them), and the spread
#     (max on rank 3, min on rank 0, the mean);
#   - `tidemark gate --max-peak` between rank 2's and rank 3's peaks fails
#     on rank 3 alone, naming it (text and JUnit); above every peak it passes;
#   - `ranks=0,2-3` records those ranks only, the other runs untouched, and
#     `ranks=local:0` records one rank per node.
# Exit 77 (SKIPPED) without mpirun or without the example (no MPI found).
set -uo pipefail
: "${TIDEMARK:?}"
skip() { echo "SKIP: $*"; exit 77; }
[ -n "${MPIRUN:-}" ] && [ -x "$MPIRUN" ] || skip "no mpirun/mpiexec found"
[ -n "${MPI_RANKS:-}" ] && [ -x "$MPI_RANKS" ] || skip "examples/mpi_ranks not built (no MPI C library)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Open MPI in containers and CI: no cross-memory attach (ptrace is often
# denied), more ranks than cores (CI has 2), no ssh needed on one node.
flags=()
if "$MPIRUN" --version 2>&1 | grep -qiE "Open MPI|OpenRTE|open-mpi"; then
  flags=(--oversubscribe --allow-run-as-root)
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_base_warn_component_unused=0
  command -v ssh >/dev/null 2>&1 || command -v rsh >/dev/null 2>&1 ||
    export OMPI_MCA_plm_rsh_agent=false
fi
# mpirun_job CONF OUT: runs the example on 4 ranks with TIDEMARK_CONF=CONF,
# output in OUT; never longer than 2 minutes.  In an ASan build, leak
# checking is off for the MPI program only: Open MPI leaks at exit from
# components it has already unloaded, which no suppression can name (the
# tidemark commands below are still checked).
mpirun_job() {
  local conf=$1 out=$2
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" TIDEMARK_CONF=$conf \
    timeout -k 10 120 "$MPIRUN" -np 4 "${flags[@]}" -x TIDEMARK_CONF "$MPI_RANKS" >"$out" 2>&1
}

host=$(hostname)
MiB=1048576
peak_of() { echo $(((($1 + 1) * 64 + 5 * 16) * MiB)); }  # rank -> bytes
params_of() { echo $((($1 + 1) * 64 * MiB)); }

# ---- four ranks, four files ---------------------------------------------------
if ! mpirun_job "dump=$work/out/%h-r%r.tdm" "$work/run.log"; then
  cat "$work/run.log"
  fail "mpirun -np 4 failed (exit status above)"
  echo "$fails check(s) failed"
  exit 1
fi
n=$(find "$work/out" -name '*.tdm' | wc -l)
[ "$n" -eq 4 ] || fail "$n snapshot files, wanted 4: $(ls "$work/out")"
for r in 0 1 2 3; do
  f="$work/out/$host-r$r.tdm"
  [ -f "$f" ] || { fail "no file $f"; continue; }
  grep -q "rank $r of 4: peak allocated $(peak_of $r) B" "$work/run.log" ||
    fail "rank $r's own stats disagree with the sizes: $(grep "rank $r " "$work/run.log")"
  "$TIDEMARK" summary "$f" >"$work/one.txt" 2>&1 || fail "summary of $f failed"
  # One host: the local rank is the rank.
  grep -q "^  process    pid [0-9]* on $host, rank $r of 4 (local $r)$" "$work/one.txt" ||
    fail "header of $f: $(grep '^  process' "$work/one.txt")"
done

# ---- the summary: a row per rank, exact bytes, the spread ----------------------
"$TIDEMARK" summary --bytes "$work/out" >"$work/sum.txt" 2>"$work/sum.err" ||
  fail "summary --bytes of the directory: exit $?"
grep -q "^tidemark summary of 4 snapshots: 4 ranks on 1 host$" "$work/sum.txt" ||
  fail "summary heading: $(head -n 1 "$work/sum.txt")"
grep -q "^  ranks      0-3 of world size 4$" "$work/sum.txt" || fail "summary lacks the rank list"
grep -q "missing" "$work/sum.txt" && fail "summary reports missing ranks"
# Rows: rank host dev peak <when...> step phase live dropped file.
rows=$(awk -v h="$host" '$1 ~ /^[0-9]+$/ && $2 == h { print $1, $4, $(NF-2), $(NF-1), $NF }' \
  "$work/sum.txt")
[ "$(echo "$rows" | wc -l)" -eq 4 ] || fail "summary has $(echo "$rows" | wc -l) rank rows: $rows"
i=0
while read -r rank peak live dropped file; do
  [ "$rank" = "$i" ] || fail "row $i is rank $rank (rows out of rank order)"
  [ "$peak" = "$(peak_of "$rank")" ] || fail "rank $rank peak $peak, wanted $(peak_of "$rank")"
  [ "$live" = "$(params_of "$rank")" ] || fail "rank $rank live at end $live, wanted $(params_of "$rank")"
  [ "$dropped" = 0 ] || fail "rank $rank dropped $dropped events"
  [ "$file" = "$work/out/$host-r$rank.tdm" ] || fail "rank $rank row names $file"
  i=$((i + 1))
done <<<"$rows"
grep -qE "^ +3 +$host +0 +$(peak_of 3) .* backward " "$work/sum.txt" ||
  fail "rank 3's peak is not in backward at step 1"
grep -qE "^  max +$(peak_of 3) +rank 3 on $host, device 0 \(sim0\), at \+[0-9.]+ s, step 1, phase backward$" \
  "$work/sum.txt" || fail "spread max line: $(grep '^  max' "$work/sum.txt")"
grep -qE "^  min +$(peak_of 0) +rank 0 on $host$" "$work/sum.txt" ||
  fail "spread min line: $(grep '^  min' "$work/sum.txt")"
mean=$(((($(peak_of 0) + $(peak_of 1) + $(peak_of 2) + $(peak_of 3)) / 4)))
grep -qE "^  mean +$mean; max is 2\.33x min, $(($(peak_of 3) - $(peak_of 0))) more$" "$work/sum.txt" ||
  fail "spread mean line: $(grep '^  mean' "$work/sum.txt")"
# The site that set the max: rank 3's four parameter shards.
grep -qE "^  top site +$(params_of 3) \(76\.2% of the max\) in load_shards " "$work/sum.txt" ||
  fail "top site line: $(grep '^  top site' "$work/sum.txt")"
grep -qE "^ +main \(mpi_ranks\.c:[0-9]+\)$" "$work/sum.txt" ||
  fail "top site's stack lacks load_shards' caller main"
# In people's units: 64 (r + 1) + 80 MiB.
"$TIDEMARK" summary "$work/out"/*.tdm >"$work/human.txt" 2>&1 || fail "summary of the files failed"
for r in 0 1 2 3; do
  grep -qE "^ +$r +$host +0 +$(((r + 1) * 64 + 80))\.00 MiB " "$work/human.txt" ||
    fail "rank $r row in MiB: $(grep -E "^ +$r +$host" "$work/human.txt")"
done
cmp -s <(grep -v '^  times' "$work/human.txt") \
  <("$TIDEMARK" summary "$work/out" 2>&1 | grep -v '^  times') ||
  fail "summary of the directory differs from summary of its files"

# ---- gates across ranks ----------------------------------------------------------
"$TIDEMARK" gate --max-peak 300MiB --junit "$work/gate.xml" "$work/out" >"$work/gate.txt" 2>&1
rc=$?
[ "$rc" -eq 3 ] || fail "gate --max-peak 300MiB: exit $rc, wanted 3"
# The verdict leads and names rank 3; the three passing ranks are counted.
head -n 1 "$work/gate.txt" | grep -qx "max-peak FAILED: peak 336.00 MiB > limit 300.00 MiB (36.00 MiB, 12.0% over)" ||
  fail "gate verdict line: $(head -n 1 "$work/gate.txt")"
sed -n 2p "$work/gate.txt" | grep -qx "  on         $work/out/$host-r3.tdm (rank 3 on $host), device 0 (sim0)" ||
  fail "gate verdict does not name rank 3: $(sed -n 2p "$work/gate.txt")"
grep -q "^  256.00 MiB  76.2%      x4  load_shards (mpi_ranks.c:[0-9]*)$" "$work/gate.txt" ||
  fail "gate verdict lacks rank 3's parameter shards as top site"
tail -n 1 "$work/gate.txt" | grep -qx "gates: 3 passed, 1 failed" ||
  fail "gate count line: $(tail -n 1 "$work/gate.txt")"
# Every gate passes under rank 3's peak exactly: one line per rank, in rank order.
"$TIDEMARK" gate --max-peak 336MiB "$work/out" >"$work/gate-pass.txt" 2>&1 ||
  fail "gate --max-peak 336MiB (rank 3's peak exactly): exit $?, wanted 0"
for r in 0 1 2 3; do
  grep -q "^PASS  max-peak     $work/out/$host-r$r.tdm, rank $r on $host, device 0" "$work/gate-pass.txt" ||
    fail "gate: no PASS line for rank $r"
done
[ "$(grep '^PASS' "$work/gate-pass.txt" | sed 's/.*rank \([0-9]*\) on.*/\1/' | tr -d '\n')" = 0123 ] ||
  fail "gate lines are not in rank order"
# The JUnit report has a testcase per rank, rank 3's the failure.
[ "$(grep -o 'classname="tidemark\.[^"]*-r[0-9]"' "$work/gate.xml" | sed 's/.*-r//; s/"//' | tr -d '\n')" = 0123 ] ||
  fail "JUnit testcases are not one per rank in rank order"
grep -q "message=\"rank 3 on $host, device 0: peak 336.00 MiB &gt; limit" "$work/gate.xml" ||
  fail "JUnit failure does not name rank 3"

# ---- one merged Perfetto trace: a process per rank, one time axis -----------------
"$TIDEMARK" export --format perfetto "$work/out" -o "$work/all.json" >/dev/null 2>"$work/merge.err" ||
  fail "merged perfetto export failed: $(cat "$work/merge.err")"
python3 - "$work/all.json" "$host" <<'PY' || fail "merged perfetto trace"
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
names = {e["pid"]: e["args"]["name"] for e in events
         if e.get("ph") == "M" and e.get("name") == "process_name"}
want = {r + 1: "rank %d (%s)" % (r, sys.argv[2]) for r in range(4)}
assert names == want, "process names %r, wanted %r" % (names, want)
pids = {e["pid"] for e in events if e.get("ph") == "C"}
assert pids == set(want), "counter tracks for pids %r" % (pids,)
ts = [e["ts"] for e in events if e.get("ph") == "C"]
# one time axis: absolute microseconds since the epoch, all within the job
assert min(ts) > 1.6e15 and max(ts) - min(ts) < 600e6, (min(ts), max(ts))
PY

# ---- ranks=: only some ranks record ------------------------------------------------
if mpirun_job "dump=$work/some/%h-r%r.tdm,ranks=0,2-3" "$work/some.log"; then
  ls "$work/some" >"$work/some.ls" 2>&1
  [ "$(tr '\n' ' ' <"$work/some.ls")" = "$host-r0.tdm $host-r2.tdm $host-r3.tdm " ] ||
    fail "ranks=0,2-3 wrote: $(tr '\n' ' ' <"$work/some.ls")"
  grep -q "rank 1 of 4: peak allocated $(peak_of 1) B (expected $(peak_of 1) B), recording off" \
    "$work/some.log" || fail "rank 1 did not run untouched: $(grep 'rank 1 ' "$work/some.log")"
  "$TIDEMARK" summary "$work/some" >"$work/some.txt" 2>&1
  grep -q "^  missing    no file for rank 1$" "$work/some.txt" ||
    fail "summary does not name the rank left out"
else
  cat "$work/some.log"
  fail "mpirun with ranks=0,2-3 failed"
fi
if mpirun_job "dump=$work/node/%h-r%r.tdm,ranks=local:0" "$work/node.log"; then
  [ "$(ls "$work/node" 2>&1)" = "$host-r0.tdm" ] ||
    fail "ranks=local:0 on one host wrote: $(ls "$work/node" 2>&1 | tr '\n' ' ')"
else
  cat "$work/node.log"
  fail "mpirun with ranks=local:0 failed"
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok: 4 MPI ranks recorded, summarized, merged and gated"
