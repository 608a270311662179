#!/usr/bin/env bash
# The files tidemark writes (docs/promises.md): snapshots and exports are
# 0600 whatever the umask (file_mode= changes the snapshots'); a target
# that is a symbolic link, FIFO, device or folder is refused and left as
# it was; temporaries of killed dumps are removed by the next dump into
# their folder; a file-size limit or a full disk during the exit dump
# gives one line and the program's own exit status, never a kill.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

run_sim() { # CONF [STEPS]: train_sim, quick steps (a 3 KiB snapshot; 1000: 21 KiB), output in $work/sim.log
  TIDEMARK_CONF="$1" "$TRAIN_SIM" --steps "${2:-2}" --layers 2 --hidden 64 --batch 8 \
    --compute-us 0 >"$work/sim.log" 2>&1
}

# ---- permissions -------------------------------------------------------------
umask 000
run_sim "dump=$work/open.tdm" || fail "train_sim failed"
[ "$(stat -c %a "$work/open.tdm")" = 600 ] ||
  fail "snapshot under umask 000 is $(stat -c %a "$work/open.tdm"), not 600"
run_sim "dump=$work/group.tdm,file_mode=0640" || fail "train_sim file_mode=0640 failed"
[ "$(stat -c %a "$work/group.tdm")" = 640 ] || fail "file_mode=0640 gave $(stat -c %a "$work/group.tdm")"
run_sim "dump=$work/bad.tdm,file_mode=999" || fail "a bad file_mode stopped the program"
grep -q "file_mode" "$work/sim.log" || fail "a bad file_mode was not named"
[ "$(grep -c . "$work/sim.log")" -ge 1 ] && [ ! -e "$work/bad.tdm" ] ||
  fail "a bad file_mode still recorded"
expect 0 "export under umask 000" -- "$TIDEMARK" export -q --format json -o "$work/e.json" "$work/open.tdm"
[ "$(stat -c %a "$work/e.json")" = 600 ] || fail "export is $(stat -c %a "$work/e.json"), not 600"
expect 0 "import under umask 000" -- "$TIDEMARK" export -q --format pytorch -o "$work/p.pickle" "$work/open.tdm"
expect 0 "import" -- "$TIDEMARK" import -q -o "$work/back.tdm" "$work/p.pickle"
[ "$(stat -c %a "$work/back.tdm")" = 600 ] || fail "import wrote $(stat -c %a "$work/back.tdm"), not 600"
umask 022

# ---- targets that are not regular files -----------------------------------------
echo keep >"$work/victim"
ln -s "$work/victim" "$work/link.tdm"
mkfifo "$work/fifo.tdm"
mkdir "$work/dir.tdm"
# Older than this job: a name this job's processes did not take (else the
# dump would go beside it, "-PID", as for a sibling's snapshot).
touch -d '1 hour ago' "$work/victim" "$work/fifo.tdm" "$work/dir.tdm"
for t in link fifo dir; do
  run_sim "dump=$work/$t.tdm" || fail "dump=$t.tdm: the program failed"
  grep -q "cannot write snapshot to $work/$t.tdm: it is a" "$work/sim.log" ||
    { fail "dump=$t.tdm not refused with a reason"; cat "$work/sim.log"; }
done
[ -L "$work/link.tdm" ] && [ "$(cat "$work/victim")" = keep ] || fail "the symbolic link was replaced"
[ -p "$work/fifo.tdm" ] || fail "the FIFO was replaced"
[ -d "$work/dir.tdm" ] || fail "the folder was replaced"
ls "$work" | grep -q '\.tmp\.' && fail "a refused dump left a temporary: $(ls "$work")"

for t in link fifo; do
  expect 1 "export -o $t --force" -- "$TIDEMARK" export -q --force --format json -o "$work/$t.tdm" "$work/open.tdm"
  has err "cannot write $work/$t.tdm: it is a"
done
[ -L "$work/link.tdm" ] && [ -p "$work/fifo.tdm" ] || fail "export replaced a link or FIFO"
# A device node of our own (root only), never /dev/full itself: a
# tidemark that replaced devices would destroy it.
if [ "$(id -u)" = 0 ] && mknod "$work/full.dev" c 1 7 2>/dev/null; then
  expect 1 "export -o DEVICE --force" -- "$TIDEMARK" export -q --force --format json -o "$work/full.dev" "$work/open.tdm"
  has err "it is a FIFO, device or socket"
  expect 1 "view -o DEVICE --force" -- "$TIDEMARK" view --force -o "$work/full.dev" "$work/open.tdm"
  has err "it is a FIFO, device or socket"
  [ -c "$work/full.dev" ] || fail "the device node was replaced"
else
  echo "not root: no device node to aim at"
fi
# -o - writes to standard output; a full one is said.
if [ -c /dev/full ]; then
  "$TIDEMARK" export -q --format json -o - "$work/open.tdm" >/dev/full 2>"$work/err"
  [ $? -ne 0 ] || fail "export -o - into /dev/full succeeded"
fi

# ---- temporaries of killed dumps --------------------------------------------------
mkdir "$work/stale"
sh -c 'exit 0' & dead=$!
wait $dead
printf '\x93\xa8tidemark partial' >"$work/stale/a.tdm.tmp.$dead.0"   # a killed dump's
: >"$work/stale/b.tdm.tmp.$dead.1"                                  # killed before its first write
printf 'not ours' >"$work/stale/c.tdm.tmp.$dead.2"                  # someone else's file
printf '\x93\xa8tidemark partial' >"$work/stale/d.tdm.tmp.$$.3"     # a live process's
printf '\x93\xa8tidemark partial' >"$work/stale/e.tdm.tmp.$dead.4"  # recent: maybe another host's
touch -d '5 minutes ago' "$work/stale/a.tdm.tmp.$dead.0" "$work/stale/b.tdm.tmp.$dead.1" \
  "$work/stale/c.tdm.tmp.$dead.2" "$work/stale/d.tdm.tmp.$$.3"
run_sim "dump=$work/stale/new.tdm" || fail "dump into stale/ failed"
[ -s "$work/stale/new.tdm" ] || fail "no stale/new.tdm"
for f in a.tdm.tmp.$dead.0 b.tdm.tmp.$dead.1; do
  [ ! -e "$work/stale/$f" ] || fail "stale temporary $f was not removed"
done
for f in c.tdm.tmp.$dead.2 d.tdm.tmp.$$.3 e.tdm.tmp.$dead.4; do
  [ -e "$work/stale/$f" ] || fail "$f was removed"
done

# ---- a file-size limit during the exit dump --------------------------------------
(ulimit -f 8; run_sim "dump=$work/big.tdm" 1000)
rc=$?
[ "$rc" = 0 ] || fail "under ulimit -f 8 the program exited $rc (153 = killed by SIGXFSZ)"
[ "$(grep -c 'cannot write snapshot' "$work/sim.log")" = 1 ] || { fail "no one line"; cat "$work/sim.log"; }
grep -q "file-size limit" "$work/sim.log" || fail "the line does not name the file-size limit"
[ ! -e "$work/big.tdm" ] || fail "a partial big.tdm was left"
ls "$work" | grep -q '\.tmp\.' && fail "a temporary was left"
# The program's own SIGXFSZ stays as it was outside the dump: still fatal.
(ulimit -f 1; exec bash -c 'head -c 4096 /dev/zero >"$1"' _ "$work/plain") 2>/dev/null
rc=$?
[ "$rc" = 153 ] || fail "a plain write past ulimit -f exited $rc, not 153"

# ---- a full disk during the exit dump (root only: a tiny tmpfs) --------------------
if [ "$(id -u)" = 0 ] && mkdir -p "$work/full" && mount -t tmpfs -o size=16k tmpfs "$work/full" 2>/dev/null; then
  run_sim "dump=$work/full/snap.tdm" 1000
  rc=$?
  umount "$work/full"
  [ "$rc" = 0 ] || fail "on a full disk the program exited $rc"
  [ "$(grep -c 'cannot write snapshot' "$work/sim.log")" = 1 ] || { fail "full disk: no one line"; cat "$work/sim.log"; }
  grep -q "no space left" "$work/sim.log" || fail "full disk: the line does not say so"
else
  echo "not root or no tmpfs: the full-disk case is not checked"
fi
finish "safe files"
