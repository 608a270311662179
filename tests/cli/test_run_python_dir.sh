#!/usr/bin/env bash
# tests/cli/test_run_python_dir.sh: `tidemark run` finds python/autostart
# (which gives Python programs torch_phases and torch_tensors) wherever
# the tree is, and says so in one line when it finds none, instead of
# running the program without them silently.
#
#   - the build tree as built: the source tree's python/ first on PYTHONPATH;
#   - a tree that moved (a copy of the binary and its libraries in
#     TREE/build, TREE/python beside it): TREE/python/autostart, not the
#     source tree's;
#   - a binary copied where no python/ is: one note naming the folders
#     looked in and TIDEMARK_PYTHON_DIR, the program still run;
#   - TIDEMARK_PYTHON_DIR naming a folder without autostart: the note
#     names it too;
#   - TIDEMARK_PYTHON_DIR naming a good folder: that one, and no note.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TDM_SOURCE_DIR TDM_BINARY_DIR

# run_path NAME TIDEMARK [ENV=VALUE...]: the PYTHONPATH the command gets,
# in $work/NAME.out; run's stderr in $work/NAME.err.  No preload library:
# only the environment is looked at (and a sanitizer build's could not
# load into the shell).
run_path() {
  local name=$1 tool=$2
  shift 2
  env -u PYTHONPATH -u TIDEMARK_PYTHON_DIR TIDEMARK_PRELOAD= "$@" "$tool" run -q -o "$work/$name.d" -- \
    sh -c 'echo "PYTHONPATH=${PYTHONPATH:-}"' >"$work/$name.out" 2>"$work/$name.err" ||
    fail "$name: tidemark run exited $?: $(cat "$work/$name.err")"
}
notes() { grep -c "python/autostart not found" "$work/$1.err"; }

run_path built "$TIDEMARK"
grep -qx "PYTHONPATH=$(realpath "$TDM_SOURCE_DIR")/python/autostart" "$work/built.out" ||
  fail "built tree: $(cat "$work/built.out")"
[ "$(notes built)" = 0 ] || fail "built tree: a note: $(cat "$work/built.err")"

# A moved tree: the binary in TREE/build, python/ beside.
tree=$work/moved
mkdir -p "$tree/build"
cp "$TIDEMARK" "$tree/build/tidemark"
cp -r "$TDM_SOURCE_DIR/python" "$tree/python"
run_path moved "$tree/build/tidemark"
grep -qx "PYTHONPATH=$tree/python/autostart" "$work/moved.out" ||
  fail "moved tree: $(cat "$work/moved.out")"
[ "$(notes moved)" = 0 ] || fail "moved tree: a note: $(cat "$work/moved.err")"

# No python/ anywhere near the binary: one line, and the command runs.
alone=$work/alone/bin
mkdir -p "$alone"
cp "$tree/build/tidemark" "$alone/"
run_path alone "$alone/tidemark"
grep -qx "PYTHONPATH=" "$work/alone.out" || fail "alone: $(cat "$work/alone.out")"
[ "$(notes alone)" = 1 ] || fail "alone: want one note: $(cat "$work/alone.err")"
for want in "$alone/../share/tidemark/python" "$alone/../python" "set TIDEMARK_PYTHON_DIR" \
            "without torch_phases and torch_tensors"; do
  grep -qF -- "$want" "$work/alone.err" || fail "alone: the note lacks '$want': $(cat "$work/alone.err")"
done
grep -qF "$(realpath "$TDM_SOURCE_DIR")/python" "$work/alone.err" &&
  fail "alone: a copied binary reached back into the tree it was built from: $(cat "$work/alone.err")"

run_path wrong "$alone/tidemark" TIDEMARK_PYTHON_DIR="$work/nowhere"
[ "$(notes wrong)" = 1 ] && grep -qF "TIDEMARK_PYTHON_DIR=$work/nowhere" "$work/wrong.err" ||
  fail "a wrong TIDEMARK_PYTHON_DIR: $(cat "$work/wrong.err")"

run_path given "$alone/tidemark" TIDEMARK_PYTHON_DIR="$tree/python"
grep -qx "PYTHONPATH=$tree/python/autostart" "$work/given.out" ||
  fail "TIDEMARK_PYTHON_DIR: $(cat "$work/given.out")"
[ "$(notes given)" = 0 ] || fail "TIDEMARK_PYTHON_DIR: a note: $(cat "$work/given.err")"

finish "tidemark run: python/autostart found from the binary, a note when none"
