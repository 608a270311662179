# tests/cli/lib.sh: the prologue and helpers the shell tests in tests/cli
# share. Sourced, never run: it is not named test_*.sh, so ctest does not
# register it. A test starts with
#     . "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM ...
# naming the environment variables it needs (set by tests/CMakeLists.txt);
# a missing one fails the test at once. Then the test has
#   - bash in `set -uo pipefail` (a test may add -e itself);
#   - $work, a fresh temporary folder, removed at exit (made writable first,
#     so a test may take write permission away inside it);
#   - $fails, the count of failed checks, and the helpers below;
# and ends with `finish WHAT`, which exits 1 when any check failed.
# Checks keep going after a failure so that one run reports them all; only
# a missing precondition (no snapshot recorded) stops the test.
set -uo pipefail

for tdm_var in "$@"; do
  [ -n "${!tdm_var:-}" ] || { echo "FAIL: $tdm_var is not set"; exit 1; }
done
unset tdm_var

work=$(mktemp -d "${TMPDIR:-/tmp}/tdm-test-XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# Spill files of the programs a test kills (by default under $TMPDIR, see
# docs/spill.md) go with the test's folder, not into the machine's.
export TMPDIR="$work"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC DESCRIPTION -- COMMAND...: runs COMMAND, keeps its output in
# $work/out and $work/err, and checks its exit status (showing the start of
# both outputs when it is not RC).
expect() {
  local want=$1 what=$2; shift 3
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$what: exit $rc, wanted $want"
    sed 's/^/  stdout: /' "$work/out" | head -n 40
    sed 's/^/  stderr: /' "$work/err" | head -n 30
  fi
}

# has FILE TEXT / lacks FILE TEXT: $work/FILE contains TEXT (a fixed
# string) or does not; has_re FILE REGEX: a line matches the extended regex.
has() { grep -qF -- "$2" "$work/$1" || fail "$1 lacks '$2'"; }
lacks() { ! grep -qF -- "$2" "$work/$1" || fail "$1 has '$2'"; }
has_re() { grep -qE -- "$2" "$work/$1" || fail "$1 lacks /$2/"; }

# record FILE[,KEY=VAL...] ARGS...: runs $TRAIN_SIM ARGS with
# TIDEMARK_CONF=dump=FILE[,KEY=VAL...], its output in $work/train.log. A
# failed run or a missing snapshot stops the test: what follows needs it.
record() {
  local conf=$1 f=${1%%,*}; shift
  TIDEMARK_CONF="dump=$conf" "$TRAIN_SIM" "$@" >"$work/train.log" 2>&1 ||
    { cat "$work/train.log"; fail "train_sim $* (dump=$conf) failed"; exit 1; }
  [ -s "$f" ] || { cat "$work/train.log"; fail "train_sim $* wrote no $f"; exit 1; }
}

# need_python: the test cannot check its output without python3.
need_python() {
  command -v python3 >/dev/null || { echo "FAIL: python3 is needed"; exit 1; }
}

# record_at FILE TYPE...: the byte offset of FILE's first record of one of
# the TYPEs (docs/format.md §3: 7 events, 14 events_zstd), read off the
# envelopes; empty when there is none.
record_at() {
  need_python
  python3 - "$@" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
want = {int(t) for t in sys.argv[2:]}
def uint(p):
    b = data[p]
    if b < 0x80:
        return b, p + 1
    n = {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8}[b]
    return int.from_bytes(data[p + 1:p + 1 + n], "big"), p + 1 + n
p = 1 + 9                       # the signature's array header and "tidemark"
p = uint(uint(p)[1])[1]         # major, minor
while p < len(data):
    at = p
    typ, p = uint(p + 1)        # past the record's array header
    n = {0xc4: 1, 0xc5: 2, 0xc6: 4}[data[p]]
    length = int.from_bytes(data[p + 1:p + 1 + n], "big")
    if typ in want:
        print(at)
        break
    p = uint(p + 1 + n + length)[1]
PY
}

# skip_in_sanitizer_build: exit 77 (ctest's SKIPPED) in an ASan or TSan
# build, whose library cannot load into an uninstrumented process.
skip_in_sanitizer_build() {
  if [ -n "${TDM_SANITIZE:-}" ]; then
    echo "skipped: a sanitizer build's library cannot load into an uninstrumented process"
    exit 77
  fi
}

# gone PID: the process has ended (bash reaps its own background jobs, so
# an ended child is no longer there for kill -0).
gone() { ! kill -0 "$1" 2>/dev/null; }

# signal_until SECONDS SIG PID CMD...: sends SIG to PID (a negative PID: to
# that process group) and waits up to SECONDS for CMD to succeed: 0 once it
# does, 1 if it never did.  In a ThreadSanitizer build the signal goes once
# more when CMD has not succeeded by half the time: TSan's runtime takes
# every asynchronous signal and hands it to the program later, and now and
# then it loses one (2 in 500 in a plain C program with no tidemark code,
# on a loaded 2-core machine).  Elsewhere a signal goes once: a lost one is
# a defect the test must see.
signal_until() {
  local secs=$1 sig=$2 pid=$3 i
  shift 3
  kill -s "$sig" -- "$pid" 2>/dev/null
  for ((i = 0; i < secs * 10; i++)); do
    "$@" && return 0
    if [ "${TDM_SANITIZE:-}" = thread ] && [ "$i" -eq $((secs * 5)) ]; then
      echo "note: SIG$sig to $pid had no effect after $((secs / 2)) s under TSan; sent again"
      kill -s "$sig" -- "$pid" 2>/dev/null
    fi
    sleep 0.1
  done
  "$@"
}

# finish WHAT: the test's verdict from $fails.
finish() {
  [ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  echo "ok: $1"
}
