#!/bin/bash
# tests/simcuda/test_import_replay.sh: real PyTorch histories (torch 2.14's
# _dump_snapshot() of history_pickle.py on two simulated H100s, once with
# default segments, once with expandable_segments:True; user_metadata,
# a tensor annotation and profiler annotations in them) through `tidemark
# import` and `tidemark replay`:
#   - import, then export --format pytorch, gives PyTorch's file back
#     (every trace entry, `annotate` entries and user_metadata included,
#     segments, external annotations with their ENDs and devices), and the
#     imported peak allocated is max_memory_allocated() on each device;
#   - replay under the recording's own PYTORCH_CUDA_ALLOC_CONF reproduces
#     PyTorch's segment timeline, and its peak reserved is
#     max_memory_reserved(), on each device;
#   - replay under the other setting predicts what PyTorch does when the
#     script is run again so: its peak reserved and reserved timeline are
#     the other run's, both ways.
# Skipped (77) without a CUDA torch, and in sanitizer builds.
set -uo pipefail
PY=${TDM_VENV_PYTHON:-}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
[ -x "$PY" ] && "$PY" "$TDM_SOURCE_DIR/tests/simcuda/cuda_torch.py" 2>/dev/null ||
    { echo "no CUDA build of torch at TDM_VENV_PYTHON='$PY': skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
D=$TDM_SOURCE_DIR/tests/simcuda
fail() { echo "FAIL: $*"; exit 1; }
check() { "$PY" "$D/check_import_replay.py" "$@" || exit 1; }
cd "$T"
for tag in default expandable; do
    conf=; [ $tag = expandable ] && conf=expandable_segments:True
    PYTORCH_CUDA_ALLOC_CONF=$conf SIMCUDA_GPU=2xh100 LD_PRELOAD="$SIMCUDA_PRELOAD" \
        PYTHONPATH="$SIMCUDA_LIBDIR/python/autostart" "$PY" "$D/history_pickle.py" $tag.pickle $tag.json \
        >log 2>&1 || fail "$tag: the script: $(cat log)"
    "$TIDEMARK" import -q $tag.pickle -o $tag.tdm 2>log || fail "$tag: import: $(cat log)"
    rm -f again.pickle
    "$TIDEMARK" export -f pytorch -q -o again.pickle $tag.tdm 2>log || fail "$tag: export: $(cat log)"
    echo "== $tag"
    check roundtrip $tag.pickle again.pickle
    check peaks "$TIDEMARK" $tag.tdm $tag.json
done
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])]['max_reserved'])" "$1" "$2"; }
replay_peak() { # FILE DEVICE INDEX [--conf K=V]
    "$TIDEMARK" replay "$1" --device "$2" --json "${@:4}" |
        "$PY" -c "import json,sys; print(json.load(sys.stdin)['settings'][int(sys.argv[1])]['peak_reserved'])" "$3"
}
for pair in "default expandable expandable_segments=1" "expandable default expandable_segments=0"; do
    set -- $pair
    for dev in 0 1; do
        out=$("$TIDEMARK" replay $1.tdm --device $dev) || fail "replay $1: $out"
        grep -q 'segment timeline under the recorded settings: reproduced' <<<"$out" ||
            fail "$1, device $dev: the replay does not reproduce PyTorch's segment timeline: $out"
        got=$(replay_peak $1.tdm $dev 0) want=$(field $1.json $dev)
        [ "$got" = "$want" ] || fail "$1, device $dev: replayed peak reserved $got B, max_memory_reserved() $want B"
        echo "ok: $1, device $dev: replay under its own settings: PyTorch's segment timeline, peak reserved $got B"
        got=$(replay_peak $1.tdm $dev 1 --conf $3) want=$(field $2.json $dev)
        [ "$got" = "$want" ] || fail "$1 replayed with $3, device $dev: peak reserved $got B, PyTorch run so: $want B"
        rm -rf saved
        "$TIDEMARK" replay $1.tdm --device $dev --conf $3 --save saved >/dev/null || fail "replay --save"
        rm -f saved.pickle
        "$TIDEMARK" export -f pytorch -q -o saved.pickle "saved/$3.tdm" || fail "export of the replay"
        check timeline saved.pickle $2.json $dev
        echo "ok: $1 replayed with $3, device $dev: predicts PyTorch's rerun, peak reserved $got B"
    done
done
