#!/bin/bash
# tests/hooks/cuda/test_cuda.sh SCENARIO: the CUDA hooks end to end, no GPU.
#
# Each program runs without and with LD_PRELOAD=libtidemark_preload.so; its
# stdout (every CUDA return code) must not change, and the snapshot must
# hold exactly the expected events (expect_*.txt as printed by
# cuda_snapcheck: action, device, size, stream, the program's app_* function
# on the stack).
#
#   rt_pattern         rt_app over the fake libcudart.so.13 (+ fake driver)
#   rt_framework_late  rt_app: PyTorch's library loaded after cache mode
#                      served a cudaMalloc; the driver serves from there
#   rt_static_pattern  the same program with the fake runtime linked in
#                      statically: seen only through dlsym/cuGetProcAddress
#   rt_errors          failing calls: codes unchanged, out-of-memory ones
#                      are oom events (observe and cache mode)
#   rt_cache           mode=cache: far fewer driver allocations than the
#                      program's, and its runtime never asked
#   rt_threads         4 threads, observe and cache: nothing lost
#   rt_devices         two devices: every event on the right one
#   drv_pattern        drv_app over the fake libcuda.so.1: exported symbols,
#                      cuGetProcAddress (+ _ptsz), dlsym, virtual memory
#   drv_recursion      the same with a driver that hands out its exported
#                      (so: our) symbols from cuGetProcAddress
#   drv_errors, drv_cache, drv_devices   as for rt_
#   drv_pools          stream-ordered pools keep freed memory: the snapshot's
#                      reserved bytes include what the pools hold (observe);
#                      cache mode leaves a pool the program made current to
#                      serve its cuMemAllocAsync
#   drv_shared         an IPC handle opened, a shareable handle imported, one
#                      physical allocation mapped twice: listed as imported,
#                      not in the device's bytes; host-NUMA memory on -1
#   drv_multicast      a multicast object mapped beside the physical memory
#                      bound to it: the object's mapping listed as imported
#                      (kind multicast), the memory counted once, on its device
#   drv_many_maps      4100 physical pages made and mapped, then a second
#                      mapping of the first and an imported handle's: every
#                      page a segment of device 0, the two others imported
#   drv_local_resolver an extension linked to the driver, loaded RTLD_LOCAL
#                      (the driver in its local scope only), looks the
#                      resolver up with dlsym(RTLD_DEFAULT, ...): found
#                      under the preload too, its cuMemAlloc booked once
#                      (peer_mapping, shareable): no table runs out
#   real_shared        the REAL libcudart.so.13 over the fake driver, which
#                      reports what cudart's table of driver functions holds
#                      and calls through it: our wrappers, right variants
#   real_static        the same with the real libcudart_static.a
#   rt_stream_free     stream_app free, cache mode: cudaFreeAsync on another
#                      stream waits for that stream's work (fake streams
#                      run only when told); cudaFree waits for the device
#   rt_static_stream_free  the same with the runtime linked in statically:
#                      its frees reach tidemark as cuMemFree_v2 and
#                      cuMemFreeAsync only
#   rt_ipc             ipc_rt_app, a runtime program of its own that shares
#                      its cudaMalloc buffers over IPC (no ipc_libraries):
#                      cache mode leaves them to the driver, so each handle
#                      names its buffer; a library's that imports no export
#                      stay cached, the export inside a segment refused
#   rt_static_ipc      the same program with the runtime linked in
#                      statically: cached and refused inside a segment
#                      unless ipc_libraries names the program
#   rt_capture         stream_app capture, cache mode: nothing CUDA forbids
#                      during a graph capture, no segment freed, graph
#                      memory said to be uncovered
#   real_nodriver      the real libcudart (shared, static) and no driver at
#                      all: cudaErrorInsufficientDriver unchanged, no crash
#   sem_WHAT           sem_app WHAT checks CUDA's documented semantics
#                      itself: alone (the fake driver against NVIDIA's
#                      documentation), then under the preload in observe
#                      and cache mode (tidemark changes nothing the program
#                      computes); see sem_app.c for each WHAT
#
# Environment (from CMake): LOCAL_APP, LOCAL_EXT, STREAM_APP, RT_APP, RT_APP_STATIC, DRV_APP, REAL_RT_APP,
# REAL_RT_APP_STATIC, IPC_RT_APP, IPC_RT_APP_STATIC, ALLOC_RT_LIB, SNAPCHECK, PRELOAD,
# FAKE_CUDA_DIR, EXPECT_DIR.
set -u
scenario=$1
[ -d /usr/local/cuda ] || { echo "no CUDA toolkit: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TMPDIR="$T"   # spill files of killed programs go with it (docs/spill.md)
cd "$T" || exit 1   # nothing of ours in the working directory
fail() { echo "FAIL ($scenario): $*"; exit 1; }

# run NAME PROGRAM ARG [ENV=VALUE...]: stdout to $T/NAME.out, stderr to
# $T/NAME.err; the program must exit 0.  (X=1 stands for "no extra
# variable" where a caller needs a placeholder.)
run() {
    local name=$1 prog=$2 arg=$3 rc; shift 3
    env "$@" "$prog" $arg >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
    [ $rc = 0 ] || { cat "$T/$name.out" "$T/$name.err"; fail "$prog $arg ($name) exited with $rc"; }
}
# traced NAME CONF PROGRAM ARG [ENV...]: the same under the preload, dumping
# to $T/NAME.tdm.
traced() {
    local name=$1 conf=$2 prog=$3 arg=$4; shift 4
    run "$name" "$prog" "$arg" LD_PRELOAD="$preload_list" TIDEMARK_CONF="$conf,dump=$T/$name.tdm" "$@"
    [ -s "$T/$name.tdm" ] || { cat "$T/$name.err"; fail "no snapshot written ($name)"; }
}
same_output() {
    diff -u "$T/$1.out" "$T/$2.out" || fail "the program's output changed under the preload ($2)"
}
check_events() { # NAME EXPECTED; TDM_UPDATE_EXPECTED=1 rewrites EXPECTED
    "$SNAPCHECK" "$T/$1.tdm" >"$T/$1.events" || fail "cuda_snapcheck $1"
    [ -n "${TDM_UPDATE_EXPECTED:-}" ] && cp "$T/$1.events" "$EXPECT_DIR/$2"
    diff -u "$EXPECT_DIR/$2" "$T/$1.events" || fail "snapshot events of $1 differ from $2"
}
count() { "$SNAPCHECK" "$T/$1.tdm" count "$2"; }
counter() { # NAME KEY: KEY=value from the fake's line on stderr
    sed -n "s/^fake: .*\b$2=\([0-9-]*\).*/\1/p" "$T/$1.err"
}
made() { sed -n 's/^device allocations made -> //p' "$T/$1.out"; }
no_tidemark_errors() {
    grep "tidemark:" "$T/$1.err" | grep -v -e "wrote snapshot" -e "out of memory on" \
        -e "mode=cache: no CUDA driver" && fail "unexpected tidemark message ($1)"
    return 0
}

fake=LD_LIBRARY_PATH=$FAKE_CUDA_DIR
# A sanitizer build's preload library needs its runtime loaded first.
san=$(ldd "$PRELOAD" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
preload_list=${san:+$san:}$PRELOAD

case $scenario in
rt_pattern | rt_static_pattern)
    app=$RT_APP
    [ "$scenario" = rt_static_pattern ] && app=$RT_APP_STATIC
    run plain "$app" pattern "$fake"
    traced obs mode=observe "$app" pattern "$fake"
    same_output plain obs
    check_events obs expect_rt_pattern.txt
    no_tidemark_errors obs
    [ "$(counter obs live)" = 0 ] && [ "$(counter obs rt_live)" = 0 ] ||
        fail "allocations left in the fakes"
    [ "$(counter obs alloc_calls)" = "$(counter plain alloc_calls)" ] ||
        fail "observe mode changed the driver calls"
    ;;
rt_framework_late) # through the runtime's cudaMalloc/cudaFree, the cache serving first
    run plain "$RT_APP" framework_late "$fake"
    traced cache mode=cache "$RT_APP" framework_late "$fake"
    cat "$T/cache.out"
    grep -qx "before the framework: the driver's" "$T/plain.out" || fail "the fake's cudaMalloc"
    grep -qx "before the framework: a segment" "$T/cache.out" ||
        fail "the cache did not serve the cudaMalloc before the framework was loaded"
    for mode in plain cache; do
        grep -qx "after the framework: took 4 MiB" "$T/$mode.out" ||
            fail "$mode: the cudaMalloc after the framework was loaded was not the driver's"
        grep -qx "after the first free: 4 MiB in use" "$T/$mode.out" ||
            fail "$mode: the first block's free did not give its memory back"
        grep -qx "after both frees: 0 bytes in use" "$T/$mode.out" ||
            fail "$mode: memory stays in use after every block was freed"
    done
    [ "$(grep -c "tidemark: mode=cache: .*caches device memory itself" "$T/cache.err")" = 1 ] ||
        fail "cache mode under a framework loaded late did not say it stands aside, once"
    ;;
rt_errors)
    inject=FAKE_CUDA_FAIL=cuMemAllocManaged:201
    run plain "$RT_APP" errors "$fake" "$inject"
    grep -qx "cudaMalloc 3 GiB -> 2" "$T/plain.out" || fail "the fake did not run out of memory"
    grep -qx "cudaMallocManaged (injected) -> 201" "$T/plain.out" || fail "no injected error"
    for mode in observe cache; do
        traced $mode mode=$mode "$RT_APP" errors "$fake" "$inject"
        same_output plain $mode
        check_events $mode expect_rt_errors_$mode.txt
    done
    ;;
rt_cache | drv_cache)
    # rt_app's too-big request is one cudaMalloc; drv_app's are three
    # (cuMemAlloc, cuMemAllocAsync, cuMemCreate).
    if [ "$scenario" = rt_cache ]; then app=$RT_APP env1=$fake ooms=1; else app=$DRV_APP env1=X=1 ooms=3; fi
    run plain "$app" cache "$env1"
    traced cache mode=cache "$app" cache "$env1"
    same_output plain cache
    n=$(made cache)
    [ -n "$n" ] && [ "$n" -gt 100 ] || fail "the program made no allocations"
    [ "$(count cache alloc)" = "$n" ] || fail "alloc events $(count cache alloc), program made $n"
    [ "$(count cache free_completed)" = "$n" ] || fail "free events differ from $n"
    plain_calls=$(counter plain cuMemAlloc_v2) cache_calls=$(counter cache cuMemAlloc_v2)
    echo "program allocations $n; driver cuMemAlloc_v2 calls: $plain_calls plain, $cache_calls in cache mode"
    [ "$cache_calls" -ge 1 ] && [ "$cache_calls" -lt $((n / 10)) ] ||
        fail "cache mode made $cache_calls driver allocations for $n"
    [ "$(count cache segment_alloc)" -lt $((n / 10)) ] || fail "too many segments"
    [ "$(count cache oom)" = $ooms ] || fail "$(count cache oom) oom events, not $ooms"
    if [ "$scenario" = rt_cache ]; then
        [ "$(counter cache rt_cudaMalloc)" = 0 ] || fail "the runtime's cudaMalloc was called"
        # Expandable segments: the cache grows by the driver's virtual
        # memory calls (cuMemCreate and cuMemMap), never cuMemAlloc.
        traced expand mode=cache,expandable_segments=1 "$app" cache "$env1"
        same_output plain expand
        no_tidemark_errors expand
        [ "$(count expand alloc)" = "$n" ] || fail "expandable: $(count expand alloc) allocs of $n"
        [ "$(count expand segment_alloc)" = 0 ] || fail "expandable: segment_alloc events"
        maps=$(count expand segment_map)
        [ "$maps" -ge 1 ] && [ "$maps" -lt $((n / 10)) ] || fail "expandable: $maps segment_map"
        [ "$(counter expand cuMemAlloc_v2)" = 0 ] || fail "expandable: cuMemAlloc reached"
        [ "$(counter expand alloc_calls)" -ge "$maps" ] || fail "expandable: no cuMemCreate"
        [ "$(count expand segment_unmap)" -ge 1 ] || fail "expandable: no segment_unmap"
    else
        # A stream being captured into a CUDA graph: its stream-ordered
        # allocations (50, and the 2 GiB one) are the driver's, not the cache's.
        [ "$(counter cache cuMemAllocAsync)" = 0 ] || fail "cuMemAllocAsync reached the driver"
        traced capture mode=cache "$app" cache FAKE_CUDA_CAPTURING=1
        same_output plain capture
        [ "$(counter capture cuMemAllocAsync)" = 51 ] ||
            fail "capturing: $(counter capture cuMemAllocAsync) cuMemAllocAsync calls, not 51"
        [ "$(counter capture cuMemAlloc_v2)" -lt $((n / 10)) ] || fail "capturing: no caching left"
    fi
    ;;
rt_threads)
    traced obs mode=observe "$RT_APP" threads "$fake"
    traced cache mode=cache "$RT_APP" threads "$fake"
    for name in obs cache; do
        grep -qx "threads failed -> 0" "$T/$name.out" || fail "a thread failed ($name)"
        [ "$(count $name alloc)" = 800 ] && [ "$(count $name free_completed)" = 800 ] ||
            fail "$name: $(count $name alloc) allocs / $(count $name free_completed) frees of 800"
    done
    [ "$(count obs segment_alloc)" = 800 ] || fail "observe: segments"
    [ "$(counter obs live)" = 0 ] || fail "observe: allocations left in the fake"
    [ "$(count cache segment_alloc)" -lt 10 ] || fail "cache: $(count cache segment_alloc) segments"
    ;;
drv_pattern | drv_recursion)
    extra=X=1
    [ "$scenario" = drv_recursion ] && extra=FAKE_CUDA_GPA_EXPORTED=1
    run plain "$DRV_APP" pattern "$extra"
    traced obs mode=observe "$DRV_APP" pattern "$extra"
    same_output plain obs
    check_events obs expect_drv_pattern.txt
    no_tidemark_errors obs
    [ "$(counter obs live)" = 0 ] || fail "allocations left in the fake"
    ;;
drv_errors)
    run plain "$DRV_APP" errors X=1
    grep -qx "cuMemAlloc without a context -> 201" "$T/plain.out" || fail "no context error"
    for mode in observe cache; do
        traced $mode mode=$mode "$DRV_APP" errors X=1
        same_output plain $mode
        check_events $mode expect_drv_errors_$mode.txt
    done
    ;;
rt_devices | drv_devices)
    # Two devices: each allocation on the device of the current context
    # (runtime: cudaSetDevice), physical memory on the device it was made
    # for; cache mode's segments on the right device too.
    app=$RT_APP env1=$fake
    [ "$scenario" = drv_devices ] && app=$DRV_APP env1=X=1
    run plain "$app" devices "$env1" FAKE_CUDA_DEVICES=2
    for mode in observe cache; do
        traced $mode mode=$mode "$app" devices "$env1" FAKE_CUDA_DEVICES=2
        same_output plain $mode
        check_events $mode expect_${scenario}_$mode.txt
    done
    ;;
drv_pools | drv_shared | drv_multicast)
    what=${scenario#drv_}
    run plain "$DRV_APP" $what X=1
    for mode in observe cache; do
        traced $mode mode=$mode "$DRV_APP" $what X=1
        if [ $mode = cache ]; then
            # Cache mode serves the default pool's allocations itself, so
            # that pool's own counters differ; every return code stays.
            sed -i '/^default .*: pool reserved/d' "$T/plain.out" "$T/cache.out"
        fi
        same_output plain $mode
        no_tidemark_errors $mode
        # Rows in address order, and addresses differ between runs: sorted.
        "$SNAPCHECK" "$T/$mode.tdm" state | sort >"$T/$mode.state" || fail "cuda_snapcheck state"
        [ -n "${TDM_UPDATE_EXPECTED:-}" ] && cp "$T/$mode.state" "$EXPECT_DIR/expect_${scenario}_$mode.txt"
        diff -u "$EXPECT_DIR/expect_${scenario}_$mode.txt" "$T/$mode.state" ||
            fail "the state at the dump differs ($mode)"
    done
    if [ $scenario = drv_pools ]; then
        # The pool's reserve moved with the program's calls: the frees grew
        # it, the trim and the allocation from idle memory shrank it.
        [ "$(count observe segment_map)" -ge 2 ] && [ "$(count observe segment_unmap)" -ge 2 ] ||
            fail "no pool reserve events"
        grep -qx "mine after free: pool reserved 4194304 used 0" "$T/cache.out" ||
            fail "cache mode took the allocation from the program's pool"
    fi
    ;;
drv_local_resolver)
    run plain "$LOCAL_APP" "$LOCAL_EXT"
    grep -qx "dlsym(RTLD_DEFAULT, cuGetProcAddress_v2) -> found" "$T/plain.out" &&
        grep -qx ok "$T/plain.out" || { cat "$T/plain.out"; fail "the extension alone"; }
    # The preload loaded but off (TIDEMARK_CONF unset): the same calls.
    run off "$LOCAL_APP" "$LOCAL_EXT" LD_PRELOAD="$preload_list"
    same_output plain off
    for mode in observe cache; do
        traced $mode mode=$mode "$LOCAL_APP" "$LOCAL_EXT"
        same_output plain $mode
        no_tidemark_errors $mode
        [ "$(count $mode alloc)" = 1 ] && [ "$(count $mode free_requested)" = 1 ] ||
            fail "$mode: the extension's cuMemAlloc_v2 booked $(count $mode alloc) times, freed $(count $mode free_requested)"
        "$SNAPCHECK" "$T/$mode.tdm" | grep -q "^alloc dev=0 size=12345 " ||
            fail "$mode: no 12345-byte alloc on device 0: $("$SNAPCHECK" "$T/$mode.tdm" | head -5)"
    done
    ;;
drv_many_maps)
    big=FAKE_CUDA_CAPACITY=17179869184
    run plain "$DRV_APP" many_maps "$big"
    grep -qx "cuMemCreate x4100 -> 4100 made, cuMemMap -> 4100 mapped" "$T/plain.out" ||
        fail "the fake did not make and map 4100 pages"
    for mode in observe cache; do
        traced $mode mode=$mode "$DRV_APP" many_maps "$big"
        same_output plain $mode
        no_tidemark_errors $mode
        "$SNAPCHECK" "$T/$mode.tdm" state | sort | uniq -c | sed 's/^ *//' >"$T/$mode.state" ||
            fail "cuda_snapcheck state"
        cat >"$T/want.state" <<'STATE'
1 imported dev=0 source=0 kind=peer_mapping size=2097152 fn=app_many_maps
1 imported dev=0 source=0 kind=shareable size=2097152 fn=app_many_maps
4100 segment dev=0 size=2097152 expandable=1 blocks=i
1 stats dev=0 allocated=0 reserved=8598323200 reserved_peak=8598323200 segments=4100
STATE
        diff -u "$T/want.state" "$T/$mode.state" || fail "the state at the dump differs ($mode)"
    done
    ;;
real_shared | real_static)
    app=$REAL_RT_APP
    [ "$scenario" = real_static ] && app=$REAL_RT_APP_STATIC
    [ -n "$app" ] || { echo "no real libcudart to link: skipped"; exit 77; }
    probe="FAKE_CUDA_INIT_RESULT=100 FAKE_CUDA_PROBE_TABLE=1"
    run plain "$app" "" "$fake" $probe FAKE_CUDA_REPORT="$T/plain.report"
    grep -q "cudaErrorNoDevice" "$T/plain.out" || fail "the real runtime did not report no device"
    traced obs mode=observe "$app" "" "$fake" $probe FAKE_CUDA_REPORT="$T/obs.report"
    same_output plain obs
    cat "$T/obs.report"
    [ "$(grep -c 'slot in libcuda.so.1 reached' "$T/plain.report")" = 6 ] ||
        fail "the fake driver saw $(wc -l <"$T/plain.report") table slots, not 6"
    # Every slot of cudart's table now holds our wrapper, and each wrapper
    # reaches the driver variant cudart asked for (the _ptsz ones too).
    sed 's/libcuda.so.1/libtidemark_preload.so/' "$T/plain.report" | diff -u - "$T/obs.report" ||
        fail "cudart's driver table is not ours"
    if [[ $san == *tsan* ]]; then
        # Under TSan the stack stops in its pthread_once interceptor, inside
        # cudart's initialization, before reaching the program's frames.
        "$SNAPCHECK" "$T/obs.tdm" | sed 's/ fn=.*//' >"$T/obs.events"
        sed 's/ fn=.*//' "$EXPECT_DIR/expect_real_probe.txt" | diff -u - "$T/obs.events" ||
            fail "snapshot events differ from expect_real_probe.txt"
    else
        check_events obs expect_real_probe.txt
    fi
    ;;
real_nodriver)
    [ -n "$REAL_RT_APP$REAL_RT_APP_STATIC" ] || { echo "no real libcudart: skipped"; exit 77; }
    if ldconfig -p 2>/dev/null | grep -q "libcuda.so.1 "; then
        echo "this machine has a CUDA driver: skipped"; exit 77
    fi
    for app in $REAL_RT_APP $REAL_RT_APP_STATIC; do
        run plain "$app" "" X=1
        grep -q "cudaErrorInsufficientDriver" "$T/plain.out" || fail "$app: unexpected error code"
        for mode in observe cache; do
            run $mode "$app" "" LD_PRELOAD="$preload_list" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm" X=1
            same_output plain $mode
            no_tidemark_errors $mode
            # nothing booked, so nothing touched: no exit snapshot at all
            [ ! -e "$T/$mode.tdm" ] || fail "$app: a snapshot written without a driver ($mode): $("$SNAPCHECK" "$T/$mode.tdm")"
        done
    done
    ;;
rt_stream_free | rt_static_stream_free | rt_capture)
    # stream_app checks itself (FAIL: lines); the fake driver runs queued
    # stream work only when the program says so.  rt_static_stream_free:
    # the runtime linked in statically, seen only through the driver.
    what=${scenario#rt_}; what=${what#static_}; what=${what%_free}
    [ "$what" = stream ] && what=free
    app=$STREAM_APP
    [ "$scenario" = rt_static_stream_free ] && app=$STREAM_APP_STATIC
    traced cache mode=cache "$app" "$what" "$fake" FAKE_CUDA_CAPACITY=67108864
    cat "$T/cache.out"
    grep -qx ok "$T/cache.out" || fail "stream_app $what under cache mode"
    no_tidemark_errors cache
    notes=$("$SNAPCHECK" "$T/cache.tdm" notes) || fail "cuda_snapcheck notes"
    if [ "$what" = capture ]; then # a cudaMallocAsync captured into the graph
        echo "$notes" | grep -q "graph memory is not covered" ||
            fail "the snapshot does not say graph memory is not covered: '$notes'"
    else
        [ -z "$notes" ] || fail "notes in a run without a capture: '$notes'"
    fi
    ;;
rt_ipc | rt_static_ipc)
    # ipc_rt_app shares its own cudaMalloc buffers over IPC, no
    # ipc_libraries given: the peer's mapping stands for each exported
    # pointer, or the export fails, never a wrong address (it checks
    # itself).  rt_static_ipc: the runtime linked in statically.
    app=$IPC_RT_APP
    [ "$scenario" = rt_static_ipc ] && app=$IPC_RT_APP_STATIC
    run plain "$app" own "$fake"
    cat "$T/plain.out"
    grep -qx ok "$T/plain.out" || fail "the fakes break what CUDA documents (IPC)"
    grep -qx "ipc export own second -> ok" "$T/plain.out" || fail "the fake refused an export"
    for mode in observe cache; do
        traced $mode mode=$mode "$app" own "$fake"
        cat "$T/$mode.out"
        grep -qx ok "$T/$mode.out" || fail "ipc_rt_app own under mode=$mode"
        [ "$(count $mode alloc)" = 2 ] || fail "$(count $mode alloc) allocations recorded, not 2 ($mode)"
    done
    exporter_note="tidemark: mode=cache: $(basename "$app") exports its CUDA allocations over IPC"
    refusal="tidemark: mode=cache: cuIpcGetMemHandle of a block inside one of the cache's segments refused"
    if [ "$scenario" = rt_ipc ]; then
        # It imports cudaIpcGetMemHandle: the driver serves its buffers, said once.
        grep -qx "ipc export own second -> ok" "$T/cache.out" ||
            fail "cache mode refused the export of a program's own cudaMalloc buffer"
        grep -qx "own: driver allocations 2" "$T/cache.out" ||
            fail "the buffers of a program that exports over IPC were not the driver's"
        [ "$(grep -c "$exporter_note" "$T/cache.err")" = 1 ] ||
            fail "the program's allocations left to the driver without one stderr line"
        grep -q "$refusal" "$T/cache.err" && fail "an export refused"
        # A library that imports no export: its buffers stay cached (and
        # recorded); the export of the one inside a segment, by the
        # program, is the last resort, refused once.
        run plainlib "$app" lib "$fake" ALLOC_RT_LIB="$ALLOC_RT_LIB"
        grep -qx ok "$T/plainlib.out" || fail "ipc_rt_app lib alone"
        traced cachelib mode=cache "$app" lib "$fake" ALLOC_RT_LIB="$ALLOC_RT_LIB"
        cat "$T/cachelib.out"
        grep -qx ok "$T/cachelib.out" || fail "ipc_rt_app lib under mode=cache"
        grep -qx "lib: driver allocations [01]" "$T/cachelib.out" ||
            fail "the buffers of a library that imports no export were not cached"
        [ "$(count cachelib alloc)" = 2 ] || fail "the cached buffers were not recorded"
        grep -qx "ipc export lib first -> ok" "$T/cachelib.out" ||
            fail "a block at its segment's base was not exported"
        grep -qx "ipc export lib second -> refused" "$T/cachelib.out" ||
            fail "a cached block inside a segment was exported (the peer gets the segment)"
        [ "$(grep -c "$refusal" "$T/cachelib.err")" = 1 ] ||
            fail "an export refused without one stderr line"
        grep -q "exports its CUDA allocations over IPC" "$T/cachelib.err" &&
            fail "a library that imports no export was taken for an exporter"
    else
        # libcudart_static carries cudaIpcGetMemHandle in every program,
        # in no dynamic table: nothing tells an exporter apart, so its
        # buffers stay cached and the export inside a segment is refused.
        grep -qx "own: driver allocations [01]" "$T/cache.out" ||
            fail "a static-cudart program's buffers were not cached"
        grep -qx "ipc export own second -> refused" "$T/cache.out" ||
            fail "a cached block inside a segment was exported (the peer gets the segment)"
        [ "$(grep -c "$refusal" "$T/cache.err")" = 1 ] ||
            fail "an export refused without one stderr line"
        # Named in ipc_libraries, the program gets the driver's memory.
        traced named "mode=cache,ipc_libraries=$(basename "$app")" "$app" own "$fake"
        cat "$T/named.out"
        grep -qx ok "$T/named.out" || fail "ipc_rt_app own (ipc_libraries)"
        grep -qx "ipc export own second -> ok" "$T/named.out" ||
            fail "cache mode refused an export of a program ipc_libraries names"
        grep -qx "own: driver allocations 2" "$T/named.out" ||
            fail "the buffers of a program ipc_libraries names were not the driver's"
        [ "$(grep -c "$exporter_note" "$T/named.err")" = 1 ] ||
            fail "the named program's allocations left to the driver without one stderr line"
    fi
    ;;
sem_*)
    what=${scenario#sem_}
    env2=X=1
    [ "$what" = async_device ] && env2=FAKE_CUDA_DEVICES=2
    run plain "$SEM_APP" "$what" "$env2" FAKE_CUDA_CAPACITY=268435456
    cat "$T/plain.out"
    grep -qx ok "$T/plain.out" || fail "the fake driver breaks what CUDA documents ($what)"
    for mode in observe cache; do
        traced $mode mode=$mode "$SEM_APP" "$what" "$env2" FAKE_CUDA_CAPACITY=268435456
        cat "$T/$mode.out"
        grep -qx ok "$T/$mode.out" || fail "sem_app $what under mode=$mode"
    done
    case $what in
    ipc) # NCCL's and an exporter's buffers always exported; a refusal only as the last resort, said once
        grep -qx "ipc export second -> ok" "$T/plain.out" || fail "the fake refused an export"
        grep -qx "ipc export named second -> ok" "$T/plain.out" || fail "the fake refused an export"
        grep -qx "ipc export nccl second -> ok" "$T/cache.out" ||
            fail "cache mode refused an export of NCCL's"
        grep -qx "ipc export nccl runtime second -> ok" "$T/cache.out" ||
            fail "cache mode refused an export of NCCL's (its cudaMalloc)"
        # A library that imports cuIpcGetMemHandle: what it allocates is the driver's.
        grep -qx "ipc export exporter second -> ok" "$T/cache.out" ||
            fail "cache mode refused an export of a library that imports the export"
        [ "$(grep -c "tidemark: mode=cache: .* exports its CUDA allocations over IPC" \
            "$T/cache.err")" = 1 ] || fail "exporters' allocations left to the driver without one line"
        # The program (it looks the export up, imports none) and a library
        # named nowhere: cached, and a block inside a segment refused.
        grep -qx "ipc export second -> refused" "$T/cache.out" ||
            fail "a cached block inside a segment was exported (the peer gets the segment)"
        grep -qx "ipc export named second -> refused" "$T/cache.out" ||
            fail "a cached block inside a segment was exported (the peer gets the segment)"
        [ "$(grep -c "tidemark: mode=cache: .*cuIpcGetMemHandle" "$T/cache.err")" = 1 ] ||
            fail "an export refused without one stderr line"
        # A library ipc_libraries names gets the driver's memory too.
        traced named mode=cache,ipc_libraries=libfoo:libtdm_ipc_named "$SEM_APP" ipc \
            FAKE_CUDA_CAPACITY=268435456
        grep -qx ok "$T/named.out" || { cat "$T/named.out"; fail "sem_app ipc (ipc_libraries)"; }
        grep -qx "ipc export named second -> ok" "$T/named.out" ||
            fail "cache mode refused an export of a library ipc_libraries names"
        grep -qx "ipc export second -> refused" "$T/named.out" ||
            fail "ipc_libraries changed what the program's own blocks are"
        ;;
    framework)
        [ "$(grep -c "tidemark: mode=cache: .*caches device memory itself" "$T/cache.err")" = 1 ] ||
            fail "cache mode under a framework's allocator did not say it stands aside"
        # PyTorch with its caching off: tidemark's cache is the only one.
        env LD_PRELOAD="$preload_list" TIDEMARK_CONF=mode=cache PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
            "$SEM_APP" framework >"$T/uncached.out" 2>"$T/uncached.err"
        grep -q "caches device memory itself" "$T/uncached.err" &&
            fail "cache mode stood aside for a PyTorch that does not cache"
        grep -q "FAIL: cuMemGetInfo" "$T/uncached.out" || fail "the cache did not serve (uncached)"
        ;;
    framework_late) # the cache served first, then stood aside, once
        grep -qx "before the framework: a segment" "$T/cache.out" ||
            fail "the cache did not serve the allocation before the framework was loaded"
        [ "$(grep -c "tidemark: mode=cache: .*caches device memory itself" "$T/cache.err")" = 1 ] ||
            fail "cache mode under a framework loaded late did not say it stands aside"
        for mode in plain observe; do
            grep -qx "before the framework: the driver's" "$T/$mode.out" ||
                fail "$mode: the first allocation was not the driver's"
        done
        ;;
    reset)
        diff -u "$T/plain.out" "$T/cache.out" || fail "a return code changed (cache)"
        ;;
    reset_live) # what the reset destroyed is not live at exit
        for mode in observe cache; do
            "$SNAPCHECK" "$T/$mode.tdm" state | grep -q "^stats dev=0 allocated=0 " ||
                fail "$mode: the reset's allocation still live: $("$SNAPCHECK" "$T/$mode.tdm" state | head -1)"
        done
        ;;
    capture) # the graph's allocation node: the snapshot says what it misses
        for mode in observe cache; do
            "$SNAPCHECK" "$T/$mode.tdm" notes | grep -q "graph memory is not covered" ||
                fail "$mode: a driver capture not noted"
        done
        ;;
    esac
    for mode in observe cache; do
        [ "$what" = ipc ] || [ "$what" = framework ] || [ "$what" = framework_late ] ||
            [ "$what" = reset ] ||
            diff -u "$T/plain.out" "$T/$mode.out" || fail "the output changed ($mode)"
    done
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "ok ($scenario)"
