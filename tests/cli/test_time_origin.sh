#!/usr/bin/env bash
# One time origin everywhere (issue 39, point 9): the same peak at the same
# time in summary, categories, gate, the Perfetto export and a folder's
# summary, counted from the recording's start and said so.  A program that
# waits 400 ms before its first allocation (an import, MPI_Init) made them
# disagree: summary +0.7 s (from the start), categories +0.27 s (from the
# first event), Perfetto from the first event, summary DIR from the
# earliest start of all the files.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD

mkdir -p dir
record "$work/dir/a.tdm" --steps 4 --compute-us 0 --startup-ms 400
# A second file recorded later: a folder's table gives each file's peak
# from its own start, as that file's own summary does.
record "$work/dir/b.tdm" --steps 4 --compute-us 0 --startup-ms 100

# summary: "peak at +X s", and where times count from.
expect 0 "summary" -- "$TIDEMARK" summary "$work/dir/a.tdm"
at=$(sed -nE 's/^  peak at +(\+[0-9.]+ s) .*/\1/p' "$work/out")
[ -n "$at" ] || fail "summary gives no peak time"
has out "times        from the recording's start"
case "$at" in +0.0*|+0.1*|+0.2*|+0.3*) fail "summary's peak $at is not after the 400 ms start-up";; esac

# categories: the same time, named.
expect 0 "categories" -- "$TIDEMARK" categories "$work/dir/a.tdm"
has out "at the peak: 404.09 MiB, step 1, phase optimizer, $at from the recording's start"

# gate: the same time, named.
expect 3 "gate" -- "$TIDEMARK" gate --max-peak 1MiB "$work/dir/a.tdm"
has_re out "^  when +\\$at from the recording's start \(event [0-9]+\)"

# Perfetto: the allocated counter's highest value at the same time.
if command -v python3 >/dev/null; then
  expect 0 "export perfetto" -- "$TIDEMARK" export --format perfetto -o "$work/a.json" "$work/dir/a.tdm"
  python3 - "$work/a.json" "$at" >"$work/py" 2>&1 <<'PY' || fail "perfetto: $(cat "$work/py")"
import json, sys
d = json.load(open(sys.argv[1]))
want = float(sys.argv[2].lstrip("+").split()[0])
c = [e for e in d["traceEvents"] if e.get("ph") == "C" and e.get("name", "").endswith(" allocated")]
peak = max(c, key=lambda e: (e["args"]["bytes"], -e["ts"]))
got = peak["ts"] / 1e6
if abs(got - want) > 0.0015:
    sys.exit("peak at %.4f s, summary says %s" % (got, sys.argv[2]))
if d["otherData"].get("time_origin") != "the recording's start":
    sys.exit("otherData.time_origin is %r" % d["otherData"].get("time_origin"))
PY
fi

# summary DIR: each row from its own start, said in the heading.
expect 0 "summary of the folder" -- "$TIDEMARK" summary "$work/dir"
has out "times      from each file's recording start"
has_re out "^ +- +[^ ]+ +0 +404\.09 MiB +\\$at +1 +optimizer .*dir/a\.tdm$"
expect 0 "summary b" -- "$TIDEMARK" summary "$work/dir/b.tdm"
at_b=$(sed -nE 's/^  peak at +(\+[0-9.]+ s) .*/\1/p' "$work/out")
expect 0 "summary of the folder" -- "$TIDEMARK" summary "$work/dir"
has_re out "^ +- +[^ ]+ +0 +404\.09 MiB +\\$at_b +1 +optimizer .*dir/b\.tdm$"

finish "time origin"
