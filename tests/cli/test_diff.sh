#!/usr/bin/env bash
# `tidemark diff A B` end to end on two recordings of the demo
# ($TRAIN_SIM) with different model sizes: the peaks and their change
# agree with `tidemark summary` of each file, every category is listed,
# sites are matched across the files by their frames (the weights' site
# grows from 6 to 24 MiB: one row, not two), --top/--device, a file
# against itself, an imported file, and the exit codes.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

a=$work/h512.tdm
b=$work/h1024.tdm
# 6 layers: weights are hidden^2 * 4 B each, 6 MiB in all at 512, 24 MiB at 1024.
record "$a" --steps 3 --hidden 512
record "$b" --steps 3 --hidden 1024

# ---- usage and bad input ----------------------------------------------------
expect 0 "help diff" -- "$TIDEMARK" help diff
has out "usage: tidemark diff"
expect 1 "one file" -- "$TIDEMARK" diff "$a"
has err "needs two files"
expect 1 "three files" -- "$TIDEMARK" diff "$a" "$b" "$a"
expect 1 "bad option" -- "$TIDEMARK" diff --top many "$a" "$b"
expect 2 "missing file" -- "$TIDEMARK" diff "$a" "$work/none.tdm"
has err "none.tdm"
printf 'junk\n' >"$work/junk.tdm"
expect 2 "corrupt file" -- "$TIDEMARK" diff "$work/junk.tdm" "$b"

# ---- the diff ------------------------------------------------------------------
expect 0 "diff" -- "$TIDEMARK" diff "$a" "$b"
cp "$work/out" "$work/diff.txt"
has diff.txt "  A  $a: $TRAIN_SIM --steps 3 --hidden 512"
has diff.txt "  B  $b: $TRAIN_SIM --steps 3 --hidden 1024"
has diff.txt "device 0 (sim0)"
# The peaks are the ones `tidemark summary` gives each file.
peak_of() { "$TIDEMARK" summary "$1" | sed -n 's/^  peak allocated \([0-9.]* [KMG]iB\).*/\1/p'; }
pa=$(peak_of "$a")
pb=$(peak_of "$b")
grep -qE "^  peak allocated +$pa +$pb +\+[0-9.]+ MiB \(\+[0-9.]+%\)$" "$work/diff.txt" ||
  fail "peak line does not say $pa -> $pb"
grep -qE "^  peak at +A: step [0-9]+, [a-z_]+; B: step [0-9]+, [a-z_]+$" "$work/diff.txt" ||
  fail "no 'peak at' line with steps and phases"
has diff.txt "  reserved peak "; has diff.txt "  live at exit "
for c in parameter optimizer_state gradient activation; do
  grep -qE "^  $c +[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B " "$work/diff.txt" || fail "no $c row"
done
# Parameters: 6 MiB + biases -> 24 MiB + biases, live at both peaks.
grep -qE "^  parameter +6.01 MiB +24.02 MiB +\+18.01 MiB" "$work/diff.txt" ||
  fail "parameter row is not 6.01 -> 24.02 MiB"
# Sites, matched by frames: the weights' site is one row, 6 -> 24 MiB.
has diff.txt "allocation sites whose live bytes at the peak changed most"
grep -qE "^ +\+18.00 MiB +6.00 MiB +24.00 MiB  .*\(train_sim.c:[0-9]+\)$" "$work/diff.txt" ||
  fail "no +18 MiB site row"
grep -A2 -E "^ +\+18.00 MiB +6.00 MiB +24.00 MiB" "$work/diff.txt" | grep -q "init_parameters (train_sim.c:" ||
  fail "the weights' site lacks its stack (init_parameters)"
! grep -qE "^ +[+-]?[0-9.]+ [KMG]?i?B +0 B +24.00 MiB" "$work/diff.txt" ||
  fail "a site of B was not matched with A's"
# Sorted by the size of the change, largest first.
awk '/allocation sites whose/ { on = 1; next } on && /^ +[+-][0-9.]+ [KMG]?i?B / {
       v = $1; u = $2; sub(/^[+-]/, "", v)
       f = (u == "GiB") ? 1073741824 : (u == "MiB") ? 1048576 : (u == "KiB") ? 1024 : 1
       if (seen && v * f > last + 0.5) bad = 1; last = v * f; seen = 1 }
     END { exit bad }' "$work/diff.txt" || fail "sites are not sorted by change"
[ "$(wc -l <"$work/diff.txt")" -le 70 ] || fail "diff is over 70 lines"

expect 0 "--top 1 --frames 1" -- "$TIDEMARK" diff --top 1 --frames 1 "$a" "$b"
[ "$(grep -cE '^ +[+-][0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B  ' "$work/out")" -eq 1 ] ||
  fail "--top 1 lists one site"
has out "more changed sites"
expect 2 "--device 3" -- "$TIDEMARK" diff --device 3 "$a" "$b"
has err "tidemark diff: $a has no device 3 (its devices: 0)"
has err "tidemark diff: $b has no device 3 (its devices: 0)"

# A file against itself: nothing changed.
expect 0 "diff A A" -- "$TIDEMARK" diff "$a" "$a"
grep -qE "^  peak allocated +$pa +$pa += *$" "$work/out" || fail "A vs A peak is not '='"
has out "no allocation site changed its live bytes at the peak"

# Reversed: the same rows with the opposite sign.
expect 0 "diff B A" -- "$TIDEMARK" diff "$b" "$a"
grep -qE "^ +-18.00 MiB +24.00 MiB +6.00 MiB  " "$work/out" || fail "no -18 MiB row reversed"

# An RMM log against a snapshot: imported in memory (no stacks there).
cat >"$work/rmm.csv" <<'EOF'
Thread,Time,Action,Pointer,Size,Stream
1,10:00:00.000100,allocate,0x7f0000000000,6291456,0x0
1,10:00:00.000200,free,0x7f0000000000,6291456,0x0
EOF
expect 0 "rmm log vs snapshot" -- "$TIDEMARK" diff "$work/rmm.csv" "$a"
grep -qE "^  peak allocated +6.00 MiB +$pa " "$work/out" || fail "rmm peak is not 6.00 MiB"

finish "tidemark diff"
