#!/usr/bin/env bash
# scripts/cross_aarch64.sh -- cross-build razor for aarch64 (64-bit ARM Linux) on a Debian 12 x86-64 machine and run
# its fast test suite under qemu-user. Exits non-zero when the build or any test fails.
#
#   bash scripts/cross_aarch64.sh                       # packages when missing, build-aarch64/ (Release), fast suite
#   bash scripts/cross_aarch64.sh -tc='gemm*' -d      # further arguments go to the doctest binary
#   RAZOR_AARCH64_BUILD_DIR=dir bash scripts/cross_aarch64.sh
#   RAZOR_QEMU_JOBS=8 bash scripts/cross_aarch64.sh       # emulators side by side (default: one per core)
#
# 1. Installs what is missing (idempotent, like scripts/setup.sh): Debian's aarch64 cross compiler
#    (g++-aarch64-linux-gnu), qemu-user, and the arm64 builds of the libraries razor links, through multiarch
#    (dpkg --add-architecture arm64). The header-only dependencies are the host's (scripts/setup.sh installs them).
# 2. Configures build-aarch64/ with cmake/aarch64-linux-gnu.cmake (Release; RAZOR_NATIVE is OFF in a cross build, so
#    the baseline is plain armv8-a) and builds razor and razor_tests.
# 3. Smoke check: `razor --version` under qemu-aarch64 must say "ISA generic": aarch64 runs the generic kernel family
#    (Eigen's GEMM, im2col convolutions; core/isa.h), the only one compiled for it.
# 4. The fast suite (every doctest case outside suite "slow", as ctest's `fast` entry) under qemu-aarch64. The tests
#    that start the CLI run build-aarch64/razor-emulated (tests/CMakeLists.txt), which execs razor under qemu; those
#    that call /usr/bin/python3 (PyTorch interop, when torch is installed) run the host's python natively. The cases
#    are cut into ranges that RAZOR_QEMU_JOBS emulators run side by side (below).
#
# Speed is not measured here: everything runs emulated, hundreds of times slower than natively on this x86-64 host
# (a resnet20 step at batch 16: 11 s with --threads 1; with 2 OpenMP threads it did not finish in 40 minutes, so
# set OMP_NUM_THREADS=1 for the emulated run). The whole fast suite needs hours of
# emulator time, hence the ranges over every core, and the doctest filters above for a part.
set -euo pipefail
cd "$(dirname "$0")/.."

# ---- 1. packages ----
# The arm64 -dev packages need the arm64 architecture in dpkg before apt can see them.
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "razor cross: adding the arm64 architecture to dpkg (multiarch)"
  $sudo dpkg --add-architecture arm64
  need_update=1
fi
packages=(cmake make libeigen3-dev doctest-dev libstb-dev nlohmann-json3-dev        # host side: cmake, headers
          g++-aarch64-linux-gnu qemu-user
          zlib1g-dev:arm64 libzip-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 libarchive-dev:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "razor cross: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
elif ((need_update)); then
  $sudo apt-get update -q
else
  echo "razor cross: all Debian packages present"
fi

# ---- 2. build ----
build_dir=${RAZOR_AARCH64_BUILD_DIR:-build-aarch64}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
t0=$(date +%s)
cmake -S . -B "$build_dir" -DCMAKE_TOOLCHAIN_FILE="$(pwd)/cmake/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target razor razor_tests
echo "razor cross: built $build_dir (aarch64, Release) in $(( $(date +%s) - t0 )) s"

# ---- 3. smoke check ----
qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)   # the target's loader and libc/libstdc++/libgomp from the cross tree
version=$("${qemu[@]}" "$build_dir/razor" --version)
echo "$version"
if ! grep -q "ISA generic" <<<"$version"; then
  echo "razor cross: razor --version under qemu-aarch64 does not say 'ISA generic'" >&2
  exit 1
fi

# ---- 4. fast suite ----
# Emulated, one process runs the cases one after another on about one core. So the cases are cut into ranges
# (doctest's --first/--last over the filtered list) and RAZOR_QEMU_JOBS emulators (default: every core) take ranges
# from a queue: eight ranges a job, since the heavy model-level cases sit close together. Each range writes
# its own log under $build_dir/qemu-logs/; the first failing range's log is printed. Test cases keep their temporary
# folders apart by process id, so the ranges may run side by side.
jobs=${RAZOR_QEMU_JOBS:-$(nproc)}
logs="$build_dir/qemu-logs"
rm -rf "$logs" && mkdir -p "$logs"
suite=("${qemu[@]}" "$build_dir/tests/razor_tests" --test-suite-exclude=slow --no-intro=true "$@")
count=$("${suite[@]}" --count | sed -n 's/.*passing the current filters: \([0-9]*\).*/\1/p')
if [[ -z "$count" || "$count" -eq 0 ]]; then
  echo "razor cross: no test case passes the filters ($*)" >&2
  exit 1
fi
ranges=$((8 * jobs)); ((ranges > count)) && ranges=$count
per=$(( (count + ranges - 1) / ranges ))
echo "razor cross: $count test cases in ranges of $per, $jobs emulators at a time (logs: $logs)"
t0=$(date +%s)
export RAZOR_CLI="$(pwd)/$build_dir/razor-emulated"
run_range() {   # run_range FIRST: the cases FIRST .. FIRST+per-1 (1-based), log to $logs/FIRST.log
  local first=$1 last=$(( $1 + per - 1 ))
  if "${suite[@]}" --first="$first" --last="$last" > "$logs/$first.log" 2>&1; then
    echo "razor cross: cases $first-$last passed ($(( $(date +%s) - t0 )) s)"
  else
    echo "razor cross: cases $first-$last FAILED, see $logs/$first.log" >&2
    return 1
  fi
}
export -f run_range
export per t0 logs
status=0
seq 1 "$per" "$count" | xargs -P "$jobs" -I{} bash -c "$(declare -p suite); run_range {}" || status=1
if ((status)); then
  failed=$(grep -L "Status: SUCCESS" "$logs"/*.log | head -1)   # a crash leaves no status line
  [[ -n "$failed" ]] && tail -n 60 "$failed" >&2
  echo "razor cross: the fast suite FAILED under qemu-aarch64" >&2
  exit 1
fi
echo "razor cross: fast suite passed under qemu-aarch64 in $(( $(date +%s) - t0 )) s ($count test cases)"
