// tests/apps/test_run_safety.cpp -- nothing a user had is lost, nothing wrong is accepted silently (issue 23):
//   * a run folder is owned: a second writer is refused naming the holder's pid; --resume A --out B only into A or an
//     empty B; --log never rewrites a file razor did not write; a failed --overwrite puts the old run back;
//   * validated before the first step: the resumed run's classes and size, --classes against a checkpoint's label
//     order (eval), train/test image sizes, the optimizer state of a checkpoint (finite, in range, complete), integer
//     flags out of range, a finetune run resumed by razor train, non-UTF-8 names;
//   * every error a user can cause is a razor error with exit status 2 and a hint (an --out that is a file, a symlink
//     loop), never "unexpected error".
// The crash side (kills at every filesystem step) is tests/apps/test_crash_safety.cpp. docs/reliability.md.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/core.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

int train_cli(const std::vector<std::string>& args) {
    int rc = 0;
    test::capture_stdout([&] { rc = test::run_command(apps::run_train, args); });
    return rc;
}

// lenet5 on the fake CIFAR-10: one epoch of 2 steps (well under a second).
std::vector<std::string> tiny(const std::string& data, const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--model", "lenet5", "--data", data, "--out", out, "--batch", "4", "--epochs", "1",
                                  "--steps-per-epoch", "2", "--threads", "1", "--workers", "1", "--eval-batch", "10",
                                  "--sched", "none"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// The fake CIFAR-10 with its class names replaced (batches.meta.txt).
void rename_classes(const std::string& dir, const std::vector<std::string>& names) {
    std::ofstream meta(dir + "/batches.meta.txt");
    for (const auto& n : names) meta << n << "\n";
}

// A train_state.safetensors edited in place (the pair id kept, so only the edit is wrong).
void edit_train_state(const std::string& run, const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    const std::string path = run + "/last/" + train::kTrainStateFile;
    SafeTensors st = load_safetensors(path);
    edit(st.tensors);
    save_safetensors(path, st.tensors, st.metadata);
}

struct Exit {
    int code = 0;
    std::string output;
};

#ifdef RAZOR_CLI
// The razor binary with `args`: its exit status and what it printed (stdout and stderr).
Exit razor_cli(const std::vector<std::string>& args, const std::string& log) {
    std::filesystem::remove(log);
    int status = 0;
    ::waitpid(static_cast<pid_t>(test::spawn_razor(args, log)), &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(log)};
}
#endif

}  // namespace

TEST_CASE("run folder: a second writer of --out is refused, naming the holder's pid") {
    test::TempDir tmp("run_lock");
    const std::string d = tmp / "cifar", out = tmp / "run";
    test::write_fake_cifar10(d, 2, 2);
    {
        const train::RunLock held("test", out);
        // another lock on the same folder (a separate open file: flock excludes it as it would another process's)
        CHECK_THROWS_WITH_AS(train::RunLock("razor train", out), Contains(fmt("(pid ", ::getpid(), ")").c_str()), Error);
        CHECK_THROWS_WITH_AS(train_cli(tiny(d, out)), Contains("is in use by another razor run (pid "), Error);
        CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--data", d, "--out", out}),
                             Contains("is in use by another razor run"), Error);
        CHECK(!fs::exists(out + "/last"));
    }
    CHECK_NOTHROW(train::RunLock("test", out));   // released with its owner
}

TEST_CASE("run folder: --log never rewrites a file razor did not write") {
    test::TempDir tmp("log_guard");
    const std::string d = tmp / "cifar", notes = tmp / "notes.txt";
    test::write_fake_cifar10(d, 2, 2);
    const std::string text = "my notes\nline two\n";
    write_file_atomic(notes, text);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--log", notes})), Contains("is not a razor run log"), Error);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--log", notes, "--overwrite"})),
                         Contains("razor never rewrites a file it did not write"), Error);
    CHECK(read_file(notes) == text);
    // a razor log of another run: refused for a fresh run without --overwrite
    const std::string other = tmp / "other.jsonl";
    write_file_atomic(other, "{\"epoch\":1}\n");
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--log", other})), Contains("already holds a run's log"), Error);
    CHECK(read_file(other) == "{\"epoch\":1}\n");
}

TEST_CASE("run folder: integer flags out of range are refused, not wrapped") {
    test::TempDir tmp("int_flags");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 2, 2);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--threads", "4294967297"})), Contains("--threads must be <= 1024"),
                         Error);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--epochs", "9223372036854775807"})),
                         Contains("--epochs must be <= 1000000"), Error);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--epochs", "99999999999999999999"})),
                         Contains("--epochs expects an integer"), Error);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run", {"--workers", "100000"})), Contains("--workers must be <= 1024"),
                         Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_eval, {"--checkpoint", tmp / "run", "--threads", "4294967297"}),
                         Contains("--threads must be <= 1024"), Error);
    CHECK(!fs::exists(tmp / "run/last"));
}

TEST_CASE("run folder: --resume A --out B into another run is refused; --overwrite that fails keeps the old run" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("resume_out");
    const std::string d = tmp / "cifar", a = tmp / "a", b = tmp / "b";
    test::write_fake_cifar10(d, 4, 10);
    REQUIRE(train_cli(tiny(d, a, {"--epochs", "2", "--stop-after", "1"})) == 0);
    REQUIRE(train_cli(tiny(d, b, {"--seed", "5"})) == 0);
    const std::string b_model = read_file(b + "/last/" + train::kModelFile), b_log = read_file(b + "/log.jsonl");
    CHECK_THROWS_WITH_AS(train_cli({"--resume", a, "--out", b, "--data", d, "--threads", "1"}),
                         Contains("is not empty (it may hold another run)"), Error);
    CHECK(read_file(b + "/last/" + train::kModelFile) == b_model);
    CHECK(read_file(b + "/log.jsonl") == b_log);
    // into an empty folder it is a copy of the run that goes on; into A itself, the run
    fs::create_directories(tmp / "c");
    CHECK(train_cli({"--resume", a, "--out", tmp / "c", "--data", d, "--threads", "1"}) == 0);
    CHECK(train::load_checkpoint(tmp / "c").train_metadata.at("epoch") == "2");
    CHECK(train::load_checkpoint(a).train_metadata.at("epoch") == "1");

    // --overwrite of b that fails before its first checkpoint (a NaN loss): b's run is back, whole
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, b, {"--overwrite", "--lr", "1e35", "--wd", "0"})), Contains("hint"), Error);
    CHECK(read_file(b + "/last/" + train::kModelFile) == b_model);
    CHECK(read_file(b + "/log.jsonl") == b_log);
    CHECK(train::stale_asides(b).empty());
    for (const auto& e : fs::directory_iterator(b))
        CHECK_MESSAGE(e.path().filename().string().rfind(train::kAsidePrefix, 0) != 0, e.path().string());
    // a successful --overwrite replaces it and leaves nothing aside
    CHECK(train_cli(tiny(d, b, {"--overwrite"})) == 0);
    CHECK(read_file(b + "/last/" + train::kModelFile) != b_model);
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 1);
    for (const auto& e : fs::directory_iterator(b))
        CHECK_MESSAGE(e.path().filename().string().rfind(train::kAsidePrefix, 0) != 0, e.path().string());
}

TEST_CASE("validation: a resumed run's classes and size, eval's --classes order, optimizer state, finetune's flags" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("validate");
    const std::string d = tmp / "cifar", run = tmp / "run";
    test::write_fake_cifar10(d, 4, 10);
    REQUIRE(train_cli(tiny(d, run, {"--classes", "cat,dog", "--epochs", "2", "--stop-after", "1", "--momentum", "0.9"})) ==
            0);

    // a run on all classes resumed on the same data under other class names: refused at start-up, before any step
    const std::string other = tmp / "other", all = tmp / "all";
    fs::copy(d, other);
    rename_classes(other, {"airplane", "automobile", "bird", "cat", "deer", "cow", "frog", "horse", "ship", "truck"});
    REQUIRE(train_cli(tiny(d, all, {"--epochs", "2", "--stop-after", "1"})) == 0);
    CHECK_THROWS_WITH_AS(train_cli({"--resume", all, "--data", other, "--threads", "1"}),
                         Contains("was trained on (airplane, automobile, bird, cat, deer, dog,"), Error);
    CHECK(test::read_jsonl(all + "/log.jsonl").size() == 1);

    // eval --classes dog,cat on a cat,dog checkpoint: scored in the checkpoint's order, as without --classes
    auto eval_json = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> args = {"--checkpoint", run, "--data", d, "--threads", "1", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        return json::parse(test::capture_stdout([&] { test::run_command(apps::run_eval, args); }));
    };
    const json plain = eval_json({}), swapped = eval_json({"--classes", "dog,cat"});
    CHECK(swapped["per_class"][0]["class"] == "cat");
    CHECK(swapped["per_class"] == plain["per_class"]);
    CHECK(swapped["accuracy"] == plain["accuracy"]);
    // a test split of other classes is refused, not scored under the checkpoint's names
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_eval, {"--checkpoint", run, "--data", other, "--classes", "cat,cow",
                                                            "--threads", "1"}),
                         Contains("was trained on (cat, dog)"), Error);

    // optimizer state: NaN or negative lr, momentum 5, a missing momentum buffer -- each refused before a step
    const std::string ts = run + "/last/" + train::kTrainStateFile, good = read_file(ts);
    const std::vector<std::pair<std::function<void(std::map<std::string, Tensor>&)>, std::string>> edits = {
        {[](auto& t) { t["optimizer.param_groups.0.lr"] = optim::pack_f64(std::nan("")); }, "expected a finite value"},
        {[](auto& t) { t["optimizer.param_groups.0.lr"] = optim::pack_f64(-0.5); }, "expected >= 0"},
        {[](auto& t) { t["optimizer.param_groups.0.momentum"] = optim::pack_f64(5); }, "expected a value in [0, 1]"},
        {[](auto& t) { t.erase("optimizer.conv1.weight.momentum_buffer"); }, "is missing"},
        {[](auto& t) {
             for (auto it = t.begin(); it != t.end();)
                 it = it->first.ends_with(".momentum_buffer") ? t.erase(it) : std::next(it);
         },
         "optimizer state is missing"},
    };
    for (const auto& [edit, message] : edits) {
        INFO(message);
        write_file_atomic(ts, good);
        edit_train_state(run, edit);
        CHECK_THROWS_WITH_AS(train_cli({"--resume", run, "--data", d, "--threads", "1"}), Contains(message.c_str()),
                             Error);
        CHECK(test::read_jsonl(run + "/log.jsonl").size() == 1);   // nothing trained
    }
    write_file_atomic(ts, good);
    CHECK(train_cli({"--resume", run, "--data", d, "--threads", "1"}) == 0);
}

TEST_CASE("validation: train/ and test/ images of different sizes are refused at start-up" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("sizes");
    const std::string root = tmp / "photos";
    for (const char* cls : {"cat", "dog"})
        for (int i = 0; i < 4; ++i) {
            test::write_bytes(fmt(root, "/train/", cls, "/", i, ".png"),
                              test::encode_png(test::pattern_image(3, 32, 32, i), 3, 32, 32));
            test::write_bytes(fmt(root, "/test/", cls, "/", i, ".png"),
                              test::encode_png(test::pattern_image(3, 64, 64, i), 3, 64, 64));
        }
    const std::vector<std::string> args = {"--dataset", "folder", "--data", root, "--model", "resnet20", "--out",
                                           tmp / "run", "--batch", "4", "--epochs", "1", "--threads", "1"};
    CHECK_THROWS_WITH_AS(train_cli(args), Contains("hint: pass --image-size 32"), Error);
    CHECK(!fs::exists(tmp / "run/log.jsonl"));
}

TEST_CASE("validation: names that are not UTF-8 are refused at start-up, naming the flag or folder") {
    test::TempDir tmp("utf8");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 2, 2);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run\xff")), Contains("--out"), Error);
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run\xff")), Contains("\\xff' is not valid UTF-8"), Error);
    rename_classes(d, {"airplane", "automobile", "bird", "c\xe9t", "deer", "dog", "frog", "horse", "ship", "truck"});
    CHECK_THROWS_WITH_AS(train_cli(tiny(d, tmp / "run")), Contains("c\\xe9t' is not valid UTF-8"), Error);
    CHECK(!fs::exists(tmp / "run/log.jsonl"));
}

#ifdef RAZOR_CLI
TEST_CASE("errors: filesystem problems exit 2 with the path and a hint, never 'unexpected error'") {
    test::TempDir tmp("fs_errors");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 2, 2);
    write_file_atomic(tmp / "a_file", "x");
    fs::create_symlink(tmp / "loop_b", tmp / "loop_a");
    fs::create_symlink(tmp / "loop_a", tmp / "loop_b");
    for (const std::string& out : {tmp / "a_file", tmp / "loop_a/run", tmp / "a_file/run"}) {
        INFO("--out ", out);
        std::vector<std::string> args = {"train"};
        for (const auto& a : tiny(d, out)) args.push_back(a);
        const Exit e = razor_cli(args, tmp / "out.txt");
        CHECK(e.code == 2);
        CHECK_MESSAGE(e.output.find("hint") != std::string::npos, e.output);
        CHECK_MESSAGE(e.output.find(out) != std::string::npos, e.output);
        CHECK_MESSAGE(e.output.find("unexpected error") == std::string::npos, e.output);
    }
}
#endif
