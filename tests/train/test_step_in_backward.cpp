// tests/train/test_step_in_backward.cpp -- the optimizer step fused into backward (optim/step_in_backward.h and
// DenseStepOptions::step_in_backward): the same parameters and optimizer state as backward then step(), bit for bit,
// for SGD and AdamW on a real model; no gradient left afterwards; a non-finite gradient named and not applied; a
// lower tensor peak; the dense step's refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/core.h"
#include "models/registry.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim/step_in_backward.h"
#include "train/steps.h"

using namespace razor;

namespace {

struct Batch {
    Tensor x, y;
};

Batch make_batch(Generator& gen, int64_t n) {
    Batch b{Tensor::randn({n, 3, 16, 16}, gen), Tensor::zeros({n}, DType::I64)};
    for (int64_t i = 0; i < n; ++i) b.y.i64()[i] = static_cast<int64_t>(gen.randint(10));
    return b;
}

// Three steps of resnet20 (16 px, batch 4) under `make_opt`, with the step in backward or after it; returns the
// model's and the optimizer's state dicts.
template <class MakeOpt>
std::pair<std::map<std::string, Tensor>, std::map<std::string, Tensor>> three_steps(bool fused, MakeOpt make_opt) {
    Generator gen(3);
    auto model = models::make_model("resnet20", 10, gen);
    std::unique_ptr<optim::Optimizer> opt = make_opt(model->named_parameters());
    Generator data(9);
    for (int s = 0; s < 3; ++s) {
        const Batch b = make_batch(data, 4);
        opt->zero_grad();
        const Tensor loss = cross_entropy((*model)(b.x), b.y);
        if (fused) {
            optim::StepInBackward in_backward(*opt);
            loss.backward();
            CHECK(in_backward.nonfinite().empty());
            CHECK(in_backward.updated() == static_cast<int64_t>(opt->params().size()));
            for (const auto& [name, p] : model->named_parameters()) CHECK_MESSAGE(!p.grad().defined(), name);
        } else {
            loss.backward();
            opt->step();
        }
    }
    return {model->state_dict(), opt->state_dict()};
}

void check_same(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (const auto& [key, t] : a) {
        INFO(key);
        REQUIRE(b.count(key));
        const Tensor u = b.at(key);
        REQUIRE(t.shape() == u.shape());
        if (t.dtype() == DType::F32) CHECK(t.to_vector() == u.to_vector());
        else CHECK(t.contiguous().i64()[0] == u.contiguous().i64()[0]);
    }
}

}  // namespace

TEST_CASE("step in backward: resnet20, SGD (Nesterov, weight decay) and AdamW end bit-identical to step() after "
          "backward") {
    auto sgd = [](optim::NamedParameters p) -> std::unique_ptr<optim::Optimizer> {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.05, .momentum = 0.9,
                                                                            .weight_decay = 5e-4, .nesterov = true});
    };
    auto adamw = [](optim::NamedParameters p) -> std::unique_ptr<optim::Optimizer> {
        return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 1e-3});
    };
    for (const auto& make : {std::function<std::unique_ptr<optim::Optimizer>(optim::NamedParameters)>(sgd),
                             std::function<std::unique_ptr<optim::Optimizer>(optim::NamedParameters)>(adamw)}) {
        const auto plain = three_steps(false, make);
        const auto fused = three_steps(true, make);
        check_same(plain.first, fused.first);     // weights and BN statistics
        check_same(plain.second, fused.second);   // momentum / moments / step counts, group options
    }
}

// Logits fc(x) + sqrt(0 * p): finite, but p's gradient is 0 * (1 / (2 sqrt(0))) = 0 * inf = NaN. The sqrt branch
// is recorded after fc, so backward runs it first: p is the first parameter whose gradient is complete.
struct NanGradNet : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    Tensor p;
    explicit NanGradNet(Generator& gen) {
        fc = register_module("fc", std::make_shared<nn::Linear>(4, 3, true, gen));
        p = register_parameter("p", Tensor::ones({3}));
    }
    Tensor forward(const Tensor& x) override {
        const Tensor logits = (*fc)(x);
        const Tensor nan_gradient = sqrt(mul(p, 0.f));
        return add(logits, nan_gradient);
    }
};

TEST_CASE("step in backward: a non-finite gradient is named, that parameter is not updated, nor any after it") {
    Generator gen(1);
    NanGradNet net(gen);
    optim::SGD opt(net.named_parameters(), {.lr = 0.1});
    const std::vector<float> w_before = net.fc->weight.to_vector(), p_before = net.p.to_vector();
    const Tensor x = Tensor::randn({2, 4}, gen), y = Tensor::from_vector_i64({2}, {0, 2});
    {
        optim::StepInBackward fused(opt);
        cross_entropy(net(x), y).backward();
        CHECK(fused.nonfinite() == "p");
        CHECK(fused.updated() == 0);
    }
    CHECK(net.p.to_vector() == p_before);
    CHECK(net.fc->weight.to_vector() == w_before);   // after p in the walk: left alone
    for (const auto& [name, t] : net.named_parameters()) CHECK_MESSAGE(!t.grad().defined(), name);
    // The hooks went with the object: a plain backward leaves gradients in place.
    cross_entropy(net(x), y).backward();
    CHECK(net.fc->weight.grad().defined());

    // Through the dense step: the fault names the parameter and says the step cannot be undone.
    net.zero_grad();
    train::DenseStep step(net, opt, nullptr, {.step_in_backward = true});
    data::Batch b;
    b.images = x, b.labels = y;
    const train::StepResult r = step.run(b);
    CHECK(std::isfinite(r.loss));
    CHECK(r.fault.find("the gradient of 'p' became non-finite") != std::string::npos);
    CHECK(r.fault.find("rerun without --step-in-backward") != std::string::npos);
}

TEST_CASE("step in backward: the tensor peak drops by about the gradients a plain step holds together") {
    // Eight 512x512 Linears (1 MiB of weights each), batch 4: the activations are tiny, the gradients are 8 MiB.
    Generator gen(2);
    std::vector<std::shared_ptr<nn::Linear>> layers;
    optim::NamedParameters params;
    for (int i = 0; i < 8; ++i) {
        layers.push_back(std::make_shared<nn::Linear>(512, 512, false, gen));
        params.emplace_back(fmt("l", i, ".weight"), layers.back()->weight);
    }
    optim::SGD opt(params, {.lr = 0.01, .momentum = 0.9});
    const Tensor x = Tensor::randn({4, 512}, gen);
    auto peak_of = [&](bool fused) {
        opt.zero_grad();
        reset_peak_memory();
        const int64_t base = memory_stats().live_bytes;
        Tensor h = x;
        for (auto& l : layers) h = (*l)(h);
        const Tensor loss = sum(h);
        if (fused) {
            optim::StepInBackward in_backward(opt);
            loss.backward();
        } else {
            loss.backward();
            opt.step();
        }
        return memory_stats().peak_bytes - base;
    };
    peak_of(false);   // the first step creates the momentum buffers' state entries (reserved already)
    const int64_t plain = peak_of(false), fused = peak_of(true);
    const int64_t grads = 8 * 512 * 512 * 4;
    INFO("plain ", plain, " B, fused ", fused, " B");
    CHECK(plain >= grads);
    CHECK(fused <= plain - grads * 3 / 4);   // at most two layers' gradients alive at once
}

TEST_CASE("DenseStep with step_in_backward: the same parameters as the plain step; update() does nothing; no clip") {
    auto run = [](bool fused) {
        Generator gen(4);
        auto model = models::make_model("resnet20", 10, gen);
        optim::SGD opt(model->named_parameters(), {.lr = 0.05, .momentum = 0.9, .nesterov = true});
        train::DenseStep step(*model, opt, nullptr, {.label_smoothing = 0.1f, .step_in_backward = fused});
        CHECK(step.can_skip() == !fused);
        Generator data(5);
        for (int s = 0; s < 2; ++s) {
            const Batch b = make_batch(data, 4);
            data::Batch batch;
            batch.images = b.x, batch.labels = b.y;
            const train::StepResult r = step.run(batch);
            CHECK(r.fault.empty());
            step.update();
        }
        return model->state_dict();
    };
    check_same(run(false), run(true));
    Generator gen(6);
    auto model = models::make_model("resnet20", 10, gen);
    optim::SGD opt(model->named_parameters(), {.lr = 0.05});
    CHECK_THROWS_WITH_AS(train::DenseStep(*model, opt, nullptr, {.clip = 1, .step_in_backward = true}),
                         doctest::Contains("cannot clip"), Error);
}
