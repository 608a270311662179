#!/bin/sh
# Regenerates the trace CSVs of bench/traces:
#   lstm.csv, resnet.csv, gpt.csv  captured from PyTorch (CPU) training
#                                  scripts under the capture shim;
#   longtail.csv                   written by gen_longtail.py (seeded).
# usage: bench/traces/capture.sh [BUILD_DIR]   (default: build)
# Needs libtdm_trace_capture.so (cmake --build BUILD_DIR --target
# tdm_trace_capture) and a Python with torch (PYTHON, default
# /usr/bin/python3: Debian's python3-torch).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shim=$(cd "$build" && pwd)/bench/libtdm_trace_capture.so
python=${PYTHON:-/usr/bin/python3}
[ -f "$shim" ] || { echo "capture.sh: no $shim (build the tdm_trace_capture target)" >&2; exit 2; }

for model in lstm resnet gpt; do
    # The shim writes $model.csv.tmp and renames it when the process exits.
    (cd "$here" && TDM_CAPTURE_OUT="$here/$model.csv" LD_PRELOAD="$shim" \
        "$python" "train_$model.py")
    echo "capture.sh: wrote $here/$model.csv"
done
"$python" "$here/gen_longtail.py" "$here/longtail.csv"
echo "capture.sh: wrote $here/longtail.csv"
