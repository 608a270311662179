#!/usr/bin/env bash
# Kill-safe history after a crash: a program ($SPILL_CRASH_PROG) that
# allocates through tdm_malloc then dies by SIGSEGV or abort() leaves a
# spill file from which `tidemark recover` makes the snapshot a normal exit
# would have held (same ordered alloc/free actions and sizes, same live
# blocks).  And the reader's checks: a slot whose sequence word is odd (the
# event was being written) is left out, never misread; a cut or corrupt
# spill file is an error (exit 2) that names the byte offset.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK SPILL_CRASH_PROG
need_python

seq_of() { # TDM -> work/NAME.seq: the (action,size) rows of its csv export
  "$TIDEMARK" export --format csv -o "$work/$2.csv" "$1" >/dev/null 2>&1 ||
    fail "export $1 failed"
  cut -d, -f3,5 "$work/$2.csv" | tail -n +2 >"$work/$2.seq"
}

TIDEMARK_CONF="dump=$work/exit.tdm,spill=$work/exit.spill" "$SPILL_CRASH_PROG" exit \
  >"$work/exit.log" 2>&1 || fail "normal run failed"
[ ! -e "$work/exit.spill" ] || fail "spill file left after the exit snapshot"
seq_of "$work/exit.tdm" exit
[ "$(wc -l <"$work/exit.seq")" -ge 12 ] || fail "normal run: fewer than 12 alloc/free rows"
expect 0 "summary of the normal run" -- "$TIDEMARK" summary "$work/exit.tdm"
grep -E "live at end" "$work/out" >"$work/exit.live"

for how in segv abort; do
  TIDEMARK_CONF="dump=$work/$how.tdm,spill=$work/$how.spill" "$SPILL_CRASH_PROG" $how \
    >"$work/$how.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "$how: the program exited 0"
  [ -z "${TDM_SANITIZE:-}" ] && [ "$how" = segv ] && [ "$rc" -ne 139 ] && fail "segv: exit $rc, not 139"
  [ -z "${TDM_SANITIZE:-}" ] && [ "$how" = abort ] && [ "$rc" -ne 134 ] && fail "abort: exit $rc, not 134"
  [ -e "$work/$how.spill" ] || { fail "$how: no spill file"; continue; }
  expect 0 "recover after $how" -- "$TIDEMARK" recover "$work/$how.spill" -o "$work/$how.rec.tdm"
  has err "0 being written left out"
  seq_of "$work/$how.rec.tdm" "$how"
  cmp -s "$work/exit.seq" "$work/$how.seq" ||
    { fail "$how: recovered events differ from the normal run's"; diff "$work/exit.seq" "$work/$how.seq" | head; }
  expect 0 "summary after $how" -- "$TIDEMARK" summary "$work/$how.rec.tdm"
  has out "recovered from spill; partial"
  has out "spill_crash_prog.c"
  grep -E "live at end" "$work/out" >"$work/$how.live"
  cmp -s "$work/exit.live" "$work/$how.live" ||
    fail "$how: live at end '$(cat "$work/$how.live")', normal run '$(cat "$work/exit.live")'"
done

# A torn slot: the newest event's sequence word made odd, as a process
# killed while writing it leaves it.
cp "$work/abort.spill" "$work/torn.spill"
python3 - "$work/torn.spill" <<'PY' || fail "could not patch the spill file"
import struct, sys
f = open(sys.argv[1], "r+b")
head = f.read(4096)
# tdm_spill_header: ring_slots_offset and ring_slot_count follow
# ring_offset; find them by the layout (spill_layout.h).
off = 8 + 4 * 4 + 8 + 8 + 8 + 8 + 8 + 4 + 4 + 128 + 32 + 512 + 16
ring_offset, slots, capacity, count = struct.unpack_from("<QQQQ", head, off)
assert ring_offset and count, (ring_offset, count)
best, where = 0, None
for i in range(count):
    f.seek(slots + 64 * i)
    (seq,) = struct.unpack("<Q", f.read(8))
    if seq and seq % 2 == 0 and seq > best:
        best, where = seq, slots + 64 * i
f.seek(where)
f.write(struct.pack("<Q", best - 1))
PY
expect 0 "recover with a torn slot" -- "$TIDEMARK" recover "$work/torn.spill" -o "$work/torn.tdm"
has err "1 being written left out"
seq_of "$work/torn.tdm" torn
k=$(wc -l <"$work/torn.seq")
[ "$k" -lt "$(wc -l <"$work/abort.seq")" ] || fail "the torn slot's event was kept"
head -n "$k" "$work/abort.seq" | cmp -s - "$work/torn.seq" || fail "torn: not a prefix"

# Complete slots holding what no recorder writes (a phase id past the
# table of names, a device below -1): left out and counted, never turned
# into a snapshot sized by the bad value (the fuzzer's finding: recover
# ran out of memory on a phase id of 2**31).
cp "$work/abort.spill" "$work/junk.spill"
python3 - "$work/junk.spill" <<'PY'
import struct, sys
f = open(sys.argv[1], "r+b")
hdr = f.read(840)
slots, count = struct.unpack_from("<QQ", hdr, 760 + 8), struct.unpack_from("<Q", hdr, 760 + 24)
slots, count = slots[0], count[0]
done = []
for i in range(count):
    f.seek(slots + 64 * i)
    (seq,) = struct.unpack("<Q", f.read(8))
    action = f.read(56)[54]
    if seq and seq % 2 == 0 and action == 0:   # complete allocations
        done.append(slots + 64 * i)
f.seek(done[0] + 8 + 44); f.write(struct.pack("<I", 2**31))   # phase
f.seek(done[1] + 8 + 52); f.write(struct.pack("<h", -7))      # device
PY
events_of() { sed -n 's/.*wrote .* (\([0-9]*\) events,.*/\1/p' "$work/err"; }
expect 0 "recover, again" -- "$TIDEMARK" recover "$work/abort.spill" -o "$work/again.tdm"
all=$(events_of)
expect 0 "recover with junk in complete slots" -- "$TIDEMARK" recover "$work/junk.spill" -o "$work/junk.tdm"
has err "2 malformed left out"
[ "$(events_of)" = $((all - 2)) ] || fail "junk: $(events_of) events kept of $all"

# Cut and corrupt files: exit 2, the cause and the byte offset.
head -c 100 "$work/abort.spill" >"$work/cut.spill"
expect 2 "recover a cut header" -- "$TIDEMARK" recover "$work/cut.spill" -o "$work/cut.tdm"
has_re err "cut at byte 100"
size=$(stat -c %s "$work/abort.spill")
head -c $((size / 2)) "$work/abort.spill" >"$work/half.spill"
expect 2 "recover a cut ring" -- "$TIDEMARK" recover "$work/half.spill" -o "$work/half.tdm"
has_re err "at byte [0-9]+"
printf 'NOTSPILL' | cat - <(tail -c +9 "$work/abort.spill") >"$work/magic.spill"
expect 2 "recover a file of another kind" -- "$TIDEMARK" recover "$work/magic.spill" -o "$work/m.tdm"
has err "not a tidemark spill file"
has err "at byte 0"
cp "$work/abort.spill" "$work/ver.spill"
printf '\x63\x00\x00\x00' | dd of="$work/ver.spill" bs=1 seek=8 conv=notrunc status=none
expect 2 "recover another version" -- "$TIDEMARK" recover "$work/ver.spill" -o "$work/v.tdm"
has err "at byte 8"
# The header's record, context and stacks modes (bytes 832-834 of the
# header, format/spill_layout.h): a bad one is the file's fault, at its
# byte, not a failure to write the output (it was copied into the snapshot
# header, whose writer refused it).
for off in 832 833 834; do
  cp "$work/abort.spill" "$work/mode.spill"
  printf '\xff' | dd of="$work/mode.spill" bs=1 seek=$off conv=notrunc status=none
  expect 2 "recover a bad mode at byte $off" -- "$TIDEMARK" recover "$work/mode.spill" -o "$work/mode.tdm"
  has err "at byte $off"
  lacks err "cannot write"
done
[ ! -e "$work/cut.tdm" ] && [ ! -e "$work/half.tdm" ] && [ ! -e "$work/mode.tdm" ] ||
  fail "a refused spill left a snapshot"
finish "SIGSEGV and abort() leave recoverable histories; torn slots and bad files handled"
