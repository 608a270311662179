#!/usr/bin/env bash
# TIDEMARK_CONF=hide=REGEX: recorded in the snapshot's config text and
# applied by every command that shows stacks, as --hide is: train_sim's
# sites with optimizer_step hidden are named by its caller (train), and a
# bad expression is refused when the program starts (one line, recording
# off, the program still runs).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/plain.tdm" --steps 2 --compute-us 0
record "$work/hidden.tdm,hide=^optimizer_step$" --steps 2 --compute-us 0
expect 0 "summary --frames 1" -- "$TIDEMARK" summary --frames 1 --top 100 "$work/plain.tdm"
has_re out "^ +[0-9]+ +[0-9.]+ [KMG]iB .*  optimizer_step \(train_sim\.c:[0-9]+\)$"
expect 0 "summary --frames 1, hide= in the recording" -- "$TIDEMARK" summary --frames 1 --top 100 \
  "$work/hidden.tdm"
! grep -qE "  optimizer_step \(train_sim" "$work/out" || fail "a site still named by optimizer_step"
has_re out "^ +[0-9]+ +[0-9.]+ [KMG]iB .*  train \(train_sim\.c:[0-9]+\)$"
has out "hide=^optimizer_step$"   # the config line names it
# the same through the pickle's frames
expect 0 "export --format pytorch" -- "$TIDEMARK" export --format pytorch "$work/hidden.tdm" \
  -o "$work/hidden.pickle"
/usr/bin/python3 - "$work/hidden.pickle" <<'PY' || fail "the pickle's stacks still start with optimizer_step"
import pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
firsts = {t["frames"][0]["name"] for dev in snap["device_traces"] for t in dev if t.get("frames")}
sys.exit(1 if "optimizer_step" in firsts or not firsts else 0)
PY

# A bad expression: one line, nothing recorded, the program's own result.
TIDEMARK_CONF="dump=$work/bad.tdm,hide=(" "$TRAIN_SIM" --steps 1 --compute-us 0 >"$work/out" 2>"$work/err" ||
  fail "train_sim with a bad hide= failed"
has err "TIDEMARK_CONF: bad value '(' for key 'hide' (not a regular expression"
[ "$(grep -c TIDEMARK_CONF "$work/err")" -eq 1 ] || fail "not one line about the bad hide="
[ ! -e "$work/bad.tdm" ] || fail "a bad hide= still recorded"

finish "hide= in TIDEMARK_CONF"
