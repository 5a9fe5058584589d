// tests/apps/test_short_runs.cpp -- short runs and their outputs end to end on a tiny fake CIFAR-10: a one-cycle run
// of 3 steps, --eval-steps, the evaluation's time on the epoch line and in the log, img/s with the same meaning in
// train and sparse-train, --eval-every 0 meaning never, the resume line's lr being the epoch line's, and the curves
// (per-step panels) rendered to PNG.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/core.h"
#include "data/idx.h"

using namespace razor;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// lenet5 on 40 + 20 fake images, batch 8, one thread.
std::vector<std::string> small(const std::string& data, const std::string& out) {
    return {"--model", "lenet5", "--data", data, "--out", out, "--batch", "8", "--threads", "1", "--workers", "1",
            "--eval-batch", "7"};
}

// img/s is training images per second of training time (evaluation apart): img_per_s * seconds = images trained.
void check_img_per_s(const json& j, double images) {
    CHECK(j["img_per_s"].get<double>() * j["seconds"].get<double>() == doctest::Approx(images).epsilon(1e-6));
}

void check_png(const std::string& svg, const std::string& png) {
    if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
        MESSAGE("rsvg-convert not found (Debian: librsvg2-bin): render check of ", svg, " skipped");
        return;
    }
    REQUIRE(std::system(("rsvg-convert -o '" + png + "' '" + svg + "'").c_str()) == 0);
    CHECK(fs::file_size(png) > 1000);
}

}  // namespace

TEST_CASE("razor train: one epoch of 3 one-cycle steps, --eval-steps 1, evaluation time on the line and in the log" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("short_run");
    const std::string d = tmp / "cifar", out = tmp / "run";
    test::write_fake_cifar10(d, 8, 20);
    const std::string text = test::run_ok(apps::run_train, plus(small(d, out), {"--epochs", "1", "--steps-per-epoch",
                                                                               "3", "--eval-steps", "1"}));
    CHECK_MESSAGE(text.find(" s + eval ") != std::string::npos, text);
    const auto log = test::read_jsonl(out + "/log.jsonl");
    REQUIRE(log.size() == 1);
    CHECK(log[0]["test_images"] == 7);   // one batch of --eval-batch 7 (of 20)
    CHECK(log[0]["eval_seconds"].get<double>() >= 0);
    CHECK(log[0]["test_acc"].is_number());
    check_img_per_s(log[0], 3 * 8);
    REQUIRE(log[0].contains("curve"));
    CHECK(log[0]["curve"]["at"].size() == 3);
    CHECK(log[0]["curve"]["lr"][0].get<double>() < log[0]["curve"]["lr"][1].get<double>());   // the cycle rises...
    CHECK(log[0]["curve"]["lr"][2].get<double>() < log[0]["curve"]["lr"][1].get<double>());   // ...and falls
    check_png(out + "/curves.svg", tmp / "curves.png");
    // The whole test set without --eval-steps.
    const std::string all = tmp / "all";
    test::run_ok(apps::run_train, plus(small(d, all), {"--epochs", "1", "--steps-per-epoch", "1"}));
    CHECK(test::read_jsonl(all + "/log.jsonl")[0]["test_images"] == 20);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_train, plus(small(d, tmp / "bad"), {"--eval-steps", "-1"})),
                         doctest::Contains("--eval-steps"), Error);
}

TEST_CASE("razor train: --eval-every 0 never evaluates, not at --stop-after nor at the end; the resume line's lr is "
          "the epoch line's" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("never");
    const std::string d = tmp / "cifar", out = tmp / "run";
    test::write_fake_cifar10(d, 8, 20);
    const auto flags = plus(small(d, out), {"--epochs", "3", "--steps-per-epoch", "2", "--eval-every", "0",
                                            "--sched", "cosine"});
    const std::string first = test::run_ok(apps::run_train, plus(flags, {"--stop-after", "1"}));
    CHECK(first.find(" + eval ") == std::string::npos);
    const std::string resumed = test::run_ok(apps::run_train, {"--resume", out, "--data", d, "--threads", "1"});
    const auto log = test::read_jsonl(out + "/log.jsonl");
    REQUIRE(log.size() == 3);
    for (const json& j : log) {
        CHECK(j["test_acc"].is_null());
        CHECK_FALSE(j.contains("test_images"));
        CHECK(j["eval_seconds"] == 0.0);
    }
    CHECK_FALSE(fs::exists(out + "/best"));
    // "resume ...: after epoch 1, step 2, lr X (the last step's)": X is epoch 1's lr (the lr its last step used)
    const auto at = resumed.find("step 2, lr ");
    REQUIRE_MESSAGE(at != std::string::npos, resumed);
    const double lr = std::stod(resumed.substr(at + 11));
    CHECK(lr == doctest::Approx(log[0]["lr"].get<double>()).epsilon(1e-5));
    CHECK(lr != doctest::Approx(log[1]["curve"]["lr"][0].get<double>()).epsilon(1e-5));   // not the next step's
}

TEST_CASE("razor sparse-train: curves (loss, accuracy, lr, kept fraction), img/s of training only, evaluation "
          "fields" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_short");
    const std::string d = tmp / "cifar", out = tmp / "run";
    test::write_fake_cifar10(d, 8, 20);
    test::run_ok(apps::run_sparse_train,
                 {"--model", "resnet20", "--data", d, "--out", out, "--keep", "0.5", "--epochs", "1", "--batch", "8",
                  "--steps-per-epoch", "2", "--finetune-epochs", "1", "--candidates", "2", "--select-batches", "1",
                  "--threads", "1", "--eval-batch", "10", "--eval-steps", "1", "--workers", "1"});
    int epochs = 0;
    for (const json& j : test::read_jsonl(out + "/log.jsonl")) {
        if (j["phase"] != "A" && j["phase"] != "B") continue;
        ++epochs;
        check_img_per_s(j, 2 * 8);
        CHECK(j["test_images"] == 10);
        CHECK(j["eval_seconds"].is_number());
        CHECK(j["curve"]["at"].size() == 2);
    }
    CHECK(epochs == 2);
    const std::string svg = out + "/curves.svg";
    REQUIRE(fs::exists(svg));
    std::ifstream in(svg);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("kept fraction") != std::string::npos);
    check_png(svg, tmp / "sparse.png");
}

TEST_CASE("razor demo: --steps-per-epoch and --eval-steps make a run of seconds" * doctest::test_suite("cli-run")) {
    if (!fs::exists(data::kFashionMnistDir)) {
        MESSAGE("skipped: ", data::kFashionMnistDir, " not installed (Debian: dataset-fashion-mnist)");
        return;
    }
    test::TempDir tmp("demo_short");
    const std::string out = tmp / "demo";
    test::run_ok(apps::run_demo, {"--epochs", "2", "--steps-per-epoch", "3", "--eval-steps", "1", "--batch", "16",
                                  "--model", "mlp", "--hidden", "32", "--threads", "1", "--out", out});
    const auto log = test::read_jsonl(out + "/log.jsonl");
    REQUIRE(log.size() == 2);
    CHECK(log[1]["step"] == 6);
    CHECK(log[1]["test_images"] == 1000);
    check_img_per_s(log[1], 3 * 16);
    check_png(out + "/curves.svg", tmp / "demo.png");
}
