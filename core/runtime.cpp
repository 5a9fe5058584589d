// core/runtime.cpp -- threads and the start-up banner (see runtime.h).
#include "core/runtime.h"

#include <Eigen/Core>
#include <thread>

#include "core/check.h"
#include "core/gemm.h"
#include "core/isa.h"
#include "core/tape.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef RAZOR_BUILD_TYPE
#define RAZOR_BUILD_TYPE "unknown"
#endif

namespace razor {

void set_num_threads(int n) {
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    if (n <= 0) n = 1;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    Eigen::setNbThreads(n);
}

int num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

bool openmp_enabled() {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
}

const char* build_type() { return RAZOR_BUILD_TYPE; }

bool sanitized_build() {
#ifdef __SANITIZE_ADDRESS__   // gcc defines it under -fsanitize=address
    return true;
#else
    return false;
#endif
}

std::string build_target() {
#ifdef RAZOR_NATIVE_BUILD
    const std::string target = "-march=native";
#else
    const std::string target = "portable ISA";
#endif
#if defined(__AVX512F__)
    return target + " (baseline avx512)";
#elif defined(__AVX2__)
    return target + " (baseline avx2)";
#elif defined(__x86_64__)
    return target + " (baseline sse2)";
#else
    return target + " (baseline generic)";
#endif
}

std::string runtime_banner() {
    std::string banner = fmt("razor | ", build_type(), " build | ");
    banner += openmp_enabled() ? fmt("OpenMP on, ", num_threads(), num_threads() == 1 ? " thread" : " threads")
                               : std::string("OpenMP OFF: single thread (slow; install libomp-dev or use g++)");
    banner += " | " + build_target();
    banner += fmt(" | Eigen ", EIGEN_WORLD_VERSION, ".", EIGEN_MAJOR_VERSION, ".", EIGEN_MINOR_VERSION);
    banner += fmt(" | ISA ", isa_name(active_isa()));
    if (active_isa() != cpu_isa()) banner += fmt(" (RAZOR_ISA; the CPU has ", isa_name(cpu_isa()), ")");
    banner += fmt(" | GEMM ", gemm_engine_name());
    banner += " | save policy " + active_save_policy().name();
    if (std::string(build_type()) == "Debug")
        banner += "\n*** DEBUG BUILD: kernels are 10-50x slower; configure with -DCMAKE_BUILD_TYPE=Release ***";
    return banner;
}

}  // namespace razor
