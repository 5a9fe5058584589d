// core/runtime.h -- threads and the start-up banner.
//
// razor parallelises with OpenMP (element-wise loops, conv over the batch, Eigen's GEMM). The thread count is
// a run-time setting (set_num_threads, or --threads on the CLI), never an environment switch that hides the
// fast path. The banner says what is active so no slow fallback goes unnoticed.
#pragma once

#include <string>

namespace razor {

void set_num_threads(int n);   // n <= 0: all hardware threads
int num_threads();
bool openmp_enabled();
const char* build_type();      // "Release", "Debug", ...
// Whether razor's library was compiled with AddressSanitizer (the sanitizer stage of scripts/test.sh): kernels then
// run at another optimisation level, which a few numeric tests allow for.
bool sanitized_build();

// "razor | Release build | OpenMP on, 2 threads | -march=native | Eigen 3.4.0 | ISA avx2 | GEMM razor AVX2 |
//  save policy dense" (the ISA part adds "(RAZOR_ISA; the CPU has avx512)" when lowered)
std::string runtime_banner();

// What the build's baseline code (Eigen, the element-wise loops, everything outside the dispatched GEMM and
// Winograd families) was compiled for: "-march=native" or "portable ISA", and the widest vector ISA the compiler
// was allowed, e.g. "-march=native (baseline avx512)", "portable ISA (baseline avx2)" for -march=haswell.
std::string build_target();

}  // namespace razor
