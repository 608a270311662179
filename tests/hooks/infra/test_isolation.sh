#!/usr/bin/env bash
# DESIGN.md, "Loading tidemark must not change the program": a C++ program
# with libtidemark.so linked (isolation.cpp), recording with native stacks,
# still gets malloc from libc and _Unwind_RaiseException from libgcc_s, and
# a C++ exception thrown inside a hooked vendor call unwinds to its catch.
# Run as is, with TIDEMARK_CONF, with the test interposer preloaded (the
# hooked call), and with libtidemark_preload.so preloaded when it was built.
. "$(dirname "$0")/lib.sh"
if [[ -z ${ISOLATION:-} ]]; then
    echo "no C++ compiler: skipped"
    exit 77
fi
: "${FAKE_PRELOAD:?}"
# A sanitizer build replaces malloc with its runtime's, on purpose; the
# promise is that tidemark does not.
malloc_from=libc.so
[[ -n $san_rt ]] && malloc_from=$(basename "$san_rt" | sed 's/\.so.*/.so/')
export ISOLATION_MALLOC_FROM=$malloc_from
unwind_from=libgcc_s.so
[[ $san_rt == *libasan* ]] && unwind_from=$malloc_from
export ISOLATION_UNWIND_FROM=$unwind_from

check() {
    local label=$1
    shift
    if ! "$@" > iso.out 2>&1; then
        fail "$label: $(cat iso.out)"
        return
    fi
    grep -q "^ok malloc from ${malloc_from}" iso.out || fail "$label: malloc: $(cat iso.out)"
    grep -q "^ok _Unwind_RaiseException from ${unwind_from}" iso.out ||
        fail "$label: unwinder: $(cat iso.out)"
    grep -q "^ok exception unwound through the hooked call" iso.out ||
        fail "$label: exception: $(cat iso.out)"
    ok "$label"
}

check "linked" "$ISOLATION"
check "linked, TIDEMARK_CONF" env TIDEMARK_CONF="dump=$work/a.tdm" "$ISOLATION"
check "test interposer preloaded (hooked call)" \
    env TIDEMARK_CONF="dump=$work/b.tdm" LD_PRELOAD="$PRE" "$ISOLATION"
if [[ -n ${PRELOAD:-} && -f $PRELOAD ]]; then
    check "libtidemark_preload.so preloaded" \
        env TIDEMARK_CONF="dump=$work/c.tdm" LD_PRELOAD="${san_rt:+$san_rt:}$PRELOAD" "$ISOLATION"
    check "both preloaded" \
        env TIDEMARK_CONF="dump=$work/d.tdm" LD_PRELOAD="${san_rt:+$san_rt:}$PRELOAD:$FAKE_PRELOAD" "$ISOLATION"
else
    echo "libtidemark_preload.so not built: that case is skipped"
fi
# The hooked call was recorded up to the throw's own allocation? No: the
# throw leaves the hook before it books; the calls after it are booked.
if [[ -f b.tdm ]]; then
    "$SNAPCHECK" b.tdm | grep -qE '^event alloc dev=0 size=100 ' ||
        fail "the hook stopped recording after the exception"
    ok "the hook records again after an exception went through it"
fi
finish
