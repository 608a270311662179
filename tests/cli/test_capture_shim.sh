#!/usr/bin/env bash
# bench/traces' capture shim (LD_PRELOAD): posix_memalign requests of c10's
# alignment (64) become alloc rows and their frees free rows with the same
# id and size; other alignments, malloc and frees of pointers it did not
# log are left out; phase rows come from tidemark_capture_phase; the file
# appears under its name only when the process exits, and replays.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TDM_BINARY_DIR
need_python
shim=$TDM_BINARY_DIR/bench/libtdm_trace_capture.so
[ -f "$shim" ] || { echo "skipped: no $shim (benchmarks not built)"; exit 77; }
skip_in_sanitizer_build

cat >"$work/prog.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def memalign(alignment, size):
    p = ctypes.c_void_p()
    rc = libc.posix_memalign(ctypes.byref(p), ctypes.c_size_t(alignment), ctypes.c_size_t(size))
    assert rc == 0
    return p.value
libc.tidemark_capture_phase(b"init")
a = memalign(64, 1000)
b = memalign(64, 3 << 20)
c = memalign(256, 4096)          # another library's buffer: not logged
m = libc.malloc(777)             # the interpreter's malloc: not logged
libc.tidemark_capture_phase(b"forward")
libc.free(a)
libc.free(c)
libc.free(m)
# The error code of a refused request reaches the caller unchanged.
p = ctypes.c_void_p()
print("einval", libc.posix_memalign(ctypes.byref(p), ctypes.c_size_t(3), ctypes.c_size_t(8)))
# Not yet renamed: the trace is written to a temporary until exit.
print("early", os.path.exists(sys.argv[1]))
PY
expect 0 "python under the shim" -- env TDM_CAPTURE_OUT="$work/t.csv" LD_PRELOAD="$shim" \
  python3 "$work/prog.py" "$work/t.csv"
has out "einval 22"
has out "early False"
[ -f "$work/t.csv" ] || fail "no trace written"
[ ! -e "$work/t.csv.tmp" ] || fail "the temporary was left behind"
# Rows without time: what was logged, in order.
grep -v '^#' "$work/t.csv" | awk -F, 'NR == 1 { print; next } { print $1 "," $3 "," $4 "," $5 }' \
  >"$work/rows"
cat >"$work/want" <<'ROWS'
action,time_ns,id,size,category
phase,,,init
alloc,1,1000,
alloc,2,3145728,
phase,,,forward
free,1,1000,
ROWS
diff "$work/want" "$work/rows" >/dev/null || { fail "rows differ"; diff "$work/want" "$work/rows"; }
# Times never go back.
python3 - "$work/t.csv" <<'PY' || fail "time_ns decreases"
import sys
t = [int(l.split(",")[1]) for l in open(sys.argv[1]) if l[0] in "afp" and not l.startswith("action")]
sys.exit(0 if t == sorted(t) else 1)
PY
# The file is a trace tidemark reads: one allocation still live at the end.
expect 0 "replay of the captured trace" -- "$TIDEMARK" replay --json "$work/t.csv"
has out '"allocations":2'
finish "capture shim"
