#!/usr/bin/env bash
# The PyTorch entry points of libtidemark.so, without torch: from C as
# CUDAPluggableAllocator calls them (torch_c), and through python/tidemark.py
# with ctypes (tidemark_py_check.py); then examples/torch_pluggable.py runs
# (its no-torch path here).  The snapshots are read back with snapcheck.
. "$(dirname "$0")/lib.sh"
: "${TORCH_C:?}" "${SNAPCHECK:?}" "${LIBTIDEMARK:?}" "${TDM_SOURCE_DIR:?}"
here=$TDM_SOURCE_DIR/tests/hooks/infra

# ---- from C ------------------------------------------------------------------------
"$TORCH_C" "$LIBTIDEMARK" torch.tdm > c.out 2> c.err || fail "torch_c: $(cat c.out c.err)"
if [[ -f torch.tdm ]]; then
    "$SNAPCHECK" torch.tdm > c.txt
    grep -q '^header mode=cache ' c.txt || fail "torch_c: cache mode"
    grep -q '^device 0 sim ' c.txt || fail "torch_c: the sim device serves without CUDA"
    for want in "size=1000 .* stream=0x0 " "size=3145728 .* stream=0x77 " "size=512 "; do
        grep -qE "^event alloc dev=0 $want.*stack=torch_like_forward<main<" c.txt ||
            fail "torch_c: alloc '$want' from torch_like_forward"
    done
    grep -qE '^event free_completed dev=0 size=512 .* stack=torch_like_release<' c.txt ||
        fail "torch_c: the free's stack"
    grep -qE '^event oom dev=0 size=67108864 ' c.txt || fail "torch_c: the fraction's oom"
    grep -qE '^segment dev=0 .* stream=0x77 ' c.txt || fail "torch_c: the live block's segment"
    ok "torch entry points from C: allocations, stacks, fraction, reset, record_stream"
else
    fail "torch_c wrote no snapshot"
fi

# ---- python/tidemark.py --------------------------------------------------------------
if ! command -v python3 > /dev/null; then
    echo "no python3: the python part is skipped"
    finish
fi
if [[ $san_rt == *libtsan* ]]; then
    # An uninstrumented interpreter under a preloaded TSan runtime crashes
    # before our code runs; the C part above covers the entry points.
    echo "TSan build: the python part is skipped"
    finish
fi
TIDEMARK_LIB=$LIBTIDEMARK py "$here/tidemark_py_check.py" py.tdm > py.out 2>&1 ||
    fail "tidemark_py_check.py: $(cat py.out)"
if [[ -f py.tdm ]]; then
    "$SNAPCHECK" py.tdm > py.txt
    grep -qE '^event alloc dev=0 size=3145728 .* cat=4 ' py.txt || fail "py: activation tag"
    grep -qE '^event alloc dev=0 size=5000 .* stream=0x42 cat=5 ' py.txt || fail "py: nested input tag"
    grep -qE '^event tag .* cat=3 ' py.txt || fail "py: tag_pointer"
    grep -qE '^event phase ' py.txt || fail "py: phases"
    grep -qE '^event step ' py.txt || fail "py: steps"
    ok "python/tidemark.py: record, phase, step, tag, stats, pluggable entry points, dump"
else
    fail "python check wrote no snapshot: $(cat py.out)"
fi

# The module finds the library next to itself, without TIDEMARK_LIB.
mkdir -p alone
cp "$TDM_SOURCE_DIR/python/tidemark.py" alone/
ln -s "$LIBTIDEMARK" alone/libtidemark.so
(cd alone && py -c 'import tidemark, os; p = tidemark.library_path(); print(p)') > alone.out 2>&1 ||
    fail "found next to the module: $(cat alone.out)"
[[ $(cat alone.out) == "$(realpath "$LIBTIDEMARK")" ]] || fail "next to the module: $(cat alone.out)"
# A wrong TIDEMARK_LIB is a clear error, not a silent fallback.
TIDEMARK_LIB=/nonexistent/libtidemark.so py -c "
import sys; sys.path.insert(0, '$TDM_SOURCE_DIR/python'); import tidemark
try:
    tidemark.library()
except OSError as e:
    print(e)" > miss.out 2>&1
grep -q "TIDEMARK_LIB.*/nonexistent/libtidemark.so: no such file" miss.out ||
    fail "missing library message: $(cat miss.out)"
ok "library lookup: next to the module; a wrong TIDEMARK_LIB says so"

# ---- the example ------------------------------------------------------------------------
TIDEMARK_LIB=$LIBTIDEMARK py "$TDM_SOURCE_DIR/examples/torch_pluggable.py" ex.tdm 3 \
    > ex.out 2>&1 || fail "examples/torch_pluggable.py: $(cat ex.out)"
if [[ -f ex.tdm ]]; then
    [[ $(count_of ex.tdm '^event step ') -eq 3 ]] || fail "example: 3 steps"
    [[ $(count_of ex.tdm '^event alloc .* cat=1 ') -eq 4 ]] || fail "example: 4 parameters"
    ok "examples/torch_pluggable.py runs and records 3 steps"
else
    fail "example wrote no snapshot: $(cat ex.out)"
fi
finish
