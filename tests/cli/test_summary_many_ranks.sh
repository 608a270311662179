#!/usr/bin/env bash
# `tidemark summary DIR` of a job with many ranks: 1024 snapshots of
# train_sim ($TRAIN_SIM, one step, RANK/WORLD_SIZE as torchrun sets them,
# model sizes varying by rank, rank 517 the largest and recorded with
# stacks).  By default: the spread (max, median, min with their ranks and
# how many share them), the rows of the 10 highest and the 3 lowest peaks
# and a line for the ranks between, with the note that --all lists every
# rank; --all prints the 1024 rows as before.  16 ranks still get every row,
# 17 the short table (docs/multi-rank.md).  The expected figures come from
# the --all --bytes table.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

n=1024
mkdir -p "$work/job"
export TRAIN_SIM work
# hidden(r): 64..864 features, spread over the ranks; rank 517: 1024.
seq 0 $((n - 1)) | xargs -P 4 -I{} bash -c '
  r={}; hidden=$((64 + r * 37 % 101 * 8)); conf=stacks=none
  if [ "$r" = 517 ]; then hidden=1024; conf=stacks=native; fi
  RANK=$r LOCAL_RANK=$r WORLD_SIZE='$n' TIDEMARK_CONF="dump=$work/job/r%r.tdm,max_entries=1000,$conf" \
    "$TRAIN_SIM" --steps 1 --layers 1 --hidden $hidden --batch 16 --compute-us 0 >/dev/null 2>&1 ||
    echo "train_sim as rank $r failed"' >"$work/gen.log" 2>&1
[ ! -s "$work/gen.log" ] && [ "$(ls "$work/job" | wc -l)" -eq $n ] ||
  { cat "$work/gen.log"; fail "$(ls "$work/job" | wc -l) of $n rank files written"; exit 1; }

# ---- --all: every row, the truth for what follows ----------------------------------
expect 0 "summary --all --bytes DIR" -- "$TIDEMARK" summary --all --bytes "$work/job"
cp "$work/out" "$work/all_out.txt"
# rank peak, one line per row
awk '$1 ~ /^[0-9]+$/ && $NF ~ /\.tdm$/ { print $1, $4 }' "$work/out" >"$work/all.txt"
[ "$(wc -l <"$work/all.txt")" -eq $n ] || fail "--all printed $(wc -l <"$work/all.txt") rows, not $n"
[ "$(cut -d' ' -f1 "$work/all.txt" | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ] ||
  fail "--all rows are not ranks 0..$((n - 1)) in order"
lacks out "--all lists them all"; lacks out "  median  "
sort -k2,2nr -k1,1n "$work/all.txt" | head -n 10 | cut -d' ' -f1 >"$work/want_high.txt"
sort -k2,2n -k1,1n "$work/all.txt" | head -n 3 | sort -k2,2nr -k1,1n | cut -d' ' -f1 \
  >"$work/want_low.txt"
max=$(sort -k2,2nr "$work/all.txt" | head -n 1 | cut -d' ' -f2)
min=$(sort -k2,2n "$work/all.txt" | head -n 1 | cut -d' ' -f2)
min_ties=$(($(awk -v m="$min" '$2 == m' "$work/all.txt" | wc -l) - 1))
median=$(sort -k2,2n "$work/all.txt" | sed -n "$(((n + 1) / 2))p" | cut -d' ' -f2)

# ---- the default: the spread and 13 rows -------------------------------------------
start=$(date +%s)
expect 0 "summary --bytes DIR" -- "$TIDEMARK" summary --bytes "$work/job"
[ $(($(date +%s) - start)) -le 10 ] || fail "summary of $n files took over 10 s"
cp "$work/out" "$work/sum.txt"
cat "$work/sum.txt"
has_re sum.txt "^tidemark summary of $n snapshots: $n ranks on 1 host$"
has_re sum.txt "^  ranks      0-$((n - 1)) of world size $n$"
has_re sum.txt "^  the 10 highest peaks and the 3 lowest of $n ranks; --all lists them all$"
rows=$(awk '$1 ~ /^[0-9]+$/ && $NF ~ /\.tdm$/ { print $1 }' "$work/sum.txt")
[ "$(echo "$rows" | head -n 10)" = "$(cat "$work/want_high.txt")" ] ||
  fail "the highest rows: $(echo "$rows" | head -n 10 | tr '\n' ' '), wanted $(tr '\n' ' ' <"$work/want_high.txt")"
[ "$(echo "$rows" | tail -n +11)" = "$(cat "$work/want_low.txt")" ] ||
  fail "the lowest rows: $(echo "$rows" | tail -n +11 | tr '\n' ' '), wanted $(tr '\n' ' ' <"$work/want_low.txt")"
mid_lo=$(sort -k2,2n "$work/all.txt" | sed -n '4p' | cut -d' ' -f2)
has_re sum.txt "^ +\.\.\.  $((n - 13)) more, peaks from $mid_lo to [0-9]+$"
# Each row is the rank's line of the --all table, word for word.
for r in $rows; do
  line=$(grep -E "^ +$r +" "$work/sum.txt")
  grep -qxF -- "$line" "$work/all_out.txt" || fail "rank $r's row differs from --all's: $line"
done
has_re sum.txt "^spread of the peaks over $n ranks$"
has_re sum.txt "^  max +$max  rank 517 on [^,]+, device 0 \(sim0\), at \+([0-9]+ h )?([0-9]+ min )?[0-9.]+ s, step 1, phase [a-z_]+$"
has_re sum.txt "^  min +$min  rank $(head -n 1 <(sort -k2,2n -k1,1n "$work/all.txt") | cut -d' ' -f1) on [^;]+; $min_ties more ranks at this peak$"
med_line=$(grep -E '^  median ' "$work/sum.txt")
med_rank=$(echo "$med_line" | sed -En 's/^  median +[0-9]+  rank ([0-9]+) on .*/\1/p')
[ -n "$med_rank" ] && echo "$med_line" | grep -qE "^  median +$median  rank " &&
  [ "$(awk -v r="$med_rank" '$1 == r { print $2 }' "$work/all.txt")" = "$median" ] ||
  fail "median line '$med_line', wanted $median and a rank at that peak"
# The max's top site, from the one rank recorded with stacks.
has_re sum.txt "^  top site +[0-9]+ \([0-9.]+% of the max\) in init_parameters \(train_sim\.c:"
lines=$(wc -l <"$work/sum.txt")
[ "$lines" -le 30 ] || fail "the summary of $n ranks is $lines lines long"

# ---- up to 16 ranks: every row, as before; 17: the short table ----------------------
mkdir "$work/j16" "$work/j17"
for r in $(seq 0 15); do cp "$work/job/r$r.tdm" "$work/j16/"; done
cp "$work/job"/r1[0-6].tdm "$work/job"/r[0-9].tdm "$work/j17/"
expect 0 "summary of 16 ranks" -- "$TIDEMARK" summary "$work/j16"
[ "$(awk '$1 ~ /^[0-9]+$/ && $NF ~ /\.tdm$/' "$work/out" | wc -l)" -eq 16 ] || fail "16 ranks: not 16 rows"
lacks out "--all"; lacks out "  median  "; lacks out "more ranks at this peak"
expect 0 "summary of 17 ranks" -- "$TIDEMARK" summary "$work/j17"
[ "$(awk '$1 ~ /^[0-9]+$/ && $NF ~ /\.tdm$/' "$work/out" | wc -l)" -eq 13 ] || fail "17 ranks: not 13 rows"
has out "the 10 highest peaks and the 3 lowest of 17 ranks; --all lists them all"
has_re out '^ +\.\.\.  4 more, peaks from '
has_re out '^  median '
expect 0 "summary --all of 17 ranks" -- "$TIDEMARK" summary --all "$work/j17"
[ "$(awk '$1 ~ /^[0-9]+$/ && $NF ~ /\.tdm$/' "$work/out" | wc -l)" -eq 17 ] || fail "--all: not 17 rows"

finish "tidemark summary of $n ranks"
