#!/usr/bin/env bash
# `tidemark run` interrupted: SIGINT to its whole process group (as a
# terminal's ^C sends it) and SIGTERM to tidemark alone (as a CI timeout
# may) both leave a readable snapshot of the history up to then, named on
# stderr, and the exit status is still the command's (killed by the
# signal: 128+N). A program reading the terminal still can.  The spill file
# each process kept (the history again, for a kill) goes with it: nothing
# is left at the spill files' default place ($TMPDIR here, /dev/shm when
# unset).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
export TIDEMARK_PRELOAD=
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
spills="$TMPDIR/tidemark-$(id -u)"

# start DIR: tidemark run of a long train_sim in a session of its own (so
# that its process group is its pid), in the background; sets $pid and
# returns once the program has been running for a moment.
start() {
  # A background job of a script ignores SIGINT: env puts it back.
  env --default-signal=INT,TERM setsid "$TIDEMARK" run -o "$1" -- "$TRAIN_SIM" --steps 100000 \
    >"$work/out" 2>"$work/err" &
  pid=$!
  local child=
  for _ in $(seq 200); do
    child=$(ps -o pid= --ppid "$pid" 2>/dev/null | tr -d ' ')
    [ -n "$child" ] && break
    sleep 0.05
  done
  [ -n "$child" ] || { fail "$1: the program did not start"; cat "$work/err"; return 1; }
  sleep 0.5   # some steps recorded
}

# stopped DIR RC SIGNAL_NUMBER NAME: tidemark ended with RC, its message names
# the one snapshot in DIR, and that snapshot reads.
stopped() {
  local dir=$1 want=$2 num=$3 name=$4 rc
  # Never hang: 20 s, then the whole session goes.
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$name: tidemark run still running 20 s after the signal"
    pkill -KILL -s "$pid"
  fi
  wait "$pid"
  rc=$?
  [ "$rc" -eq "$want" ] || { fail "$name: exit $rc, wanted $want"; sed 's/^/  stderr: /' "$work/err" | head -n 20; }
  has err "killed by signal $num"
  local snaps
  snaps=$(find "$dir" -maxdepth 1 -name '*.tdm')
  [ "$(printf '%s\n' "$snaps" | grep -c .)" -eq 1 ] || { fail "$name: one snapshot expected in $dir: $snaps"; return; }
  has err "tidemark run: $name: the history up to it is in $snaps"
  has err "tidemark run: 1 snapshot in $dir"
  "$TIDEMARK" summary "$snaps" >"$work/summary" 2>&1 || fail "$name: tidemark summary of $snaps failed"
  has summary "peak allocated"
  [ -d "$spills" ] || fail "$name: the program made no spill file in $spills (the test checks nothing)"
  local left
  left=$(find "$spills" -name '*.spill' 2>/dev/null)
  [ -z "$left" ] || fail "$name: spill files left: $left"
  lacks err "tidemark recover"
}

# ^C at a terminal: SIGINT to the whole process group.
if start "$work/i1"; then
  signal_until 20 INT "-$(ps -o pgid= "$pid" | tr -d ' ')" gone "$pid"
  stopped "$work/i1" 130 2 SIGINT
fi
# SIGTERM to tidemark alone.
if start "$work/i2"; then
  signal_until 20 TERM "$pid" gone "$pid"
  stopped "$work/i2" 143 15 SIGTERM
fi

# SIGTERM to tidemark alone, twice at once: timeout(1), Slurm and CI
# runners send the signal to the process they started, then to their own
# process group, which tidemark is in.  One request, not "stop waiting".
if start "$work/i3"; then
  kill -TERM "$pid"; kill -TERM "$pid"
  stopped "$work/i3" 143 15 SIGTERM
  lacks err "wrote no snapshot"
fi

# timeout(1) itself, with its default SIGTERM and with -s INT: the history
# up to the signal is kept, named, and no spill file stays.
for sig in TERM INT; do
  dir="$work/timeout-$sig"
  rm -f "$spills"/*.spill
  env --default-signal=INT,TERM timeout -s "$sig" 2 "$TIDEMARK" run -o "$dir" -- \
    "$TRAIN_SIM" --steps 100000 >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" -eq 124 ] || { fail "timeout -s $sig: exit $rc, wanted 124"; sed 's/^/  stderr: /' "$work/err" | head -n 20; }
  snaps=$(find "$dir" -maxdepth 1 -name '*.tdm' 2>/dev/null)
  [ "$(printf '%s\n' "$snaps" | grep -c .)" -eq 1 ] ||
    { fail "timeout -s $sig: one snapshot expected in $dir: $snaps"; sed 's/^/  stderr: /' "$work/err" | head -n 20; continue; }
  has err "tidemark run: SIG$sig: the history up to it is in $snaps"
  lacks err "wrote no snapshot"
  lacks err "tidemark recover"
  "$TIDEMARK" summary "$snaps" >"$work/summary" 2>&1 || fail "timeout -s $sig: summary of $snaps failed"
  has summary "peak allocated"
  left=$(find "$spills" -name '*.spill' 2>/dev/null)
  [ -z "$left" ] || fail "timeout -s $sig: spill files left: $left"
done

# The program still reads the terminal it runs in (the command gets it when
# it asks: tidemark keeps it in a process group of its own).
if command -v script >/dev/null; then
  printf 'hello\n' | timeout 20 script -qec \
    "\"$TIDEMARK\" run -o \"$work/t1\" -- sh -c 'read x; echo got:\$x'" /dev/null >"$work/out" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || fail "a command reading the terminal: exit $rc"
  has out "got:hello"
fi

finish "tidemark run interrupted"
