#!/usr/bin/env bash
# The spill file's space is reserved ahead of the ring by the signal
# watcher (docs/spill.md, "Cost"): with the watcher (the default: it writes
# the exit snapshot on SIGINT/SIGTERM) the file has a window of several MiB
# reserved beyond what was written; without it (stop_signals=off, no
# dump on signal: no watcher) the writers reserve as they go, 1 MiB at a
# time, and nothing more.
. "${BASH_SOURCE[0]%/*}/lib.sh" SPILL_CRASH_PROG
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"

with=$(TIDEMARK_CONF="dump=$work/a.tdm,spill=$work/a.spill" "$SPILL_CRASH_PROG" ahead "$work/a.spill" 2>"$work/a.err") ||
  fail "with the watcher: $(cat "$work/a.err")"
without=$(TIDEMARK_CONF="dump=$work/b.tdm,spill=$work/b.spill,stop_signals=off" \
  "$SPILL_CRASH_PROG" ahead "$work/b.spill" 2>"$work/b.err") ||
  fail "without the watcher: $(cat "$work/b.err")"
echo "allocated to the spill file: with the watcher $with bytes, without $without"
[ -n "$with" ] && [ -n "$without" ] || fail "no sizes: '$with' '$without'"
# 40k events are 2.5 MiB of ring; the window is 8 MiB past the newest.
[ "$with" -ge $((without + 4 * 1024 * 1024)) ] ||
  fail "the watcher reserved nothing ahead: $with bytes vs $without"
# Both snapshots were written (and the spill files removed at exit).
[ -s "$work/a.tdm" ] && [ -s "$work/b.tdm" ] || fail "exit snapshots missing"
[ ! -e "$work/a.spill" ] && [ ! -e "$work/b.spill" ] || fail "spill file left behind"
finish "the watcher reserves the spill file ahead of the ring"
