// tests/optim/test_optimizer.cpp -- the Optimizer base: parameter groups, options by name, state keyed by parameter
// name, checkpoints that resume bit-exactly (through a safetensors image), and the errors.
#include <memory>

#include "optim/adam.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;
using namespace razor::optim;

namespace {

// A fixed pseudo-random gradient for step k of parameter i (the same in every run).
Tensor grad_for(const Tensor& p, int64_t k, int64_t i) {
    Generator gen(static_cast<uint64_t>(1000 * k + i));
    return Tensor::randn(p.shape(), gen);
}

// Three parameters in two groups, freshly initialised (the same values every call).
struct Model {
    Tensor w = randn_leaf({4, 3}, 1), b = randn_leaf({3}, 2), head = randn_leaf({2, 3}, 3);
    NamedParameters body() const { return {{"layer.weight", w}, {"layer.bias", b}}; }
    NamedParameters top() const { return {{"head.weight", head}}; }
    std::vector<Tensor> all() const { return {w, b, head}; }
};

void train(Optimizer& opt, LRScheduler* sched, const Model& m, int64_t from, int64_t to) {
    for (int64_t k = from; k < to; ++k) {
        const auto ps = m.all();
        for (size_t i = 0; i < ps.size(); ++i)
            if (!(i == 2 && k % 3 == 1)) ps[i].set_grad(grad_for(ps[i], k, static_cast<int64_t>(i)));
            else ps[i].zero_grad();   // the head sometimes has no gradient: its step count lags
        opt.step();
        if (sched) sched->step();
    }
}

std::vector<float> values(const Model& m) {
    std::vector<float> out;
    for (const Tensor& p : m.all())
        for (float v : p.to_vector()) out.push_back(v);
    return out;
}

}  // namespace

TEST_CASE("optimizer: each group steps with its own options; lr per group") {
    Tensor p = Tensor::from_vector({1}, {1.f}).requires_grad_(), q = Tensor::from_vector({1}, {1.f}).requires_grad_();
    SGD opt({{{{"p", p}}, {.lr = 0.1}}, {{{"q", q}}, {.lr = 0.5, .weight_decay = 1}}});   // the short form
    REQUIRE(opt.num_groups() == 2);
    p.set_grad(Tensor::ones({1}));
    q.set_grad(Tensor::ones({1}));
    opt.step();
    CHECK(p.item() == doctest::Approx(0.9f));
    CHECK(q.item() == doctest::Approx(1.f - 0.5f * 2.f));   // d = g + wd * p = 2
    CHECK(opt.lrs() == std::vector<double>{0.1, 0.5});
    opt.set_lr(1, 0.25);
    CHECK(opt.lr(1) == 0.25);
    CHECK(opt.lr() == 0.1);
    opt.set_lr(0.3);   // every group
    CHECK(opt.lrs() == std::vector<double>{0.3, 0.3});
    CHECK(opt.option(1, "weight_decay") == 1.0);
    opt.options(1).momentum = 0.9;   // PyTorch-style mutable group options
    CHECK(opt.momentum(1) == 0.9);
    CHECK(opt.params().size() == 2);

    Tensor r = Tensor::zeros({2}).requires_grad_();
    opt.add_param_group({{{"r", r}}, {.lr = 1.0}});
    CHECK(opt.num_groups() == 3);
    r.set_grad(Tensor::ones({2}));
    opt.step();
    CHECK(r.to_vector() == std::vector<float>{-1.f, -1.f});
}

TEST_CASE("optimizer: state is keyed by parameter name and slot, and group options travel with it") {
    Model m;
    Adam opt(std::vector<ParamGroup<AdamOptions>>{{m.body(), {.lr = 0.01, .amsgrad = true}}, {m.top(), {.lr = 0.1}}});
    train(opt, nullptr, m, 0, 2);
    const auto state = opt.state_dict();
    for (const char* key : {"layer.weight.step", "layer.weight.exp_avg", "layer.weight.exp_avg_sq",
                            "layer.weight.max_exp_avg_sq", "layer.bias.step", "head.weight.exp_avg",
                            "param_groups.0.lr", "param_groups.0.beta1", "param_groups.0.amsgrad",
                            "param_groups.1.lr", "param_groups.1.eps"})
        CHECK_MESSAGE(state.count(key) == 1, key);
    CHECK(state.count("head.weight.max_exp_avg_sq") == 0);   // amsgrad is off in that group
    CHECK(state.at("layer.weight.step").dtype() == DType::I64);
    CHECK(state.at("layer.weight.step").i64()[0] == 2);
    CHECK(state.at("head.weight.step").i64()[0] == 1);      // skipped step 1
    CHECK(unpack_f64(state.at("param_groups.1.lr"), "lr") == 0.1);
    CHECK(unpack_f64(state.at("param_groups.0.amsgrad"), "amsgrad") == 1.0);
}

TEST_CASE("optimizer: state buffers of trained parameters are allocated with the optimizer, shown from first use") {
    // Allocated ahead so they do not pin memory the first backward freed (optimizer.h, reserved_slots); the first
    // step still sees them as new (SGD's first momentum buffer is the gradient, not (1 - dampening) x it).
    Tensor w = randn_leaf({64, 1024}, 1), frozen = randn_leaf({64, 1024}, 2);   // 256 KiB each
    frozen.requires_grad_(false);
    const int64_t before = memory_stats().live_bytes;
    SGD opt({{"w", w}, {"frozen", frozen}}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    CHECK(memory_stats().live_bytes - before == 64 * 1024 * 4);   // w's buffer; none for the frozen parameter
    CHECK(opt.state_dict().count("w.momentum_buffer") == 0);        // not shown before first use, as PyTorch
    const Tensor g = Tensor::full({64, 1024}, 2.f);
    w.set_grad(g);
    const int64_t with_grad = memory_stats().live_bytes;
    opt.step();
    CHECK(memory_stats().live_bytes == with_grad);   // the step took the reserved buffer, allocated nothing
    const auto state = opt.state_dict();
    REQUIRE(state.count("w.momentum_buffer") == 1);
    CHECK(state.at("w.momentum_buffer").to_vector() == g.to_vector());   // first step: buf = grad
    CHECK(state.count("frozen.momentum_buffer") == 0);

    Tensor v = randn_leaf({300}, 3);
    const int64_t before_adam = memory_stats().live_bytes;
    Adam adam({{"v", v}}, {.amsgrad = true});
    CHECK(memory_stats().live_bytes - before_adam == 3 * 300 * 4);   // exp_avg, exp_avg_sq, max_exp_avg_sq
    CHECK(adam.state_dict().count("v.exp_avg") == 0);
}

TEST_CASE("optimizer: a checkpoint resumes bit-exactly (weights + optimizer + scheduler through safetensors)") {
    auto check_resume = [](auto make_opt, const char* what) {
        CAPTURE(what);
        Model ref, half, resumed;
        auto o_ref = make_opt(ref);
        auto o_half = make_opt(half);
        OneCycleLR s_ref(*o_ref, {.max_lr = {0.05, 0.02}, .total_steps = 12});
        OneCycleLR s_half(*o_half, {.max_lr = {0.05, 0.02}, .total_steps = 12});
        train(*o_ref, &s_ref, ref, 0, 12);
        train(*o_half, &s_half, half, 0, 5);

        // The checkpoint: weights, optimizer and scheduler state in one safetensors image.
        std::map<std::string, Tensor> ckpt;
        for (auto& [n, p] : o_half->params()) ckpt["model." + n] = p.detach();
        for (auto& [k, t] : o_half->state_dict()) ckpt["optim." + k] = t;
        for (auto& [k, t] : s_half.state_dict()) ckpt["sched." + k] = t;
        const auto loaded = parse_safetensors(serialize_safetensors(ckpt), "checkpoint").tensors;

        auto o_res = make_opt(resumed);
        OneCycleLR s_res(*o_res, {.max_lr = {0.05, 0.02}, .total_steps = 12});
        std::map<std::string, Tensor> optim_state, sched_state;
        for (auto& [k, t] : loaded) {
            if (k.rfind("model.", 0) == 0) {
                NoGradGuard no_grad;
                for (auto& [n, p] : o_res->params())
                    if (n == k.substr(6)) p.copy_(t);
            } else if (k.rfind("optim.", 0) == 0) {
                optim_state[k.substr(6)] = t;
            } else {
                sched_state[k.substr(6)] = t;
            }
        }
        o_res->load_state_dict(optim_state);
        s_res.load_state_dict(sched_state);
        CHECK(o_res->lrs() == o_half->lrs());
        train(*o_res, &s_res, resumed, 5, 12);
        CHECK(values(resumed) == values(ref));   // bit for bit
        CHECK(o_res->lrs() == o_ref->lrs());
    };
    check_resume([](const Model& m) {
        return std::make_unique<SGD>(std::vector<ParamGroup<SGDOptions>>{
            {m.body(), {.lr = 0.1, .momentum = 0.9, .nesterov = true}}, {m.top(), {.lr = 0.1, .momentum = 0.5}}});
    }, "SGD nesterov");
    check_resume([](const Model& m) {
        return std::make_unique<Adam>(std::vector<ParamGroup<AdamOptions>>{{m.body(), {.amsgrad = true}},
                                                                          {m.top(), {.weight_decay = 0.1}}});
    }, "Adam");
    check_resume([](const Model& m) {
        return std::make_unique<AdamW>(std::vector<ParamGroup<AdamWOptions>>{{m.body(), {}}, {m.top(), {.eps = 1e-6}}});
    }, "AdamW");
}

TEST_CASE("optimizer: AdamW with weight_decay 0 is Adam; AdamW's default weight_decay is PyTorch's 1e-2") {
    Model a, b;
    Adam adam(a.body(), {.lr = 0.01});
    AdamW adamw(b.body(), {.lr = 0.01, .weight_decay = 0});
    train(adam, nullptr, a, 0, 4);
    train(adamw, nullptr, b, 0, 4);
    CHECK(values(a) == values(b));
    CHECK(AdamW(b.body()).options().weight_decay == 0.01);
    CHECK(Adam(b.body()).options().weight_decay == 0.0);
}

TEST_CASE("optimizer: load_state_dict rejects what does not fit, and then changes nothing") {
    Model m;
    Adam opt(std::vector<ParamGroup<AdamOptions>>{{m.body(), {.lr = 0.01}}, {m.top(), {.lr = 0.1}}});
    train(opt, nullptr, m, 0, 1);
    const auto before = opt.state_dict();
    auto with = [&](const std::string& key, Tensor t) {
        auto s = before;
        s[key] = t;
        return s;
    };
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("fc.weight.exp_avg", Tensor::zeros({4, 3}))),
                         doctest::Contains("names no parameter"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("layer.weight.momentum_buffer", Tensor::zeros({4, 3}))),
                         doctest::Contains("slot 'momentum_buffer', which Adam does not keep"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("layer.weight.exp_avg", Tensor::zeros({3, 4}))),
                         doctest::Contains("is f32 (3, 4) but parameter 'layer.weight' is f32 (4, 3)"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("layer.weight.step", Tensor::zeros({}))),
                         doctest::Contains("must be one i64"), Error);
    // step() adds 1 and raises the betas to the count: INT64_MAX would overflow, a negative count gives NaN updates
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("layer.weight.step", Tensor::from_vector_i64({}, {INT64_MAX}))),
                         doctest::Contains("must be in [0, 2^53], got 9223372036854775807"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("layer.weight.step", Tensor::from_vector_i64({}, {-3}))),
                         doctest::Contains("got -3; hint"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("param_groups.2.lr", pack_f64(1))),
                         doctest::Contains("names group 2 but this optimizer has 2 groups"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("param_groups.0.momentum", pack_f64(1))),
                         doctest::Contains("is not an option of Adam"), Error);
    CHECK_THROWS_WITH_AS(opt.load_state_dict(with("param_groups.0.lr", Tensor::zeros({}))),
                         doctest::Contains("pack_f64"), Error);
    const auto after = opt.state_dict();
    REQUIRE(after.size() == before.size());
    for (const auto& [k, t] : before) {
        CAPTURE(k);
        CHECK(after.at(k).same_storage(t) == (k.rfind("param_groups.", 0) != 0));   // the very same state tensors
        if (t.dtype() == DType::I64) CHECK(after.at(k).i64()[0] == t.i64()[0]);
    }

    // A state with a step count but without its moments is refused at the next step, naming what is missing.
    auto broken = before;
    broken.erase("layer.bias.exp_avg_sq");
    opt.load_state_dict(broken);
    m.b.set_grad(Tensor::ones({3}));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("'layer.bias' has a step count but no 'exp_avg_sq'"), Error);
}

TEST_CASE("optimizer: bad parameters and options name the optimizer and the value") {
    Model m;
    CHECK_THROWS_WITH_AS(SGD({{"w", m.w}, {"w", m.b}}, {}), doctest::Contains("SGD: parameter 'w' appears twice"),
                         Error);
    CHECK_THROWS_WITH_AS(SGD(std::vector<ParamGroup<SGDOptions>>{{m.body(), {}}, {m.body(), {}}}),
                         doctest::Contains("appears twice"), Error);
    CHECK_THROWS_WITH_AS(SGD({{"w", m.w}, {"alias", m.w}}, {}), doctest::Contains("already given under another name"),
                         Error);
    CHECK_THROWS_WITH_AS(SGD({{"", m.w}}, {}), doctest::Contains("empty name"), Error);
    CHECK_THROWS_WITH_AS(SGD({{"labels", Tensor::zeros({2}, DType::I64)}}, {}), doctest::Contains("f32"), Error);
    CHECK_THROWS_WITH_AS(SGD(std::vector<ParamGroup<SGDOptions>>{}), doctest::Contains("no parameter groups"), Error);
    CHECK_THROWS_WITH_AS(Adam(m.body(), {.betas = {0.9, 1.0}}), doctest::Contains("Adam: betas[1] must be in [0, 1)"),
                         Error);
    CHECK_THROWS_WITH_AS(AdamW(m.body(), {.lr = -1}), doctest::Contains("AdamW: lr, eps and weight_decay must be >= 0"),
                         Error);
    SGD opt(m.body(), {.lr = 0.1});
    CHECK_THROWS_WITH_AS(opt.lr(3), doctest::Contains("SGD: parameter group 3 does not exist (1 groups)"), Error);
    CHECK_THROWS_WITH_AS(opt.set_option(0, "beta1", 0.9), doctest::Contains("SGD: no option 'beta1'; hint: the options "
                                                                            "are lr, momentum"), Error);
    m.w.set_grad(Tensor::ones({3, 4}));
    CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("the gradient of 'layer.weight' is f32 (3, 4) but the parameter "
                                                       "is f32 (4, 3)"), Error);
}
