#!/usr/bin/env bash
# `tidemark summary` and `tidemark gate` over the snapshots of several ranks,
# without MPI: the demo program ($TRAIN_SIM) run three times as ranks 2, 0
# and 1 of a world of 5 (RANK/LOCAL_RANK/WORLD_SIZE, as torchrun sets them),
# each with a different model size.  Checks the rank table against each
# file's own single-file summary (peak and live-at-end bytes), rank order,
# the missing ranks, the spread (max, min, mean), files without a rank,
# repeated ranks, unreadable files and empty directories, a directory of
# one file, --each, --device, and the gate's rank names and order.
# (tests/mpi/test_mpi_ranks.sh does the same under a real mpirun.)
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

host=$(hostname)
# rank -> layers: rank 1 gets the biggest model, rank 0 the smallest.
declare -A layers=([0]=2 [1]=5 [2]=3)
for r in 2 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=5 TIDEMARK_CONF="dump=$work/snaps/%h-r%r.tdm" \
    "$TRAIN_SIM" --steps 2 --layers "${layers[$r]}" --hidden 512 --batch 256 --compute-us 0 \
    >/dev/null 2>&1 || fail "train_sim as rank $r failed"
done

# Each file's own figures, from its single-file summary.
declare -A peak live
for r in 0 1 2; do
  f="$work/snaps/$host-r$r.tdm"
  "$TIDEMARK" summary "$f" >"$work/one" 2>&1 || fail "summary of rank $r's file"
  grep -q "rank $r of 5 (local $r)" "$work/one" || fail "rank $r's header"
  peak[$r]=$(sed -n 's/^  peak allocated .*(\([0-9]*\) B).*/\1/p' "$work/one")
  live[$r]=$(sed -n 's/^  live at end    .*(\([0-9]*\) B).*/\1/p' "$work/one")
  [ -n "${peak[$r]}" ] && [ -n "${live[$r]}" ] || fail "no figures for rank $r"
done
[ "${peak[1]}" -gt "${peak[2]}" ] && [ "${peak[2]}" -gt "${peak[0]}" ] ||
  fail "the model sizes did not order the peaks: ${peak[*]}"

# ---- the table --------------------------------------------------------------------
expect 0 "summary --bytes DIR" -- "$TIDEMARK" summary --bytes "$work/snaps"
cp "$work/out" "$work/sum"
has_re sum "^tidemark summary of 3 snapshots: 3 ranks on 1 host$"
has_re sum "^  ranks      0-2 of world size 5$"
has_re sum "^  missing    no file for ranks 3-4$"
has_re sum "^  times      from each file's recording start \(the earliest [0-9-]+ [0-9:]+ UTC\)$"
rows=$(awk -v h="$host" '$1 ~ /^[0-9]+$/ && $2 == h { print $1, $3, $4, $(NF-2), $(NF-1) }' "$work/sum")
[ "$(echo "$rows" | awk '{ printf "%s", $1 }')" = 012 ] || fail "rows not in rank order: $rows"
while read -r r dev pk lv dropped; do
  [ "$dev" = 0 ] || fail "rank $r row: device $dev"
  [ "$pk" = "${peak[$r]}" ] || fail "rank $r row: peak $pk, its own summary says ${peak[$r]}"
  [ "$lv" = "${live[$r]}" ] || fail "rank $r row: live $lv, its own summary says ${live[$r]}"
  [ "$dropped" = 0 ] || fail "rank $r row: $dropped dropped"
done <<<"$rows"
has_re sum "^spread of the peaks over 3 ranks$"
has_re sum "^  max +${peak[1]}  rank 1 on $host, device 0 \(sim0\), at \+([0-9]+ h )?([0-9]+ min )?[0-9.]+ s, step [12], phase [a-z_]+$"
has_re sum "^  min +${peak[0]}  rank 0 on $host$"
mean=$(((2 * (peak[0] + peak[1] + peak[2]) + 3) / 6))
has_re sum "^  mean +$mean; max is [0-9.]+x min, $((peak[1] - peak[0])) more$"
has_re sum "^  top site +[0-9]+ \([0-9.]+% of the max\) in "
# The same files named one by one, in any order, give the same table.
"$TIDEMARK" summary --bytes "$work/snaps/$host-r2.tdm" "$work/snaps/$host-r0.tdm" \
  "$work/snaps/$host-r1.tdm" >"$work/sum2" 2>&1
cmp -s "$work/sum" "$work/sum2" || fail "files in another order give another table"

# Without --bytes, sizes in people's units.
expect 0 "summary DIR" -- "$TIDEMARK" summary "$work/snaps"
has_re out "^ +0 +$host +0 +[0-9.]+ (KiB|MiB|GiB) "

# --each: the full summary of each file, in the given order.
expect 0 "summary --each" -- "$TIDEMARK" summary --each "$work/snaps"
[ "$(grep -c '^tidemark summary of /' "$work/out")" -eq 3 ] || fail "--each: not 3 full summaries"

# --device: a device no file has is an error said for each file, as every
# command says it (exit 2); the rows stay, without figures.
expect 2 "summary --device 3" -- "$TIDEMARK" summary --device 3 "$work/snaps"
has err "tidemark summary: $work/snaps/$host-r1.tdm has no device 3 (its devices: 0)"
has_re out "^ +1 +$host +- +\? "

# ---- files without a rank, repeated ranks, bad inputs ------------------------------
record "$work/snaps/solo.tdm" --steps 1 --layers 1 --hidden 256 --batch 64 --compute-us 0
cp "$work/snaps/$host-r0.tdm" "$work/snaps/again-r0.tdm"
expect 0 "summary with an unranked file and a repeated rank" -- "$TIDEMARK" summary "$work/snaps"
has_re out "^tidemark summary of 5 snapshots: 4 ranks on 1 host$"
has_re out "^  note       1 file repeats a rank"
has_re out "^  unranked   1 file with no rank in its header"
has_re out "^ +- +$host +0 .*/solo\.tdm$"
[ "$(awk '$1 ~ /^[0-9-]+$/ && NF > 8 { printf "%s ", $1 }' "$work/out")" = "0 0 1 2 - " ] ||
  fail "rows: ranked in order, the repeat after, unranked last: $(awk '$1 ~ /^[0-9-]+$/ { printf "%s ", $1 }' "$work/out")"
has_re out "^spread of the peaks over 5 files$"

mkdir "$work/empty"
expect 2 "summary of a missing file and an empty dir" -- \
  "$TIDEMARK" summary "$work/snaps" "$work/none.tdm" "$work/empty"
grep -q "none.tdm: No such file or directory" "$work/err" || fail "missing file not reported"
grep -q "empty: no .tdm snapshot in this directory" "$work/err" || fail "empty dir not reported"
has_re out "^\(1 file could not be read; see the messages above\)$"
has_re out "^spread of the peaks"

mkdir "$work/single"
cp "$work/snaps/$host-r2.tdm" "$work/single/"
expect 0 "summary of a directory of one" -- "$TIDEMARK" summary "$work/single"
has_re out "^tidemark summary of $work/single/$host-r2.tdm$"
expect 2 "summary of one readable file among two" -- \
  "$TIDEMARK" summary "$work/single/$host-r2.tdm" "$work/none.tdm"
has_re out "^tidemark summary of $work/single/$host-r2.tdm$"

# ---- gate across ranks --------------------------------------------------------------
rm -f "$work/snaps/again-r0.tdm"
limit=$((peak[2] + 1))B
expect 3 "gate between rank 2 and rank 1" -- "$TIDEMARK" gate --max-peak "$limit" \
  --junit "$work/gate.xml" "$work/snaps"
# The verdict first: the failure, in full, naming the rank; the passes counted.
[ "$(grep -m1 . "$work/out")" = "$(grep -m1 '^max-peak FAILED: peak ' "$work/out")" ] ||
  fail "gate: the first line is not the verdict: $(head -n 1 "$work/out")"
has_re out "^  on         $work/snaps/$host-r1\.tdm \(rank 1 on $host\), device 0 \(sim0\)$"
has_re out "^gates: 3 passed, 1 failed$"
grep -q "message=\"rank 1 on $host, device 0: peak" "$work/gate.xml" || fail "JUnit lacks rank 1"
expect 3 "gate --github" -- "$TIDEMARK" gate --max-peak "$limit" --github "$work/snaps"
has_re out "^::error title=tidemark max-peak \(device 0\)::$work/snaps/$host-r1\.tdm \(rank 1 on $host\): "
# Every file over the limit: the files in rank order, the unranked one last
# (the first in full, the others one line each).
expect 3 "gate, every rank over" -- "$TIDEMARK" gate --max-peak 1B --top 0 "$work/snaps"
order=$(sed -nE -e 's/^  on         .*\.tdm \(rank ([0-9]+) on .*/\1/p' \
  -e 's/^FAIL  max-peak     .*\.tdm, (rank ([0-9]+) on [^,]*, )?device .*/\2-/p' "$work/out" | tr '\n' ' ')
[ "$order" = "0 1- 2- - " ] || fail "gate: files in the order '$order'"

finish "tidemark summary and gate across ranks"
