#!/usr/bin/env bash
# bench/replay reads the trace format bench/sweep writes: a free row
# without a size (`free,TIME,ID,,,`) frees the allocation of that id.  A
# loader that skipped such rows kept every allocation live: 2,000 blocks of
# 64 MiB on a 16 GiB device then ran the replay out of memory.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
bench="$TDM_BINARY_DIR/bench/replay"
[ -x "$bench" ] || { echo "no $bench (benchmarks not built): skipped"; exit 77; }

{
    echo "# tidemark replay trace v1: as bench/sweep writes it"
    echo "action,time_ns,id,size,category,stream"
    for ((i = 1; i <= 2000; i++)); do
        echo "alloc,$((2 * i)),$i,67108864,,0"
        echo "free,$((2 * i + 1)),$i,,,"
    done
} >sweep.csv
TDM_BENCH_ROUNDS=1 TDM_BENCH_HIT_ITERS=10 "$bench" sweep.csv >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "bench/replay exit $rc: $(head -c 400 err)"
has out "sweep.csv: 2000 pairs"
# One block live at a time: reserved equals allocated at the peak.
has_re out "sweep\.csv +1\.000 "
lacks err "out of memory"
finish "bench replay reads free rows without a size"
