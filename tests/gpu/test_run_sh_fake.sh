#!/bin/bash
# tests/gpu/test_run_sh_fake.sh: ctest's gpu.run_sh_fake.  run.sh --fake
# against this build, and its table checked row by row, so that the GPU
# script is tested here before a GPU ever runs it:
#   1. the whole run: the rows that run on the fake driver PASS (cuda_drv),
#      the nvcc-built and PyTorch rows SKIP with the reason the fakes give
#      (NVIDIA's runtime cannot run on them), every row is in the table,
#      the artifacts stay under -o, exit 0
#   2. a failing driver (FAKE_CUDA_FAIL): the rows FAIL, the program's
#      stderr is shown, exit 1
#   3. no time left (GPU_DEADLINE_S=0): every row SKIP "time limit reached"
#   3b. a row that hangs (FAKE_CUDA_HANG_S): killed at its time limit, FAIL
#      "timed out after N s"
#   4. usage: a non-empty -o folder refused (2); without --fake and without
#      a GPU, one line and 77
#   5. the GPU path (no --fake) with a stand-in nvidia-smi: an nvcc newer
#      than the driver's CUDA is a SKIP saying so; programs failing alone
#      SKIP; cuda_drv PASSes
# Artifacts under $TDM_BINARY_DIR/tests/gpu/run_sh_fake (kept).
#
# KNOWN_FAIL: rows that FAIL on the fakes because of a library bug this
# check is right to report, tolerated here (and said) until the fix lands
# (comma-separated row names; none now).
KNOWN_FAIL=""
# Environment (from CMake): RUN_SH, TDM_BINARY_DIR, PYTHON, TDM_SANITIZE.
set -u
W=$TDM_BINARY_DIR/tests/gpu/run_sh_fake
rm -rf "$W" && mkdir -p "$W" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# verdict DIR ROW, note DIR ROW: columns of ROW in DIR/table.tsv
verdict() { awk -F'\t' -v r="$2" '$1 == r { print $4; exit }' "$1/table.tsv"; }
note() { awk -F'\t' -v r="$2" '$1 == r { print $5; exit }' "$1/table.tsv"; }
known() { [[ ",$KNOWN_FAIL," == *",$1,"* ]]; }

rows_drv="cuda_drv observe|cuda_drv cache"
rows_plug="pluggable under preload"
rows_nvcc="cuda_app static observe|cuda_app static cache|cuda_app shared observe|cuda_app shared cache|cuda_app ptds observe|cuda_app ptds cache|cuda_streams legacy observe|cuda_streams legacy cache|cuda_streams ptds observe|cuda_streams ptds cache"
rows_torch="torch reference|torch observe (tidemark run)|torch tensors, history|torch categories vs profiler|torch tensors, pluggable|torch raw, mode=cache|torch pluggable|torch expandable|torch cudaMallocAsync|torch graph|torch DataLoader (tidemark run)|torch NCCL, 2 GPUs|overhead (ms/step)"
each() { local IFS='|' r; for r in $1; do echo "$r"; done; }

# ---- 1. the whole run ------------------------------------------------------------
bash "$RUN_SH" --fake -b "$TDM_BINARY_DIR" -o "$W/run" >"$W/run.stdout" 2>&1
rc=$?
cat "$W/run.stdout"
[ -s "$W/run/table.txt" ] && [ -s "$W/run/table.tsv" ] || { echo "FAIL: no table in $W/run"; exit 1; }
n=$(wc -l <"$W/run/table.tsv")
want_n=$(( $(each "$rows_drv|$rows_plug|$rows_nvcc|$rows_torch" | wc -l) ))
[ "$n" = "$want_n" ] || fail "the table has $n rows, not $want_n"
while IFS= read -r r; do
    v=$(verdict "$W/run" "$r")
    if [ "$v" = PASS ]; then
        known "$r" && echo "note: '$r' now passes; take it off KNOWN_FAIL"
    elif [ "$v" = FAIL ] && known "$r"; then
        echo "note: '$r' FAILs as known (library bug, see KNOWN_FAIL)"
    else
        fail "'$r' is '$v', not PASS: $(note "$W/run" "$r")"
    fi
done < <(each "$rows_drv|$rows_plug")
ls "$W/run/drv_observe/"*.tdm "$W/run/drv_cache/"*.tdm >/dev/null 2>&1 ||
    fail "the cuda_drv snapshots were not kept"
nvcc_found=$(sed -n 's/.*; nvcc \([^ ;]*\).*/\1/p' "$W/run/machine.txt")
while IFS= read -r r; do
    v=$(verdict "$W/run" "$r")
    [ "$v" = SKIP ] || fail "'$r' is '$v', not SKIP on the fakes"
    if [ "$nvcc_found" = none ]; then
        note "$W/run" "$r" | grep -q "no nvcc" || fail "'$r': no reason 'no nvcc'"
    else
        # Built for real by nvcc, then the program alone: cudart refuses the fake.
        note "$W/run" "$r" | grep -q "does not run on the fake driver" || fail "'$r': not the fake-driver reason"
    fi
done < <(each "$rows_nvcc")
if [ "$nvcc_found" != none ]; then
    for b in app_static app_shared app_ptds streams_legacy streams_ptds; do
        [ -x "$W/run/nvcc/$b" ] && [ -e "$W/run/nvcc/$b.err" ] && [ -e "$W/run/nvcc/$b.alone.err" ] ||
            fail "nvcc build or solo run of $b not kept under $W/run/nvcc"
    done
fi
while IFS= read -r r; do
    v=$(verdict "$W/run" "$r")
    [ "$v" = SKIP ] || fail "'$r' is '$v', not SKIP on the fakes"
done < <(each "$rows_torch")
tn=$(note "$W/run" "torch reference")
if [ -n "${TDM_SANITIZE:-}" ]; then
    echo "$tn" | grep -q "sanitizer build's fake driver" || fail "torch rows: not the sanitizer reason: $tn"
elif [ -n "${PYTHON:-}" ]; then
    echo "$tn" | grep -q "cannot start CUDA on the fake driver" ||
        fail "torch rows: not the fake-driver reason: $tn"
else
    echo "$tn" | grep -Eq "no PyTorch|CPU build|no python" || fail "torch rows: unexpected reason: $tn"
fi
grep -q "^gpu tests: " "$W/run/table.txt" || fail "no count line"
fails_in_run=$(awk -F'\t' '$4 == "FAIL"' "$W/run/table.tsv" | wc -l)
known_fails=0
while IFS= read -r r; do
    [ "$(verdict "$W/run" "$r")" = FAIL ] && known_fails=$((known_fails + 1))
done < <(echo "$KNOWN_FAIL" | tr , '\n')
if [ "$fails_in_run" -eq 0 ]; then
    [ $rc = 0 ] || fail "no row failed, yet exit $rc"
else
    [ $rc = 1 ] || fail "$fails_in_run rows failed, yet exit $rc"
    [ "$fails_in_run" = "$known_fails" ] || fail "$fails_in_run rows FAIL, $known_fails of them known"
fi

# ---- 2. a driver that fails ----------------------------------------------------------
FAKE_CUDA_FAIL=cuMemAlloc_v2:2 GPU_ROWS='^cuda_drv' bash "$RUN_SH" --fake -b "$TDM_BINARY_DIR" \
    -o "$W/failing" >"$W/failing.stdout" 2>&1
rc=$?
[ $rc = 1 ] || fail "a failing driver: exit $rc, not 1"
for r in "cuda_drv observe" "cuda_drv cache"; do
    [ "$(verdict "$W/failing" "$r")" = FAIL ] || fail "a failing driver: '$r' not FAIL"
done
grep -q "^    | cuda_drv.c:[0-9]* .* -> 2$" "$W/failing.stdout" ||
    fail "a failing driver: the program's stderr is not shown under its row"
[ "$(verdict "$W/failing" "torch reference")" = SKIP ] &&
    note "$W/failing" "torch reference" | grep -q "not selected" || fail "GPU_ROWS did not leave torch out"

# ---- 3. no time left -------------------------------------------------------------------
GPU_DEADLINE_S=0 bash "$RUN_SH" --fake -b "$TDM_BINARY_DIR" -o "$W/late" >"$W/late.stdout" 2>&1
rc=$?
[ $rc = 0 ] || fail "no time left: exit $rc"
others=$(awk -F'\t' '$4 != "SKIP"' "$W/late/table.tsv")
[ -z "$others" ] || fail "no time left, yet rows ran: $others"
grep -q "time limit reached" "$W/late/table.txt" || fail "no time left: no 'time limit reached'"

# ---- 3b. a row that hangs -------------------------------------------------------------
# The fake driver sleeps 120 s at its first call; with 8 s left to the run
# the row's limit is cut to what remains, and the row must be killed there:
# FAIL "timed out after N s" (N <= 8), the run over well before the hang.
t0=$SECONDS
FAKE_CUDA_HANG_S=120 GPU_DEADLINE_S=8 GPU_ROWS='^cuda_drv observe$' bash "$RUN_SH" --fake \
    -b "$TDM_BINARY_DIR" -o "$W/hang" >"$W/hang.stdout" 2>&1
rc=$?
took=$((SECONDS - t0))
[ $rc = 1 ] || fail "a hung row: exit $rc, not 1"
[ "$(verdict "$W/hang" "cuda_drv observe")" = FAIL ] || fail "a hung row: not FAIL"
hn=$(note "$W/hang" "cuda_drv observe")
echo "$hn" | grep -Eq "^timed out after [1-8] s" || fail "a hung row: note '$hn'"
[ $took -lt 60 ] || fail "a hung row: the run took $took s (the hang is 120 s)"
# ---- 4. usage ------------------------------------------------------------------------
bash "$RUN_SH" --fake -b "$TDM_BINARY_DIR" -o "$W/run" >"$W/again.stdout" 2>&1
[ $? = 2 ] || fail "a non-empty -o folder was not refused"
if ! command -v nvidia-smi >/dev/null 2>&1; then
    out=$(bash "$RUN_SH" -o "$W/nogpu" 2>&1)
    rc=$?
    [ $rc = 77 ] && [ "$(echo "$out" | wc -l)" = 1 ] || fail "no GPU: exit $rc, output '$out'"
    [ ! -e "$W/nogpu" ] || fail "no GPU: $W/nogpu made"
fi

# ---- 5. the GPU path, with an nvidia-smi that describes one -------------------------
# run.sh without --fake, as on a GPU machine, over the fake driver: the
# version check, the nvcc flags and the "fails alone" SKIP are exercised
# before a GPU runs them.  (Only the drv and nvcc rows: torch's need a GPU.)
mkdir -p "$W/smi"
cat >"$W/smi/nvidia-smi" <<'EOF2'
#!/bin/sh
# describes one H200 whose driver speaks CUDA $SMI_CUDA
case "$*" in
-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
*compute_cap*--format*) case "$*" in *name*) echo "NVIDIA H200, 580.00, 9.0" ;; *) echo 9.0 ;; esac ;;
*) echo "| NVIDIA-SMI 580.00    Driver Version: 580.00    CUDA Version: $SMI_CUDA |" ;;
esac
EOF2
chmod +x "$W/smi/nvidia-smi"
gpu_run() { # NAME CUDA_VERSION
    PATH="$W/smi:$PATH" SMI_CUDA=$2 LD_LIBRARY_PATH="$TDM_BINARY_DIR/tests/fakes/cuda/lib" \
        GPU_ROWS='^cuda_' bash "$RUN_SH" -b "$TDM_BINARY_DIR" -o "$W/$1" >"$W/$1.stdout" 2>&1
}
gpu_run gpu12 12.8
rc=$?
[ $rc = 0 ] || fail "GPU path (driver CUDA 12.8): exit $rc"
grep -q "NVIDIA H200.*driver CUDA 12.8" "$W/gpu12/machine.txt" || fail "GPU path: machine.txt: $(cat "$W/gpu12/machine.txt")"
[ "$(verdict "$W/gpu12" "cuda_drv cache")" = PASS ] || fail "GPU path: cuda_drv cache not PASS"
if [ "$nvcc_found" != none ]; then
    note "$W/gpu12" "cuda_app static observe" | grep -q "is newer than the driver's CUDA 12.8" ||
        fail "GPU path: an nvcc newer than the driver not said: $(note "$W/gpu12" "cuda_app static observe")"
    nvmajor=$(sed -n 's/.*nvcc [^ ]* (\([0-9]*\)\..*/\1/p' "$W/gpu12/machine.txt")
    gpu_run gpu_same "$nvmajor.9"
    rc=$?
    [ $rc = 0 ] || fail "GPU path (driver CUDA $nvmajor.9): exit $rc"
    note "$W/gpu_same" "cuda_streams ptds cache" | grep -q "fails without tidemark" ||
        fail "GPU path: a program failing alone not said: $(note "$W/gpu_same" "cuda_streams ptds cache")"
fi

[ $fails = 0 ] || { echo "$fails check(s) failed; artifacts in $W"; exit 1; }
echo "ok (artifacts in $W)"
