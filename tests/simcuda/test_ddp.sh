#!/bin/bash
# tests/simcuda/test_ddp.sh: two ranks of a DistributedDataParallel job over
# NCCL (torch.distributed.run --nproc-per-node 2) on two simulated H100s
# (and the same MLP sharded by FSDP2's fully_shard) under
# `tidemark run --simulate 2xh100`, with the simulated NCCL
# (libsimnccl.so): one snapshot per rank in the run folder, the rank table,
# each rank's peak allocated equal to its torch.cuda.max_memory_allocated()
# on its own device, an all-gather's copy, and the communicator's own
# buffers (taken through the driver's virtual-memory calls) seen by tidemark
# beside PyTorch's reserved memory, never among the tensors.  Skipped (77)
# without a CUDA torch at TDM_VENV_PYTHON, and in sanitizer builds (the
# interpreter does not carry the sanitizer runtime).
set -uo pipefail
PY=${TDM_VENV_PYTHON:-}
[ -n "$TDM_SANITIZE" ] && { echo "sanitizer build: skipped"; exit 77; }
[ -x "$PY" ] && "$PY" "$TDM_SOURCE_DIR/tests/simcuda/cuda_torch.py" 2>/dev/null ||
    { echo "no CUDA build of torch at TDM_VENV_PYTHON='$PY': skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$T"
DDP=$TDM_SOURCE_DIR/tests/simcuda/run_ddp.py
# ddp DIR [CONF [MODE]]: the job under tidemark (MODE ddp, the default, or
# fsdp2), its output in DIR.log
ddp() {
    timeout 300 "$TIDEMARK" run --simulate 2xh100 ${2:+--conf "$2"} -o "$1" -- \
        "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$DDP" "${3:-ddp}" >"$1.log" 2>&1 ||
        fail "$1 ${3:-ddp}: the job failed: $(tail -40 "$1.log")"
}
# field R KEY: KEY of rank R's JSON line in o.log
field() {
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        if d["rank"] == int(sys.argv[2]): print(d[sys.argv[3]])' o.log "$1" "$2"
}
# section FILE DEV: the summary of FILE for device DEV
section() { awk -v d="device $2 (" 'index($0, "device ") == 1 { on = index($0, d) == 1 } on' "$1"; }

for mode in ddp fsdp2; do
    rm -rf o o.log r0.pickle r1.pickle
    ddp o "" $mode
    n=$(ls o/*.tdm 2>/dev/null | wc -l)
    [ "$n" = 2 ] || fail "$n snapshots in the run folder, not one per rank: $(ls o)"
    grep -q 'tidemark summary of 2 snapshots: 2 ranks' o.log && grep -Eq '^ +0 +[^ ]+ +0' o.log &&
        grep -Eq '^ +1 +[^ ]+ +1' o.log || fail "no rank table: $(cat o.log)"
    echo "ok: $mode: one snapshot per rank, and the rank table"
    for r in 0 1; do
        pid=$(field $r pid)
        [ "$(field $r device)" = $r ] && [ "$(field $r world)" = 2 ] || fail "rank $r: $(grep '^{' o.log)"
        chunk="$((r + 1)).0, $((r + 2)).0"
        [ "$(field $r gathered)" = "[$chunk, $chunk]" ] ||
            fail "rank $r: all-gather gave $(field $r gathered), not [$chunk, $chunk]"
        f=$(ls o/*-"$pid".tdm 2>/dev/null)
        [ -n "$f" ] || fail "rank $r (pid $pid): no snapshot of its own: $(ls o)"
        "$TIDEMARK" summary --bytes "$f" >sum$r 2>&1 || fail "summary: $(cat sum$r)"
        grep -q "rank $r of 2" sum$r || fail "$f is not rank $r's: $(cat sum$r)"
        got=$(section sum$r $r | sed -n 's/^  peak allocated .* (\([0-9]*\) B).*/\1/p')
        want=$(field $r max_allocated)
        [ -n "$got" ] && [ "$got" = "$want" ] ||
            fail "$mode: rank $r: tidemark's peak allocated on device $r '$got' B, torch.cuda.max_memory_allocated() $want: $(cat sum$r)"
        echo "ok: $mode: rank $r: all-gather copied its chunk into both slots; peak allocated on device $r $got B = torch.cuda.max_memory_allocated()"
        # NCCL's buffers in the merged history: a mapping of their own on the
        # rank's device, made under torch's NCCL communicator and no tensor.
        "$TIDEMARK" export --format pytorch "$f" -o r$r.pickle >/dev/null 2>&1 || fail "export of $f"
        nccl=$("$PY" -c 'import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
t = d["device_traces"][int(sys.argv[2])]
maps = [e for e in t if e["action"] == "segment_map" and
        any("NCCLComm::create" in f["name"] for f in e.get("frames", []))]
tensors = {e["addr"] for e in t if e["action"] == "alloc"}
print(" ".join(str(m["size"]) for m in maps
               if not any(m["addr"] <= a < m["addr"] + m["size"] for a in tensors)))' r$r.pickle $r)
        [ "$nccl" = 4194304 ] || fail "$mode: rank $r: NCCL's mappings on device $r in the history: '$nccl', want one of 4194304 B"
        echo "ok: $mode: rank $r: NCCL's buffers, 4194304 B mapped under c10d::NCCLComm::create, are apart from the tensors"
    done
done

# NCCL's own memory: the communicator's buffers are mapped through the
# driver's virtual-memory calls at init and kept until
# destroy_process_group: one NCCL_BUFFSIZE per peer (4 MiB by default;
# 6 MiB asked here, a multiple of the 2 MiB granularity).  The summary
# books them apart: its peak reserved by PyTorch's caching allocator is
# max_memory_reserved(), and NCCL's buffers are the line beside it.
for buffsize in "" 6291456; do
    rm -rf o o.log
    NCCL_BUFFSIZE=$buffsize ddp o torch_tensors=off
    for r in 0 1; do
        pid=$(field $r pid)
        "$TIDEMARK" summary --bytes o/*-"$pid".tdm >res 2>&1 || fail "summary: $(cat res)"
        got=$(section res $r | sed -n 's/.*peak reserved by PyTorch.s caching allocator .* (\([0-9]*\) B).*/\1/p')
        want=$(field $r max_reserved)
        nccl=$((${buffsize:-4194304}))
        [ -n "$got" ] && [ "$got" = "$want" ] ||
            fail "NCCL_BUFFSIZE=${buffsize:-default}: rank $r: tidemark's peak reserved by PyTorch '$got' B, PyTorch's max_memory_reserved() $want B: $(cat res)"
        beside=$(section res $r | sed -n "s/^  beside it      NCCL's own buffers: .* (\([0-9]*\) B) at that moment.*highest .* (\([0-9]*\) B)\$/\1 \2/p")
        [ "$beside" = "$nccl $nccl" ] ||
            fail "NCCL_BUFFSIZE=${buffsize:-default}: rank $r: NCCL's buffers booked beside PyTorch's: '$beside', want $nccl B at the peak and highest: $(cat res)"
        echo "ok: NCCL_BUFFSIZE=${buffsize:-default}: rank $r: peak reserved by PyTorch $got B = max_memory_reserved(); NCCL's own $nccl B beside it"
    done
done
