// tests/apps/test_cli.cpp -- razor train / eval / bench end to end on a tiny fake CIFAR-10: flag errors, checkpoint
// round trip and the last/last.old fallback, resume bit-exactness (2 epochs == 1 + resume + 1), eval agreeing with
// train's own test accuracy, strict-load errors, NaN stop with the checkpoint intact, bench's JSON fields.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "apps/commands.h"
#include "core/core.h"
#include "models/registry.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Bitwise equality of two state maps (same keys, dtypes, shapes, bytes).
void check_same_state(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (const auto& [k, t] : a) {
        INFO("key ", k);
        REQUIRE(b.count(k));
        const Tensor& u = b.at(k);
        REQUIRE(t.dtype() == u.dtype());
        REQUIRE(t.shape() == u.shape());
        if (t.dtype() == DType::F32) {
            const auto x = t.to_vector(), y = u.to_vector();
            CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
        } else if (t.dtype() == DType::I64) {
            CHECK(t.to_vector_i64() == u.to_vector_i64());
        }
    }
}

int train_cli(std::vector<std::string> args) {
    int rc = 0;
    test::capture_stdout([&] { rc = test::run_command(apps::run_train, args); });
    return rc;
}

// Flags shared by the small runs: resnet20 (BN buffers, option-A shortcuts) on 40 + 20 fake images.
std::vector<std::string> tiny_flags(const std::string& data, const std::string& out) {
    return {"--model", "resnet20", "--data", data, "--out", out, "--batch", "8", "--epochs", "2", "--steps-per-epoch",
            "3", "--threads", "1", "--nesterov", "--label-smoothing", "0.1", "--clip", "5", "--eval-batch", "7",
            "--workers", "1"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("razor train: bad flags and values are refused with the flag named") {
    test::TempDir tmp("flags");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 2, 2);
    const std::vector<std::string> base = {"--data", d, "--out", tmp / "run"};
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--bogus", "1"}, "unknown flag --bogus"},
        {{"--epochs", "0"}, "--epochs must be >= 1, got 0"},
        {{"--epochs", "two"}, "--epochs expects an integer, got 'two'"},
        {{"--batch", "0"}, "--batch must be >= 1"},
        {{"--lr", "-0.1"}, "--lr must be > 0"},
        {{"--momentum", "1.5"}, "--momentum must be in [0, 1)"},
        {{"--wd", "-1"}, "--wd must be >= 0"},
        {{"--opt", "rmsprop"}, "--opt must be one of sgd | adam | adamw; got 'rmsprop'"},
        {{"--sched", "poly"}, "--sched must be one of"},
        {{"--augment", "mixup"}, "--augment must be one of"},
        {{"--dataset", "imagenet"}, "--dataset must be one of"},
        {{"--label-smoothing", "1"}, "--label-smoothing must be in [0, 1)"},
        {{"--clip", "-1"}, "--clip must be >= 0"},
        {{"--warmup-epochs", "30"}, "--warmup-epochs must be in [0, --epochs 30)"},
        {{"--sched", "multistep", "--milestones", "10,x"}, "--milestones expects comma-separated numbers"},
        {{"--nesterov", "--momentum", "0"}, "--nesterov needs --opt sgd and --momentum > 0"},
        {{"--classes", "2,2"}, "--classes '2,2': '2' twice"},
        {{"--classes", "3,12"}, "class 12 does not exist"},
        {{"--model", "resnet21"}, "unknown model 'resnet21'"},
        {{"--data", tmp / "nowhere"}, "is not a folder"},
    };
    for (const auto& [extra, message] : cases) {
        INFO("flags: ", extra[0], " ", extra.size() > 1 ? extra[1] : "");
        CHECK_THROWS_WITH_AS(train_cli(plus(base, extra)), Contains(message.c_str()), Error);
    }
    // a dataset folder without the files: the path and the missing files are named, with a hint
    fs::create_directories(tmp / "empty");
    CHECK_THROWS_WITH_AS(train_cli(plus(base, {"--data", tmp / "empty"})), Contains("data_batch_1.bin"), Error);
    CHECK_THROWS_WITH_AS(train_cli(plus(base, {"--data", tmp / "empty"})), Contains("hint"), Error);
    CHECK_THROWS_WITH_AS(train_cli({"--out", tmp / "run"}), Contains("--data is required"), Error);
    CHECK_THROWS_WITH_AS(train_cli(plus(base, {"--resume", tmp / "nothing"})), Contains("does not exist"), Error);
    CHECK(!fs::exists(tmp / "run/last"));
}

TEST_CASE("checkpoint: a consistent pair, switched atomically; last.old is the fallback") {
    test::TempDir tmp("ckpt");
    const std::string root = tmp / "run";
    auto make = [](float v) {
        train::Checkpoint c;
        c.model["w"] = Tensor::full({2, 3}, v);
        c.model["bn.num_batches_tracked"] = Tensor::from_vector_i64({}, {7});
        c.model_metadata["model"] = "toy";
        c.train_state["optimizer.w.momentum_buffer"] = Tensor::full({2, 3}, -v);
        c.train_state["epoch"] = Tensor::from_vector_i64({}, {static_cast<int64_t>(v)});
        c.train_metadata["config"] = "{}";
        return c;
    };
    train::save_checkpoint(root, "last", make(1));
    train::save_checkpoint(root, "last", make(2));
    CHECK(!fs::exists(root + "/last.old"));   // removed once the switch is done
    train::Checkpoint got = train::load_checkpoint(root);
    check_same_state(got.model, make(2).model);
    check_same_state(got.train_state, make(2).train_state);
    CHECK(got.model_metadata.at("model") == "toy");
    CHECK(got.model_metadata.at("pair") == got.train_metadata.at("pair"));
    for (const auto& entry : fs::directory_iterator(root))   // no temp folder left behind
        CHECK(entry.path().filename().string().rfind(".last.tmp", 0) != 0);

    // A crash between "last -> last.old" and "tmp -> last": only last.old exists. Loading falls back to it, and the
    // next save completes the switch.
    fs::rename(root + "/last", root + "/last.old");
    got = train::load_checkpoint(root);
    CHECK(got.folder == root + "/last.old");
    check_same_state(got.model, make(2).model);
    CHECK(train::open_checkpoint(root).folder == root + "/last.old");
    train::save_checkpoint(root, "last", make(3));
    CHECK(!fs::exists(root + "/last.old"));
    check_same_state(train::load_checkpoint(root).model, make(3).model);

    // An incomplete last next to a good last.old: last.old is used, and a save never deletes the good copy first.
    fs::copy(root + "/last", root + "/last.old", fs::copy_options::recursive);
    fs::remove(root + "/last/" + train::kTrainStateFile);
    got = train::load_checkpoint(root);
    CHECK(got.folder == root + "/last.old");
    train::save_checkpoint(root, "last", make(4));
    check_same_state(train::load_checkpoint(root).model, make(4).model);

    // Files from two different saves do not make a checkpoint.
    train::save_checkpoint(tmp / "other", "last", make(5));
    fs::copy_file(tmp / "other/last/model.safetensors", root + "/last/model.safetensors",
                  fs::copy_options::overwrite_existing);
    CHECK_THROWS_WITH_AS(train::load_checkpoint(root), Contains("were not written together"), Error);
    CHECK_THROWS_WITH_AS(train::load_checkpoint(tmp / "none"), Contains("no checkpoint in"), Error);
    // a lone model file opens for eval, not for resume
    CHECK(train::open_checkpoint(tmp / "other/last/model.safetensors", true).model.count("w"));
    CHECK_THROWS_WITH_AS(train::open_checkpoint(tmp / "other/last/model.safetensors"), Contains("is a file"), Error);
}

TEST_CASE("razor train: 2 epochs == 1 epoch + resume + 1 epoch, bit for bit; eval agrees; outputs" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("resume");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    const std::string a = tmp / "a", b = tmp / "b";

    REQUIRE(train_cli(tiny_flags(d, a)) == 0);
    REQUIRE(train_cli(plus(tiny_flags(d, b), {"--stop-after", "1"})) == 0);
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 1);
    CHECK(train::load_checkpoint(b).train_metadata.at("epoch") == "1");
    // resume with only the flags that may change (the rest comes from the checkpoint)
    REQUIRE(train_cli({"--resume", b, "--data", d, "--threads", "1"}) == 0);

    const train::Checkpoint ca = train::load_checkpoint(a), cb = train::load_checkpoint(b);
    check_same_state(ca.model, cb.model);
    check_same_state(ca.train_state, cb.train_state);
    CHECK(ca.train_state.at("step").to_vector_i64()[0] == 6);
    CHECK(ca.train_state.count("optimizer.conv1.weight.momentum_buffer"));
    CHECK(ca.train_state.count("scheduler.last_epoch"));
    const auto la = test::read_jsonl(a + "/log.jsonl"), lb = test::read_jsonl(b + "/log.jsonl");
    REQUIRE(la.size() == 2);
    REQUIRE(lb.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(la[i]["loss"].get<double>() == lb[i]["loss"].get<double>());
        CHECK(la[i]["test_acc"].get<double>() == lb[i]["test_acc"].get<double>());
        CHECK(la[i]["lr"].get<double>() == lb[i]["lr"].get<double>());
    }
    // every field of the epoch line is in the log
    for (const char* key : {"epoch", "loss", "train_acc", "test_acc", "test_loss", "lr", "seconds", "img_per_s",
                            "tape_bytes", "tape_dense_bytes", "tape_ratio", "rss_bytes", "peak_rss_bytes"})
        CHECK_MESSAGE(la[1].contains(key), key);
    CHECK(la[1]["tape_bytes"].get<int64_t>() > 0);
    CHECK(fs::exists(a + "/curves.svg"));
    CHECK(fs::exists(a + "/best/" + train::kModelFile));
    // PyTorch key names and dtypes in model.safetensors
    const SafeTensors st = load_safetensors(a + "/last/" + train::kModelFile);
    CHECK(st.tensors.count("layer1.0.conv1.weight"));
    CHECK(st.tensors.at("bn1.num_batches_tracked").dtype() == DType::I64);
    CHECK(st.tensors.at("bn1.num_batches_tracked").to_vector_i64()[0] == 6);
    CHECK(st.metadata.at("model") == "resnet20");

    // a flag that changes the computation may not change on resume; a finished run has nothing to do
    CHECK_THROWS_WITH_AS(train_cli({"--resume", b, "--data", d, "--lr", "0.05"}), Contains("differs from the resumed run"),
                         Error);
    CHECK(train_cli({"--resume", b, "--data", d, "--threads", "1"}) == 0);
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 2);
    // a new run into a used folder is refused
    CHECK_THROWS_WITH_AS(train_cli(tiny_flags(d, a)), Contains("already holds a run"), Error);

    // eval reproduces train's last test accuracy and loss exactly (same weights, data, normalisation, batches)
    std::string out = test::capture_stdout([&] {
        test::run_command(apps::run_eval, {"--checkpoint", a, "--data", d, "--batch", "7", "--threads", "1", "--json"});
    });
    const json e = json::parse(out);
    CHECK(e["accuracy"].get<double>() == la[1]["test_acc"].get<double>());
    CHECK(e["loss"].get<double>() == doctest::Approx(la[1]["test_loss"].get<double>()).epsilon(1e-12));
    CHECK(e["images"].get<int64_t>() == 20);
    REQUIRE(e["per_class"].size() == 10);
    CHECK(e["per_class"][3]["class"] == "cat");
    CHECK(e["per_class"][3]["images"].get<int64_t>() == 2);
    // the table form runs too
    out = test::capture_stdout(
        [&] { test::run_command(apps::run_eval, {"--checkpoint", a + "/best", "--data", d, "--threads", "1"}); });
    CHECK(out.find("airplane") != std::string::npos);
    CHECK(out.find("test accuracy") != std::string::npos);

    // a checkpoint that does not fit: the strict load error lists the keys and gives a hint
    CHECK_THROWS_WITH_AS(
        test::run_command(apps::run_eval, {"--checkpoint", a, "--data", d, "--model", "resnet32", "--threads", "1"}),
        Contains("missing keys"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_eval, {"--checkpoint", a, "--data", d, "--classes", "0,1,2"}),
                         Contains("linear.weight"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_eval, {"--checkpoint", a, "--data", d, "--classes", "0,1,2"}),
                         Contains("hint"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_eval, {"--data", d}), Contains("--checkpoint is required"), Error);
}

TEST_CASE("razor train: a non-finite loss stops the run, naming epoch and step, and leaves last/ intact" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("nan");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 4, 10);
    const std::string out = tmp / "run";
    const std::vector<std::string> flags = {"--model", "resnet20", "--data", d, "--out", out, "--batch", "10",
                                            "--epochs", "1", "--threads", "1", "--sched", "none", "--eval-every", "0"};
    REQUIRE(train_cli(flags) == 0);
    const std::string before = read_file(out + "/last/" + std::string(train::kModelFile));
    CHECK_THROWS_WITH_AS(train_cli(plus(flags, {"--overwrite", "--lr", "1e35", "--wd", "0"})),
                         Contains("at epoch 1 step 2/2"), Error);
    CHECK_THROWS_WITH_AS(train_cli(plus(flags, {"--overwrite", "--lr", "1e35", "--wd", "0"})), Contains("hint: lower --lr"),
                         Error);
    CHECK(read_file(out + "/last/" + std::string(train::kModelFile)) == before);
    CHECK(train::load_checkpoint(out).train_metadata.at("epoch") == "1");
}

TEST_CASE("razor bench: one JSON line with the timing and memory fields") {
    const std::string out = test::capture_stdout([] {
        test::run_command(apps::run_bench, {"--model", "lenet5", "--batch", "4", "--steps", "3", "--warmup", "1",
                                            "--threads", "1", "--json"});
    });
    const json j = json::parse(out);
    Generator gen(0);
    CHECK(j["model"] == "lenet5");
    CHECK(j["batch"].get<int64_t>() == 4);
    CHECK(j["threads"].get<int64_t>() == 1);
    CHECK(j["params"].get<int64_t>() == models::make_model("lenet5", 10, gen)->num_parameters());
    CHECK(j["step_ms"].get<double>() > 0);
    CHECK(j["step_ms_min"].get<double>() <= j["step_ms"].get<double>());
    CHECK(j["img_per_s"].get<double>() == doctest::Approx(4000.0 / j["step_ms"].get<double>()));
    CHECK(j["saved_bytes"].get<int64_t>() > 0);
    CHECK(j["saved_dense_bytes"].get<int64_t>() >= j["saved_bytes"].get<int64_t>());
    CHECK(j["peak_tensor_bytes"].get<int64_t>() > j["params"].get<int64_t>() * 4);
    CHECK(j["peak_rss_bytes"].get<int64_t>() > 0);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--steps", "0"}), Contains("--steps >= 1"), Error);
}
