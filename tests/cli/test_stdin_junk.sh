#!/usr/bin/env bash
# A stream that starts as a snapshot and then turns to junk is refused as
# it is read, with the byte where the junk starts, after copying a bounded
# amount into TMPDIR: an endless stream after a valid start (zeros after
# the whole file, zeros inside the header record, a garbage record type)
# ends the command in well under the time limit.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/t.tdm" --steps 2 --layers 2 --hidden 64 --batch 8 --compute-us 0
size=$(stat -c %s "$work/t.tdm")

# junk WHAT MESSAGE -- PRODUCER...: an endless stream from PRODUCER piped
# into `summary -` is refused within 20 s, saying MESSAGE.
junk() {
  local what=$1 msg=$2; shift 3
  local t0=$SECONDS
  "$@" 2>/dev/null | timeout 20 "$TIDEMARK" summary - >"$work/out" 2>"$work/err"
  local rc=${PIPESTATUS[1]}
  [ "$rc" -eq 124 ] && { fail "$what: still copying the stream after 20 s"; return; }
  [ "$rc" -ne 0 ] || fail "$what: accepted"
  has err "$msg"
  has_re err 'byte [0-9]+'
  [ $((SECONDS - t0)) -le 10 ] || fail "$what: took $((SECONDS - t0)) s"
}

junk "zeros after the end record" "unexpected bytes after the end record, at byte $size" -- \
  sh -c "cat '$work/t.tdm'; exec cat /dev/zero"
junk "zeros inside the header record" "checksum mismatch" -- \
  sh -c "head -c 40 '$work/t.tdm'; exec cat /dev/zero"
# The signature, then records of 0xff bytes: no record at byte 12.
junk "0xff after the signature" "expected a record at byte" -- \
  sh -c "head -c 12 '$work/t.tdm'; exec tr '\\0' '\\377' </dev/zero"

# The file whole, slowly or at once, still reads.
cat "$work/t.tdm" | "$TIDEMARK" summary - >"$work/out" 2>"$work/err" || { fail "summary - of the file"; cat "$work/err"; }
has out "peak"
finish "junk after a valid start on a pipe"
