#!/usr/bin/env bash
# No text from a snapshot, a file name or the configuration reaches a
# terminal raw: summary's config line and file name, and a bad
# TIDEMARK_CONF's message, show C0 controls, DEL, UTF-8 C1 controls
# (U+009B is a one-byte CSI) and invalid UTF-8 as \xNN; valid UTF-8
# (a Greek letter) stays as it is.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM

# raw FILE WHAT: FILE holds none of the bytes a terminal acts on.
raw() {
  if LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xff' "$work/$1"; then
    fail "$2: control bytes reached the output"
    LC_ALL=C grep -naP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xff' "$work/$1" | od -c | head -5
  fi
}

evil=$'\e]0;owned\a\xc2\x9b2J\xff\xce\xbb'
record "$work/t.tdm,hide=^x${evil}$" --steps 2 --compute-us 0
cp "$work/t.tdm" "$work/a${evil}.tdm"
"$TIDEMARK" summary "$work/a${evil}.tdm" >"$work/out" 2>"$work/err" || { fail "summary"; cat "$work/err"; }
raw out "summary of a crafted snapshot"
has out 'x\x1b]0;owned\x07\xc2\x9b2J\xff'
has out $'\xce\xbb'
"$TIDEMARK" summary --frames 1 - <"$work/t.tdm" >"$work/out" 2>"$work/err" || fail "summary -"
raw out "summary from standard input"

# The library's message for a bad TIDEMARK_CONF.
TIDEMARK_CONF=$'bogus\xc2\x9b2J\xff=1' "$TRAIN_SIM" --steps 1 --compute-us 0 >"$work/out" 2>"$work/err" ||
  fail "a bad TIDEMARK_CONF stopped the program"
grep -q . "$work/err" || fail "no message for a bad TIDEMARK_CONF"
raw err "the message for a bad TIDEMARK_CONF"

# The library's "wrote snapshot to PATH" for a dump path with controls in it.
TIDEMARK_CONF="dump=$work/d${evil}.tdm" "$TRAIN_SIM" --steps 1 --compute-us 0 >"$work/out" 2>"$work/err" ||
  fail "a dump path with controls stopped the program"
grep -q "wrote snapshot to" "$work/err" || { fail "no 'wrote snapshot' line"; cat "$work/err"; }
raw err "the library's 'wrote snapshot to PATH'"
[ -f "$work/d${evil}.tdm" ] || fail "the snapshot is not at the path asked for"
finish "terminal escapes"
