#!/usr/bin/env bash
# tidemark replay --save DIR: each setting's replay written as a normal
# .tdm that every command reads: summary shows the peak reserved the
# replay table printed, view puts two side by side, replay of a saved
# file reproduces it.  Files are named after their setting (safe for the
# file system and the shell), 0600, never over a link, and never over a
# file without --force.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
need_python

jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

record "$work/run.tdm,max_split_size=20MiB" --steps 3 --compute-us 0
out="$work/saved"
round='roundup_power2_divisions=[256:1,512:4,>:8]'
expect 0 "replay --save" -- "$TIDEMARK" replay --json --save "$out" --conf expandable_segments=1 \
  --conf "$round" "$work/run.tdm"
cp "$work/out" "$work/save.json"
has err "wrote $out/recorded.tdm"
names=$(cd "$out" && ls | sort | tr '\n' ' ')
[ "$names" = "expandable_segments=1.tdm recorded.tdm roundup_power2_divisions=_256_1+512_4+__8_.tdm " ] ||
  fail "saved files: $names"
got=$(jget "$work/save.json" "' '.join(s['saved'] for s in d['settings'])")
[ "$got" = "$out/recorded.tdm $out/expandable_segments=1.tdm $out/roundup_power2_divisions=_256_1+512_4+__8_.tdm" ] ||
  fail "saved paths in the JSON: $got"

# Each file's own stats: the peak reserved of its row, to the byte, and
# the same words as the table.
expect 0 "replay table" -- "$TIDEMARK" replay --conf expandable_segments=1 --conf "$round" "$work/run.tdm"
cp "$work/out" "$work/table.txt"
for i in 0 1 2; do
  f=$(jget "$work/save.json" "d['settings'][$i]['saved']")
  peak=$(jget "$work/save.json" "d['settings'][$i]['peak_reserved']")
  expect 0 "summary of $f" -- "$TIDEMARK" summary --bytes "$f"
  has_re out "reserved [0-9]+ B now, $peak B peak"
  [ "$(stat -c %a "$f")" = 600 ] || fail "$f: mode $(stat -c %a "$f")"
  expect 0 "summary of $f" -- "$TIDEMARK" summary "$f"
  label=$(jget "$work/save.json" "d['settings'][$i]['label']")
  shown=$(grep -F -- "  $label " "$work/table.txt" | awk '{print $(NF-8), $(NF-7)}')
  [ -n "$shown" ] || fail "no row for $label in: $(cat "$work/table.txt")"
  has out "highest $shown"
done
# The expandable replay differs from the recorded one (else the check
# above could not tell the files apart).
got=$(jget "$work/save.json" "d['settings'][0]['peak_reserved'] != d['settings'][1]['peak_reserved']")
[ "$got" = True ] || fail "recorded and expandable replays have the same peak"

# Every command reads them: two side by side, a diff, a gate.
expect 0 "view of two" -- "$TIDEMARK" view "$out/recorded.tdm" "$out/expandable_segments=1.tdm" \
  -o "$work/x.html"
[ -s "$work/x.html" ] || fail "view wrote nothing"
expect 0 "diff" -- "$TIDEMARK" diff "$out/recorded.tdm" "$out/expandable_segments=1.tdm"
expect 0 "gate" -- "$TIDEMARK" gate --max-reserved 100GiB "$out/recorded.tdm"

# The saved replays carry the recording's stacks, phases and categories:
# the same categories at the peak as the recording, sites with their
# frames, the peak's phase, and a page whose panels are not all "unknown".
expect 0 "categories of the recording" -- "$TIDEMARK" categories "$work/run.tdm"
sed -n '/at the peak/,/over time/p' "$work/out" >"$work/cats.run"
grep -q "parameter" "$work/cats.run" || fail "the recording has no parameters at its peak (test checks nothing)"
for f in "$out/recorded.tdm" "$out/expandable_segments=1.tdm"; do
  expect 0 "categories of $f" -- "$TIDEMARK" categories "$f"
  sed -n '/at the peak/,/over time/p' "$work/out" >"$work/cats.saved"
  cmp -s "$work/cats.run" "$work/cats.saved" ||
    { fail "$f: categories at the peak differ from the recording's"; diff "$work/cats.run" "$work/cats.saved" | head; }
  expect 0 "summary of $f" -- "$TIDEMARK" summary "$f"
  has out "(train_sim.c:"
  has_re out "peak at +\+[0-9.]+ s \(event [0-9]+\), step [0-9]+, phase [a-z_]+"
done
expect 0 "view of a saved replay" -- "$TIDEMARK" view "$out/recorded.tdm" -o "$work/saved.html"
grep -q '"phases":\["","' "$work/saved.html" || fail "the saved replay's page has no phases"
grep -qE '"stacks":[1-9][0-9]*,' "$work/saved.html" || fail "the saved replay's page has no stacks"

# The saved replay is a cache-mode recording of its setting: replaying it
# reproduces it; its events carry the recording's times (same peak time).
expect 0 "replay of a saved replay" -- "$TIDEMARK" replay --json "$out/expandable_segments=1.tdm"
cp "$work/out" "$work/again.json"
got=$(jget "$work/again.json" "(d['segment_timeline'], d['settings'][0]['conf'], d['settings'][0]['peak_reserved'] == d['recorded_peak_reserved'] > 0)")
[ "$got" = "('reproduced', 'expandable_segments=1', True)" ] || fail "replay of the saved file: $got"
for f in "$work/run.tdm" "$out/recorded.tdm"; do
  expect 0 "export json $f" -- "$TIDEMARK" export -f json -q -o - "$f"
  jget "$work/out" "d['devices'][0]['peak_time_ns']" >>"$work/peak_times"
done
[ "$(sort -u "$work/peak_times" | wc -l)" -eq 1 ] ||
  fail "the saved replay's peak is not at the recording's time: $(cat "$work/peak_times")"

# Never over a file without --force, never over a link; nothing written
# when one file is refused.
cp "$out/recorded.tdm" "$work/before.tdm"
rm "$out/expandable_segments=1.tdm"
expect 1 "existing file" -- "$TIDEMARK" replay --save "$out" --conf expandable_segments=1 "$work/run.tdm"
has err "recorded.tdm exists"
[ -e "$out/expandable_segments=1.tdm" ] && fail "a file was written although another was refused"
expect 0 "--force" -- "$TIDEMARK" replay --save "$out" --force --conf expandable_segments=1 "$work/run.tdm"
[ -s "$out/expandable_segments=1.tdm" ] || fail "--force wrote nothing"
echo keep >"$work/target"
rm "$out/recorded.tdm"
ln -s "$work/target" "$out/recorded.tdm"
expect 1 "symbolic link" -- "$TIDEMARK" replay --save "$out" --force "$work/run.tdm"
has err "cannot write $out/recorded.tdm"
[ "$(cat "$work/target")" = keep ] || fail "the link's target was written"
# A missing folder is made; a file where the folder should be is refused.
expect 0 "new folder" -- "$TIDEMARK" replay --save "$work/a/b" "$work/run.tdm"
[ -s "$work/a/b/recorded.tdm" ] || fail "no file in the new folder"
expect 1 "not a folder" -- "$TIDEMARK" replay --save "$work/target" "$work/run.tdm"
has err "not a folder"

finish "tidemark replay --save"
