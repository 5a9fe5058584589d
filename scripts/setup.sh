#!/usr/bin/env bash
# scripts/setup.sh -- install what razor needs from Debian 12 (only what is missing), then build it (Release).
#
#   bash scripts/setup.sh              # packages + Release build in ./build (-march=native)
#   bash scripts/setup.sh --bench      # also PyTorch, torchvision and matplotlib, for the side-by-side benchmarks in bench/
#   RAZOR_BUILD_DIR=out RAZOR_CMAKE_ARGS="-DRAZOR_NATIVE=OFF" bash scripts/setup.sh
#
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libeigen3-dev doctest-dev libstb-dev nlohmann-json3-dev zlib1g-dev libzip-dev
          libcurl4-openssl-dev libssl-dev libarchive-dev dataset-fashion-mnist
          librsvg2-bin)   # rsvg-convert: the tests render every SVG plot to PNG
# --bench: PyTorch for the side-by-side benchmarks, with OpenBLAS as the system BLAS (Debian's torch otherwise calls the
# unoptimised reference libblas for F.linear, which would flatter razor), torchvision for the ImageNet families and
# matplotlib for the benchmarks' plots.
if [[ " $* " == *" --bench "* ]]; then
  packages+=(python3-torch python3-torchvision python3-numpy libopenblas0-pthread python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "razor setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "razor setup: all Debian packages present"
fi

build_dir=${RAZOR_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${RAZOR_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
echo "razor setup: built $build_dir (Release)"
