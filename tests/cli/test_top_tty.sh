#!/usr/bin/env bash
# `tidemark top` on a terminal (a pseudo-terminal from util-linux's
# script): it takes the alternate screen and hides the cursor, redraws a
# frame every second, quits on `q` with exit 0, and puts the terminal back
# (cursor shown, alternate screen left) on `q` and on SIGTERM alike.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
command -v script >/dev/null || { echo "skipped: no script(1) (util-linux)"; exit 77; }
esc=$'\033'

TIDEMARK_CONF="dump=$work/run.tdm" "$TRAIN_SIM" --steps 400 --compute-us 1500 \
  >"$work/train.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  "$TIDEMARK" top --once "$pid" 2>/dev/null | grep -q "device 0" && break
  sleep 0.05
done

# q goes in once three frames are on the screen (or after 15 s): on a
# loaded machine, or under TSan, a frame can take longer than its second,
# so a fixed wait would count the machine's load, not the redrawing.
frames_in() { grep -o "tidemark top" "$1" 2>/dev/null | wc -l; }
(for _ in $(seq 150); do
   [ "$(frames_in "$work/tty.out")" -ge 3 ] && break
   sleep 0.1
 done
 printf q) | timeout 30 script -qfec "'$TIDEMARK' top $pid" "$work/tty.out" >/dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "top on a terminal ended $rc after q"
frames=$(frames_in "$work/tty.out")
[ "$frames" -ge 3 ] || fail "only $frames frames in 15 s"
grep -qF "${esc}[?1049h${esc}[?25l" "$work/tty.out" || fail "the screen was not taken"
tail -c 300 "$work/tty.out" | grep -qF "${esc}[?25h${esc}[?1049l" ||
  fail "the terminal was not put back after q"
has tty.out "device 0 (sim0)"

# A terminal of 8 rows: one line per process and device instead of the
# full frame (which takes 12 here).
(sleep 1.5; printf q) | timeout 20 script -qfec "stty rows 8 cols 160; '$TIDEMARK' top $pid" \
  "$work/small.out" >/dev/null
has_re small.out "^ +$pid +- +0 +[0-9.]+ [KMG]iB"
has small.out "top site now"
lacks small.out "sites holding the most now:"
# A tall one: the full frame.
(sleep 1.5; printf q) | timeout 20 script -qfec "stty rows 60 cols 160; '$TIDEMARK' top $pid" \
  "$work/tall.out" >/dev/null
has tall.out "sites holding the most now:"
lacks tall.out "top site now"

# SIGTERM: the same restoring, exit 0 (the loop ends; it is no error).
timeout 20 script -qfec "'$TIDEMARK' top $pid & echo \$! >'$work/top.pid'; wait" \
  "$work/tty2.out" </dev/null >/dev/null &
spid=$!
for _ in $(seq 100); do [ -s "$work/top.pid" ] && break; sleep 0.05; done
sleep 1.5
kill -TERM "$(cat "$work/top.pid")"
wait "$spid"
tail -c 300 "$work/tty2.out" | grep -qF "${esc}[?25h${esc}[?1049l" ||
  fail "the terminal was not put back after SIGTERM"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
finish "top on a terminal: frames, q, SIGTERM, the terminal put back"
