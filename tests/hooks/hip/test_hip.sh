#!/bin/bash
# tests/hooks/hip/test_hip.sh SCENARIO: the HIP hooks end to end.
#
# hip_app (an ordinary HIP program) runs on the fake libamdhip64
# (LD_LIBRARY_PATH=$FAKE_HIP_DIR) without and with
# LD_PRELOAD=libtidemark_preload.so; its output (every HIP return code)
# must not change, and the snapshot must hold exactly the expected events
# (expect_*.txt, printed by snapcheck: action, device, size, stream and
# the program's function at the top of the stack).
#
#   pattern  every hooked call once, observe mode
#   errors   failing calls: codes unchanged, only the OOM-coded one booked
#   oom      the device runs out: oom events with the device's free bytes
#   cache    mode=cache: fewer vendor calls than allocations
#   threads  4 threads at once, observe and cache mode (also with
#            expandable segments): nothing lost
#   expand   mode=cache,expandable_segments=1: the cache grows by HIP's
#            virtual memory calls, never hipMalloc, and its out-of-memory
#            retry unmaps one stream's pages for another
#   expand_novmm  the same on a device without virtual memory management
#            (FAKE_HIP_NO_VMM=1): one line says so, normal segments
#   real     the real libamdhip64 with no GPU: codes unchanged, no crash
#   stream_free  stream_app free, cache mode: hipFreeAsync on another
#            stream waits for that stream's work (fake streams run only
#            when told); hipFree waits for the device
#   capture  stream_app capture, cache mode: nothing HIP forbids during a
#            graph capture, no segment freed, graph memory said to be uncovered
#   pools    stream-ordered pools keep freed memory: the snapshot's reserved
#            bytes include what the pools hold (observe); cache mode leaves
#            a pool the program made current to serve its hipMallocAsync
#   shared   an IPC handle opened, a shareable handle imported, one physical
#            allocation mapped twice: listed as imported, not in the
#            device's bytes
#   many_maps 4100 physical pages made and mapped, then a second mapping
#            of the first and an imported handle's: every page a segment of
#            device 0, the two others imported (no table runs out)
#   local5, local6, local7  a HIP extension module linked against the fake
#            libamdhip64.so.5 / .so.6 / .so.7, loaded RTLD_LOCAL (JAX, CuPy,
#            ctypes.CDLL): every HIP call works under the preload, with
#            TIDEMARK_CONF unset and recording; hipHostAlloc is pinned host
#            memory
#   stream_device5, stream_device6  hipMallocAsync on a stream of device 1
#            while device 0 is current: served and booked on device 1
#            (hipGetStreamDeviceId on ROCm 5, hipStreamGetDevice on 6)
#   rocm6    pinned memory from hipHostAlloc / hipExtHostAlloc booked on the
#            host; a capture begun by hipStreamBeginCaptureToGraph counted
#            (cache mode leaves its hipMallocAsync to HIP)
#
# Environment (from CMake): HIP_APP, STREAM_APP, SNAPCHECK, PRELOAD, FAKE_HIP_DIR,
# HIP_APP_LINKED_REAL, EXPECT_DIR, HIP_LOCAL, HIP_EXT5/6/7.
. "${BASH_SOURCE[0]%/*}/../vendor_lib.sh" "$1"

# run NAME [ENV=VALUE...]: hip_app $app_arg on the fake; stdout to $T/NAME.out,
# stderr to $T/NAME.err.
run_fake() {
    local name=$1; shift
    env LD_LIBRARY_PATH="$FAKE_HIP_DIR" "$@" "$HIP_APP" "$app_arg" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.err"; fail "hip_app $app_arg ($name) exited with $?"; }
}
run_preloaded() {
    local name=$1 conf=$2; shift 2
    run_fake "$name" LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="$conf" "$@"
    grep -q "tidemark:" "$T/$name.err" && grep "tidemark:" "$T/$name.err"
    [ -s "$T/$name.tdm" ] || { cat "$T/$name.err"; fail "no snapshot written ($name)"; }
}

# run_ext NAME EXT SCENARIO [ENV=VALUE...]: hip_local EXT SCENARIO, which
# finds its libamdhip64 through EXT's own dependency only.
run_ext() {
    local name=$1 ext=$2 what=$3; shift 3
    env "$@" "$HIP_LOCAL" "$ext" "$what" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.out" "$T/$name.err"; fail "hip_local $what ($name) exited with $?"; }
}

case $scenario in
local5 | local6 | local7)
    ext_var=HIP_EXT${scenario#local}; ext=${!ext_var}
    run_ext plain "$ext" local
    grep -qx "hipMalloc -> 0" "$T/plain.out" || { cat "$T/plain.out"; fail "the fake failed on its own"; }
    # TIDEMARK_CONF unset: loading tidemark changes nothing.
    run_ext unset "$ext" local -u TIDEMARK_CONF LD_PRELOAD="$PRELOAD"
    same_output plain unset
    for mode in observe cache; do
        run_ext $mode "$ext" local LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm"
        same_output plain $mode
        [ "$(count "$T/$mode.tdm" alloc)" = 1 ] || fail "the allocation was not booked ($mode)"
    done
    # hipHostAlloc (HIPIFY's cudaHostAlloc), in every ROCm: pinned host memory.
    run_ext pinned_plain "$ext" pinned
    run_ext pinned "$ext" pinned LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/pinned.tdm"
    same_output pinned_plain pinned
    "$SNAPCHECK" "$T/pinned.tdm" | grep -q '^alloc dev=-1 size=3000 stream=0 fn=ext_alloc_pinned$' ||
        { "$SNAPCHECK" "$T/pinned.tdm"; fail "hipHostAlloc not booked on the host"; }
    ;;
stream_device5 | stream_device6)
    ext_var=HIP_EXT${scenario#stream_device}; ext=${!ext_var}
    two=FAKE_HIP_DEVICES=2
    run_ext plain "$ext" device $two
    grep -qx "device 0 grew no, device 1 grew yes" "$T/plain.out" ||
        { cat "$T/plain.out"; fail "the fake does not serve from the stream's device"; }
    for mode in observe cache; do
        run_ext $mode "$ext" device LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm" $two
        same_output plain $mode
        "$SNAPCHECK" "$T/$mode.tdm" | grep -q '^alloc dev=1 size=4194304 stream=s1 fn=ext_alloc_on_stream$' ||
            { "$SNAPCHECK" "$T/$mode.tdm"; fail "hipMallocAsync not booked on the stream's device ($mode)"; }
    done
    ;;
rocm6)
    run_ext plain "$HIP_EXT6" rocm6
    grep -qx "captured hipMallocAsync reached HIP: yes" "$T/plain.out" || fail "the fake did not count the call"
    for mode in observe cache; do
        run_ext $mode "$HIP_EXT6" rocm6 LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm"
        same_output plain $mode
        "$SNAPCHECK" "$T/$mode.tdm" >"$T/$mode.txt"
        for size in 3000 5000; do
            grep -q "^alloc dev=-1 size=$size stream=0 fn=ext_alloc_pinned$" "$T/$mode.txt" ||
                { cat "$T/$mode.txt"; fail "pinned allocation of $size not booked on the host ($mode)"; }
            grep -q "^free_completed dev=-1 size=$size " "$T/$mode.txt" ||
                fail "pinned free of $size not booked ($mode)"
        done
    done
    "$SNAPCHECK" "$T/cache.tdm" notes | grep -q "graph memory is not covered" ||
        fail "the capture's allocation was not seen as graph memory"
    ;;
pattern)
    app_arg=pattern
    run_fake plain
    run_preloaded obs "dump=$T/obs.tdm"
    same_output plain obs
    check_events "$T/obs.tdm" expect_pattern.txt
    [ "$(fake_counter live "$T/obs.err")" = 0 ] || fail "allocations left in the fake"
    ;;
errors)
    app_arg=errors
    inject="FAKE_HIP_FAIL=hipMallocAsync=101,hipMallocManaged=2"
    run_fake plain "$inject"
    run_preloaded obs "dump=$T/obs.tdm" "$inject"
    same_output plain obs
    grep -q "hipMallocAsync(injected) -> 101" "$T/obs.out" || fail "injected error not seen"
    check_events "$T/obs.tdm" expect_errors.txt
    # Cache mode: the same codes, except that the cache serves the
    # hipMallocAsync the fake was told to fail (no vendor call happens).
    run_preloaded cache "mode=cache,dump=$T/cache.tdm" "$inject"
    grep -v '^hipMallocAsync(injected)' "$T/plain.out" >"$T/plain_f.out"
    grep -v '^hipMallocAsync(injected)' "$T/cache.out" >"$T/cache_f.out"
    same_output plain_f cache_f
    grep -q "hipMallocAsync(injected) -> 0" "$T/cache.out" || fail "cache mode did not serve hipMallocAsync"
    # A vendor failure under the cache (its segment hipMalloc) reaches the
    # program with the vendor's own code.
    run_preloaded cache2 "mode=cache,dump=$T/cache2.tdm" FAKE_HIP_FAIL=hipMalloc=101
    grep -q "hipMallocAsync(injected) -> 101" "$T/cache2.out" || fail "vendor code lost in cache mode"
    grep -q "hipMalloc(2048) -> 101" "$T/cache2.out" || fail "vendor code lost in cache mode"
    ;;
oom)
    app_arg=oom
    cap=FAKE_HIP_CAPACITY=16777216
    run_fake plain $cap
    run_preloaded obs "dump=$T/obs.tdm" $cap
    same_output plain obs
    grep -q "hipMalloc(10 MiB) again -> 2" "$T/obs.out" || fail "expected hipErrorOutOfMemory"
    check_events "$T/obs.tdm" expect_oom.txt
    # Cache mode: the cache gives back what it holds, retries, then the
    # program gets hipErrorOutOfMemory as from HIP.
    run_preloaded cache "mode=cache,dump=$T/cache.tdm" $cap
    same_output plain cache
    [ "$(count "$T/cache.tdm" oom)" -ge 1 ] || fail "no oom event in cache mode"
    ;;
cache)
    app_arg=cache
    run_fake plain
    run_preloaded cache "mode=cache,dump=$T/cache.tdm"
    same_output plain cache
    allocs=$(sed -n 's/^app allocations: //p' "$T/cache.out")
    vendor=$(( $(fake_counter hipMalloc "$T/cache.err") + $(fake_counter hipMallocAsync "$T/cache.err") ))
    plain_vendor=$(( $(fake_counter hipMalloc "$T/plain.err") + $(fake_counter hipMallocAsync "$T/plain.err") ))
    echo "allocations=$allocs vendor calls: without tidemark $plain_vendor, cache mode $vendor"
    [ "$plain_vendor" = "$allocs" ] || fail "the fake did not count every allocation"
    [ "$vendor" -ge 1 ] && [ "$vendor" -lt "$allocs" ] || fail "cache mode made $vendor vendor calls for $allocs allocations"
    [ "$(count "$T/cache.tdm" alloc)" = "$allocs" ] || fail "alloc events != $allocs"
    [ "$(count "$T/cache.tdm" free_completed)" = "$allocs" ] || fail "free_completed events != $allocs"
    [ "$(count "$T/cache.tdm" segment_alloc)" = "$vendor" ] || fail "segment_alloc events != vendor calls"
    "$SNAPCHECK" "$T/cache.tdm" | grep '^alloc ' | grep -v 'fn=alloc_small_blocks$' &&
        fail "alloc stacks do not start at the program's function"
    # Frees on the stream of the allocation are booked on that stream.
    "$SNAPCHECK" "$T/cache.tdm" | grep -q '^alloc dev=0 size=1008 stream=s1 fn=alloc_small_blocks$' ||
        fail "hipMallocAsync's stream not booked"
    ;;
threads)
    app_arg=threads
    for mode in observe cache expandable; do
        conf=mode=$mode
        [ $mode = expandable ] && conf=mode=cache,expandable_segments=1
        run_preloaded $mode "$conf,dump=$T/$mode.tdm,max_entries=100000"
        grep -q "thread failures: 0" "$T/$mode.out" || fail "calls failed ($mode)"
        [ "$(count "$T/$mode.tdm" alloc)" = 2000 ] || fail "alloc events != 2000 ($mode)"
        [ "$(count "$T/$mode.tdm" free_completed)" = 2000 ] || fail "free_completed != 2000 ($mode)"
    done
    [ "$(fake_counter live "$T/observe.err")" = 0 ] || fail "allocations left in the fake"
    ;;
expand)
    app_arg=expand
    cap=FAKE_HIP_CAPACITY=67108864
    run_fake plain $cap
    run_preloaded expand "mode=cache,expandable_segments=1,dump=$T/expand.tdm" $cap
    same_output plain expand
    grep "tidemark:" "$T/expand.err" | grep -v "wrote snapshot" && fail "unexpected tidemark message"
    [ "$(count "$T/expand.tdm" alloc)" = 3 ] || fail "$(count "$T/expand.tdm" alloc) allocs of 3"
    [ "$(count "$T/expand.tdm" segment_alloc)" = 0 ] || fail "segment_alloc events"
    maps=$(count "$T/expand.tdm" segment_map)
    [ "$maps" -ge 2 ] || fail "$maps segment_map events"
    [ "$(count "$T/expand.tdm" segment_unmap)" -ge 1 ] || fail "no segment_unmap"
    for call in hipMalloc hipMallocAsync; do
        [ "$(fake_counter $call "$T/expand.err")" = 0 ] || fail "$call reached"
    done
    [ "$(fake_counter hipMemCreate "$T/expand.err")" -ge "$maps" ] || fail "no hipMemCreate"
    [ "$(fake_counter hipMemUnmap "$T/expand.err")" -ge 1 ] || fail "no hipMemUnmap"
    ;;
expand_novmm)
    app_arg=expand
    cap=FAKE_HIP_CAPACITY=67108864
    run_fake plain $cap
    run_preloaded novmm "mode=cache,expandable_segments=1,dump=$T/novmm.tdm" $cap FAKE_HIP_NO_VMM=1
    same_output plain novmm
    [ "$(grep "tidemark:" "$T/novmm.err" | grep -v "wrote snapshot")" = \
      "tidemark: expandable_segments=1: hip device 0 has no virtual memory management; it uses normal segments" ] ||
        fail "not the one line about the fallback"
    [ "$(count "$T/novmm.tdm" segment_alloc)" -ge 1 ] || fail "no normal segment"
    [ "$(count "$T/novmm.tdm" segment_map)" = 0 ] || fail "segment_map events"
    [ "$(fake_counter hipMemCreate "$T/novmm.err")" = 0 ] || fail "hipMemCreate reached"
    ;;
real)
    [ "$HIP_APP_LINKED_REAL" = 1 ] || { echo "SKIP: the real libamdhip64 is not installed"; exit 77; }
    app_arg=nogpu
    "$HIP_APP" nogpu >"$T/plain.out" 2>"$T/plain.err" || fail "hip_app on the real library exited with $?"
    for mode in observe cache; do
        env LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm" "$HIP_APP" nogpu \
            >"$T/$mode.out" 2>"$T/$mode.err" || { cat "$T/$mode.err"; fail "hip_app under the preload ($mode) exited with $?"; }
        same_output plain $mode
        if grep -q "hipGetDeviceCount -> 100" "$T/plain.out"; then
            # nothing booked, so nothing touched: no exit snapshot at all
            [ ! -e "$T/$mode.tdm" ] || fail "a snapshot written with no device ($mode): $(count "$T/$mode.tdm" alloc) allocations"
        else
            "$SNAPCHECK" "$T/$mode.tdm" >/dev/null || fail "snapshot unreadable ($mode)"
        fi
    done
    # On a machine without a GPU: hipErrorNoDevice / hipErrorInvalidDevice,
    # unchanged (checked above: the output is the same as without tidemark).
    if grep -q "hipGetDeviceCount -> 100" "$T/plain.out"; then
        grep -q "hipMalloc(1024) -> 101" "$T/observe.out" || fail "expected hipErrorInvalidDevice"
    else
        echo "note: this machine has a HIP device; only the pass-through was checked"
    fi
    cat "$T/observe.out"
    ;;
stream_free | capture)
    # stream_app checks itself (FAIL: lines).
    what=${scenario%_free}; [ "$what" = stream ] && what=free
    env LD_LIBRARY_PATH="$FAKE_HIP_DIR" LD_PRELOAD="$PRELOAD" FAKE_HIP_CAPACITY=67108864 \
        TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm" "$STREAM_APP" "$what" \
        >"$T/cache.out" 2>"$T/cache.err"
    cat "$T/cache.out"
    grep -qx ok "$T/cache.out" || { cat "$T/cache.err"; fail "stream_app $what under cache mode"; }
    grep "tidemark:" "$T/cache.err" | grep -v -e "wrote snapshot" -e "out of memory on" &&
        fail "unexpected tidemark message"
    "$SNAPCHECK" "$T/cache.tdm" >/dev/null || fail "snapshot unreadable"
    notes=$("$SNAPCHECK" "$T/cache.tdm" notes) || fail "snapcheck notes"
    if [ "$what" = capture ]; then # a hipMallocAsync captured into the graph
        echo "$notes" | grep -q "graph memory is not covered" ||
            fail "the snapshot does not say graph memory is not covered: '$notes'"
    else
        [ -z "$notes" ] || fail "notes in a run without a capture: '$notes'"
    fi
    ;;
many_maps)
    app_arg=many_maps
    big=FAKE_HIP_CAPACITY=17179869184
    run_fake plain "$big"
    grep -qx "hipMemCreate x4100 -> 4100 made, hipMemMap -> 4100 mapped" "$T/plain.out" ||
        fail "the fake did not make and map 4100 pages"
    for mode in observe cache; do
        run_preloaded $mode "mode=$mode,dump=$T/$mode.tdm" "$big"
        same_output plain $mode
        grep "tidemark:" "$T/$mode.err" | grep -v "wrote snapshot" && fail "unexpected tidemark message"
        "$SNAPCHECK" "$T/$mode.tdm" state | sort | uniq -c | sed 's/^ *//' >"$T/$mode.state" ||
            fail "snapcheck state"
        cat >"$T/want.state" <<'STATE'
1 imported dev=0 source=0 kind=peer_mapping size=2097152 fn=app_many_maps
1 imported dev=0 source=0 kind=shareable size=2097152 fn=app_many_maps
4100 segment dev=0 size=2097152 expandable=1 blocks=i
1 stats dev=0 allocated=0 reserved=8598323200 reserved_peak=8598323200 segments=4100
STATE
        diff -u "$T/want.state" "$T/$mode.state" || fail "the state at the dump differs ($mode)"
    done
    ;;
pools | shared)
    app_arg=$scenario
    run_fake plain
    for mode in observe cache; do
        run_preloaded $mode "mode=$mode,dump=$T/$mode.tdm"
        if [ $mode = cache ]; then
            # Cache mode serves the default pool's allocations itself, so
            # that pool's own counters differ; every return code stays.
            sed -i '/^default .*: pool reserved/d' "$T/plain.out" "$T/cache.out"
        fi
        same_output plain $mode
        grep "tidemark:" "$T/$mode.err" | grep -v "wrote snapshot" && fail "unexpected tidemark message"
        # Rows in address order, and addresses differ between runs: sorted.
        "$SNAPCHECK" "$T/$mode.tdm" state | sort >"$T/$mode.state" || fail "snapcheck state"
        [ -n "${TDM_UPDATE_EXPECTED:-}" ] && cp "$T/$mode.state" "$EXPECT_DIR/expect_${scenario}_$mode.txt"
        diff -u "$EXPECT_DIR/expect_${scenario}_$mode.txt" "$T/$mode.state" ||
            fail "the state at the dump differs ($mode)"
    done
    if [ $scenario = pools ]; then
        # The pool's reserve moved with the program's calls: the frees grew
        # it, the trim and the allocation from idle memory shrank it.
        [ "$(count "$T/observe.tdm" segment_map)" -ge 2 ] &&
            [ "$(count "$T/observe.tdm" segment_unmap)" -ge 2 ] || fail "no pool reserve events"
        grep -qx "mine after free: pool reserved 4194304 used 0" "$T/cache.out" ||
            fail "cache mode took the allocation from the program's pool"
    fi
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "PASS ($scenario)"
