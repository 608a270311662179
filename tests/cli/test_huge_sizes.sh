#!/usr/bin/env bash
# Event sizes near 2^63 in a snapshot with valid checksums (made by
# `tidemark import` of a trace): categories, diff and view add them with
# checked arithmetic, so two live blocks of 2^63-1 bytes never wrap to a
# negative total (nor trip the undefined-behaviour sanitizer).
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK

max=9223372036854775807
printf 'action,time_ns,id,size,category\nalloc,1,1,%s,\nalloc,2,2,%s,\nfree,3,1,%s,\nfree,4,2,%s,\n' \
  $max $max $max $max >"$work/big.csv"
expect 0 "import the trace" -- "$TIDEMARK" import -q -o "$work/big.tdm" "$work/big.csv"
for cmd in "categories $work/big.tdm" "diff $work/big.tdm $work/big.tdm" \
           "view -o $work/big.html $work/big.tdm"; do
  # shellcheck disable=SC2086
  "$TIDEMARK" $cmd >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" -le 1 ] || { fail "$cmd: exit $rc"; head -5 "$work/err"; }
  grep -q 'runtime error' "$work/err" && { fail "$cmd: undefined behaviour"; grep 'runtime error' "$work/err" | head -3; }
  grep -qE '(^| )-[0-9]' "$work/out" && { fail "$cmd: a negative amount"; grep -E '(^| )-[0-9]' "$work/out" | head -3; }
done
finish "event sizes near 2^63"
