#!/usr/bin/env bash
# `tidemark run` reports: a failing gate leads with the verdict and shows
# the top sites once, in at most 40 lines of tidemark's own (no whole
# summary before it); passing gates keep the summary; nothing measured (no
# process used device memory: none writes a snapshot) is exit 5 with
# one line, unless --allow-empty; a --device N the snapshot lacks is
# input.h's wording and exit 2; a size without a unit is read as bytes
# with a warning.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM LIBTIDEMARK
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
export TIDEMARK_PRELOAD=

# The program's own output goes to files of its own, so that $work/err
# holds tidemark's lines only.
printf '#!/bin/sh\nexec "%s" "$@" >>"%s/prog.out" 2>>"%s/prog.err"\n' \
  "$TRAIN_SIM" "$work" "$work" >"$work/sim"
chmod +x "$work/sim"

# ---- a failing gate: the verdict first, at most 40 lines ------------------------------
expect 3 "max-peak 1KiB" -- "$TIDEMARK" run -o "$work/f1" --max-peak 1KiB -- "$work/sim"
has prog.err "tidemark: wrote snapshot to $work/f1/"   # the program's, not in err
lacks err "tidemark: wrote snapshot"
snap=$(ls "$work"/f1/*.tdm)
# (The note that the preload library is left out comes before anything.)
# (So does the line that says, for a job's log, where snapshots and
# spills go.)
grep -v -e '^tidemark run: note: TIDEMARK_PRELOAD is empty' -e '^tidemark run: snapshots go into ' \
  "$work/err" >"$work/report"
grep -qE '^max-peak FAILED: peak [0-9.]+ MiB > limit 1.00 KiB \([0-9.]+ MiB, [0-9.]+% over\)$' \
  <(head -n 1 "$work/report") || fail "the first line is not the verdict: $(head -n 1 "$work/report")"
sed -n 2p "$work/report" | grep -qxF "  on         $snap, device 0 (sim0)" ||
  fail "the second line does not name the snapshot and device: $(sed -n 2p "$work/report")"
has err "  limit      1.00 KiB (1024 B)"; has err "  when       +"
lacks err "tidemark summary of"          # no whole summary before the verdict
[ "$(grep -c 'backward_layer (train_sim.c:' "$work/err")" -eq 1 ] || fail "a site shown more than once"
[ "$(grep -c 'device_alloc' "$work/err")" -le 5 ] || fail "more than 5 sites"
has err "gates: 0 passed, 1 failed"
has err "tidemark run: 1 snapshot in $work/f1"; has err "tidemark summary $snap"
n=$(wc -l <"$work/err")
[ "$n" -le 40 ] || fail "a failing gate prints $n lines of tidemark's own (40 at most)"
echo "lines of tidemark's own output, failing max-peak on train_sim: $n"

# ---- passing gates keep the summary ------------------------------------------------
expect 0 "max-peak 1GiB" -- "$TIDEMARK" run -o "$work/p1" --max-peak 1GiB -- "$work/sim"
has err "tidemark summary of $work/p1/"; has err "gates: 1 passed, 0 failed"
grep -qE '^PASS +max-peak ' "$work/err" || fail "no PASS line"

# ---- nothing measured: exit 5, one line, unless --allow-empty -----------------------
expect 5 "no snapshot" -- "$TIDEMARK" run -o "$work/e1" --max-peak 1GiB -- true
has err "tidemark run: nothing measured: no snapshot was written"
lacks err "gates:"
expect 0 "no snapshot, --allow-empty" -- "$TIDEMARK" run -o "$work/e1" --allow-empty --max-peak 1GiB -- true
has err "nothing measured"
# The command's own failure is the likelier cause: its code wins.
expect 7 "no snapshot, the command failed" -- "$TIDEMARK" run -o "$work/e1" --max-peak 1GiB -- sh -c 'exit 7'
# --command-failed takes 6 and up now: 5 is tidemark's.
expect 1 "--command-failed 5" -- "$TIDEMARK" run --command-failed 5 -- true
has err "from 6 to 125"
if [ -n "${TDM_SANITIZE:-}" ]; then
  echo "skip: preloading libtidemark.so in a sanitizer build"
else
  # A process that loads tidemark but never touches a device writes nothing.
  TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 5 "only processes that used no device memory" -- \
    "$TIDEMARK" run -o "$work/e2" --max-peak 1GiB -- bash -c 'true; true'
  has err "tidemark run: nothing measured: no process of the command used device memory"
  [ -z "$(ls "$work/e2")" ] || fail "a process that used no device memory wrote $(ls "$work/e2")"
  lacks err "SKIP"
  [ "$(grep -c '' "$work/err")" -le 3 ] || fail "nothing measured takes more than 3 lines"
  if command -v python3 >/dev/null; then
    TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 5 "python3 -c print" -- "$TIDEMARK" run -o "$work/e3" \
      --max-peak 1GiB -- python3 -c 'print(1)'
    has out "1"; has err "nothing measured"; lacks err "wrote snapshot"
    [ -z "$(ls "$work/e3")" ] || fail "python3 -c 'print(1)' wrote $(ls "$work/e3" | wc -l) snapshots"
    TIDEMARK_PRELOAD="$LIBTIDEMARK" expect 0 "python3 -c print, --allow-empty" -- "$TIDEMARK" run \
      -o "$work/e3" --allow-empty --max-peak 1GiB -- python3 -c 'print(1)'
    has err "nothing measured"
  fi
fi

# ---- --device N the snapshot lacks ---------------------------------------------------
expect 2 "--device 3" -- "$TIDEMARK" run -o "$work/d1" --device 3 --max-peak 1GiB -- "$work/sim"
snap=$(ls "$work"/d1/*.tdm)
has err "tidemark run: $snap has no device 3 (its devices: 0)"
lacks err "skipped"

# ---- sizes without a unit -------------------------------------------------------------
expect 3 "--max-peak 12" -- "$TIDEMARK" run -o "$work/u1" --max-peak 12 -- "$work/sim"
has err "tidemark run: --max-peak 12 has no unit: read as 12 B (did you mean 12GiB?)"
has err "limit 12 B"
expect 0 "--max-leak 0, no warning" -- "$TIDEMARK" run -o "$work/u2" --allow-empty --max-leak 0 -- true
lacks err "no unit"
expect 1 "a bad size is still refused" -- "$TIDEMARK" run --max-peak 12x -- true
has err "--max-peak needs a size"

finish "tidemark run report"
