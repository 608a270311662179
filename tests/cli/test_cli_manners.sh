#!/usr/bin/env bash
# What a new user meets at the edges of the commands (each was wrong once):
#  - a flag given a value ("--verbose=1") is refused as such, by its name
#    (it read "unknown option '-v'", or "'--quiet' (did you mean
#    '--quiet'?)", or a control character);
#  - standard input, a pipe or /dev/null is named as the user named it,
#    never by its copy's /proc/self/fd name, and '-' twice is refused;
#  - `replay --device N` of a device the recording lacks is the one line
#    and exit 2 of every command (it replayed nothing and said "fits");
#  - `-o -` where a command cannot write to standard output is refused
#    (it wrote a file named "-"), and `view` says what it wrote on stderr;
#  - a gate or run that measured nothing names the exit it leads to only
#    when that is the exit (the command's failure or an unread file
#    comes first), and says nothing more for a folder with no snapshot;
#  - messages name their cause (a directory, an empty file, the option
#    given), --frames 0 is refused rather than read as 1, and --junit
#    makes its folder as -o does.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/t.tdm" --steps 2 --layers 2 --hidden 64 --batch 8 --compute-us 0
# `run` without the preload library: the commands below use no device, and
# a sanitizer build's library cannot be preloaded into them.
export TIDEMARK_PRELOAD=
cd "$work" || exit 1

# ---- flags with a value -----------------------------------------------------------------
for c in "summary --verbose=1 t.tdm:verbose" "diff --help=1 t.tdm t.tdm:help" \
         "summary --verb=1 t.tdm:verbose" "gate --github=1 --max-peak 1G t.tdm:github" \
         "view --ranks=1 t.tdm:ranks" "run --allow-empty=1 -- true:allow-empty" \
         "export --quiet=1 t.tdm:quiet" "import --force=1 t.tdm:force" \
         "recover --force=1 t.spill:force"; do
  args=${c%:*} flag=${c##*:}
  # shellcheck disable=SC2086 # (the words of the command line)
  expect 1 "$args" -- "$TIDEMARK" $args
  sub=${args%% *}
  [ "$(head -n 1 err)" = "tidemark $sub: option '--$flag' takes no value" ] ||
    fail "$args: $(head -n 1 err | od -c | head -3)"
done
expect 1 "a misspelt flag with a value still gets its guess" -- "$TIDEMARK" export --qiet=1 t.tdm
has err "unknown option '--qiet' (did you mean '--quiet'?)"

# ---- streams by the names the user gave --------------------------------------------------
head -c 3000 t.tdm >cut.tdm
expect 2 "summary of a cut file on stdin" -- "$TIDEMARK" summary - <cut.tdm
has err "warning: standard input is truncated at byte"
expect 2 "summary of /dev/null" -- "$TIDEMARK" summary /dev/null
has err "tidemark summary: /dev/null: "
expect 0 "diff with stdin" -- "$TIDEMARK" diff - t.tdm <t.tdm
has out "A  standard input: "
expect 1 "diff - -" -- "$TIDEMARK" diff - - <t.tdm
has err "'-' is given twice"
for f in out err; do lacks $f "/proc/self/fd"; done
expect 2 "replay of stdin, a device it lacks" -- "$TIDEMARK" replay --device 3 - <t.tdm
has err "tidemark replay: standard input has no device 3 (its devices: 0)"

# ---- replay --device --------------------------------------------------------------------
expect 2 "replay --device of a device the file lacks" -- "$TIDEMARK" replay --device 3 t.tdm
[ "$(cat err)" = "tidemark replay: t.tdm has no device 3 (its devices: 0)" ] || fail "$(cat err)"
lacks out "fits"
expect 0 "replay --device 0" -- "$TIDEMARK" replay --device 0 t.tdm
has out "device 0:"
expect 1 "replay --force without --save" -- "$TIDEMARK" replay --force t.tdm
has err "--force replaces the files of --save"

# ---- outputs --------------------------------------------------------------------------------
expect 1 "view -o -" -- "$TIDEMARK" view t.tdm -o -
has err "cannot write to standard output"
expect 0 "a pickle to import" -- "$TIDEMARK" export -q --format pytorch -o p.pickle t.tdm
expect 1 "import -o -" -- "$TIDEMARK" import -q -o - p.pickle
has err "cannot write to standard output"
[ ! -e ./- ] || fail "a file named '-' was written"
expect 0 "view" -- "$TIDEMARK" view t.tdm -o page.html
[ -s out ] && fail "view wrote to stdout: $(head -c 200 out)"
has err "tidemark view: wrote page.html"

# ---- nothing measured --------------------------------------------------------------------
mkdir empty
expect 2 "gate on a folder with no snapshot" -- "$TIDEMARK" gate --max-peak 1G empty
has err "no .tdm snapshot"
lacks err "nothing measured"
expect 7 "run: a failing command that measured nothing" -- "$TIDEMARK" run --max-peak 1G -- sh -c 'exit 7'
has err "the command exited with 7"
has err "nothing measured"
lacks err "exit 5"
expect 5 "run: nothing measured" -- "$TIDEMARK" run --max-peak 1G -- true
has err "exit 5 (--allow-empty passes it)"

# ---- messages that name the problem -------------------------------------------------------
expect 2 "categories --rules DIR" -- "$TIDEMARK" categories --rules empty t.tdm
has err "empty: Is a directory"
expect 2 "recover DIR" -- "$TIDEMARK" recover empty -o r.tdm
has err "tidemark recover: empty: Is a directory"
expect 2 "recover a missing file" -- "$TIDEMARK" recover nonexist.spill -o r.tdm
has err "tidemark recover: nonexist.spill: No such file or directory"
expect 2 "import DIR" -- "$TIDEMARK" import empty
has err "empty is a directory; import reads one file"
: >zero.spill
expect 2 "recover an empty file" -- "$TIDEMARK" recover zero.spill -o r.tdm
has err "truncated"
expect 1 "categories --min-score without --trace" -- "$TIDEMARK" categories --min-score 50 t.tdm
has err "--min-score needs --trace"; has err "Try 'tidemark help categories'."
expect 1 "categories --samples -1" -- "$TIDEMARK" categories --samples -1 t.tdm
has err "Try 'tidemark help categories'."
expect 1 "summary --frames 0" -- "$TIDEMARK" summary --frames 0 t.tdm
has err "--frames wants 1..1000"
expect 0 "gate --junit into a folder to make" -- "$TIDEMARK" gate --max-peak 1G --junit reports/mem.xml t.tdm
[ -s reports/mem.xml ] || fail "--junit reports/mem.xml was not written"
record "$work/u.tdm" --steps 1 --layers 2 --hidden 64 --batch 8 --compute-us 0
expect 0 "summary of two runs with no rank" -- "$TIDEMARK" summary t.tdm u.tdm
has_re out "^tidemark summary of 2 snapshots on 1 host$"
has out "2 files with no rank in their headers"
# categories --list-rules: the rules in force; with a snapshot, its
# recording's rules file too (first after --rules); two snapshots: which?
printf 'temporary  function=^my_scratch_pool$\n' >"$work/mine.rules"
record "$work/r.tdm,category_rules=$work/mine.rules" --steps 1 --layers 2 --hidden 64 --batch 8 \
  --compute-us 0
expect 0 "categories --list-rules" -- "$TIDEMARK" categories --list-rules
has out "optimizer_state"
lacks out "my_scratch_pool"
expect 0 "categories --list-rules SNAPSHOT" -- "$TIDEMARK" categories --list-rules "$work/r.tdm"
has out "my_scratch_pool"
has out "optimizer_state"
expect 1 "categories --list-rules of two snapshots" -- "$TIDEMARK" categories --list-rules \
  "$work/r.tdm" t.tdm
has err "--list-rules takes one snapshot at most, got 't.tdm' too"
expect 2 "categories --list-rules of a missing snapshot" -- "$TIDEMARK" categories --list-rules \
  nonexist.tdm
has err "nonexist.tdm"

# merge-torch looks at the snapshot before it looks for the pickle beside it.
expect 2 "merge-torch of a missing snapshot" -- "$TIDEMARK" merge-torch nonexist.tdm
has err "tidemark merge-torch: nonexist.tdm: No such file or directory"
lacks err "pickle"
printf 'not a snapshot\n' >junk.tdm
expect 2 "merge-torch of a file that is no snapshot" -- "$TIDEMARK" merge-torch junk.tdm
has err "junk.tdm is not a tidemark snapshot"
expect 2 "merge-torch of a folder" -- "$TIDEMARK" merge-torch empty
has err "empty is a directory"
cmp -s junk.tdm <(printf 'not a snapshot\n') || fail "merge-torch changed junk.tdm"
finish "the commands' manners at their edges"
