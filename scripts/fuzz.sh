#!/usr/bin/env bash
# scripts/fuzz.sh -- build razor's libFuzzer targets (tests/fuzz) with clang + ASan + UBSan and run them.
#
#   bash scripts/fuzz.sh                 every target for 10^6 executions (-runs), starting from its seed corpus
#   bash scripts/fuzz.sh --runs N        every target for N executions
#   bash scripts/fuzz.sh --smoke         every target once over its committed seed corpus only (seconds; CI-sized)
#   bash scripts/fuzz.sh --time S        every target for S seconds instead of a number of executions
#   bash scripts/fuzz.sh TARGET...       only these targets (safetensors idx idx_gz cifar image args train_state)
#
# Build folder: $RAZOR_FUZZ_BUILD_DIR (default build-fuzz). New inputs the fuzzer finds go to
# build-fuzz/corpus/<target>/ (not committed); crashes are written as build-fuzz/crashes/<target>/crash-*, and the
# script exits non-zero. Reproduce one with: build-fuzz/fuzz/fuzz_<target> build-fuzz/crashes/<target>/crash-...
# docs/reliability.md describes the targets and the figures measured.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1000000 seconds="" smoke=0 targets=()
while (($#)); do
    case "$1" in
        --smoke) smoke=1 ;;
        --runs) runs="$2"; shift ;;
        --time) seconds="$2"; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
((${#targets[@]})) || targets=(safetensors idx idx_gz cifar image args train_state)

# Idempotent install of the toolchain: clang and its libFuzzer/sanitizer runtimes (Debian 12: clang 14).
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "fuzz.sh: installing clang and libclang-rt-14-dev" >&2
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq clang libclang-rt-14-dev
fi

build="${RAZOR_FUZZ_BUILD_DIR:-build-fuzz}"
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAZOR_FUZZ=ON \
    -DRAZOR_OPENMP=OFF -DRAZOR_BUILD_TESTS=OFF -DRAZOR_BUILD_APPS=OFF -DRAZOR_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"${RAZOR_JOBS:-2}" --target $(printf 'fuzz_%s ' "${targets[@]}")

status=0
for t in "${targets[@]}"; do
    seeds="tests/fuzz/corpus/$t" corpus="$build/corpus/$t" crashes="$build/crashes/$t"
    mkdir -p "$corpus" "$crashes"
    # -max_len: a CIFAR-100 input needs whole 3074-byte records; the others find their bugs in small inputs.
    max_len=4096; [ "$t" = cifar ] && max_len=8192
    opts=(-max_len=$max_len -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1)
    echo "== fuzz_$t" >&2
    if ((smoke)); then
        # -runs=0 executes every seed once and stops: the corpus is a regression test.
        "$build/fuzz/fuzz_$t" "${opts[@]}" -runs=0 "$seeds" || status=1
    elif [ -n "$seconds" ]; then
        "$build/fuzz/fuzz_$t" "${opts[@]}" -max_total_time="$seconds" "$corpus" "$seeds" || status=1
    else
        "$build/fuzz/fuzz_$t" "${opts[@]}" -runs="$runs" "$corpus" "$seeds" || status=1
    fi
done
((status == 0)) || echo "fuzz.sh: a target failed; its input is in $build/crashes/" >&2
exit $status
