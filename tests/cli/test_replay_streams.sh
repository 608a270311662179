#!/usr/bin/env bash
# tidemark replay is faithful with streams: a run on three streams, with
# blocks marked by tdm_record_stream (their reuse waits for the other
# stream) and stream syncs, recorded under different allocator settings;
# replaying each under its recorded settings reproduces its peak reserved
# and its segment timeline exactly.  On the small devices the allocator
# runs out of memory, completes the waiting frees and retries: the
# replay must leave those frees waiting until the same allocation.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK STREAM_PROG
need_python

jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

n=0
for conf in "" ",max_split_size=24MiB" ",roundup_power2_divisions=4" \
  ",garbage_collection_threshold=0.7,device=sim:600MiB" ",device=sim:560MiB" \
  ",expandable_segments=1"; do
  n=$((n + 1))
  f="$work/run$n.tdm"
  TIDEMARK_CONF="dump=$f$conf" "$STREAM_PROG" >"$work/prog.log" 2>&1 ||
    { cat "$work/prog.log"; fail "stream_prog ($conf) failed"; continue; }
  expect 0 "replay ($conf)" -- "$TIDEMARK" replay --json "$f"
  cp "$work/out" "$work/run$n.json"
  got=$(jget "$work/run$n.json" "(d['recorded_peak_reserved'], d['settings'][0]['peak_reserved'])")
  python3 -c "import sys; a, b = $got; sys.exit(not (a == b > 0))" ||
    fail "recorded settings ($conf) do not reproduce the peak (recorded, replayed): $got"
  got=$(jget "$work/run$n.json" "d['segment_timeline']")
  [ "$got" = reproduced ] || fail "segment timeline ($conf): $got"
  case $conf in *device=sim*)
    got=$(jget "$work/run$n.json" "d['settings'][0]['retries'] > 0 and d['settings'][0]['ooms'] == 0")
    [ "$got" = True ] || fail "($conf): no retry after running out of memory, or an OOM: $(cat "$work/run$n.json")" ;;
  esac
  expect 0 "replay text ($conf)" -- "$TIDEMARK" replay "$f"
  grep -E "^segment timeline" "$work/out"
done

# A trace CSV's optional stream column: a block freed on stream 1 is not
# reused by an allocation on stream 2 (a segment of its own), but is on
# stream 1 again.
MiB=1048576
{
  echo "action,time_ns,id,size,category,stream"
  printf 'alloc,1,1,%d,,1\nfree,2,1,,,\nalloc,3,2,%d,,2\nfree,4,2,,,\nalloc,5,3,%d,,1\n' \
    $((10 * MiB)) $((10 * MiB)) $((10 * MiB))
} >"$work/streams.csv"
expect 0 "trace with streams" -- "$TIDEMARK" replay --json "$work/streams.csv"
got=$(jget "$work/out" "(d['settings'][0]['peak_reserved'] // $MiB, d['settings'][0]['segments'])")
[ "$got" = "(20, 2)" ] || fail "streams of a trace CSV: $got"
printf 'action,time_ns,id,size,category,stream\nalloc,1,1,512,,s1\n' >"$work/bad.csv"
expect 2 "a stream that is not a number" -- "$TIDEMARK" replay "$work/bad.csv"
has err "stream 's1' is not a number"

finish "tidemark replay with streams"
