#!/usr/bin/env bash
# Files named without %p, shared by several processes.
#  - spill=PATH: the second process does not replace the first's spill
#    file (it takes PATH.PID beside it and says so), and its normal exit
#    does not remove the first's; the first's still recovers after a
#    kill -9.  A stale file at PATH (its process gone) is replaced.
#  - dump=PATH: no empty "claim" file ever stands at PATH: whatever is
#    there the moment it appears is a whole snapshot, in file_mode's
#    permissions whatever the umask, even when the process is killed
#    right then.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM SPILL_CRASH_PROG
cd "$work" || exit 1
shared=$work/shared.spill

# A: long-running, records into $shared.
TIDEMARK_CONF="dump=$work/a-%p.tdm,spill=$shared" "$TRAIN_SIM" --steps 100000 \
  --compute-us 200 >"$work/a.log" 2>&1 &
a=$!
for _ in $(seq 200); do [ -e "$shared" ] && break; sleep 0.02; done
[ -e "$shared" ] || { fail "A made no $shared"; kill -KILL $a; finish "spill shared path"; }
ino=$(stat -c %i "$shared")

# B: same spill path, records, exits normally.
TIDEMARK_CONF="dump=$work/b.tdm,spill=$shared" "$SPILL_CRASH_PROG" exit >"$work/b.log" 2>&1 ||
  fail "B failed: $(cat "$work/b.log")"
[ -e "$shared" ] || fail "B's normal exit removed A's spill file $shared"
[ -e "$shared" ] && [ "$(stat -c %i "$shared")" = "$ino" ] ||
  fail "B replaced A's spill file $shared"
has b.log "spill file $shared belongs to a running process; this one's is $work/shared."
[ -s "$work/b.tdm" ] || fail "B wrote no snapshot"
[ -z "$(find "$work" -maxdepth 1 -name 'shared.*.spill')" ] ||
  fail "B's own spill stays after its normal exit: $(find "$work" -maxdepth 1 -name 'shared.*.spill')"

# C: same path, killed after it recorded: its spill stays beside A's.
TIDEMARK_CONF="dump=$work/c.tdm,spill=$shared" "$SPILL_CRASH_PROG" segv >"$work/c.log" 2>&1
c_spill=$(find "$work" -maxdepth 1 -name 'shared.*.spill')
[ "$(printf '%s\n' "$c_spill" | grep -c .)" -eq 1 ] || fail "C (killed) left no spill of its own: '$c_spill'"
[ "$(stat -c %i "$shared" 2>/dev/null)" = "$ino" ] || fail "C replaced A's spill file"

sleep 0.3
kill -KILL $a
wait $a 2>/dev/null
[ -e "$shared" ] || fail "A's spill file is gone after kill -9"
expect 0 "recover A's spill" -- "$TIDEMARK" recover "$shared" -o "$work/a-rec.tdm"
expect 0 "summary of A's recovery" -- "$TIDEMARK" summary "$work/a-rec.tdm"
has out "train_sim"

# D: the same path again, A gone: the stale file is replaced, no note.
TIDEMARK_CONF="dump=$work/d.tdm,spill=$shared" "$SPILL_CRASH_PROG" segv >"$work/d.log" 2>&1
lacks d.log "belongs to a running process"
expect 0 "recover D's spill" -- "$TIDEMARK" recover "$shared" -o "$work/d-rec.tdm"
expect 0 "summary of D's recovery" -- "$TIDEMARK" summary "$work/d-rec.tdm"
has out "spill_crash_prog"

# dump=PATH without %p, umask 000: killed the moment the name appears
# (looked for every millisecond: `read -t` on a pipe that never speaks
# waits without a process, where a loop of its own took a core from the
# program it waits for, 40 s of a loaded suite).
exec {nap}<> <(:)
for try in 1 2 3; do
  rm -f "$work/nopid.tdm"
  (umask 000; TIDEMARK_CONF="dump=$work/nopid.tdm" exec "$TRAIN_SIM" --steps 3000 --compute-us 0 \
    >"$work/n.log" 2>&1) &
  n=$!
  while kill -0 $n 2>/dev/null && [ ! -e "$work/nopid.tdm" ]; do read -rt 0.001 -u "$nap"; done
  kill -KILL $n 2>/dev/null
  wait $n 2>/dev/null
  [ -e "$work/nopid.tdm" ] || { fail "try $try: no $work/nopid.tdm"; continue; }
  mode=$(stat -c %a "$work/nopid.tdm")
  [ "$mode" = 600 ] || fail "try $try: nopid.tdm has mode $mode under umask 000, wanted 600"
  "$TIDEMARK" summary "$work/nopid.tdm" >"$work/out" 2>&1 ||
    fail "try $try: what stands at nopid.tdm after the kill is no snapshot ($(stat -c %s "$work/nopid.tdm") bytes): $(head -c 200 "$work/out")"
done

finish "spill shared path"
