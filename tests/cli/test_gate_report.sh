#!/usr/bin/env bash
# `tidemark gate`: the report leads with the verdict (the first failure's
# gate, figure, limit, excess, file and device, then its sites once);
# nothing measured (every file empty) is exit 5 unless --allow-empty; a
# --device N a file lacks is input.h's one wording and exit 2; a size
# limit without a unit is read as bytes, said back as "12 B", with a
# warning.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
small=$work/small.tdm
two=$work/two.tdm
record "$small" --steps 2 --hidden 512
# Two sim devices, the program on device 1.
record "$two,device=sim:2x1GiB" --steps 1 --hidden 256 --device 1

# ---- verdict first -------------------------------------------------------------
expect 3 "max-peak fails" -- "$TIDEMARK" gate --max-peak 1KiB --max-leak 1GiB "$small"
grep -qE '^max-peak FAILED: peak [0-9.]+ MiB > limit 1.00 KiB \([0-9.]+ MiB, [0-9.]+% over\)$' \
  <(head -n 1 "$work/out") || fail "the first line is not the verdict: $(head -n 1 "$work/out")"
sed -n 2p "$work/out" | grep -qxF "  on         $small, device 0 (sim0)" ||
  fail "the second line does not name the file and device: $(sed -n 2p "$work/out")"
has out "  limit      1.00 KiB (1024 B)"
# The sites come once, with their frames; the passing gate in the total.
[ "$(grep -c 'backward_layer (train_sim.c:' "$work/out")" -le 1 ] || fail "a site is shown twice"
has out "top allocation sites live at the peak"
lacks out "PASS "
has out "gates: 1 passed, 1 failed"
n=$(wc -l <"$work/out")
[ "$n" -le 30 ] || fail "a failing gate prints $n lines (30 at most)"

# Several failures: the first in full, the others one line each after it.
expect 3 "two failures" -- "$TIDEMARK" gate --max-peak 1KiB --max-leak 1KiB "$small"
head -n 1 "$work/out" | grep -q '^max-peak FAILED: ' || fail "max-peak is not first"
grep -qE "^FAIL +max-leak +$small, device 0 \(sim0\): live at exit " "$work/out" ||
  fail "no line for the second failure"
[ "$(grep -c 'FAILED: ' "$work/out")" -eq 1 ] || fail "only the first failure in full"

# Passing: one line per gate, as before.
expect 0 "passing" -- "$TIDEMARK" gate --max-peak 1GiB "$small"
grep -qE "^PASS +max-peak +$small, device 0 \(sim0\): peak " "$work/out" || fail "no PASS line"

# ---- nothing measured: exit 5, unless --allow-empty ------------------------------------
printf 'Thread,Time,Action,Pointer,Size,Stream\n' >"$work/empty.csv"   # an RMM log, no event
expect 5 "an empty log" -- "$TIDEMARK" gate --max-peak 1GiB "$work/empty.csv"
has err "tidemark gate: nothing measured: "
[ "$(wc -l <"$work/err")" -eq 1 ] || fail "nothing measured takes one line on stderr"
lacks out "0 passed, 0 failed"
expect 0 "an empty log, --allow-empty" -- "$TIDEMARK" gate --allow-empty --max-peak 1GiB \
  "$work/empty.csv"
has err "nothing measured"
# One file measured is enough.
expect 0 "empty beside measured" -- "$TIDEMARK" gate --max-peak 1GiB "$work/empty.csv" "$small"

# ---- --device N a file lacks: input.h's wording, exit 2 ----------------------------
expect 2 "--device 1, one file lacks it" -- "$TIDEMARK" gate --device 1 --max-peak 1GiB "$two" "$small"
has err "tidemark gate: $small has no device 1 (its devices: 0)"
grep -qE "^PASS +max-peak +$two, device 1 \(sim1\)" "$work/out" || fail "the file that has it is checked"
expect 2 "--device 3, no file has it" -- "$TIDEMARK" gate --device 3 --max-peak 1GiB "$small"
has err "tidemark gate: $small has no device 3 (its devices: 0)"
lacks out "skipped"

# ---- sizes without a unit ----------------------------------------------------------
expect 3 "--max-peak 12" -- "$TIDEMARK" gate --max-peak 12 "$small"
has err "tidemark gate: --max-peak 12 has no unit: read as 12 B (did you mean 12GiB?)"
has out "limit 12 B"; has out "  limit      12 B"
expect 3 "--max-leak 16384" -- "$TIDEMARK" gate --max-leak 16384 "$small"
has err "--max-leak 16384 has no unit: read as 16384 B (did you mean 16384MiB?)"
expect 0 "--max-reserved 12 with --max-peak 1GiB" -- "$TIDEMARK" gate --max-reserved 12 \
  --max-peak 1GiB --allow-empty "$work/empty.csv"
has err "--max-reserved 12 has no unit"
# 0, an explicit B and a byte count of a MiB or more are taken as they are.
expect 3 "no warning" -- "$TIDEMARK" gate --max-leak 0 --max-peak 12B --max-reserved 1048576 "$small"
lacks err "no unit"

finish "tidemark gate report"
