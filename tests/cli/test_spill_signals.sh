#!/usr/bin/env bash
# SIGINT and SIGTERM without `tidemark run`: a recorded program stopped by
# either, at their default action, writes its normal exit snapshot and
# still ends killed by the signal (128+N); a program with its own SIGTERM
# handler still runs it (and tidemark writes nothing in its place).  Also:
# the default spill place ($TMPDIR/tidemark-UID), and `tidemark run`
# naming the recover command when its program was killed.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM SPILL_CRASH_PROG
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
spills=$TMPDIR/tidemark-$(id -u)

# The program raises the signal itself.
for how in term int; do
  TIDEMARK_CONF="dump=$work/$how.tdm" "$SPILL_CRASH_PROG" $how >"$work/$how.log" 2>&1
  rc=$?
  want=$([ $how = term ] && echo 143 || echo 130)
  [ "$rc" -eq "$want" ] || fail "$how: exit $rc, wanted $want"
  [ -s "$work/$how.tdm" ] || { fail "$how: no snapshot"; cat "$work/$how.log"; continue; }
  has "$how.log" "wrote snapshot to $work/$how.tdm"
  expect 0 "summary after $how" -- "$TIDEMARK" summary "$work/$how.tdm"
  has out "live at end"
  lacks out "recovered from spill"
  [ -z "$(ls "$spills" 2>/dev/null)" ] || fail "$how: spill file left: $(ls "$spills")"
done

# Sent from outside to a running program (a shell's background job
# ignores SIGINT: env puts the default back).
for sig in TERM INT; do
  TIDEMARK_CONF="dump=$work/tidemark-%p.tdm" env --default-signal=INT,TERM \
    "$TRAIN_SIM" --steps 100000 --compute-us 200 \
    >"$work/t$sig.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -n "$(ls "$spills" 2>/dev/null)" ] && break; sleep 0.02; done
  sleep 0.3
  signal_until 40 $sig $pid test -e "$work/tidemark-$pid.tdm"
  wait $pid
  rc=$?
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  [ "$rc" -eq "$want" ] || fail "SIG$sig from outside: exit $rc, wanted $want"
  snap=$(ls "$work"/tidemark-$pid.tdm 2>/dev/null)
  [ -n "$snap" ] || { fail "SIG$sig from outside: no snapshot"; cat "$work/t$sig.log"; continue; }
  expect 0 "summary after SIG$sig" -- "$TIDEMARK" summary "$snap"
  has out "peak allocated"
  rm -f "$snap"
done

# SIGINT that stops the main thread inside tidemark (allocating and
# freeing in a loop: it likely holds the device's lock, which the snapshot
# needs): the thread is let go after at most 2 s, the snapshot is written,
# and the signal still ends the program.
for i in 1 2 3 4 5; do
  start=$(date +%s%N)
  TIDEMARK_CONF="dump=$work/busy$i.tdm" timeout 15 "$SPILL_CRASH_PROG" int-busy >"$work/busy.log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  [ "$rc" -eq 130 ] || fail "SIGINT inside tidemark (run $i): exit $rc after $ms ms, wanted 130"
  [ -s "$work/busy$i.tdm" ] || fail "SIGINT inside tidemark (run $i): no snapshot after $ms ms"
  [ "$ms" -lt 10000 ] || fail "SIGINT inside tidemark (run $i): took $ms ms"
done

# Its own handler (installed after tidemark loaded) runs, and is the one
# that decides: exit 42, no snapshot from tidemark, the spill kept.
TIDEMARK_CONF="dump=$work/own.tdm" "$SPILL_CRASH_PROG" handler-term >"$work/own.out" 2>&1
rc=$?
[ "$rc" -eq 42 ] || fail "own handler: exit $rc, wanted 42"
has own.out "own SIGTERM handler ran"
[ ! -e "$work/own.tdm" ] || fail "own handler: tidemark wrote a snapshot"
ls "$spills"/own.*.spill >/dev/null 2>&1 || fail "own handler: no spill at the default place"

# stop_signals=off: the default action, no snapshot.
TIDEMARK_CONF="dump=$work/off.tdm,stop_signals=off" "$SPILL_CRASH_PROG" term >/dev/null 2>&1
rc=$?
[ "$rc" -eq 143 ] || fail "stop_signals=off: exit $rc, wanted 143"
[ ! -e "$work/off.tdm" ] || fail "stop_signals=off: a snapshot was written"

# tidemark run: its program killed by SIGKILL.  run recovers the history
# its spill file holds into -o itself (no `recover` command left to the
# user), says where, and removes the spill; a job without a terminal is
# told at the start where snapshots and spills go.
unset TIDEMARK_CONF LD_PRELOAD
export TIDEMARK_PRELOAD=  # train_sim records through the library it links
"$TIDEMARK" run -o "$work/run" -- "$TRAIN_SIM" --steps 100000 --compute-us 200 \
  >"$work/run.out" 2>"$work/run.err" &
rpid=$!
child= spill=
for _ in $(seq 200); do
  child=$(ps -o pid= --ppid "$rpid" 2>/dev/null | tr -d ' ')
  [ -n "$child" ] && spill=$(find "$spills" -name "tidemark-$(hostname)-$child.spill" 2>/dev/null) &&
    [ -n "$spill" ] && break
  sleep 0.05
done
[ -n "$spill" ] || fail "run's program made no spill file under $spills"
sleep 0.3
kill -KILL "$child" 2>/dev/null
wait $rpid
rec="$work/run/tidemark-$(hostname)-$child.tdm"
has run.err "killed by signal 9"
has run.err "tidemark run: snapshots go into $work/run; until each process ends, its history spills to $spills/run-"
has run.err "tidemark run: process $child ended without writing its snapshot (killed, or crashed); its history, recovered from its spill file, is in $rec"
has run.err "tidemark run: 1 snapshot in $work/run"
lacks run.err "tidemark recover"
[ -s "$rec" ] || fail "no recovered snapshot in -o: $(ls "$work/run")"
[ ! -e "$spill" ] || fail "the killed program's spill file stays: $spill"
[ -z "$(find "$spills" -mindepth 1 -name 'run-*' 2>/dev/null)" ] || fail "run's spill folder left behind"
expect 0 "summary of the recovered snapshot" -- "$TIDEMARK" summary "$rec"
has out "recovered from spill; partial"
has out "peak allocated"
# A program deeper in the command (a job script's), killed while the
# script goes on and exits 0: its history is recovered all the same.
expect 0 "a killed program inside a script" -- "$TIDEMARK" run -o "$work/deep" -- sh -c \
  "'$TRAIN_SIM' --steps 100000 --compute-us 200 >/dev/null & p=\$!; sleep 1; kill -KILL \$p; wait \$p; exit 0"
has err "ended without writing its snapshot (killed, or crashed); its history, recovered from its spill file, is in $work/deep/tidemark-$(hostname)-"
has err "tidemark run: 1 snapshot in $work/deep"
lacks err "tidemark recover"
[ -z "$(find "$spills" -path '*/run-*' 2>/dev/null)" ] || fail "spills left: $(find "$spills" -path '*/run-*')"

# tidemark run itself killed (a batch system's SIGKILL): its command dies
# with it, and no one is left to recover.  The next run does, into the
# first one's folder, and says so.
"$TIDEMARK" run -o "$work/lost" -- "$TRAIN_SIM" --steps 100000 --compute-us 200 \
  >/dev/null 2>"$work/lost.err" &
rpid=$!
child= spill=
for _ in $(seq 200); do
  child=$(ps -o pid= --ppid "$rpid" 2>/dev/null | tr -d ' ')
  [ -n "$child" ] && spill=$(find "$spills" -name "tidemark-$(hostname)-$child.spill" 2>/dev/null) &&
    [ -n "$spill" ] && break
  sleep 0.05
done
[ -n "$spill" ] || fail "the run to be killed made no spill under $spills"
sleep 0.3
kill -KILL "$rpid"
wait "$rpid" 2>/dev/null
for _ in $(seq 100); do gone "$child" && break; sleep 0.05; done
gone "$child" || fail "the command outlived its killed tidemark run"
[ -e "$spill" ] || fail "the killed run's spill is gone before any recovery"
expect 0 "the next run" -- "$TIDEMARK" run -o "$work/next" -- true
has err "an earlier tidemark run (pid $rpid) ended before recovering what its processes left; recovering it into $work/lost"
has err "its history, recovered from its spill file, is in $work/lost/tidemark-$(hostname)-$child.tdm"
[ -s "$work/lost/tidemark-$(hostname)-$child.tdm" ] || fail "no recovered snapshot in $work/lost"
[ ! -e "$spill" ] || fail "the recovered spill stays: $spill"
[ -z "$(find "$spills" -path '*/run-*' 2>/dev/null)" ] || fail "spill folders left: $(find "$spills" -path '*/run-*')"

finish "SIGINT/SIGTERM snapshots; the program's own handler kept; run recovers a killed program"
