#!/bin/bash
# tests/simcuda/test_against_torch.sh: tidemark held against PyTorch itself,
# in the same process, on the simulated H100 (issue "A simulated GPU", item
# 2).  Every script of the set (run_mlp.py, run_gpt.py: small GPT, AdamW,
# bf16 autocast; scripts/: conv net with cuDNN off, bf16 autocast, gradient
# accumulation, activation checkpointing, KV-cache inference, torchvision's
# resnet18) runs unmodified under `tidemark run --simulate h100`, wrapped by
# torch_reference.py, and compare_with_torch.py holds the recording against
# PyTorch's own figures: peak allocated = max_memory_allocated(), peak
# reserved = max_memory_reserved(), the segment timeline and the final
# segments = PyTorch's, the memory_viz export = its _dump_snapshot(),
# exactly.  Also with expandable_segments:True, in cache mode (which under
# PyTorch observes instead, and says so, its caching on or off), and with
# torch_tensors=pluggable (tidemark's allocator serves torch: its own
# peaks = what PyTorch's allocator reached on the same script).  Skipped (77) without a CUDA torch,
# and in sanitizer builds.
set -uo pipefail
PY=${TDM_VENV_PYTHON:-}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
[ -x "$PY" ] && "$PY" "$TDM_SOURCE_DIR/tests/simcuda/cuda_torch.py" torchvision 2>/dev/null ||
    { echo "no CUDA build of torch (with torchvision) at TDM_VENV_PYTHON='$PY': skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
D=$TDM_SOURCE_DIR/tests/simcuda
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# run NAME SCRIPT [TIDEMARK-ARGS...]: the script under tidemark and the
# reference wrapper, in $T/NAME (env from the caller).  A run that PyTorch's
# own exit race ended (its autograd device thread dropping the last
# backward's graph task while the interpreter finalizes aborts with
# "terminate called without an active exception", pytorch/pytorch#38230,
# after every line of the script and of the wrapper ran; docs/simulate.md)
# runs once more: the wrapper must leave through the interpreter's exit,
# where tidemark and PyTorch write what the checks read.  Anything else,
# or the race twice, fails.
run() {
    local name=$1 script=$2; shift 2
    local try
    for try in 1 2; do
        rm -rf "$T/$name"
        mkdir -p "$T/$name"
        "$TIDEMARK" run --simulate h100 -q -o "$T/$name" "$@" -- \
            "$PY" "$D/torch_reference.py" "$script" "$T/$name/ref" "$T/$name/script.json" \
            >"$T/$name/log" 2>&1 && return 0
        [ $try = 1 ] && [ -s "$T/$name/ref.json" ] &&
            grep -q "^terminate called without an active exception" "$T/$name/log" || break
        echo "$name: PyTorch's exit race (terminate called without an active exception): once more"
    done
    fail "$name: run: $(tail -5 "$T/$name/log")"
    return 1
}
compare() {
    echo "== $1"
    "$PY" "$D/compare_with_torch.py" "$TIDEMARK" "$T/$1"/*.tdm "$T/$1/ref" || fail "$1"
}
# peaks_equal NAME REF KEY-ALLOCATED KEY-RESERVED WHAT: the recording's
# peak allocated and peak reserved (its stats line) are the figures KEY-*
# of PyTorch's reference run REF (per_device[0]), which WHAT names.
peaks_equal() {
    local got want
    got=$("$TIDEMARK" summary --bytes "$T/$1"/*.tdm | grep -m1 ' stats ' |
        sed -n 's/.*allocated [0-9]* B now, \([0-9]*\) B peak; reserved [0-9]* B now, \([0-9]*\) B peak/\1 \2/p')
    want=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["per_device"][0]; print(d[sys.argv[2]], d[sys.argv[3]])' \
        "$T/$2/ref.json" "$3" "$4")
    [ -n "$got" ] && [ "$got" = "$want" ] || { fail "$1: peaks '$got' (allocated reserved), $5 $want"; return; }
    echo "ok: $1: peaks $got B (allocated, reserved) = $5"
}
# tidemark's own allocator's peaks against PyTorch's allocator's on the
# same script ($2: the history run's reference).
own_peaks() {
    peaks_equal "$1" "$2" max_allocated max_reserved "PyTorch's allocator's"
}
# Where the driver serves every allocation (nothing cached: allocated =
# reserved), both peaks = PyTorch's peak of the bytes asked for on the same
# script ($2: the history run's reference).
requested_peaks() {
    peaks_equal "$1" "$2" max_requested max_requested "PyTorch's requested_bytes peak (served by the driver)"
}

SCRIPTS="mlp:$D/run_mlp.py gpt:$D/run_gpt.py"
for f in conv autocast accum checkpoint kvcache vision; do SCRIPTS="$SCRIPTS $f:$D/scripts/$f.py"; done
for s in $SCRIPTS; do
    run "${s%%:*}" "${s#*:}" && compare "${s%%:*}"
done
for s in mlp gpt checkpoint kvcache; do
    script=$(tr ' ' '\n' <<<"$SCRIPTS" | sed -n "s/^$s://p")
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True run "$s-expandable" "$script" &&
        compare "$s-expandable"
done

# Cache mode: PyTorch caches itself, so tidemark observes, says so, and
# the recording is the same.
if run mlp-cache "$D/run_mlp.py" --conf mode=cache; then
    grep -q "mode=cache: PyTorch (libc10_cuda) caches device memory itself; CUDA allocations are observed instead" \
        "$T/mlp-cache/log" || fail "mode=cache under PyTorch does not say it observes: $(cat "$T/mlp-cache/log")"
    compare mlp-cache
fi
# ... and with PyTorch's caching off, each tensor is a cudaMalloc of
# libc10_cuda, whose dynamic symbols import cudaIpcGetMemHandle (tensor
# sharing exports the allocation that holds a tensor): the driver serves
# them, so that an IPC handle names its buffer, and tidemark says so.  What
# it records is each tensor at the size asked for, nothing cached: peak
# allocated = peak reserved = PyTorch's requested_bytes peak of the cached
# run of the same script.
for s in mlp conv; do
    script=$(tr ' ' '\n' <<<"$SCRIPTS" | sed -n "s/^$s://p")
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 run "$s-cache-uncached-torch" "$script" --conf mode=cache || continue
    grep -q "mode=cache: libc10_cuda.so exports its CUDA allocations over IPC; the driver serves what it allocates" \
        "$T/$s-cache-uncached-torch/log" ||
        fail "$s: mode=cache under PyTorch without caching does not say the driver serves: $(cat "$T/$s-cache-uncached-torch/log")"
    requested_peaks "$s-cache-uncached-torch" "$s"
    # PyTorch keeps no history without its caching allocator: the empty
    # pickle goes, rather than being named by every command after.
    left=$(ls "$T/$s-cache-uncached-torch" | grep 'torch\.pickle$')
    [ -z "$left" ] || fail "$s: an empty PyTorch history left beside the snapshot: $left"
    ! grep -q "cannot be merged\|without a snapshot of its own" "$T/$s-cache-uncached-torch/log" ||
        fail "$s: an empty PyTorch history reported: $(cat "$T/$s-cache-uncached-torch/log")"
done
# Pluggable: tidemark's allocator is torch's (the scripts that ask torch
# for its statistics cannot run so: torch raises).
for s in conv autocast accum checkpoint kvcache vision; do
    run "$s-pluggable" "$D/scripts/$s.py" --conf torch_tensors=pluggable && own_peaks "$s-pluggable" "$s"
done
[ $failed = 0 ] || { echo "$failed check(s) failed"; exit 1; }
echo "all held against PyTorch"
