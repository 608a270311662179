#!/usr/bin/env bash
# libtidemark.so's ABI line (cmake/libtidemark.map, include/tidemark_private.h):
#   - TIDEMARK_1 holds exactly the functions tidemark.h declares;
#   - every other export is a tdm__* function in TIDEMARK_PRIVATE_<N>, N
#     the header's TDM_PRIVATE_ABI_VERSION; nothing is exported unversioned;
#   - the preload library binds the private node by version;
#   - the tool refuses a library of another build before calling into it.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK LIBTIDEMARK TDM_SOURCE_DIR TDM_BINARY_DIR
command -v readelf >/dev/null || { echo "FAIL: readelf (binutils) is needed"; exit 1; }

header=$TDM_SOURCE_DIR/include/tidemark.h
private=$TDM_SOURCE_DIR/include/tidemark_private.h
n=$(sed -nE 's/^#define TDM_PRIVATE_ABI_VERSION ([0-9]+)u?$/\1/p' "$private")
[ -n "$n" ] || { fail "no TDM_PRIVATE_ABI_VERSION in $private"; finish "abi"; }

# The header's functions: every TDM_API declaration, joined over lines.
tr '\n' ' ' <"$header" | grep -oE 'TDM_API[^;{]*\(' |
  sed -E 's/.*[ *](tdm_[a-z0-9_]+) *\($/\1/' | sort -u >"$work/declared"
[ "$(wc -l <"$work/declared")" -ge 30 ] || fail "only $(wc -l <"$work/declared") functions read from tidemark.h"

# Defined dynamic symbols as NAME@VERSION (readelf -W --dyn-syms).
readelf -W --dyn-syms "$LIBTIDEMARK" |
  awk '$7 != "UND" && $7 != "ABS" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" {print $8}' >"$work/exported"
grep -E '@' "$work/exported" | grep -vE '@@?TIDEMARK_(1|PRIVATE_[0-9]+)$' |
  grep -vE '^TIDEMARK_' >"$work/odd" || true
[ -s "$work/odd" ] && fail "exports outside tidemark's nodes: $(head -5 "$work/odd" | tr '\n' ' ')"
grep -vE '@' "$work/exported" >"$work/unversioned" || true
[ -s "$work/unversioned" ] && fail "unversioned exports: $(head -5 "$work/unversioned" | tr '\n' ' ')"

sed -nE 's/^(tdm_[a-z0-9_]+)@@?TIDEMARK_1$/\1/p' "$work/exported" | sort -u >"$work/public"
if ! diff "$work/declared" "$work/public" >"$work/diff"; then
  fail "TIDEMARK_1 is not tidemark.h (< declared only, > exported only):"
  sed 's/^/  /' "$work/diff"
fi
grep -E '@@?TIDEMARK_PRIVATE_' "$work/exported" | grep -vE '^tdm__[a-z0-9_]+@@?TIDEMARK_PRIVATE_'"$n"'$' >"$work/bad_private" || true
[ -s "$work/bad_private" ] && fail "private node holds other than tdm__* at version $n: $(head -5 "$work/bad_private" | tr '\n' ' ')"
grep -qE '^tdm__private_abi@@?TIDEMARK_PRIVATE_'"$n"'$' "$work/exported" ||
  fail "tdm__private_abi is not exported at TIDEMARK_PRIVATE_$n"
grep -qE '^tdm__[a-z]' "$work/public" && fail "a tdm__ function in the public node"

# libtidemark_reader.so: TIDEMARK_READER_1 holds exactly what
# tidemark_reader.h declares, and tidemark.h's status and category names.
reader=$TDM_BINARY_DIR/libtidemark_reader.so
if [ -f "$reader" ]; then
  { tr '\n' ' ' <"$TDM_SOURCE_DIR/include/tidemark_reader.h" | grep -oE 'TDM_API[^;{]*\(' |
      sed -E 's/.*[ *](tdm_[a-z0-9_]+) *\($/\1/'
    printf '%s\n' tdm_status_name tdm_strerror tdm_category_name; } | sort -u >"$work/r_declared"
  [ "$(wc -l <"$work/r_declared")" -ge 20 ] || fail "only $(wc -l <"$work/r_declared") functions read from tidemark_reader.h"
  readelf -W --dyn-syms "$reader" |
    awk '$7 != "UND" && $7 != "ABS" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" {print $8}' >"$work/r_exported"
  grep -vE '@@?TIDEMARK_READER_1$' "$work/r_exported" | grep -vE '^TIDEMARK_READER_1' >"$work/r_odd" || true
  [ -s "$work/r_odd" ] && fail "reader exports outside TIDEMARK_READER_1: $(head -5 "$work/r_odd" | tr '\n' ' ')"
  sed -nE 's/^(tdm_[a-z0-9_]+)@@?TIDEMARK_READER_1$/\1/p' "$work/r_exported" | sort -u >"$work/r_public"
  if ! diff "$work/r_declared" "$work/r_public" >"$work/r_diff"; then
    fail "TIDEMARK_READER_1 is not tidemark_reader.h (< declared only, > exported only):"
    sed 's/^/  /' "$work/r_diff"
  fi
fi

# The preload library needs the private node by name: a mismatched pair
# fails at load, in the loader's words, not in a call.
preload=$TDM_BINARY_DIR/libtidemark_preload.so
if [ -f "$preload" ]; then
  readelf -W -V "$preload" >"$work/needs"
  has needs "TIDEMARK_PRIVATE_$n"
fi

# A library of another build beside a copy of the tool: refused, named.
mkdir -p "$work/other"
cp "$TIDEMARK" "$work/other/tidemark"
cat >"$work/other.c" <<C
unsigned tdm__private_abi(void) { return $n + 1; }
int tdm__replay(void) { return 0; }
int tdm__replay_save(void) { return 0; }
C
cc -shared -fPIC -o "$work/other/libtidemark.so" "$work/other.c" || fail "cc of the other library"
printf 'action,time_ns,id,size,category\nalloc,1,1,1024,\nfree,2,1,1024,\n' >"$work/trace.csv"
expect 4 "replay with another build's library" -- "$work/other/tidemark" replay "$work/trace.csv"
has err "is from another build of tidemark"
has err "version $((n + 1)), this tool's is $n"
# The same tool beside this build's library replays.
cp "$LIBTIDEMARK" "$work/other/libtidemark.so"
expect 0 "replay with this build's library" -- "$work/other/tidemark" replay "$work/trace.csv"

finish "abi"
