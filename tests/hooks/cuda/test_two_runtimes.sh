#!/bin/bash
# tests/hooks/cuda/test_two_runtimes.sh: two CUDA runtimes in one process
# (two_rt_app: one library linked to libcudart.so.12, one to
# libcudart.so.13, both fakes over the fake driver).  Under the preload,
# every runtime call must still reach the runtime its caller linked: each
# fake runtime reports the calls it served, and the output must be the
# same as without tidemark; the snapshot must hold all 8 allocations.
# Environment (from CMake): TWO_RT_APP, SNAPCHECK, PRELOAD, FAKE_CUDA_DIR,
# EXPECT_DIR.
. "${BASH_SOURCE[0]%/*}/../vendor_lib.sh" two_runtimes

run() {
    local name=$1; shift
    env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" "$@" "$TWO_RT_APP" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.out" "$T/$name.err"; fail "two_rt_app ($name) exited with $?"; }
}

run plain
cat >"$T/want.out" <<'OUT'
cu12 work -> 0
cu13 work -> 0
libcudart.so.12: cudaMalloc=3 cudaFree=3
libcudart.so.13: cudaMalloc=5 cudaFree=5
OUT
diff -u "$T/want.out" "$T/plain.out" || fail "the program itself is wrong (without tidemark)"

run obs LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/obs.tdm"
cat "$T/obs.out"
same_output plain obs
[ "$(count "$T/obs.tdm" alloc)" = 8 ] || fail "alloc events != 8"
[ "$(count "$T/obs.tdm" free_completed)" = 8 ] || fail "free_completed events != 8"
echo "PASS (two_runtimes)"
