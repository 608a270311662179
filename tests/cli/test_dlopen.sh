#!/usr/bin/env bash
# libtidemark.so must load with dlopen (Python ctypes, PyTorch's
# CUDAPluggableAllocator), not only when linked: no static-TLS demands.
. "${BASH_SOURCE[0]%/*}/lib.sh" LIBTIDEMARK
set -e
skip_in_sanitizer_build
python3 - "$LIBTIDEMARK" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.tdm_version_string.restype = ctypes.c_char_p
print("loaded tidemark", lib.tdm_version_string().decode())
ptr = ctypes.c_void_p()
assert lib.tdm_malloc(ctypes.byref(ptr), ctypes.c_size_t(4096), 0, ctypes.c_void_p(0)) == 0
assert ptr.value
assert lib.tdm_free(ptr) == 0
assert lib.tdm_tag_push(1) == 0 and lib.tdm_tag_pop() == 0
PY
if readelf -d "$LIBTIDEMARK" | grep -q STATIC_TLS; then
  echo "FAIL: libtidemark.so is flagged STATIC_TLS (initial-exec TLS)"; exit 1
fi
finish "dlopen"
