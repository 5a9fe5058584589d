// apps/threads.cpp -- see threads.h.
#include "apps/threads.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/check.h"
#include "core/runtime.h"

namespace razor::apps {

ThreadChoice choose_threads(const std::string& command, int64_t flag, const char* omp_env, int cores) {
    if (cores < 1) cores = 1;
    ThreadChoice c{cores, "all cores", ""};
    if (flag > 0) {
        c.threads = static_cast<int>(flag), c.source = "--threads";
    } else if (omp_env && *omp_env) {
        const std::string text(omp_env);
        const std::string head = text.substr(0, text.find(','));
        char* end = nullptr;
        const long n = std::strtol(head.c_str(), &end, 10);
        if (!head.empty() && *end == '\0' && n >= 1 && n <= 4096)
            c.threads = static_cast<int>(n), c.source = "OMP_NUM_THREADS";
        else
            c.warning = fmt(command, ": warning: OMP_NUM_THREADS='", text, "' is not a positive integer; using all ",
                            cores, cores == 1 ? " core" : " cores", "; hint: OMP_NUM_THREADS=2 or --threads 2");
    }
    if (c.threads > cores)
        c.warning = fmt(command, ": warning: ", c.source, " asks for ", c.threads, " threads but this machine has ",
                        cores, cores == 1 ? " core" : " cores", "; more threads than cores slow every step down; hint: "
                        "--threads ", cores);
    return c;
}

int apply_threads(const std::string& command, int64_t flag) {
    const ThreadChoice c = choose_threads(command, flag, std::getenv("OMP_NUM_THREADS"),
                                          static_cast<int>(std::thread::hardware_concurrency()));
    if (!c.warning.empty()) std::fprintf(stderr, "%s\n", c.warning.c_str());
    set_num_threads(c.threads);
    return c.threads;
}

}  // namespace razor::apps
