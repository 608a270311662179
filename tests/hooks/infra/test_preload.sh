#!/usr/bin/env bash
# The preload infrastructure end to end on a made-up vendor: an unmodified
# program (fake_app) under libtdmfake_preload.so (fake_hook.c + the real
# hooks/preload/common.c).  Checks: without TIDEMARK_CONF, with a bad one
# and with record=off the hooks stay out of the way (same output, no
# file); the lookups of common.c (versioned, next, real dlsym, guard);
# observe mode records exactly the known pattern (events, sizes, streams,
# oom with the free bytes, maps, one booking for a nested vendor call, no
# booking for a bad free, stacks naming the program's functions, final
# state and stats); cache mode calls the vendor far less than the program
# allocates and keeps vendor errors unchanged.
. "$(dirname "$0")/lib.sh"
: "${FAKE_APP:?}" "${FAKE_PRELOAD:?}" "${SNAPCHECK:?}"
export FAKEV_CAPACITY=$((64 << 20))

# ---- no tidemark, and tidemark not asked -----------------------------------------
"$FAKE_APP" pattern > plain.out || fail "fake_app alone: $(cat plain.out)"
LD_PRELOAD=$PRE "$FAKE_APP" pattern > pre.out 2> pre.err || fail "preloaded, no conf"
cmp -s plain.out pre.out || fail "preloaded without TIDEMARK_CONF changed the output"
[[ ! -s pre.err ]] || fail "preloaded without TIDEMARK_CONF printed: $(cat pre.err)"
TIDEMARK_CONF="mode=serve,dump=$work/bad.tdm" LD_PRELOAD=$PRE "$FAKE_APP" pattern \
    > bad.out 2> bad.err || fail "bad conf: program failed"
cmp -s plain.out bad.out || fail "a bad TIDEMARK_CONF changed the output"
[[ $(wc -l < bad.err) -eq 1 ]] && grep -q "bad value 'serve' for key 'mode'" bad.err ||
    fail "bad conf: want one line naming mode: $(cat bad.err)"
TIDEMARK_CONF="record=off,dump=$work/off.tdm" LD_PRELOAD=$PRE "$FAKE_APP" pattern \
    > off.out || fail "record=off"
cmp -s plain.out off.out || fail "record=off changed the output"
ls ./*.tdm > /dev/null 2>&1 && fail "files written: $(ls ./*.tdm)"
ok "the hooks stay out of the way without a usable TIDEMARK_CONF"

# ---- common.c's lookups and guard --------------------------------------------------
out=$(LD_PRELOAD=$PRE "$FAKE_APP" selftest)
[[ $out == "selftest bits=63" ]] || fail "selftest: $out (want bits=63)"
ok "versioned and next lookups, real dlsym, guard"

# ---- observe mode: the known pattern ----------------------------------------------
TIDEMARK_CONF="dump=$work/obs-%p.tdm" LD_PRELOAD=$PRE "$FAKE_APP" pattern \
    > obs.out 2> obs.err || fail "observe: $(cat obs.out obs.err)"
cmp -s plain.out obs.out || fail "observe changed the program's output"
snap=$(ls obs-*.tdm 2> /dev/null)
if [[ -z $snap ]]; then
    fail "observe: no snapshot: $(cat obs.err)"
else
    "$SNAPCHECK" "$snap" > obs.txt || fail "snapcheck $snap"
    cat > want.txt <<'W'
segment_alloc size=1048576 stream=0x0
alloc size=1048576 stream=0x0
segment_alloc size=3000 stream=0x51
alloc size=3000 stream=0x51
segment_alloc size=1000 stream=0x0
alloc size=1000 stream=0x0
oom size=134217728 stream=0x0
segment_map size=2097152 stream=0x0
segment_map size=2097152 stream=0x0
segment_unmap size=2097152 stream=0x0
segment_unmap size=2097152 stream=0x0
segment_map size=4194304 stream=0x0
free_requested size=3000 stream=0x51
free_completed size=3000 stream=0x51
segment_free size=3000 stream=0x51
free_requested size=1000 stream=0x0
free_completed size=1000 stream=0x0
segment_free size=1000 stream=0x0
W
    events_of "$snap" > got.txt
    diff want.txt got.txt > /dev/null || fail "observe events differ: $(diff want.txt got.txt)"
    grep -q "^header mode=observe " obs.txt || fail "observe: header mode"
    grep -q "^device 0 cuda $FAKEV_CAPACITY Fake Vendor Device 0$" obs.txt ||
        fail "observe: device line: $(grep ^device obs.txt)"
    free_at_oom=$(printf '0x%x' $((FAKEV_CAPACITY - 1048576 - 3000 - 1000)))
    grep -qE "^event oom dev=0 size=134217728 .* addr=$free_at_oom stack=fa_try_huge<" obs.txt ||
        fail "observe: oom event with free bytes $free_at_oom: $(grep 'event oom' obs.txt)"
    for pair in "1048576 fa_make_weights" "3000 fa_make_activation" "1000 fa_make_table"; do
        set -- $pair
        grep -qE "^event alloc dev=0 size=$1 .* stack=$2<" obs.txt ||
            fail "observe: the alloc of $1 should start at $2: $(grep "event alloc dev=0 size=$1 " obs.txt)"
    done
    grep -qE "^event segment_map .* stack=fa_map_pages<" obs.txt || fail "observe: map stack"
    grep -q "addr=0xdead000" obs.txt && fail "observe: the bad free was booked"
    [[ $(grep -c "^segment " obs.txt) -eq 2 ]] || fail "observe: want 2 segments at the end"
    grep -qE "^segment dev=0 pool=2 exp=0 size=1048576 .* blocks=1 stack=fa_make_weights<" obs.txt ||
        fail "observe: the weights segment"
    grep -qE "^segment dev=0 pool=2 exp=1 size=4194304 " obs.txt || fail "observe: the mapping"
    grep -qE "^stats dev=0 allocated=1048576/1052576 reserved=5242880/5246880 .* allocations=1 segments=2 ooms=1$" obs.txt ||
        fail "observe: stats: $(grep ^stats obs.txt)"
    ok "observe: exact events, streams, oom free bytes, stacks, state and stats"
fi

# ---- cache mode ----------------------------------------------------------------------
TIDEMARK_CONF="mode=cache,dump=$work/cache.tdm" LD_PRELOAD=$PRE "$FAKE_APP" churn 200 \
    > cache.out 2> cache.err || fail "cache churn: $(cat cache.out cache.err)"
calls=$(sed -n 's/^vendor alloc_calls=\([0-9]*\).*/\1/p' cache.out)
[[ -n $calls && $calls -ge 1 && $calls -lt 200 ]] ||
    fail "cache: the vendor should be called less than 200 times: $(cat cache.out)"
"$FAKE_APP" churn 200 | grep -q "alloc_calls=200 " || fail "churn alone calls the vendor 200 times"
"$SNAPCHECK" cache.tdm > cache.txt || fail "snapcheck cache.tdm"
grep -q "^header mode=cache " cache.txt || fail "cache: header mode"
[[ $(grep -cE "^event alloc dev=0 size=4096 .* stack=fa_churn_once<" cache.txt) -eq 200 ]] ||
    fail "cache: want 200 alloc events from fa_churn_once"
[[ $(grep -c "^event segment_alloc " cache.txt) -eq $calls ]] ||
    fail "cache: one segment_alloc per vendor call"
grep -q "^device 0 cuda " cache.txt || fail "cache: the device is the vendor's"
ok "cache: $calls vendor allocation(s) for 200 program allocations"

TIDEMARK_CONF="mode=cache,dump=$work/cpat.tdm" LD_PRELOAD=$PRE "$FAKE_APP" pattern \
    > cpat.out 2> cpat.err || fail "cache pattern: $(cat cpat.out cpat.err)"
"$SNAPCHECK" cpat.tdm > cpat.txt || fail "snapcheck cpat.tdm"
grep -qE "^event alloc dev=0 size=3000 .* stream=0x51 .* stack=fa_make_activation<" cpat.txt ||
    fail "cache pattern: the stream allocation"
grep -qE "^event oom dev=0 " cpat.txt || fail "cache pattern: the oom event"
ok "cache: vendor errors pass through unchanged (pattern ran to the end)"

finish
