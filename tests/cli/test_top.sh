#!/usr/bin/env bash
# `tidemark top` against a running train_sim ($TRAIN_SIM), read from its
# spill file while it trains:
#   - --once by pid, with no operand (every recording process of this
#     user), and by spill folder: its device, allocated and reserved
#     bytes, categories, sites, the plot line; plain text (no escape) into
#     a file;
#   - --openmetrics parses (openmetrics_check.py) and its figures are
#     those a later snapshot bounds: reserved then <= the run's final peak
#     reserved, peak allocated then <= its final peak allocated;
#   - --every 1s -o FILE rewrites FILE atomically (each copy taken while
#     it runs is whole, a new file each time) until SIGINT, exit 0;
#   - the program is unaffected: it exits 0 and its snapshot reads;
#   - a spill file left by a killed process: shown "(ended)", byte for byte
#     unchanged by being read, and not counted as a recording process; a
#     cut copy of it is one line, exit 2.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
need_python
check_om="${BASH_SOURCE[0]%/*}/openmetrics_check.py"
esc=$'\033'

TIDEMARK_CONF="dump=$work/run.tdm" "$TRAIN_SIM" --steps 300 --compute-us 1500 \
  >"$work/train.log" 2>&1 &
pid=$!
# Until its spill file is named (its first event) and holds device memory.
for _ in $(seq 200); do
  "$TIDEMARK" top --once "$pid" >"$work/once" 2>"$work/once.err" &&
    grep -q "device 0" "$work/once" && break
  sleep 0.05
done
expect 0 "top --once PID" -- "$TIDEMARK" top --once "$pid"
has out "pid $pid"
has out "train_sim --steps 300"
has out "device 0 (sim0)"
has_re out "allocated [0-9.]+ [KMG]iB \(peak [0-9.]+ [KMG]iB\)  reserved [0-9.]+ [KMG]iB"
has out "parameter "
has out "last 60s"
has out "sites holding the most now:"
has_re out "init_parameters \(train_sim\.c:[0-9]+\)"
! grep -q "$esc" "$work/out" || fail "top --once into a file wrote terminal escapes"
[ ! -s "$work/err" ] || fail "top --once said on stderr: $(head -3 "$work/err")"

expect 0 "top --once (every recording process)" -- "$TIDEMARK" top --once
has out "pid $pid"
spill_dir="$work/tidemark-$(id -u)"
expect 0 "top --once SPILL_DIR" -- "$TIDEMARK" top --once "$spill_dir"
has out "pid $pid"

expect 0 "top --openmetrics PID" -- "$TIDEMARK" top --openmetrics "$pid"
cp "$work/out" "$work/m1.prom"
python3 "$check_om" "$work/m1.prom" >"$work/m1.samples" 2>"$work/m1.err" ||
  fail "openmetrics output does not parse: $(cat "$work/m1.err")"
sample() { # FILE NAME EXTRA-LABEL-REGEX: the value of that sample of $pid's device 0
  grep -E "^$2\{${3:-}.*device=0,.*pid=$pid\} " "$work/$1" | head -n 1 | cut -d' ' -f2
}
reserved_then=$(sample m1.samples tidemark_device_reserved_bytes)
peak_then=$(sample m1.samples tidemark_device_peak_allocated_bytes)
params_then=$(sample m1.samples tidemark_category_bytes "category=parameter,")
[ -n "$reserved_then" ] && [ "$reserved_then" -gt 0 ] || fail "no reserved bytes: '$reserved_then'"
[ -n "$peak_then" ] && [ "$peak_then" -gt 0 ] || fail "no peak allocated: '$peak_then'"
[ -n "$params_then" ] && [ "$params_then" -gt 0 ] || fail "no parameter bytes: '$params_then'"
has m1.samples "host=$(hostname)"
for fam in tidemark_device_allocated_bytes tidemark_device_peak_reserved_bytes; do
  has m1.samples "$fam{"
done

# -o FILE --every 1s: copies taken as fast as we can are each whole (all
# checked at the end, by one Python).
"$TIDEMARK" top --openmetrics --every 1s -o "$work/live.prom" "$pid" 2>"$work/live.err" &
top_pid=$!
inodes="" copies=0
mkdir "$work/copies"
for i in $(seq 70); do
  if [ -e "$work/live.prom" ]; then
    cp "$work/live.prom" "$work/copies/$i.prom" 2>/dev/null && copies=$((copies + 1))
    ino=$(stat -c %i "$work/live.prom" 2>/dev/null)
    case " $inodes " in *" $ino "*) ;; *) inodes="$inodes $ino" ;; esac
  fi
  sleep 0.05
done
[ "$copies" -eq 0 ] || python3 "$check_om" "$work"/copies/*.prom >/dev/null 2>"$work/copy.err" ||
  fail "a copy of the rewritten file does not parse: $(cat "$work/copy.err")"
kill -INT "$top_pid"
wait "$top_pid"
rc=$?
[ "$rc" -eq 0 ] || fail "top --every -o ended $rc after SIGINT: $(cat "$work/live.err")"
n_inodes=$(echo $inodes | wc -w)
[ "$n_inodes" -ge 2 ] || fail "the file was not rewritten (inodes:$inodes)"
[ "$copies" -ge 20 ] || fail "only $copies copies taken"
leftover=$(ls -A "$work" | grep -F "live.prom." || true)
[ -z "$leftover" ] || fail "temporary files left: $leftover"
echo "rewritten $n_inodes times; $copies copies read whole"

wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/train.log"; fail "train_sim watched by top exited $rc"; }
expect 0 "summary of the watched run" -- "$TIDEMARK" summary --bytes "$work/run.tdm"
has out "device 0 (sim0)"
final_peak_reserved=$(sed -nE 's/.*reserved ([0-9]+) B now, ([0-9]+) B peak.*/\2/p' "$work/out")
final_peak_alloc=$(sed -nE 's/.*stats +allocated ([0-9]+) B now, ([0-9]+) B peak.*/\2/p' "$work/out")
[ -n "$final_peak_reserved" ] && [ -n "$final_peak_alloc" ] || fail "no stats in the summary"
[ "${reserved_then:-0}" -le "${final_peak_reserved:-0}" ] ||
  fail "reserved seen live ($reserved_then) above the run's peak ($final_peak_reserved)"
[ "${peak_then:-0}" -le "${final_peak_alloc:-0}" ] ||
  fail "peak seen live ($peak_then) above the run's peak ($final_peak_alloc)"
echo "live: reserved $reserved_then, peak allocated $peak_then; final peaks:" \
  "reserved $final_peak_reserved, allocated $final_peak_alloc"

# No process of ours records now: one line, exit 2 (or, where another
# program of this user records in /dev/shm or /tmp meanwhile, a frame
# without ours).
nobody() {
  "$TIDEMARK" top --once >"$work/out" 2>"$work/err"
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    for p in "$@"; do lacks out "pid $p "; done
  else
    [ "$rc" -eq 2 ] || fail "top --once with nobody recording: exit $rc"
    has err "no recording process of this user on this host"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "more than one line: $(cat "$work/err")"
  fi
}
nobody "$pid"

# A killed one's spill file: read, never changed.
TIDEMARK_CONF="dump=$work/k.tdm" "$TRAIN_SIM" --steps 100 --compute-us 1000 >/dev/null 2>&1 &
kpid=$!
spill="$spill_dir/k.$kpid.spill"
for _ in $(seq 200); do
  [ "$(head -c 8 "$spill" 2>/dev/null)" = TDMSPILL ] && break
  sleep 0.05
done
sleep 0.3
kill -KILL "$kpid"
wait "$kpid" 2>/dev/null
[ -e "$spill" ] || { fail "killed run left no $spill"; finish "top"; }
before=$(sha256sum <"$spill")
expect 0 "top --once on a killed process's spill" -- "$TIDEMARK" top --once "$spill"
has out "pid $kpid"
has out "(ended)"
has out "device 0 (sim0)"
[ "$(sha256sum <"$spill")" = "$before" ] || fail "reading the spill file changed it"
nobody "$pid" "$kpid" # (a dead process's spill is no recording process)
head -c 20000 "$spill" >"$work/cut.spill"
expect 2 "top --once on a cut spill file" -- "$TIDEMARK" top --once "$work/cut.spill"
[ "$(wc -l <"$work/err")" -eq 1 ] || fail "cut spill: not one line: $(cat "$work/err")"
has err "cut.spill"
finish "top: live figures of a running train_sim, OpenMetrics, atomic rewrites"
