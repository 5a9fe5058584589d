#!/usr/bin/env bash
# scripts/cross_aarch64.sh -- cross-build razor for aarch64 (64-bit ARM Linux) on a Debian 12 x86-64 machine and run
# its unit-level test suite under qemu-user. Exits non-zero when the build or any test fails.
#
#   bash scripts/cross_aarch64.sh                       # packages when missing, build-aarch64/ (Release), unit suite
#   bash scripts/cross_aarch64.sh -tc='gemm*' -d      # further arguments go to the doctest binary
#   bash scripts/cross_aarch64.sh --test-suite-exclude=slow   # the whole fast suite (the last filter given wins)
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
# 4. The unit-level suite under qemu-aarch64: every doctest case outside the suites "slow", "cli-run" (the CLI's
#    end-to-end training runs) and "model-scale" (sweeps and numerics of the largest zoo models) -- the suite the
#    sanitizer build and the lower kernel families run (tests/CMakeLists.txt). Every op, kernel, codec, file format,
#    loader and checkpoint has its tests there. The tests that start the CLI run build-aarch64/razor-emulated, which
#    execs razor under qemu; those that call /usr/bin/python3 (PyTorch interop, when torch is installed) run the
#    host's python natively. The cases are cut into ranges that RAZOR_QEMU_JOBS emulators run side by side (below).
#
# Speed is not measured here. qemu-user emulates every floating-point operation in software (a helper call per FMA
# lane), so arithmetic-heavy code runs 100-400x slower than razor's generic kernels natively: a vit_tiny training
# step at batch 2 on one thread takes 65 ms natively and 26 s emulated. The cli-run and model-scale cases take about
# 55 s natively on one core and well over half an hour emulated on 2 cores; they compose the units tested here and
# run in full in the native build. The unit-level suite takes about 6 minutes on 2 cores.
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
          libc6:arm64 libstdc++6:arm64 libgomp1:arm64                                       # the runtime qemu runs
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
# The arm64 multiarch runtime (/lib/ld-linux-aarch64.so.1, /lib/aarch64-linux-gnu), as cmake/aarch64-linux-gnu.cmake
# says; not -L /usr/aarch64-linux-gnu, whose loader with the multiarch libc hung every thread start.
qemu=(qemu-aarch64)
version=$("${qemu[@]}" "$build_dir/razor" --version)
echo "$version"
if ! grep -q "ISA generic" <<<"$version"; then
  echo "razor cross: razor --version under qemu-aarch64 does not say 'ISA generic'" >&2
  exit 1
fi

# ---- 4. unit-level suite ----
# Emulated, one process runs the cases one after another on about one core. So the cases are cut into ranges
# (doctest's --first/--last over the filtered list) and RAZOR_QEMU_JOBS emulators (default: every core) take ranges
# from a queue: eight ranges a job, since the heavier cases sit close together. Each range writes
# its own log under $build_dir/qemu-logs/; the first failing range's log is printed. Test cases keep their temporary
# folders apart by process id, so the ranges may run side by side.
jobs=${RAZOR_QEMU_JOBS:-$(nproc)}
logs="$build_dir/qemu-logs"
rm -rf "$logs" && mkdir -p "$logs"
suite=("${qemu[@]}" "$build_dir/tests/razor_tests" --test-suite-exclude=slow,cli-run,model-scale --no-intro=true "$@")
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
  echo "razor cross: the unit-level suite FAILED under qemu-aarch64" >&2
  exit 1
fi
echo "razor cross: unit-level suite passed under qemu-aarch64 in $(( $(date +%s) - t0 )) s ($count test cases)"
