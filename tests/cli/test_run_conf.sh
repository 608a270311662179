#!/usr/bin/env bash
# `tidemark run` checks the TIDEMARK_CONF it will give the command (--conf
# values, an inherited TIDEMARK_CONF, its own items) with libtidemark.so's
# tdm_conf_check before the command starts: a bad one is the library's
# own line, exit 1, and the command does not run. Also the items run adds
# (dump_on with signal, the dump signal) and a user's own dump_on/signal.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM LIBTIDEMARK
# The conf the command printed, without the spill folder run adds (its
# name has run's pid and start time): $work/out.ns.
nospill() {
  grep -qE ',spill=[^],]*/run-[0-9]+-[0-9]+-[^],/]+/[^],/]*-%p\.spill' "$work/out" ||
    fail "run gave the command no spill folder of its own: $(cat "$work/out")"
  sed -E 's#,spill=[^],]*##' "$work/out" >"$work/out.ns"
}
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
export TIDEMARK_PRELOAD=

# library_says CONF: the line loading libtidemark.so prints for CONF,
# without "tidemark: TIDEMARK_CONF: " and "; recording is off".
library_says() {
  TIDEMARK_CONF="$1" "$TRAIN_SIM" --steps 1 2>&1 >/dev/null | grep '^tidemark: TIDEMARK_CONF: ' |
    head -n 1 | sed -e 's/^tidemark: TIDEMARK_CONF: //' -e 's/; recording is off$//'
}

if ! nm -D --defined-only "$LIBTIDEMARK" 2>/dev/null | grep -qw tdm_conf_check; then
  echo "skipped: $LIBTIDEMARK has no tdm_conf_check"
  exit 77
fi

for conf in record=al DUMP=x "max_entries=0" "dump_on=exit+sigal"; do
  said=$(library_says "$conf")
  [ -n "$said" ] || { fail "the library accepts $conf?"; continue; }
  expect 1 "--conf $conf" -- "$TIDEMARK" run -o "$work/c1" --conf "$conf" -- touch "$work/ran"
  has err "tidemark run: --conf $conf: $said"
  has err "tidemark help run"
  [ ! -e "$work/ran" ] || fail "--conf $conf: the command ran"
  [ ! -e "$work/c1" ] || fail "--conf $conf: the output folder was made"
done
expect 1 "--conf DUMP=x" -- "$TIDEMARK" run --conf DUMP=x -- true
has err "unknown key 'DUMP' (did you mean 'dump'?"

# An inherited TIDEMARK_CONF is checked too, and named as such.
said=$(library_says "recrod=all")
TIDEMARK_CONF="recrod=all" expect 1 "bad TIDEMARK_CONF" -- "$TIDEMARK" run -o "$work/c2" -- touch "$work/ran"
has err "tidemark run: TIDEMARK_CONF (from the environment): $said"
has err "did you mean 'record'?"
[ ! -e "$work/ran" ] || fail "bad TIDEMARK_CONF: the command ran"
# The check loads the library into tidemark with TIDEMARK_CONF out of its
# environment: no snapshot of tidemark itself anywhere.
TIDEMARK_CONF="dump=$work/self.tdm" expect 0 "good TIDEMARK_CONF" -- "$TIDEMARK" run -o "$work/c3" -- true
[ ! -e "$work/self.tdm" ] || fail "tidemark recorded itself"

# Good settings run as before.
expect 0 "good --conf" -- "$TIDEMARK" run -o "$work/c4" --conf max_entries=64 -- "$TRAIN_SIM" --steps 1
has err "ring of 64)"

# ---- what run adds: dump_on=...+signal and its signal ---------------------------------
expect 0 "the conf the command sees" -- "$TIDEMARK" run -o "$work/c5" -- sh -c 'echo "[$TIDEMARK_CONF]"'
nospill
has out.ns "[dump=$work/c5/tidemark-%h-%p.tdm,dump_on=exit+signal,signal=SIGRTMAX-5,stop_signals=off]"
expect 0 "a user's dump_on and signal kept" -- "$TIDEMARK" run -o "$work/c5" \
  --conf dump_on=oom,signal=usr1 -- sh -c 'echo "[$TIDEMARK_CONF]"'
nospill
has out.ns "[dump_on=oom,signal=usr1,dump=$work/c5/tidemark-%h-%p.tdm,dump_on=oom+signal,stop_signals=off]"
expect 0 "dump_on with signal already" -- "$TIDEMARK" run -o "$work/c5" \
  --conf dump_on=exit+signal -- sh -c 'echo "[$TIDEMARK_CONF]"'
nospill
has out.ns "[dump_on=exit+signal,dump=$work/c5/tidemark-%h-%p.tdm,signal=SIGRTMAX-5,stop_signals=off]"
expect 0 "dump_on=none" -- "$TIDEMARK" run -o "$work/c5" --conf dump_on=none -- sh -c 'echo "[$TIDEMARK_CONF]"'
nospill
has out.ns "[dump_on=none,dump=$work/c5/tidemark-%h-%p.tdm]"
# a spill of the user's own is kept, and run adds none
expect 0 "a user's spill" -- "$TIDEMARK" run -o "$work/c5" --conf "spill=$work/my-%p.spill" -- \
  sh -c 'echo "[$TIDEMARK_CONF]"'
has out "[spill=$work/my-%p.spill,dump=$work/c5/tidemark-%h-%p.tdm,"
lacks out "/run-"

finish "tidemark run --conf checks"
