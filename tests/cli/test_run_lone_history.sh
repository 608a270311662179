#!/usr/bin/env bash
# A PyTorch history that `tidemark run` finds in its folder with no
# snapshot of its own to go into (a torch.compile worker that started CUDA
# through PyTorch and allocated nothing, or one whose snapshot was never
# written) is said in one line and left as it is; before, it was neither
# merged nor mentioned.  A run with none says nothing of it.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TRAIN_SIM
cd "$work" || exit 1
unset TIDEMARK_CONF LD_PRELOAD
export TIDEMARK_PRELOAD=

expect 0 "a run that leaves a lone history" -- "$TIDEMARK" run -q -o "$work/runA" -- \
    sh -c 'printf "\200\002}q\000." >"$1/worker-4242.torch.pickle"' sh "$work/runA"
has err "tidemark run: 1 PyTorch history without a snapshot of its own, left as it is: $work/runA/worker-4242.torch.pickle"
[ -f "$work/runA/worker-4242.torch.pickle" ] || fail "the lone history is gone"

expect 0 "a run with its snapshot only" -- "$TIDEMARK" run -q -o "$work/runB" -- \
    "$TRAIN_SIM" --steps 1 --compute-us 0
lacks err "PyTorch histor"
finish "run says what PyTorch histories it leaves alone"
