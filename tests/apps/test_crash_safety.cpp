// tests/apps/test_crash_safety.cpp -- checkpoints survive SIGKILL and full or read-only disks:
//   * a child process saves real checkpoints in a loop while the parent SIGKILLs it at random moments; after every
//     kill the checkpoint loads and equals one of the states written (fast: 20 kills; slow: 200);
//   * ENOSPC / EACCES / EIO injected into write_file_atomic leave the previous checkpoint untouched, with a clear
//     error;
//   * razor train SIGKILLed at random moments and resumed each time logs the same losses, bit for bit, as a run that
//     was never interrupted, and ends with bit-identical weights (fast: 4 kills; slow: 30); the same for razor
//     sparse-train across both phases (fast: 3 kills; slow: 20); the same with --save-every checkpoints inside epochs;
//   * razor train and sparse-train stopped by SIGINT in the middle of an epoch checkpoint that step, exit 130 with the
//     command that continues, and resumed end bit-identical to the uninterrupted run.
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
#include "train/run_folder.h"
#include "train/run_log.h"
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
    // There is always a previous checkpoint. It is written by a forked child, as the killed writers below are, and
    // that child's time (fork, the save with its fsyncs, exit; on this disk under this load) sets the window the kills
    // are drawn from: 0 to 4 saves, so kills land in every phase of the first few saves. A save timed in this process
    // instead could be far shorter than a forked writer's (a late test's large address space makes fork and the
    // child's first writes slow), and then no writer ever finished a save before its kill.
    auto forked_save = [&](const train::Checkpoint& state) {
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            set_num_threads(1);   // libgomp's pool does not survive fork() (below)
            try {
                train::save_checkpoint(root, "last", state);
            } catch (...) {
                ::_exit(3);
            }
            ::_exit(0);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "the forked save failed (status ", status, ")");
    };
    const auto t0 = std::chrono::steady_clock::now();
    forked_save(states[0]);
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
        if (pid == 0) {   // the writer: saves the states in turn until killed
            // libgomp's thread pool does not survive fork(), and a save after a crash reads NAME back (finite
            // checks run as OpenMP loops): with one thread they run inline instead of waiting for the lost pool.
            set_num_threads(1);
            for (int i = round;; ++i) {
                try {
                    train::save_checkpoint(root, "last", states[static_cast<size_t>(i % 4)]);
                } catch (...) {
                    ::_exit(3);
                }
            }
        }
        ++round;
        std::this_thread::sleep_for(std::chrono::microseconds(gen.randint(static_cast<uint64_t>(4 * save_us))));
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

namespace {

// A small state (4 KB of weights) whose epoch is `i`: the step-by-step kills below fork once per step.
train::Checkpoint small_state(int i) {
    Generator gen(static_cast<uint64_t>(100 + i));
    train::Checkpoint c;
    c.model["w"] = Tensor::randn({1000}, gen);
    c.model_metadata = {{"epoch", fmt(i)}};
    c.train_state["epoch"] = Tensor::from_vector_i64({}, {i});
    c.train_metadata = {{"epoch", fmt(i)}};
    return c;
}

// Runs `work` in a child that SIGKILLs itself right before its k-th filesystem step (train::fs_step, 1-based).
// Returns whether it was killed (false: `work` has fewer steps and completed); `label` gets the step's name.
bool killed_at_step(int k, const std::function<void()>& work, std::string* label) {
    const std::string label_file = fmt("/tmp/razor_fs_step_", ::getpid(), ".txt");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        set_num_threads(1);   // libgomp's pool does not survive fork(): OpenMP loops in `work` run inline
        int n = 0;
        train::set_fs_step_hook_for_testing([&](const std::string& step) {
            if (++n < k) return;
            std::ofstream(label_file) << step;
            ::raise(SIGKILL);
        });
        try {
            work();
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        *label = read_file(label_file);
        fs::remove(label_file);
        return true;
    }
    REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, "the writer failed (status ", WEXITSTATUS(status), ")");
    return false;
}

// The pid of a process that has exited (and was reaped).
long dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
}

int loaded_epoch(const std::string& root) { return std::stoi(train::load_checkpoint(root).model_metadata.at("epoch")); }

}  // namespace

TEST_CASE("crash safety: a SIGKILL at every filesystem step of a checkpoint switch leaves a loadable checkpoint, "
          "also from an incomplete last/ next to a good last.old/") {
    const train::Checkpoint A = small_state(1), B = small_state(2), N = small_state(3);
    // How the folder looks before the save; A is the complete checkpoint a load must find until N replaces it.
    struct Start {
        const char* what;
        std::function<void(const std::string& root)> make;
    };
    const std::vector<Start> starts = {
        {"last/ complete", [&](const std::string& root) { train::save_checkpoint(root, "last", A); }},
        {"last/ with a truncated model file, last.old/ complete",
         [&](const std::string& root) {
             train::save_checkpoint(root, "last", A);
             fs::rename(root + "/last", root + "/last.old");
             fs::copy(root + "/last.old", root + "/last", fs::copy_options::recursive);
             const std::string f = root + "/last/" + train::kModelFile, bytes = read_file(f);
             write_file_atomic(f, bytes.substr(0, bytes.size() / 2));
         }},
        {"last/ from another save (pair ids differ), last.old/ complete",
         [&](const std::string& root) {
             train::save_checkpoint(root, "x", B);
             train::save_checkpoint(root, "last", A);
             fs::rename(root + "/last", root + "/last.old");
             fs::copy(root + "/last.old", root + "/last", fs::copy_options::recursive);
             fs::copy_file(root + "/x/" + train::kModelFile, root + "/last/" + train::kModelFile,
                           fs::copy_options::overwrite_existing);
             fs::remove_all(root + "/x");
         }},
        {"last/ complete, an older last.old/ left by a crash",
         [&](const std::string& root) {
             train::save_checkpoint(root, "last", B);
             fs::rename(root + "/last", root + "/last.old");
             train::save_checkpoint(root, "last", A);
         }},
        {"only last.old/",
         [&](const std::string& root) {
             train::save_checkpoint(root, "last", A);
             fs::rename(root + "/last", root + "/last.old");
         }},
        {"last/ complete, a dead writer's temporary folder",
         [&](const std::string& root) {
             train::save_checkpoint(root, "last", A);
             const std::string leftover = fmt(root, "/.last.tmp.", dead_pid());
             fs::create_directories(leftover);
             write_file_atomic(leftover + "/" + train::kModelFile, "torn");
         }},
    };
    int kills = 0;
    for (const Start& start : starts) {
        int k = 1;
        for (;; ++k) {
            test::TempDir tmp("switch_steps");
            const std::string root = tmp / "run";
            start.make(root);
            std::string label;
            if (!killed_at_step(k, [&] { train::save_checkpoint(root, "last", N); }, &label)) {
                CHECK(loaded_epoch(root) == 3);
                break;
            }
            ++kills;
            INFO(start.what, ": killed before step ", k, " (", label, ")");
            int e = 0;
            REQUIRE_NOTHROW(e = loaded_epoch(root));
            CHECK((e == 1 || e == 3));   // the previous checkpoint or the new one, never nothing
            // the next save goes through and leaves only last/
            train::save_checkpoint(root, "last", N);
            CHECK(loaded_epoch(root) == 3);
            for (const auto& entry : fs::directory_iterator(root)) CHECK(entry.path().filename() == "last");
        }
        MESSAGE(start.what, ": ", k - 1, " filesystem steps, a kill before each");
        CHECK(k - 1 >= 2);   // at least the two renames of the switch
    }
    CHECK(kills >= 12);
}

TEST_CASE("crash safety: a SIGKILL at every filesystem step of --overwrite leaves the old run or the new one, each "
          "with a log holding its completed epochs exactly once") {
    const train::Checkpoint old1 = small_state(1), old2 = small_state(2), new1 = small_state(11), new2 = small_state(12);
    auto make_old_run = [&](const std::string& root) {
        train::save_checkpoint(root, "best", old1);
        train::save_checkpoint(root, "last", old2);
        write_file_atomic(root + "/log.jsonl", "{\"epoch\":1,\"run\":\"old\"}\n{\"epoch\":2,\"run\":\"old\"}\n");
    };
    // The new run as razor train does it: lock, move aside, a fresh log, per epoch the log line then the checkpoint;
    // the aside goes after the first checkpoint.
    auto new_run = [&](const std::string& root) {
        const train::RunLock lock("test", root);
        const fs::path out(root);
        train::OverwrittenRun aside("test", root, {(out / "last").string(), (out / "last.old").string(),
                                                   (out / "best").string(), (out / "best.old").string(),
                                                   (out / "log.jsonl").string(), (out / "curves.svg").string()});
        train::RunLog log("test", root + "/log.jsonl", nullptr);
        int e = 0;
        for (const train::Checkpoint* c : {&new1, &new2}) {
            log.write({{"epoch", ++e}, {"run", "new"}});
            train::save_checkpoint(root, "last", *c);
            aside.finish();
        }
    };
    // The epochs of a log up to `upto` (what a resume keeps): each once, in order, all from `run`.
    auto check_log = [](const std::string& path, int upto, const std::string& run) {
        std::vector<int> epochs;
        for (const auto& j : test::read_jsonl(path))
            if (j["epoch"].get<int>() <= upto) {
                CHECK(j["run"] == run);
                epochs.push_back(j["epoch"].get<int>());
            }
        std::vector<int> want;
        for (int e = 1; e <= upto; ++e) want.push_back(e);
        CHECK(epochs == want);
    };
    int k = 1;
    for (;; ++k) {
        test::TempDir tmp("overwrite_steps");
        const std::string root = tmp / "run";
        make_old_run(root);
        std::string label;
        if (!killed_at_step(k, [&] { new_run(root); }, &label)) break;
        INFO("killed before step ", k, " (", label, ")");
        const std::vector<std::string> asides = train::stale_asides(root);
        bool has_checkpoint = true;
        int e = 0;
        try {
            e = loaded_epoch(root);
        } catch (const Error&) {
            has_checkpoint = false;
        }
        if (has_checkpoint && e == 2) {   // nothing moved yet: the old run, whole
            check_log(root + "/log.jsonl", 2, "old");
        } else if (has_checkpoint) {      // the new run's first checkpoint (or second) landed
            REQUIRE((e == 11 || e == 12));
            check_log(root + "/log.jsonl", e - 10, "new");
        } else {   // between: the old run, whole, each piece still in place or already in the aside
            REQUIRE(asides.size() == 1);
            const std::string& a = asides[0];
            CHECK(std::stoi(train::load_checkpoint(a, "1-last").model_metadata.at("epoch")) == 2);
            const bool best_moved = fs::exists(a + "/3-best");
            CHECK(std::stoi(train::load_checkpoint(best_moved ? a : root, best_moved ? "3-best" : "best")
                                .model_metadata.at("epoch")) == 1);
            check_log(fs::exists(a + "/5-log.jsonl") ? a + "/5-log.jsonl" : root + "/log.jsonl", 2, "old");
            // a resume says where the old run is
            CHECK_THROWS_WITH_AS(train::load_checkpoint(root), Contains("interrupted --overwrite"), Error);
        }
        // --overwrite again (the killed run's intent) completes and leaves nothing aside
        new_run(root);
        CHECK(loaded_epoch(root) == 12);
        check_log(root + "/log.jsonl", 2, "new");
        CHECK(train::stale_asides(root).empty());
        CHECK(!fs::exists(root + "/best"));
    }
    MESSAGE("--overwrite: ", k - 1, " filesystem steps, a kill before each");
    CHECK(k - 1 >= 8);   // the moves of last/, best/ and the log, the switches, the removal of the aside
}

TEST_CASE("crash safety: a save removes the temporary folders of dead writers, never those of a live one") {
    test::TempDir tmp("tmp_owners");
    const std::string root = tmp / "run";
    train::save_checkpoint(root, "last", small_state(1));
    std::fflush(nullptr);
    const pid_t live = ::fork();
    if (live == 0) {
        ::pause();
        ::_exit(0);
    }
    const std::string dead_tmp = fmt(root, "/.last.tmp.", dead_pid()), live_tmp = fmt(root, "/.last.tmp.", live);
    fs::create_directories(dead_tmp);
    fs::create_directories(live_tmp);
    write_file_atomic(live_tmp + "/" + train::kModelFile, "being written");
    train::save_checkpoint(root, "last", small_state(2));
    CHECK(!fs::exists(dead_tmp));
    CHECK(read_file(live_tmp + "/" + train::kModelFile) == "being written");
    ::kill(live, SIGKILL);
    ::waitpid(live, nullptr, 0);
    train::save_checkpoint(root, "last", small_state(3));   // its owner gone: cleaned like any dead writer's
    CHECK(!fs::exists(live_tmp));
    CHECK(loaded_epoch(root) == 3);
}

#ifdef RAZOR_CLI
namespace {

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
    REQUIRE(wait_exit_code(test::spawn_razor(fresh(a), tmp_dir + "/a.txt")) == 0);
    const int64_t span_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    const auto la = test::read_jsonl(a + "/log.jsonl");
    const train::Checkpoint ca = train::load_checkpoint(a);
    // A resume's start-up (process, checkpoint read and checks; "nothing to do" on the finished run a): kills are drawn
    // from that plus half a run, so they land in start-up too, yet a resume that gets past it still makes progress.
    const auto r0 = std::chrono::steady_clock::now();
    std::vector<std::string> noop{k.command, "--resume", a};
    noop.insert(noop.end(), k.resume_flags.begin(), k.resume_flags.end());
    REQUIRE(wait_exit_code(test::spawn_razor(noop, tmp_dir + "/noop.txt")) == 0);
    const int64_t startup_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - r0).count();

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
            const pid_t pid = test::spawn_razor(args, tmp_dir + "/b.txt");
            // up to a resume's start-up plus half an uninterrupted run: a few kills per episode, each attempt that
            // gets past its start-up making progress. The window doubles every 25 attempts: both times were measured
            // once, and on a machine that gets busier afterwards (CI's two cores shared with other work) a run that
            // took 121 ms quiet never got through an epoch inside them in 200 attempts.
            const int64_t window = (startup_us + span_us / 2) << std::min(attempt / 25, 6);
            std::this_thread::sleep_for(std::chrono::microseconds(gen.randint(static_cast<uint64_t>(window))));
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
// run), one thread (the deterministic mode; docs/reliability.md). save_every > 0: also a checkpoint every that many
// steps, so kills resume from inside epochs too.
void kill_and_resume_train(int kills, uint64_t seed, int save_every = 0) {
    test::TempDir tmp(fmt("kill_resume_", seed));
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    KillResumeCase k;
    k.command = "train";
    k.flags = [&](const std::string& out) {
        return std::vector<std::string>{"--model", "lenet5", "--data", d, "--out", out, "--batch", "4",
                                        "--epochs", "8", "--steps-per-epoch", "3", "--threads", "1", "--workers", "1",
                                        "--lr", "0.05", "--eval-batch", "5", "--save-every", fmt(save_every)};
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

TEST_CASE("crash safety: razor train --save-every 2 SIGKILLed at random moments resumes mid-epoch bit for bit") {
    kill_and_resume_train(4, 5, 2);
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

namespace {

// Waits until a line of `path` holds every one of `parts` (a progress line: "epoch 2/3", " 4/10 "); false after
// 10 minutes. The deadline only bounds a run that never gets there: under qemu-aarch64 (scripts/cross_aarch64.sh) a
// resnet20 step at batch 4 takes seconds, and a loaded machine took over a minute to reach step 3.
bool wait_for_line(const std::string& path, const std::vector<std::string>& parts) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream in(path);
        for (std::string line; std::getline(in, line);) {
            bool all = true;
            for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
            if (all) return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// One SIGINT case: a fresh run into `out`, interrupted (SIGINT) once a progress line shows each (label, step) of
// `stops` in turn and resumed after each; the resumed runs' flags are `resume`. Checks each interrupt's exit status
// (130), message and mid-epoch checkpoint, then the log and final checkpoint against the uninterrupted run `a`.
struct InterruptCase {
    std::string command;
    std::vector<std::string> flags;                 // without --out
    std::vector<std::pair<std::string, std::string>> stops;   // ("epoch 1/3", " 3/10 ")
    std::function<void(const nlohmann::json& a, const nlohmann::json& b)> same_line;
};

void interrupt_and_resume(const InterruptCase& k, const std::string& tmp) {
    const std::string a = tmp + "/a", b = tmp + "/b";
    auto args = [&](const std::string& out) {
        std::vector<std::string> v{k.command};
        v.insert(v.end(), k.flags.begin(), k.flags.end());
        v.insert(v.end(), {"--out", out});
        return v;
    };
    REQUIRE(wait_exit_code(test::spawn_razor(args(a), tmp + "/a.txt")) == 0);
    int mid_epoch = 0;
    for (size_t i = 0; i < k.stops.size(); ++i) {
        const std::string txt = fmt(tmp, "/b", i, ".txt");
        const auto run = i == 0 ? args(b) : std::vector<std::string>{k.command, "--resume", b, "--threads", "1"};
        const pid_t pid = test::spawn_razor(run, txt);
        REQUIRE_MESSAGE(wait_for_line(txt, {k.stops[i].first, k.stops[i].second}), "no progress line; see ", txt);
        ::kill(pid, SIGINT);
        const int code = wait_exit_code(pid);
        const std::string out = read_text(txt);
        INFO("interrupt ", i + 1, ": ", out);
        REQUIRE(code == 128 + SIGINT);
        CHECK(out.find("interrupted by SIGINT") != std::string::npos);
        CHECK(out.find(fmt("continue with: razor ", k.command, " --resume ", b)) != std::string::npos);
        const train::Checkpoint ck = train::load_checkpoint(b);
        const auto steps = ck.train_state.find("fit.steps");
        REQUIRE(steps != ck.train_state.end());
        if (steps->second.to_vector_i64()[0] > 0) ++mid_epoch;
    }
    // the interrupts land inside the epochs (a loaded machine may let one slip to an epoch's end, not all)
    CHECK(mid_epoch >= 1);
    REQUIRE(wait_exit_code(test::spawn_razor({k.command, "--resume", b, "--threads", "1"}, tmp + "/b_end.txt")) == 0);
    const auto la = test::read_jsonl(a + "/log.jsonl"), lb = test::read_jsonl(b + "/log.jsonl");
    REQUIRE(la.size() == lb.size());
    for (size_t i = 0; i < la.size(); ++i) {
        INFO("log line ", i + 1);
        k.same_line(la[i], lb[i]);
    }
    const train::Checkpoint ca = train::load_checkpoint(a), cb = train::load_checkpoint(b);
    CHECK(test::same_tensors(ca.model, cb.model));
    CHECK(test::same_tensors(ca.train_state, cb.train_state));
}

// Equal but for the wall-clock and process-memory fields (a resumed process also held the checkpoint it read).
void same_but_wall_clock(nlohmann::json a, nlohmann::json b) {
    for (const char* t : {"seconds", "eval_seconds", "img_per_s", "rss_bytes", "peak_rss_bytes", "peak_tensor_bytes"})
        a.erase(t), b.erase(t);
    CHECK_MESSAGE(a == b, a.dump(), "\n", b.dump());
}

}  // namespace

TEST_CASE("interrupts: razor train stopped by SIGINT mid-epoch twice and resumed ends bit-identical to an "
          "uninterrupted run" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sigint_train");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    // resnet20, batch 4, 10 steps per epoch, one thread: tens of ms a step, so the SIGINT sent when the progress line
    // shows step 3 lands inside the epoch
    interrupt_and_resume({.command = "train",
                          .flags = {"--model", "resnet20", "--data", d, "--batch", "4", "--epochs", "3",
                                    "--steps-per-epoch", "10", "--threads", "1", "--workers", "1", "--lr", "0.05",
                                    "--eval-batch", "10"},
                          .stops = {{"epoch 1/3", " 3/10 "}, {"epoch 2/3", " 6/10 "}},
                          .same_line = same_but_wall_clock},
                         tmp.path());
}

TEST_CASE("interrupts: razor sparse-train stopped by SIGINT in phase A and in phase B resumes bit for bit" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("sigint_sparse");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    interrupt_and_resume({.command = "sparse-train",
                          .flags = {"--model", "resnet20", "--data", d, "--batch", "4", "--keep", "0.5", "--epochs",
                                    "2", "--finetune-epochs", "2", "--steps-per-epoch", "10", "--candidates", "2",
                                    "--select-batches", "1", "--threads", "1", "--workers", "1", "--eval-batch", "10"},
                          .stops = {{"A 1/2", " 3/10 "}, {"B 1/2", " 4/10 "}},
                          .same_line = same_but_wall_clock},
                         tmp.path());
}

TEST_CASE("interrupts: razor sparse-train --resample-every 3 stopped by SIGINT twice in phase A (inside intervals) "
          "resumes bit for bit" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sigint_resample");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 10);
    // 20 phase-A steps, resamples at 0, 3, 6, ...: the checkpoint after a stop lands inside an interval two times in
    // three, with the interval's mask in it (tests/apps/test_sparse_resample.cpp stops there deterministically)
    interrupt_and_resume({.command = "sparse-train",
                          .flags = {"--model", "resnet20", "--data", d, "--batch", "4", "--keep", "0.5",
                                    "--resample-every", "3", "--epochs", "2", "--finetune-epochs", "1",
                                    "--steps-per-epoch", "10", "--candidates", "2", "--select-batches", "1",
                                    "--threads", "1", "--workers", "1", "--eval-batch", "10"},
                          .stops = {{"A 1/2", " 4/10 "}, {"A 2/2", " 5/10 "}},
                          .same_line = same_but_wall_clock},
                         tmp.path());
}
#endif
