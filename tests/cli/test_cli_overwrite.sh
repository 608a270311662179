#!/usr/bin/env bash
# Files the commands write (docs/cli.md, "Output files"): `import`, `export`
# and `view` never replace an existing file unless --force is given, whether
# they chose its name themselves (the refusal then says to use -o or
# --force) or -o named it; `-o -` (standard output) is never refused. A
# refusal exits 1, says so in one line, writes nothing and leaves no
# temporary file. `-o DIR/` (or an existing directory) writes into DIR
# under the default name. `import` of a file that already is a .tdm says
# so and exits 1.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/a.tdm" --steps 1 --layers 2 --hidden 256 --compute-us 0
cp "$work/a.tdm" "$work/keep.tdm"

# one line on stderr, exactly $1
said() {
  [ "$(cat "$work/err")" = "$1" ] || fail "stderr is not '$1': $(head -c 400 "$work/err")"
}
# no temporary file left in $1
no_tmp() {
  ! ls -A "$1" | grep -q '\.tmp' || fail "temporary files left in $1: $(ls -A "$1" | grep '\.tmp')"
}

# ---- import ------------------------------------------------------------------------
expect 0 "export a pickle" -- "$TIDEMARK" export -q --format pytorch "$work/a.tdm"
[ -s "$work/a.pickle" ] || fail "no a.pickle"
# the default name a.tdm is taken by a different file: refused, a.tdm kept
expect 1 "import onto an existing default name" -- "$TIDEMARK" import "$work/a.pickle"
said "tidemark import: $work/a.tdm exists; use -o to choose another name or --force to replace it"
cmp -s "$work/a.tdm" "$work/keep.tdm" || fail "import replaced a.tdm"
no_tmp "$work"
expect 0 "import --force" -- "$TIDEMARK" import -q --force "$work/a.pickle"
cmp -s "$work/a.tdm" "$work/keep.tdm" && fail "import --force did not replace a.tdm"
expect 0 "summary of the replaced file" -- "$TIDEMARK" summary "$work/a.tdm"
cp "$work/keep.tdm" "$work/a.tdm"
# a pickle named .tdm: its default output is itself; refused, --force or not
cp "$work/a.pickle" "$work/p.tdm"
for f in "" --force; do
  expect 1 "import of a pickle named .tdm $f" -- "$TIDEMARK" import $f "$work/p.tdm"
  has err "tidemark import: $work/p.tdm is the file being imported; name the snapshot with -o"
  cmp -s "$work/p.tdm" "$work/a.pickle" || fail "import $f replaced its own input"
done
expect 0 "import of a pickle named .tdm, -o" -- "$TIDEMARK" import -q "$work/p.tdm" -o "$work/p2.tdm"
# -o naming an existing file: refused too, with the other hint
expect 0 "import -o a new name" -- "$TIDEMARK" import -q "$work/a.pickle" -o "$work/b.tdm"
cp "$work/b.tdm" "$work/b.keep"
: >"$work/b.tdm"
expect 1 "import -o an existing file" -- "$TIDEMARK" import "$work/a.pickle" -o "$work/b.tdm"
said "tidemark import: $work/b.tdm exists; use --force to replace it"
[ ! -s "$work/b.tdm" ] || fail "import -o replaced b.tdm"
expect 0 "import -o --force" -- "$TIDEMARK" import -q --force "$work/a.pickle" -o "$work/b.tdm"
cmp -s "$work/b.tdm" "$work/b.keep" || fail "import -o --force did not write b.tdm"
# -o DIR/ and -o DIR (existing): the default name inside DIR
expect 0 "import -o DIR/" -- "$TIDEMARK" import -q "$work/a.pickle" -o "$work/into/"
cmp -s "$work/into/a.tdm" "$work/b.keep" || fail "import -o into/ did not write into/a.tdm"
mkdir "$work/there"
expect 0 "import -o an existing DIR" -- "$TIDEMARK" import "$work/a.pickle" -o "$work/there"
has err "wrote $work/there/a.tdm"
[ -s "$work/there/a.tdm" ] || fail "import -o there did not write there/a.tdm"
expect 1 "import -o DIR/ onto an existing file" -- "$TIDEMARK" import "$work/a.pickle" -o "$work/there/"
said "tidemark import: $work/there/a.tdm exists; use --force to replace it"
# a .tdm is not imported
expect 1 "import a .tdm" -- "$TIDEMARK" import "$work/keep.tdm" -o "$work/c.tdm"
said "tidemark import: $work/keep.tdm already is a tidemark snapshot; nothing to import"
[ ! -e "$work/c.tdm" ] || fail "import of a .tdm wrote c.tdm"
cp "$work/keep.tdm" "$work/renamed.pickle"
expect 1 "import a .tdm of another name" -- "$TIDEMARK" import --format pytorch "$work/renamed.pickle"
said "tidemark import: $work/renamed.pickle already is a tidemark snapshot; nothing to import"
[ ! -e "$work/renamed.tdm" ] || fail "import of a .tdm wrote renamed.tdm"

# ---- export ------------------------------------------------------------------------
cp "$work/a.pickle" "$work/a.pickle.keep"
: >"$work/a.pickle"
expect 1 "export onto an existing default name" -- "$TIDEMARK" export --format pytorch "$work/a.tdm"
said "tidemark export: $work/a.pickle exists; use -o to choose another name or --force to replace it"
[ ! -s "$work/a.pickle" ] || fail "export replaced a.pickle"
no_tmp "$work"
expect 0 "export --force" -- "$TIDEMARK" export -q --force --format pytorch "$work/a.tdm"
cmp -s "$work/a.pickle" "$work/a.pickle.keep" || fail "export --force did not write a.pickle"
: >"$work/x.json"
expect 1 "export -o an existing file" -- "$TIDEMARK" export --format json "$work/a.tdm" -o "$work/x.json"
said "tidemark export: $work/x.json exists; use --force to replace it"
[ ! -s "$work/x.json" ] || fail "export -o replaced x.json"
expect 0 "export -o --force" -- "$TIDEMARK" export -q --format json --force "$work/a.tdm" -o "$work/x.json"
[ -s "$work/x.json" ] || fail "export -o --force did not write x.json"
expect 0 "export -o - is never refused" -- "$TIDEMARK" export --format json "$work/a.tdm" -o -
[ -s "$work/out" ] || fail "export -o - wrote nothing"
# several snapshots into a folder: the existing one is refused, the others written
mkdir "$work/job" "$work/out1"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 TIDEMARK_CONF="dump=$work/job/r%r.tdm" "$TRAIN_SIM" --steps 1 --layers 2 \
    --hidden 256 --compute-us 0 >/dev/null 2>&1 || fail "rank $r did not record"
done
: >"$work/out1/r0.csv"
expect 1 "export of ranks onto one existing file" -- "$TIDEMARK" export -q --format csv "$work/job" -o "$work/out1/"
said "tidemark export: $work/out1/r0.csv exists; use --force to replace it"
[ ! -s "$work/out1/r0.csv" ] || fail "export of ranks replaced out1/r0.csv"
[ -s "$work/out1/r1.csv" ] || fail "export of ranks did not write out1/r1.csv"
no_tmp "$work/out1"
expect 0 "export of ranks --force" -- "$TIDEMARK" export -q --force --format csv "$work/job" -o "$work/out1/"
[ -s "$work/out1/r0.csv" ] || fail "export of ranks --force did not write out1/r0.csv"
# one merged trace
: >"$work/all.json"
expect 1 "export of a merged trace onto an existing file" -- "$TIDEMARK" export --format perfetto \
  "$work/job" -o "$work/all.json"
said "tidemark export: $work/all.json exists; use --force to replace it"

# ---- view --------------------------------------------------------------------------
: >"$work/a.html"
expect 1 "view onto an existing default name" -- "$TIDEMARK" view "$work/a.tdm"
said "tidemark view: $work/a.html exists; use -o to choose another name or --force to replace it"
[ ! -s "$work/a.html" ] || fail "view replaced a.html"
no_tmp "$work"
expect 0 "view --force" -- "$TIDEMARK" view --force "$work/a.tdm"
[ -s "$work/a.html" ] || fail "view --force did not write a.html"
expect 1 "view -o an existing file" -- "$TIDEMARK" view "$work/a.tdm" -o "$work/a.html"
said "tidemark view: $work/a.html exists; use --force to replace it"
: >"$work/job.html"
expect 1 "view DIR onto an existing default name" -- "$TIDEMARK" view "$work/job"
said "tidemark view: $work/job.html exists; use -o to choose another name or --force to replace it"
# -o DIR/ and -o DIR (existing): DIR/a.html
expect 0 "view -o DIR/" -- "$TIDEMARK" view "$work/a.tdm" -o "$work/pages/"
has err "wrote $work/pages/a.html"
[ -s "$work/pages/a.html" ] || fail "view -o pages/ did not write pages/a.html"
expect 0 "view -o an existing DIR" -- "$TIDEMARK" view "$work/keep.tdm" -o "$work/pages"
[ -s "$work/pages/keep.html" ] || fail "view -o pages did not write pages/keep.html"
expect 0 "view of a DIR -o DIR/" -- "$TIDEMARK" view "$work/job/" -o "$work/pages/"
[ -s "$work/pages/job.html" ] || fail "view job/ -o pages/ did not write pages/job.html"

finish "outputs are not replaced without --force"
