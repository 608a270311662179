#!/usr/bin/env bash
# Sites named by the code that asked for the memory: train_sim ($TRAIN_SIM)
# makes every allocation through one helper, device_alloc (at -O2 a clone,
# device_alloc.isra.0); the summary's rows name its callers
# (backward_layer, init_parameters, optimizer_step), --keep-wrappers brings
# the helper back, --hide and --focus narrow the stacks and the sites.  Two
# builds of the same source (train_sim.c built here at -O0 against the
# build's own) recorded with the same steps: tidemark diff matches every
# site (no site found in one build only), although names (clones) and
# frames (inlined, tail calls) differ.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM LIBTIDEMARK TDM_SOURCE_DIR

cd "$work" || exit 1
record "$work/o2.tdm" --steps 2
expect 0 "summary --frames 1" -- "$TIDEMARK" summary --frames 1 o2.tdm
cp "$work/out" "$work/sum.txt"
awk '/top allocation sites/ {on = 1; next} on && /^$/ {exit} on && $1 ~ /^[0-9]+$/ {print $6}' \
  "$work/sum.txt" >"$work/rows.txt"
[ "$(wc -l <"$work/rows.txt")" -ge 6 ] || fail "fewer than 6 site rows: $(cat "$work/sum.txt")"
lacks rows.txt "device_alloc"
has rows.txt "backward_layer"; has rows.txt "init_parameters"; has rows.txt "optimizer_step"
# the rows differ: no two rows show the same frame (function and line)
awk '/top allocation sites/ {on = 1; next} on && /^$/ {exit} on && $1 ~ /^[0-9]+$/ {print $6, $7}' \
  "$work/sum.txt" | sort | uniq -d >"$work/same.txt"
[ ! -s "$work/same.txt" ] || fail "rows read the same: $(cat "$work/same.txt")"

expect 0 "summary --keep-wrappers" -- "$TIDEMARK" summary --frames 1 --keep-wrappers o2.tdm
has_re out "^ +1 +[0-9.]+ MiB +[0-9.]+% +[0-9]+  device_alloc \(train_sim\.c:[0-9]+\)$"
lacks out ".isra"  # a clone reads as its function, wrappers kept or not
expect 0 "summary --raw-names --keep-wrappers" -- "$TIDEMARK" summary --frames 1 --raw-names \
  --keep-wrappers o2.tdm
grep -q "device_alloc\.isra" "$work/out" || echo "note: this build made no clone of device_alloc"

expect 0 "summary --hide" -- "$TIDEMARK" summary --frames 1 --hide '^backward_layer$' o2.tdm
lacks out "backward_layer"; has out "backward (train_sim.c:"
expect 1 "summary --hide with a bad regex" -- "$TIDEMARK" summary --hide 'a(' o2.tdm
has err "tidemark summary: --hide 'a(': "
expect 1 "summary --focus without a value" -- "$TIDEMARK" summary o2.tdm --focus
has err "option '--focus' needs a regular expression"

expect 0 "summary --focus" -- "$TIDEMARK" summary --frames 1 --focus '^optimizer_step$' o2.tdm
awk '/top allocation sites/ {on = 1; next} on && /^$/ {exit} on && $1 ~ /^[0-9]+$/ {print $6}' \
  "$work/out" >"$work/focus.txt"
[ -s "$work/focus.txt" ] && ! grep -vq "^optimizer_step$" "$work/focus.txt" ||
  fail "--focus lists other sites: $(cat "$work/focus.txt")"
has out "peak allocated 404.09 MiB" # the totals stay the whole program's

# ---- two builds of the same code --------------------------------------------------
san=()
case "${TDM_SANITIZE:-}" in
  address) san=(-fsanitize=address,undefined) ;;
  thread) san=(-fsanitize=thread) ;;
esac
cc -O0 -g "${san[@]}" -I"$TDM_SOURCE_DIR/include" "$TDM_SOURCE_DIR/examples/train_sim.c" \
  -o "$work/train_sim_O0" "$LIBTIDEMARK" -Wl,-rpath,"${LIBTIDEMARK%/*}" 2>"$work/cc.log" ||
  { cat "$work/cc.log"; fail "cc -O0 train_sim.c failed"; finish "stacks"; }
TRAIN_SIM=$work/train_sim_O0 record "$work/o0.tdm" --steps 2
expect 0 "diff -O2 -O0" -- "$TIDEMARK" diff o2.tdm o0.tdm
has out "no allocation site changed its live bytes at the peak"
expect 0 "diff -O0 -O2 --frames 3" -- "$TIDEMARK" diff --frames 3 o0.tdm o2.tdm
has out "no allocation site changed its live bytes at the peak"

finish "sites named by the callers of the allocation wrapper; -O0 and -O2 builds match site for site"
