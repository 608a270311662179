#!/usr/bin/env bash
# `tidemark top` watching a Python program that records through
# python/tidemark.py on the sim device (top_python_prog.py, 3.5 MiB held
# until told to end): --once and --openmetrics by pid show its bytes
# exactly, and with SLURM_JOB_ID and RANK in the program's environment
# (not top's) its labels carry them (the job id escaped: no terminal
# escape passes); the program then ends 0 and its snapshot reads.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK LIBTIDEMARK TDM_SOURCE_DIR
skip_in_sanitizer_build
need_python
check_om="${BASH_SOURCE[0]%/*}/openmetrics_check.py"
prog="${BASH_SOURCE[0]%/*}/top_python_prog.py"

# The job id carries a terminal escape (an OSC title), which top must not pass on.
TIDEMARK_LIB="$LIBTIDEMARK" TIDEMARK_CONF="dump=$work/py.tdm" SLURM_JOB_ID=$'4242\e]0;x\a' RANK=3 \
  python3 "$prog" "$work/go" >"$work/py.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q ready "$work/py.log" 2>/dev/null && break
  sleep 0.05
done
grep -q ready "$work/py.log" || { cat "$work/py.log"; fail "the program never got ready"; }
unset SLURM_JOB_ID PBS_JOBID RANK
expect 0 "top --once on the Python program" -- "$TIDEMARK" top --once "$pid"
has out "pid $pid"
has out "top_python_prog.py"
has out "device 0 (sim0)  allocated 3.50 MiB (peak 3.50 MiB)"
has out "rank 3  job 4242"
has out "Python code"
! grep -q $'\033' "$work/out" || fail "the job id's escape reached the frame"
expect 0 "top --openmetrics on the Python program" -- "$TIDEMARK" top --openmetrics "$pid"
cp "$work/out" "$work/py.prom"
python3 "$check_om" "$work/py.prom" >"$work/py.samples" 2>"$work/om.err" ||
  fail "openmetrics output does not parse: $(cat "$work/om.err")"
has_re py.samples "^tidemark_device_allocated_bytes\{device=0,device_name=sim0,host=$(hostname),job=4242[^,]+,pid=$pid,rank=3\} 3670016$"
! grep -q $'\033' "$work/py.prom" || fail "the job id's escape reached the OpenMetrics text"
touch "$work/go"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/py.log"; fail "the watched Python program exited $rc"; }
expect 0 "its snapshot reads" -- "$TIDEMARK" summary "$work/py.tdm"
has out "peak allocated 3.50 MiB"
finish "top: a Python program recording on the sim device"
