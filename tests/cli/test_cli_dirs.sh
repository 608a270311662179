#!/usr/bin/env bash
# A directory wherever a snapshot is read (import/load.h): one holding
# exactly one .tdm stands for it (`diff DIR DIR`, `gate --baseline DIR`,
# `run --baseline DIR`, `categories DIR`), so the folder `tidemark run -o
# DIR` fills can be handed on; where one snapshot is needed, a directory of
# several is a usage error (exit 1) that says how many and names some; one
# with none is bad input (exit 2). Commands that take several files
# (categories here) read a directory's snapshots in turn.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
# `tidemark run` of train_sim (linked with libtidemark) needs no preload;
# none, so that sanitizer builds run it too.
export TIDEMARK_PRELOAD=

mkdir "$work/one" "$work/two" "$work/job" "$work/three" "$work/empty"
small() { "$TRAIN_SIM" --steps 1 --layers 2 --hidden "$1" --compute-us 0 --dump "$2" >/dev/null 2>&1 ||
  fail "train_sim --dump $2 failed"; }
small 256 "$work/one/a.tdm"
small 512 "$work/two/b.tdm"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 TIDEMARK_CONF="dump=$work/job/r%r.tdm" "$TRAIN_SIM" --steps 1 --layers 2 \
    --hidden 256 --compute-us 0 >/dev/null 2>&1 || fail "rank $r did not record"
done
for n in x y z; do small 256 "$work/three/$n.tdm"; done

said() {
  [ "$(cat "$work/err")" = "$1" ] || fail "stderr is not '$1': $(head -c 400 "$work/err")"
}

# ---- a directory of one snapshot stands for it ------------------------------------
expect 0 "diff DIR DIR" -- "$TIDEMARK" diff "$work/one" "$work/two/"
has out "  A  $work/one/a.tdm: "
has out "  B  $work/two/b.tdm: "
has out "peak allocated"
expect 0 "categories DIR" -- "$TIDEMARK" categories --samples 0 "$work/one"
has out "$work/one/a.tdm"; has out "at the peak"
expect 0 "gate --baseline DIR" -- "$TIDEMARK" gate --baseline "$work/one" --max-growth 1000 "$work/two"
expect 3 "gate --baseline DIR, growth over" -- "$TIDEMARK" gate --baseline "$work/one" --max-growth 1 \
  "$work/two/b.tdm"
# the folder `tidemark run -o` filled is a baseline as it is
expect 0 "run -o DIR" -- "$TIDEMARK" run -q -o "$work/runA" -- "$TRAIN_SIM" --steps 1 --layers 2 \
  --hidden 256 --compute-us 0
expect 0 "run --baseline DIR" -- "$TIDEMARK" run -q --baseline "$work/runA" --max-growth 1000 \
  -o "$work/runB" -- "$TRAIN_SIM" --steps 1 --layers 2 --hidden 256 --compute-us 0
expect 0 "diff of two run folders" -- "$TIDEMARK" diff "$work/runA" "$work/runB"
has out "peak allocated"

# ---- where one is needed, several are a usage error -----------------------------------
expect 1 "diff of a directory of two" -- "$TIDEMARK" diff "$work/job/" "$work/one"
said "tidemark diff: $work/job/ holds 2 snapshots; name the one to use ($work/job/r0.tdm, $work/job/r1.tdm)"
expect 1 "diff of a directory of three" -- "$TIDEMARK" diff "$work/one" "$work/three"
said "tidemark diff: $work/three holds 3 snapshots; name the one to use ($work/three/x.tdm, $work/three/y.tdm, ...)"
# (as run: a usage error, said before any gate is checked)
expect 1 "gate --baseline a directory of two" -- "$TIDEMARK" gate --baseline "$work/job" --max-growth 10 \
  "$work/one"
has err "tidemark gate: $work/job holds 2 snapshots; name the one to use ($work/job/r0.tdm, $work/job/r1.tdm)"
lacks out "max-growth"
expect 1 "run --baseline a directory of two" -- "$TIDEMARK" run -q --baseline "$work/job" --max-growth 10 \
  -o "$work/runC" -- "$TRAIN_SIM" --steps 1 --layers 2 --hidden 256 --compute-us 0
has err "tidemark run: $work/job holds 2 snapshots; name the one to use"
[ ! -e "$work/runC" ] || fail "run with a bad baseline ran its command"
# ... and none is bad input
expect 2 "diff of an empty directory" -- "$TIDEMARK" diff "$work/empty" "$work/one"
said "tidemark diff: $work/empty: no .tdm snapshot in this directory"

# ---- commands that take several files read them all ---------------------------------------
expect 0 "categories of a directory of two" -- "$TIDEMARK" categories --samples 0 "$work/job"
has out "$work/job/r0.tdm"; has out "$work/job/r1.tdm"
[ "$(grep -c 'at the peak' "$work/out")" -eq 2 ] || fail "categories of job/ is not two snapshots"
expect 0 "categories of a file and a directory" -- "$TIDEMARK" categories --samples 0 "$work/one/a.tdm" \
  "$work/three"
[ "$(grep -c 'at the peak' "$work/out")" -eq 4 ] || fail "categories of a.tdm three/ is not four snapshots"
expect 2 "categories of an empty directory" -- "$TIDEMARK" categories "$work/empty"
has err "no .tdm snapshot in this directory"

finish "a directory stands for its snapshots"
