#!/usr/bin/env bash
# `tidemark top DIR` on the snapshot folder of a `tidemark run` that is
# running: the spill folder of that run (found by its note naming DIR)
# holds the command's spill file, and top shows the process; the run then
# ends 0 with its snapshot, as without top watching.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
# (tidemark run preloads its library: not in an ASan or TSan build)
skip_in_sanitizer_build

"$TIDEMARK" run -o "$work/snaps" -- "$TRAIN_SIM" --steps 300 --compute-us 1500 \
  >"$work/run.log" 2>&1 &
run_pid=$!
ok=0
for _ in $(seq 300); do
  if "$TIDEMARK" top --once "$work/snaps" >"$work/out" 2>"$work/err" &&
     grep -q "device 0" "$work/out"; then ok=1; break; fi
  sleep 0.05
done
[ "$ok" -eq 1 ] || fail "top never showed the run's process: $(cat "$work/err")"
has out "train_sim --steps 300"
has out "device 0 (sim0)"
has_re out "^pid [0-9]+ "
expect 0 "openmetrics of the run's folder" -- "$TIDEMARK" top --openmetrics "$work/snaps"
has out "tidemark_device_allocated_bytes{"
wait "$run_pid"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/run.log"; fail "tidemark run watched by top exited $rc"; }
ls "$work/snaps"/*.tdm >/dev/null 2>&1 || fail "the run wrote no snapshot"
expect 2 "top on the folder once the run has ended" -- "$TIDEMARK" top --once "$work/snaps"
has err "no spill file of a recording process"
finish "top DIR: a running tidemark run's processes"
