#!/usr/bin/env bash
# bench/long_history.sh: a long job's history, stored and read back.
#
# Records `train_sim --compute-us 0 --steps STEPS` (default 70000: about
# 9.5M events) with a ring that holds all of it, then prints the file's
# bytes per event (target: at most 4) and, for each command a user runs on
# such a file (summary, categories, gate, diff, view), its wall time and
# its peak resident memory, read by GNU time (targets: 256 MiB, view 512
# MiB).  Prints a table; not a test.
#
#   bench/long_history.sh [STEPS] [BUILD]     (BUILD: default build-release)
#
# Needs /usr/bin/time (Debian's `time` package).  The snapshot and the
# view page go to a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-70000}
build=${2:-build-release}
tidemark=$build/tidemark
train_sim=$build/examples/train_sim
for f in "$tidemark" "$train_sim"; do
  [ -x "$f" ] || { echo "long_history: no $f (build first)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "long_history: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tdm-long-history.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A ring of 140 entries per step (train_sim makes about 135 events a step)
# holds every event of the run.
entries=$((steps * 140 + 100000))
t0=$(date +%s.%N)
TIDEMARK_CONF="max_entries=$entries,dump=$work/long.tdm" \
  "$train_sim" --compute-us 0 --steps "$steps" >"$work/train.log" 2>&1
t1=$(date +%s.%N)
events=$(sed -n 's/.*(\([0-9]*\) events).*/\1/p' "$work/train.log" | tail -1)
bytes=$(stat -c %s "$work/long.tdm")
[ -n "$events" ] && [ "$events" -gt 0 ] || { cat "$work/train.log"; exit 1; }
printf 'bench/long_history: train_sim --steps %s: %s events, recorded in %.1f s\n\n' \
  "$steps" "$events" "$(echo "$t1 - $t0" | bc)"
printf '%-12s %14s %12s %10s\n' "file" "bytes" "B/event" "target"
printf '%-12s %14s %12.2f %10s\n\n' "long.tdm" "$bytes" "$(echo "scale=4; $bytes / $events" | bc)" "<= 4"

printf '%-12s %10s %14s %12s %10s\n' "command" "s" "peak RSS MiB" "B/event" "target MiB"
run() { # NAME TARGET ARGS...
  local name=$1 target=$2 rc=0
  shift 2
  /usr/bin/time -f '%e %M' -o "$work/time" "$tidemark" "$@" >/dev/null 2>"$work/err" || rc=$?
  # gate exits 3 when a gate fails; anything else above 0 is an error
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    printf '%-12s failed (exit %s): %s\n' "$name" "$rc" "$(head -1 "$work/err")"
    return
  fi
  read -r secs kib <"$work/time"
  printf '%-12s %10.2f %14.1f %12.1f %10s\n' "$name" "$secs" "$(echo "scale=1; $kib / 1024" | bc)" \
    "$(echo "scale=1; $kib * 1024 / $events" | bc)" "$target"
}
run summary 256 summary "$work/long.tdm"
run categories 256 categories "$work/long.tdm"
run gate 256 gate --max-peak 1G "$work/long.tdm"
run diff 256 diff "$work/long.tdm" "$work/long.tdm"
run view 512 view --force -o "$work/long.html" "$work/long.tdm"
