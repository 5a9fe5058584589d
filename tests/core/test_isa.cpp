// tests/core/test_isa.cpp -- the kernel-family choice (core/isa.h): RAZOR_ISA's rule (lower only, clear errors), and
// that the active family is one this CPU runs.
#include <doctest/doctest.h>

#include <string>

#include "core/check.h"
#include "core/isa.h"

using namespace razor;

TEST_CASE("isa: RAZOR_ISA lowers the family, never raises it, and names what it got") {
    CHECK(resolve_isa("", Isa::Avx2) == Isa::Avx2);
    CHECK(resolve_isa("generic", Isa::Avx512) == Isa::Generic);
    CHECK(resolve_isa("avx2", Isa::Avx512) == Isa::Avx2);
    CHECK(resolve_isa("avx512", Isa::Avx512) == Isa::Avx512);
    CHECK(resolve_isa("avx2", Isa::Avx2) == Isa::Avx2);
    // the message names the variable, what was asked and what the CPU has
    CHECK_THROWS_WITH_AS(resolve_isa("avx512", Isa::Avx2),
                         doctest::Contains("RAZOR_ISA: asked for avx512, but this CPU (or build) runs at most avx2"),
                         Error);
    CHECK_THROWS_AS(resolve_isa("avx2", Isa::Generic), Error);
    CHECK_THROWS_AS(resolve_isa("AVX2", Isa::Avx512), Error);   // names are lower case, as isa_name writes them
    CHECK_THROWS_AS(resolve_isa("sse4", Isa::Avx512), Error);
}

TEST_CASE("isa: the active family is one the CPU runs, and the names round-trip") {
    CHECK(isa_supported(active_isa()));
    CHECK(isa_supported(Isa::Generic));
    CHECK(isa_supported(cpu_isa()));
    for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
        if (isa_supported(isa)) CHECK(resolve_isa(isa_name(isa), cpu_isa()) == isa);
}
