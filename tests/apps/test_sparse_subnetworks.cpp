// tests/apps/test_sparse_subnetworks.cpp -- VR-PGE subnetworks through the CLI.
// --stream-masks: razor sparse-train labels it, trains, exports a subnetwork whose stages are the stream masks, and
// refuses to resume with a different setting; razor bench --keep --stream-masks says so in its JSON; both refuse it
// for a VGG (no residual stream).
// razor train --widths: a narrower CIFAR ResNet trained from scratch (the control a VR-PGE subnetwork is compared
// against: the same architecture, dense training); the widths are recorded in the checkpoint's metadata, so razor
// eval rebuilds the network from the run folder alone; widths that do not describe the model are refused.
#include <doctest/doctest.h>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "train/checkpoint.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;

TEST_CASE("razor sparse-train --stream-masks: labelled, trains and exports; resume keeps the setting" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_stream_masks");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    const std::string out = tmp / "run";
    const std::string text = test::run_ok(
        apps::run_sparse_train,
        {"--model", "resnet20", "--data", d, "--out", out, "--keep", "0.5", "--stream-masks", "--epochs", "2",
         "--batch", "8", "--steps-per-epoch", "2", "--finetune-epochs", "1", "--candidates", "2", "--select-batches",
         "1", "--threads", "1", "--eval-batch", "10", "--workers", "1", "--stop-after", "1"});
    CHECK_MESSAGE(text.find("--stream-masks: one mask per residual stream") != std::string::npos, text);
    CHECK(text.find("19 scored convs (12 own masks), n = 448") != std::string::npos);
    const train::Checkpoint ck = train::load_checkpoint(out);
    CHECK(ck.train_state.count("scores.layer1.0.conv1.s") == 1);
    CHECK(ck.train_state.count("scores.layer1.0.conv2.s") == 0);   // shares conv1's (the stem's) mask
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--resume", out, "--stream-masks=false"}),
                         Contains("--stream-masks"), Error);
    test::run_ok(apps::run_sparse_train, {"--resume", out, "--threads", "1"});
    const auto log = test::read_jsonl(out + "/log.jsonl");
    CHECK(log.back().dump().find("widths") != std::string::npos);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--model", "vgg16_bn", "--data", d, "--out",
                                                                    tmp / "vgg", "--stream-masks"}),
                         Contains("VGGs have no residual stream"), Error);
}

TEST_CASE("razor bench --keep --stream-masks: the JSON says so; without --keep it is refused") {
    const std::string out = test::capture_stdout([] {
        test::run_command(apps::run_bench, {"--model", "resnet20", "--batch", "4", "--steps", "1", "--warmup", "0",
                                            "--threads", "1", "--keep", "0.5", "--stream-masks", "--json"});
    });
    const json j = json::parse(out);
    CHECK(j["stream_masks"] == true);
    CHECK(j["flops_ratio"].get<double>() < 0.4);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--stream-masks"}), Contains("hint: pass --keep K"),
                         Error);
}

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
