#!/usr/bin/env bash
# Hostile and broken inputs: a large file of something else is refused
# after its first bytes (not read whole); every failure names its cause
# (permission denied, name too long, truncated at byte N, no space left,
# out of host memory with its exit code); and no message passes a control
# character of the input (a terminal escape sequence) to the terminal.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TDM_SOURCE_DIR
need_python
sample=$TDM_SOURCE_DIR/tests/data/sample-v1.2.tdm

# ---- not a snapshot: refused after a few bytes ------------------------------
# A generator of 2 GiB of "y\n" that counts what it could write before the
# reader went away: the pipe's buffer and the sniffed head, not 2 GiB.
cat >"$work/gen.py" <<'EOF'
import os, sys
block, total, sent = b"y\n" * 32768, 2 << 30, 0
try:
    while sent < total:
        sent += os.write(1, block)
except BrokenPipeError:
    pass
open(sys.argv[1], "w").write(str(sent))
EOF
python3 "$work/gen.py" "$work/sent" | TMPDIR=$work "$TIDEMARK" summary - >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] || fail "summary - of 2 GiB of 'y': exit $rc, wanted 2"
has err "standard input: not a snapshot"
sent=$(cat "$work/sent")
[ "$sent" -lt $((4 << 20)) ] || fail "summary - read $sent bytes of a non-snapshot before refusing it"
echo "bytes written to the pipe before the refusal: $sent"

# A sparse 2 GiB file: the same refusal, from its first bytes.
truncate -s 2G "$work/big.bin"
start=$(date +%s%N)
expect 2 "summary of a sparse 2 GiB non-snapshot" -- "$TIDEMARK" summary "$work/big.bin"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
has err "big.bin: not a snapshot"; has err "at byte 0"
echo "sparse 2 GiB file refused in $elapsed_ms ms"
[ "$elapsed_ms" -lt 5000 ] || fail "refusing a sparse 2 GiB file took $elapsed_ms ms"
expect 2 "gate of a non-snapshot" -- "$TIDEMARK" gate --max-peak 1GiB "$work/big.bin"
has err "not a snapshot"

# ---- errors name their cause ------------------------------------------------
long=$work/$(printf 'n%.0s' $(seq 300)).tdm
expect 2 "a name too long" -- "$TIDEMARK" summary "$long"
has err "File name too long"
head -c 1000 "$sample" >"$work/cut.tdm"
expect 2 "a truncated file" -- "$TIDEMARK" summary "$work/cut.tdm"
has_re err "truncated at byte [0-9]+"
expect 4 "export to a full disk" -- bash -c "'$TIDEMARK' export --format csv -o - '$sample' >/dev/full"
has err "No space left on device"; lacks err "input/output error"
expect 4 "pytorch export to a full disk" -- \
  bash -c "'$TIDEMARK' export --format pytorch -o - '$sample' >/dev/full"
has err "No space left on device"; lacks err "input/output error"
expect 4 "summary to a full disk" -- bash -c "'$TIDEMARK' summary '$sample' >/dev/full"
has err "No space left on device"

# Permission denied: root reads any file, so as root the reader runs as
# nobody (when setpriv can drop the rights), else the check is skipped.
mkdir "$work/locked" && chmod 755 "$work" "$work/locked"
cp "$sample" "$work/locked/secret.tdm" && chmod 000 "$work/locked/secret.tdm"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  command -v setpriv >/dev/null && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if [ "$(id -u)" -ne 0 ] || [ ${#as_user[@]} -gt 0 ]; then
  expect 2 "an unreadable file" -- "${as_user[@]}" "$TIDEMARK" summary "$work/locked/secret.tdm"
  has err "secret.tdm: Permission denied"; lacks err "input/output error"
else
  echo "skipped: permission denied (root without setpriv)"
fi

# ---- out of host memory: exit 4 ---------------------------------------------
# A file that starts as a snapshot and is 1 GiB long, read under a 300 MB
# address-space limit: its first record (a header, type 1) says its
# payload is nearly 1 GiB, so the reader must hold it all.  (Zeros right
# after the signature are refused at byte 12 instead: below.)  Sanitizer
# runtimes reserve terabytes of shadow address space and cannot start
# under such a limit.
if [ -z "${TDM_SANITIZE:-}" ]; then
  { printf '\x93\xa8tidemark\x01\x03\x93\x01\xc6\x3f\xff\xff\x00'; } >"$work/huge.tdm"
  truncate -s 1G "$work/huge.tdm"
  expect 4 "out of host memory" -- bash -c "ulimit -v 300000; exec '$TIDEMARK' summary '$work/huge.tdm'"
  has err "out of host memory"
fi
{ printf '\x93\xa8tidemark\x01\x03'; } >"$work/zeros.tdm"
truncate -s 1G "$work/zeros.tdm"
expect 2 "a signature, then 1 GiB of zeros" -- "$TIDEMARK" summary "$work/zeros.tdm"
has err "expected a record at byte 12"
rm -f "$work/zeros.tdm" "$work/huge.tdm"

# ---- pickle header fields are range-checked -----------------------------------
"$TIDEMARK" export -q --format pytorch -o "$work/s.pickle" "$sample" || fail "export a pickle"
# set_field OUT EXPR: the pickle with one field changed (d is the snapshot).
set_field() {
  python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); $2; pickle.dump(d, open(sys.argv[3],'wb'), protocol=4)" \
    "$work/s.pickle" "$2" "$work/$1"
}
set_field rank.pickle "d['allocator_settings']['tidemark']['rank'] = -5"
expect 2 "a negative rank" -- "$TIDEMARK" summary "$work/rank.pickle"
has_re err "rank out of range at byte [0-9]+: -5 \(want -1 to 2147483647\)"
set_field world.pickle "d['allocator_settings']['tidemark']['world_size'] = 2**40"
expect 2 "a world size of 2**40" -- "$TIDEMARK" import -o "$work/w.tdm" "$work/world.pickle"
has_re err "world_size out of range at byte [0-9]+: 1099511627776"
set_field dev.pickle "d['allocator_settings']['tidemark']['devices'][0]['index'] = 40000"
expect 2 "a device index of 40000" -- "$TIDEMARK" summary "$work/dev.pickle"
has_re err "devices\[0\]: index out of range at byte [0-9]+: 40000"
set_field cap.pickle "d['allocator_settings']['tidemark']['devices'][0]['capacity'] = -1"
expect 2 "a negative capacity" -- "$TIDEMARK" summary "$work/cap.pickle"
has_re err "capacity out of range at byte [0-9]+: -1"
set_field size.pickle "d['segments'][0]['total_size'] = -4096"
expect 2 "a negative segment size" -- "$TIDEMARK" summary "$work/size.pickle"
has_re err "segments\[0\]: total_size out of range at byte [0-9]+: -4096"
set_field esize.pickle "d['device_traces'][0][0]['size'] = -1"
expect 2 "a negative allocation size" -- "$TIDEMARK" summary "$work/esize.pickle"
has_re err "device_traces\[0\]\[0\]: size out of range at byte [0-9]+: -1"
# PyTorch writes addresses as int64: one at or above 2**63 is negative.
set_field addr.pickle "d['segments'][0]['address'] = -2**40; d['segments'][0]['blocks'][0]['address'] = -2**40; d['device_traces'][0] = []"
expect 0 "a negative (int64) address" -- "$TIDEMARK" export --format csv -o - "$work/addr.pickle"
has out "0xffffff0000000000"
# An action named "" (skipped, as every unknown action) was searched for as
# "" in the list of skipped names, walking past its end.
set_field empty-action.pickle "t = d['device_traces'][0]; e = dict(t[0], action=''); t[0:0] = [e, e, dict(e, action='user_defined')]"
expect 0 "trace entries with an empty action" -- "$TIDEMARK" summary "$work/empty-action.pickle"
has err "3 trace entries of actions tidemark does not record were skipped ('', user_defined)"
set_field ok.pickle "d['allocator_settings']['tidemark']['rank'] = 3"
expect 0 "a rank in range" -- "$TIDEMARK" summary "$work/ok.pickle"

# ---- sizes past int64 in an imported log --------------------------------------
# Their sum overflowed the stats (undefined behaviour: the ASan+UBSan build
# stops on it); the stats now hold at the largest value.
cp "$TDM_SOURCE_DIR/tests/fuzz/corpus/rmm_csv/size-sum-overflow.csv" "$work/huge-sizes.csv"
expect 0 "an RMM log of 2**63 and 2**64 byte allocations" -- "$TIDEMARK" summary "$work/huge-sizes.csv"
has out "peak allocated"

# ---- a CSV cut short ---------------------------------------------------------
# Its last line has no newline: truncated, with the line and its byte offset.
printf 'action,time_ns,id,size,category\nalloc,1,1,10,\nalloc,2' >"$work/cut.csv"
expect 2 "import of a trace CSV cut short" -- "$TIDEMARK" import "$work/cut.csv" -o "$work/cut-csv.tdm"
has err "truncated"
has err "line 3 (at byte 46), the last, ends without a newline"
[ ! -e "$work/cut-csv.tdm" ] || fail "a truncated CSV was imported"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.5,allocate,0x10,16,0\n1,1.6,fr' >"$work/cut-rmm.csv"
expect 2 "summary of an RMM log cut short" -- "$TIDEMARK" summary "$work/cut-rmm.csv"
has err "truncated (importing it as rmm)"
has err "line 3 (at byte 64), the last, ends without a newline"

# ---- no control character reaches the terminal ------------------------------
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.5,\x1b[31mred\x1b]0;title\x07,0x10,5,0\n' \
  >"$work/escape.csv"
expect 2 "a CSV with escape sequences" -- "$TIDEMARK" summary "$work/escape.csv"
has err 'line 2 (at byte 39): unknown Action'
has err '\x1b[31mred\x1b]0;title\x07'
! grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/err" || fail "a control character of the CSV reached stderr"
expect 2 "a file name with an escape sequence" -- "$TIDEMARK" summary "$work/a"$'\x1b[2J\x9b'".tdm"
has err '\x1b[2J'
! grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/err" || fail "a control character of the name reached stderr"
expect 2 "a C1 control in UTF-8" -- "$TIDEMARK" summary "$work/c1"$'\xc2\x9b'"31m.tdm"
has err '\xc2\x9b31m'
! grep -q $'\xc2\x9b' "$work/err" || fail "a UTF-8 C1 control reached stderr"
expect 2 "import of a CSV with escape sequences" -- "$TIDEMARK" import -o "$work/x.tdm" "$work/escape.csv"
! grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/err" || fail "import: a control character reached stderr"

finish "hostile inputs"
