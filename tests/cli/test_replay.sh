#!/usr/bin/env bash
# tidemark replay: a recording's requests through the caching allocator
# under other settings.  Recorded settings reproduce train_sim's peak
# reserved and segment timeline exactly; hand-made traces have known
# answers for each setting; --min-capacity is exact to its 1 MiB steps.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
need_python
MiB=1048576

# jget FILE EXPR: a Python expression over the JSON document `d` of FILE.
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---- faithful: train_sim recorded under three settings -------------------
for conf in ",expandable_segments=1" "" ",max_split_size=20MiB" \
  ",max_split_size=20MiB,device=sim:430MiB"; do
  rm -f "$work/run.tdm"
  record "$work/run.tdm$conf" --steps 3 --compute-us 0
  expect 0 "replay of train_sim ($conf)" -- "$TIDEMARK" replay --json "$work/run.tdm"
  cp "$work/out" "$work/run.json"
  got=$(jget "$work/run.json" "d['settings'][0]['peak_reserved'] == d['recorded_peak_reserved'] > 0")
  [ "$got" = True ] || fail "recorded settings ($conf) do not reproduce the peak: $(cat "$work/run.json")"
  got=$(jget "$work/run.json" "d['segment_timeline']")
  [ "$got" = reproduced ] || fail "segment timeline ($conf): $got"
  if [ "$conf" = ",expandable_segments=1" ]; then
    # Segments grow by mapping: a recorded row that differs from the
    # default one, and that says so.
    got=$(jget "$work/run.json" "d['settings'][0]['conf']")
    [ "$got" = expandable_segments=1 ] || fail "recorded expandable setting: $got"
  fi
done
# The last one gave segments back (its device was small): the timeline
# compared holds frees, not only allocations.
got=$(jget "$work/run.json" "d['settings'][0]['device_frees'] > 0")
[ "$got" = True ] || fail "the small-device recording freed no segment"
expect 0 "replay, text" -- "$TIDEMARK" replay "$work/run.tdm"
has out "segment timeline under the recorded settings: reproduced"
has out "(exactly the same)"
has out "recorded (max_split_size=20MiB)"

# ---- known answers on hand-made traces -------------------------------------
csv() { echo "action,time_ns,id,size,category"; cat; }
# One 1.1 MiB request: rounded to 512 B by default, to 1/4 and 1/8 of the
# [1 MiB, 2 MiB) interval with roundup_power2_divisions 4 and 8.
echo "alloc,1,1,1153434," | csv >"$work/round.csv"
expect 0 "rounding" -- "$TIDEMARK" replay --json --conf roundup_power2_divisions=4 \
  --conf roundup_power2_divisions=8 "$work/round.csv"
cp "$work/out" "$work/round.json"
got=$(jget "$work/round.json" "[s['peak_allocated'] for s in d['settings']]")
[ "$got" = "[1153536, 1310720, 1179648]" ] || fail "rounding of 1.1 MiB: $got"

# 30 MiB freed, then 10 MiB: split from the cached block by default; with
# max_split_size=20MiB the cached block is too big to split: a new segment.
printf 'alloc,1,1,%d,\nfree,2,1,%d,\nalloc,3,2,%d,\n' $((30 * MiB)) $((30 * MiB)) $((10 * MiB)) |
  csv >"$work/split.csv"
expect 0 "max_split_size" -- "$TIDEMARK" replay --json --conf max_split_size=20MiB "$work/split.csv"
cp "$work/out" "$work/split.json"
got=$(jget "$work/split.json" "[(s['peak_reserved'] // $MiB, s['segments']) for s in d['settings']]")
[ "$got" = "[(30, 1), (40, 2)]" ] || fail "max_split_size: $got"

# 18 live 1.1 MiB requests fill one 20 MiB segment at 512 B rounding; at
# 1.25 MiB (divisions 4) they need two: a 30 MiB device fits one, not two.
for i in $(seq 1 18); do echo "alloc,$i,$i,1153434,"; done | csv >"$work/fill.csv"
expect 0 "capacity" -- "$TIDEMARK" replay --json --capacity 30MiB --min-capacity \
  --conf roundup_power2_divisions=4 "$work/fill.csv"
cp "$work/out" "$work/fill.json"
got=$(jget "$work/fill.json" "[(s['oom'], s['min_capacity'] // $MiB) for s in d['settings']]")
[ "$got" = "[(False, 20), (True, 40)]" ] || fail "OOM at 30 MiB / min capacity: $got"
# Exact and monotonic: fits at the minimum and above, OOM below it.
for setting in "roundup_power2_divisions=1" "roundup_power2_divisions=4"; do
  min=$(jget "$work/fill.json" "[s for s in d['settings'] if s['conf'] in ('', '$setting')][-1]['min_capacity']")
  for cap in $((min / 2)) $((min - MiB)) "$min" $((min + MiB)) $((min * 2)); do
    expect 0 "capacity $cap" -- "$TIDEMARK" replay --json --capacity "$cap" --conf "$setting" "$work/fill.csv"
    oom=$(jget "$work/out" "d['settings'][-1]['oom']")
    want=False
    [ "$cap" -lt "$min" ] && want=True
    [ "$oom" = "$want" ] || fail "$setting at $cap bytes (min $min): oom $oom"
  done
done

# --sweep: the best is the least peak reserved among those that fit.
expect 0 "sweep" -- "$TIDEMARK" replay --json --sweep --capacity 30MiB "$work/fill.csv"
cp "$work/out" "$work/sweep.json"
got=$(jget "$work/sweep.json" "len(d['settings']) == 16 and sum(s['best'] for s in d['settings']) == 1 and min((s['peak_reserved'] for s in d['settings'] if not s['oom'])) == [s for s in d['settings'] if s['best']][0]['peak_reserved'] and any(s['oom'] for s in d['settings'])")
[ "$got" = True ] || fail "sweep's best: $(cat "$work/sweep.json")"
expect 0 "sweep, text" -- "$TIDEMARK" replay --sweep --capacity 30MiB "$work/fill.csv"
has_re out '^\* best: '
has_re out 'roundup_power2_divisions=4 .* OOM'

# --sweep --min-capacity: the star answers "the smallest device". 30 MiB
# freed, then 41 MiB: expandable segments reserve least (60 MiB against 72)
# but need a 60 MiB device, where the defaults fit on 42 MiB (freeing the
# cached 30 MiB on the retry).  The star goes to a row whose smallest
# device is the smallest of all, and to the recorded row on a tie.
printf 'alloc,1,1,%d,\nfree,2,1,,\nalloc,3,2,%d,\n' $((30 * MiB)) $((41 * MiB)) | csv >"$work/star.csv"
expect 0 "sweep, min capacity" -- "$TIDEMARK" replay --json --sweep --min-capacity "$work/star.csv"
cp "$work/out" "$work/star.json"
got=$(jget "$work/star.json" "[(s['label'], s['min_capacity'] // $MiB) for s in d['settings'] if s['best']]")
[ "$got" = "[('recorded', 42)]" ] || fail "the star of --min-capacity: $got"
got=$(jget "$work/star.json" "[s['min_capacity'] // $MiB for s in d['settings'] if s['label'] == 'expandable_segments=1']")
[ "$got" = "[60]" ] || fail "expandable's smallest device on star.csv: $got"
expect 0 "sweep, min capacity, text" -- "$TIDEMARK" replay --sweep --min-capacity "$work/star.csv"
has out "* best: recorded (the smallest device, 42.00 MiB; no setting tried needs a smaller one)"

# --capacity without a unit is bytes, said back as the gates say it
expect 0 "--capacity 10" -- "$TIDEMARK" replay --capacity 10 "$work/fill.csv"
has err "--capacity 10 has no unit: read as 10 B (did you mean 10GiB?)"
has out "on a sim device of 10 B"
expect 0 "--capacity 10GiB" -- "$TIDEMARK" replay --capacity 10GiB "$work/fill.csv"
lacks err "no unit"
expect 1 "--capacity 0" -- "$TIDEMARK" replay --capacity 0 "$work/fill.csv"

# ---- what replay refuses, in one line ------------------------------------
for bad in "max_split_size=abc" "foo=1" "expandable_segments=2" "garbage_collection_threshold=1.5"; do
  expect 2 "--conf $bad" -- "$TIDEMARK" replay --conf "$bad" "$work/fill.csv"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "--conf $bad: not one line: $(cat "$work/err")"
  has err "$bad"
done

# ---- expandable segments: known answers ------------------------------------
# 30 MiB then 8 MiB then 15 MiB: normal segments of 30, 20 and 16 MiB; an
# expandable segment maps two 20 MiB pages, serves 8 MiB from the tail,
# then maps one more page: 60 MiB in three mappings.
printf 'alloc,1,1,%d,\nalloc,2,2,%d,\nalloc,3,3,%d,\n' $((30 * MiB)) $((8 * MiB)) $((15 * MiB)) |
  csv >"$work/grow.csv"
expect 0 "expandable growth" -- "$TIDEMARK" replay --json --conf expandable_segments=1 "$work/grow.csv"
cp "$work/out" "$work/grow.json"
got=$(jget "$work/grow.json" "[(s['peak_reserved'] // $MiB, s['segments'], s['device_calls']) for s in d['settings']]")
[ "$got" = "[(66, 3, 3), (60, 2, 3)]" ] || fail "expandable growth: $got"
# Three 60 MiB blocks, the first and last freed, then 100 MiB on a 200 MiB
# device: no 100 MiB hole in the device for normal segments, even after
# the cache is freed; the expandable segment unmaps the two free ranges
# (two unmappings) and maps 100 MiB after the middle block.
printf 'alloc,1,1,%d,\nalloc,2,2,%d,\nalloc,3,3,%d,\nfree,4,1,,\nfree,5,3,,\nalloc,6,4,%d,\n' \
  $((60 * MiB)) $((60 * MiB)) $((60 * MiB)) $((100 * MiB)) | csv >"$work/frag.csv"
expect 0 "expandable fragmentation" -- "$TIDEMARK" replay --json --capacity 200MiB \
  --conf expandable_segments=1 "$work/frag.csv"
cp "$work/out" "$work/frag.json"
got=$(jget "$work/frag.json" "[(s['oom'], s['peak_reserved'] // $MiB, s['segments'], s['device_frees'], s['retries']) for s in d['settings']]")
[ "$got" = "[(True, 180, 3, 2, 1), (False, 180, 4, 2, 1)]" ] || fail "expandable fragmentation: $got"

# ---- a recording that lacks what a faithful replay needs -------------------
rm -f "$work/wrap.tdm"
record "$work/wrap.tdm,max_entries=64" --steps 3 --compute-us 0
expect 0 "wrapped ring" -- "$TIDEMARK" replay "$work/wrap.tdm"
has_re out '^note: the ring wrapped \([0-9]+ events dropped\)'
lacks out "segment timeline"

finish "tidemark replay"
