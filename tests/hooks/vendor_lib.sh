# tests/hooks/vendor_lib.sh: what the vendor hook tests that run one
# scenario per call share (hip/test_hip.sh, ze/test_ze.sh); sourced, never
# run.  A test starts with
#     . "${BASH_SOURCE[0]%/*}/../vendor_lib.sh" "$1"
# and then has: $scenario; $T, a temporary folder removed at exit; fail
# (which ends the test); $PRELOAD with the sanitizer runtime put first in
# a sanitizer build; and the checks below.  Needs PRELOAD, SNAPCHECK and
# EXPECT_DIR in the environment (from CMake).
set -u
scenario=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TMPDIR="$T"   # spill files of killed programs go with it (docs/spill.md)
fail() { echo "FAIL ($scenario): $*"; exit 1; }
# In a sanitizer build the programs carry the sanitizer runtime, which
# must come first in the process: put it before the preload.
san_rt=$(ldd "$PRELOAD" 2>/dev/null | sed -n 's/.*=> \(\S*lib[at]san\.so[^ ]*\).*/\1/p' | head -n 1)
PRELOAD="${san_rt:+$san_rt:}$PRELOAD"

# same_output A B: $T/B.out (a run under tidemark) is $T/A.out.
same_output() {
    diff -u "$T/$1.out" "$T/$2.out" || fail "the program's output changed under tidemark ($2)"
}
# check_events FILE.tdm EXPECTED: the snapshot's events, as snapcheck
# prints them, are $EXPECT_DIR/EXPECTED.
# TDM_UPDATE_EXPECTED=1 rewrites the expected file instead (then read the
# diff before committing it).
check_events() {
    "$SNAPCHECK" "$1" >"$T/got.txt" || fail "snapcheck $1"
    [ -n "${TDM_UPDATE_EXPECTED:-}" ] && cp "$T/got.txt" "$EXPECT_DIR/$2"
    diff -u "$EXPECT_DIR/$2" "$T/got.txt" || fail "snapshot events differ from $2 ($1)"
}
# count FILE.tdm ACTION: how many ACTION events the snapshot holds.
count() { "$SNAPCHECK" "$1" count "$2"; }
# fake_counter NAME FILE.err: the value of NAME=... in the fake's line.
fake_counter() { sed -n "s/^fake: .*\b$1=\([0-9-]*\).*/\1/p" "$2"; }
