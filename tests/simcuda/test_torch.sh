#!/bin/bash
# tests/simcuda/test_torch.sh: a real CUDA 13 build of PyTorch, unmodified,
# on the simulated platform (torch_cases.py holds PyTorch's own figures
# against the platform's log of what it was asked for): import and device
# properties (M1), several devices, del + empty_cache, ones().cpu(),
# caching off, nn.Linear forward and backward through the cuBLAS and
# cuBLASLt facades, an MLP trained with AdamW, expandable segments through
# the driver's virtual-memory calls, and out-of-memory at the preset's
# capacity; cuDNN off by the platform's Python start-up hook (and left on
# with SIMCUDA_TORCH_DEFAULTS=0), attention and a conv net on PyTorch's own
# kernels.  Skipped (77) without a CUDA torch at TDM_VENV_PYTHON, and in
# sanitizer builds (the interpreter does not carry the sanitizer runtime).
set -uo pipefail
PY=${TDM_VENV_PYTHON:-}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
[ -x "$PY" ] && "$PY" "$TDM_SOURCE_DIR/tests/simcuda/cuda_torch.py" 2>/dev/null ||
    { echo "no CUDA build of torch at TDM_VENV_PYTHON='$PY': skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CASES=${SIMCUDA_TORCH_CASES:-"m1 devices cache nocache linear mlp expandable oom defaults nodefaults sdpa conv"}
failed=0
for c in $CASES; do
    extra=()
    case $c in
        devices) extra=(SIMCUDA_GPU=2xh100 EXPECT_DEVICES=2);;
        nocache) extra=(PYTORCH_NO_CUDA_MEMORY_CACHING=1);;
        expandable) extra=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True);;
        nodefaults) extra=(SIMCUDA_TORCH_DEFAULTS=0);;
    esac
    name=$c
    [ $c = nodefaults ] && c=defaults
    echo "== $name"
    if ! env LD_PRELOAD="$SIMCUDA_PRELOAD" PYTHONPATH="$SIMCUDA_LIBDIR/python/autostart" \
        SIMCUDA_TRACE="$T/$name.trace" "${extra[@]}" \
        timeout 300 "$PY" "$TDM_SOURCE_DIR/tests/simcuda/torch_cases.py" "$c" "$T/$name.trace"; then
        echo "FAILED: $name"
        failed=$((failed+1))
    fi
done
[ $failed = 0 ] || { echo "$failed case(s) failed"; exit 1; }
