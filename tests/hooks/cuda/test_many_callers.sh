#!/bin/bash
# tests/hooks/cuda/test_many_callers.sh: 70 calling libraries in one process
# (many_rt_app over copies of many_rt_obj.c, in turns linked to the fake
# libcudart.so.12 and libcudart.so.13), more than any fixed table of
# callers holds.  Under the preload, each library's cudaGetLastError /
# cudaPeekAtLastError must reach its own runtime (each runtime holds a
# different error), and once each library made its first call no call may
# walk the loaded objects again (many_rt_app counts dl_iterate_phdr): the
# hooks find a caller's runtime in O(1) however many libraries call them.
# The output must be the same as without tidemark.
# Environment (from CMake): MANY_RT_APP, MANY_RT_CU12, MANY_RT_CU13, PRELOAD,
# SNAPCHECK, FAKE_CUDA_DIR, EXPECT_DIR.
. "${BASH_SOURCE[0]%/*}/../vendor_lib.sh" many_callers

objs=()
for i in $(seq 0 69); do
    if [ $((i % 2)) = 0 ]; then cp "$MANY_RT_CU12" "$T/obj_$i.so"; else cp "$MANY_RT_CU13" "$T/obj_$i.so"; fi
    objs+=("$T/obj_$i.so")
done
run() {
    local name=$1; shift
    env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" "$@" "$MANY_RT_APP" "${objs[@]}" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.out" "$T/$name.err"; fail "many_rt_app ($name) exited with $?"; }
}
run plain
grep -qx "cu12 failed with 101, cu13 with 1" "$T/plain.out" || { cat "$T/plain.out"; fail "the fakes did not fail as expected"; }
# Unset TIDEMARK_CONF (nothing recorded, the calls still routed) and observe.
run off LD_PRELOAD="$PRELOAD" TIDEMARK_CONF=
cat "$T/off.out"
same_output plain off
run obs LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/obs.tdm"
same_output plain obs
echo "PASS (many_callers)"
