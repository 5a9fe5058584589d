// apps/threads.h -- the thread count a command runs with: --threads N, else OMP_NUM_THREADS (the variable every
// OpenMP program reads), else every core; more threads than cores is allowed but warned about on stderr.
//
// reference: torch.get_num_threads() (OMP_NUM_THREADS, else the physical cores). docs: docs/cli.md "Threads".
#pragma once

#include <cstdint>
#include <string>

namespace razor::apps {

struct ThreadChoice {
    int threads = 1;
    std::string source;    // "--threads", "OMP_NUM_THREADS" or "all cores"
    std::string warning;   // "" or a line for stderr (oversubscription, an unreadable OMP_NUM_THREADS)
};

// The rule, without side effects: `flag` > 0 wins; else `omp_env` (OMP_NUM_THREADS; nullptr = unset; its first
// comma-separated entry, a positive integer) if valid; else `cores`. `command` prefixes the warning.
ThreadChoice choose_threads(const std::string& command, int64_t flag, const char* omp_env, int cores);

// choose_threads with the process's OMP_NUM_THREADS and core count; prints the warning to stderr and sets the
// OpenMP/Eigen thread count. Returns the count.
int apply_threads(const std::string& command, int64_t flag);

}  // namespace razor::apps
