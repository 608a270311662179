#!/usr/bin/env bash
# `tidemark gate` end to end on recordings of the demo ($TRAIN_SIM): every
# exit path (0 pass, 3 each gate failing, 2 bad input, 1 usage, 4 tool
# error), the failure report (the verdict first: gate, figure, limit,
# excess, file and device; then limit, peak, when, sites with stacks, at
# most ~30 lines), JUnit XML (well-formed per python3's xml.etree, one testcase
# per gate per file, escaped names) and GitHub annotation lines; and gates
# on files `tidemark import` formats (an RMM log, a PyTorch pickle) read
# directly.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
small=$work/small.tdm
big=$work/big.tdm
record "$small" --steps 3 --hidden 512
record "$big" --steps 3 --hidden 1024
# The figures as `tidemark summary` gives them, to set limits around.
fig() { # fig FILE LABEL: the exact byte count summary prints on that line
  "$TIDEMARK" summary "$1" | sed -n "s/^  $2 .*(\([0-9]*\) B).*/\1/p" | head -n 1
}
peak=$(fig "$small" "peak allocated")
live=$(fig "$small" "live at end   ")
reserved=$("$TIDEMARK" summary "$small" | sed -n 's/.*reserved \([0-9.]*\) MiB now, \([0-9.]*\) MiB peak$/\2/p')
[ -n "$peak" ] && [ -n "$live" ] && [ -n "$reserved" ] ||
  { fail "cannot read the figures (peak '$peak', live '$live', reserved '$reserved')"; exit 1; }

# ---- help and usage: exit 1 --------------------------------------------------
expect 0 "help gate" -- "$TIDEMARK" help gate
has out "usage: tidemark gate"; has out "--max-peak SIZE"; has out "--junit FILE"
expect 1 "no gate" -- "$TIDEMARK" gate "$small"
has err "no gate given"; has err "tidemark help gate"
expect 1 "no file" -- "$TIDEMARK" gate --max-peak 1G
has err "no snapshot file given"
expect 1 "bad size" -- "$TIDEMARK" gate --max-peak lots "$small"
has err "--max-peak needs a size"
expect 1 "growth without baseline" -- "$TIDEMARK" gate --max-growth 5 "$small"
has err "--baseline"
expect 1 "baseline without growth" -- "$TIDEMARK" gate --baseline "$small" "$small"
expect 1 "negative growth" -- "$TIDEMARK" gate --baseline "$small" --max-growth -3 "$small"
expect 1 "unknown option" -- "$TIDEMARK" gate --max-peek 1G "$small"
has err "unknown option '--max-peek'"
expect 1 "missing value" -- "$TIDEMARK" gate "$small" --max-peak

# ---- every gate passing: exit 0 ----------------------------------------------
expect 0 "all gates pass at their exact figures" -- "$TIDEMARK" gate --max-peak "$peak" \
  --max-leak "$live" --max-reserved 1GiB --baseline "$small" --max-growth 0 "$small"
for g in max-peak max-reserved max-leak max-growth; do
  grep -qE "^PASS +$g +$small, device 0 \(sim0\): " "$work/out" || fail "no PASS line for $g"
done
has out "gates: 4 passed, 0 failed"
lacks out "FAILED"

# ---- each gate failing: exit 3 and the report ---------------------------------
# block NAME: the detail block of a failure, from its heading to the blank line
block() { sed -n "/^$1 FAILED: /,/^\$/p" "$work/out"; }
expect 3 "max-peak one byte under" -- "$TIDEMARK" gate --max-peak $((peak - 1)) "$small"
grep -qE "^max-peak FAILED: peak .* > limit .* \(1 B, 0\.0% over\)$" "$work/out" ||
  fail "no verdict line for max-peak"
has out "  on         $small, device 0 (sim0)"
block max-peak >"$work/block"
n=$(wc -l <"$work/block")
[ "$n" -ge 8 ] && [ "$n" -le 31 ] || fail "max-peak report is $n lines (8..30 expected)"
has block "  limit      "; has block "($((peak - 1)) B)"; has block "($peak B), 1 B"
grep -qE "^  when +\+[0-9.]+ s from the recording's start \(event [0-9]+\), step [0-9]+, phase [a-z_]+$" "$work/block" ||
  fail "no 'when' line with step and phase"
has block "top allocation sites live at the peak"
has block "train_sim.c:"; lacks block "tdm_malloc"
[ "$(grep -c 'train_sim.c:' "$work/block")" -ge 6 ] || fail "sites come without stacks"
has out "gates: 0 passed, 1 failed"

expect 3 "max-leak" -- "$TIDEMARK" gate --max-leak $((live - 1)) "$small"
block max-leak >"$work/block"
has block "  live       "; has block "at exit, when the snapshot was taken"
has block "top allocation sites live at exit"; has block "init_parameters"

expect 3 "max-reserved" -- "$TIDEMARK" gate --max-reserved 1MiB "$small"
block max-reserved >"$work/block"
has block "over (reserved bytes)"; has block "top allocation sites live at the reserved peak"

expect 3 "max-growth" -- "$TIDEMARK" gate --baseline "$small" --max-growth 10 "$big"
grep -qE "^max-growth FAILED: peak .*, baseline .*: \+[0-9.]+% > limit \+10.0%" \
  "$work/out" || fail "no verdict line for max-growth"
has out "  on         $big, device 0 (sim0)"
block max-growth >"$work/block"
has block "  baseline   "; has block " in $small"; has block "limit +10.0%"
has block "  what grew  tidemark diff $small $big"
expect 0 "shrinking passes max-growth 0" -- "$TIDEMARK" gate --baseline "$big" --max-growth 0 "$small"

# Several failures: the first in full, every other one a line, the worst
# code wins.
expect 3 "three gates fail on two files" -- "$TIDEMARK" gate --max-peak 1M --max-leak 1M "$small" "$big"
[ "$(grep -c '^FAIL ' "$work/out")" -eq 3 ] || fail "3 FAIL lines expected after the verdict"
[ "$(grep -c ' FAILED: ' "$work/out")" -eq 1 ] || fail "the first failure only in full"
has out "gates: 0 passed, 4 failed"
n=$(wc -l < "$work/out")
[ "$n" -le 36 ] || fail "4 failures on 2 files print $n lines (status lines + about 30)"

# --device
expect 0 "--device 0" -- "$TIDEMARK" gate --device 0 --max-peak 1G "$small"
expect 2 "--device no file has" -- "$TIDEMARK" gate --device 5 --max-peak 1G "$small"
has err "tidemark gate: $small has no device 5 (its devices: 0)"

# ---- bad input: exit 2 (a failed gate still outranks it: 3) ---------------------
expect 2 "missing file" -- "$TIDEMARK" gate --max-peak 1G "$work/none.tdm"
has err "none.tdm"; has out "ERROR max-peak"
printf 'not a snapshot at all\n' >"$work/junk.tdm"
expect 2 "corrupt file" -- "$TIDEMARK" gate --max-peak 1G "$work/junk.tdm" "$small"
has out "PASS  max-peak     $small"
expect 2 "missing baseline" -- "$TIDEMARK" gate --baseline "$work/none.tdm" --max-growth 5 "$small"
has out "the baseline could not be read"
# A file cut in its last record still has its history: gated, and exit 2.
size=$(stat -c %s "$small")
head -c $((size - 2)) "$small" >"$work/cut.tdm"
expect 2 "truncated, passing" -- "$TIDEMARK" gate --max-peak 1G "$work/cut.tdm"
has err "truncated at byte"; has out "PASS  max-peak"
expect 3 "truncated, failing" -- "$TIDEMARK" gate --max-peak 1K "$work/cut.tdm"
# Cut inside its events, nothing is left to measure: an error, not a pass.
ev=$(record_at "$small" 7 14)
[ -n "$ev" ] || fail "$small has no events record"
head -c $((ev + 4)) "$small" >"$work/cut2.tdm"
expect 2 "truncated before the events" -- "$TIDEMARK" gate --max-peak 1G "$work/cut2.tdm"
has out "ERROR max-peak"; has out "1 could not be checked"

# ---- tool error: exit 4 -------------------------------------------------------
# (A missing folder is made, as -o's; a path through a file cannot be.)
: >"$work/afile"
expect 4 "unwritable --junit" -- "$TIDEMARK" gate --max-peak 1G --junit "$work/afile/j.xml" "$small"
has err "cannot write"
expect 0 "--junit into folders to make" -- "$TIDEMARK" gate --max-peak 1G --junit "$work/no/such/dir/j.xml" "$small"
[ -s "$work/no/such/dir/j.xml" ] || fail "--junit no/such/dir/j.xml was not written"

# ---- JUnit XML ----------------------------------------------------------------
odd="$work/a&b<c> \"q\".tdm"
cp "$small" "$odd"
expect 3 "junit" -- "$TIDEMARK" gate --max-peak "$peak" --max-leak 1K --junit "$work/j.xml" \
  "$odd" "$big" "$work/none.tdm"
python3 - "$work/j.xml" "$odd" "$big" "$peak" <<'EOF' || fail "JUnit XML checks"
import sys, xml.etree.ElementTree as ET
path, odd, big, peak = sys.argv[1:]
root = ET.parse(path).getroot()
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1 and suites[0].get("name") == "tidemark gate"
cases = suites[0].findall("testcase")
# one per gate per file: 2 gates x 3 files
assert len(cases) == 6, len(cases)
assert suites[0].get("tests") == "6"
by = {(c.get("file"), c.get("name")): c for c in cases}
assert (odd, "max-peak") in by, sorted(by)
ok = by[(odd, "max-peak")]
assert ok.find("failure") is None and ok.find("error") is None
assert "<= limit" in ok.find("system-out").text
assert ok.get("classname") == "tidemark.a&b<c> \"q\"", ok.get("classname")
f = by[(big, "max-peak")].find("failure")
assert f is not None and f.get("type") == "max-peak"
assert f.get("message").startswith("device 0: peak "), f.get("message")
assert "max-peak FAILED: " in f.text and "train_sim.c:" in f.text and "when" in f.text
for name in ("max-peak", "max-leak"):
    e = [c for c in cases if c.get("file").endswith("none.tdm") and c.get("name") == name]
    assert len(e) == 1 and e[0].find("error") is not None, name
leaks = [c for c in cases if c.get("name") == "max-leak" and c.find("failure") is not None]
assert len(leaks) == 2, len(leaks)
assert suites[0].get("failures") == "3" and suites[0].get("errors") == "2", suites[0].attrib
EOF

# ---- GitHub annotations ------------------------------------------------------
expect 3 "github" -- "$TIDEMARK" gate --github --max-peak 1M --max-leak 1G "$small" "$big"
grep '^::' "$work/out" >"$work/gh"
[ "$(wc -l <"$work/gh")" -eq 2 ] || fail "2 annotation lines expected"
grep -qE "^::error title=tidemark max-peak \(device 0\)::$small: peak [0-9.]+ MiB > limit 1.00 MiB \([0-9.]+ MiB, [0-9.]+%25 over\); when: .*step [0-9]+, phase [a-z_]+; top site [0-9.]+ MiB: .*train_sim.c:[0-9]+\)$" \
  "$work/gh" || { fail "annotation line format"; cat "$work/gh"; }
lacks gh "max-leak"
expect 0 "github, all passing: no annotation" -- "$TIDEMARK" gate --github --max-peak 1G "$small"
! grep -q '^::' "$work/out" || fail "annotations printed for passing gates"

# ---- other tools' files, imported in memory --------------------------------------
# An RMM log: 3 MiB then 1 MiB allocated, the 3 MiB freed; 1 MiB live at exit.
cat >"$work/rmm.csv" <<'EOF'
Thread,Time,Action,Pointer,Size,Stream
140573312345856,14:03:12.000100,allocate,0x7f8a40000000,3145728,0x0
140573312345856,14:03:12.000200,allocate,0x7f8a40400000,1048576,0x0
140573312345856,14:03:12.000300,free,0x7f8a40000000,3145728,0x0
EOF
expect 0 "rmm log, passing" -- "$TIDEMARK" gate --max-peak 4MiB --max-leak 1MiB "$work/rmm.csv"
has out "peak 4.00 MiB <= limit 4.00 MiB"; has out "live at exit 1.00 MiB <= limit 1.00 MiB"
expect 3 "rmm log, failing" -- "$TIDEMARK" gate --max-peak 3MiB "$work/rmm.csv"
has out "  on         $work/rmm.csv, device 0"
# A PyTorch snapshot pickle, as `tidemark export --format pytorch` writes it.
if "$TIDEMARK" export --format pytorch -o "$work/small.pickle" "$small" >/dev/null 2>&1 &&
   [ -s "$work/small.pickle" ]; then
  expect 3 "pytorch pickle" -- "$TIDEMARK" gate --max-peak 1MiB "$work/small.pickle"
  has out "  on         $work/small.pickle, device 0"
  expect 0 "pytorch pickle, as baseline" -- "$TIDEMARK" gate --baseline "$work/small.pickle" \
    --max-growth 1 "$small"
else
  fail "tidemark export --format pytorch did not write a pickle"
fi

finish "tidemark gate"
