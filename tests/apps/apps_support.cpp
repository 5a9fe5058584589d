// tests/apps/apps_support.cpp -- see apps_support.h.
#include "apps/apps_support.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <zlib.h>
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

// An IDX file of unsigned bytes: magic 0x0000 08 rank, the dimensions big-endian, the data; gzip-compressed.
void write_idx_gz(const std::string& path, const std::vector<uint32_t>& dims, const std::string& data) {
    std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims)
        for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
    bytes += data;
    gzFile f = gzopen(path.c_str(), "wb");
    RAZOR_CHECK(f != nullptr) << "cannot write " << path;
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
}
}  // namespace

void write_fake_fashion_mnist(const std::string& dir, int train, int test) {
    fs::create_directories(dir);
    for (const auto& [prefix, n] : {std::pair<std::string, int>{"train", train}, {"t10k", test}}) {
        std::string images, labels;
        for (int i = 0; i < n; ++i) {
            const int k = i % 10;
            labels.push_back(static_cast<char>(k));
            for (int y = 0; y < 28; ++y)
                for (int x = 0; x < 28; ++x)
                    images.push_back(static_cast<char>(((y / 3 + x / 7 * k) % 10 == k % 5) ? 200 : 20 + (i * 7 + x) % 40));
        }
        write_idx_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", {static_cast<uint32_t>(n), 28, 28}, images);
        write_idx_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {static_cast<uint32_t>(n)}, labels);
    }
}

CliRun run_cli_status(const std::string& args, const std::string& env) {
    CliRun r;
#ifdef RAZOR_CLI
    const std::string cmd = env + (env.empty() ? "" : " ") + razor_cli() + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    RAZOR_CHECK(p != nullptr) << "cannot run " << cmd;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#endif
    return r;
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
int spawn_razor(const std::vector<std::string>& args, const std::string& log_path) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
        const std::string cli = razor_cli();
        std::vector<char*> argv{const_cast<char*>(cli.c_str())};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(cli.c_str(), argv.data());
        ::_exit(127);
    }
    return pid;
}

std::string razor_cli() {
    const char* env = std::getenv("RAZOR_CLI");
    return env && *env ? env : RAZOR_CLI;
}
#endif

}  // namespace razor::test
