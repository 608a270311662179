#!/usr/bin/env bash
# scripts/dev.sh: set up a Debian 12 machine, build tidemark, and run the
# demo or the whole test suite.  The README's two commands call this.
#
#   scripts/dev.sh demo    install what is missing, build, run the demo
#   scripts/dev.sh test    install what is missing, build, run every test:
#                          a Release build (-O3 -g, -Werror), then ASan+UBSan,
#                          then TSan (the tests with threads or signals),
#                          then every fuzz target for 15 s, two at a time
#                          (scripts/fuzz.sh): the fuzz minute
#   scripts/dev.sh setup   only install the Debian packages
#   scripts/dev.sh build   only build (build/)
#
# The Python side (a CUDA build of PyTorch 2.14 for the simulated GPU, and
# pytest) lives in a venv made once from Debian's /usr/bin/python3 outside
# the clone, so fresh clones on one machine (CI's) share its 5.5 GB:
# $TIDEMARK_VENV, by default ~/.cache/tidemark/venv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEV_START=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 2)

# Debian 12 packages tidemark builds and tests with.
PACKAGES=(
  build-essential cmake pkg-config git python3 python3-venv
  libunwind-dev libmsgpack-dev libzstd-dev libjemalloc-dev libmimalloc-dev libdw-dev libelf-dev
  libcmocka-dev libsqlite3-dev sqlite3 libze-dev libze1 libamdhip64-dev
  clang libclang-rt-14-dev
  openmpi-bin libopenmpi-dev
  python3-torch python3-numpy python3-pytest
  chromium
)
# node and npm for the browser test, unless some node (e.g. nodesource's,
# which conflicts with Debian's npm) is already there.
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

setup() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "dev.sh: all Debian packages present"
    return
  fi
  echo "dev.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The venv's packages, pinned: the symbol closure the simulated GPU provides
# is that of this exact torch wheel.
VENV=${TIDEMARK_VENV:-$HOME/.cache/tidemark/venv}
VENV_PACKAGES=(torch==2.14.1 torchvision==0.29.1 pytest)

venv() {
  if "$VENV/bin/python" -c 'import torch, torchvision, pytest; assert torch.__version__.startswith("2.14.1")' 2>/dev/null; then
    echo "dev.sh: venv $VENV ready (torch 2.14.1)"
    return
  fi
  echo "dev.sh: making venv $VENV (torch 2.14.1, CUDA build, ~5.5 GB; once per machine)"
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "${VENV_PACKAGES[@]}" 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c 'import torch, torchvision, pytest' ||
    { echo "dev.sh: the venv $VENV could not be made; see the pip output above" >&2; exit 1; }
}

# The browser test's npm packages (tests/browser/package-lock.json); without
# them (offline) that one test reports SKIPPED.
browser_deps() {
  npm ci --prefix tests/browser --no-audit --no-fund ||
    echo "dev.sh: npm ci failed; the browser test will be SKIPPED"
}

# build DIR [cmake options...]
build() {
  local dir=$1; shift
  cmake -S "$ROOT" -B "$dir" -DTDM_WERROR=ON -DTDM_VENV_PYTHON="$VENV/bin/python" "$@" >"$dir.cmake.log" 2>&1 ||
    { cat "$dir.cmake.log"; exit 1; }
  cmake --build "$dir" -j"$JOBS"
}

# run_tests DIR LABEL: one test more than cores, since a tenth of the
# suite's time is spent waiting (on child processes, signals, pipes):
# -j3 on 2 cores took the Release tests from 428 s to 394 s, all passing.
run_tests() {
  echo "== tests: $2"
  (cd "$1" && ctest --output-on-failure -j"$((JOBS + 1))" --timeout 600)
}

# took WHAT: one line with the seconds since the last one (CI's log then
# says where its minutes go).
STAGE_START=$(date +%s)
took() {
  local now
  now=$(date +%s)
  echo "dev.sh: $1 took $((now - STAGE_START)) s"
  STAGE_START=$now
}

demo() {
  build build
  scripts/demo.sh build/tidemark build/examples/train_sim build/demo
}

tests() {
  # The suite runs on a Release build (-O3 -g): -O3 warns where -O2 does
  # not (truncation, dangling pointers), inlines what users' builds inline
  # (the stacks and out-of-memory sites must see through it), and the
  # bench/ figures in docs/ come from it.
  took "set-up"
  build build-release -DCMAKE_BUILD_TYPE=Release
  took "the Release build"
  run_tests build-release "Release (-O3 -g), -Werror"
  took "the Release tests"
  build build-asan -DTDM_SANITIZE=address -DTDM_BUILD_BENCH=OFF
  took "the ASan build"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-asan "ASan + UBSan"
  took "the ASan tests"
  build build-tsan -DTDM_SANITIZE=thread -DTDM_BUILD_BENCH=OFF
  took "the TSan build"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_tests build-tsan "TSan"
  took "the TSan tests"
  # The fuzz minute: eight readers, two at a time, 15 s each.
  echo "== fuzzing: each reader for 15 s under ASan+UBSan (build-fuzz, clang)"
  scripts/fuzz.sh 15
  took "fuzzing (its build included)"
  echo "dev.sh: all test suites passed in $(( $(date +%s) - DEV_START )) s"
}

case "${1:-}" in
  setup) setup ;;
  build) setup; venv; build build ;;
  demo)  setup; venv; demo ;;
  test)  setup; venv; browser_deps; tests ;;
  *) echo "usage: scripts/dev.sh demo|test|setup|build" >&2; exit 2 ;;
esac
