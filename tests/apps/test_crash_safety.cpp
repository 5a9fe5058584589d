// tests/apps/test_crash_safety.cpp -- checkpoints survive SIGKILL and full or read-only disks:
//   * a child process saves real checkpoints in a loop while the parent SIGKILLs it at random moments; after every
//     kill the checkpoint loads and equals one of the states written (fast: 20 kills; slow: 200);
//   * ENOSPC / EACCES / EIO injected into write_file_atomic leave the previous checkpoint untouched, with a clear
//     error;
//   * razor train SIGKILLed at random moments and resumed each time logs the same losses, bit for bit, as a run that
//     was never interrupted, and ends with bit-identical weights (fast: 4 kills; slow: 30); the same for razor
//     sparse-train across both phases (fast: 3 kills; slow: 20).
// docs/reliability.md "Crash safety".
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "core/core.h"
#include "models/registry.h"

using namespace razor;
using doctest::Contains;
namespace fs = std::filesystem;

namespace {

// State i: resnet20 weights from seed i (1.1 MB) and a train state with a momentum-sized buffer and the epoch.
train::Checkpoint make_state(int i) {
    Generator gen(static_cast<uint64_t>(i));
    train::Checkpoint c;
    c.model = models::make_model("resnet20", 10, gen)->state_dict();
    for (auto& [k, t] : c.model) t = t.clone();   // own the storage: no aliasing of a model that goes away
    c.model_metadata = {{"epoch", fmt(i)}};
    c.train_state["epoch"] = Tensor::from_vector_i64({}, {i});
    c.train_state["optimizer.buffer"] = Tensor::randn({270000}, gen);
    c.train_metadata = {{"epoch", fmt(i)}};
    return c;
}

// Kills a checkpoint writer `kills` times; returns how many kills interrupted a save (left a temporary folder or a
// new NAME.old behind).
int kill_writer_repeatedly(int kills, uint64_t seed) {
    test::TempDir tmp(fmt("kill_writer_", seed));
    const std::string root = tmp / "run";
    std::vector<train::Checkpoint> states;
    for (int i = 0; i < 4; ++i) states.push_back(make_state(i));
    // There is always a previous checkpoint; its save time (fsyncs included, on this disk under this load) sets the
    // window the kills are drawn from: 0 to 3 saves, so kills land in every phase of the first few saves.
    const auto t0 = std::chrono::steady_clock::now();
    train::save_checkpoint(root, "last", states[0]);
    const int64_t save_us = std::max<int64_t>(
        1000, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());

    Generator gen(seed);
    int in_write = 0, in_switch = 0, round = 0;
    std::set<std::string> seen;
    for (int k = 0; k < kills; ++k) {
        const bool old_before = fs::exists(root + "/last.old");
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {   // the writer: saves the states in turn until killed (file I/O only, no OpenMP)
            for (int i = round;; ++i) {
                try {
                    train::save_checkpoint(root, "last", states[static_cast<size_t>(i % 4)]);
                } catch (...) {
                    ::_exit(3);
                }
            }
        }
        ++round;
        std::this_thread::sleep_for(std::chrono::microseconds(gen.randint(static_cast<uint64_t>(3 * save_us))));
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        REQUIRE_MESSAGE(WIFSIGNALED(status), "the writer stopped by itself (status ", status, ")");

        // What the kill left: a temporary folder (killed while writing the files) or a new last.old (killed during
        // the folder switch). The temporary folders are then removed, as the next save would, so that each kill is
        // counted by what it left itself.
        bool writing = false;
        for (const auto& e : fs::directory_iterator(root))
            if (e.path().filename().string().rfind(".last.tmp.", 0) == 0) writing = true, fs::remove_all(e.path());
        const bool switching = fs::exists(root + "/last.old") && !old_before;
        in_write += writing ? 1 : 0;
        in_switch += switching ? 1 : 0;
        train::Checkpoint got;
        REQUIRE_NOTHROW(got = train::load_checkpoint(root));   // never unloadable
        const int e = std::stoi(got.model_metadata.at("epoch"));
        REQUIRE(e >= 0);
        REQUIRE(e < 4);
        CHECK(test::same_tensors(got.model, states[static_cast<size_t>(e)].model));
        CHECK(test::same_tensors(got.train_state, states[static_cast<size_t>(e)].train_state));
        CHECK(got.train_metadata.at("epoch") == fmt(e));
        seen.insert(got.model_metadata.at("epoch"));
    }
    CHECK(seen.size() > 1);   // the writer made progress between kills
    MESSAGE(kills, " SIGKILLs (one save: ", save_us / 1000.0, " ms): ", in_write, " while writing the files, ",
            in_switch, " during the folder switch; ", seen.size(), " different states found; all loaded");
    // the next save cleans up what the killed writers left
    train::save_checkpoint(root, "last", states[1]);
    for (const auto& e : fs::directory_iterator(root)) CHECK(e.path().filename() == "last");
    return in_write + in_switch;
}

}  // namespace

TEST_CASE("crash safety: SIGKILL of a checkpoint writer at random moments never leaves an unloadable checkpoint") {
    CHECK(kill_writer_repeatedly(20, 1) > 0);
}

TEST_CASE("crash safety: 200 SIGKILLs of a checkpoint writer" * doctest::test_suite("slow")) {
    CHECK(kill_writer_repeatedly(200, 2) >= 100);
}

TEST_CASE("crash safety: ENOSPC, EACCES and EIO while saving leave the previous checkpoint untouched") {
    test::TempDir tmp("write_faults");
    const std::string root = tmp / "run";
    const train::Checkpoint a = make_state(0), b = make_state(1);
    train::save_checkpoint(root, "last", a);
    const std::string model_bytes = read_file(root + "/last/" + train::kModelFile);

    struct Fault {
        const char* file;    // the file the fault hits
        const char* stage;   // open | write | rename
        size_t after;        // bytes written before it may hit (write)
        int err;
        const char* reason;  // strerror
        const char* hint;
    };
    const Fault faults[] = {
        {train::kTrainStateFile, "write", 0, ENOSPC, "No space left on device", "hint: free disk space"},
        {train::kModelFile, "write", 0, ENOSPC, "No space left on device", "hint: free disk space"},
        {train::kModelFile, "open", 0, EACCES, "Permission denied", "hint: check that the folder is writable"},
        {train::kTrainStateFile, "rename", 0, EIO, "Input/output error", "hint: check the disk"},
    };
    for (const Fault& f : faults) {
        INFO(std::string(f.file), " ", std::string(f.stage), " ", std::string(f.reason));
        set_write_fault_hook_for_testing([&](const std::string& path, const char* stage, size_t done) {
            return path.ends_with(f.file) && std::string(stage) == f.stage && done >= f.after ? f.err : 0;
        });
        std::string message;
        try {
            train::save_checkpoint(root, "last", b);
        } catch (const Error& e) {
            message = e.what();
        }
        set_write_fault_hook_for_testing({});
        CHECK(message.find(f.reason) != std::string::npos);
        CHECK(message.find(f.file) != std::string::npos);
        CHECK(message.find(f.hint) != std::string::npos);
        CHECK(message.find("the previous checkpoint, is untouched") != std::string::npos);
        const train::Checkpoint got = train::load_checkpoint(root);
        CHECK(got.folder == root + "/last");
        CHECK(test::same_tensors(got.model, a.model));
        CHECK(test::same_tensors(got.train_state, a.train_state));
        CHECK(read_file(root + "/last/" + train::kModelFile) == model_bytes);
        for (const auto& e : fs::directory_iterator(root)) CHECK(e.path().filename() == "last");   // no leftovers
    }
    // with the fault gone, the save goes through
    train::save_checkpoint(root, "last", b);
    CHECK(test::same_tensors(train::load_checkpoint(root).model, b.model));
}

#ifdef RAZOR_CLI
namespace {

// Runs the razor CLI with `args`, stdout and stderr to `log_path`. Returns the pid.
pid_t spawn_razor(const std::vector<std::string>& args, const std::string& log_path) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
        std::vector<char*> argv{const_cast<char*>(RAZOR_CLI)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(RAZOR_CLI, argv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_exit_code(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// A command to kill and resume: its flags for a fresh run into `out`, its resume flags, and the check that two log
// lines (uninterrupted, resumed) are the same.
struct KillResumeCase {
    std::string command;                                                   // "train", "sparse-train"
    std::function<std::vector<std::string>(const std::string& out)> flags;
    std::vector<std::string> resume_flags;                                  // after "--resume OUT"
    std::function<void(const nlohmann::json& a, const nlohmann::json& b)> same_line;
};

// Runs the command once uninterrupted (a), then, in episodes until `kills` SIGKILLs have landed, runs the same
// training in b from scratch, killing it at a random moment and resuming it until it completes; after each episode
// b's log and final checkpoint must equal a's bit for bit.
void kill_and_resume(const KillResumeCase& k, int kills, uint64_t seed, const std::string& tmp_dir) {
    const std::string a = tmp_dir + "/a", b = tmp_dir + "/b";
    auto fresh = [&](const std::string& out) {
        std::vector<std::string> args{k.command};
        for (const auto& f : k.flags(out)) args.push_back(f);
        return args;
    };
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(wait_exit_code(spawn_razor(fresh(a), tmp_dir + "/a.txt")) == 0);
    const int64_t span_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    const auto la = test::read_jsonl(a + "/log.jsonl");
    const train::Checkpoint ca = train::load_checkpoint(a);

    Generator gen(seed);
    int killed = 0, resumed = 0, during_write = 0, episodes = 0;
    while (killed < kills) {
        ++episodes;
        fs::remove_all(b);
        bool done = false;
        for (int attempt = 0; !done && attempt < 200; ++attempt) {
            const bool resume = fs::exists(b + "/last") || fs::exists(b + "/last.old");
            std::vector<std::string> args = fresh(b);
            if (resume) {
                args = {k.command, "--resume", b};
                args.insert(args.end(), k.resume_flags.begin(), k.resume_flags.end());
                ++resumed;
            } else {
                args.push_back("--overwrite");
            }
            const pid_t pid = spawn_razor(args, tmp_dir + "/b.txt");
            // up to half an uninterrupted run: a few kills per episode, each attempt still making progress
            std::this_thread::sleep_for(std::chrono::microseconds(gen.randint(static_cast<uint64_t>(span_us / 2))));
            ::kill(pid, SIGKILL);
            const int code = wait_exit_code(pid);
            if (code != -SIGKILL) {
                REQUIRE_MESSAGE(code == 0, "razor ", k.command, " failed; see ", tmp_dir, "/b.txt");
                done = true;
                continue;
            }
            ++killed;
            // Killed while writing a file: a temporary file or folder is left (removed here, as the next save
            // would, so that each kill is judged by what it leaves itself).
            bool writing = false;
            if (fs::exists(b))
                for (const auto& e : fs::directory_iterator(b))
                    if (e.path().filename().string().find(".tmp.") != std::string::npos)
                        writing = true, fs::remove_all(e.path());
            during_write += writing ? 1 : 0;
            // whatever the moment, a checkpoint present is loadable
            if (fs::exists(b + "/last") || fs::exists(b + "/last.old")) CHECK_NOTHROW(train::load_checkpoint(b));
        }
        REQUIRE_MESSAGE(done, "razor ", k.command, " did not complete in 200 attempts");

        const auto lb = test::read_jsonl(b + "/log.jsonl");
        REQUIRE(lb.size() == la.size());
        for (size_t i = 0; i < la.size(); ++i) {
            INFO("episode ", episodes, ", log line ", i + 1);
            k.same_line(la[i], lb[i]);
        }
        const train::Checkpoint cb = train::load_checkpoint(b);
        CHECK(test::same_tensors(ca.model, cb.model));
        CHECK(test::same_tensors(ca.train_state, cb.train_state));
    }
    MESSAGE(killed, " SIGKILLs of razor ", k.command, " (", during_write, " while writing a file) in ", episodes,
            " runs, ", resumed, " resumes; an uninterrupted run takes ", span_us / 1000, " ms; every run's log and "
            "final checkpoint bit-identical to the uninterrupted run's");
}

// razor train: lenet5 on 40 images, batch 4, 3 steps per epoch, 8 epochs (checkpoint writes are a good part of the
// run), one thread (the deterministic mode; docs/reliability.md).
void kill_and_resume_train(int kills, uint64_t seed) {
    test::TempDir tmp(fmt("kill_resume_", seed));
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    KillResumeCase k;
    k.command = "train";
    k.flags = [&](const std::string& out) {
        return std::vector<std::string>{"--model", "lenet5", "--data", d, "--out", out, "--batch", "4",
                                        "--epochs", "8", "--steps-per-epoch", "3", "--threads", "1", "--workers", "1",
                                        "--lr", "0.05", "--eval-batch", "5"};
    };
    k.resume_flags = {"--threads", "1"};
    k.same_line = [](const nlohmann::json& a, const nlohmann::json& b) {
        CHECK(b["epoch"] == a["epoch"]);
        CHECK(b["loss"].get<double>() == a["loss"].get<double>());   // bit for bit (JSON keeps 17 digits)
        CHECK(b["train_acc"].get<double>() == a["train_acc"].get<double>());
        CHECK(b["test_loss"].get<double>() == a["test_loss"].get<double>());
        CHECK(b["lr"].get<double>() == a["lr"].get<double>());
    };
    kill_and_resume(k, kills, seed, tmp.path());
}

// razor sparse-train: resnet20 on 40 images, batch 8, 2 phase-A epochs and 2 fine-tune epochs of 2 steps, 2
// candidates, one thread. Kills land in phase A, in the selection and in the fine-tune.
void kill_and_resume_sparse(int kills, uint64_t seed) {
    test::TempDir tmp(fmt("kill_resume_sparse_", seed));
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    KillResumeCase k;
    k.command = "sparse-train";
    k.flags = [&](const std::string& out) {
        return std::vector<std::string>{"--model", "resnet20", "--data", d, "--out", out, "--batch", "8", "--keep",
                                        "0.5", "--epochs", "2", "--finetune-epochs", "2", "--steps-per-epoch", "2",
                                        "--candidates", "2", "--select-batches", "1", "--threads", "1", "--workers",
                                        "1", "--eval-batch", "10"};
    };
    k.resume_flags = {"--threads", "1"};
    k.same_line = [](nlohmann::json a, nlohmann::json b) {
        for (const char* t : {"seconds", "eval_seconds", "img_per_s"}) a.erase(t), b.erase(t);   // wall-clock fields
        CHECK_MESSAGE(a == b, a.dump(), "\n", b.dump());
    };
    kill_and_resume(k, kills, seed, tmp.path());
}

}  // namespace

TEST_CASE("crash safety: razor train SIGKILLed at random moments and resumed reproduces the losses bit for bit") {
    kill_and_resume_train(4, 1);
}

TEST_CASE("crash safety: razor train, 30 SIGKILLs and resumes" * doctest::test_suite("slow")) {
    kill_and_resume_train(30, 2);
}

TEST_CASE("crash safety: razor sparse-train SIGKILLed at random moments in phase A, the selection or phase B and "
          "resumed reproduces its log and checkpoint bit for bit" * doctest::test_suite("cli-run")) {
    kill_and_resume_sparse(3, 3);
}

TEST_CASE("crash safety: razor sparse-train, 20 SIGKILLs and resumes" * doctest::test_suite("slow")) {
    kill_and_resume_sparse(20, 4);
}
#endif
