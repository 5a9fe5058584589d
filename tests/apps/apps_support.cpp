// tests/apps/apps_support.cpp -- see apps_support.h.
#include "apps/apps_support.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/rng.h"
#include "core/runtime.h"

namespace razor::test {
namespace fs = std::filesystem;

namespace {
void write_records(const std::string& path, int count, int first, Generator& gen) {
    std::string bytes;
    for (int i = first; i < first + count; ++i) {
        const int k = i % 10;
        bytes.push_back(static_cast<char>(k));
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 32; ++y)
                for (int x = 0; x < 32; ++x) {
                    // colour by class, a bright quadrant by class, noise on top
                    int v = 40 + 20 * ((k + c * 3) % 10);
                    if ((y < 16) == (k % 2 == 0) && (x < 16) == (k / 2 % 2 == 0)) v += 60;
                    v += static_cast<int>(gen.randint(41)) - 20;
                    bytes.push_back(static_cast<char>(std::clamp(v, 0, 255)));
                }
    }
    std::ofstream(path, std::ios::binary) << bytes;
}
}  // namespace

void write_fake_cifar10(const std::string& dir, int train_per_file, int test, int seed) {
    fs::create_directories(dir);
    Generator gen(static_cast<uint64_t>(seed));
    for (int b = 1; b <= 5; ++b)
        write_records(fmt(dir, "/data_batch_", b, ".bin"), train_per_file, (b - 1) * train_per_file, gen);
    write_records(dir + "/test_batch.bin", test, 0, gen);
    std::ofstream(dir + "/batches.meta.txt")
        << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n";
}

namespace {
int g_saved_stdout = -1;
}

std::string capture_begin() {
    std::fflush(stdout);
    const std::string path = fmt("/tmp/razor_apps_capture_", ::getpid(), ".txt");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    RAZOR_CHECK(fd >= 0) << "cannot create " << path;
    g_saved_stdout = ::dup(1);
    ::dup2(fd, 1);
    ::close(fd);
    return path;
}

std::string capture_end(const std::string& path) {
    std::fflush(stdout);
    ::dup2(g_saved_stdout, 1);
    ::close(g_saved_stdout);
    g_saved_stdout = -1;
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    ::unlink(path.c_str());
    return ss.str();
}

int run_command(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args) {
    const int threads = num_threads();
    try {
        const int rc = command(args);
        set_num_threads(threads);
        return rc;
    } catch (...) {
        set_num_threads(threads);
        throw;
    }
}

std::string run_ok(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args) {
    int rc = -1;
    std::string error;
    std::string out = capture_stdout([&] {
        try {
            rc = run_command(command, args);
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    INFO(out);
    REQUIRE_MESSAGE(error.empty(), error);
    REQUIRE(rc == 0);
    return out;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

bool same_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, t] : a) {
        auto it = b.find(k);
        if (it == b.end() || it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) return false;
        const Tensor x = t.contiguous(), y = it->second.contiguous();
        if (x.nbytes() && std::memcmp(x.storage()->data, y.storage()->data, x.nbytes()) != 0) return false;
    }
    return true;
}

#ifdef RAZOR_CLI
std::string razor_cli() {
    const char* env = std::getenv("RAZOR_CLI");
    return env && *env ? env : RAZOR_CLI;
}
#endif

}  // namespace razor::test
