#!/bin/bash
# tests/simcuda/test_nvcc.sh: plain CUDA programs built by nvcc on the
# simulated platform.  With -cudart shared, the program binds to the
# simulated runtime (every function NVIDIA's libcudart.so.13 exports is
# there, simulated or a stub), runs (kernels accepted, copies real), and
# `tidemark run --simulate h100` records every allocation: its peak is the
# program's own.  The same with nvcc's default (NVIDIA's runtime linked in
# statically): the platform sends the program's runtime entry points to
# the simulated runtime as it loads (simcuda/runtime/runtime_static.c), so
# NVIDIA's runtime, which would ask the driver for private tables, is
# never entered (docs/simulate.md).  Skipped (77) without nvcc, and in
# sanitizer builds.
set -uo pipefail
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
[ -x "$NVCC" ] || { echo "no nvcc at $NVCC: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
SRC=$TDM_SOURCE_DIR/tests/simcuda/nvcc_prog.cu
"$NVCC" -cudart shared -o prog_shared "$SRC" || fail "nvcc -cudart shared"
"$NVCC" -o prog_static "$SRC" || fail "nvcc"

out=$(LD_PRELOAD="$SIMCUDA_PRELOAD" SIMCUDA_TRACE=trace ./prog_shared 2>&1) || fail "prog_shared: $out"
grep -qx ok <<<"$out" || fail "prog_shared: $out"
peak=$(sed -n 's/^peak //p' <<<"$out")
n=$(grep -c '^malloc ' trace)
[ "$n" = 8 ] || fail "the platform saw $n cudaMalloc calls, want 8: $(cat trace)"
echo "ok: nvcc -cudart shared: runs on the platform, copies real, 8 allocations"

"$TIDEMARK" run --simulate h100 -q -o out -- ./prog_shared >log 2>&1 || fail "tidemark run: $(cat log)"
"$TIDEMARK" summary --bytes --device 0 out/*.tdm >sum 2>&1 || fail "summary: $(cat sum)"
got=$(sed -n 's/.*peak allocated .* (\([0-9]*\) B).*/\1/p' sum | head -1)
[ "$got" = "$peak" ] || fail "tidemark's peak '$got' B, the program's $peak B: $(cat sum)"
echo "ok: tidemark run --simulate h100 records the program's peak, $got B"

# nvcc's default: NVIDIA's runtime linked in; the platform sends the
# program's runtime entry points to the simulated runtime as it loads.
rm -f trace
out=$(LD_PRELOAD="$SIMCUDA_PRELOAD" SIMCUDA_TRACE=trace SIMCUDA_LOG=1 ./prog_static 2>&1) ||
    fail "prog_static: $out"
grep -qx ok <<<"$out" || fail "prog_static: $out"
grep -q 'static runtime: [0-9]* of the program.s [0-9]* runtime entry points go to the simulated runtime' <<<"$out" ||
    fail "prog_static: the log does not say where its runtime went: $out"
! grep -q cuGetExportTable <<<"$out" || fail "prog_static: NVIDIA's runtime asked for the driver's private tables: $out"
speak=$(sed -n 's/^peak //p' <<<"$out")
n=$(grep -c '^malloc ' trace)
[ "$n" = 8 ] && [ "$speak" = "$peak" ] ||
    fail "static runtime: the platform saw $n cudaMalloc calls (want 8), peak $speak (want $peak): $(cat trace)"
echo "ok: nvcc (static runtime): runs on the platform, 8 allocations, the same peak"
rm -rf out
"$TIDEMARK" run --simulate h100 -q -o out -- ./prog_static >log 2>&1 || fail "tidemark run static: $(cat log)"
"$TIDEMARK" summary --bytes --device 0 out/*.tdm >sum 2>&1 || fail "summary: $(cat sum)"
got=$(sed -n 's/.*peak allocated .* (\([0-9]*\) B).*/\1/p' sum | head -1)
[ "$got" = "$peak" ] || fail "static runtime: tidemark's peak '$got' B, the program's $peak B: $(cat sum)"
echo "ok: tidemark run --simulate h100 records the static program's peak, $got B"
