#!/usr/bin/env bash
# A real PyTorch snapshot (tests/data/torch-2.14-stacks-all.pickle, made
# by torch 2.14.1 with stacks="all"; issue 39, point 11):
#  - PyTorch's capture and allocator frames (torch::unwind::unwind,
#    torch::CapturedTraceback::gather, gather_with_cpp, c10::cuda::
#    CUDACachingAllocator::...) pass the request on: a site shown by its
#    native frames is the frame that asked for memory (cuBLAS's workspace:
#    at::cuda::setWorkspaceForHandle), not four identical capture frames;
#  - the summary says stacks=all of a file with Python and C++ frames;
#  - the device reads the same in every command.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK TDM_SOURCE_DIR
cd "$work" || exit 1
pk="$TDM_SOURCE_DIR/tests/data/torch-2.14-stacks-all.pickle"

expect 0 "summary --native-frames" -- "$TIDEMARK" summary --native-frames "$pk"
has_re out "^    1 +32\.00 MiB +80\.0% +1  at::cuda::setWorkspaceForHandle"
has_re out "^    2 +4\.00 MiB .*at::detail::empty_generic"
lacks out "torch::unwind::unwind"
lacks out "CapturedTraceback"
lacks out "gather_with_cpp"
lacks out "CUDACachingAllocator"
expect 0 "flamegraph" -- "$TIDEMARK" export --format flamegraph -o "$work/f.txt" "$pk"
grep -q "setWorkspaceForHandle" "$work/f.txt" || fail "flamegraph lacks the workspace's caller"

expect 0 "summary" -- "$TIDEMARK" summary "$pk"
has out "stacks=all"
has_re out "^    1 +34\.00 MiB .*forward \(snap\.py:6\)"
has out "device 0 (unnamed)"
lacks out "(?)"
expect 0 "categories" -- "$TIDEMARK" categories "$pk"
has out "device 0 (unnamed)"
lacks out "( )"
expect 3 "gate" -- "$TIDEMARK" gate --max-peak 1MiB "$pk"
has out "device 0 (unnamed)"

finish "torch stacks"
