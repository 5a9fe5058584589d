// tests/apps/test_sparse_resample.cpp -- VR-PGE with --resample-every N (the seed's strategy, train/vrpge_trainer.h):
// the resample step is the reference iteration; between resamples s does not move and w trains on the interval's
// mask alone; razor sparse-train stopped mid-interval and resumed equals an uninterrupted run bit for bit; razor
// bench --keep --resample-every times whole intervals; a bad N is refused naming the flag.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/core.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/vrpge_trainer.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;

namespace {

std::map<std::string, Tensor> copies(const optim::NamedParameters& params) {
    std::map<std::string, Tensor> out;
    for (const auto& [name, p] : params) out[name] = p.detach().clone();
    return out;
}

// The tensors of `params` equal the copies `before`, bit for bit.
bool unchanged(const optim::NamedParameters& params, const std::map<std::string, Tensor>& before) {
    return test::same_tensors(copies(params), before);
}

train::VrpgeTrainerOptions options(int64_t resample_every) {
    train::VrpgeTrainerOptions o;
    o.adam.lr = 12e-3;
    o.sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4};
    o.step.rho = 0.4;
    o.resample_every = resample_every;
    return o;
}

// The rows of a conv weight gradient (OC, IC, k, k) that hold a non-zero.
std::vector<int64_t> nonzero_rows(const Tensor& grad) {
    const auto g = grad.to_vector();
    const int64_t rows = grad.size(0), per = grad.numel() / rows;
    std::vector<int64_t> out;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < per; ++i)
            if (g[static_cast<size_t>(r * per + i)] != 0.f) {
                out.push_back(r);
                break;
            }
    return out;
}

}  // namespace

TEST_CASE("VrpgeTrainer --resample-every 3: the resample step is the reference iteration, s moves only there, and "
          "the steps between train w alone on the interval's mask") {
    Generator gen(21);
    auto model = models::make_model("resnet20", 10, gen);
    auto ref_model = models::make_model("resnet20", 10, gen);
    ref_model->load_state_dict(model->state_dict());
    train::VrpgeTrainer t(model, options(3));
    train::VrpgeTrainer ref(ref_model, options(1));
    const Tensor x = Tensor::randn({4, 3, 32, 32}, gen);
    const Tensor y = Tensor::from_vector_i64({4}, {1, 2, 3, 4});
    Generator masks(7), ref_masks(7);

    // step 0 resamples: w, s, Adam's and SGD's state are the reference iteration's, bit for bit
    CHECK(t.resamples_next());
    const auto r0 = t.step(x, y, masks);
    const auto q0 = ref.step(x, y, ref_masks);
    CHECK(r0.resampled);
    CHECK(r0.result.loss1 == q0.result.loss1);
    CHECK(r0.result.loss2 == q0.result.loss2);
    CHECK(test::same_tensors(model->state_dict(), ref_model->state_dict()));
    CHECK(unchanged(t.scores.named_parameters(), copies(ref.scores.named_parameters())));
    CHECK(test::same_tensors(t.opt_s.state_dict(), ref.opt_s.state_dict()));
    CHECK(test::same_tensors(t.opt_w.state_dict(), ref.opt_w.state_dict()));
    // ... and then the interval's mask is drawn: one entry per scored layer, a strict subset of the masked channels
    const models::ChannelPlan interval = t.interval();
    REQUIRE(interval.size() == t.scores.layers().size());
    int64_t kept = 0;
    for (const auto& layer : t.scores.layers())
        if (layer.masked) kept += static_cast<int64_t>(interval.at(layer.name).size());
    CHECK(kept > 0);
    CHECK(kept < t.scores.num_masked_channels());

    for (int64_t step = 1; step < 6; ++step) {
        INFO("step ", step);
        const auto s_before = copies(t.scores.named_parameters());
        const auto adam_before = t.opt_s.state_dict();
        const auto w_before = copies(model->named_parameters());
        CHECK(t.resamples_next() == (step % 3 == 0));
        const auto r = t.step(x, y, masks);
        CHECK(t.steps_done() == step + 1);
        CHECK(nn::ChannelSubsetScope::current() == nullptr);   // dense again after the step
        CHECK(std::isfinite(r.loss));
        CHECK_FALSE(unchanged(model->named_parameters(), w_before));   // w trains every step
        if (step % 3 == 0) {
            CHECK(r.resampled);
            CHECK_FALSE(unchanged(t.scores.named_parameters(), s_before));
            continue;
        }
        CHECK_FALSE(r.resampled);
        CHECK(unchanged(t.scores.named_parameters(), s_before));             // s untouched
        CHECK(test::same_tensors(t.opt_s.state_dict(), adam_before));        // and its Adam state
        CHECK(r.cost_ratio < 0.9);                                           // one compact pass
        // the kept channels are the interval's: a dropped output channel's weight gradient is exactly zero
        const models::ChannelPlan& plan = t.interval();
        std::map<std::string, Tensor> params;
        for (const auto& [name, p] : model->named_parameters()) params[name] = p;
        for (const auto& layer : t.scores.layers()) {
            if (!layer.masked) continue;
            INFO(layer.name);
            const std::vector<int64_t>& keep = plan.at(layer.name);
            const Tensor& g = params.at(layer.name + ".weight").grad();
            REQUIRE(g.defined());
            for (int64_t row : nonzero_rows(g)) CHECK(std::binary_search(keep.begin(), keep.end(), row));
        }
        if (step < 3) {   // the mask drawn at step 0 holds for steps 1 and 2
            for (const auto& layer : t.scores.layers()) CHECK(plan.at(layer.name) == interval.at(layer.name));
        }
    }
}

TEST_CASE("VrpgeTrainer: resample_every < 1 is refused; resuming inside an interval needs its mask") {
    Generator gen(3);
    auto model = models::make_model("resnet20", 10, gen);
    CHECK_THROWS_WITH_AS(train::VrpgeTrainer(model, options(0)), Contains("resample_every must be >= 1, got 0"),
                         Error);
    train::VrpgeTrainer t(model, options(4));
    CHECK_THROWS_WITH_AS(t.resume_at(5, {}), Contains("without the interval's mask"), Error);
    t.resume_at(8, {});   // at a resample point nothing else is needed
    CHECK(t.resamples_next());
}

TEST_CASE("razor sparse-train --resample-every 3: stopped mid-interval twice and resumed, the log, checkpoint and "
          "export equal an uninterrupted run's bit for bit" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("sparse_resample");
    const std::string d = tmp / "cifar";
    test::write_fake_cifar10(d, 8, 20);
    // 3 phase-A epochs of 2 steps (steps 0-5; resamples at 0 and 3), then 1 fine-tune epoch: --stop-after 1 stops
    // after step 1 (the interval's 2nd step), --stop-after 2 after step 3 (the 2nd interval's 1st).
    auto flags = [&](const std::string& out) {
        return std::vector<std::string>{"--model", "resnet20", "--data", d, "--out", out, "--keep", "0.5",
                                        "--resample-every", "3", "--epochs", "3", "--batch", "8",
                                        "--steps-per-epoch", "2", "--finetune-epochs", "1", "--candidates", "2",
                                        "--select-batches", "1", "--threads", "1", "--eval-batch", "10",
                                        "--workers", "1"};
    };
    auto without_timing = [](std::vector<json> log) {
        for (json& j : log)
            for (const char* k : {"seconds", "eval_seconds", "img_per_s"}) j.erase(k);
        return log;
    };
    const std::string a = tmp / "a", b = tmp / "b";
    const std::string text = test::run_ok(apps::run_sparse_train, flags(a));
    CHECK_MESSAGE(text.find("--resample-every 3") != std::string::npos, text);
    CHECK(text.find("the seed's strategy, NOT the reference") != std::string::npos);
    const auto la = without_timing(test::read_jsonl(a + "/log.jsonl"));
    REQUIRE(la.size() == 3 + 2 + 1 + 1);   // A epochs, candidates, the fine-tune epoch, export
    // resample steps: 0 (epoch 1), 3 (epoch 2), none in epoch 3, where s does not move
    CHECK(la[0]["resampled"].get<double>() == 0.5);
    CHECK(la[1]["resampled"].get<double>() == 0.5);
    CHECK(la[2]["resampled"].get<double>() == 0);
    CHECK(la[0]["resample_every"] == 3);
    CHECK(la[0]["s_grad_norm"].get<double>() > 0);
    CHECK(la[2]["s_grad_norm"].get<double>() == 0);
    CHECK(la[2]["expected_keep"].get<double>() == la[1]["expected_keep"].get<double>());
    CHECK(la[1]["expected_keep"].get<double>() != la[0]["expected_keep"].get<double>());

    auto stop_after = [&](int e) {
        auto f = flags(b);
        f.insert(f.end(), {"--stop-after", std::to_string(e)});
        return f;
    };
    test::run_ok(apps::run_sparse_train, stop_after(1));
    const train::Checkpoint mid = train::load_checkpoint(b);
    CHECK(mid.train_state.at("vrpge.steps").to_vector_i64()[0] == 2);
    CHECK(mid.train_state.count("interval.counts") == 1);
    CHECK(mid.train_state.count("interval.kept") == 1);
    test::run_ok(apps::run_sparse_train, {"--resume", b, "--threads", "1", "--stop-after", "2"});
    CHECK(train::load_checkpoint(b).train_state.at("vrpge.steps").to_vector_i64()[0] == 4);
    test::run_ok(apps::run_sparse_train, {"--resume", b, "--threads", "1"});

    const auto lb = without_timing(test::read_jsonl(b + "/log.jsonl"));
    REQUIRE(lb.size() == la.size());
    for (size_t i = 0; i < la.size(); ++i) CHECK_MESSAGE(lb[i] == la[i], lb[i].dump(), "\n", la[i].dump());
    const train::Checkpoint ca = train::load_checkpoint(a), cb = train::load_checkpoint(b);
    CHECK(test::same_tensors(ca.model, cb.model));
    CHECK(test::same_tensors(ca.train_state, cb.train_state));
    CHECK(test::same_tensors(load_safetensors(a + "/subnet/model.safetensors").tensors,
                             load_safetensors(b + "/subnet/model.safetensors").tensors));

    // the interval is part of the run: it may not change on resume, and a bad N is refused naming the flag
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--resume", b, "--resample-every", "5"}),
                         Contains("--resample-every 5 differs from the resumed run's --resample-every 3"), Error);
    for (const std::string n : {"0", "-2"})
        CHECK_THROWS_WITH_AS(test::run_command(apps::run_sparse_train, {"--data", d, "--resample-every", n}),
                             Contains("--resample-every must be >= 1"), Error);
}

TEST_CASE("razor bench --keep --resample-every: whole intervals are the timed unit, and the JSON says so") {
    const std::string out = test::capture_stdout([] {
        test::run_command(apps::run_bench, {"--model", "resnet20", "--batch", "4", "--steps", "1", "--warmup", "0",
                                            "--threads", "1", "--keep", "0.3", "--resample-every", "3", "--json"});
    });
    const json j = json::parse(out);
    CHECK(j["timed_unit"] == "interval");
    CHECK(j["resample_every"] == 3);
    CHECK(j["interval_ms"].get<double>() == doctest::Approx(3 * j["step_ms"].get<double>()));
    CHECK(j["flops_ratio"].get<double>() > 0.01);
    CHECK(j["flops_ratio"].get<double>() < 0.6);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--keep", "0.5", "--resample-every", "0"}),
                         Contains("--resample-every must be >= 1, got 0"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--resample-every", "4"}),
                         Contains("hint: pass --keep K"), Error);
}
