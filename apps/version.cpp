// apps/version.cpp -- see version.h. RAZOR_VERSION and RAZOR_GIT_COMMIT come from apps/CMakeLists.txt, set on this
// file alone so that a new commit recompiles nothing else.
#include "apps/version.h"

#include "core/check.h"
#include "core/isa.h"
#include "core/runtime.h"

#ifndef RAZOR_VERSION
#define RAZOR_VERSION "unknown"
#endif
#ifndef RAZOR_GIT_COMMIT
#define RAZOR_GIT_COMMIT "unknown"
#endif

namespace razor::apps {
namespace {

std::string compiler() {
#if defined(__clang__)
    return fmt("clang ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#elif defined(__GNUC__)
    return fmt("GCC ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
    return "unknown compiler";
#endif
}

}  // namespace

std::string version_text() {
    std::string isa = fmt("ISA ", isa_name(active_isa()));
    if (active_isa() != cpu_isa()) isa += fmt(" (RAZOR_ISA; the CPU has ", isa_name(cpu_isa()), ")");
    return fmt("razor ", RAZOR_VERSION, " (commit ", RAZOR_GIT_COMMIT, ")\n", isa, " | ", build_target(), " | ", compiler(),
               " | ", build_type(), " build | OpenMP ", openmp_enabled() ? "on" : "off", "\n");
}

}  // namespace razor::apps
