#!/usr/bin/env bash
# `tidemark top` on what it cannot watch: one line on stderr and the exit
# status of docs/cli.md's table (2: no such process, a process that
# records nothing, a file that is no spill file or a corrupt one, a
# folder without one; 1: usage errors, with the line pointing to help).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK
need_python

one_line() { # WHAT: stderr is one line
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$1: not one line on stderr: $(cat "$work/err")"
}

true &
gone_pid=$!
wait "$gone_pid"
expect 2 "a pid no process has" -- "$TIDEMARK" top --once "$gone_pid"
has err "tidemark top: no process $gone_pid"
one_line "no process"

sleep 30 &
idle=$!
expect 2 "a process that records nothing" -- "$TIDEMARK" top --once "$idle"
has err "process $idle records no device memory"
one_line "records nothing"
expect 2 "the same with --openmetrics" -- "$TIDEMARK" top --openmetrics "$idle"
[ ! -s "$work/out" ] || fail "--openmetrics wrote output for a process that records nothing"
kill "$idle"
wait "$idle" 2>/dev/null

printf 'hello, world\n' >"$work/text.spill"
expect 2 "a text file" -- "$TIDEMARK" top --once "$work/text.spill"
has err "not a tidemark spill file"
one_line "text file"

# A spill header of an unknown version, naming a running process (this
# shell) that does not map it.
python3 - "$work/v99.spill" $$ <<'PY'
import struct, sys
head = b"TDMSPILL" + struct.pack("<IIII", 99, 0x01020304, 8, 64) + struct.pack("<Qq", 4096, int(sys.argv[2]))
open(sys.argv[1], "wb").write(head + b"\0" * (8192 - len(head)))
PY
expect 2 "a spill file of another version" -- "$TIDEMARK" top --once "$work/v99.spill"
has err "v99.spill"
has err "spill version 99"
one_line "version 99"
[ ! -s "$work/out" ] || fail "a frame printed for a file that cannot be read: $(head -3 "$work/out")"

# A header whose regions lie outside the file.
python3 - "$work/bad.spill" $$ <<'PY'
import struct, sys
head = b"TDMSPILL" + struct.pack("<IIII", 1, 0x01020304, 8, 64) + struct.pack("<Qq", 1 << 40, int(sys.argv[2]))
open(sys.argv[1], "wb").write(head + b"\0" * (8192 - len(head)))
PY
expect 2 "a corrupt spill file" -- "$TIDEMARK" top --once "$work/bad.spill"
has err "bad.spill"
one_line "corrupt"

mkfifo "$work/fifo.spill"
expect 2 "a FIFO (it must not hang)" -- timeout 10 "$TIDEMARK" top --once "$work/fifo.spill"
one_line "fifo"

mkdir "$work/empty"
expect 2 "a folder without spill files" -- "$TIDEMARK" top --once "$work/empty"
has err "no spill file of a recording process"
one_line "empty folder"
expect 2 "a path that is not there" -- "$TIDEMARK" top --once "$work/nothing"
one_line "missing path"

# Usage errors: exit 1.
expect 1 "--every 0" -- "$TIDEMARK" top --every 0s
has err "--every wants a duration"
expect 1 "--every junk" -- "$TIDEMARK" top --every soon
expect 1 "a misspelt option" -- "$TIDEMARK" top --oncee
has err "did you mean '--once'"
expect 1 "-o without --openmetrics" -- "$TIDEMARK" top -o "$work/x.prom"
expect 1 "two operands" -- "$TIDEMARK" top 1 2
expect 1 "--once with --every" -- "$TIDEMARK" top --once --every 1s
expect 1 "a misspelt command" -- "$TIDEMARK" tpo
has err "did you mean 'top'"
ln -s "$work/text.spill" "$work/link.prom"
expect 1 "-o over a symbolic link" -- "$TIDEMARK" top --openmetrics -o "$work/link.prom"
expect 0 "help top" -- "$TIDEMARK" help top
has out "usage: tidemark top"
expect 0 "top in tidemark --help" -- "$TIDEMARK" --help
has_re out "^  top +live view"
finish "top: bad input is one line and the documented exit status"
