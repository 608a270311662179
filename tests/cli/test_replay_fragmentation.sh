#!/usr/bin/env bash
# Fragmentation on real traces (docs/allocator.md, "Fragmentation"):
# replayed through the caching allocator, reserved ÷ allocated at the
# moment allocated peaks stays at or under 1.15 with expandable_segments=1
# on every trace of bench/traces (and of shared/traces beside the
# checkout, where there is one).  On the LSTM trace (a sequence length of
# its own per batch) PyTorch's default rules are above 1.15: the gap the
# policy closes, checked too so that the table in the docs stays true.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TDM_SOURCE_DIR
need_python
traces=$TDM_SOURCE_DIR/bench/traces
limit=1.15

# ratio FILE ROW: reserved ÷ allocated at the allocated peak of a --json row.
ratio() {
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['settings'][int(sys.argv[2])]
print('%.3f' % (r['reserved_at_allocated_peak'] / r['peak_allocated']))" "$1" "$2" 2>/dev/null
}
above() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$1" "$2"; }

n=0
for csv in "$traces"/*.csv "$TDM_SOURCE_DIR"/../shared/traces/*.csv; do
  [ -f "$csv" ] || continue
  name=${csv##*/}
  before=$fails
  expect 0 "replay $name" -- "$TIDEMARK" replay --json --conf expandable_segments=1 "$csv"
  [ "$fails" -eq "$before" ] || continue
  cp "$work/out" "$work/$name.json"
  default=$(ratio "$work/$name.json" 0) || { fail "$name: no default row"; continue; }
  policy=$(ratio "$work/$name.json" 1) || { fail "$name: no policy row"; continue; }
  echo "$name: default $default, expandable_segments=1 $policy"
  if above "$policy" "$limit"; then
    fail "$name: reserved/allocated $policy with expandable_segments=1, above $limit"
  fi
  if [ "$name" = lstm.csv ] && ! above "$default" "$limit"; then
    fail "lstm.csv: the default rules give $default, no longer above $limit: update docs/allocator.md"
  fi
  n=$((n + 1))
done
[ "$n" -ge 4 ] || fail "only $n traces in $traces (lstm, resnet, gpt, longtail expected)"
finish "reserved/allocated <= $limit with expandable_segments=1 on $n traces"
