// core/isa.h -- which family of SIMD kernels razor runs: the best one the CPU has, chosen once at start-up.
//
// reference: ATen's ATEN_CPU_CAPABILITY (the same idea: one binary, kernels per ISA, a variable that lowers the
// choice). docs: docs/bench-ops.md "Kernel families (ISA dispatch)".
//
// Families, best last: Generic (Eigen and the portable C++ loops, compiled at the build's baseline flags), Avx2
// (AVX2 + FMA kernel files) and Avx512 (AVX-512 F/BW/DQ/VL kernel files). On x86-64 every build compiles all three
// (the kernel files carry their own target flags, CMakeLists.txt), and nothing calls into a family unless cpu_isa()
// says the CPU runs it. Other targets have Generic only.
//
// RAZOR_ISA=generic|avx2|avx512 lowers the choice (to test or benchmark a family on a better machine); asking for a
// family the CPU lacks, or for an unknown name, is an error. The banner and `razor bench --json` ("isa") say which
// family runs. Kernel entry points that tests drive family by family take an Isa (gemm_with, the Winograd kernels);
// the rest consult active_isa().
#pragma once

#include <string>

namespace razor {

enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);   // "generic", "avx2", "avx512"

// The best family this build has compiled in and this CPU (cpuid, with the OS saving the wide registers) runs.
Isa cpu_isa();

// Whether this process may run family isa: isa <= cpu_isa().
bool isa_supported(Isa isa);

// The family the process runs: cpu_isa(), or the lower one RAZOR_ISA names. Computed on the first call and constant
// afterwards; throws Error if RAZOR_ISA is unknown or names a family the CPU lacks.
Isa active_isa();

// The rule behind active_isa: requested is RAZOR_ISA's value (empty: unset), cpu the CPU's best family.
Isa resolve_isa(const std::string& requested, Isa cpu);

}  // namespace razor
