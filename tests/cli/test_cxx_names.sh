#!/usr/bin/env bash
# C++ names as a reader wants them, in every output: a C++ program
# ($CXX_SITES, tests/tools/cxx_sites.cpp, g++ -O2 -g) allocates through a
# namespaced function template (a mangled name in the snapshot) and a
# static helper gcc clones (pool_alloc.constprop.0.isra.0 or the like).
# The summary, the memory_viz pickle (read back with /usr/bin/python3's
# pickle) and the flame graph show the names demangled, the clone under
# its plain name; --raw-names shows what the file holds: mangled names.
# A member function always inlined into its caller is a frame of its own,
# with its own line, before the caller's frame with the call's line.
# Skipped (77) when the build had no C++ compiler.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK
if [ -z "${CXX_SITES:-}" ] || [ ! -x "$CXX_SITES" ]; then
  echo "skipped: no C++ compiler, so no tests/tools/cxx_sites"
  exit 77
fi
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "FAIL: /usr/bin/python3 is needed"; exit 1; }

snap=$work/cxx.tdm
TIDEMARK_CONF="dump=$snap" "$CXX_SITES" >"$work/run.log" 2>&1 ||
  { cat "$work/run.log"; fail "cxx_sites failed"; exit 1; }
[ -s "$snap" ] || { cat "$work/run.log"; fail "cxx_sites wrote no snapshot"; exit 1; }

# The raw names the file holds: the template mangled, and whether gcc
# cloned the helper (a name with a clone suffix) this time.
expect 0 "summary --raw-names" -- "$TIDEMARK" summary --raw-names --frames 1 "$snap"
cp "$work/out" "$work/raw.txt"
has raw.txt "_ZN6shapes12alloc_tensorIfEEPvmi"
lacks raw.txt "shapes::alloc_tensor"
cloned=0
if grep -qE "pool_alloc[A-Za-z0-9_]*\.(constprop|isra|part)" "$work/raw.txt"; then
  cloned=1
else
  echo "note: gcc made no clone of pool_alloc here; its plain name is checked only"
fi

# ---- summary: demangled, the clone under its plain name ---------------------------
expect 0 "summary" -- "$TIDEMARK" summary --frames 1 "$snap"
cp "$work/out" "$work/sum.txt"
has sum.txt "void* shapes::alloc_tensor<float>(unsigned long, int) (cxx_sites.cpp:"
has sum.txt "void* shapes::alloc_tensor<double>(unsigned long, int) (cxx_sites.cpp:"
has_re sum.txt "  pool_alloc\(request const&, int\) \(cxx_sites\.cpp:[0-9]+\)$"
lacks sum.txt "_ZN"; lacks sum.txt ".isra"; lacks sum.txt ".constprop"; lacks sum.txt "[clone"
# the inlined member function, then the function it was inlined into
expect 0 "summary --frames 3" -- "$TIDEMARK" summary --frames 3 "$snap"
line_grow=$(grep -n 'if (tdm_malloc(&data, bytes' "$CXX_SITES_SRC" | cut -d: -f1)
line_call=$(grep -n 'b.grow(5u << 20)' "$CXX_SITES_SRC" | cut -d: -f1)
grep -A1 -E "  arena::buffer::grow\(unsigned long\) \(cxx_sites\.cpp:$line_grow\)$" "$work/out" |
  grep -qE "^ +make_buffer\(void\*\*\) \(cxx_sites\.cpp:$line_call\)$" ||
  fail "the inlined grow() is not its own frame before make_buffer (lines $line_grow, $line_call)"
# the clone's two callers: two sites, each named by the helper
expect 0 "summary --frames 2" -- "$TIDEMARK" summary --frames 2 "$snap"
has out "make_workspace(void**) (cxx_sites.cpp:"
has out "make_scratch(void**) (cxx_sites.cpp:"
[ "$cloned" = 0 ] || has raw.txt "pool_alloc"

# ---- memory_viz pickle --------------------------------------------------------------
expect 0 "export pytorch" -- "$TIDEMARK" export --format pytorch -q "$snap" -o "$work/cxx.pickle"
"$PY" - "$work/cxx.pickle" >"$work/names.txt" <<'PYEOF' || fail "the pickle does not load"
import pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
for trace in snap["device_traces"]:
    for entry in trace:
        for frame in entry.get("frames", []):
            print(frame["name"])
for seg in snap["segments"]:
    for block in seg["blocks"]:
        for frame in block.get("frames", []):
            print(frame["name"])
PYEOF
has names.txt "void* shapes::alloc_tensor<float>(unsigned long, int)"
has_re names.txt "^pool_alloc\(request const&, int\)$"
has_re names.txt "^make_scratch\(void\*\*\)$"
lacks names.txt "_ZN"; lacks names.txt ".isra"; lacks names.txt ".constprop"

expect 0 "export pytorch --raw-names" -- "$TIDEMARK" export --format pytorch --raw-names -q \
  "$snap" -o "$work/raw.pickle"
"$PY" -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],"rb")); print("\n".join(f["name"] for t in s["device_traces"] for e in t for f in e["frames"]))' \
  "$work/raw.pickle" >"$work/rawnames.txt" || fail "the raw pickle does not load"
has rawnames.txt "_ZN6shapes12alloc_tensorIfEEPvmi"

# ---- flame graph --------------------------------------------------------------------
expect 0 "export flamegraph" -- "$TIDEMARK" export --format flamegraph -q "$snap" -o "$work/cxx.folded"
cp "$work/cxx.folded" "$work/folded.txt"
has folded.txt "make_weights(void**);void* shapes::alloc_tensor<float>(unsigned long, int) "
has_re folded.txt "make_workspace\(void\*\*\);pool_alloc\(request const&, int\) [0-9]+$"
lacks folded.txt "_ZN"; lacks folded.txt ".isra"; lacks folded.txt ".constprop"

finish "C++ names demangled and clones named plainly in summary, pickle and flame graph; --raw-names keeps them"
