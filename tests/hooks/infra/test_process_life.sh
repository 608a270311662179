#!/usr/bin/env bash
# Process life under the preload (fake vendor, test interposer):
#   fork=follow  the child records from an empty ring into its own file,
#                none of its parent's allocations among its own
#                (%p = its pid; "-PID" added when the template has no %p);
#   fork=stop    the child writes nothing;
#   forks while another thread allocates never deadlock the child;
#   exec         the new image starts afresh from TIDEMARK_CONF: one file,
#                the new image's events only; a shell that runs the program
#                in an exec'd child keeps the program's snapshot and, using
#                no device memory, writes none; a second program of the
#                same shell (process group) writes "-PID" beside the first;
#   threads      8 threads at once: every alloc and free is in the ring, the
#                final stats are zero, and a signal dump taken meanwhile
#                reads back;
#   dlclose      libtidemark.so pins itself once TIDEMARK_CONF records (the
#                exit snapshot is still written); unpinned, its unloading
#                leaves fork and threads working.
. "$(dirname "$0")/lib.sh"
: "${FAKE_APP:?}" "${FAKE_PRELOAD:?}" "${SNAPCHECK:?}" "${DLCLOSE_PROG:?}" "${LIBTIDEMARK:?}"
export FAKEV_CAPACITY=$((256 << 20))
run() { LD_PRELOAD=$PRE "$FAKE_APP" "$@"; }

# ---- fork=follow --------------------------------------------------------------------
mkdir f1
TIDEMARK_CONF="dump=$work/f1/%p.tdm" run fork > f1.out 2> f1.err || fail "follow: $(cat f1.out f1.err)"
parent=$(sed -n 's/^parent //p' f1.out)
child=$(sed -n 's/^child //p' f1.out)
if [[ ! -f f1/$parent.tdm || ! -f f1/$child.tdm ]]; then
    fail "follow: want f1/$parent.tdm and f1/$child.tdm, have: $(ls f1) $(cat f1.err)"
else
    events_of "f1/$parent.tdm" | grep '^alloc ' > p.txt
    printf 'alloc size=11111 stream=0x0\nalloc size=33333 stream=0x0\n' > want.txt
    diff -q want.txt p.txt > /dev/null || fail "follow: parent allocs: $(cat p.txt)"
    events_of "f1/$child.tdm" > c.txt
    grep -q '^alloc size=22222 ' c.txt || fail "follow: child's own alloc missing"
    # The child forgot the parent's allocations: its free of one goes to
    # the vendor unbooked, and its snapshot holds only its own 22222 B.
    grep -q 'size=11111 ' c.txt && fail "follow: the child booked the parent's block"
    [[ $(count_of "f1/$child.tdm" '^stats dev=0 allocated=22222/22222 ') -eq 1 ]] ||
        fail "follow: the child's stats: $("$SNAPCHECK" "f1/$child.tdm" | grep '^stats')"
    grep -qE '^alloc size=(11111|33333) ' c.txt && fail "follow: the child's ring was not cleared"
    grep -q "^header mode=observe pid=$child " <("$SNAPCHECK" "f1/$child.tdm") ||
        fail "follow: the child's header pid"
    [[ $(count_of "f1/$child.tdm" '^event alloc .* stack=fa_child_alloc<') -eq 1 ]] ||
        fail "follow: the child's stack"
    ok "fork=follow: parent $parent and child $child each wrote their own snapshot"
fi

mkdir f2
TIDEMARK_CONF="dump=$work/f2/run.tdm" run fork > f2.out 2> f2.err || fail "follow, no %p"
child=$(sed -n 's/^child //p' f2.out)
[[ -f f2/run.tdm && -f f2/run-$child.tdm && $(ls f2 | wc -l) -eq 2 ]] ||
    fail "follow without %p: want run.tdm and run-$child.tdm, have: $(ls f2)"
ok "fork=follow without %p: the child adds -PID"

# ---- fork=stop ---------------------------------------------------------------------------
mkdir f3
TIDEMARK_CONF="dump=$work/f3/%p.tdm,fork=stop" run fork > f3.out 2> f3.err || fail "stop"
parent=$(sed -n 's/^parent //p' f3.out)
[[ $(ls f3) == "$parent.tdm" ]] || fail "fork=stop: want only $parent.tdm, have: $(ls f3)"
# (A sanitizer build's leak checker may add a note in the child: the
# parent's tidemark thread, for SIGINT/SIGTERM snapshots, is not there.)
[[ $(grep -vc '^==[0-9]*==' f3.err) -eq 1 ]] || fail "fork=stop: want one line on stderr: $(cat f3.err)"
ok "fork=stop: the child wrote nothing"

# ---- fork while another thread allocates ---------------------------------------------
mkdir f4
TIDEMARK_CONF="dump=$work/f4/%p.tdm" timeout 120 env LD_PRELOAD="$PRE" \
    "$FAKE_APP" forkstress 40 > f4.out 2> f4.err
rc=$?
[[ $rc -eq 0 ]] || fail "forkstress: exit $rc (124 = a child hung): $(cat f4.out f4.err)"
[[ $(ls f4 | wc -l) -eq 1 ]] || fail "forkstress: children that _exit write nothing: $(ls f4)"
ok "40 forks while another thread allocates"

# ---- exec -------------------------------------------------------------------------------
mkdir ex
TIDEMARK_CONF="dump=$work/ex/%p.tdm" run exec > ex.out 2> ex.err || fail "exec: $(cat ex.out ex.err)"
pid=$(sed -n 's/^exec from //p' ex.out)
if [[ $(ls ex) != "$pid.tdm" ]]; then
    fail "exec: want ex/$pid.tdm only, have: $(ls ex)"
else
    events_of "ex/$pid.tdm" > e.txt
    grep -q 'size=77777' e.txt && fail "exec: the old image's history is in the new file"
    grep -q '^alloc size=1048576 ' e.txt || fail "exec: the new image's pattern is missing"
    grep -q "^header mode=observe pid=$pid " <("$SNAPCHECK" "ex/$pid.tdm") || fail "exec: pid"
    ok "exec: the new image recorded afresh under the same pid"
fi

# ---- a shell running the program: the program's snapshot kept ------------------------
mkdir sh
# The shell is not instrumented: no leak check for it in a sanitizer build.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
TIDEMARK_CONF="dump=$work/sh/run.tdm" LD_PRELOAD=$PRE \
    bash -c '"$0" pattern > /dev/null; echo "shell $$"' "$FAKE_APP" > sh.out 2> sh.err ||
    fail "shell: $(cat sh.out sh.err)"
shell=$(sed -n 's/^shell //p' sh.out)
if [[ $(ls sh | tr '\n' ' ') != "run.tdm " ]]; then
    fail "shell: want sh/run.tdm only (the shell used no device memory), have: $(ls sh) ($(cat sh.err))"
else
    events_of sh/run.tdm | grep -q '^alloc size=1048576 ' ||
        fail "shell: the program's snapshot was replaced"
    [[ $(grep -c 'wrote snapshot' sh.err) -eq 1 ]] || fail "shell: lines: $(cat sh.err)"
    ok "a shell exiting after its exec'd child keeps the child's run.tdm and writes nothing"
fi
# Two programs one after the other in one shell (one process group): the
# second finds the first's run.tdm and writes run-PID.tdm beside it.  In a
# session of its own (setsid -w), so that the group's leader, whose start
# dates the job, is the shell itself (the test's own group may have lost
# its leader: then the job's start is unknown and an earlier file is
# taken for an older run's, as docs/hooks.md says).
mkdir sh2
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
TIDEMARK_CONF="dump=$work/sh2/run.tdm" LD_PRELOAD=$PRE \
    setsid -w bash -c '"$0" pattern; "$0" pattern' "$FAKE_APP" > sh2.out 2> sh2.err ||
    fail "two programs: $(cat sh2.out sh2.err)"
if [[ $(ls sh2 | wc -l) -ne 2 || ! -f sh2/run.tdm ]]; then
    fail "two programs: want run.tdm and run-PID.tdm, have: $(ls sh2) ($(cat sh2.err))"
else
    for f in sh2/*.tdm; do
        events_of "$f" | grep -q '^alloc size=1048576 ' || fail "two programs: $f lacks the pattern"
    done
    ok "two programs of one shell: $(ls sh2 | tr '\n' ' ')"
fi
# A file a previous job left (another process group) is replaced as before.
# Dated a minute back: a process's start time is known to a clock tick
# (10 ms), so a file written within that tick of the new job's start
# could be its own.
touch -d '-1 minute' sh/run.tdm
TIDEMARK_CONF="dump=$work/sh/run.tdm" LD_PRELOAD=$PRE setsid -w "$FAKE_APP" pattern \
    > /dev/null 2> sh3.err || fail "rerun: $(cat sh3.err)"
[[ $(ls sh | wc -l) -eq 1 ]] || fail "rerun: an older run.tdm was not replaced: $(ls sh)"
ok "a new job replaces an older job's run.tdm"

# ---- many threads -----------------------------------------------------------------------
mkdir th
TIDEMARK_CONF="dump=$work/th/t.tdm,dump_on=exit+signal,max_entries=400000" \
    run threads 8 5000 > th.out 2> th.err || fail "threads: $(cat th.out th.err)"
if [[ ! -f th/t.tdm ]]; then
    fail "threads: no exit snapshot: $(cat th.err)"
else
    [[ $(count_of th/t.tdm '^event alloc ') -eq 40000 ]] || fail "threads: 40000 allocs"
    [[ $(count_of th/t.tdm '^event free_completed ') -eq 40000 ]] || fail "threads: 40000 frees"
    for i in 0 1 2 3 4 5 6 7; do
        n=$(count_of th/t.tdm "^event alloc .* stream=0x10$i .*stack=fa_worker<")
        [[ $n -eq 5000 ]] || fail "threads: thread $i has $n allocs on its stream, want 5000"
    done
    grep -qE '^stats dev=0 allocated=0/[0-9]+ reserved=0/[0-9]+ .* allocations=0 segments=0 ' \
        <("$SNAPCHECK" th/t.tdm) || fail "threads: final stats not zero"
    grep -q "dropped=0" <("$SNAPCHECK" th/t.tdm) || fail "threads: events dropped"
    ok "8 threads x 5000 pairs: every event, per-thread streams and stacks, zero at the end"
fi
if [[ -f th/t-1.tdm ]]; then
    "$SNAPCHECK" th/t-1.tdm > mid.txt || fail "threads: the signal snapshot does not read back"
    ok "a snapshot taken while 8 threads allocate reads back"
else
    fail "threads: no signal snapshot: $(ls th) $(cat th.err)"
fi

# ---- dlclose ---------------------------------------------------------------------------
out=$(TIDEMARK_CONF="dump=$work/dl.tdm" "$DLCLOSE_PROG" "$LIBTIDEMARK" pinned 2> dl.err)
rc=$?
[[ $rc -eq 0 && $out == pinned ]] || fail "dlclose pinned: exit $rc, '$out' $(cat dl.err)"
[[ -f dl.tdm ]] || fail "dlclose pinned: no exit snapshot: $(cat dl.err)"
[[ -f dl.tdm && $(count_of dl.tdm '^event alloc ') -eq 2 ]] || fail "dlclose pinned: 2 allocs"
out=$("$DLCLOSE_PROG" "$LIBTIDEMARK" api 2> dl2.err)
rc=$?
[[ $rc -eq 0 && ( $out == unloaded || $out == pinned ) ]] ||
    fail "dlclose api: exit $rc, '$out' $(cat dl2.err)"
ok "dlclose: pinned while TIDEMARK_CONF records; '$out' otherwise, and fork/threads go on"

finish
