// tests/apps/test_round_trip.cpp -- every checkpoint razor writes evaluates with `razor eval --checkpoint RUN` and no
// other flag: demo (its CNN and MLP, rebuilt from the checkpoint's metadata), train, finetune on a class subset,
// sparse-train. razor eval --save-logits writes what scripts/check_interop.py compares against PyTorch (that script
// itself runs in the slow suite: importing torch takes seconds).
#include <doctest/doctest.h>

#include <filesystem>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/core.h"

using namespace razor;
namespace fs = std::filesystem;

namespace {

// `razor eval --checkpoint run` alone; returns its accuracy line.
std::string eval_alone(const std::string& run, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--checkpoint", run, "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string out = test::run_ok(apps::run_eval, args);
    INFO(out);
    CHECK(out.find("result  test accuracy") != std::string::npos);
    return out;
}

const std::vector<std::string> kShort = {"--batch", "8", "--epochs", "1", "--threads", "1"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("round trip: razor eval --checkpoint alone on demo (cnn, mlp), train, finetune --classes, sparse-train" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("round_trip");
    const std::string fashion = tmp / "fashion", cifar = tmp / "cifar";
    test::write_fake_fashion_mnist(fashion, 32, 20);
    test::write_fake_cifar10(cifar, 8, 20);

    SUBCASE("demo") {
        for (const std::string model : {"cnn", "mlp"}) {
            INFO(model);
            const std::string out = tmp / ("demo_" + model);
            test::run_ok(apps::run_demo, plus(kShort, {"--data", fashion, "--model", model, "--hidden", "16",
                                                       "--out", out}));
            const std::string text = eval_alone(out, {"--save-logits", tmp / "logits.safetensors"});
            CHECK(text.find("demo-" + model) != std::string::npos);
            CHECK(text.find("20 test images (1, 28, 28)") != std::string::npos);
            const auto io = load_safetensors(tmp / "logits.safetensors").tensors;
            REQUIRE(io.count("input"));
            CHECK(io.at("input").shape() == Shape{20, 1, 28, 28});
            CHECK(io.at("logits").shape() == Shape{20, 10});
        }
    }
    SUBCASE("train, then finetune on a class subset") {
        const std::string run = tmp / "train", tuned = tmp / "tuned";
        test::run_ok(apps::run_train, plus(kShort, {"--model", "resnet20", "--data", cifar, "--steps-per-epoch", "2",
                                                    "--eval-batch", "10", "--sched", "cosine", "--out", run}));
        eval_alone(run);
        test::run_ok(apps::run_finetune, plus(kShort, {"--from", run, "--data", cifar, "--classes", "cat,dog,ship",
                                                       "--steps-per-epoch", "2", "--eval-batch", "10", "--out", tuned}));
        const std::string text = eval_alone(tuned);
        CHECK(text.find("6 test images") != std::string::npos);   // the 3 classes' 2 test images each
    }
    SUBCASE("sparse-train") {
        const std::string run = tmp / "sparse";
        test::run_ok(apps::run_sparse_train,
                     plus(kShort, {"--model", "resnet20", "--data", cifar, "--keep", "0.5", "--steps-per-epoch", "2",
                                   "--finetune-epochs", "1", "--candidates", "2", "--select-batches", "1",
                                   "--eval-batch", "10", "--out", run}));
        eval_alone(run);
        eval_alone(run + "/subnet/model.safetensors");
    }
}

TEST_CASE("round trip: scripts/check_interop.py agrees with razor eval --save-logits on a demo run" *
          doctest::test_suite("slow")) {
    // PyTorch is optional (scripts/setup.sh --bench installs it); the committed fixtures cover parity without it.
    if (!fs::exists("/usr/bin/python3") || std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
        MESSAGE("PyTorch is not installed for /usr/bin/python3: check_interop.py not run (bash scripts/setup.sh --bench)");
        return;
    }
    test::TempDir tmp("interop_demo");
    test::write_fake_fashion_mnist(tmp / "fashion", 32, 20);
    test::run_ok(apps::run_demo, plus(kShort, {"--data", tmp / "fashion", "--out", tmp / "demo"}));
    eval_alone(tmp / "demo", {"--save-logits", tmp / "io.safetensors"});
    const std::string cmd = "/usr/bin/python3 " + std::string(RAZOR_FIXTURE_DIR) + "/../../scripts/check_interop.py " +
                            tmp / "demo" + " --logits " + tmp / "io.safetensors" + " > " + tmp / "out.txt" + " 2>&1";
    const int status = std::system(cmd.c_str());
    INFO(test::read_bytes(tmp / "out.txt"));
    CHECK(status == 0);
    CHECK(test::read_bytes(tmp / "out.txt").find("logits agree") != std::string::npos);
}
