#!/bin/bash
# tests/simcuda/test_loader.sh: the simulated platform's libraries load in
# place of NVIDIA's.  Each has the soname of the library it stands for, a
# file name that is not NVIDIA's (torch's loader looks for "libcudart.so"
# in /proc/self/maps), and exports every symbol of its committed closure
# under the version node the wheel imports it with.  A consumer linked with
# a versioned reference to libcudart.so.13, whose DT_RPATH points at a
# decoy "real" libcudart.so.13, binds to the preloaded simulated one.  When
# the venv's wheel is there, the committed closure is the one
# gen_symbols.py derives from it.
set -euo pipefail
D=$SIMCUDA_LIBDIR
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

declare -A SONAME=([libsimcuda.so]=libcuda.so.1 [libsimcudart.so]=libcudart.so.13
                   [libsimcublas.so]=libcublas.so.13 [libsimcublasLt.so]=libcublasLt.so.13
                   [libsimnvml.so]=libnvidia-ml.so.1 [libsimnccl.so]=libnccl.so.2)
for f in "${!SONAME[@]}"; do
    so=$(readelf -d "$D/$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$so" = "${SONAME[$f]}" ] || fail "$f: soname '$so', want ${SONAME[$f]}"
    case $f in libcudart.so*|libcublas*.so*|libcuda.so*|libnvidia-ml*|libnccl*) fail "$f: NVIDIA's file name";; esac
    lib=${SONAME[$f]}
    syms=$TDM_SOURCE_DIR/simcuda/symbols/$lib.syms
    # Defined dynamic symbols with their version: "name@@node" (readelf -W).
    readelf -W --dyn-syms "$D/$f" | awk '$7 != "UND" {print $8}' | sort -u > "$T/exports"
    node=$lib
    [ "$lib" = libcuda.so.1 ] && node=SIMCUDA_CORE
    [ "$lib" = libnvidia-ml.so.1 ] && node=SIMCUDA_NVML
    # NVIDIA's NCCL versions nothing: its stand-in's exports are unversioned.
    [ "$lib" = libnccl.so.2 ] && node=
    # The closure's names (with the node) that the exports lack: one set
    # difference, not a grep per symbol (thousands of processes).
    awk -v node="${node:+@@$node}" '!/^#/ && NF {print $0 node}' "$syms" | sort -u |
        comm -23 - "$T/exports" > "$T/missing"
    sed 's/^/  '"$f"' lacks /' "$T/missing"
    missing=$(wc -l < "$T/missing")
    [ "$missing" = 0 ] || fail "$f: $missing symbols of $lib's closure missing"
    n=$(grep -vc '^#' "$syms")
    echo "ok: $f soname $lib, exports all $n symbols of its closure under ${node:-no version}"
done

# Sanitizer builds: the libraries need the sanitizer's runtime first in
# the process, which an uninstrumented consumer does not have.
[ -n "${TDM_SANITIZE:-}" ] && { echo "sanitizer build: the loading checks are skipped"; exit 0; }

# A consumer with a versioned import and an RPATH to a decoy.
mkdir -p "$T/decoy"
cat > "$T/decoy.c" <<'C'
int cudaGetDeviceCount(int *n) { *n = 1234; return 0; }
int cudaGraphLaunch(void *e, void *s) { return 0; }
C
echo 'libcudart.so.13 { global: cudaGetDeviceCount; cudaGraphLaunch; local: *; };' > "$T/decoy.map"
$CC -shared -fPIC -o "$T/decoy/libcudart.so.13" "$T/decoy.c" -Wl,-soname,libcudart.so.13 \
    -Wl,--version-script="$T/decoy.map"
cat > "$T/consumer.c" <<'C'
#include <cuda_runtime_api.h>
#include <stdio.h>
int main(void) {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  /* a call the platform does not simulate answers "not supported" */
  cudaError_t g = cudaGraphLaunch(NULL, 0);
  printf("%d %d %d\n", (int)e, n, (int)g);
  return 0;
}
C
# DT_RPATH (not RUNPATH), as the wheel's libraries carry.
$CC -I"$CUDA_INCLUDE" -o "$T/consumer" "$T/consumer.c" "$T/decoy/libcudart.so.13" \
    -Wl,--disable-new-dtags -Wl,-rpath,"$T/decoy"
objdump -T "$T/consumer" | grep -q 'cudaGetDeviceCount' || fail "consumer has no cudaGetDeviceCount import"
objdump -T "$T/consumer" | grep 'cudaGetDeviceCount' | grep -q 'libcudart.so.13' || \
    fail "consumer's import is not versioned libcudart.so.13"
out=$(env -u LD_PRELOAD "$T/consumer" 2>&1 || true)
case $out in "0 1234 0") ;; *) fail "without the preload the decoy should answer: $out";; esac
out=$(LD_PRELOAD="$SIMCUDA_PRELOAD" SIMCUDA_GPU=4xa100-80g SIMCUDA_LOG=1 "$T/consumer" 2>"$T/err")
[ "$out" = "0 4 801" ] || fail "with the preload: '$out', want '0 4 801' (cudaErrorNotSupported = 801)"
grep -q 'cudaGraphLaunch is not simulated' "$T/err" || fail "the stub did not log: $(cat "$T/err")"
echo "ok: a versioned consumer with an RPATH to a decoy binds to the preloaded runtime"

# A bad SIMCUDA_GPU: one line, no device, the program goes on.
out=$(LD_PRELOAD="$SIMCUDA_PRELOAD" SIMCUDA_GPU=h999 "$T/consumer" 2>"$T/err")
[ "$out" = "100 0 801" ] || fail "SIMCUDA_GPU=h999: '$out', want cudaErrorNoDevice (100)"
[ "$(wc -l < "$T/err")" = 1 ] && grep -q "unknown GPU 'h999'" "$T/err" || fail "message: $(cat "$T/err")"
echo "ok: an unknown GPU is one line and no device"

# The committed closure is the wheel's (when the wheel is here).
SITE=$("$TDM_VENV_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
if [ -n "$SITE" ] && [ -d "$SITE/torch/lib" ] && [ -d "$SITE/nvidia" ]; then
    mkdir -p "$T/syms"
    python3 "$TDM_SOURCE_DIR/simcuda/gen_symbols.py" "$SITE" "$CUDA_INCLUDE" "$T/syms" >/dev/null
    diff -r "$TDM_SOURCE_DIR/simcuda/symbols" "$T/syms" || fail "the committed closure is not the wheel's"
    echo "ok: the committed closure is what gen_symbols.py derives from $SITE"
else
    echo "note: no CUDA wheel at TDM_VENV_PYTHON; the closure is not re-derived"
fi
