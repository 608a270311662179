#!/usr/bin/env bash
# A run that ran out of device memory passes no gate: its peak is low
# because the allocation failed.  `tidemark gate` and `tidemark run` with
# any gate fail it (exit 3, the verdict names the request, the free memory,
# when and where) unless --allow-oom; a run without an OOM passes as
# before.  The summary's OOM line says what the runtime's line said:
# requested size, free memory, time, step and phase, site.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
# train_sim is linked with libtidemark.so: run records it without the
# preload (which a sanitizer build cannot load into it).
export TIDEMARK_PRELOAD=

TIDEMARK_CONF="dump=$work/oom.tdm" "$TRAIN_SIM" --steps 3 --batch 200000 --compute-us 0 \
  >"$work/oom.log" 2>&1
[ -s "$work/oom.tdm" ] || { fail "no snapshot of the OOM run"; cat "$work/oom.log"; finish "gate oom"; }
has oom.log "out of memory on sim0"
record "$work/ok.tdm" --steps 3 --compute-us 0

# gate: the peak is under the limit, the OOM fails it.
expect 3 "gate of an OOM run" -- "$TIDEMARK" gate --max-peak 20GiB "$work/oom.tdm"
has out "no-oom FAILED: out of memory: 1.53 GiB asked for, 1.39 GiB free"
has_re out "when +\+[0-9.]+ s from the recording's start \(event [0-9]+\), step 1, phase forward"
has_re out "train_sim\.c:[0-9]+"
has out "--allow-oom"
has out "gates: 1 passed, 1 failed"
expect 0 "gate --allow-oom of an OOM run" -- "$TIDEMARK" gate --max-peak 20GiB --allow-oom "$work/oom.tdm"
lacks out "FAIL"
has out "gates: 1 passed, 0 failed"
# Every gate, not only the peak.
expect 3 "gate --max-leak of an OOM run" -- "$TIDEMARK" gate --max-leak 20GiB "$work/oom.tdm"
has out "no-oom FAILED"
# JUnit and GitHub reports carry it too.
expect 3 "gate --junit --github of an OOM run" -- "$TIDEMARK" gate --max-peak 20GiB --github \
  --junit "$work/j.xml" "$work/oom.tdm"
has out "::error"
grep -q 'name="no-oom"' "$work/j.xml" || fail "junit has no no-oom testcase: $(cat "$work/j.xml")"
# No OOM: passes, as before.
expect 0 "gate of a run without OOM" -- "$TIDEMARK" gate --max-peak 20GiB "$work/ok.tdm"
lacks out "no-oom"
has out "gates: 1 passed, 0 failed"

# run: the same verdict.
expect 3 "run --max-peak of an OOM run" -- "$TIDEMARK" run -o "$work/r1" --max-peak 20GiB -- \
  "$TRAIN_SIM" --steps 3 --batch 200000 --compute-us 0
has err "no-oom FAILED: out of memory"
expect 1 "run --max-peak --allow-oom of an OOM run" -- "$TIDEMARK" run -o "$work/r2" \
  --max-peak 20GiB --allow-oom -- "$TRAIN_SIM" --steps 3 --batch 200000 --compute-us 0
lacks err "FAILED"

# summary: the OOM line says what happened.
expect 0 "summary of an OOM run" -- "$TIDEMARK" summary "$work/oom.tdm"
has out "OOMs           1 out-of-memory event in the history"
has_re out "1\.53 GiB asked for \(1638400000 B\), 1\.39 GiB free on the device"
has_re out "at +\+[0-9.]+ s \(event [0-9]+\), step 1, phase forward"
has_re out "site +forward_layer \(train_sim\.c:[0-9]+\)"

finish "gate oom"
