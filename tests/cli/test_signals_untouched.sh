#!/usr/bin/env bash
# Loading tidemark leaves the program's own signal handling as it is: a
# program that looks at SIGINT and SIGTERM (sigaction) before it uses
# device memory sees what it would see without tidemark; Python under the
# preload keeps its KeyboardInterrupt (signal.getsignal(SIGINT) is its
# default_int_handler, and ^C runs except, finally and atexit).  tidemark
# takes SIGINT and SIGTERM only at the first event it records, and only
# where they are still at their default; it then still writes the exit
# snapshot on them (cli.test_spill_signals).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK SPILL_CRASH_PROG TDM_BINARY_DIR
preload=$TDM_BINARY_DIR/libtidemark_preload.so
[ -f "$preload" ] || { fail "no $preload"; finish "signals untouched"; }
cd "$work" || exit 1

# A C program (linked with libtidemark.so): before its first allocation
# both are at their default, as without tidemark; after, tidemark's.
env --default-signal=INT,TERM "$SPILL_CRASH_PROG" probe >"$work/plain.out" 2>&1
TIDEMARK_CONF="dump=$work/probe.tdm" env --default-signal=INT,TERM \
  "$SPILL_CRASH_PROG" probe >"$work/probe.out" 2>&1
has plain.out "before: SIGINT default, SIGTERM default"
has probe.out "before: SIGINT default, SIGTERM default"
has probe.out "after: SIGINT handled, SIGTERM handled"
[ -s "$work/probe.tdm" ] || fail "probe: no exit snapshot"

# (A sanitizer build's preload library cannot load into python.)
if [ -n "${TDM_SANITIZE:-}" ]; then
  echo "note: sanitizer build: the Python checks (preload) are skipped"
elif command -v python3 >/dev/null; then
  getsig='import signal; print(signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))'
  env --default-signal=INT,TERM python3 -c "$getsig" >"$work/py-plain" 2>&1
  LD_PRELOAD=$preload TIDEMARK_CONF="dump=$work/py.tdm" env --default-signal=INT,TERM \
    python3 -c "$getsig" >"$work/py-tdm" 2>&1
  has py-plain "default_int_handler"
  cmp -s "$work/py-plain" "$work/py-tdm" ||
    fail "python's signal.getsignal differs under tidemark: '$(cat "$work/py-tdm")', without: '$(cat "$work/py-plain")'"

  cat >"$work/ki.py" <<'PY'
import atexit, sys, time
atexit.register(lambda: print("atexit ran", flush=True))
try:
    print("ready", flush=True)
    time.sleep(30)
except KeyboardInterrupt:
    print("KeyboardInterrupt caught", flush=True)
    raise
finally:
    print("finally ran", flush=True)
PY
  for with in plain tdm; do
    if [ $with = tdm ]; then
      LD_PRELOAD=$preload TIDEMARK_CONF="dump=$work/ki.tdm" env --default-signal=INT,TERM \
        python3 "$work/ki.py" >"$work/ki-$with" 2>&1 &
    else
      env --default-signal=INT,TERM python3 "$work/ki.py" >"$work/ki-$with" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 200); do grep -q ready "$work/ki-$with" && break; sleep 0.05; done
    signal_until 20 INT "$pid" gone "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" -eq 130 ] || fail "python ^C ($with): exit $rc, wanted 130 (KeyboardInterrupt)"
    has "ki-$with" "KeyboardInterrupt caught"
    has "ki-$with" "finally ran"
    has "ki-$with" "atexit ran"
  done
else
  echo "note: no python3; the Python checks are skipped"
fi

finish "signals untouched"
