# cmake/aarch64-linux-gnu.cmake -- cross-compile razor for 64-bit ARM Linux on a Debian 12 x86-64 machine.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release
#
# What it expects (scripts/cross_aarch64.sh installs it): Debian's g++-aarch64-linux-gnu (the compilers and the
# target's libc/libstdc++/libgomp in /usr/aarch64-linux-gnu), the arm64 multiarch -dev packages of the libraries
# razor links (dpkg --add-architecture arm64; headers in /usr/include[/aarch64-linux-gnu], libraries in
# /usr/lib/aarch64-linux-gnu), and qemu-user to run the results. Header-only dependencies (Eigen, nlohmann-json,
# doctest, stb) are architecture-independent and come from the host's /usr/include and /usr/share.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Debian multiarch: find_library looks in <prefix>/lib/aarch64-linux-gnu, so /usr/lib/aarch64-linux-gnu is searched
# and /usr/lib/x86_64-linux-gnu never is.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The cross toolchain's own target tree first. Headers, libraries and package configs are also looked up in the host
# prefixes (BOTH): with multiarch the arm64 -dev packages install into /usr itself, not into a separate sysroot, and
# the header-only packages' CMake configs live in /usr/share and /usr/lib/cmake. Programs are always the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config (used by some Find modules for hints) must report the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# How CMake (add_test with a target as the command, try_run) and tests/CMakeLists.txt run aarch64 binaries here:
# qemu-user with the arm64 multiarch runtime (/lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu: libc6,
# libstdc++6, libgomp1 :arm64), the tree the arm64 -dev packages' libraries live in. Not -L /usr/aarch64-linux-gnu:
# that tree's loader is the cross toolchain's glibc build, and paired with the multiarch libc.so.6 it hung every
# thread start (pthread_create spun forever; a two-thread OpenMP loop never ended).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
