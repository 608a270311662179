#!/usr/bin/env bash
# `tidemark summary` end to end: records the demo program ($TRAIN_SIM) with
# TIDEMARK_CONF=dump=..., summarizes the snapshot, and checks the headings,
# that the answer comes first (the peak within the first lines, then the
# sites, then the details) and fits in 40 lines, what --verbose adds, the
# numbers' consistency with what train_sim itself reports, and the exit
# codes for --help/--version, usage errors, a missing file, a truncated
# file and a corrupt one (docs/cli.md); PyTorch pickles and RMM logs read
# directly by summary, view, categories and export.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

# ---- help and version -------------------------------------------------------
expect 0 "--version" -- "$TIDEMARK" --version
[ "$(cat "$work/out")" = "tidemark 0.1.0 (format 1)" ] ||
  fail "--version printed '$(cat "$work/out")'"
expect 0 "--help" -- "$TIDEMARK" --help
has out "usage: tidemark COMMAND"; has out "summary"; has out "exit codes"
expect 0 "help summary" -- "$TIDEMARK" help summary
has out "usage: tidemark summary"; has out "--top N"
expect 0 "summary --help" -- "$TIDEMARK" summary --help
has out "usage: tidemark summary"

# ---- usage errors: exit 1 ---------------------------------------------------
expect 1 "no command" -- "$TIDEMARK"
expect 1 "--bogus" -- "$TIDEMARK" --bogus
has err "unknown option '--bogus'"
expect 1 "unknown command" -- "$TIDEMARK" frobnicate
has err "'frobnicate'"
expect 1 "help for an unknown command" -- "$TIDEMARK" help frobnicate
expect 1 "summary --bogus" -- "$TIDEMARK" summary --bogus x.tdm
has err "unknown option '--bogus'"; has err "tidemark help summary"
expect 1 "summary without a file" -- "$TIDEMARK" summary
has err "no snapshot file given"
expect 1 "summary --top without a value" -- "$TIDEMARK" summary x.tdm --top
expect 1 "summary --top not a number" -- "$TIDEMARK" summary --top many x.tdm

# ---- bad input: exit 2 ------------------------------------------------------
expect 2 "missing file" -- "$TIDEMARK" summary "$work/none.tdm"
has err "none.tdm"; has err "No such file"
printf 'this is not a tidemark snapshot, not msgpack either\n' >"$work/junk.tdm"
expect 2 "corrupt file" -- "$TIDEMARK" summary "$work/junk.tdm"
has err "junk.tdm"; has err "at byte"

# ---- record the demo --------------------------------------------------------
if [ ! -x "$TRAIN_SIM" ]; then
  echo "FAIL: TRAIN_SIM=$TRAIN_SIM is not built"; exit 1
fi
snap=$work/train.tdm
record "$snap" --steps 5   # the demo; its own figures in $work/train.log, read below

expect 0 "summary of the demo" -- "$TIDEMARK" summary "$snap"
cp "$work/out" "$work/summary.txt"
for heading in "tidemark summary of $snap" "  process    pid " "  command    " "  started    " \
               "  recording  record=all" "  config     dump=$snap" "snapshot" "events       " \
               "device 0 (sim0), capacity 16.00 GiB (17179869184 B)" "  peak allocated " \
               "  peak at        " ", step " ", phase " "  reserved       " "  live at end    " \
               "from the final allocator state" "top allocation sites by bytes live at the peak" \
               "  stats          allocated " "train_sim.c:"; do
  has summary.txt "$heading"
done
lacks summary.txt "TRUNCATED"
# What --verbose adds is not there.
lacks summary.txt "  file       format"; lacks summary.txt "pools now/peak"
lacks summary.txt "sites by bytes live at the end"; lacks summary.txt " retries"
lines=$(wc -l <"$work/summary.txt")
[ "$lines" -le 40 ] || fail "summary is $lines lines long (at most 40)"
[ ! -s "$work/err" ] || { fail "summary wrote to stderr"; cat "$work/err"; }
# The answer first: the peak (how much, of what capacity, when) in the first
# lines, then the sites at the peak, then the details.
at() { grep -nF -m1 -- "$1" "$work/summary.txt" | cut -d: -f1; }
peak_at=$(at "  peak allocated ")
[ -n "$peak_at" ] && [ "$peak_at" -le 5 ] || fail "the peak is on line '$peak_at', not in the first 5"
has_re summary.txt '^  peak allocated [0-9.]+ MiB \([0-9]+ B\), [0-9.]+% of capacity$'
has_re summary.txt '^  peak at        \+[0-9.]+ s \(event [0-9]+\), step [0-9]+, phase [a-z_]+$'
[ "$(at "  peak at ")" -lt "$(at "top allocation sites")" ] &&
  [ "$(at "top allocation sites")" -lt "$(at "  live at end ")" ] &&
  [ "$(at "  live at end ")" -lt "$(at "  stats ")" ] &&
  [ "$(at "  stats ")" -lt "$(at "  process ")" ] &&
  [ "$(at "  process ")" -lt "$(at "events ")" ] ||
  fail "sections out of order: peak, sites, live at end, stats, process, events"
echo "demo summary: $lines lines, peak on line $peak_at"

# The sites listed are at most 10, numbered 1..N, two frames each: the
# allocating function and its caller.
nsites=$(grep -cE '^ +[0-9]+ +[0-9.]+ [KMGT]?i?B +[<0-9.]+% ' "$work/summary.txt")
[ "$nsites" -ge 1 ] && [ "$nsites" -le 10 ] || fail "$nsites site rows (1..10 expected)"
frames=$(sed -n '/top allocation sites/,/^$/p' "$work/summary.txt" | grep -c '(train_sim\.c:')
[ "$frames" -eq $((2 * nsites)) ] || fail "$frames frames for $nsites sites (2 each expected)"
# Shares as every command writes them: "23.8%", "<0.1%" under 0.05%.
has_re summary.txt '^ +[0-9]+ +48\.00 KiB +<0\.1% '
expect 0 "summary --top 2 --frames 1" -- "$TIDEMARK" summary --top 2 --frames 1 "$snap"
n2=$(grep -cE '^ +[0-9]+ +[0-9.]+ [KMGT]?i?B +[<0-9.]+% ' "$work/out")
[ "$n2" -le 2 ] || fail "--top 2 printed $n2 sites"
has out "... $((nsites - 2)) more sites (--top N lists them)"

# --verbose: the file's format, the allocator's counts and pools, the sites
# live at the end, more frames; the answer still first.
expect 0 "summary --verbose" -- "$TIDEMARK" summary --verbose "$snap"
cp "$work/out" "$work/verbose.txt"
has verbose.txt "  file       format 1, written by tidemark 0.1.0"
has_re verbose.txt '^ +[0-9]+ allocations \([0-9]+ live\), [0-9]+ segments, 0 OOMs, 0 retries$'
has_re verbose.txt '^  pools now/peak allocated +reserved +active +requested$'
has verbose.txt "top allocation sites by bytes live at the end"
[ "$(grep -nF -m1 "  peak allocated " "$work/verbose.txt" | cut -d: -f1)" = "$peak_at" ] ||
  fail "--verbose moved the peak"
vframes=$(sed -n '/sites by bytes live at the peak/,/^$/p' "$work/verbose.txt" | grep -c '(train_sim\.c:')
[ "$vframes" -gt "$frames" ] || fail "--verbose shows $vframes train_sim frames at the peak, the default $frames"
expect 0 "summary -v --frames 1" -- "$TIDEMARK" summary -v --frames 1 "$snap"
n1=$(sed -n '/sites by bytes live at the peak/,/^$/p' "$work/out" | grep -c '(train_sim\.c:')
[ "$n1" -eq "$nsites" ] || fail "-v --frames 1: $n1 frames for $nsites sites"

# The peak the summary replays from the events agrees with the allocator's
# own peak that train_sim prints (rounded sizes, 0.1 MiB precision: allow
# 0.15 MiB), and so does what is live at the end.
peak_mib=$(sed -n 's/.*peak allocated \([0-9.]*\) MiB.*/\1/p' "$work/train.log")
end_mib=$(sed -n 's/.*live at end \([0-9.]*\) MiB.*/\1/p' "$work/train.log")
peak_b=$(sed -n 's/^  peak allocated .*(\([0-9]*\) B).*/\1/p' "$work/summary.txt")
end_b=$(sed -n 's/^  live at end    .*(\([0-9]*\) B).*/\1/p' "$work/summary.txt")
near() { awk -v b="$1" -v m="$2" 'BEGIN { d = b / 1048576 - m; exit !(d < 0.15 && d > -0.15) }'; }
if [ -n "$peak_mib" ] && [ -n "$peak_b" ]; then
  near "$peak_b" "$peak_mib" || fail "summary peak $peak_b B, train_sim says $peak_mib MiB"
else
  fail "could not read the peak (train_sim: '$peak_mib', summary: '$peak_b')"
fi
if [ -n "$end_mib" ] && [ -n "$end_b" ]; then
  near "$end_b" "$end_mib" || fail "summary end $end_b B, train_sim says $end_mib MiB"
else
  fail "could not read the end (train_sim: '$end_mib', summary: '$end_b')"
fi

# ---- a ring too small for the run: partial history --------------------------
small=$work/small.tdm
record "$small,max_entries=64" --steps 3
expect 0 "summary of a partial history" -- "$TIDEMARK" summary "$small"
has out "(ring of 64)"; lacks out " 0 dropped"; has out "partial"
n=$(sed -n 's/^events  *\([0-9]*\) recorded.*/\1/p' "$work/out")
[ -n "$n" ] && [ "$n" -ge 64 ] && [ "$n" -le 128 ] || fail "ring of 64: '$n' events recorded"
grep -qE '(^| )-[0-9.]+ [KMGT]?i?B' "$work/out" && fail "negative size in partial summary"
end_small=$(sed -n 's/^  live at end    .*(\([0-9]*\) B).*/\1/p' "$work/out")
[ "$end_small" = "$end_b" ] || fail "live at end differs with a small ring: $end_small vs $end_b"

# ---- the allocator's stats per pool (cache mode) -----------------------------
# The stats lines give allocated, reserved, active and requested bytes (now
# and peak) for the device; a cache-mode file also has small and large pool
# rows, whose current values add up to the device's (docs/cli.md).
pooled=$work/pooled.tdm
record "$pooled,mode=cache" --steps 3
expect 0 "summary --bytes of a cache-mode recording" -- \
  "$TIDEMARK" summary --bytes --top 0 --verbose "$pooled"
cp "$work/out" "$work/pooled.txt"
has pooled.txt "; allocator cache"
has_re pooled.txt '^  stats +allocated [0-9]+ B now, [0-9]+ B peak; reserved [0-9]+ B now, [0-9]+ B peak$'
has_re pooled.txt '^ +active [0-9]+ B now, [0-9]+ B peak; requested [0-9]+ B now, [0-9]+ B peak$'
has_re pooled.txt '^  pools now/peak allocated +reserved +active +requested$'
# all: allocated, reserved, active, requested as "now peak" pairs
all=$(sed -n -e 's/^  stats .*allocated \([0-9]*\) B now, \([0-9]*\) B peak; reserved \([0-9]*\) B now, \([0-9]*\) B peak$/\1 \2 \3 \4/p' \
             -e 's/^ *active \([0-9]*\) B now, \([0-9]*\) B peak; requested \([0-9]*\) B now, \([0-9]*\) B peak$/\1 \2 \3 \4/p' \
        "$work/pooled.txt" | tr '\n' ' ')
# pool: the four "now/peak B" cells of its row, as "now peak" pairs
pool() { awk -v p="$1" '$1 == p && NF == 9 { for (i = 2; i <= 8; i += 2) { split($i, v, "/"); printf "%s %s ", v[1], v[2] } }' "$work/pooled.txt"; }
small=$(pool small)
large=$(pool large)
echo "pools (now peak: allocated reserved active requested): all $all; small $small; large $large"
read -r -a A <<<"$all"; read -r -a S <<<"$small"; read -r -a L <<<"$large"
if [ "${#A[@]}" -ne 8 ] || [ "${#S[@]}" -ne 8 ] || [ "${#L[@]}" -ne 8 ]; then
  fail "could not read the stats (all '$all', small '$small', large '$large')"
  sed 's/^/  summary: /' "$work/pooled.txt"
else
  names=(allocated allocated reserved reserved active active requested requested)
  for i in 0 2 4 6; do # current values: small + large = all
    [ $((S[i] + L[i])) -eq "${A[i]}" ] ||
      fail "${names[i]} now: small ${S[i]} + large ${L[i]} != all ${A[i]}"
  done
  for i in 1 3 5 7; do # peaks: each pool's at most the device's, the sum at least
    [ "${S[i]}" -le "${A[i]}" ] && [ "${L[i]}" -le "${A[i]}" ] &&
      [ $((S[i] + L[i])) -ge "${A[i]}" ] ||
      fail "${names[i]} peak: small ${S[i]}, large ${L[i]}, all ${A[i]}"
  done
  # train_sim uses both pools: small biases, large weights
  [ "${S[2]}" -gt 0 ] && [ "${L[2]}" -gt 0 ] || fail "a pool holds nothing: $small / $large"
  [ "${S[0]}" -gt 0 ] && [ "${L[0]}" -gt 0 ] || fail "a pool allocates nothing: $small / $large"
fi
# Without --bytes the same rows, in binary units.
expect 0 "summary --verbose of a cache-mode recording" -- "$TIDEMARK" summary --verbose "$pooled"
has_re out '^    small +[0-9.]+(/[0-9.]+ [KMGT]?i?B| [KMGT]?i?B/[0-9.]+ [KMGT]?i?B)  '
has_re out '^    large +[0-9.]+(/[0-9.]+ [KMGT]?i?B| [KMGT]?i?B/[0-9.]+ [KMGT]?i?B)  '
expect 0 "summary of a cache-mode recording" -- "$TIDEMARK" summary "$pooled"
lines=$(wc -l <"$work/out")
[ "$lines" -le 40 ] || fail "cache-mode summary is $lines lines long (at most 40)"
lacks out "pools now/peak"
# Pass-through mode keeps no pools: the device's stats, no pool rows.
record "$work/pt.tdm,alloc_mode=passthrough" --steps 2
expect 0 "summary of a pass-through recording" -- "$TIDEMARK" summary -v --top 0 "$work/pt.tdm"
has out "; allocator passthrough"; has_re out '^ +active .* requested .* peak$'
lacks out "pools now/peak"

# ---- truncated: what could be read, a warning with the offset, exit 2 -------
size=$(stat -c %s "$snap")
head -c $((size * 2 / 3)) "$snap" >"$work/cut.tdm"
expect 2 "truncated file" -- "$TIDEMARK" summary "$work/cut.tdm"
has out "tidemark summary of $work/cut.tdm"; has out "TRUNCATED at byte"
[ "$(grep -n -m1 "TRUNCATED at byte" "$work/out" | cut -d: -f1)" = 2 ] ||
  fail "the cut is not said right under the title"
has err "warning"; has err "truncated at byte"
head -c 5 "$snap" >"$work/stub.tdm"
"$TIDEMARK" summary "$work/stub.tdm" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "5-byte file: exit $rc, wanted 2"
has err "byte"

# Several files: the worst exit code wins, every readable one is shown.
expect 2 "two files, one missing" -- "$TIDEMARK" summary "$snap" "$work/none.tdm"
has out "tidemark summary of $snap"

# ---- files `tidemark import` reads: taken directly, by every command ----------
"$TIDEMARK" export --format pytorch -o "$work/train.pickle" "$snap" >/dev/null 2>&1 ||
  fail "export --format pytorch failed"
"$TIDEMARK" export --format csv -o "$work/train.csv" "$snap" >/dev/null 2>&1 ||
  fail "export --format csv failed"
peak_line=$(grep -m1 '^  peak allocated ' "$work/summary.txt")
expect 0 "summary of a PyTorch pickle" -- "$TIDEMARK" summary "$work/train.pickle"
has out "tidemark summary of $work/train.pickle"; has out "$peak_line"
expect 0 "summary of an RMM log" -- "$TIDEMARK" summary "$work/train.csv"
has out "${peak_line%%,*}"   # the same bytes; an RMM log knows no capacity
# Its times are times of day, without a date: the start is not known.
has out "  started    unknown (the file gives no date)"; lacks out "1970"
has out "capacity unknown"
expect 0 "summary of the sample RMM log" -- "$TIDEMARK" summary \
  "$TDM_SOURCE_DIR/tests/data/golden/sample-v1.csv"
has out "  started    unknown (the file gives no date)"; lacks out "1970"
expect 0 "view of a PyTorch pickle" -- "$TIDEMARK" view "$work/train.pickle" -o "$work/p.html"
[ -s "$work/p.html" ] || fail "view of a pickle wrote no page"
expect 0 "categories of an RMM log" -- "$TIDEMARK" categories "$work/train.csv"
expect 0 "export of a PyTorch pickle" -- "$TIDEMARK" export --format perfetto \
  -o "$work/p.json" "$work/train.pickle"
head -c 40 "$work/train.pickle" >"$work/cut.pickle"
expect 2 "truncated pickle" -- "$TIDEMARK" summary "$work/cut.pickle"
has err "importing it as pytorch"; has err "at byte"

finish "tidemark summary"
