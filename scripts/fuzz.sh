#!/usr/bin/env bash
# scripts/fuzz.sh: build the libFuzzer targets of tests/fuzz (clang,
# ASan+UBSan, in build-fuzz/) and run each for SECONDS; any crash, leak,
# undefined behaviour or hang fails.  docs/fuzzing.md says more.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...] [-- LIBFUZZER-OPTIONS...]
#
#   SECONDS   per target (default 30; CI runs 15, two at a time: a minute)
#   TARGET    tdm, tdm_crc, commands, pickle, rmm_csv, trace_csv, conf, spill
#             (default: every tests/fuzz/fuzz_*.c)
#   FUZZ_PARALLEL=N   targets run at once (default 2)
#   FUZZ_BUILD=DIR    the build folder (default build-fuzz)
#
# Each target starts from its seeds (tests/fuzz/corpus/NAME, read only)
# and the inputs earlier runs found (DIR/corpus/NAME, kept between runs);
# a finding is written to DIR/findings/NAME-crash-..., and its log to
# DIR/logs/NAME.log.  Options after -- go to every target, e.g.
#   scripts/fuzz.sh 3600 pickle -- -jobs=4 -workers=4
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=30
TARGETS=()
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; EXTRA=("$@"); break ;;
    ''|*[!0-9]*) TARGETS+=("$1") ;;
    *) SECONDS_EACH=$1 ;;
  esac
  shift
done
PARALLEL=${FUZZ_PARALLEL:-2}
BUILD=${FUZZ_BUILD:-build-fuzz}
if [ ${#TARGETS[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do
    n=${f##*/fuzz_}
    TARGETS+=("${n%.c}")
  done
fi

command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DTDM_FUZZ=ON -DTDM_SANITIZE=address \
  -DTDM_BUILD_TESTS=OFF -DTDM_BUILD_BENCH=OFF -DTDM_BUILD_EXAMPLES=OFF >"$BUILD.cmake.log" 2>&1 ||
  { cat "$BUILD.cmake.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" --target tdm_fuzz
mkdir -p "$BUILD/findings" "$BUILD/logs"

# run_one NAME: fuzzes one target; its verdict is its exit status.
run_one() {
  local name=$1 bin=$BUILD/fuzz/fuzz_$1 log=$BUILD/logs/$1.log
  local dirs=("$BUILD/corpus/$name")
  mkdir -p "$BUILD/corpus/$name"
  [ -d "tests/fuzz/corpus/$name" ] && dirs+=("tests/fuzz/corpus/$name")
  [ -x "$bin" ] || { echo "fuzz.sh: no target fuzz_$name" >&2; return 1; }
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$BUILD/findings/$name-" "${EXTRA[@]}" \
      "${dirs[@]}" >"$log" 2>&1
}

# Stats from a log: executions, executions per second.
stats() {
  local runs rate
  runs=$(grep -E '^stat::number_of_executed_units' "$1" | awk '{n = $2} END {print n + 0}')
  rate=$(grep -E '^stat::average_exec_per_sec' "$1" | awk '{n = $2} END {print n + 0}')
  echo "$runs executions, $rate/s"
}

failed=()
declare -A pids=()
for name in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do
    wait -n || true
  done
  echo "fuzz.sh: $name for ${SECONDS_EACH}s"
  run_one "$name" &
  pids[$name]=$!
done
for name in "${TARGETS[@]}"; do
  if wait "${pids[$name]}"; then
    echo "fuzz.sh: $name ok ($(stats "$BUILD/logs/$name.log"))"
  else
    failed+=("$name")
    echo "fuzz.sh: $name FAILED ($(stats "$BUILD/logs/$name.log")); the end of $BUILD/logs/$name.log:"
    tail -n 60 "$BUILD/logs/$name.log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}: the inputs are in $BUILD/findings/ (add each to"
  echo "tests/fuzz/corpus/NAME/ once fixed)"
  exit 1
fi
echo "fuzz.sh: every target ran ${SECONDS_EACH}s without a finding"
