#!/usr/bin/env bash
# tests/hooks/infra/test_preload_dlopen.sh: libtidemark_preload.so loaded
# late, with dlopen, instead of by LD_PRELOAD.  Its recursion guard is a
# thread-local variable of the initial-exec TLS model (hooks/preload/
# common.c), which needs a place in the static TLS block: a late dlopen
# must still load the library, run its constructor (which enters the guard
# to ask the mode) and its hooks.  Python's ctypes stands for a launcher
# that loads it that way, after the interpreter's own libraries.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
if [[ -z ${PRELOAD:-} ]]; then
    echo "no libtidemark_preload.so in this build: skipped"
    exit 77
fi
if ! command -v python3 > /dev/null; then
    echo "no python3: skipped"
    exit 77
fi
if [[ $san_rt == *libtsan* ]]; then
    echo "TSan build: an uninstrumented interpreter under the TSan runtime: skipped"
    exit 77
fi
cat > load.py <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
# No Level Zero loader in this process: the hook answers as the loader does
# before zeInit.
free = lib.zeMemFree
free.restype = ctypes.c_uint32
free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
print("%#x" % free(None, None))
PY
for conf in "" "mode=observe,stacks=none,dump_on=none" "mode=cache,dump_on=none"; do
    if out=$(TIDEMARK_CONF=$conf py load.py "$PRELOAD" 2>&1) && [[ $out == 0x78000001 ]]; then
        ok "dlopen of the preload library, TIDEMARK_CONF='$conf'"
    else
        fail "dlopen of the preload library, TIDEMARK_CONF='$conf': $out"
    fi
done
finish
