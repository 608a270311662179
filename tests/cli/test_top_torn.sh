#!/usr/bin/env bash
# `tidemark top` reading a spill file whose ring a program rewrites as
# fast as it can (train_sim with no compute, a ring of 8192 events, about
# a million events a second): 30 readings, each exits 0, parses as
# OpenMetrics, and adds up (the bytes by category are the bytes
# allocated; nothing above the program's peak of well under 1 MiB, which
# a slot read while being rewritten could break); the slots the reader
# left out as being written are counted; the program ends 0 and its
# snapshot reads.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
need_python
check_om="${BASH_SOURCE[0]%/*}/openmetrics_check.py"

TIDEMARK_CONF="dump=$work/fast.tdm,max_entries=8192" "$TRAIN_SIM" --steps 1000000 \
  --compute-us 0 --layers 2 --hidden 64 --batch 8 >"$work/train.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  "$TIDEMARK" top --once "$pid" 2>/dev/null | grep -q "device 0" && break
  sleep 0.05
done
readings=0 torn=0
for i in $(seq 30); do
  gone "$pid" && break
  "$TIDEMARK" top --openmetrics "$pid" >"$work/m.prom" 2>"$work/m.err"
  rc=$?
  # (It ended meanwhile: its exit snapshot written, its spill file went;
  # as a zombie not yet waited for it still answers kill -0.)
  gone "$pid" && break
  [ "$rc" -ne 0 ] && [ -s "$work/fast.tdm" ] && break
  [ "$rc" -eq 0 ] || { fail "reading $i exited $rc: $(cat "$work/m.err")"; continue; }
  mv "$work/m.prom" "$work/m.$i.prom"
  t=$("$TIDEMARK" top --once "$pid" 2>/dev/null | sed -nE 's/.* ([0-9]+) being written.*/\1/p')
  torn=$((torn + ${t:-0}))
  readings=$((readings + 1))
done
# Each reading parses and adds up (checked once they are all taken: a
# Python start per reading cost more than the reading).
python3 - "${check_om%/*}" "$work"/m.*.prom >"$work/sum.err" 2>&1 <<'PY' || fail "$(cat "$work/sum.err")"
import sys
sys.path.insert(0, sys.argv[1])
from openmetrics_check import samples
for path in sys.argv[2:]:
    try:
        lines = samples(path)
    except SystemExit as e:
        sys.exit("%s does not parse: %s" % (path, e.code))
    alloc, cats, peak = None, 0, None
    for line in lines:
        name, value = line.split("{")[0], int(line.rsplit(" ", 1)[1])
        if name == "tidemark_device_allocated_bytes":
            alloc = value
        elif name == "tidemark_device_peak_allocated_bytes":
            peak = value
        elif name == "tidemark_category_bytes":
            cats += value
    if alloc is None or peak is None:
        sys.exit("%s: no device figures" % path)
    if cats != alloc:
        sys.exit("%s: categories add up to %d, allocated is %d" % (path, cats, alloc))
    if not 0 <= alloc <= peak <= 1 << 20:
        sys.exit("%s: allocated %d, peak %d: not 0 <= allocated <= peak <= 1 MiB"
                 % (path, alloc, peak))
PY
echo "$readings readings while the ring was rewritten; $torn slots left out as being written"
[ "$readings" -ge 10 ] || fail "only $readings readings before the program ended"
kill -TERM "$pid" 2>/dev/null # (it has had its readings: its exit snapshot now)
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 143 ] || { cat "$work/train.log"; fail "train_sim exited $rc"; }
expect 0 "its snapshot reads" -- "$TIDEMARK" summary "$work/fast.tdm"
finish "top: readings of a ring rewritten while read add up"
