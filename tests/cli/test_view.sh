#!/usr/bin/env bash
# `tidemark view` from the command line (the page itself is tested in a
# browser by tests/browser/view_test.js): help, usage errors and exit
# codes, the default output name, a truncated snapshot (page written, exit
# 2), an unwritable output (exit 4, nothing left behind), a snapshot
# whose text tries to close the page's <script> element, and the layouts:
# one, two side by side, the ranks of a job (a directory, more than two
# files, --ranks) sorted by rank with unreadable files left out.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/train.tdm" --steps 2

expect 0 "help view" -- "$TIDEMARK" help view
has out "usage: tidemark view"; has out "side by side"; has out "--ranks"
expect 0 "--help lists view" -- "$TIDEMARK" --help
has out "view"
expect 1 "no file" -- "$TIDEMARK" view
has err "no snapshot file given"
expect 1 "bad --device" -- "$TIDEMARK" view --device x "$work/train.tdm"
expect 1 "unknown option" -- "$TIDEMARK" view --frobnicate "$work/train.tdm"
expect 1 "-o without value" -- "$TIDEMARK" view "$work/train.tdm" -o
expect 2 "missing file" -- "$TIDEMARK" view "$work/nope.tdm" -o "$work/nope.html"
[ ! -e "$work/nope.html" ] || fail "a page was written for a missing file"

# default output: FILE.tdm -> FILE.html, next to it
expect 0 "default output" -- "$TIDEMARK" view "$work/train.tdm"
[ -s "$work/train.html" ] || fail "no $work/train.html"
has err "wrote $work/train.html"; has err "bytes per event"
lacks out "wrote" # (diagnostics go to stderr)
grep -q '<script type="application/json" id="tdm-data">{"generator":"tidemark' "$work/train.html" ||
  fail "page lacks its data"
[ "$(stat -c %a "$work/train.html")" = 600 ] || fail "page is not private (0600)"

# truncated: shown up to the cut, exit 2, with a warning
size=$(stat -c %s "$work/train.tdm")
head -c $((size * 2 / 3)) "$work/train.tdm" >"$work/cut.tdm"
expect 2 "truncated file" -- "$TIDEMARK" view "$work/cut.tdm" -o "$work/cut.html"
has err "truncated at byte"
[ -s "$work/cut.html" ] || fail "no page for a truncated file"
grep -q '"truncated_at":[1-9]' "$work/cut.html" || fail "page does not say it was truncated"

# unwritable output folder: exit 4 and no temporary file left
mkdir "$work/ro" && chmod a-w "$work/ro"
if [ "$(id -u)" -ne 0 ]; then
  expect 4 "unwritable output" -- "$TIDEMARK" view "$work/train.tdm" -o "$work/ro/v.html"
  [ -z "$(ls -A "$work/ro")" ] || fail "left files in an unwritable folder"
fi
# -o DIR/ writes DIR/FILE.html: refused (exit 4) where DIR cannot be written
if [ "$(id -u)" -ne 0 ]; then
  expect 4 "output into an unwritable folder" -- "$TIDEMARK" view "$work/train.tdm" -o "$work/ro/"
  [ -z "$(ls -A "$work/ro")" ] || fail "left files in an unwritable folder"
fi

# text from the snapshot cannot close the page's <script> element
mkdir -p "$work/x</script><script>alert(1)"
evil="$work/x</script><script>alert(1)/e.tdm"
record "$evil" --steps 1
expect 0 "hostile path" -- "$TIDEMARK" view "$evil" -o "$work/evil.html"
n=$(grep -o '</script' "$work/evil.html" | wc -l)
[ "$n" -eq 2 ] || fail "page has $n '</script' (wanted 2: the data's and the code's)"
grep -qF 'x\u003c/script\u003e\u003cscript\u003ealert(1)' "$work/evil.html" || fail "path not escaped"

# two snapshots side by side
expect 0 "two snapshots" -- "$TIDEMARK" view "$work/train.tdm" "$evil" -o "$work/two.html"
[ "$(grep -o '"data_format":1' "$work/two.html" | wc -l)" -eq 2 ] || fail "two.html lacks two snapshots"

grep -q '"layout":"panels"' "$work/two.html" || fail "two files are not laid out side by side"

# ---- the ranks of a job ------------------------------------------------------------
# Ranks 2, 10 and 1: their files' name order (r1, r10, r2) is not rank order.
mkdir "$work/job"
for r in 2 10 1; do
  RANK=$r WORLD_SIZE=11 TIDEMARK_CONF="dump=$work/job/r%r.tdm" "$TRAIN_SIM" --steps 1 \
    --layers 2 --hidden $((256 + 64 * r)) --compute-us 0 >/dev/null 2>&1 || fail "rank $r did not record"
done
# the ranks of the page's snapshots, in order
ranks_of() { grep -o '"header":{"format_version":[0-9]*,"tool":"[^"]*","host":"[^"]*","pid":[0-9]*,"rank":-\?[0-9]*' "$1" |
  sed 's/.*"rank"://' | tr '\n' ' '; }
expect 0 "a directory" -- "$TIDEMARK" view "$work/job"
has err "wrote $work/job.html"; has err "3 ranks on one time axis"
grep -q '"layout":"ranks"' "$work/job.html" || fail "job.html is not laid out as ranks"
[ "$(ranks_of "$work/job.html")" = "1 2 10 " ] || fail "ranks not in rank order: $(ranks_of "$work/job.html")"
expect 0 "a trailing slash" -- "$TIDEMARK" view "$work/job/" -o "$work/job2.html"
[ "$(ranks_of "$work/job2.html")" = "1 2 10 " ] || fail "job/ differs from job"
expect 0 "three files" -- "$TIDEMARK" view "$work/job/r10.tdm" "$work/job/r2.tdm" "$work/train.tdm" \
  -o "$work/three.html"
grep -q '"layout":"ranks"' "$work/three.html" || fail "three files are not laid out as ranks"
# a file without a rank comes after the ranked ones
[ "$(ranks_of "$work/three.html")" = "2 10 -1 " ] || fail "three files: $(ranks_of "$work/three.html")"
expect 0 "--ranks with two" -- "$TIDEMARK" view --ranks "$work/job/r2.tdm" "$work/job/r1.tdm" -o "$work/r2.html"
grep -q '"layout":"ranks"' "$work/r2.html" || fail "--ranks ignored"
[ "$(ranks_of "$work/r2.html")" = "1 2 " ] || fail "--ranks order: $(ranks_of "$work/r2.html")"
expect 0 "two, compared" -- "$TIDEMARK" view "$work/job/r2.tdm" "$work/job/r1.tdm" -o "$work/c2.html"
[ "$(ranks_of "$work/c2.html")" = "2 1 " ] || fail "a comparison keeps the order given"
# an unreadable rank is left out of the ranks (exit 2); a comparison needs both
cp "$work/job/r1.tdm" "$work/bad.tdm" && printf 'junk' | dd of="$work/bad.tdm" conv=notrunc 2>/dev/null
expect 2 "a bad rank" -- "$TIDEMARK" view "$work/job" "$work/bad.tdm" "$work/gone.tdm" -o "$work/bad.html"
has err "gone.tdm"; has err "bad.tdm"
[ "$(ranks_of "$work/bad.html")" = "1 2 10 " ] || fail "bad rank: $(ranks_of "$work/bad.html")"
expect 2 "a bad comparison" -- "$TIDEMARK" view "$work/job/r1.tdm" "$work/gone.tdm" -o "$work/badc.html"
[ ! -e "$work/badc.html" ] || fail "a comparison with a missing file wrote a page"
mkdir "$work/empty"
expect 2 "a directory without snapshots" -- "$TIDEMARK" view "$work/empty" -o "$work/e.html"
has err "no .tdm snapshot"
expect 1 "a directory without a name" -- "$TIDEMARK" view /
has err "name the page with -o"
# the page's folders are made when missing
expect 0 "into a new folder" -- "$TIDEMARK" view "$work/train.tdm" -o "$work/pages/run1/view.html"
[ -s "$work/pages/run1/view.html" ] || fail "no page in the new folder"

# ---- run folders: one snapshot each is that snapshot, two folders are A/B ----------
mkdir -p "$work/runA" "$work/runB"
TIDEMARK_CONF="dump=$work/runA/tidemark-h-11.tdm" "$TRAIN_SIM" --steps 1 >/dev/null 2>&1 || fail "runA"
TIDEMARK_CONF="dump=$work/runB/tidemark-h-12.tdm" "$TRAIN_SIM" --steps 2 >/dev/null 2>&1 || fail "runB"
expect 0 "a run folder of one snapshot" -- "$TIDEMARK" view "$work/runA" -o "$work/runA.html"
lacks err "on one time axis"
grep -q '"layout":"panels"' "$work/runA.html" || fail "a folder of one snapshot is laid out as ranks"
grep -q '"label":"runA"' "$work/runA.html" || fail "the folder's snapshot is not labelled by the folder"
expect 0 "two run folders" -- "$TIDEMARK" view "$work/runA" "$work/runB/" -o "$work/ab.html"
lacks err "ranks"; has err "runA vs runB"
grep -q '"layout":"panels"' "$work/ab.html" || fail "two run folders are not compared side by side"
[ "$(grep -o '"data_format":1' "$work/ab.html" | wc -l)" -eq 2 ] || fail "ab.html lacks two snapshots"
grep -q '"label":"runB"' "$work/ab.html" || fail "runB/ not labelled by its folder"
# a run folder of a job's ranks still gets its lanes (not labelled by
# the folder: there is one); two jobs' folders label their lanes by folder
expect 0 "a folder of ranks" -- "$TIDEMARK" view "$work/job" -o "$work/job3.html"
has err "3 ranks on one time axis"
lacks job3.html '"label":"job"'
cp -r "$work/job" "$work/jobB"
expect 0 "two folders of ranks" -- "$TIDEMARK" view "$work/job" "$work/jobB" -o "$work/jobs.html"
has err "6 ranks on one time axis"
[ "$(grep -o '"label":"job"' "$work/jobs.html" | wc -l)" -eq 3 ] || fail "job's lanes not labelled by its folder"
[ "$(grep -o '"label":"jobB"' "$work/jobs.html" | wc -l)" -eq 3 ] || fail "jobB's lanes not labelled by its folder"

finish "tidemark view"
