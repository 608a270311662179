#!/bin/bash
# tests/simcuda/test_run_simulate.sh: `tidemark run --simulate GPU` and
# TIDEMARK_CONF=simulate=GPU start an unmodified CUDA PyTorch program on
# the simulated platform with tidemark recording it: tidemark's peak
# reserved is torch.cuda.max_memory_reserved() to the byte (from tidemark's
# own segment events, torch_tensors=off; and with PyTorch's history merged,
# its peak allocated too, the timeline's as well as the stats line's), with
# normal and expandable segments; the GPU is
# the one named; a bad value stops the run before the command; a missing
# platform is said.  Skipped (77) without a CUDA torch, and in sanitizer
# builds.
set -uo pipefail
PY=${TDM_VENV_PYTHON:-}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"

# The presets TIDEMARK_CONF accepts are the platform's.
conf=$(grep -o 'presets\[\] = {[^}]*}' "$TDM_SOURCE_DIR/runtime/config.c" | grep -o '"[^"]*"' | sort | tr '\n' ' ')
plat=$(grep -oE '^    \{"[a-z0-9-]+", "NVIDIA' "$TDM_SOURCE_DIR/simcuda/core/preset.c" | grep -oE '"[a-z0-9-]+"' | sort | tr '\n' ' ')
[ -n "$conf" ] && [ "$conf" = "$plat" ] || fail "config.c's presets ($conf) are not preset.c's ($plat)"
echo "ok: TIDEMARK_CONF's presets are the platform's: $conf"

out=$("$TIDEMARK" run --simulate h300 -- sh -c 'echo CMDRAN' 2>&1); rc=$?
[ $rc = 1 ] && ! grep -q CMDRAN <<<"$out" && grep -q "bad value 'h300' for key 'simulate'" <<<"$out" ||
    fail "a bad GPU: rc $rc: $out"
echo "ok: --simulate h300 stops the run before the command (exit 1)"
out=$(TIDEMARK_SIMCUDA_DIR=$T/none "$TIDEMARK" run --simulate h100 -- sh -c 'echo CMDRAN' 2>&1); rc=$?
[ $rc = 4 ] && grep -q 'not installed' <<<"$out" || fail "no platform: rc $rc: $out"
echo "ok: a missing platform is said (exit 4)"
out=$("$TIDEMARK" run --simulate 2xa100-40g -q -o o0 -- sh -c 'echo "$SIMCUDA_GPU $LD_PRELOAD"' 2>&1)
grep -q '^2xa100-40g .*libtidemark_preload.so:.*/libsimcuda.so:.*/libsimcudart.so:.*/libsimnvml.so:.*/libsimnccl.so' <<<"$out" ||
    fail "environment: $out"
echo "ok: LD_PRELOAD has the preload library, then the platform's"

[ -x "$PY" ] && "$PY" "$TDM_SOURCE_DIR/tests/simcuda/cuda_torch.py" 2>/dev/null ||
    { echo "no CUDA build of torch at TDM_VENV_PYTHON='$PY': the rest is skipped"; exit 77; }
MLP=$TDM_SOURCE_DIR/tests/simcuda/run_mlp.py
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# tidemark's own segment events.
for alloc_conf in "" "expandable_segments:True"; do
    rm -rf o1
    PYTORCH_CUDA_ALLOC_CONF=$alloc_conf "$TIDEMARK" run --simulate h100 --conf torch_tensors=off -q -o o1 \
        -- "$PY" "$MLP" torch.json >log 2>&1 || fail "run: $(cat log)"
    want=$(field torch.json max_reserved)
    [ "$(field torch.json name)" = "NVIDIA H100 80GB HBM3" ] || fail "not an H100: $(cat torch.json)"
    "$TIDEMARK" summary --bytes o1/*.tdm > sum 2>&1 || fail "summary: $(cat sum)"
    got=$(sed -n 's/.*peak reserved by PyTorch.s caching allocator .* (\([0-9]*\) B).*/\1/p' sum)
    [ -n "$got" ] && [ "$got" = "$want" ] ||
        fail "${alloc_conf:-default}: tidemark's peak reserved '$got' B, torch.cuda.max_memory_reserved() $want: $(cat sum)"
    echo "ok: ${alloc_conf:-default segments}: tidemark's peak reserved $got B = torch.cuda.max_memory_reserved()"
done

# With PyTorch's tensor history merged (the default): allocated too.
rm -rf o2
TIDEMARK_CONF=simulate=h100 "$TIDEMARK" run -q -o o2 -- "$PY" "$MLP" torch.json >log 2>&1 || fail "run: $(cat log)"
"$TIDEMARK" summary --bytes o2/*.tdm > sum 2>&1 || fail "summary: $(cat sum)"
stats=$(grep -m1 'stats ' sum)
alloc=$(sed -n 's/.*allocated [0-9]* B now, \([0-9]*\) B peak.*/\1/p' <<<"$stats")
res=$(sed -n 's/.*reserved [0-9]* B now, \([0-9]*\) B peak.*/\1/p' <<<"$stats")
[ "$alloc" = "$(field torch.json max_allocated)" ] && [ "$res" = "$(field torch.json max_reserved)" ] ||
    fail "TIDEMARK_CONF=simulate=h100: tidemark '$stats', torch $(cat torch.json)"
echo "ok: TIDEMARK_CONF=simulate=h100: peak allocated $alloc B and reserved $res B are torch's"
# tidemark's own timeline of the tensor events (not PyTorch's counters
# copied): its peak allocated counts each tensor's block, as
# max_memory_allocated() does.
peak() { sed -n 's/^  peak allocated .* (\([0-9]*\) B).*/\1/p' "$1"; }
[ "$(peak sum)" = "$(field torch.json max_allocated)" ] ||
    fail "tidemark's peak allocated '$(peak sum)' B, torch.cuda.max_memory_allocated() $(field torch.json max_allocated): $(cat sum)"
echo "ok: the timeline's peak allocated $(peak sum) B = torch.cuda.max_memory_allocated()"

rm -rf o3
TIDEMARK_CONF=simulate=2xa100-80g "$TIDEMARK" run -q -o o3 -- "$PY" "$MLP" torch.json >log 2>&1 || fail "run: $(cat log)"
[ "$(field torch.json devices)" = 2 ] && [ "$(field torch.json name)" = "NVIDIA A100-SXM4-80GB" ] &&
    [ "$(field torch.json total)" = $((80 << 30)) ] || fail "2xa100-80g: $(cat torch.json)"
echo "ok: simulate=2xa100-80g: torch sees two A100 80GB"

# The small GPT of docs/simulate.md: 20 steps within a minute, reserved to
# the byte.
rm -rf o4
start=$(date +%s)
"$TIDEMARK" run --simulate h100 -q -o o4 -- "$PY" "$TDM_SOURCE_DIR/tests/simcuda/run_gpt.py" gpt.json >log 2>&1 ||
    fail "gpt: $(cat log)"
took=$(( $(date +%s) - start ))
# tidemark's own Python start-up hook ran after the platform's (torch phases).
! grep -q 'torch phases stopped\|not set up' log || fail "start-up hooks: $(cat log)"
"$TIDEMARK" summary --bytes o4/*.tdm > sum 2>&1 || fail "summary: $(cat sum)"
res=$(sed -n 's/.*stats .*reserved [0-9]* B now, \([0-9]*\) B peak.*/\1/p' sum)
[ "$res" = "$(field gpt.json max_reserved)" ] || fail "gpt: tidemark's reserved peak '$res', torch $(cat gpt.json)"
[ "$(peak sum)" = "$(field gpt.json max_allocated)" ] ||
    fail "gpt: tidemark's peak allocated '$(peak sum)' B, torch.cuda.max_memory_allocated() $(field gpt.json max_allocated)"
[ $took -le 60 ] || fail "the 20-step GPT took ${took} s under tidemark run --simulate h100 (at most 60)"
echo "ok: 20-step GPT in ${took} s (the script's own $(field gpt.json seconds) s); peaks reserved $res B, allocated $(peak sum) B = torch's"
