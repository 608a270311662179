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
    # with tidemark.phase(...): blocks nest, and each exit brings back the
    # phase in force before it.
    phases=$(sed -n 's/^event phase .* phase=\(.*\)$/\1/p' py.txt | tr '\n' ' ')
    [[ $phases == "forward backward optimizer zero_grad optimizer backward eval backward " ]] ||
        fail "py: phase marks: $phases"
    for want in 2048:optimizer 4096:zero_grad 8192:optimizer 16384:backward 32768:backward; do
        grep -qE "^event alloc dev=0 size=${want%%:*} .* phase=${want#*:}\$" py.txt ||
            fail "py: the alloc of ${want%%:*} bytes is in phase ${want#*:}"
    done
    ok "python/tidemark.py: record, phase (call and with-block), step, tag, stats, pluggable entry points, tdm_conf_check, dump"
else
    fail "python check wrote no snapshot: $(cat py.out)"
fi

# use_with_torch() gives torch every hook, getBaseAllocation's included:
# to a stand-in of torch.cuda.memory, and to the real allocator object of
# a CUDA build of torch when there is one (TDM_VENV_PYTHON; no GPU needed).
TIDEMARK_LIB=$LIBTIDEMARK py "$here/torch_hooks_check.py" > hooks.out 2>&1 ||
    fail "torch_hooks_check.py: $(cat hooks.out)"
ok "use_with_torch: $(tail -1 hooks.out)"
if [[ -z $san_rt && -x ${TDM_VENV_PYTHON:-} ]]; then
    TIDEMARK_LIB=$LIBTIDEMARK "$TDM_VENV_PYTHON" "$here/torch_hooks_check.py" torch \
        > vhooks.out 2>&1
    case $? in
    0) ok "use_with_torch: $(tail -1 vhooks.out)" ;;
    77) echo "$(tail -1 vhooks.out)" ;;
    *) fail "torch_hooks_check.py torch: $(cat vhooks.out)" ;;
    esac
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

# Out of tree: TIDEMARK_LIB names a copy (the file, or its folder).
here_tmp=$(realpath .)
mkdir -p copy
cp "$LIBTIDEMARK" copy/libtidemark.so
where() { py -c "import sys; sys.path.insert(0, '$1'); import tidemark; print(tidemark.library_path())"; }
for lib in "$here_tmp/copy/libtidemark.so" "$here_tmp/copy"; do
    got=$(TIDEMARK_LIB=$lib where "$TDM_SOURCE_DIR/python" 2>&1) || fail "TIDEMARK_LIB=$lib: $got"
    [[ $got == "$here_tmp/copy/libtidemark.so" ]] || fail "TIDEMARK_LIB=$lib loaded $got"
done
# A source tree's build*/ folders, the most recently built first: a module
# in tree/python finds tree/build-new's library before tree/build-old's.
mkdir -p tree/python tree/build-old tree/build-new tree/build-none
cp "$TDM_SOURCE_DIR/python/tidemark.py" tree/python/
cp "$LIBTIDEMARK" tree/build-old/libtidemark.so
cp "$LIBTIDEMARK" tree/build-new/libtidemark.so
touch -d '2 hours ago' tree/build-old/libtidemark.so
got=$(unset TIDEMARK_LIB; where "$here_tmp/tree/python" 2>&1) || fail "build tree lookup: $got"
[[ $got == "$here_tmp/tree/build-new/libtidemark.so" ]] || fail "build tree lookup loaded $got"
touch tree/build-old/libtidemark.so
got=$(unset TIDEMARK_LIB; where "$here_tmp/tree/python" 2>&1)
[[ $got == "$here_tmp/tree/build-old/libtidemark.so" ]] || fail "newest build tree first: $got"
# A sanitizer build tree is passed over by an interpreter without its runtime.
if [[ -z $san_rt ]]; then
    mkdir -p tree/build-asan
    cp "$LIBTIDEMARK" tree/build-asan/libtidemark.so
    echo "TDM_SANITIZE:STRING=address" > tree/build-asan/CMakeCache.txt
    got=$(unset TIDEMARK_LIB; where "$here_tmp/tree/python" 2>&1)
    [[ $got == "$here_tmp/tree/build-old/libtidemark.so" ]] || fail "sanitizer build tree not skipped: $got"
fi
# Nothing anywhere: the error names TIDEMARK_LIB and every place looked in.
mkdir -p empty/python
cp "$TDM_SOURCE_DIR/python/tidemark.py" empty/python/
(unset TIDEMARK_LIB; py -c "
import ctypes.util, sys; sys.path.insert(0, '$here_tmp/empty/python')
ctypes.util.find_library = lambda name: None
import tidemark
try:
    print('loaded', tidemark.library_path())
except OSError as e:
    print(e)") > none.out 2>&1
if grep -q '^loaded ' none.out; then
    echo "a libtidemark.so on the loader path: the not-found message is not checked"
else
    for want in "set TIDEMARK_LIB" "next to tidemark.py" "$here_tmp/empty/build*/" "loader's search path" \
                "find_library('tidemark')" "libtidemark.so.0: cannot open"; do
        grep -qF -- "$want" none.out || fail "not-found message lacks '$want': $(cat none.out)"
    done
fi
ok "library lookup out of tree: TIDEMARK_LIB file or folder, build*/ newest first, a clear message"

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
