#!/usr/bin/env bash
# Inputs from a pipe: `-` reads a snapshot (or a file to import) from
# standard input, and a FIFO operand works as a file does; both are held in
# a private copy so the format can be sniffed and the whole read.  The
# two-opcode pickle "\x80\x02(t." (an empty tuple) imports without
# undefined behaviour (it took a null pointer + 0 in the pickle reader).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/t.tdm" --steps 2 --layers 2 --hidden 64 --batch 8 --compute-us 0
"$TIDEMARK" summary "$work/t.tdm" >"$work/file.txt" 2>&1 || fail "summary of the file"
"$TIDEMARK" summary - <"$work/t.tdm" >"$work/stdin.txt" 2>"$work/err" || { fail "summary -"; cat "$work/err"; }
cat "$work/t.tdm" | "$TIDEMARK" summary - >"$work/pipe.txt" 2>"$work/err" || { fail "summary - from a pipe"; cat "$work/err"; }
has pipe.txt "peak"
mkfifo "$work/fifo"
cat "$work/t.tdm" >"$work/fifo" &
"$TIDEMARK" summary "$work/fifo" >"$work/fifo.txt" 2>"$work/err" || { fail "summary FIFO"; cat "$work/err"; }
wait
for f in stdin pipe fifo; do
  # The same report but for the name of the file in the header lines.
  diff <(grep -v "$work" "$work/file.txt" | grep -v '^tidemark summary of') \
       <(grep -v "$work" "$work/$f.txt" | grep -v '^tidemark summary of') >/dev/null ||
    fail "summary from $f differs from the file's"
done

expect 0 "export a pickle" -- "$TIDEMARK" export -q --format pytorch -o "$work/p.pickle" "$work/t.tdm"
cat "$work/p.pickle" | "$TIDEMARK" import -q -o "$work/back.tdm" - 2>"$work/err" ||
  { fail "import - from a pipe"; cat "$work/err"; }
[ -s "$work/back.tdm" ] || fail "import - wrote nothing"
(cd "$work" && printf '\x80\x02(t.' | "$TIDEMARK" import -q - 2>"$work/err") ||
  { fail "import of an empty tuple"; cat "$work/err"; }
[ -s "$work/stdin.tdm" ] || fail "import - without -o did not write stdin.tdm"
printf 'nothing\x1b[2J here\n' | "$TIDEMARK" import -q -o "$work/x.tdm" - 2>"$work/err"
grep -q $'\x1b' "$work/err" && fail "an escape character of the input reached stderr"
# Without -o, what a snapshot from standard input makes is named after
# `stdin`, as import's is, never `-`.
mkdir "$work/d"
(cd "$work/d" && "$TIDEMARK" export -q --format json - <"$work/t.tdm" 2>"$work/err") ||
  { fail "export - without -o"; cat "$work/err"; }
(cd "$work/d" && "$TIDEMARK" view - <"$work/t.tdm" 2>"$work/err") ||
  { fail "view - without -o"; cat "$work/err"; }
(cd "$work/d" && "$TIDEMARK" export -q --format json -o out/ - <"$work/t.tdm" 2>"$work/err") ||
  { fail "export - -o DIR/"; cat "$work/err"; }
ls -A "$work/d" "$work/d/out" >"$work/names"
grep -q '^-' "$work/names" && fail "a file named after '-': $(tr '\n' ' ' <"$work/names")"
[ -s "$work/d/stdin.model.json" ] || fail "export - wrote no stdin.model.json: $(tr '\n' ' ' <"$work/names")"
[ -s "$work/d/stdin.html" ] || fail "view - wrote no stdin.html: $(tr '\n' ' ' <"$work/names")"
[ -s "$work/d/out/stdin.model.json" ] || fail "export - -o out/ wrote no out/stdin.model.json"
finish "inputs from pipes"
