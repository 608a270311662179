#!/usr/bin/env bash
# One way to write shares and times (model/format_size.h) in `categories`
# and `diff`: shares as tdm__fmt_share ("12.3%", "<0.1%"), a change as a
# signed share of the reference ("+<0.1%"), times as tdm__fmt_offset
# ("+0.000144 s"); and one line and exit code (2) for a --device the file
# lacks (model/input.h) in export, view, categories and diff.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

said() {
  [ "$(cat "$work/err")" = "$1" ] || fail "stderr is not '$1': $(head -c 400 "$work/err")"
}

# ---- shares and times ------------------------------------------------------------------
# A trace whose gradient is 100 B beside 1 GiB of parameters: under 0.05%.
cat >"$work/t.csv" <<'EOF'
action,time_ns,id,size,category
alloc,1000,1,1073741824,PARAMETER
alloc,2000,2,100,GRADIENT
alloc,3000,3,536870912,ACTIVATION
free,400000,3,536870912,ACTIVATION
EOF
expect 0 "categories of a trace" -- "$TIDEMARK" categories --samples 3 "$work/t.csv"
grep -qE '^    parameter +1\.00 GiB +66\.7%$' "$work/out" || fail "parameter share is not 66.7%"
grep -qE '^    gradient +100 B +<0\.1%$' "$work/out" || fail "a 100 B share is not '<0.1%'"
grep -qE '^  at the peak: 1\.50 GiB, step 0, \+0\.000002 s from the first event$' "$work/out" || fail "peak time is not +0.000002 s"
# the over-time rows: offsets as tdm__fmt_offset writes them
[ "$(grep -cE '^ +\+[0-9]+\.[0-9]+ s +[0-9]+ ' "$work/out")" -eq 3 ] ||
  fail "over-time rows do not start with '+N.NNN s'"
grep -qE '^ +\+0\.000399 s ' "$work/out" || fail "no row at +0.000399 s"

# diff: a change of 1 B in 100000000 is "+<0.1%"; 100 -> 400 MB is "+300.0%"
rmm() {
  printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000100,allocate,0x7f0000000000,%s,0x0\n' "$1"
}
rmm 100000000 >"$work/a.csv"; rmm 100000001 >"$work/b.csv"; rmm 400000000 >"$work/c.csv"
expect 0 "diff of a tiny change" -- "$TIDEMARK" diff "$work/a.csv" "$work/b.csv"
grep -qE '^  peak allocated +95\.37 MiB +95\.37 MiB +\+1 B \(\+<0\.1%\)$' "$work/out" ||
  fail "a 1 B change is not '(+<0.1%)'"
expect 0 "diff of a big change" -- "$TIDEMARK" diff "$work/a.csv" "$work/c.csv"
grep -qE '^  peak allocated +95\.37 MiB +381\.47 MiB +\+286\.10 MiB \(\+300\.0%\)$' "$work/out" ||
  fail "a fourfold peak is not '(+300.0%)'"
expect 0 "diff reversed" -- "$TIDEMARK" diff "$work/c.csv" "$work/a.csv"
grep -qE '^  peak allocated +381\.47 MiB +95\.37 MiB +-286\.10 MiB \(-75\.0%\)$' "$work/out" ||
  fail "a quarter of the peak is not '(-75.0%)'"

# ---- --device N of a device the file lacks ------------------------------------------------
small() { "$TRAIN_SIM" --steps 1 --layers 2 --hidden 256 --compute-us 0 "$@" >/dev/null 2>&1 ||
  fail "train_sim $* failed"; }
small --dump "$work/d0.tdm"
# two simulated devices, the second used: its snapshot has devices 0 and 1
TIDEMARK_CONF=device=sim:2x4GiB,dump_on=none small --device 1 --dump "$work/d1.tdm"
mkdir "$work/job"
cp "$work/d0.tdm" "$work/job/r0.tdm"; cp "$work/d1.tdm" "$work/job/r1.tdm"
line0="has no device 5 (its devices: 0)"

expect 2 "categories --device 5" -- "$TIDEMARK" categories --device 5 "$work/d0.tdm"
said "tidemark categories: $work/d0.tdm $line0"
expect 2 "categories --device 1 of two files" -- "$TIDEMARK" categories --device 1 "$work/d0.tdm" "$work/d1.tdm"
said "tidemark categories: $work/d0.tdm has no device 1 (its devices: 0)"
has out "$work/d1.tdm"; has out "device 1 (sim"

expect 2 "export --device 5" -- "$TIDEMARK" export --format json --device 5 "$work/d0.tdm" -o "$work/x.json"
said "tidemark export: $work/d0.tdm $line0"
[ ! -e "$work/x.json" ] || fail "export --device 5 wrote x.json"
expect 2 "export --device 1 of two ranks" -- "$TIDEMARK" export -q --format json --device 1 "$work/job" \
  -o "$work/ex/"
said "tidemark export: $work/job/r0.tdm has no device 1 (its devices: 0)"
[ -s "$work/ex/r1.model.json" ] || fail "export --device 1 did not write r1.model.json"
[ ! -e "$work/ex/r0.model.json" ] || fail "export --device 1 wrote r0.model.json"
expect 2 "export --device 1 of a merged trace" -- "$TIDEMARK" export -q --format perfetto --device 1 \
  "$work/job" -o "$work/all.json"
said "tidemark export: $work/job/r0.tdm has no device 1 (its devices: 0)"

expect 2 "view --device 5" -- "$TIDEMARK" view --device 5 "$work/d0.tdm" -o "$work/v.html"
said "tidemark view: $work/d0.tdm $line0"
[ ! -e "$work/v.html" ] || fail "view --device 5 wrote a page"
expect 2 "view --device 1 side by side, one lacking it" -- "$TIDEMARK" view --device 1 "$work/d0.tdm" \
  "$work/d1.tdm" -o "$work/v.html"
said "tidemark view: $work/d0.tdm has no device 1 (its devices: 0)"
# the ranks' lanes show their own device when theirs lacks it: only none is an error
expect 0 "view --device 1 of ranks" -- "$TIDEMARK" view --device 1 "$work/job" -o "$work/r.html"
expect 2 "view --device 5 of ranks" -- "$TIDEMARK" view --device 5 "$work/job" -o "$work/r5.html"
has err "tidemark view: $work/job/r0.tdm $line0"
has err "tidemark view: $work/job/r1.tdm has no device 5 (its devices: 0, 1)"

expect 2 "summary --device 5" -- "$TIDEMARK" summary --device 5 "$work/d0.tdm"
said "tidemark summary: $work/d0.tdm $line0"
[ ! -s "$work/out" ] || fail "summary --device 5 printed a summary"
expect 2 "summary --device 1 of ranks, one lacking it" -- "$TIDEMARK" summary --device 1 "$work/job"
said "tidemark summary: $work/job/r0.tdm has no device 1 (its devices: 0)"
has out "$work/job/r1.tdm"

# diff: a device in one file only is compared with nothing; in neither, an error
expect 0 "diff --device 1, in B only" -- "$TIDEMARK" diff --device 1 "$work/d0.tdm" "$work/d1.tdm"
has out "device 1 (sim1): only in B"
expect 2 "diff --device 5" -- "$TIDEMARK" diff --device 5 "$work/d0.tdm" "$work/d1.tdm"
said "tidemark diff: $work/d0.tdm $line0
tidemark diff: $work/d1.tdm has no device 5 (its devices: 0, 1)"
[ ! -s "$work/out" ] || fail "diff --device 5 printed a diff"

finish "shares, times and --device, one way"
