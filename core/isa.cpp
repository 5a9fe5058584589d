// core/isa.cpp -- cpuid detection and RAZOR_ISA (see isa.h).
#include "core/isa.h"

#include <cstdlib>

#include "core/check.h"

namespace razor {

const char* isa_name(Isa isa) {
    constexpr const char* names[] = {"generic", "avx2", "avx512"};   // indexed by Isa
    return names[static_cast<int>(isa)];
}

Isa cpu_isa() {
#if defined(RAZOR_X86_KERNELS)
    // __builtin_cpu_supports reads cpuid and, for the AVX families, also XCR0: whether the OS saves ymm/zmm state.
    static const Isa best = [] {
        __builtin_cpu_init();
        const bool fma = __builtin_cpu_supports("fma");
        if (fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
            return Isa::Avx512;
        if (fma && __builtin_cpu_supports("avx2")) return Isa::Avx2;
        return Isa::Generic;
    }();
    return best;
#else
    return Isa::Generic;
#endif
}

bool isa_supported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(cpu_isa()); }

Isa resolve_isa(const std::string& requested, Isa cpu) {
    if (requested.empty()) return cpu;
    for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
        if (requested != isa_name(isa)) continue;
        if (static_cast<int>(isa) > static_cast<int>(cpu))
            throw Error(fmt("RAZOR_ISA: asked for ", requested, ", but this CPU (or build) runs at most ",
                            isa_name(cpu), "; hint: unset RAZOR_ISA or ask for a lower family"));
        return isa;
    }
    throw Error(fmt("RAZOR_ISA: expected generic, avx2 or avx512, got '", requested,
                    "'; hint: unset RAZOR_ISA to run the best family this CPU has (", isa_name(cpu), ")"));
}

Isa active_isa() {
    static const Isa active = [] {
        const char* requested = std::getenv("RAZOR_ISA");
        return resolve_isa(requested ? requested : "", cpu_isa());
    }();
    return active;
}

}  // namespace razor
