#!/usr/bin/env bash
# `tidemark summary` after the ring wrapped: train_sim ($TRAIN_SIM) for 200
# steps (about 27,000 events) into rings of 240 to 330 events, about 1% of
# the run, so that each window opens at another point of a step.  Memory
# allocated before the window is seeded at its start (docs/cli.md, Partial
# histories); every site must still be named by a train_sim function, never
# "(no stack recorded)": the sites at the peak (blocks freed in the window
# by the stack of their free, marked "freed at") and, with --verbose, those
# live at the end (by their blocks' stacks).  The memory_viz pickle of the
# same file carries frames on every block live at the end.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

freed_at=0
for ring in 240 270 300 330; do
  f=$work/ring$ring.tdm
  record "$f,max_entries=$ring" --steps 200 --compute-us 0
  expect 0 "summary, ring of $ring" -- "$TIDEMARK" summary --top 1000 "$f"
  cp "$work/out" "$work/s$ring.txt"
  # A ring entry may hold a free's two events (docs/promises.md, Counts).
  has "s$ring.txt" "(ring of $ring)"
  n=$(sed -n 's/^events  *\([0-9]*\) recorded.*/\1/p' "$work/s$ring.txt")
  [ -n "$n" ] && [ "$n" -ge "$ring" ] && [ "$n" -le $((2 * ring)) ] ||
    fail "ring of $ring: '$n' events recorded"
  lacks "s$ring.txt" " 0 dropped"
  lacks "s$ring.txt" "(no stack recorded)"
  # Each site row's first frame is a function of train_sim.c.
  rows=$(grep -cE '^ +[0-9]+ +[0-9.]+ [KMGT]?i?B +[<0-9.]+% +[0-9]+  ' "$work/s$ring.txt")
  named=$(grep -cE '^ +[0-9]+ +[0-9.]+ [KMGT]?i?B +[<0-9.]+% +[0-9]+  (freed at )?[a-z_.0-9]+ \(train_sim\.c:[0-9]+\)$' \
    "$work/s$ring.txt")
  [ "$rows" -ge 4 ] && [ "$rows" = "$named" ] ||
    { fail "ring $ring: $named of $rows sites at the peak named by train_sim.c"; cat "$work/s$ring.txt"; }
  grep -q "freed at " "$work/s$ring.txt" && freed_at=$((freed_at + 1))

  # The sites live at the end (--verbose): the 24 blocks of parameters and
  # Adam's state, each named.
  expect 0 "summary --verbose, ring of $ring" -- "$TIDEMARK" summary --verbose --top 1000 "$f"
  cp "$work/out" "$work/v$ring.txt"
  lacks "v$ring.txt" "(no stack recorded)"
  has "v$ring.txt" "top allocation sites by bytes live at the end"
  end_count=$(sed -n '/sites by bytes live at the end/,$p' "$work/v$ring.txt" |
    awk '$1 ~ /^[0-9]+$/ && $4 ~ /%$/ { n += $5 } END { print n + 0 }')
  [ "$end_count" = 24 ] || fail "ring $ring: the end's sites hold $end_count allocations, not 24"
done
# Some window starts between a gradient's alloc and its free: those blocks
# are named where they were freed.
[ "$freed_at" -ge 1 ] || fail "no ring size left a block freed in the window without its alloc"

# ---- the memory_viz pickle: blocks live at the end carry their frames -----------
if command -v python3 >/dev/null; then
  expect 0 "export --format pytorch" -- "$TIDEMARK" export -q --format pytorch \
    -o "$work/ring.pickle" "$work/ring300.tdm"
  python3 "$TDM_SOURCE_DIR/tests/tools/check_pytorch_snapshot.py" "$work/ring.pickle" \
    >"$work/check.txt" 2>&1 || { fail "check_pytorch_snapshot"; cat "$work/check.txt"; }
  python3 - "$work/ring.pickle" >"$work/py.txt" 2>&1 <<'EOF' || { fail "pickle blocks"; cat "$work/py.txt"; }
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
live = [b for s in d['segments'] for b in s['blocks'] if b['state'].startswith('active')]
named = [b for b in live if any('train_sim.c' in f['filename'] for f in b.get('frames', []))]
print(len(live), 'blocks live at the end,', len(named), 'with train_sim frames')
sys.exit(0 if len(live) == 24 and len(named) == 24 else 1)
EOF
else
  echo "python3 missing: pickle not checked"
fi

finish "tidemark summary after the ring wrapped"
