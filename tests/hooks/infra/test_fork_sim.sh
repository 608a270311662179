#!/usr/bin/env bash
# tests/hooks/infra/test_fork_sim.sh: with fork=follow a forked child's
# snapshot shows only what the child allocated, never the allocations it
# inherited from its parent (fork_sim_app.c: tidemark's own API, the sim
# device, cache mode):
#   child A (1 MiB of its own) shows 1 MiB allocated, current and peak;
#   child B (nothing of its own) writes no snapshot at all;
#   the parent's snapshot still shows its 64 MiB.
source "$(dirname "$0")/lib.sh"
[[ -n ${FORK_SIM_APP:-} ]] || { echo "FORK_SIM_APP not set"; exit 77; }
# A sanitizer build's library needs its runtime loaded first.  No leak
# check for this program: LeakSanitizer's exit-time check in a forked child
# stopped the world and never came back once in 67 ASan runs (a hang in the
# sanitizer's runtime; the test then timed out).  ASan's other checks stay
# on, and the parent's calls are the ones the leak-checked unit tests make.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
LD_PRELOAD=${san_rt:-} TIDEMARK_CONF="dump=$work/%p.tdm,fork=follow" \
    "$FORK_SIM_APP" > out.txt 2> err.txt || fail "fork_sim_app: $(cat out.txt err.txt)"
parent=$(sed -n 's/^parent //p' out.txt)
a=$(sed -n 's/^a //p' out.txt)
b=$(sed -n 's/^b //p' out.txt)
mib=$((1 << 20))
# The all-pools stats line of device 0.
stats_of() { "$SNAPCHECK" "$1" | grep -E '^stats dev=0 allocated='; }

if [[ ! -f $a.tdm ]]; then
    fail "child A wrote no snapshot: $(ls) $(cat err.txt)"
else
    line=$(stats_of "$a.tdm")
    [[ $line == *" allocated=$mib/$mib "* ]] ||
        fail "child A: want allocated=$mib/$mib, have: $line"
    [[ $(count_of "$a.tdm" '^block state=active_allocated size=67108864 ') -eq 0 ]] ||
        fail "child A lists the parent's 64 MiB block"
    ok "child A's snapshot shows only its own 1 MiB"
fi
if [[ -e $b.tdm ]]; then
    fail "child B allocated nothing yet wrote $b.tdm: $(stats_of "$b.tdm")"
elif [[ $(find . -name '*.tdm' | wc -l) -ne 2 ]]; then
    fail "want two snapshots (parent, child A), have: $(ls)"
else
    ok "child B, which allocated nothing, wrote no snapshot"
fi
if [[ ! -f $parent.tdm ]]; then
    fail "the parent wrote no snapshot: $(ls) $(cat err.txt)"
else
    line=$(stats_of "$parent.tdm")
    want=$((64 * mib))
    [[ $line == *" allocated=$want/$want "* ]] ||
        fail "parent: want allocated=$want/$want, have: $line"
    ok "the parent's snapshot still shows its 64 MiB"
fi
finish
