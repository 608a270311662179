#!/bin/bash
# tests/hooks/cuda/test_cuda_headers.sh: where the build looks for the CUDA
# headers (cmake/cuda_headers.cmake), run in CMake's script mode over
# made-up folders: CUDAToolkit_ROOT before CUDA_HOME before the default
# root before a pip-installed runtime (nvidia/cu13, or CUDA 12's
# nvidia/cuda_runtime) found through the venv's python or python3 on PATH;
# headers older than 12.0 and folders lacking one of the three headers
# passed over; and, with none, every place looked in named.
#
# Environment (from CMake): CMAKE_COMMAND, TDM_SOURCE_DIR.
set -u
: "${CMAKE_COMMAND:?}" "${TDM_SOURCE_DIR:?}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# headers DIR VERSION [MISSING]: the three headers in DIR, CUDART_VERSION
# VERSION; MISSING left out.
headers() {
    mkdir -p "$1"
    for h in cuda.h cudaTypedefs.h cuda_runtime_api.h; do
        [[ $h == "${3:-}" ]] || echo "/* made up */" > "$1/$h"
    done
    [[ ${3:-} == cuda_runtime_api.h ]] ||
        printf '#pragma once\n#define CUDART_VERSION  %s\n' "$2" > "$1/cuda_runtime_api.h"
}
cat > "$T/print.cmake" <<EOF
include("$TDM_SOURCE_DIR/cmake/cuda_headers.cmake")
tdm_find_cuda_headers()
message("dir=\${TDM_CUDA_INCLUDE_DIR}")
message("version=\${TDM_CUDA_HEADER_VERSION}")
message("source=\${TDM_CUDA_HEADER_SOURCE}")
message("looked=\${TDM_CUDA_HEADER_LOOKED}")
EOF
mkdir -p "$T/bin"
printf '#!/bin/sh\necho "$SITE"\n' > "$T/bin/python3"
printf '#!/bin/sh\necho "$VENV_SITE"\n' > "$T/venv-python"
chmod +x "$T/bin/python3" "$T/venv-python"

headers "$T/root/include" 12080
headers "$T/home/include" 12040
headers "$T/old/include" 11080
headers "$T/part/include" 12040 cudaTypedefs.h
headers "$T/site/nvidia/cu13/include" 13000
headers "$T/venv-site/nvidia/cuda_runtime/include" 12060

# find NAME WANT_DIR WANT_SOURCE [ENV=VALUE... -- CMAKE-ARGS...]
find() {
    local name=$1 want=$2 source=$3 envs=() args=()
    shift 3
    while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift
    args=("$@")
    env -i PATH="$T/bin" SITE="$T/site" VENV_SITE="$T/venv-site" "${envs[@]}" \
        "$CMAKE_COMMAND" -DTDM_CUDA_DEFAULT_ROOTS= "${args[@]}" -P "$T/print.cmake" \
        > "$T/$name.out" 2>&1 || fail "$name: cmake -P: $(cat "$T/$name.out")"
    grep -qx "dir=$want" "$T/$name.out" || fail "$name: want dir=$want: $(cat "$T/$name.out")"
    grep -qx "source=$source" "$T/$name.out" ||
        fail "$name: want source=$source: $(cat "$T/$name.out")"
}

find toolkit_root "$T/root/include" CUDAToolkit_ROOT CUDAToolkit_ROOT="$T/root" CUDA_HOME="$T/home"
find cmake_var "$T/root/include" CUDAToolkit_ROOT CUDA_HOME="$T/home" -- -DCUDAToolkit_ROOT="$T/root"
find cuda_home "$T/home/include" CUDA_HOME CUDA_HOME="$T/home"
grep -qx "version=12040" "$T/cuda_home.out" || fail "cuda_home: $(cat "$T/cuda_home.out")"
find cuda_path "$T/home/include" CUDA_PATH CUDA_PATH="$T/home"
find given "$T/home/include" TDM_CUDA_INCLUDE_DIR CUDA_HOME="$T/root" -- \
    -DTDM_CUDA_INCLUDE_DIR="$T/home/include"
find default_root "$T/root/include" "$T/root" CUDA_HOME="$T/nowhere" -- \
    -DTDM_CUDA_DEFAULT_ROOTS="$T/root"
# pip: the venv's interpreter first, then python3 on PATH.
find pip_venv "$T/venv-site/nvidia/cuda_runtime/include" "pip's nvidia/cuda_runtime" -- \
    -DTDM_VENV_PYTHON="$T/venv-python"
find pip_path "$T/site/nvidia/cu13/include" "pip's nvidia/cu13"
grep -qx "version=13000" "$T/pip_path.out" || fail "pip_path: $(cat "$T/pip_path.out")"
# Too old, or a header missing: passed over for the next place.
find too_old "$T/site/nvidia/cu13/include" "pip's nvidia/cu13" CUDA_HOME="$T/old"
find partial "$T/site/nvidia/cu13/include" "pip's nvidia/cu13" CUDA_HOME="$T/part"
# None: the message's list names each place looked in.
find none TDM_CUDA_INCLUDE_DIR-NOTFOUND "" CUDA_HOME="$T/old" SITE="$T/empty"
for want in "$T/old/include (CUDA 11.8: older than 12.0)" "$T/empty/nvidia/cu13/include" \
            "$T/empty/nvidia/cuda_runtime/include"; do
    grep -q "^looked=.*$want" "$T/none.out" || fail "none: '$want' not listed: $(cat "$T/none.out")"
done
echo "CUDA headers: CUDAToolkit_ROOT, CUDA_HOME, CUDA_PATH, -DTDM_CUDA_INCLUDE_DIR, default root, pip (venv, PATH); old and partial ones passed over"
