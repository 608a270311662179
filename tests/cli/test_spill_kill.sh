#!/usr/bin/env bash
# Kill-safe history: train_sim ($TRAIN_SIM) killed by SIGKILL at 50 random
# points leaves a spill file each time, and `tidemark recover` makes a
# snapshot of it whose events are the first K events of a full run of the
# same (deterministic) program: the same ordered (action, size) pairs in
# `tidemark export --format csv`.  Also: the spill file is removed after a
# normal exit's snapshot, and spill=off makes none.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

steps=40
args=(--steps $steps --compute-us 1000)

# The full run; its spill file is gone once the exit snapshot is written.
TIDEMARK_CONF="dump=$work/full.tdm,spill=$work/full.spill" "$TRAIN_SIM" "${args[@]}" \
  >"$work/full.log" 2>&1 || { cat "$work/full.log"; fail "full run failed"; exit 1; }
[ -s "$work/full.tdm" ] || { fail "full run wrote no snapshot"; exit 1; }
[ -e "$work/full.tdm" ]
[ ! -e "$work/full.spill" ] || fail "spill file left after the exit snapshot"
expect 0 "export full" -- "$TIDEMARK" export --format csv -o "$work/full.csv" "$work/full.tdm"
cut -d, -f3,5 "$work/full.csv" | tail -n +2 >"$work/full.seq"
total=$(wc -l <"$work/full.seq")
[ "$total" -gt 100 ] || fail "full run has only $total alloc/free rows"

# spill=off: no file, no line.
TIDEMARK_CONF="dump=$work/off.tdm,spill=off" "$TRAIN_SIM" --steps 1 --compute-us 0 \
  >"$work/off.log" 2>&1 || fail "spill=off run failed"
lacks off.log "spills to"

# One killed run: waits for its spill file, sleeps a random 0-0.45 s, kills.
kill_one() {
  local i=$1
  TIDEMARK_CONF="dump=$work/k$i.tdm,spill=$work/k$i.spill" "$TRAIN_SIM" "${args[@]}" \
    >/dev/null 2>&1 &
  local pid=$!
  # Until the file is whole (its signature is written last).
  for _ in $(seq 500); do
    [ "$(head -c 8 "$work/k$i.spill" 2>/dev/null)" = TDMSPILL ] && break
    sleep 0.01
  done
  sleep "0.$(printf '%02d' $((RANDOM % 45)))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo $? >"$work/k$i.rc"
}

kills=50 killed=0 partial=0
for round in 0 1 2 3 4; do
  for j in 0 1 2 3 4 5 6 7 8 9; do kill_one $((round * 10 + j)) & done
  wait
done
for i in $(seq 0 $((kills - 1))); do
  rc=$(cat "$work/k$i.rc")
  if [ "$rc" != 137 ]; then
    # Finished before the kill: a normal run, its spill removed.
    [ ! -e "$work/k$i.spill" ] || fail "run $i ended ($rc) and left its spill file"
    continue
  fi
  killed=$((killed + 1))
  [ -e "$work/k$i.spill" ] || { fail "run $i killed but no spill file"; continue; }
  [ ! -e "$work/k$i.tdm" ] || fail "run $i killed yet wrote a snapshot"
  expect 0 "recover run $i" -- "$TIDEMARK" recover "$work/k$i.spill" -o "$work/r$i.tdm"
  expect 0 "export run $i" -- "$TIDEMARK" export --format csv -o "$work/r$i.csv" "$work/r$i.tdm"
  cut -d, -f3,5 "$work/r$i.csv" | tail -n +2 >"$work/r$i.seq"
  k=$(wc -l <"$work/r$i.seq")
  head -n "$k" "$work/full.seq" | cmp -s - "$work/r$i.seq" ||
    { fail "run $i: its $k events are not the first $k of the full run"; diff <(head -n "$k" "$work/full.seq") "$work/r$i.seq" | head -5; }
  [ "$k" -lt "$total" ] && partial=$((partial + 1))
done
echo "killed $killed of $kills runs; $partial recovered a strict prefix"
[ "$killed" -ge 40 ] || fail "only $killed of $kills runs were killed mid-run"
[ "$partial" -ge 20 ] || fail "only $partial runs were killed before their last event"

# The recovered snapshot says what it is, and names the program's code
# (the run recovered with the most events: one killed before its first
# allocation has no site to show).
i=$(for i in $(seq 0 $((kills - 1))); do
      [ -e "$work/r$i.seq" ] && echo "$(wc -l <"$work/r$i.seq") $i"
    done | sort -n | tail -n 1 | cut -d' ' -f2)
expect 0 "summary of a recovered snapshot" -- "$TIDEMARK" summary "$work/r$i.tdm"
has out "recovered from spill; partial; last event at"
has out "train_sim.c"
# The allocator it ran with (train_sim serves from tidemark's cache), as the
# full run's snapshot says: the spill header learns it when the allocator
# starts, after the file is opened.
has out "; allocator cache"
# Its stacks (and phases) are the ones the full run's dump wrote, frame for frame (the
# same symbolizer: inlined functions as frames of their own, the same
# names and lines): each stack of the recovered snapshot is one of the
# full run's.
expect 0 "json of the full run" -- "$TIDEMARK" export --format json -o "$work/full.json" "$work/full.tdm"
expect 0 "json of run $i" -- "$TIDEMARK" export --format json -o "$work/r$i.json" "$work/r$i.tdm"
python3 - "$work/full.json" "$work/r$i.json" >"$work/stacks.log" 2>&1 <<'PY' || fail "recovered stacks: $(cat "$work/stacks.log")"
import json, sys
def stacks(path):
    d = json.load(open(path))
    fr = [(f["function"], f["file"], f["line"]) for f in d["frames"]]
    return {tuple(fr[i] for i in s) for s in d["stacks"] if s}
full, rec = stacks(sys.argv[1]), stacks(sys.argv[2])
odd = rec - full
if not rec or odd:
    sys.exit("%d of %d recovered stacks are no stack of the full run, e.g. %s"
             % (len(odd), len(rec), sorted(odd)[:1]))
# Its phases are named as the program named them (the spill file keeps
# the names), a prefix of the full run's.
pf, pr = json.load(open(sys.argv[1]))["phases"], json.load(open(sys.argv[2]))["phases"]
if len(pr) < 3 or pr != pf[:len(pr)]:
    sys.exit("recovered phases %s are not a prefix of the full run's %s" % (pr, pf))
PY
finish "SIGKILL at $kills points: recovered histories are prefixes of the full run"
