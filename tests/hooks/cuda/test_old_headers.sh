#!/bin/bash
# tests/hooks/cuda/test_old_headers.sh: the CUDA hooks build against the
# headers of CUDA 12.0-12.4, which many GPU images still ship.
#
# Those headers lack what came with 12.5: cudaGetDriverEntryPointByVersion
# (its declarations and the _ptsz renaming macro).  No such toolkit is
# here, so the headers this build uses are made into one at test time: a
# folder of links to them, with copies of cuda_runtime_api.h (those
# declarations removed, CUDART_VERSION 12040) and cuda.h (CUDA_VERSION
# 12040).  Every CUDA source of libtidemark_preload.so is compiled against
# it with the build's warnings as errors, and the objects are linked into
# a shared library over libtidemark.so with no symbol left undefined or
# defined twice.
#
# Environment (from CMake): CC, CUDA_INCLUDE_DIR, TDM_SOURCE_DIR,
# LIBTIDEMARK, TDM_SANITIZE.
set -u
: "${CC:?}" "${CUDA_INCLUDE_DIR:?}" "${TDM_SOURCE_DIR:?}" "${LIBTIDEMARK:?}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

inc=$T/cuda-12.4/include
mkdir -p "$inc"
for f in "$CUDA_INCLUDE_DIR"/*; do
    ln -s "$f" "$inc/${f##*/}"
done
rm "$inc/cuda_runtime_api.h" "$inc/cuda.h"
# The declarations, the #define and #undef of the _ptsz renaming (not the
# comments that mention the function).
sed -E -e '/^[[:space:]]*(#[[:space:]]*(define|undef)|extern)[[:space:]].*\bcudaGetDriverEntryPointByVersion\b/d' \
    -e 's/^#define CUDART_VERSION[[:space:]]+[0-9]+/#define CUDART_VERSION  12040/' \
    "$CUDA_INCLUDE_DIR/cuda_runtime_api.h" > "$inc/cuda_runtime_api.h"
sed -E 's/^#define CUDA_VERSION[[:space:]]+[0-9]+/#define CUDA_VERSION 12040/' \
    "$CUDA_INCLUDE_DIR/cuda.h" > "$inc/cuda.h"
grep -q 'cudaGetDriverEntryPointByVersion' <(grep -vE '^[[:space:]]*\*' "$inc/cuda_runtime_api.h") &&
    fail "the copy still declares cudaGetDriverEntryPointByVersion"
grep -qx '#define CUDART_VERSION  12040' "$inc/cuda_runtime_api.h" || fail "CUDART_VERSION not set"
grep -qx '#define CUDA_VERSION 12040' "$inc/cuda.h" || fail "CUDA_VERSION not set"

flags=(-std=gnu11 -fPIC -fvisibility=hidden -O1 -Wall -Wextra -Wshadow -Wformat=2
       -Wno-unused-parameter -Wstrict-prototypes -Wmissing-prototypes -Werror
       -DTDM_BUILDING_LIBRARY -DTDM_HAVE_CUDA=1)
case ${TDM_SANITIZE:-} in
address) flags+=(-fsanitize=address,undefined) ;;
thread) flags+=(-fsanitize=thread) ;;
esac
for d in include base format symbolize snapshot alloc runtime hooks/track; do
    flags+=(-I"$TDM_SOURCE_DIR/$d")
done
objs=()
# The CUDA hooks and the vendor-neutral preload code they call.
for src in "$TDM_SOURCE_DIR"/hooks/preload/cuda_*.c "$TDM_SOURCE_DIR"/hooks/preload/common.c \
           "$TDM_SOURCE_DIR"/hooks/track/vmm_track.c "$TDM_SOURCE_DIR"/hooks/preload/pool_track.c \
           "$TDM_SOURCE_DIR"/hooks/preload/elf_imports.c; do
    o=$T/$(basename "${src%.c}").o
    "$CC" "${flags[@]}" -isystem "$inc" -c "$src" -o "$o" 2> "$o.err" ||
        fail "$(basename "$src") against CUDA 12.4-like headers: $(head -20 "$o.err")"
    objs+=("$o")
done
"$CC" "${flags[@]}" -shared -Wl,-z,defs -o "$T/libcuda_hooks.so" "${objs[@]}" "$LIBTIDEMARK" \
    -ldl -lpthread 2> "$T/link.err" ||
    fail "linking the CUDA hooks built against CUDA 12.4-like headers: $(head -20 "$T/link.err")"
# The hook is there all the same: a program built for 12.4 may run over a
# newer runtime (PyTorch's own, from its wheel) that PyTorch asks for
# driver entry points by version.
for sym in cudaGetDriverEntryPointByVersion cudaGetDriverEntryPointByVersion_ptsz; do
    nm -D --defined-only "$T/libcuda_hooks.so" | grep -qw "$sym" || fail "$sym not defined"
done
echo "the CUDA hooks (${#objs[@]} sources) build and link against CUDA 12.4-like headers"
