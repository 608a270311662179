#!/bin/bash
# tests/gpu/run.sh [BUILD_DIR]: tidemark's CUDA hooks on a machine with an
# NVIDIA GPU.  Skips (exit 77) where there is none.
#
# What it runs, each under libtidemark_preload.so unless said otherwise:
#   cuda_app.cu built with nvcc's defaults (libcudart_static.a inside: seen
#     only through the dlsym / cuGetProcAddress hooks) and with
#     -cudart shared, in mode=observe and mode=cache: the program's own
#     check of its kernels' results must pass, and the snapshot's peak of
#     device 0 must equal the peak the program computes for itself;
#   torch_train.py (if PyTorch with CUDA is installed):
#     torch       PyTorch's caching allocator alone: the reference
#                 (max_memory_allocated, and the peak of PyTorch's own
#                 memory snapshot of the run);
#     raw+cache   PYTORCH_NO_CUDA_MEMORY_CACHING=1 under mode=cache: every
#                 tensor is a cudaMalloc that tidemark's allocator serves;
#     pluggable   no preload: CUDAPluggableAllocator over libtidemark.so's
#                 tdm_torch_alloc / tdm_torch_free;
#     expandable  PyTorch's allocator with expandable_segments:True under
#                 mode=observe: cuMemCreate/cuMemMap reached through
#                 cudaGetDriverEntryPoint must show as segment_map events;
#   tidemark's peak is compared with the reference peak, and the loss with
#   the reference loss (the training must not change).
# Prints a table; exit 0 when every row that ran passed, 1 otherwise.
#
# BUILD_DIR (default: build beside this repository's sources) must hold
# libtidemark.so, libtidemark_preload.so and the tidemark command.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
B=$(cd "${1:-$src/build}" 2>/dev/null && pwd) || { echo "no build folder ${1:-$src/build}"; exit 2; }
PRELOAD=$B/libtidemark_preload.so
LIBTDM=$B/libtidemark.so
TIDEMARK=$B/tidemark
# Counts events of one action (the summary has no per-action count); the
# "no caching" verdict needs it, so it must be built.
SNAPCHECK=$B/tests/hooks/cuda/tdm_cuda_snapcheck
for f in "$PRELOAD" "$LIBTDM" "$TIDEMARK" "$SNAPCHECK"; do
    [ -e "$f" ] || { echo "missing $f (build first)"; exit 2; }
done

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no NVIDIA GPU here: skipped"
    exit 77
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

rows=()
failed=0
row() { # CASE STATUS EVENTS SEGMENTS PEAK REFERENCE VERDICT
    rows+=("$(printf '%-26s %-6s %8s %10s %14s %14s  %s' "$@")")
    case $7 in FAIL*) failed=1 ;; esac
}
# Peak allocated bytes of device 0 in a snapshot, from `tidemark summary`.
peak_of() {
    "$TIDEMARK" summary "$1" 2>/dev/null |
        sed -n '/^device 0 /,/peak allocated/s/.*peak allocated.*(\([0-9]*\) B).*/\1/p' | head -1
}
events_of() { "$TIDEMARK" summary "$1" 2>/dev/null | awk '/^events/{print $2; exit}'; }
count_of() { "$SNAPCHECK" "$1" count "$2" 2>/dev/null || echo 0; }
close_to() { # A B: within 1% of each other
    [ -n "$1" ] && [ -n "$2" ] && [ "$2" -gt 0 ] &&
        awk -v a="$1" -v b="$2" 'BEGIN{d=a-b; if(d<0)d=-d; exit !(d <= b/100)}'
}

# ---- a CUDA program, static and shared cudart ----------------------------
if [ -x "$NVCC" ]; then
    "$NVCC" -O2 -o "$T/app_static" "$here/cuda_app.cu" >"$T/nvcc1.log" 2>&1 &&
        "$NVCC" -O2 -cudart shared -o "$T/app_shared" "$here/cuda_app.cu" >"$T/nvcc2.log" 2>&1 ||
        { cat "$T"/nvcc*.log; echo "nvcc failed"; exit 1; }
    for link in static shared; do
        for mode in observe cache; do
            name="cuda_app $link $mode"
            snap=$T/app_${link}_$mode.tdm
            LD_PRELOAD=$PRELOAD TIDEMARK_CONF="mode=$mode,dump=$snap" "$T/app_$link" \
                >"$T/out" 2>"$T/err"
            rc=$?
            want=$(sed -n 's/^expected peak device bytes //p' "$T/out")
            got=$(peak_of "$snap")
            verdict=PASS
            if [ $rc -ne 0 ] || ! grep -q "result ok" "$T/out"; then
                verdict="FAIL (exit $rc: $(grep -v "^tidemark:" "$T/err" | tail -1))"
            elif [ "$mode" = observe ] && [ "$got" != "$want" ]; then
                verdict="FAIL (peak differs)"
            elif [ "$mode" = cache ] && ! close_to "$got" "$want"; then
                verdict="FAIL (peak differs)"
            elif [ "$mode" = cache ] &&
                [ "$(count_of "$snap" segment_alloc)" -ge "$(count_of "$snap" alloc)" ]; then
                verdict="FAIL (no caching)"
            fi
            row "$name" "$rc" "$(events_of "$snap")" "$(count_of "$snap" segment_alloc)" \
                "${got:--}" "${want:--}" "$verdict"
        done
    done
else
    row "cuda_app" "-" "-" "-" "-" "-" "n/a (no nvcc)"
fi

# ---- PyTorch ------------------------------------------------------------------
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    train=$here/torch_train.py
    json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2], ''))" "$@"; }
    "$PY" "$train" torch >"$T/torch.json" 2>"$T/torch.err"
    rc=$?
    ref_peak=$(json "$T/torch.json" torch_snapshot_peak 2>/dev/null)
    ref_max=$(json "$T/torch.json" max_memory_allocated 2>/dev/null)
    ref_loss=$(json "$T/torch.json" loss 2>/dev/null)
    v=PASS
    [ $rc -eq 0 ] && [ "$ref_peak" = "$ref_max" ] || v="FAIL (snapshot peak $ref_peak vs max_memory_allocated $ref_max)"
    row "torch (reference)" "$rc" "-" "-" "${ref_max:--}" "${ref_peak:--}" "$v"

    # torch_case NAME JSONMODE SNAPSHOT [ENV...]: runs the script, compares.
    torch_case() {
        local name=$1 mode=$2 snap=$3; shift 3
        env "$@" "$PY" "$train" $mode >"$T/case.json" 2>"$T/case.err"
        local rc=$? got loss v=PASS
        got=$(peak_of "$snap")
        loss=$(json "$T/case.json" loss 2>/dev/null)
        if [ $rc -ne 0 ]; then
            v="FAIL (exit $rc: $(grep -v "^tidemark:" "$T/case.err" | tail -1))"
        elif [ "$loss" != "$ref_loss" ]; then
            v="FAIL (loss $loss, reference $ref_loss)"
        elif ! close_to "$got" "$ref_max"; then
            v="FAIL (peak differs)"
        fi
        row "$name" "$rc" "$(events_of "$snap")" "$(count_of "$snap" segment_alloc)" \
            "${got:--}" "${ref_max:--}" "$v"
    }
    torch_case "torch raw, mode=cache" raw "$T/raw.tdm" PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
        LD_PRELOAD="$PRELOAD" TIDEMARK_CONF="mode=cache,dump=$T/raw.tdm"
    if nm -D --defined-only "$LIBTDM" 2>/dev/null | grep -q " tdm_torch_alloc$"; then
        torch_case "torch pluggable" "pluggable $LIBTDM" "$T/plug.tdm" \
            TIDEMARK_CONF="dump=$T/plug.tdm"
    else
        row "torch pluggable" "-" "-" "-" "-" "-" "n/a (no tdm_torch_alloc in libtidemark.so)"
    fi
    env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True LD_PRELOAD="$PRELOAD" \
        TIDEMARK_CONF="mode=observe,dump=$T/exp.tdm" "$PY" "$train" expandable \
        >"$T/exp.json" 2>"$T/exp.err"
    rc=$?
    maps=$(count_of "$T/exp.tdm" segment_map)
    loss=$(json "$T/exp.json" loss 2>/dev/null)
    v=PASS
    if [ $rc -ne 0 ]; then
        v="FAIL (exit $rc: $(grep -v "^tidemark:" "$T/exp.err" | tail -1))"
    elif [ "$loss" != "$ref_loss" ]; then
        v="FAIL (loss $loss, reference $ref_loss)"
    elif ! [ "$maps" -gt 0 ] 2>/dev/null; then
        v="FAIL (no segment_map events: expandable segments not seen)"
    fi
    row "torch expandable, observe" "$rc" "$(events_of "$T/exp.tdm")" "maps=$maps" \
        "$(json "$T/exp.json" max_memory_allocated 2>/dev/null)" "${ref_max:--}" "$v"
else
    row "torch" "-" "-" "-" "-" "-" "n/a (no PyTorch with CUDA)"
fi

echo "tidemark CUDA hooks on $gpu"
printf '%-26s %-6s %8s %10s %14s %14s  %s\n' case exit events segments "peak (B)" \
    "reference (B)" verdict
for r in "${rows[@]}"; do echo "$r"; done
exit $failed
