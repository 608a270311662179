#!/bin/bash
# tests/hooks/ze/test_ze.sh SCENARIO: the Level Zero hooks end to end,
# through the REAL loader (libze_loader.so.1) and the fake driver.
#
# ze_app (an ordinary Level Zero program) runs without and with tidemark;
# its output (every return code) must not change, and the snapshot must
# hold exactly the expected events (expect_*.txt, printed by snapcheck).
#
#   pattern     every hooked call once (preload, observe mode)
#   errors      failing calls: codes unchanged, only OOM codes booked
#   oom         the device runs out: oom events with Sysman's free bytes
#   cache       mode=cache: fewer vendor calls than allocations
#   threads     4 threads at once, observe and cache mode (also with
#               expandable segments)
#   shim        the shim driver alone, the shim with the preload (booked
#               once), and a program that only uses the loader's DDI tables
#   shim_cache  mode=cache through the shim, for the DDI-table program
#   driver_ddi  the shim under a newer loader (tests/fakes/ze's, LD_LIBRARY_PATH)
#               that calls through the driver's own DDI tables when the
#               driver offers DDI handles (as Intel's does) and the loader
#               intercepts (several drivers, or ZE_ENABLE_LOADER_INTERCEPT=1)
#   real        the real loader with no driver at all: codes unchanged
#   expand      mode=cache,expandable_segments=1 (preload, then the shim
#               alone): the cache grows by zePhysicalMemCreate and
#               zeVirtualMemMap, never zeMemAllocDevice, and its
#               out-of-memory retry unmaps the small pool's pages
#   expand_novmm  the same on a driver without virtual memory
#               (FAKE_ZE_NO_VMM=1): one line says so, normal segments
#   policies    zeMemFreeExt's DEFER_FREE / BLOCKING_FREE on memory a
#               command in flight on the program's queue uses (observe,
#               cache through the preload and through the shim):
#               BLOCKING_FREE returns once those commands are complete, no
#               block the device still uses is handed out again, every
#               block goes back to the cache; on a queue tidemark could not
#               see, the blocks stay out of use and cache mode says so once
#
# Environment (from CMake): ZE_APP, ZE_DDI_APP, SNAPCHECK, PRELOAD, SHIM,
# FAKE_ZE, FAKE_LOADER_DIR, EXPECT_DIR.
. "${BASH_SOURCE[0]%/*}/../vendor_lib.sh" "$1"
unset ZE_ENABLE_ALT_DRIVERS TIDEMARK_ZE_DRIVER

# run NAME APP ARG [ENV=VALUE...]: stdout to $T/NAME.out, stderr to $T/NAME.err.
run() {
    local name=$1 app=$2 arg=$3; shift 3
    env "$@" "$app" "$arg" >"$T/$name.out" 2>"$T/$name.err" ||
        { cat "$T/$name.out" "$T/$name.err"; fail "$app $arg ($name) exited with $?"; }
}
on_fake() { run "$@" ZE_ENABLE_ALT_DRIVERS="$FAKE_ZE"; }
on_shim() { run "$@" ZE_ENABLE_ALT_DRIVERS="$SHIM" TIDEMARK_ZE_DRIVER="$FAKE_ZE"; }
have_snapshot() {
    [ -s "$T/$1.tdm" ] || { cat "$T/$1.err"; fail "no snapshot written ($1)"; }
}

case $scenario in
policies)
    # The program's own queue: the policies kept as the specification says.
    on_fake plain "$ZE_APP" policies
    grep -q "memory the device still uses: yes" "$T/plain.out" && fail "the driver reused memory in use"
    grep -q "are complete: no" "$T/plain.out" && fail "the driver's BLOCKING_FREE did not wait"
    grep -qx "frees of memory in use: 0" "$T/plain.out" || fail "the fake counted a free it allowed"
    on_fake observe "$ZE_APP" policies LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=observe,dump=$T/observe.tdm"
    same_output plain observe
    on_fake cache "$ZE_APP" policies LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm"
    on_shim shim "$ZE_APP" policies TIDEMARK_CONF="mode=cache,dump=$T/shim.tdm"
    for mode in cache shim; do
        diff -u "$T/plain.out" "$T/$mode.out" ||
            fail "the program saw another driver under cache mode ($mode)"
        grep -q "zeMemFreeExt" "$T/$mode.err" &&
            { cat "$T/$mode.err"; fail "cache mode stood aside for policies it can keep ($mode)"; }
        # every block freed with a policy went back to the cache: none left allocated
        "$SNAPCHECK" "$T/$mode.tdm" state | grep -q "^stats dev=0 allocated=0 " ||
            { "$SNAPCHECK" "$T/$mode.tdm" state; fail "blocks freed with a policy still allocated at exit ($mode)"; }
        [ "$("$SNAPCHECK" "$T/$mode.tdm" count free_completed)" = 10 ] ||
            fail "not every free booked ($mode): $("$SNAPCHECK" "$T/$mode.tdm" count free_completed)"
    done
    # A queue tidemark could not see: the blocks stay out of use, said once.
    on_fake unseen_plain "$ZE_APP" policies_unseen
    grep -q "memory the device still uses: yes" "$T/unseen_plain.out" && fail "the driver reused memory in use"
    on_fake unseen_cache "$ZE_APP" policies_unseen LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/unseen_cache.tdm"
    on_shim unseen_shim "$ZE_APP" policies_unseen TIDEMARK_CONF="mode=cache,dump=$T/unseen_shim.tdm"
    for mode in unseen_cache unseen_shim; do
        same_output unseen_plain $mode
        [ "$(grep -c "zeMemFreeExt" "$T/$mode.err")" = 1 ] ||
            { cat "$T/$mode.err"; fail "not one line about the free policies ($mode)"; }
    done
    ;;
pattern)
    on_fake plain "$ZE_APP" pattern
    on_fake obs "$ZE_APP" pattern LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/obs.tdm"
    have_snapshot obs
    same_output plain obs
    check_events "$T/obs.tdm" expect_pattern.txt
    [ "$(fake_counter live "$T/obs.err")" = 0 ] || fail "allocations left in the driver"
    ;;
errors)
    inject="FAKE_ZE_FAIL=zeMemAllocHost=0x70000002,zeMemAllocShared=0x70000003"
    on_fake plain "$ZE_APP" errors "$inject"
    on_fake obs "$ZE_APP" errors "$inject" LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/obs.tdm"
    have_snapshot obs
    same_output plain obs
    grep -q "zeMemAllocHost(injected) -> 0x70000002" "$T/obs.out" || fail "injected error not seen"
    check_events "$T/obs.tdm" expect_errors.txt
    on_fake cache "$ZE_APP" errors "$inject" LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm"
    same_output plain cache
    ;;
oom)
    cap=FAKE_ZE_CAPACITY=16777216
    on_fake plain "$ZE_APP" oom $cap
    on_fake obs "$ZE_APP" oom $cap LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/obs.tdm"
    have_snapshot obs
    same_output plain obs
    grep -q "zeMemAllocDevice(10 MiB) again -> 0x70000003" "$T/obs.out" || fail "expected OUT_OF_DEVICE_MEMORY"
    check_events "$T/obs.tdm" expect_oom.txt
    on_fake cache "$ZE_APP" oom $cap LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm"
    same_output plain cache
    [ "$(count "$T/cache.tdm" oom)" -ge 1 ] || fail "no oom event in cache mode"
    ;;
cache)
    on_fake plain "$ZE_APP" cache
    on_fake cache "$ZE_APP" cache LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm"
    have_snapshot cache
    same_output plain cache
    allocs=$(sed -n 's/^app allocations: //p' "$T/cache.out")
    plain_vendor=$(fake_counter zeMemAllocDevice "$T/plain.err")
    vendor=$(fake_counter zeMemAllocDevice "$T/cache.err")
    echo "allocations=$allocs zeMemAllocDevice calls: without tidemark $plain_vendor, cache mode $vendor"
    [ "$plain_vendor" = "$allocs" ] || fail "the driver did not count every allocation"
    [ "$vendor" -ge 1 ] && [ "$vendor" -lt "$allocs" ] || fail "cache mode made $vendor driver calls for $allocs allocations"
    [ "$(count "$T/cache.tdm" alloc)" = "$allocs" ] || fail "alloc events != $allocs"
    [ "$(count "$T/cache.tdm" free_completed)" = "$allocs" ] || fail "free_completed events != $allocs"
    [ "$(count "$T/cache.tdm" segment_alloc)" = "$vendor" ] || fail "segment_alloc events != driver calls"
    "$SNAPCHECK" "$T/cache.tdm" | grep '^alloc ' | grep -v 'fn=alloc_small_blocks$' &&
        fail "alloc stacks do not start at the program's function"
    ;;
threads)
    for mode in observe cache expandable; do
        conf=mode=$mode
        [ $mode = expandable ] && conf=mode=cache,expandable_segments=1
        on_fake $mode "$ZE_APP" threads LD_PRELOAD="$PRELOAD" \
            TIDEMARK_CONF="$conf,dump=$T/$mode.tdm,max_entries=100000"
        have_snapshot $mode
        grep -q "thread failures: 0" "$T/$mode.out" || fail "calls failed ($mode)"
        [ "$(count "$T/$mode.tdm" alloc)" = 2000 ] || fail "alloc events != 2000 ($mode)"
        [ "$(count "$T/$mode.tdm" free_completed)" = 2000 ] || fail "free_completed != 2000 ($mode)"
    done
    [ "$(fake_counter live "$T/observe.err")" = 0 ] || fail "allocations left in the driver"
    ;;
expand)
    cap=FAKE_ZE_CAPACITY=67108864
    on_fake plain "$ZE_APP" expand $cap
    on_fake expand "$ZE_APP" expand $cap LD_PRELOAD="$PRELOAD" \
        TIDEMARK_CONF="mode=cache,expandable_segments=1,dump=$T/expand.tdm"
    on_shim shim "$ZE_APP" expand $cap TIDEMARK_CONF="mode=cache,expandable_segments=1,dump=$T/shim.tdm"
    for run in expand shim; do
        have_snapshot $run
        same_output plain $run
        grep "tidemark:" "$T/$run.err" | grep -v "wrote snapshot" && fail "unexpected tidemark message ($run)"
        [ "$(count "$T/$run.tdm" alloc)" = 11 ] || fail "$(count "$T/$run.tdm" alloc) allocs of 11 ($run)"
        [ "$(count "$T/$run.tdm" segment_alloc)" = 0 ] || fail "segment_alloc events ($run)"
        maps=$(count "$T/$run.tdm" segment_map)
        [ "$maps" -ge 2 ] || fail "$maps segment_map events ($run)"
        [ "$(count "$T/$run.tdm" segment_unmap)" -ge 1 ] || fail "no segment_unmap ($run)"
        [ "$(fake_counter zeMemAllocDevice "$T/$run.err")" = 0 ] || fail "zeMemAllocDevice reached ($run)"
        [ "$(fake_counter zePhysicalMemCreate "$T/$run.err")" -ge "$maps" ] ||
            fail "no zePhysicalMemCreate ($run)"
        [ "$(fake_counter zeVirtualMemUnmap "$T/$run.err")" -ge 1 ] || fail "no zeVirtualMemUnmap ($run)"
    done
    ;;
expand_novmm)
    cap=FAKE_ZE_CAPACITY=67108864
    on_fake plain "$ZE_APP" expand $cap
    on_fake novmm "$ZE_APP" expand $cap FAKE_ZE_NO_VMM=1 LD_PRELOAD="$PRELOAD" \
        TIDEMARK_CONF="mode=cache,expandable_segments=1,dump=$T/novmm.tdm"
    have_snapshot novmm
    same_output plain novmm
    [ "$(grep "tidemark:" "$T/novmm.err" | grep -v "wrote snapshot")" = \
      "tidemark: expandable_segments=1: ze device 0 has no virtual memory management; it uses normal segments" ] ||
        fail "not the one line about the fallback"
    [ "$(count "$T/novmm.tdm" segment_alloc)" -ge 1 ] || fail "no normal segment"
    [ "$(count "$T/novmm.tdm" segment_map)" = 0 ] || fail "segment_map events"
    [ "$(fake_counter zePhysicalMemCreate "$T/novmm.err")" = 0 ] || fail "zePhysicalMemCreate reached"
    ;;
shim)
    on_fake plain "$ZE_APP" pattern
    # The shim alone (libtidemark.so comes with it and reads TIDEMARK_CONF).
    on_shim shim "$ZE_APP" pattern TIDEMARK_CONF="dump=$T/shim.tdm"
    have_snapshot shim
    same_output plain shim
    check_events "$T/shim.tdm" expect_pattern.txt
    # The shim and the preload: every call still booked once.
    on_shim both "$ZE_APP" pattern LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/both.tdm"
    have_snapshot both
    same_output plain both
    check_events "$T/both.tdm" expect_pattern.txt
    # A program that only calls the loader's DDI tables.
    on_fake ddi_plain "$ZE_DDI_APP" pattern
    on_shim ddi "$ZE_DDI_APP" pattern LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/ddi.tdm"
    have_snapshot ddi
    same_output ddi_plain ddi
    check_events "$T/ddi.tdm" expect_ddi.txt
    [ "$(fake_counter live "$T/ddi.err")" = 0 ] || fail "allocations left in the driver"
    ;;
shim_cache)
    on_fake plain "$ZE_DDI_APP" cache
    on_shim cache "$ZE_DDI_APP" cache TIDEMARK_CONF="mode=cache,dump=$T/cache.tdm"
    have_snapshot cache
    same_output plain cache
    plain_vendor=$(fake_counter zeMemAllocDevice "$T/plain.err")
    vendor=$(fake_counter zeMemAllocDevice "$T/cache.err")
    echo "DDI-table program, 200 allocations: zeMemAllocDevice calls without tidemark $plain_vendor, shim in cache mode $vendor"
    [ "$plain_vendor" = 200 ] || fail "the driver did not count every allocation"
    [ "$vendor" -ge 1 ] && [ "$vendor" -lt 200 ] || fail "cache mode made $vendor driver calls"
    [ "$(count "$T/cache.tdm" alloc)" = 200 ] || fail "alloc events != 200"
    "$SNAPCHECK" "$T/cache.tdm" | grep '^alloc ' | grep -v 'fn=ddi_small_blocks$' &&
        fail "alloc stacks do not start at the program's function"
    ;;
driver_ddi)
    newer() { on_shim "$@" LD_LIBRARY_PATH="$FAKE_LOADER_DIR" FAKE_ZE_LOADER_REPORT=1; }
    on_fake plain "$ZE_APP" pattern
    on_fake ddi_plain "$ZE_DDI_APP" pattern
    # Without tidemark, the newer loader does call through the driver's tables.
    run direct "$ZE_APP" pattern ZE_ENABLE_ALT_DRIVERS="$FAKE_ZE" LD_LIBRARY_PATH="$FAKE_LOADER_DIR" \
        ZE_ENABLE_LOADER_INTERCEPT=1 FAKE_ZE_LOADER_REPORT=1
    same_output plain direct
    grep -q "fake loader: [1-9][0-9]* calls through driver handles, 0 through tables" "$T/direct.err" ||
        { cat "$T/direct.err"; fail "the newer loader did not dispatch through the driver's handles"; }
    # Under the shim: every way the loader dispatches, all booked once.
    for way in single intercept intercept_no_ddi_path; do
        case $way in
        single) env=(ZE_ENABLE_LOADER_INTERCEPT=0) ;;
        intercept) env=(ZE_ENABLE_LOADER_INTERCEPT=1) ;;
        intercept_no_ddi_path) env=(ZE_ENABLE_LOADER_INTERCEPT=1 ZE_ENABLE_LOADER_DRIVER_DDI_PATH=0) ;;
        esac
        newer $way "$ZE_APP" pattern "${env[@]}" TIDEMARK_CONF="dump=$T/$way.tdm"
        have_snapshot $way
        same_output plain $way
        grep -q " 0 calls through driver handles" "$T/$way.err" ||
            { cat "$T/$way.err"; fail "calls went past the shim, through the driver's own tables ($way)"; }
        check_events "$T/$way.tdm" expect_pattern.txt
        newer ${way}_both "$ZE_APP" pattern "${env[@]}" LD_PRELOAD="$PRELOAD" \
            TIDEMARK_CONF="dump=$T/${way}_both.tdm"
        have_snapshot ${way}_both
        same_output plain ${way}_both
        check_events "$T/${way}_both.tdm" expect_pattern.txt
        newer ${way}_ddi "$ZE_DDI_APP" pattern "${env[@]}" TIDEMARK_CONF="dump=$T/${way}_ddi.tdm"
        have_snapshot ${way}_ddi
        same_output ddi_plain ${way}_ddi
        check_events "$T/${way}_ddi.tdm" expect_ddi.txt
        [ "$(fake_counter live "$T/${way}_ddi.err")" = 0 ] || fail "allocations left in the driver ($way)"
    done
    ;;
real)
    # The real loader, no driver on this machine.
    run plain "$ZE_APP" nodriver
    grep -q "zeInit -> 0x78000001" "$T/plain.out" ||
        { echo "SKIP: a Level Zero driver is installed here; this test needs a machine without"; exit 77; }
    for mode in observe cache; do
        run $mode "$ZE_APP" nodriver LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=$mode,dump=$T/$mode.tdm"
        same_output plain $mode
        # nothing booked, so nothing touched: no exit snapshot at all
        [ ! -e "$T/$mode.tdm" ] || fail "a snapshot written with no driver ($mode): $(count "$T/$mode.tdm" alloc) allocations"
    done
    # The shim with no real driver behind it: no driver either.
    run shim "$ZE_APP" nodriver ZE_ENABLE_ALT_DRIVERS="$SHIM" TIDEMARK_ZE_DRIVER=/nonexistent/libze.so \
        LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="dump=$T/shim.tdm"
    same_output plain shim
    cat "$T/observe.out"
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "PASS ($scenario)"
