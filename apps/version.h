// apps/version.h -- what `razor --version` prints: the version, the git commit the build was configured from, the
// kernel family (ISA) this CPU runs, the compiler and the build type. docs: docs/cli.md "Errors and help".
#pragma once

#include <string>

namespace razor::apps {

// "razor 0.1.0 (commit f17cfa5)\nISA avx2 | -march=native | GCC 12.2.0 | Release build | OpenMP on\n". The commit is
// `git rev-parse --short HEAD` when CMake configured the build ("unknown" outside a git checkout); a later commit
// shows only after the next configure.
std::string version_text();

}  // namespace razor::apps
