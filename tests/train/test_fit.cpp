// tests/train/test_fit.cpp -- fit()'s checkpoints inside an epoch (train/fit.h, train/fit_position.h): --save-every
// and interrupts. A resumed run must end bit-identical to one never stopped: same weights, same optimizer state, same
// per-epoch losses and accuracies (the epoch's running sums come back from the checkpoint).
//
// The run: an MLP 16-8-3 on 48 synthetic 1x4x4 images, batch 4 (12 steps an epoch), SGD with momentum, 3 epochs.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>

#include "apps/apps_support.h"
#include "core/core.h"
#include "models/mlp.h"
#include "optim/sgd.h"
#include "train/epoch_record.h"
#include "train/fit.h"
#include "train/steps.h"
#include "train/train_state.h"

using namespace razor;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kEpochs = 3, kSteps = 12;

data::ImageDataset tiny_set() {
    Generator gen(3);
    data::ImageDataset ds;
    ds.images = Tensor::empty({48, 1, 4, 4}, DType::U8);
    ds.labels = Tensor::empty({48}, DType::I64);
    for (int64_t i = 0; i < 48; ++i) {
        ds.labels.i64()[i] = i % 3;
        for (int64_t p = 0; p < 16; ++p)   // class k is bright in its own third of the pixels
            ds.images.data<uint8_t>()[i * 16 + p] = static_cast<uint8_t>(gen.randint(64) + (p % 3 == i % 3 ? 160 : 0));
    }
    ds.num_classes = 3, ds.classes = {"a", "b", "c"}, ds.name = "tiny";
    return ds;
}

// Raises SIGINT inside the step that makes global step `at` (1-based), as a Ctrl-C during that step would.
class InterruptedStep : public train::Step {
public:
    InterruptedStep(train::Step& inner, int64_t at, int64_t first) : inner_(inner), at_(at), count_(first) {}
    train::StepResult run(const data::Batch& b) override {
        if (++count_ == at_) std::raise(SIGINT);
        return inner_.run(b);
    }
    void update() override { inner_.update(); }
    void advance() override { inner_.advance(); }
    double lr() const override { return inner_.lr(); }

private:
    train::Step& inner_;
    int64_t at_, count_;
};

// One process's worth of a run: the model, optimizer and loader from the seed; `resume` loads OUT/last first.
struct TinyRun {
    Generator gen{11};
    std::shared_ptr<nn::Sequential> model = models::mlp(16, {8}, 3, gen);
    optim::SGD opt{model->named_parameters(), {.lr = 0.1, .momentum = 0.9}};
    data::DataLoader loader{tiny_set(), nullptr, {.batch_size = 4, .shuffle = true, .drop_last = true, .seed = 5,
                                                  .workers = 0}};
    train::DenseStep dense{*model, opt, nullptr, {}};
    train::FitPosition start;

    void resume(const std::string& out) {
        const train::Checkpoint ck = train::load_checkpoint(out);
        model->load_state_dict(ck.model);
        opt.load_state_dict(train::state_with_prefix(ck.train_state, "optimizer."));
        const std::string where = ck.folder + "/train_state.safetensors";
        start.epoch = train::state_i64(ck.train_state, "epoch", where, 0, kEpochs);
        start.global_step = train::state_i64(ck.train_state, "step", where, 0, kEpochs * kSteps);
        start.partial = train::read_epoch_progress(ck.train_state, where, kSteps);
    }

    // fit() into OUT (the log OUT/log.jsonl keeps the epochs the start position holds).
    train::FitResult fit(const std::string& out, train::Step& step, int64_t save_every,
                         const train::Interrupts* interrupts) {
        const int64_t done = start.epoch;
        train::RunLog log("razor test", out + "/log.jsonl", [done](const nlohmann::json& j) { return j["epoch"] <= done; });
        train::FitHooks hooks;
        hooks.line = [](const train::EpochSummary& r) { return fmt("epoch ", r.epoch, " loss ", r.loss); };
        hooks.record = [](const train::EpochSummary& r) {
            return nlohmann::json{{"epoch", r.epoch}, {"loss", r.loss}, {"train_acc", r.train_acc}, {"steps", r.steps},
                                  {"step", r.step}};
        };
        hooks.state = [&](const train::FitPosition& p) {
            train::Checkpoint ck;
            ck.model = model->state_dict();
            for (const auto& [k, v] : opt.state_dict()) ck.train_state["optimizer." + k] = v;
            ck.train_state["epoch"] = train::i64_scalar(p.epoch);
            ck.train_state["step"] = train::i64_scalar(p.global_step);
            return ck;
        };
        return train::fit(*model, loader, step, log,
                          {.command = "razor test", .epochs = kEpochs, .start = start, .batch = 4,
                           .eval = {.every = 0, .last = false}, .out = out, .save_every = save_every,
                           .interrupts = interrupts},
                          hooks);
    }
};

// The uninterrupted run's final weights and log.
struct Reference {
    std::map<std::string, Tensor> weights;
    std::vector<nlohmann::json> log;
};
Reference reference(const std::string& out) {
    TinyRun run;
    run.fit(out, run.dense, 0, nullptr);
    return {run.model->state_dict(), test::read_jsonl(out + "/log.jsonl")};
}

void check_same(const Reference& a, const std::string& out) {
    const train::Checkpoint ck = train::load_checkpoint(out);
    CHECK(test::same_tensors(ck.model, a.weights));
    const auto log = test::read_jsonl(out + "/log.jsonl");
    REQUIRE(log.size() == a.log.size());
    for (size_t i = 0; i < log.size(); ++i) CHECK_MESSAGE(log[i] == a.log[i], log[i].dump(), " vs ", a.log[i].dump());
}

}  // namespace

TEST_CASE("fit: SIGINT during a step checkpoints after it, throws Interrupted (exit 130) and resumes bit for bit") {
    test::TempDir tmp("fit_interrupt");
    const Reference a = reference(tmp / "a");
    const std::string b = tmp / "b";
    {
        TinyRun run;
        InterruptedStep step(run.dense, 17, 0);   // epoch 2, step 5 of 12
        const train::Interrupts interrupts;
        try {
            run.fit(b, step, 0, &interrupts);
            FAIL("fit() went on after SIGINT");
        } catch (const train::Interrupted& e) {
            CHECK(e.signal() == SIGINT);
            CHECK(e.exit_code() == 130);
            const std::string m = e.what();
            CHECK(m.find("razor test: interrupted by SIGINT at epoch 2 step 6/12") != std::string::npos);
            CHECK(m.find(b + "/last holds the run after epoch 1 and 5 steps of epoch 2;") != std::string::npos);
            CHECK(m.find("continue with: razor test --resume " + b) != std::string::npos);
        }
    }
    const train::Checkpoint ck = train::load_checkpoint(b);
    CHECK(ck.train_state.at("fit.steps").to_vector_i64()[0] == 5);
    CHECK(ck.train_state.at("step").to_vector_i64()[0] == 17);
    CHECK(test::read_jsonl(b + "/log.jsonl").size() == 1);   // epoch 1's line; epoch 2 is not over
    TinyRun resumed;
    resumed.resume(b);
    CHECK(resumed.start.partial.finite == 5);
    CHECK(resumed.start.partial.seen == 20);
    resumed.fit(b, resumed.dense, 0, nullptr);
    check_same(a, b);
}

TEST_CASE("fit: a --save-every checkpoint inside an epoch resumes bit for bit, and a resumed run can be interrupted again") {
    test::TempDir tmp("fit_save_every");
    const Reference a = reference(tmp / "a");
    const std::string b = tmp / "b";
    {
        TinyRun run;
        InterruptedStep step(run.dense, 100, 0);   // never
        run.fit(b, step, 5, nullptr);
    }
    check_same(a, b);   // the mid-epoch saves change nothing in the run
    // Resume from the checkpoint of global step 15 (epoch 2, step 3): run the same up to there, then again to the end.
    const std::string c = tmp / "c";
    {
        TinyRun run;
        InterruptedStep step(run.dense, 16, 0);   // SIGINT in step 16: the checkpoint of step 15 is not enough
        const train::Interrupts interrupts;
        CHECK_THROWS_AS(run.fit(c, step, 5, &interrupts), train::Interrupted);
        CHECK(train::load_checkpoint(c).train_state.at("fit.steps").to_vector_i64()[0] == 4);
    }
    {
        TinyRun run;
        run.resume(c);
        InterruptedStep step(run.dense, 30, run.start.global_step);   // interrupted again in epoch 3
        const train::Interrupts interrupts;
        CHECK_THROWS_AS(run.fit(c, step, 5, &interrupts), train::Interrupted);
        CHECK(train::load_checkpoint(c).train_state.at("fit.steps").to_vector_i64()[0] == 6);
    }
    TinyRun run;
    run.resume(c);
    run.fit(c, run.dense, 5, nullptr);
    check_same(a, c);
}

TEST_CASE("fit: a checkpoint's fit.* entries are checked before a resume uses them") {
    std::map<std::string, Tensor> state;
    CHECK(train::read_epoch_progress(state, "x", 12).steps == 0);   // none: an epoch boundary (older checkpoints)
    train::EpochProgress p;
    p.steps = 5, p.finite = 4, p.skipped = 1, p.seen = 16, p.correct = 9, p.loss_sum = 3.5, p.seconds = 1;
    p.metric_sums["flops_ratio"] = 2;
    train::pack_epoch_progress(p, state);
    const train::EpochProgress q = train::read_epoch_progress(state, "x", 12);
    CHECK(q.steps == 5);
    CHECK(q.loss_sum == 3.5);
    CHECK(q.metric_sums.at("flops_ratio") == 2);
    CHECK_THROWS_WITH(train::read_epoch_progress(state, "x", 5), doctest::Contains("'fit.steps' must be in [0, 4]"));
    auto bad = state;
    bad["fit.finite"] = train::i64_scalar(5);
    CHECK_THROWS_WITH(train::read_epoch_progress(bad, "x", 12), doctest::Contains("'fit.finite' must be in [4, 4]"));
    bad = state;
    bad["fit.correct"] = train::i64_scalar(17);
    CHECK_THROWS_WITH(train::read_epoch_progress(bad, "x", 12), doctest::Contains("'fit.correct'"));
    bad = state;
    bad["fit.loss_sum"] = optim::pack_f64(std::nan(""));
    CHECK_THROWS_WITH(train::read_epoch_progress(bad, "x", 12), doctest::Contains("'fit.loss_sum' must be a finite"));
    bad = state;
    bad.erase("fit.seen");
    CHECK_THROWS_WITH(train::read_epoch_progress(bad, "x", 12), doctest::Contains("no entry 'fit.seen'"));
}

TEST_CASE("DataLoader::set_epoch(e, b) starts epoch e at batch b with the batches an uninterrupted epoch gives") {
    data::DataLoader full(tiny_set(), nullptr, {.batch_size = 4, .shuffle = true, .seed = 9, .workers = 1});
    data::DataLoader late(tiny_set(), nullptr, {.batch_size = 4, .shuffle = true, .seed = 9, .workers = 1});
    full.set_epoch(2);
    std::vector<data::Batch> all;
    for (data::Batch& b : full) all.push_back(b);
    late.set_epoch(2, 7);
    std::vector<data::Batch> rest;
    for (data::Batch& b : late) rest.push_back(b);
    REQUIRE(rest.size() == all.size() - 7);
    for (size_t i = 0; i < rest.size(); ++i) {
        CHECK(test::same_tensors({{"x", rest[i].images}, {"y", rest[i].labels}},
                                 {{"x", all[i + 7].images}, {"y", all[i + 7].labels}}));
    }
    CHECK(late.epoch() == 2);
    std::vector<data::Batch> next;   // the epoch after starts at batch 0 again
    for (data::Batch& b : late) next.push_back(b);
    CHECK(next.size() == all.size());
    CHECK_THROWS_WITH(late.set_epoch(0, 13), doctest::Contains("expected a start batch in [0, 12], got 13"));
}
