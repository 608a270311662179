#!/usr/bin/env bash
# `tidemark run` end to end: every exit path (the command's own code, 0,
# 3 gate failed, 4 tool error, 5 nothing measured, 1 usage, 2 bad
# baseline, 127 not found,
# 128+N killed by signal N, a gate failure outranking a failed command),
# the environment the command gets (TIDEMARK_CONF with its dump folder
# and --conf, LD_PRELOAD from TIDEMARK_PRELOAD or beside the tool), one
# snapshot per process collected (children, a process left running after
# the command), files from earlier runs left out, summaries on stderr and
# the command's stdout untouched, SIGTERM passed on, JUnit and GitHub
# output.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM LIBTIDEMARK
# The conf the command printed, without the spill folder run adds (its
# name has run's pid and start time): $work/out.ns.
nospill() {
  grep -qE ',spill=[^],]*/run-[0-9]+-[0-9]+-[^],/]+/[^],/]*-%p\.spill' "$work/out" ||
    fail "run gave the command no spill folder of its own: $(cat "$work/out")"
  sed -E 's#,spill=[^],]*##' "$work/out" >"$work/out.ns"
}
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
# No preload unless a check asks for one: results must not depend on
# whether libtidemark_preload.so was built.
export TIDEMARK_PRELOAD=

tdms() { find "$1" -maxdepth 1 -name '*.tdm' | wc -l; }

# ---- help and usage: exit 1 --------------------------------------------------
expect 0 "help run" -- "$TIDEMARK" help run
has out "usage: tidemark run"; has out "--conf KEY=VAL"; has out "--max-peak SIZE"
has out "128+N"
expect 1 "no command" -- "$TIDEMARK" run --max-peak 1G --
has err "no command given"; has err "tidemark help run"
expect 1 "unknown option" -- "$TIDEMARK" run --bogus -- true
has err "unknown option '--bogus'"
expect 1 "--conf dump= not a .tdm" -- "$TIDEMARK" run --conf "record=all, dump=x.json" -- true
has err "ending in .tdm"
expect 1 "comma in -o" -- "$TIDEMARK" run -o "a,b" -- true
expect 1 "bad gate value" -- "$TIDEMARK" run --max-leak much -- true
[ ! -e tidemark-out ] || fail "a usage error made the output folder"

# ---- the command runs: its code, its stdout ---------------------------------------
expect 0 "train_sim" -- "$TIDEMARK" run -o "$work/r1" -- "$TRAIN_SIM" --steps 2 --hidden 512
has out "train_sim: 2 steps, peak allocated"
lacks out "tidemark summary"             # reports go to stderr
has err "tidemark summary of $work/r1/tidemark-"; has err "peak allocated"
has err "tidemark run: 1 snapshot in $work/r1"
has err "TIDEMARK_PRELOAD is empty"      # the note: running without preload
[ "$(tdms "$work/r1")" -eq 1 ] || fail "one snapshot expected in r1"
has err "config     dump=$work/r1/tidemark-%h-%p.tdm"

# Run again into the same folder: the runs are not mixed. The second goes
# into a subfolder of its own, and says so; the folder still reads as the
# first run (one snapshot, so `diff` and `view` take it), the subfolder as
# the second.
expect 0 "second run, same folder" -- "$TIDEMARK" run -o "$work/r1" -- "$TRAIN_SIM" --steps 1
has err "$work/r1 holds an earlier run; this run's snapshots go into $work/r1/run-2"
has err "tidemark run: 1 snapshot in $work/r1/run-2"
[ "$(tdms "$work/r1")" -eq 1 ] || fail "the first run's folder got more snapshots"
[ "$(tdms "$work/r1/run-2")" -eq 1 ] || fail "one snapshot expected in r1/run-2"
expect 0 "the two runs compared" -- "$TIDEMARK" diff "$work/r1" "$work/r1/run-2"
expect 0 "a third run" -- "$TIDEMARK" run -o "$work/r1" -- "$TRAIN_SIM" --steps 1
has err "tidemark run: 1 snapshot in $work/r1/run-3"
[ "$(tdms "$work/r1/run-3")" -eq 1 ] || fail "one snapshot expected in r1/run-3"

# Under a launcher of ranks (here a stand-in named torchrun, then srun,
# starting two ranks): the files are named by rank, not by pid, and the
# report is one rank table, not a whole summary per rank.
mkdir -p "$work/bin"
printf '#!/bin/sh\nfor r in 0 1; do RANK=$r WORLD_SIZE=2 "%s" --steps 1 --compute-us 0 >/dev/null & done\nwait\n' \
  "$TRAIN_SIM" >"$work/bin/torchrun"
chmod +x "$work/bin/torchrun"
cp "$work/bin/torchrun" "$work/bin/srun"
for launcher in torchrun srun; do
  expect 0 "under $launcher" -- "$TIDEMARK" run -o "$work/$launcher" -- "$work/bin/$launcher"
  for r in 0 1; do
    [ -s "$work/$launcher/tidemark-$(hostname)-r$r.tdm" ] || fail "$launcher: no file of rank $r: $(ls "$work/$launcher")"
  done
  has err "tidemark summary of 2 snapshots: 2 ranks on 1 host"
  has err "spread of the peaks over 2 ranks"
  lacks err "tidemark summary of $work/$launcher/"
done
# not a launcher: named by pid, as before
expect 0 "not a launcher" -- "$TIDEMARK" run -o "$work/plain" -- "$TRAIN_SIM" --steps 1 --compute-us 0
has_re err "tidemark run: 1 snapshot in $work/plain"
ls "$work/plain" | grep -qE "^tidemark-.*-[0-9]+\.tdm$" || fail "not named by pid: $(ls "$work/plain")"

expect 7 "the command's own exit code" -- "$TIDEMARK" run -o "$work/r2" -- sh -c 'echo hi; exit 7'
has out "hi"; has err "the command exited with 7"
expect 127 "command not found" -- "$TIDEMARK" run -o "$work/r2" -- "$work/no-such-program"
has err "cannot run '$work/no-such-program'"
printf 'x\n' >"$work/notexec"
expect 126 "command not executable" -- "$TIDEMARK" run -o "$work/r2" -- "$work/notexec"
# Killed by a signal: 128+N, as shells say.
expect 137 "killed by SIGKILL" -- "$TIDEMARK" run -o "$work/r2" -- sh -c 'kill -KILL $$'
has err "killed by signal 9"
expect 139 "killed by SIGSEGV" -- "$TIDEMARK" run -o "$work/r2" -- sh -c 'kill -SEGV $$'
# --command-failed N: any failure of the command is N, so 3 and 4 stay tidemark's
expect 9 "--command-failed, exit 3" -- "$TIDEMARK" run --command-failed 9 -o "$work/r2" -- sh -c 'exit 3'
expect 9 "--command-failed, not found" -- "$TIDEMARK" run --command-failed 9 -o "$work/r2" -- "$work/no-such-program"
expect 9 "--command-failed, killed" -- "$TIDEMARK" run --command-failed 9 -o "$work/r2" -- sh -c 'kill -KILL $$'
expect 0 "--command-failed, success" -- "$TIDEMARK" run --command-failed 9 -o "$work/r2" -- true
expect 1 "--command-failed 5" -- "$TIDEMARK" run --command-failed 5 -- true
has err "from 6 to 125"
expect 1 "--command-failed 200" -- "$TIDEMARK" run --command-failed 200 -- true
# SIGTERM sent to tidemark alone reaches the command; tidemark still reports.
# (The command has started once it made its file: tidemark is waiting.)
"$TIDEMARK" run -o "$work/r3" -- sh -c "touch '$work/started'; exec sleep 30" \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do [ -e "$work/started" ] && break; sleep 0.1; done
signal_until 20 TERM "$pid" gone "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || fail "SIGTERM to tidemark run: exit $rc, wanted 143"
has err "killed by signal 15"; has err "tidemark run: 0 snapshots in $work/r3"

# ---- TIDEMARK_CONF: inherited, then --conf, then the dump folder -------------------
TIDEMARK_CONF="max_entries=5000" expect 0 "--conf" -- "$TIDEMARK" run -o "$work/r4" \
  --conf max_entries=64 --conf alloc_mode=passthrough -- "$TRAIN_SIM" --steps 2
has err "ring of 64)"; has err "allocator passthrough"
has err "config     max_entries=5000,max_entries=64,alloc_mode=passthrough,dump=$work/r4/"
expect 0 "conf seen by the command" -- "$TIDEMARK" run -o "$work/r 5%" -- sh -c 'echo "[$TIDEMARK_CONF]"'
nospill
has out.ns "[dump=$work/r 5%%/tidemark-%h-%p.tdm,dump_on=exit+signal,signal=SIGRTMAX-5,stop_signals=off]"

# ---- every process writes its own snapshot -------------------------------------------
expect 0 "two children" -- "$TIDEMARK" run -o "$work/r6" -- \
  sh -c "\"$TRAIN_SIM\" --steps 1 --hidden 256 & \"$TRAIN_SIM\" --steps 2 --hidden 256; wait"
[ "$(tdms "$work/r6")" -eq 2 ] || fail "two snapshots expected in r6"
has err "tidemark run: 2 snapshots in $work/r6"
[ "$(grep -c '^tidemark summary of ' "$work/err")" -eq 2 ] || fail "two summaries expected"
# A process the command leaves running is waited for (a short while: 5 s;
# the smallest model and ring, so that a TSan build, whose start-up with
# the default million-event ring alone takes seconds, ends within it).
expect 0 "orphan" -- "$TIDEMARK" run -o "$work/r7" --conf max_entries=1000 -- \
  sh -c "(sleep 0.5; \"$TRAIN_SIM\" --steps 1 --layers 1 --hidden 64 --compute-us 0 >/dev/null) & exit 0"
has err "tidemark run: 1 snapshot in $work/r7"

# ---- the preload library --------------------------------------------------------
# One that cannot be a shared object is a tool error, exit 4, before the
# command runs (ld.so would only print an error and run it unrecorded).
mkdir -p "$work/notlib"
printf 'not a library\n' >"$work/notlib/text.so"
for bad in "$work/notlib" "$work/notlib/text.so" "$work/notlib/none.so"; do
  TIDEMARK_PRELOAD="$bad" expect 4 "TIDEMARK_PRELOAD=$bad" -- "$TIDEMARK" run -o "$work/rp" -- \
    sh -c 'echo ran'
  has err "tidemark run: TIDEMARK_PRELOAD=$bad: "
  lacks out "ran"
done
has err "TIDEMARK_PRELOAD=$work/notlib/none.so: No such file or directory"
# A sanitizer-built library cannot be preloaded into uninstrumented programs.
if ldd "$LIBTIDEMARK" 2>/dev/null | grep -qE 'lib(a|t)san' ||
   grep -qE '^TDM_SANITIZE:STRING=.+' "${TDM_BINARY_DIR:-/nonexistent}/CMakeCache.txt" 2>/dev/null; then
  echo "skip: preload checks in a sanitizer build"
else
  # $LIBTIDEMARK stands in for it: preloaded, it records any process, even a
  # shell that allocates nothing (bash: dash leaves with _exit, no exit dump).
  TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 0 "TIDEMARK_PRELOAD" -- "$TIDEMARK" run -o "$work/r8" -- \
    bash -c "echo \"[\$LD_PRELOAD]\"; \"$TRAIN_SIM\" --steps 1; true"
  has out "[$(readlink -f "$LIBTIDEMARK")]"
  lacks err "TIDEMARK_PRELOAD is empty"
  # The shell used no device memory: it writes no snapshot.
  has err "tidemark run: 1 snapshot in $work/r8"
  [ "$(tdms "$work/r8")" -eq 1 ] || fail "the shell wrote a snapshot in r8"
  [ "$(grep -c '^tidemark summary of ' "$work/err")" -eq 1 ] || fail "only the busy process summarized"
  # Several snapshots: the count line names each one's program, rank and pid.
  TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 0 "names" -- "$TIDEMARK" run -o "$work/r9" -- \
    bash -c "RANK=1 \"$TRAIN_SIM\" --steps 1 >/dev/null & \"$TRAIN_SIM\" --steps 1 >/dev/null; wait"
  grep -qE "^tidemark run: 2 snapshots in $work/r9: train_sim( rank 1)? \(pid [0-9]+\), train_sim( rank 1)? \(pid [0-9]+\)$" \
    "$work/err" || fail "the count line does not name the snapshots: $(grep 'snapshots in' "$work/err")"
  [ "$(grep -c 'train_sim rank 1 (pid' "$work/err")" -eq 1 ] || fail "rank 1 not named once"
  LD_PRELOAD=/lib/nothing.so TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 0 "LD_PRELOAD kept" -- \
    "$TIDEMARK" run -o "$work/r8" -- sh -c 'echo "[$LD_PRELOAD]"' 2>/dev/null
  has out ":/lib/nothing.so]"
  # A sanitizer runtime at the head of LD_PRELOAD stays first (an
  # instrumented program needs it there); the preload library follows it.
  LD_PRELOAD="/lib/nothing/libasan.so.8:/lib/nothing.so" TIDEMARK_PRELOAD="$LIBTIDEMARK" \
    expect 0 "sanitizer runtime first" -- \
    "$TIDEMARK" run -o "$work/r8" -- sh -c 'echo "[$LD_PRELOAD]"' 2>/dev/null
  has out "[/lib/nothing/libasan.so.8:$(readlink -f "$LIBTIDEMARK"):/lib/nothing.so]"
  # Found beside the tool when it was built; else a note on stderr.
  (
    unset TIDEMARK_PRELOAD
    "$TIDEMARK" run -o "$work/r9" -- sh -c 'echo "[$LD_PRELOAD]"' >"$work/out" 2>"$work/err"
  )
  if [ -e "$(dirname "$TIDEMARK")/libtidemark_preload.so" ]; then
    has out "/libtidemark_preload.so]"
  else
    has out "[]"; has err "libtidemark_preload.so not found"
  fi
fi

# ---- gates --------------------------------------------------------------------
expect 0 "gates pass" -- "$TIDEMARK" run -q -o "$work/g1" --max-peak 1GiB --max-leak 1GiB \
  --max-reserved 1GiB -- "$TRAIN_SIM" --steps 2 --hidden 512
lacks err "tidemark summary of"          # -q
has err "gates: 3 passed, 0 failed"
expect 3 "max-peak fails" -- "$TIDEMARK" run -o "$work/g2" --max-peak 1MiB --junit "$work/j.xml" \
  --github -- "$TRAIN_SIM" --steps 2 --hidden 512
has err "max-peak FAILED: peak "; has err "  on         $work/g2/tidemark-"; has err "limit      1.00 MiB"
has err "top allocation sites live at the peak"; has err "train_sim.c:"
grep -qE '^::error title=tidemark max-peak \(device 0\)::' "$work/out" || fail "no annotation on stdout"
python3 - "$work/j.xml" <<'EOF' || fail "JUnit from run"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
s = root.find("testsuite")
assert s.get("name") == "tidemark run" and float(s.get("time")) > 0, s.attrib
cases = s.findall("testcase")
assert len(cases) == 1 and cases[0].get("name") == "max-peak"
assert cases[0].find("failure") is not None
EOF
expect 3 "max-leak fails" -- "$TIDEMARK" run -o "$work/g3" --max-leak 1K -- "$TRAIN_SIM" --steps 1
has err "max-leak FAILED"
expect 3 "max-reserved fails" -- "$TIDEMARK" run -o "$work/g3" --max-reserved 1K -- "$TRAIN_SIM" --steps 1
has err "max-reserved FAILED"
record "$work/base.tdm" --steps 2 --hidden 256
expect 3 "max-growth fails" -- "$TIDEMARK" run -o "$work/g4" --baseline "$work/base.tdm" \
  --max-growth 50 -- "$TRAIN_SIM" --steps 2 --hidden 512
has err "max-growth FAILED"
expect 0 "max-growth passes" -- "$TIDEMARK" run -o "$work/g4" --baseline "$work/base.tdm" \
  --max-growth 0 -- "$TRAIN_SIM" --steps 2 --hidden 256
# A failed gate outranks a failed command; a passing one does not.
expect 3 "gate fails, command fails" -- "$TIDEMARK" run -o "$work/g5" --max-peak 1K -- \
  sh -c "\"$TRAIN_SIM\" --steps 1; exit 5"
has err "the command exited with 5"
expect 5 "gate passes, command fails" -- "$TIDEMARK" run -o "$work/g5" --max-peak 1G -- \
  sh -c "\"$TRAIN_SIM\" --steps 1; exit 5"
expect 3 "gate fails, command fails, --command-failed" -- "$TIDEMARK" run -o "$work/g5" \
  --command-failed 9 --max-peak 1K -- sh -c "\"$TRAIN_SIM\" --steps 1; exit 4"

# ---- bad baseline: exit 2, and the command does not run -----------------------------
expect 2 "missing baseline" -- "$TIDEMARK" run -o "$work/g6" --baseline "$work/none.tdm" \
  --max-growth 5 -- touch "$work/ran"
[ ! -e "$work/ran" ] || fail "the command ran despite a bad baseline"

# ---- tool errors: exit 4 (and nothing measured: 5) -----------------------------------
printf 'x\n' >"$work/afile"
expect 4 "-o is a file" -- "$TIDEMARK" run -o "$work/afile" -- true
has err "cannot make the folder"
TIDEMARK_PRELOAD="$work/none.so" expect 4 "TIDEMARK_PRELOAD missing" -- "$TIDEMARK" run -o "$work/t" -- true
has err "TIDEMARK_PRELOAD=$work/none.so"
expect 5 "gates, but no snapshot" -- "$TIDEMARK" run -o "$work/t" --max-peak 1G -- true
has err "nothing measured: no snapshot was written"
# (A missing folder is made, as -o's; a path through a file cannot be.)
: >"$work/afile"
expect 4 "unwritable junit" -- "$TIDEMARK" run -o "$work/t" --max-peak 1G \
  --junit "$work/afile/j.xml" -- "$TRAIN_SIM" --steps 1
has err "cannot write $work/afile/j.xml"

finish "tidemark run"
