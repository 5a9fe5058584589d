#!/usr/bin/env bash
# scripts/test.sh -- the README's test command: set up (scripts/setup.sh), run the whole test suite, then the sanitizer
# stage. Exits non-zero when any test fails. `.ci/run` calls exactly this.
#
#   1. Release build (scripts/setup.sh) and every test: ctest (fast and slow).
#   2. Sanitizer stage: a second build in build-sanitize with -DRAZOR_SANITIZE=ON (gcc AddressSanitizer +
#      UndefinedBehaviorSanitizer, RelWithDebInfo at -O1 to keep the build short; the test binary links the Release
#      build's test objects, as the test sources are not instrumented anyway), running the fast suite and
#      fuzz_replay_<target>: every fuzz target replayed over its committed corpus (seeds and regress-* finds;
#      tests/fuzz/replay_main.cpp, no clang needed). Any sanitizer report aborts the test that hit it.
#
#   RAZOR_SANITIZE_STAGE=0 bash scripts/test.sh      skip stage 2 (e.g. while iterating locally)
#   RAZOR_SANITIZE_BUILD_DIR=dir                     where stage 2 builds (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir "${RAZOR_BUILD_DIR:-build}" --output-on-failure

if [[ "${RAZOR_SANITIZE_STAGE:-1}" != 0 ]]; then
  san=${RAZOR_SANITIZE_BUILD_DIR:-build-sanitize}
  echo "razor test: sanitizer stage (ASan + UBSan) in $san"
  # -O1: ASan's recommended level, and a much shorter build than -O2/-O3 on CI's 2 cores; -g1: line numbers in reports.
  cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DRAZOR_SANITIZE=ON -DRAZOR_BUILD_BENCH=OFF -DRAZOR_TEST_OBJECTS_FROM="$(pwd)/${RAZOR_BUILD_DIR:-build}" >/dev/null
  cmake --build "$san" -j"$(nproc)"
  # halt_on_error / abort_on_error: the first report fails the test; detect_leaks: LeakSanitizer at exit.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    ctest --test-dir "$san" -L fast --output-on-failure
fi
