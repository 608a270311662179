#!/usr/bin/env bash
# A spill file exists only for a process that recorded something: a
# preloaded process that never uses device memory (a shell, a make, a
# helper a launcher runs), whether it exits, _exits or is killed, leaves
# no file at the spill's default place; neither does one whose recording
# failed to start.  A process that recorded and then died leaves its
# spill, as before (the history for `tidemark recover`).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK SPILL_CRASH_PROG TDM_BINARY_DIR
preload=$TDM_BINARY_DIR/libtidemark_preload.so
[ -f "$preload" ] || { fail "no $preload"; finish "spill lazy"; }
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
spills=$TMPDIR/tidemark-$(id -u)
cd "$work" || exit 1

left() { find "$TMPDIR" -name '*.spill' 2>/dev/null; }
none_left() {
  local l
  l=$(left)
  [ -z "$l" ] || fail "$1: $(printf "%s\n" "$l" | grep -c .) spill file(s) left: $(printf "%s\n" "$l" | head -n 3 | tr "\n" " ")"
  rm -f "$spills"/*.spill
}

# (A sanitizer build's preload library cannot load into sh, python, sleep.)
if [ -z "${TDM_SANITIZE:-}" ]; then
# 20 shells that end through _exit (dash does), under the preload.
for _ in $(seq 20); do
  LD_PRELOAD=$preload TIDEMARK_CONF="dump=$work/sh.tdm" sh -c true
done
none_left "20 x sh -c true"

if command -v python3 >/dev/null; then
  LD_PRELOAD=$preload TIDEMARK_CONF="dump=$work/py.tdm" python3 -c 'import os; os._exit(0)'
  none_left "python os._exit"
fi

# Killed before it used device memory.
LD_PRELOAD=$preload TIDEMARK_CONF="dump=$work/sleep.tdm" sleep 30 &
pid=$!
sleep 0.3
kill -KILL "$pid"; wait "$pid" 2>/dev/null
none_left "sleep killed"

# tidemark run of a shell that touches no device memory.
"$TIDEMARK" run -o "$work/run-sh" -- sh -c 'true' >"$work/out" 2>"$work/err"
none_left "tidemark run -- sh -c true"
else
  echo "note: sanitizer build: the checks under the preload are skipped"
fi

# A recording that cannot start: one line, no spill.
TIDEMARK_CONF="dump=$work/big.tdm,max_entries=1000000000000" "$SPILL_CRASH_PROG" exit \
  >"$work/big.log" 2>&1
has big.log "cannot start recording"
none_left "max_entries=10^12"

# The positive case: a process that recorded, then crashed, leaves it, and
# it recovers.
TIDEMARK_CONF="dump=$work/segv.tdm" "$SPILL_CRASH_PROG" segv >"$work/segv.log" 2>&1
spill=$(left)
[ "$(printf '%s\n' "$spill" | grep -c .)" -eq 1 ] || fail "segv: one spill file expected: $spill"
if [ -n "$spill" ]; then
  expect 0 "recover after segv" -- "$TIDEMARK" recover "$spill" -o "$work/rec.tdm"
  expect 0 "summary of the recovery" -- "$TIDEMARK" summary "$work/rec.tdm"
  has out "recovered from spill"
fi

finish "spill lazy"
