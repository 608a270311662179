#!/bin/bash
# tests/hooks/cuda/test_pluggable.sh: libtidemark.so as PyTorch's pluggable
# allocator over the fake CUDA driver (plug_app), alone and with
# libtidemark_preload.so loaded too, as `tidemark run --conf
# torch_tensors=pluggable` runs a Python program.
#
# The cache's two segments (2 MiB for the 1000-byte block, 20 MiB for the
# 3 MiB one) must be booked once each whatever else is loaded: the
# library's CUDA provider calls the driver itself, never the preload's
# wrappers (which would book each segment a second time as an observed
# allocation of the program's).  And tdm_torch_base_alloc names, for each
# block, the allocation the driver made (what cudaIpcGetMemHandle needs).
#
# examples/torch_pluggable.py (its path without a CUDA torch: the calls
# torch would make) reports the same statistics under `tidemark run
# --conf torch_tensors=pluggable` as alone.
#
# Environment (from CMake): PLUG_APP, LIBTIDEMARK, PRELOAD, FAKE_CUDA_DIR,
# SNAPCHECK, TIDEMARK, TDM_SOURCE_DIR.
set -u
: "${PLUG_APP:?}" "${LIBTIDEMARK:?}" "${PRELOAD:?}" "${FAKE_CUDA_DIR:?}" "${SNAPCHECK:?}"
: "${TIDEMARK:?}" "${TDM_SOURCE_DIR:?}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TMPDIR="$T"
cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
san=$(ldd "$PRELOAD" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
preload_list=${san:+$san:}$PRELOAD

allocated=$((1024 + (3 << 20)))         # the blocks: 1000 rounds to 1024
reserved=$(((2 << 20) + (20 << 20)))    # one small, one large segment

# check NAME: plug_app's lines and NAME.tdm's events.
check() {
    local name=$1
    grep -qx "stats allocated=$allocated reserved=$reserved" "$name.out" ||
        fail "$name: tidemark's statistics: $(grep '^stats' "$name.out")"
    grep -qx "driver cuMemAlloc_v2=2" "$name.out" ||
        fail "$name: driver allocations: $(grep '^driver' "$name.out")"
    grep -qx "base 0 ok" "$name.out" && grep -qx "base 1 ok" "$name.out" ||
        fail "$name: tdm_torch_base_alloc: $(grep '^base' "$name.out")"
    [[ $(grep -c . "$name.out") -eq 4 ]] || fail "$name: unexpected output: $(cat "$name.out")"
    [[ -s $name.tdm ]] || fail "$name: no snapshot: $(cat "$name.err")"
    "$SNAPCHECK" "$name.tdm" > "$name.events" || fail "$name: cuda_snapcheck"
    local segs allocs
    segs=$(grep -c '^segment_alloc ' "$name.events")
    allocs=$(grep -c '^alloc ' "$name.events")
    [[ $segs -eq 2 && $allocs -eq 2 ]] ||
        fail "$name: $segs segment_alloc and $allocs alloc events, want 2 and 2: $(cat "$name.events")"
    grep -qx "segment_alloc dev=0 size=2097152 .*" "$name.events" &&
        grep -qx "segment_alloc dev=0 size=20971520 .*" "$name.events" ||
        fail "$name: segment sizes: $(grep '^segment_alloc' "$name.events")"
    # At the dump (both blocks freed): nothing allocated, both segments cached.
    grep -qx "stats dev=0 allocated=0 reserved=$reserved reserved_peak=$reserved segments=2" \
        <("$SNAPCHECK" "$name.tdm" state) ||
        fail "$name: state at the dump: $("$SNAPCHECK" "$name.tdm" state | head -3)"
}

# run NAME [ENV=VALUE...]
run() {
    local name=$1; shift
    env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" TIDEMARK_CONF="dump=$T/$name.tdm" "$@" \
        "$PLUG_APP" "$LIBTIDEMARK" > "$name.out" 2> "$name.err" ||
        fail "$name: plug_app exited $?: $(cat "$name.out" "$name.err")"
}

run alone
check alone
echo "alone: 2 segments, $allocated bytes allocated, bases right"

run observe LD_PRELOAD="$preload_list"
check observe
echo "preloaded (observe): each segment once"

# Cache mode: the preload hands the allocator its own provider, over the
# same real driver functions.
env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm" \
    LD_PRELOAD="$preload_list" "$PLUG_APP" "$LIBTIDEMARK" > cache.out 2> cache.err ||
    fail "cache: plug_app exited $?: $(cat cache.out cache.err)"
check cache
echo "preloaded (cache): each segment once"

# Pass-through mode: each block is its own driver allocation, and its own base.
run passthrough TIDEMARK_CONF="alloc_mode=passthrough,dump=$T/passthrough.tdm"
grep -qx "base 0 ok" passthrough.out && grep -qx "base 1 ok" passthrough.out ||
    fail "passthrough: tdm_torch_base_alloc: $(grep '^base' passthrough.out)"
grep -qx "driver cuMemAlloc_v2=2" passthrough.out || fail "passthrough: $(cat passthrough.out)"
echo "pass-through mode: each block its own base"

# tidemark run --conf torch_tensors=pluggable: the preload in, the summary
# from the snapshot.
# (A sanitizer build's runtime goes first: run keeps it there.)
LD_LIBRARY_PATH="$FAKE_CUDA_DIR" LD_PRELOAD="$san" "$TIDEMARK" run -o "$T/run" \
    --conf torch_tensors=pluggable -- "$PLUG_APP" "$LIBTIDEMARK" > run.out 2> run.err ||
    fail "tidemark run: exit $?: $(cat run.out run.err)"
# The summary's peak counts the bytes asked for (1000 + 3 MiB), as
# PyTorch's requested_bytes does; its stats line the rounded blocks.
grep -q "peak allocated 3.00 MiB ($((1000 + (3 << 20))) B)" run.err run.out ||
    fail "tidemark run: the summary's peak: $(grep -h 'peak allocated' run.err run.out)"
grep -qE "reserved +22.00 MiB at the peak; highest 22.00 MiB" run.err run.out ||
    fail "tidemark run: the summary's reserved: $(grep -h 'reserved' run.err run.out)"
echo "tidemark run --conf torch_tensors=pluggable: peak allocated 3.00 MiB, reserved 22 MiB"

# The example, alone and under `tidemark run` (the preload in).
if [[ -n $san ]] || ! command -v python3 > /dev/null; then
    echo "no python3, or a sanitizer build: the example is skipped"
    exit 0
fi
example=$TDM_SOURCE_DIR/examples/torch_pluggable.py
LD_LIBRARY_PATH="$FAKE_CUDA_DIR" TIDEMARK_LIB="$LIBTIDEMARK" python3 "$example" ex_alone.tdm 3 \
    > ex_alone.out 2>&1 || fail "example alone: $(cat ex_alone.out)"
LD_LIBRARY_PATH="$FAKE_CUDA_DIR" TIDEMARK_LIB="$LIBTIDEMARK" "$TIDEMARK" run -q -o "$T/exrun" \
    --conf torch_tensors=pluggable -- python3 "$example" ex_run.tdm 3 > ex_run.out 2>&1 ||
    fail "example under tidemark run: $(cat ex_run.out)"
want=$(grep '^peak allocated' ex_alone.out)
[[ -n $want && $(grep '^peak allocated' ex_run.out) == "$want" ]] ||
    fail "example: alone '$want', under tidemark run '$(grep '^peak allocated' ex_run.out)'"
grep -q "^device 0 cuda " <("$SNAPCHECK" ex_run.tdm) || fail "example: not on the fake CUDA device"
echo "examples/torch_pluggable.py under tidemark run: $want, as alone"
