// tests/apps/test_sparse_train.cpp -- VR-PGE on real models: one phase-A iteration with compact execution
// (train/vrpge_trainer.h) against the dense masked reference; razor sparse-train end to end on a tiny fake CIFAR-10
// (phase A, selection, fine-tune, export, razor eval and a strict razor load of the export); --resume in either phase
// against an uninterrupted run; razor bench --keep.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "apps/commands.h"
#include "train/data_splits.h"
#include "train/vrpge_trainer.h"
#include "core/core.h"
#include "models/registry.h"
#include "models/resnet.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A log's entries without the wall-clock fields (seconds, eval_seconds, img/s), which no two runs share.
std::vector<json> without_timing(std::vector<json> log) {
    for (json& j : log)
        for (const char* k : {"seconds", "eval_seconds", "img_per_s"}) j.erase(k);
    return log;
}

}  // namespace

TEST_CASE("VrpgeTrainer on resnet20: one compact iteration -- w.grad is the two-pass average of the masked passes, s only "
          "moves by Adam + projection, Σ s <= budget") {
    Generator gen(11);
    auto model = models::make_model("resnet20", 10, gen);
    auto ref = models::make_model("resnet20", 10, gen);
    ref->load_state_dict(model->state_dict());
    train::VrpgeTrainerOptions o;
    o.adam.lr = 12e-3;
    o.sgd = {.lr = 0.0, .momentum = 0.0, .weight_decay = 0.0};   // lr 0: w stays, so its gradient can be compared
    o.step.rho = 0.3;
    o.step.max_norm = 1e9;                                       // no clip
    train::VrpgeTrainer t(model, o);
    const Tensor x = Tensor::randn({4, 3, 32, 32}, gen);
    const Tensor y = Tensor::from_vector_i64({4}, {1, 2, 3, 4});
    Generator masks(5);
    const auto r = t.step(x, y, masks);
    CHECK(nn::ChannelSubsetScope::current() == nullptr);   // dense again after the step
    CHECK(r.cost_ratio < 0.8);
    // The reference: the same two masks applied densely (BN output x mask), loss/2 each.
    auto& net = static_cast<models::CifarResNet&>(*ref);
    double losses[2];
    for (int pass = 0; pass < 2; ++pass) {
        const auto& m = pass == 0 ? r.result.masks1 : r.result.masks2;
        size_t l = 0;
        auto masked = [&](Tensor h) {
            const Tensor mk = reshape(m.m[l++], {1, -1, 1, 1});
            return mul(h, mk);
        };
        Tensor h = relu(masked((*net.bn1)((*net.conv1)(x))));
        for (const auto* stage : {net.layer1.get(), net.layer2.get(), net.layer3.get()})
            for (const auto& [name, child] : stage->named_children()) {
                auto& b = static_cast<models::BasicBlock&>(*child);
                Tensor z = relu(masked((*b.bn1)((*b.conv1)(h))));
                z = masked((*b.bn2)((*b.conv2)(z)));
                h = relu(add(z, b.shortcut ? (*b.shortcut)(h) : h));
            }
        const Tensor loss = cross_entropy((*net.linear)(flatten(adaptive_avg_pool2d(h, {1, 1}), 1)), y);
        losses[pass] = loss.item();
        mul(loss, 0.5f).backward();
    }
    CHECK(r.result.loss1 == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(r.result.loss2 == doctest::Approx(losses[1]).epsilon(1e-5));
    const auto pa = model->named_parameters(), pb = ref->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
        INFO(pa[i].first);
        const auto ga = pa[i].second.grad().to_vector(), gb = pb[i].second.grad().to_vector();
        double diff = 0, scale = 1e-3;
        for (size_t k = 0; k < ga.size(); ++k)
            diff = std::max(diff, double(std::fabs(ga[k] - gb[k]))), scale = std::max(scale, double(std::fabs(gb[k])));
        CHECK(diff <= 1e-4 * scale);
    }
    // the budget after the projection
    double sum = 0;
    for (const Tensor& s : t.scores.parameters())
        for (float v : s.to_vector()) {
            sum += v;
            CHECK((v >= 0.f && v <= 1.f));
        }
    CHECK(sum <= t.scores.budget(0.3) + 1e-2);
    CHECK(t.expected_keep() == doctest::Approx(sum / t.scores.num_masked_channels()));

    // one-backward variant: pass 2 records nothing; w.grad = grad of L1 alone; --align rounds kept counts up
    o.step.variant = sparse::VrpgeVariant::OneBackward;
    o.step.align = 8;
    train::VrpgeTrainer t2(models::make_model("resnet20", 10, gen), o);
    const auto r2 = t2.step(x, y, masks);
    for (size_t l = 0; l + 1 < r2.result.masks1.kept.size(); ++l) {
        const int64_t k = r2.result.masks1.kept[l].numel(), C = t2.scores.layers()[l].channels;
        CHECK((k % 8 == 0 || k == C));
    }
    CHECK(std::isfinite(r2.result.loss2));
}

TEST_CASE("razor sparse-train: phase A, selection, fine-tune, export; razor eval and a strict razor load of the "
          "exported smaller model" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_train");
    const std::string d = tmp / "cifar", out = tmp / "run";
    test::write_fake_cifar10(d, 8, 20);
    for (const std::string model : {"resnet20", "vgg16_bn"}) {
        INFO(model);
        const std::string o = out + "_" + model;
        std::string text = test::capture_stdout([&] {
            CHECK(test::run_command(apps::run_sparse_train,
                                    {"--model", model, "--data", d, "--out", o, "--keep", "0.5", "--epochs", "2",
                                     "--batch", "8", "--steps-per-epoch", "2", "--finetune-epochs", "1",
                                     "--candidates", "3", "--select-batches", "2", "--threads", "1", "--eval-batch",
                                     "10", "--workers", "1"}) == 0);
        });
        CHECK_MESSAGE(text.find("E[keep]") != std::string::npos, text);
        CHECK(text.find("two-backward (reference)") != std::string::npos);
        const auto log = test::read_jsonl(o + "/log.jsonl");
        int a = 0, select = 0, b = 0;
        for (const auto& j : log) {
            const std::string phase = j["phase"];
            a += phase == "A", select += phase == "B-select", b += phase == "B";
            if (phase == "A") {
                CHECK(j["expected_keep"].get<double>() <= 0.5 + 1e-3);
                // the joint norm covers w and s: never below the structure gradient's own norm
                CHECK(j["s_grad_norm"].get<double>() > 0);
                CHECK(j["grad_norm"].get<double>() >= j["s_grad_norm"].get<double>());
                CHECK((j["clipped"].get<double>() >= 0 && j["clipped"].get<double>() <= 1));
                CHECK(j["flops_ratio"].get<double>() < 0.8);
                CHECK(j["flops_ratio"].get<double>() > 0.05);
            }
        }
        CHECK(a == 2);
        CHECK(select == 3);
        CHECK(b == 1);
        REQUIRE(log.back()["phase"] == "export");
        const double exported_acc = log.back()["test_acc"].get<double>();
        CHECK(exported_acc == doctest::Approx(log.back()["last_test_acc"].get<double>()).epsilon(1e-9));
        CHECK(log.back()["params"].get<int64_t>() < log.back()["dense_params"].get<int64_t>());
        CHECK(fs::exists(o + "/last/model.safetensors"));

        // razor eval reads the widths from the metadata and reproduces the accuracy
        const std::string ev = test::capture_stdout([&] {
            test::run_command(apps::run_eval, {"--checkpoint", o + "/subnet", "--data", d, "--threads", "1", "--json"});
        });
        CHECK(json::parse(ev)["accuracy"].get<double>() == doctest::Approx(exported_acc).epsilon(1e-9));
        // a strict load into the zoo model built with those widths
        const SafeTensors st = load_safetensors(o + "/subnet/model.safetensors");
        std::vector<int64_t> widths;
        for (double w : train::parse_number_list("test", "widths", st.metadata.at("widths")))
            widths.push_back(static_cast<int64_t>(w));
        Generator gen(0);
        auto net = models::make_model(model, 10, gen, {.widths = widths});
        net->load_state_dict(st.tensors);
        CHECK(net->num_parameters() == log.back()["params"].get<int64_t>());
    }
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--data", d, "--keep", "0"}),
                         Contains("--keep must be in (0, 1]"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--data", d, "--model", "mlp", "--out", out + "_m"}),
                         Contains("cannot run compact channel subsets"), Error);
}

TEST_CASE("razor sparse-train --estimator pge: the vanilla ablation is labelled and changes only s's update" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_pge");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    auto run = [&](const std::string& out, const std::string& estimator) {
        std::string text;
        text = test::capture_stdout([&] {
            CHECK(test::run_command(apps::run_sparse_train,
                                    {"--model", "resnet20", "--data", d, "--out", out, "--estimator", estimator,
                                     "--epochs", "1", "--batch", "8", "--steps-per-epoch", "2", "--finetune-epochs",
                                     "0", "--candidates", "1", "--select-batches", "1", "--threads", "1",
                                     "--eval-every", "0", "--workers", "1"}) == 0);
        });
        return std::make_pair(text, train::load_checkpoint(out).train_state);
    };
    const auto [vr_text, vr] = run(tmp / "vr", "vr-pge");
    const auto [pge_text, pge] = run(tmp / "pge", "pge");
    CHECK(vr_text.find("estimator: VR-PGE") != std::string::npos);
    CHECK(pge_text.find("vanilla PGE, no baseline (an ablation, NOT the reference)") != std::string::npos);
    // Same seed: step 1 draws the same masks and computes the same losses, so only the s update differs.
    int differing = 0;
    for (const auto& [name, tensor] : vr)
        if (name.rfind("scores.", 0) == 0 && !test::same_tensors({{name, tensor}}, {{name, pge.at(name)}}))
            ++differing;
    CHECK(differing > 0);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--data", d, "--estimator", "reinforce"}),
                         Contains("--estimator must be vr-pge | pge, got reinforce"), Error);
}

TEST_CASE("razor sparse-train --resume: stopped in phase A, at the end of phase A and in phase B, the resumed run's "
          "log, checkpoint and export equal an uninterrupted run's bit for bit" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_resume");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    // 3 phase-A epochs and 2 fine-tune epochs of 2 steps: positions 1-3 are phase A, 4-5 the fine-tune.
    auto flags = [&](const std::string& out) {
        return std::vector<std::string>{"--model", "resnet20", "--data", d, "--out", out, "--keep", "0.5",
                                        "--epochs", "3", "--batch", "8", "--steps-per-epoch", "2",
                                        "--finetune-epochs", "2", "--candidates", "2", "--select-batches", "2",
                                        "--threads", "1", "--eval-batch", "10", "--workers", "1"};
    };
    auto run = [&](std::vector<std::string> args) {
        int code = -1;
        const std::string text = test::capture_stdout([&] { code = test::run_command(apps::run_sparse_train, args); });
        REQUIRE_MESSAGE(code == 0, text);
        return text;
    };
    auto stop_after = [&](const std::string& out, int e) {
        auto f = flags(out);
        f.insert(f.end(), {"--stop-after", std::to_string(e)});
        return f;
    };
    const std::string a = tmp / "a";
    run(flags(a));
    const auto la = without_timing(test::read_jsonl(a + "/log.jsonl"));
    REQUIRE(la.size() == 3 + 2 + 2 + 1);   // A epochs, candidates, fine-tune epochs, export
    const train::Checkpoint ca = train::load_checkpoint(a);
    CHECK(ca.train_metadata.at("phase") == "B");
    const auto sub_a = load_safetensors(a + "/subnet/model.safetensors").tensors;

    // b: stopped after A epoch 1, resumed and stopped after fine-tune epoch 1, resumed to the end.
    // c: stopped at the end of phase A (before the selection), resumed to the end.
    const std::string b = tmp / "b", c = tmp / "c";
    CHECK(run(stop_after(b, 1)).find("stopped after epoch 1 of 5") != std::string::npos);
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 1);
    CHECK(train::load_checkpoint(b).train_metadata.at("phase") == "A");
    CHECK_FALSE(fs::exists(b + "/subnet"));
    const std::string resumed = run({"--resume", b, "--threads", "1", "--stop-after", "4"});
    CHECK_MESSAGE(resumed.find("resume") != std::string::npos, resumed);
    CHECK(train::load_checkpoint(b).train_metadata.at("phase") == "B");
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 3 + 2 + 1);
    run({"--resume", b, "--threads", "1"});
    run(stop_after(c, 3));
    CHECK(test::read_jsonl(c + "/log.jsonl").size() == 3);
    run({"--resume", c, "--threads", "1"});

    for (const std::string& out : {b, c}) {
        INFO(out);
        const auto lo = without_timing(test::read_jsonl(out + "/log.jsonl"));
        REQUIRE(lo.size() == la.size());
        for (size_t i = 0; i < la.size(); ++i) CHECK_MESSAGE(lo[i] == la[i], lo[i].dump(), "\n", la[i].dump());
        const train::Checkpoint co = train::load_checkpoint(out);
        CHECK(test::same_tensors(ca.model, co.model));
        CHECK(test::same_tensors(ca.train_state, co.train_state));
        CHECK(test::same_tensors(sub_a, load_safetensors(out + "/subnet/model.safetensors").tensors));
    }

    // a flag that changes the computation must match the checkpoint's; another command's run is refused
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--resume", b, "--keep", "0.3"}),
                         Contains("--keep 0.3 differs from the resumed run's --keep 0.5"), Error);
    const std::string t = tmp / "t";
    test::capture_stdout([&] {
        test::run_command(apps::run_train, {"--model", "lenet5", "--data", d, "--out", t, "--epochs", "1", "--batch",
                                            "8", "--steps-per-epoch", "1", "--sched", "none", "--threads", "1",
                                            "--eval-batch", "10"});
    });
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--resume", t}),
                         Contains("was not written by razor sparse-train"), Error);
}

TEST_CASE("razor bench --keep: the VR-PGE iteration with the dense bench's fields") {
    const std::string out = test::capture_stdout([] {
        test::run_command(apps::run_bench, {"--model", "resnet20", "--batch", "4", "--steps", "2", "--warmup", "1",
                                            "--threads", "1", "--keep", "0.3", "--json"});
    });
    const json j = json::parse(out);
    CHECK(j["keep"].get<double>() == 0.3);
    CHECK(j["variant"] == "two-backward (reference)");
    CHECK(j["step_ms"].get<double>() > 0);
    CHECK(j["flops_ratio"].get<double>() > 0.01);
    CHECK(j["flops_ratio"].get<double>() < 0.6);
    for (const char* k : {"model", "batch", "threads", "img_per_s", "params", "saved_bytes", "peak_rss_bytes"})
        CHECK(j.contains(k));
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--keep", "1.5"}), Contains("--keep must be in"), Error);
}
