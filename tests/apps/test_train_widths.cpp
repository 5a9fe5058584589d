// tests/apps/test_train_widths.cpp -- razor train --widths: a narrower CIFAR ResNet trained from scratch (the
// control VR-PGE's subnetwork is compared against: the same architecture, dense training). The widths are
// recorded in the checkpoint's metadata, so razor eval rebuilds the network from the run folder alone; widths that
// do not describe the model are refused naming the flag.
#include <doctest/doctest.h>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "train/checkpoint.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;

TEST_CASE("razor train --widths: a narrower ResNet from scratch; eval from the run folder; bad widths refused" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("train_widths");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    // resnet20: the stem, then 9 blocks x (conv1, conv2); option A keeps each stage's stream width
    const std::string widths = "16,8,16,4,16,12,16,20,32,16,32,8,32,40,64,32,64,16,64";
    const std::string out = tmp / "run";
    test::run_ok(apps::run_train, {"--model", "resnet20", "--widths", widths, "--data", d, "--out", out, "--epochs",
                                   "1", "--batch", "8", "--steps-per-epoch", "2", "--threads", "1", "--workers", "1"});
    const train::Checkpoint ck = train::load_checkpoint(out);
    CHECK(ck.model_metadata.at("widths") == widths);
    CHECK(ck.model.at("layer1.0.conv1.weight").shape() == Shape{8, 16, 3, 3});
    CHECK(ck.model.at("layer3.2.conv1.weight").shape() == Shape{16, 64, 3, 3});
    const std::string e = test::capture_stdout([&] {
        test::run_command(apps::run_eval, {"--checkpoint", out, "--data", d, "--threads", "1", "--json"});
    });
    CHECK(json::parse(e)["images"].get<int64_t>() == 20);

    CHECK_THROWS_WITH_AS(test::run_command(apps::run_train, {"--model", "resnet20", "--widths", "16,8", "--data", d,
                                                             "--out", tmp / "bad"}),
                         Contains("--widths 16,8 does not describe a resnet20"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_train, {"--model", "resnet20", "--widths", "16,0.5", "--data", d,
                                                             "--out", tmp / "bad"}),
                         Contains("--widths expected whole numbers >= 1"), Error);
}
