# tests/hooks/infra/lib.sh: helpers shared by the shell tests of this folder
# (sourced, not run).
set -u
unset TIDEMARK_CONF
work=$(mktemp -d "${TMPDIR:-/tmp}/tdm-infra-XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work"   # spill files of killed programs go with it (docs/spill.md)
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
finish() {
    if [[ $failures -ne 0 ]]; then
        echo "$failures failure(s)" >&2
        exit 1
    fi
    echo "all ok"
    exit 0
}
# A sanitizer build's libraries need the sanitizer runtime loaded first:
# put it at the head of LD_PRELOAD lists and before python's dlopen.
san_rt=$(ldd "${LIBTIDEMARK:-/nonexistent}" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
PRE=${san_rt:+$san_rt:}${FAKE_PRELOAD:-}
if [[ -n $san_rt ]]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
# Runs python3 with the sanitizer runtime preloaded when there is one.  The
# interpreter (and the shells ctypes.util spawns, which inherit the preload)
# keep memory until exit by design, so leak checking is off for them alone.
py() {
    if [[ -n $san_rt ]]; then
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" LD_PRELOAD=$san_rt python3 "$@"
    else
        python3 "$@"
    fi
}
# The events of a snapshot as "action size stream", snapshot marks left out.
events_of() {
    "$SNAPCHECK" "$1" | awk '$1 == "event" && $2 != "snapshot" { print $2, $4, $6 }'
}
# How many lines of snapcheck's output match an extended regex.
count_of() {
    "$SNAPCHECK" "$1" | grep -cE "$2"
}
