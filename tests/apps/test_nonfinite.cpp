// tests/apps/test_nonfinite.cpp -- NaN/Inf during training: the guard names the op and module where the first
// non-finite value appeared, stops with the checkpoint intact, or (--skip-nonfinite) skips the step and undoes its
// side effects (BN running statistics, RNG), and gives up after 20 skips in a row. Unit level, through razor train, and
// through razor sparse-train phase B (the fixed-subnet fine-tune runs the same loop and policy, train/fit.h).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "apps/commands.h"
#include "train/nonfinite.h"
#include "core/core.h"
#include "nn/batchnorm.h"
#include "nn/linear.h"

using namespace razor;
using doctest::Contains;

namespace {

// x (N, 2, 2, 2) -> bn -> flatten -> fc (3 classes); "head" applies log to fc's output when `log_head` is set, which
// makes NaN for any negative logit.
struct BnNet : nn::Module {
    std::shared_ptr<nn::BatchNorm2d> bn;
    std::shared_ptr<nn::Linear> fc;
    bool log_head = false;
    explicit BnNet(Generator& gen) {
        bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
        fc = register_module("fc", std::make_shared<nn::Linear>(8, 3, true, gen));
    }
    Tensor forward(const Tensor& x) override {
        Tensor y = (*fc)(flatten((*bn)(x), 1));
        if (!log_head) return y;
        NameScope head("head");
        return log(y);
    }
};

std::vector<float> values(const Tensor& t) { return t.to_vector(); }

using Command = int (*)(const std::vector<std::string>&);

// Runs `command` with stdout captured; returns its exit code.
int run_quiet(Command command, const std::vector<std::string>& args) {
    int rc = 0;
    test::capture_stdout([&] { rc = test::run_command(command, args); });
    return rc;
}

// The message of the razor::Error `command` throws ("" when it throws none).
std::string error_of(Command command, const std::vector<std::string>& args) {
    try {
        run_quiet(command, args);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// What a run stopped by a non-finite second step says, razor train's and sparse-train phase B's alike: where, the
// first non-finite value with its op and module, and a hint.
void check_stop_message(const std::string& message) {
    INFO(message);
    CHECK(message.find("at epoch 1 step 2/2") != std::string::npos);
    CHECK(message.find("first non-finite value: ") != std::string::npos);
    CHECK(message.find("(module '") != std::string::npos);
    CHECK(message.find(" NaN, ") != std::string::npos);
    CHECK(message.find("hint:") != std::string::npos);
}

}  // namespace

TEST_CASE("NonFiniteGuard: stop names the op and module; skip restores BN statistics and moves the RNG on") {
    Generator gen(1);
    BnNet net(gen);
    Tensor x = Tensor::randn({4, 2, 2, 2}, gen);
    const Tensor labels = Tensor::from_vector_i64({4}, {0, 1, 2, 0});
    auto forward_backward = [&] { cross_entropy(net(x), labels).backward(); };

    // 1. A NaN weight, stop mode: the message names the parameter, the op reading it and its module.
    net.fc->named_parameters()[0].second.detach().f32()[5] = std::numeric_limits<float>::quiet_NaN();
    train::NonFiniteGuard stop(net, {});
    stop.begin_step();
    forward_backward();
    CHECK_THROWS_WITH_AS(stop.on_nonfinite("train: the loss became nan", "at step 1", "the checkpoint is intact",
                                           forward_backward),
                         Contains("linear (module 'fc') input 1 (parameter fc.weight) (3, 8): 1 NaN"), Error);
    CHECK_THROWS_WITH_AS(stop.on_nonfinite("train: the loss became nan", "at step 1", "the checkpoint is intact",
                                           forward_backward),
                         Contains("stopped, the checkpoint is intact; hint: lower --lr"), Error);
    net.fc->named_parameters()[0].second.detach().f32()[5] = 0.5f;

    // 2. An op making NaN, skip mode: the report goes to stderr, buffers return to their pre-step values.
    net.log_head = true;
    train::NonFiniteGuard skip(net, {.skip = true, .max_consecutive_skips = 3});
    const std::vector<float> mean_before = values(net.bn->named_buffers()[0].second);
    x.f32()[0] = 1e30f;   // a huge input makes this step's batch statistics (and running stats) extreme
    skip.begin_step();
    (void)Tensor::rand({3}, default_generator());   // the step draws from the RNG (as dropout would)
    const auto rng_after_step = default_generator().state();
    forward_backward();
    CHECK(values(net.bn->named_buffers()[0].second) != mean_before);   // the faulty step updated them
    skip.on_nonfinite("train: the loss became nan", "at step 2", "-", forward_backward);
    CHECK(values(net.bn->named_buffers()[0].second) == mean_before);
    CHECK(default_generator().state() == rng_after_step);
    for (const auto& [name, p] : net.named_parameters()) CHECK_MESSAGE(!p.grad().defined(), name);
    CHECK(skip.skipped() == 1);

    // 3. Three in a row: give up.
    skip.begin_step();
    skip.on_nonfinite("train: the loss became nan", "at step 3", "-", forward_backward);
    skip.begin_step();
    CHECK_THROWS_WITH_AS(skip.on_nonfinite("train: the loss became nan", "at step 4", "-", forward_backward),
                         Contains("gave up after 3 non-finite steps in a row"), Error);
    // a finite step in between resets the count
    train::NonFiniteGuard again(net, {.skip = true, .max_consecutive_skips = 2});
    again.begin_step();
    again.on_nonfinite("t", "s", "-", forward_backward);
    again.step_ok();
    again.begin_step();
    CHECK_NOTHROW(again.on_nonfinite("t", "s", "-", forward_backward));
}

TEST_CASE("razor train: a non-finite step names the op; --skip-nonfinite skips and counts; 20 in a row give up") {
    test::TempDir tmp("nonfinite");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 4, 10);
    const std::string out = tmp / "run";
    // lr 1e35: the first step's update makes the weights overflow, the second step goes non-finite.
    const std::vector<std::string> flags = {"--model", "lenet5", "--data", d, "--out", out, "--batch", "10",
                                            "--epochs", "1", "--threads", "1", "--sched", "none", "--eval-every", "0",
                                            "--lr", "1e35", "--wd", "0", "--augment", "none"};
    const std::string message = error_of(apps::run_train, flags);
    check_stop_message(message);
    CHECK(message.find("stopped, no checkpoint was written yet (epoch 1)") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out + "/last"));   // nothing was written: the run stopped in epoch 1

    // --skip-nonfinite: batch 1 makes 20 steps; 19 are skipped, the epoch completes, the skips are counted.
    const auto skipping = plus(flags, {"--overwrite", "--skip-nonfinite", "--batch", "1", "--steps-per-epoch", "20"});
    REQUIRE(run_quiet(apps::run_train, skipping) == 0);
    std::ifstream log(out + "/log.jsonl");
    std::string line;
    std::getline(log, line);
    const auto j = nlohmann::json::parse(line);
    CHECK(j.at("skipped_steps").get<int64_t>() == 19);
    // the checkpoint holds finite weights' buffers: skipped steps left no NaN behind in them (lenet5 has no BN, but
    // the loss average of the one good step is finite)
    CHECK(std::isfinite(j.at("loss").get<double>()));
    // two epochs: the 20th skip in a row (epoch 2 step 1) gives up
    CHECK(error_of(apps::run_train, plus(skipping, {"--epochs", "2"})).find("gave up after 20 non-finite steps") !=
          std::string::npos);
}

TEST_CASE("razor train --step-in-backward: the same weights as the plain step; --clip and --skip-nonfinite are "
          "refused") {
    test::TempDir tmp("step_in_backward");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 4, 10);
    const std::vector<std::string> flags = {"--model", "lenet5", "--data", d, "--batch", "10", "--epochs", "1",
                                            "--threads", "1", "--sched", "none", "--eval-every", "0", "--augment",
                                            "none", "--momentum", "0.9"};
    REQUIRE(run_quiet(apps::run_train, plus(flags, {"--out", tmp / "plain"})) == 0);
    REQUIRE(run_quiet(apps::run_train, plus(flags, {"--out", tmp / "fused", "--step-in-backward"})) == 0);
    const auto plain = train::load_checkpoint(tmp / "plain").model, fused = train::load_checkpoint(tmp / "fused").model;
    REQUIRE(plain.size() == fused.size());
    for (const auto& [key, t] : plain) CHECK_MESSAGE(t.to_vector() == fused.at(key).to_vector(), key);

    CHECK(error_of(apps::run_train, plus(flags, {"--out", tmp / "x", "--step-in-backward", "--clip", "1"}))
              .find("cannot --clip 1; hint: drop one of them") != std::string::npos);
    CHECK(error_of(apps::run_train, plus(flags, {"--out", tmp / "x", "--step-in-backward", "--skip-nonfinite"}))
              .find("cannot be skipped (--skip-nonfinite)") != std::string::npos);
}

TEST_CASE("razor sparse-train phase B: a non-finite fine-tune step is handled as razor train's: it stops naming the "
          "op, or --skip-nonfinite skips and counts; 20 in a row give up") {
    test::TempDir tmp("nonfinite_sparse");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 4, 10);
    const std::string out = tmp / "run";
    // No phase A; the chosen subnetwork is fine-tuned at lr 1e35: the first step's update makes the weights
    // overflow, the second step goes non-finite.
    const std::vector<std::string> flags = {"--model", "resnet20", "--data", d, "--out", out, "--batch", "10",
                                            "--epochs", "0", "--finetune-epochs", "1", "--candidates", "1",
                                            "--select-batches", "1", "--threads", "1", "--workers", "1",
                                            "--eval-batch", "10", "--finetune-lr", "1e35", "--wd", "0",
                                            "--augment", "none"};
    const std::string message = error_of(apps::run_sparse_train, flags);
    check_stop_message(message);
    CHECK(message.rfind("razor sparse-train: ", 0) == 0);
    CHECK(message.find("stopped, the last checkpoint (" + out + "/last, epoch 0) is intact") != std::string::npos);
    // the selection's checkpoint is intact: phase B, no fine-tune epoch done
    CHECK(train::load_checkpoint(out).train_metadata.at("phase") == "B");
    for (const auto& j : test::read_jsonl(out + "/log.jsonl")) CHECK(j.at("phase") == "B-select");

    // --skip-nonfinite: batch 1 makes 20 steps; 19 are skipped, the epoch completes, the skips are counted.
    const auto skipping = plus(flags, {"--overwrite", "--skip-nonfinite", "--batch", "1", "--steps-per-epoch", "20"});
    REQUIRE(run_quiet(apps::run_sparse_train, skipping) == 0);
    int b_lines = 0;
    for (const auto& j : test::read_jsonl(out + "/log.jsonl")) {
        if (j.at("phase") != "B") continue;
        ++b_lines;
        CHECK(j.at("skipped_steps").get<int64_t>() == 19);
        CHECK(std::isfinite(j.at("loss").get<double>()));   // the loss average of the one good step
    }
    CHECK(b_lines == 1);
    // two fine-tune epochs: the 20th skip in a row (epoch 2 step 1) gives up
    CHECK(error_of(apps::run_sparse_train, plus(skipping, {"--finetune-epochs", "2"}))
              .find("gave up after 20 non-finite steps") != std::string::npos);
}
