#!/usr/bin/env bash
# `tidemark export --format sqlite` end to end (docs/export.md "sqlite"):
#   - a train_sim recording exported, then SQL over the database's own rows
#     must give what `tidemark summary` and `export --format json` say for
#     the same file: the number of events, the peak (recomputed from the
#     allocations' intervals, and its event), the bytes of each category at
#     the peak, and the sites live at the peak with their counts;
#   - the same for a ring that dropped events (allocations seeded at the
#     window start must still add up to the peak);
#   - the documented queries run; the file passes integrity_check, has
#     user_version 1; `-o -` writes the same bytes; an existing file is
#     not replaced without --force;
#   - in a build without libsqlite3 (TDM_HAVE_SQLITE off): one error line,
#     exit 4, no file.
# SQL runs through the sqlite3 command when installed, else python3's
# sqlite3 module.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

record "$work/run.tdm" --steps 3 --layers 2 --hidden 256 --batch 128 --compute-us 0

if [ "${TDM_HAVE_SQLITE:-OFF}" != ON ]; then
  expect 4 "sqlite not built in" -- "$TIDEMARK" export --format sqlite "$work/run.tdm"
  has err "--format sqlite is not built into this tidemark"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "more than one error line: $(cat "$work/err")"
  [ ! -e "$work/run.sqlite" ] || fail "a file was written"
  finish "export sqlite (not built in)"
  exit 0
fi

# sql DB QUERY: the rows, columns separated by '|'.
if command -v sqlite3 >/dev/null; then
  sql() { sqlite3 -batch "$1" "$2"; }
else
  need_python
  sql() {
    python3 -c 'import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in r))' "$1" "$2"
  }
fi
need_python

# The peak recomputed from the allocation rows alone: each adds its size
# at alloc_seq (-1: live when the window opened) and takes it back at
# free_seq; the first position of the highest running sum.
PEAK_SQL="WITH d AS (SELECT alloc_seq AS seq, size AS delta FROM allocations WHERE device = 0
                   UNION ALL SELECT free_seq, -size FROM allocations
                   WHERE device = 0 AND free_seq IS NOT NULL),
          s AS (SELECT seq, sum(delta) AS delta FROM d GROUP BY seq),
          r AS (SELECT seq, sum(delta) OVER (ORDER BY seq) AS bytes FROM s)
          SELECT bytes, seq FROM r ORDER BY bytes DESC, seq LIMIT 1"

# check NAME MIN: NAME.tdm's export NAME.sqlite against summary and json;
# at least MIN categories live at the peak.
check() {
  local n=$1 min=$2 db="$work/$1.sqlite"
  expect 0 "export sqlite $n" -- "$TIDEMARK" export --format sqlite -o "$db" "$work/$n.tdm"
  has err "wrote $db (sqlite)"
  expect 0 "export json $n" -- "$TIDEMARK" export --format json -q -o "$work/$n.json" "$work/$n.tdm"
  expect 0 "summary $n" -- "$TIDEMARK" summary --top 1000 "$work/$n.tdm"
  cp "$work/out" "$work/$n.summary"

  [ "$(sql "$db" 'PRAGMA integrity_check')" = ok ] || fail "$n: integrity_check"
  [ "$(sql "$db" 'PRAGMA user_version')" = 1 ] || fail "$n: user_version"

  # Events: the table's rows, as summary counts them.
  local events want
  events=$(sql "$db" 'SELECT count(*) FROM events')
  want=$(sed -nE 's/^events +([0-9]+) recorded.*/\1/p' "$work/$n.summary")
  [ -n "$want" ] && [ "$events" = "$want" ] || fail "$n: $events events in the database, summary says '$want'"
  [ "$(sql "$db" 'SELECT event_count FROM snapshot')" = "$want" ] || fail "$n: snapshot.event_count"

  # The peak and its event.
  local peak peak_seq
  IFS='|' read -r peak peak_seq <<<"$(sql "$db" "$PEAK_SQL")"
  want=$(sed -nE 's/^  peak allocated .*\(([0-9]+) B\).*/\1/p' "$work/$n.summary")
  [ -n "$want" ] && [ "$peak" = "$want" ] || fail "$n: SQL peak $peak, summary says '$want'"
  want=$(sed -nE 's/^  peak at .*\(event ([0-9]+)\).*/\1/p' "$work/$n.summary")
  [ "$peak_seq" = "$want" ] || fail "$n: SQL peak at event $peak_seq, summary says '$want'"
  [ "$(sql "$db" 'SELECT peak_allocated, peak_seq FROM devices WHERE ordinal = 0')" = "$peak|$peak_seq" ] ||
    fail "$n: devices row disagrees with the allocations"

  # Bytes per category at the peak: the documented query against the
  # json export's categories_at_peak (which categories uses too).
  sql "$db" "SELECT category, sum(size) FROM allocations
             WHERE device = 0 AND alloc_seq <= $peak_seq AND (free_seq IS NULL OR free_seq > $peak_seq)
             GROUP BY category ORDER BY category" >"$work/$n.cats.sql"
  sql "$db" "SELECT category, sum(size) FROM allocations_at_peak WHERE device = 0
             GROUP BY category ORDER BY category" >"$work/$n.cats.view"
  cmp -s "$work/$n.cats.sql" "$work/$n.cats.view" || fail "$n: view allocations_at_peak differs"
  python3 - "$work/$n.json" "$work/$n.cats.sql" "$min" <<'EOF' || fail "$n: categories at the peak"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]["categories_at_peak"]
want = {k: v for k, v in d.items() if v}
got = {l.split("|")[0]: int(l.split("|")[1]) for l in open(sys.argv[2]).read().split()}
if got != want or len(want) < int(sys.argv[3]):
    sys.exit(f"sql {got} != json {want}")
EOF
  # The events carry their allocation's category: alloc and free events
  # alone (plus what was live when the window opened) give the same bytes.
  [ "$(sql "$db" "SELECT category, sum(CASE action WHEN 'alloc' THEN size ELSE -size END)
                  + coalesce((SELECT sum(size) FROM allocations a WHERE a.alloc_seq = -1
                              AND a.category = e.category AND a.device = 0), 0)
                  FROM events e WHERE device = 0 AND seq <= $peak_seq
                  AND action IN ('alloc', 'free_completed') GROUP BY category ORDER BY category")" \
    = "$(cat "$work/$n.cats.sql")" ] || fail "$n: event categories do not add up to the peak's"

  # Sites live at the peak (docs' query), against summary's list.
  sql "$db" "SELECT count(*), CASE WHEN a.stack_of_free THEN 'freed at ' ELSE '' END || s.function,
             s.line FROM allocations_at_peak a
             JOIN sites s ON s.stack_id = a.stack_id WHERE a.device = 0
             GROUP BY a.stack_id ORDER BY sum(a.size) DESC" | sort >"$work/$n.sites.sql"
  sed -nE 's/^ +[0-9]+ +[0-9.]+ [KMGT]?i?B +[0-9.]+% +([0-9]+)  ((freed at )?[A-Za-z_]+) \([^:]+:([0-9]+)\)$/\1|\2|\4/p' \
    "$work/$n.summary" | sort >"$work/$n.sites.summary"
  [ -s "$work/$n.sites.sql" ] && cmp -s "$work/$n.sites.sql" "$work/$n.sites.summary" ||
    { fail "$n: sites at the peak differ"; diff "$work/$n.sites.sql" "$work/$n.sites.summary" | head; }
}

check run 6
[ "$(sql "$work/run.sqlite" 'SELECT dropped_events FROM snapshot')" = 0 ] || fail "run dropped events"

# A ring too small for the run: the window opens with memory live.
record "$work/ring.tdm,max_entries=60" --steps 3 --layers 2 --hidden 256 --batch 128 --compute-us 0
check ring 2
[ "$(sql "$work/ring.sqlite" 'SELECT dropped_events > 0 FROM snapshot')" = 1 ] || fail "ring dropped nothing"
[ "$(sql "$work/ring.sqlite" 'SELECT count(*) > 0 FROM allocations WHERE alloc_seq = -1')" = 1 ] ||
  fail "ring: no allocation seeded at the window start"

# Every table the docs list, with rows where train_sim makes them.
for t in snapshot categories phases devices frames stacks events allocations timeline segments blocks; do
  [ "$(sql "$work/run.sqlite" "SELECT count(*) > 0 FROM $t")" = 1 ] || fail "table $t is empty"
done
[ "$(sql "$work/run.sqlite" "SELECT count(*) FROM blocks WHERE state != 'inactive' AND category IS NULL")" = 0 ] ||
  fail "a live block without its allocation's category"
# Bytes per category over time (docs' query) ends at what is live at the end.
sql "$work/run.sqlite" "WITH c AS (SELECT device, alloc_seq AS seq, category, size AS delta FROM allocations
                        UNION ALL SELECT device, free_seq, category, -size FROM allocations
                        WHERE free_seq IS NOT NULL)
                        SELECT seq, category, sum(sum(delta)) OVER (PARTITION BY device, category ORDER BY seq)
                        FROM c GROUP BY device, category, seq" >"$work/over_time"
[ "$(awk -F'|' '{last[$2] = $3} END {s = 0; for (k in last) s += last[k]; print s}' "$work/over_time")" = \
  "$(sql "$work/run.sqlite" 'SELECT end_allocated FROM devices WHERE ordinal = 0')" ] ||
  fail "bytes per category over time do not end at the live bytes"

# Standard output gets the same database; an existing file is kept.
"$TIDEMARK" export --format sqlite -o - "$work/run.tdm" >"$work/stdout.sqlite" 2>"$work/err" ||
  fail "export -o -: $(cat "$work/err")"
cmp -s "$work/stdout.sqlite" "$work/run.sqlite" || fail "-o - differs from the file"
expect 1 "existing output" -- "$TIDEMARK" export --format sqlite -o "$work/run.sqlite" "$work/run.tdm"
has err "exists; use --force"
expect 0 "--force" -- "$TIDEMARK" export --format sqlite --force -q -o "$work/run.sqlite" "$work/run.tdm"
[ -z "$(ls "$work" | grep '\.tmp\.')" ] || fail "a temporary was left: $(ls "$work")"

finish "export sqlite"
