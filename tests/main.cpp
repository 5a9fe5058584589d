// tests/main.cpp -- doctest entry point. Tests fail through the exit code.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/check.h"
#include "core/isa.h"
#include "core/runtime.h"

// Exit status for "this machine cannot run what was asked": ctest's SKIP_RETURN_CODE of the per-family entries
// (tests/CMakeLists.txt), which set RAZOR_ISA to a family the CPU may lack.
constexpr int kSkipped = 77;

int main(int argc, char** argv) {
    try {
        razor::active_isa();
    } catch (const razor::Error& e) {
        std::fprintf(stderr, "razor_tests: %s\nrazor_tests: skipped (exit %d)\n", e.what(), kSkipped);
        return kSkipped;
    }
    razor::set_num_threads(2);
    std::printf("%s\n", razor::runtime_banner().c_str());
    doctest::Context context(argc, argv);
    return context.run();
}
