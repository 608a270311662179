#!/usr/bin/env bash
# The README's demo (scripts/demo.sh, which `scripts/dev.sh demo` runs
# after the build): a recorded training loop on the sim device, exported
# three ways and summarized.  Run twice into the same folder, as a
# newcomer who runs the README's command again does: the second run must
# replace the first one's files, not stop at them.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM TDM_SOURCE_DIR
out=$work/demo
for run in 1 2; do
  expect 0 "demo, run $run" -- "$TDM_SOURCE_DIR/scripts/demo.sh" "$TIDEMARK" "$TRAIN_SIM" "$out"
  for f in train.tdm train.pickle train.perfetto.json train.html; do
    [ -s "$out/$f" ] || fail "run $run: no $out/$f"
  done
  has out "tidemark summary"
  has out "peak"
done
finish "the demo runs, and runs again over its own files"
