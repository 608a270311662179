#!/usr/bin/env bash
# tests/mpi/test_mpi_run.sh: `tidemark run -- mpirun -np 4 ...` as a user
# types it.  run sees the launcher and names the files by rank
# (tidemark-HOST-rR.tdm, not by pid), prints the rank table once (not four
# single-rank summaries), and takes --conf dump=NAME for the files' names.
# Exit 77 (SKIPPED) without mpirun or without the example (no MPI found).
set -uo pipefail
: "${TIDEMARK:?}"
skip() { echo "SKIP: $*"; exit 77; }
[ -n "${MPIRUN:-}" ] && [ -x "$MPIRUN" ] || skip "no mpirun/mpiexec found"
[ -n "${MPI_RANKS:-}" ] && [ -x "$MPI_RANKS" ] || skip "examples/mpi_ranks not built (no MPI C library)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

flags=()
if "$MPIRUN" --version 2>&1 | grep -qiE "Open MPI|OpenRTE|open-mpi"; then
  flags=(--oversubscribe --allow-run-as-root)
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_base_warn_component_unused=0
  command -v ssh >/dev/null 2>&1 || command -v rsh >/dev/null 2>&1 ||
    export OMPI_MCA_plm_rsh_agent=false
fi
host=$(hostname)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# mpi_ranks is linked with libtidemark.so: run records it through
# TIDEMARK_CONF alone.  A sanitizer build's preload library cannot be
# loaded into mpirun (the sanitizer's runtime must come first).
[ -n "${TDM_SANITIZE:-}" ] && export TIDEMARK_PRELOAD=

# ---- files by rank, one rank table ---------------------------------------------
timeout -k 10 120 "$TIDEMARK" run -o "$work/job" -- "$MPIRUN" -np 4 "${flags[@]}" "$MPI_RANKS" \
  >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 0 ] || { fail "tidemark run -- mpirun: exit $rc"; cat "$work/err"; }
for r in 0 1 2 3; do
  [ -s "$work/job/tidemark-$host-r$r.tdm" ] || fail "no tidemark-$host-r$r.tdm: $(ls "$work/job")"
done
n=$(find "$work/job" -name '*.tdm' | wc -l)
[ "$n" -eq 4 ] || fail "$n snapshots, wanted 4: $(ls "$work/job")"
grep -q "tidemark summary of 4 snapshots: 4 ranks on 1 host" "$work/err" || fail "no rank table"
grep -q "spread of the peaks over 4 ranks" "$work/err" || fail "no spread of the peaks"
s=$(grep -c "^tidemark summary of $work" "$work/err")
[ "$s" -eq 0 ] || fail "$s single-rank summaries printed besides the rank table"
lines=$(wc -l <"$work/err")
[ "$lines" -le 40 ] || fail "the report of 4 ranks is $lines lines (40 at most)"
echo "tidemark run -- mpirun -np 4: $lines lines on stderr"

# ---- --conf dump=NAME names the files --------------------------------------------
timeout -k 10 120 "$TIDEMARK" run -o "$work/named" --conf "dump=job-%r.tdm" -- \
  "$MPIRUN" -np 4 "${flags[@]}" "$MPI_RANKS" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 0 ] || { fail "--conf dump=job-%r.tdm: exit $rc"; cat "$work/err"; }
for r in 0 1 2 3; do
  [ -s "$work/named/job-$r.tdm" ] || fail "no job-$r.tdm: $(ls "$work/named" 2>&1)"
done
grep -q "4 ranks on 1 host" "$work/err" || fail "--conf dump=: no rank table"
# a folder in dump= is -o's
timeout -k 10 120 "$TIDEMARK" run --conf "dump=$work/f/r%r.tdm" -- \
  "$MPIRUN" -np 2 "${flags[@]}" "$MPI_RANKS" >"$work/out" 2>"$work/err"
[ -s "$work/f/r0.tdm" ] && [ -s "$work/f/r1.tdm" ] || fail "dump=DIR/r%r.tdm: $(ls "$work/f" 2>&1)"
grep -q "tidemark run: 2 snapshots in $work/f" "$work/err" || fail "dump=DIR/...: not collected from DIR"
"$TIDEMARK" run -o "$work/g" --conf "dump=$work/f/r%r.tdm" -- true >"$work/out" 2>"$work/err"
[ $? -eq 1 ] || fail "-o and dump= with two folders accepted"
grep -q "name two folders" "$work/err" || fail "two folders: $(cat "$work/err")"
"$TIDEMARK" run --conf "dump=x.json" -- true >"$work/out" 2>"$work/err"
[ $? -eq 1 ] || fail "dump=x.json accepted"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok: tidemark run -- mpirun"
