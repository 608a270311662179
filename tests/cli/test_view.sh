#!/usr/bin/env bash
# `tidemark view` from the command line (the page itself is tested in a
# browser by tests/browser/view_test.js): help, usage errors and exit
# codes, the default output name, a truncated snapshot (page written, exit
# 2), an unwritable output (exit 4, nothing left behind), and a snapshot
# whose text tries to close the page's <script> element.
set -uo pipefail
: "${TIDEMARK:?}" "${TRAIN_SIM:?}"
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC DESCRIPTION -- COMMAND...
expect() {
  local want=$1 what=$2; shift 3
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$what: exit $rc, wanted $want"
    sed 's/^/  stdout: /' "$work/out" | head -n 10
    sed 's/^/  stderr: /' "$work/err" | head -n 10
  fi
}
has() { grep -qF -- "$2" "$work/$1" || fail "$1 lacks '$2'"; }

TIDEMARK_CONF="dump=$work/train.tdm" "$TRAIN_SIM" --steps 2 >/dev/null 2>&1 ||
  fail "train_sim could not record"

expect 0 "help view" -- "$TIDEMARK" help view
has out "usage: tidemark view"; has out "side by side"
expect 0 "--help lists view" -- "$TIDEMARK" --help
has out "view"
expect 1 "no file" -- "$TIDEMARK" view
has err "no snapshot file given"
expect 1 "three files" -- "$TIDEMARK" view "$work/train.tdm" "$work/train.tdm" "$work/train.tdm"
has err "at most two"
expect 1 "bad --device" -- "$TIDEMARK" view --device x "$work/train.tdm"
expect 1 "unknown option" -- "$TIDEMARK" view --frobnicate "$work/train.tdm"
expect 1 "-o without value" -- "$TIDEMARK" view "$work/train.tdm" -o
expect 2 "missing file" -- "$TIDEMARK" view "$work/nope.tdm" -o "$work/nope.html"
[ ! -e "$work/nope.html" ] || fail "a page was written for a missing file"

# default output: FILE.tdm -> FILE.html, next to it
expect 0 "default output" -- "$TIDEMARK" view "$work/train.tdm"
[ -s "$work/train.html" ] || fail "no $work/train.html"
has out "wrote $work/train.html"; has out "bytes per event"
grep -q '<script type="application/json" id="tdm-data">{"generator":"tidemark' "$work/train.html" ||
  fail "page lacks its data"
[ "$(stat -c %a "$work/train.html")" != 600 ] || fail "page is private (mkstemp mode leaked)"

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
expect 4 "output is a folder" -- "$TIDEMARK" view "$work/train.tdm" -o "$work/ro/"

# text from the snapshot cannot close the page's <script> element
mkdir -p "$work/x</script><script>alert(1)"
evil="$work/x</script><script>alert(1)/e.tdm"
TIDEMARK_CONF="dump=$evil" "$TRAIN_SIM" --steps 1 >/dev/null 2>&1 || fail "train_sim could not record to $evil"
expect 0 "hostile path" -- "$TIDEMARK" view "$evil" -o "$work/evil.html"
n=$(grep -o '</script' "$work/evil.html" | wc -l)
[ "$n" -eq 2 ] || fail "page has $n '</script' (wanted 2: the data's and the code's)"
grep -qF 'x\u003c/script\u003e\u003cscript\u003ealert(1)' "$work/evil.html" || fail "path not escaped"

# two snapshots side by side
expect 0 "two snapshots" -- "$TIDEMARK" view "$work/train.tdm" "$evil" -o "$work/two.html"
[ "$(grep -o '"data_format":1' "$work/two.html" | wc -l)" -eq 2 ] || fail "two.html lacks two snapshots"

[ "$fails" -eq 0 ] && echo "test_view: all passed"
exit $((fails > 0))
